-- The dedup probe's per-backend cache must answer exactly like reading the
-- window: across rollbacks, subtransactions, other sessions' pushes,
-- retention and the cap.
CREATE EXTENSION queen_streams;

CREATE FUNCTION pg_temp.push(q text, txn text) RETURNS text LANGUAGE sql AS $$
	SELECT queen.push(jsonb_build_object('items', jsonb_build_array(
	         jsonb_build_object('queue', q, 'transactionId', txn, 'payload', txn))))->0->>'status'
$$;

-- First sight, then a repeat.
SELECT pg_temp.push('dd', 'a') AS first, pg_temp.push('dd', 'a') AS again;

-- A rolled-back push leaves no trace in the cache.
BEGIN;
SELECT pg_temp.push('dd', 'b') AS in_doomed_xact;
SELECT pg_temp.push('dd', 'b') AS repeated_in_it;
ROLLBACK;
SELECT pg_temp.push('dd', 'b') AS after_rollback;

-- Nor does one rolled back to a savepoint.
BEGIN;
SAVEPOINT s;
SELECT pg_temp.push('dd', 'c') AS in_savepoint;
ROLLBACK TO SAVEPOINT s;
SELECT pg_temp.push('dd', 'c') AS after_savepoint;
COMMIT;
SELECT pg_temp.push('dd', 'c') AS committed_once;

-- A push from another session is seen by this one's next probe.
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT r->0->>'status' AS other_session
  FROM dblink(format('dbname=%s port=%s host=%s user=%s', current_database(), current_setting('port'),
                     split_part(current_setting('unix_socket_directories'), ',', 1), current_user),
              $$SELECT queen.push('{"items":[{"queue":"dd","transactionId":"d","payload":1}]}')$$) AS t(r jsonb);
SELECT pg_temp.push('dd', 'd') AS pushed_elsewhere;

-- A hash older than the window no longer counts, cached or not.
UPDATE queen.queues SET dedup_window_seconds = 1 WHERE name = 'dd';
SELECT pg_sleep(1.2);
SELECT pg_temp.push('dd', 'a') AS outside_the_window, pg_temp.push('dd', 'a') AS inside_again;

-- With a tiny cap the cache starts over and still answers right.
SET queen_streams.dedup_cache_entries = 1024;
SELECT count(*) FILTER (WHERE pg_temp.push('dd_cap', 't' || i) = 'queued') AS queued
  FROM generate_series(1, 3000) i;
SELECT count(*) FILTER (WHERE pg_temp.push('dd_cap', 't' || i) = 'duplicate') AS duplicates
  FROM generate_series(1, 3000, 7) i;
RESET queen_streams.dedup_cache_entries;

DROP EXTENSION dblink;
DROP EXTENSION queen_streams CASCADE;
