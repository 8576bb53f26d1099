-- The dedup scenario of sql/dedup_cache.sql and sql/dedup_keys.sql: every
-- verdict must be the one reading the window gives, whichever way the
-- probe takes. psql variable `cap`: queen_streams.dedup_partition_entries.
SET queen_streams.dedup_partition_entries = :cap;

CREATE FUNCTION pg_temp.push(q text, txn text) RETURNS text LANGUAGE sql AS $$
	SELECT queen.push(jsonb_build_object('items', jsonb_build_array(
	         jsonb_build_object('queue', q, 'transactionId', txn, 'payload', txn))))->0->>'status'
$$;

-- This database, from another session.
CREATE FUNCTION pg_temp.self_conn() RETURNS text LANGUAGE sql AS $$
	SELECT format('dbname=%s port=%s host=%s user=%s', current_database(), current_setting('port'),
	              split_part(current_setting('unix_socket_directories'), ',', 1), current_user)
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
  FROM dblink(pg_temp.self_conn(),
              $$SELECT queen.push('{"items":[{"queue":"dd","transactionId":"d","payload":1}]}')$$) AS t(r jsonb);
SELECT pg_temp.push('dd', 'd') AS pushed_elsewhere;

-- A hash older than the window no longer counts, cached or not.
UPDATE queen.queues SET dedup_window_seconds = 1 WHERE name = 'dd';
SELECT pg_sleep(1.2);
SELECT pg_temp.push('dd', 'a') AS outside_the_window, pg_temp.push('dd', 'a') AS inside_again;

-- A partition that outgrows its share of the cache is probed by key, and
-- still answers right.
SET queen_streams.dedup_partition_entries = 1024;
SELECT count(*) FILTER (WHERE pg_temp.push('dd_cap', 't' || i) = 'queued') AS queued
  FROM generate_series(1, 3000) i;
SELECT count(*) FILTER (WHERE pg_temp.push('dd_cap', 't' || i) = 'duplicate') AS duplicates
  FROM generate_series(1, 3000, 7) i;
SET queen_streams.dedup_partition_entries = :cap;

-- Prepared transactions: rolled back, the push was never stored.
BEGIN;
SELECT pg_temp.push('dd2', 'p') AS prepared_push;
PREPARE TRANSACTION 'dd_p1';
ROLLBACK PREPARED 'dd_p1';
SELECT pg_temp.push('dd2', 'p') AS after_rollback_prepared, pg_temp.push('dd2', 'p') AS then_again;
-- Committed, it was.
BEGIN;
SELECT pg_temp.push('dd2', 'q') AS prepared_push;
PREPARE TRANSACTION 'dd_p2';
COMMIT PREPARED 'dd_p2';
SELECT pg_temp.push('dd2', 'q') AS after_commit_prepared;
-- Several pushes and a savepoint rolled back inside one prepared transaction.
BEGIN;
SELECT pg_temp.push('dd2', 'r1') AS r1;
SAVEPOINT s;
SELECT pg_temp.push('dd2', 'r2') AS r2;
ROLLBACK TO SAVEPOINT s;
SELECT pg_temp.push('dd2', 'r3') AS r3, pg_temp.push('dd2', 'r1') AS r1_again;
PREPARE TRANSACTION 'dd_p3';
COMMIT PREPARED 'dd_p3';
SELECT pg_temp.push('dd2', 'r1') AS r1, pg_temp.push('dd2', 'r2') AS r2, pg_temp.push('dd2', 'r3') AS r3;

-- Prepared and resolved from another connection.
SELECT * FROM dblink(pg_temp.self_conn(),
  $$BEGIN; SELECT queen.push('{"items":[{"queue":"dd2","transactionId":"x","payload":1}]}');
    PREPARE TRANSACTION 'dd_p4'$$) AS t(r text);
ROLLBACK PREPARED 'dd_p4';
SELECT pg_temp.push('dd2', 'x') AS after_foreign_rollback_prepared;
SELECT * FROM dblink(pg_temp.self_conn(),
  $$BEGIN; SELECT queen.push('{"items":[{"queue":"dd2","transactionId":"y","payload":1}]}');
    PREPARE TRANSACTION 'dd_p5'$$) AS t(r text);
COMMIT PREPARED 'dd_p5';
SELECT pg_temp.push('dd2', 'y') AS after_foreign_commit_prepared;

-- The window raised past what the cache covers: the older hash counts
-- again. 'w' is stored with dedup off; the first probe reads a 1 s window
-- (too young for 'w'); raised to an hour, 'w' is a duplicate of offset 1.
SELECT jsonb_array_length(queen.push('{"items":[{"queue":"dd3","payload":0}]}')) AS created;
UPDATE queen.queues SET dedup_window_seconds = 0 WHERE name = 'dd3';
SELECT pg_temp.push('dd3', 'w') AS stored_undeduped;
SELECT pg_sleep(1.2);
UPDATE queen.queues SET dedup_window_seconds = 1 WHERE name = 'dd3';
SELECT pg_temp.push('dd3', 'w2') AS probes_1s;
UPDATE queen.queues SET dedup_window_seconds = 3600 WHERE name = 'dd3';
SELECT pg_temp.push('dd3', 'w') AS raised, pg_temp.push('dd3', 'w2') AS raised_too;
-- A hash stored again after its window passed: raised, the first one is the original.
SELECT pg_temp.push('dd3', 'v') AS v;
UPDATE queen.queues SET dedup_window_seconds = 1 WHERE name = 'dd3';
SELECT pg_sleep(1.2);
SELECT pg_temp.push('dd3', 'v') AS v_outside_1s;
UPDATE queen.queues SET dedup_window_seconds = 3600 WHERE name = 'dd3';
-- (offset 3, not its second copy at 4)
SELECT queen.log_push_one_v1('dd3', 'Default', 1, queen.txn_hash('v'), -1,
         queen.segment_pack('[{"id":"00000000-0000-7000-8000-000000000001","transactionId":"v","payload":1}]'))
         ->'dups' AS original;
-- And lowered again.
SELECT pg_sleep(1.2);
UPDATE queen.queues SET dedup_window_seconds = 1 WHERE name = 'dd3';
SELECT pg_temp.push('dd3', 'w2') AS lowered;

-- Dedup off, then on again: what was stored meanwhile counts.
UPDATE queen.queues SET dedup_window_seconds = 0 WHERE name = 'dd';
SELECT pg_temp.push('dd', 'off1') AS off, pg_temp.push('dd', 'off1') AS off_again;
UPDATE queen.queues SET dedup_window_seconds = 3600 WHERE name = 'dd';
SELECT pg_temp.push('dd', 'off1') AS on_again;


-- Stored again after its window passed, in a push that rolled back: raised,
-- the original is back inside the window.
SELECT pg_temp.push('dd5', 'u') AS u;
UPDATE queen.queues SET dedup_window_seconds = 1 WHERE name = 'dd5';
SELECT pg_sleep(1.2);
BEGIN;
SELECT pg_temp.push('dd5', 'u') AS u_outside_1s_rolled_back;
ROLLBACK;
UPDATE queen.queues SET dedup_window_seconds = 3600 WHERE name = 'dd5';
SELECT pg_temp.push('dd5', 'u') AS u_raised;
