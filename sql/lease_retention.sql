-- queen.renew_lease (never shortens, counts, tenant scoping) and
-- queen.retention_sweep (whole segments, log_start, hash purge, pop skips the gap).
CREATE EXTENSION queen_streams;

\i test/include/helpers.sql

CREATE FUNCTION pg_temp.push(q text, a int, b int, part text DEFAULT 'Default', tenant uuid DEFAULT NULL)
RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(r->>'status', ',')
	  FROM jsonb_array_elements(queen.push(jsonb_build_object('items',
	         (SELECT jsonb_agg(jsonb_build_object('queue', q, 'partition', part,
	                   'transactionId', 'm' || i, 'payload', i) ORDER BY i)
	            FROM generate_series(a, b) i)), tenant)) r
$$;
-- Seconds left on each lease of a worker, rounded up to ten (so a slow
-- machine does not change the output), or 'expired'.
CREATE FUNCTION pg_temp.left(lease text) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(CASE WHEN lease_expires_at < clock_timestamp() THEN 'expired'
	                                ELSE (ceil(extract(epoch FROM lease_expires_at - clock_timestamp()) / 10) * 10)::text
	                           END, ',' ORDER BY lease_expires_at), '')
	  FROM queen.log_consumers WHERE worker_id = lease
$$;
-- A renewal result without timestamps (they are checked against the table).
CREATE FUNCTION pg_temp.renewed(res jsonb) RETURNS text LANGUAGE sql AS $$
	SELECT format('success=%s renewed=%s expires_match=%s', res->>'success', res->>'renewed',
	  CASE WHEN res->>'expiresAt' IS NULL THEN 'null'
	       ELSE (res->>'expiresAt' = res->>'newExpiresAt' AND res->>'expiresAt' = res->>'lease_expires_at'
	             AND res->>'expiresAt' = (SELECT to_char(min(lease_expires_at) AT TIME ZONE 'UTC',
	                                                     'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
	                                        FROM queen.log_consumers WHERE worker_id = res->>'leaseId'))::text
	  END)
$$;
CREATE TEMP TABLE pops (name text PRIMARY KEY, r jsonb);

--------------------------------------------------------------------------
-- renew_lease
--------------------------------------------------------------------------
SELECT pg_temp.push('lq', 0, 3);
UPDATE queen.queues SET retry_delay = 0 WHERE name = 'lq';  -- nacks redeliver at once here
INSERT INTO pops SELECT 'a', queen.pop('lq', batch => 2, lease_seconds => 10);
SELECT pg_temp.txns(r), pg_temp.left(r->>'leaseId') FROM pops WHERE name = 'a';
SELECT array_agg(k ORDER BY k) AS result_keys
  FROM pops, jsonb_object_keys(queen.renew_lease(r->>'leaseId', 100)) k WHERE name = 'a';
SELECT pg_temp.left(r->>'leaseId') AS extended FROM pops WHERE name = 'a';
-- Never shortens: a shorter renewal leaves the deadline, and still counts.
SELECT pg_temp.renewed(queen.renew_lease(r->>'leaseId', 5)) FROM pops WHERE name = 'a';
SELECT pg_temp.left(r->>'leaseId') AS not_shortened FROM pops WHERE name = 'a';
SELECT pg_temp.renewed(queen.renew_lease(r->>'leaseId', 300)) FROM pops WHERE name = 'a';
SELECT pg_temp.left(r->>'leaseId') AS longer FROM pops WHERE name = 'a';
-- The default is 60 seconds.
SELECT pg_temp.push('lq', 0, 1, 'p2');
INSERT INTO pops SELECT 'b', queen.pop('lq', 'p2', batch => 1, lease_seconds => 1);
SELECT pg_temp.renewed(queen.renew_lease(r->>'leaseId')) FROM pops WHERE name = 'b';
SELECT pg_temp.left(r->>'leaseId') AS default_60 FROM pops WHERE name = 'b';
-- The renewed lease still acks.
SELECT a->0->>'success' AS acked, a->0->>'leaseReleased' AS released
  FROM pops, queen.ack(jsonb_build_object('transactionId', 'm0', 'partitionId', r->>'partitionId',
                                          'leaseId', r->>'leaseId')) a
 WHERE name = 'b';
-- One lease over several partitions (a wildcard pop): every one is renewed,
-- and expiresAt is the earliest deadline.
SELECT pg_temp.push('wq', 0, 1, 'x'), pg_temp.push('wq', 0, 1, 'y');
UPDATE queen.queues SET retry_delay = 0 WHERE name = 'wq';  -- nacks redeliver at once here
INSERT INTO pops SELECT 'w', queen.pop('wq', batch => 10, partitions => 2, lease_seconds => 30);
SELECT r->'partitionsClaimed' AS claimed, pg_temp.left(r->>'leaseId') FROM pops WHERE name = 'w';
UPDATE queen.log_consumers SET lease_expires_at = lease_expires_at + interval '1000 seconds'
 WHERE partition_id = (SELECT (r->>'partitionId')::uuid FROM pops WHERE name = 'w');
SELECT pg_temp.renewed(queen.renew_lease(r->>'leaseId', 60)) FROM pops WHERE name = 'w';
SELECT pg_temp.left(r->>'leaseId') AS both_renewed FROM pops WHERE name = 'w';
-- Expired, released, unknown: nothing to renew.
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second'
 WHERE worker_id = (SELECT r->>'leaseId' FROM pops WHERE name = 'a');
SELECT pg_temp.renewed(queen.renew_lease(r->>'leaseId', 60)) FROM pops WHERE name = 'a';
SELECT pg_temp.left(r->>'leaseId') AS still_expired FROM pops WHERE name = 'a';
SELECT pg_temp.renewed(queen.renew_lease(r->>'leaseId', 60)) FROM pops WHERE name = 'b';
SELECT queen.renew_lease('no-such-lease', 60);
-- Tenant scoping: only the tenant that owns the partition renews it.
SELECT pg_temp.push('tq', 0, 1, tenant => '77777777-7777-7777-7777-777777777777');
UPDATE queen.queues SET retry_delay = 0 WHERE name = 'tq';  -- nacks redeliver at once here
INSERT INTO pops SELECT 't', queen.pop('tq', batch => 1, lease_seconds => 10,
                                       tenant => '77777777-7777-7777-7777-777777777777');
SELECT pg_temp.txns(r) FROM pops WHERE name = 't';
SELECT pg_temp.renewed(queen.renew_lease(r->>'leaseId', 100)) AS default_tenant FROM pops WHERE name = 't';
SELECT pg_temp.renewed(queen.renew_lease(r->>'leaseId', 100, '88888888-8888-8888-8888-888888888888'))
       AS other_tenant FROM pops WHERE name = 't';
SELECT pg_temp.left(r->>'leaseId') AS unchanged FROM pops WHERE name = 't';
SELECT pg_temp.renewed(queen.renew_lease(r->>'leaseId', 100, '77777777-7777-7777-7777-777777777777'))
       AS owner FROM pops WHERE name = 't';
SELECT pg_temp.left(r->>'leaseId') AS renewed FROM pops WHERE name = 't';
-- Validation.
SELECT pg_temp.try($$SELECT queen.renew_lease(NULL)$$);
SELECT pg_temp.try($$SELECT queen.renew_lease('')$$);
SELECT pg_temp.try($$SELECT queen.renew_lease('x', 0)$$);
SELECT pg_temp.try($$SELECT queen.renew_lease('x', -30)$$);
SELECT (queen.renew_lease('x', NULL))->'renewed' AS null_seconds_is_default;

--------------------------------------------------------------------------
-- retention_sweep
--------------------------------------------------------------------------
-- Four segments of two messages; a consumer group that read the first one.
SELECT pg_temp.push('rq', 0, 1), pg_temp.push('rq', 2, 3), pg_temp.push('rq', 4, 5), pg_temp.push('rq', 6, 7);
UPDATE queen.queues SET retry_delay = 0 WHERE name = 'rq';  -- nacks redeliver at once here
SELECT pg_temp.txns(queen.pop('rq', consumer_group => 'slow', batch => 2, auto_ack => true));
-- Make the first three segments 4, 3 and 2 hours old (oldest first), the last fresh.
UPDATE queen.log_segments s
   SET created_at = now() - (4 - s.base_offset / 2) * interval '1 hour'
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE s.partition_id = p.id AND q.name = 'rq' AND s.base_offset < 6;
UPDATE queen.log_partitions p SET oldest_live_at = now() - interval '3 hours'
  FROM queen.queues q WHERE q.id = p.queue_id AND q.name = 'rq';
-- Retention off (the default): nothing happens, however old.
SELECT queen.retention_sweep();
-- Enabled, 150 minutes: only the segment older than that goes.
UPDATE queen.queues SET retention_enabled = true, retention_seconds = 9000 WHERE name = 'rq';
SELECT queen.retention_sweep();
SELECT p.log_start, p.last_offset,
       p.oldest_live_at = (SELECT min(created_at) FROM queen.log_segments s WHERE s.partition_id = p.id) AS oldest_live_ok,
       (SELECT string_agg(base_offset || '-' || end_offset, ',' ORDER BY base_offset)
          FROM queen.log_segments s WHERE s.partition_id = p.id) AS segments
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'rq';
-- Enabled, 30 minutes: every old segment goes, whole; the fresh one stays.
UPDATE queen.queues SET retention_seconds = 1800 WHERE name = 'rq';
SELECT queen.retention_sweep();
SELECT p.log_start, p.last_offset, p.txns_start,
       p.oldest_live_at = (SELECT min(created_at) FROM queen.log_segments s WHERE s.partition_id = p.id) AS oldest_live_ok,
       (SELECT string_agg(base_offset || '-' || end_offset, ',' ORDER BY base_offset)
          FROM queen.log_segments s WHERE s.partition_id = p.id) AS segments,
       (SELECT string_agg(base_offset || '-' || end_offset, ',' ORDER BY base_offset)
          FROM queen.log_txns t WHERE t.partition_id = p.id) AS hash_rows
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'rq';
-- A second sweep finds nothing more.
SELECT queen.retention_sweep();
-- Consumers behind log_start skip the gap; new groups start at log_start.
SELECT pg_temp.txns(queen.pop('rq', consumer_group => 'slow', auto_ack => true)) AS slow_group;
SELECT pg_temp.txns(queen.pop('rq', consumer_group => 'fresh', auto_ack => true)) AS new_group;
SELECT pg_temp.txns(queen.pop('rq', batch => 1)) AS queue_mode;
SELECT c.consumer_group, c.committed, c.batch_end
  FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'rq' ORDER BY 1;
-- Purged hashes no longer deduplicate; live ones still do.
SELECT pg_temp.push('rq', 0, 0) AS purged_txn, pg_temp.push('rq', 6, 6) AS live_txn;
-- Everything expired: the partition has no live segment, oldest_live_at is
-- cleared, and a later push sets it again.
UPDATE queen.log_segments s SET created_at = now() - interval '1 hour'
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE s.partition_id = p.id AND q.name = 'rq';
UPDATE queen.log_partitions p SET oldest_live_at = now() - interval '1 hour'
  FROM queen.queues q WHERE q.id = p.queue_id AND q.name = 'rq';
SELECT queen.retention_sweep();
SELECT p.log_start, p.last_offset, p.oldest_live_at IS NULL AS nothing_live,
       (SELECT count(*) FROM queen.log_segments s WHERE s.partition_id = p.id) AS segments
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'rq';
-- The leased queue-mode batch was removed under it: a wildcard pop has no
-- candidate, a pop of the partition finds nothing and seals the cursor.
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second' WHERE worker_id IS NOT NULL;
SELECT pg_temp.txns(queen.pop('rq')) AS nothing_left;
SELECT pg_temp.txns(queen.pop('rq', 'Default')) AS nothing_left;
SELECT c.consumer_group, c.committed
  FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'rq' ORDER BY 1;
SELECT pg_temp.push('rq', 100, 101);
SELECT p.oldest_live_at IS NOT NULL AS live_again
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'rq';
SELECT pg_temp.txns(queen.pop('rq', auto_ack => true)) AS after_refill;

-- Hash rows of live segments go once older than the dedup window (at least
-- 15 minutes) and below every consumer's cursor; with no consumer they stay.
SELECT pg_temp.push('hq', 0, 1), pg_temp.push('hq', 2, 3), pg_temp.push('nq', 0, 1);
UPDATE queen.queues SET retry_delay = 0 WHERE name = 'nq';  -- nacks redeliver at once here
UPDATE queen.log_txns SET created_at = now() - interval '2 hours';
UPDATE queen.queues SET dedup_window_seconds = 600;
UPDATE queen.log_partitions SET oldest_txn_at = now() - interval '2 hours';
SELECT pg_temp.txns(queen.pop('hq', consumer_group => 'g1', batch => 2, auto_ack => true));
SELECT pg_temp.txns(queen.pop('hq', consumer_group => 'g2', batch => 4, auto_ack => true));
SELECT queen.retention_sweep();
SELECT q.name, p.txns_start, p.oldest_txn_at IS NOT NULL AS has_txns,
       (SELECT string_agg(base_offset || '-' || end_offset, ',' ORDER BY base_offset)
          FROM queen.log_txns t WHERE t.partition_id = p.id) AS hash_rows,
       (SELECT count(*) FROM queen.log_segments s WHERE s.partition_id = p.id) AS segments
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name IN ('hq', 'nq') ORDER BY 1;
-- A younger window keeps them: the horizon is the largest of the dedup
-- window, the completed retention and 15 minutes.
SELECT pg_temp.push('hq', 4, 5);
UPDATE queen.queues SET retry_delay = 0 WHERE name = 'hq';  -- nacks redeliver at once here
UPDATE queen.queues SET dedup_window_seconds = 0, completed_retention_seconds = 0 WHERE name = 'hq';
UPDATE queen.log_txns t SET created_at = now() - interval '10 minutes'
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE t.partition_id = p.id AND q.name = 'hq' AND t.base_offset = 2;
SELECT pg_temp.txns(queen.pop('hq', consumer_group => 'g1', batch => 10, auto_ack => true));
SELECT pg_temp.txns(queen.pop('hq', consumer_group => 'g2', batch => 10, auto_ack => true));
SELECT queen.retention_sweep();
SELECT p.txns_start,
       (SELECT string_agg(base_offset || '-' || end_offset, ',' ORDER BY base_offset)
          FROM queen.log_txns t WHERE t.partition_id = p.id) AS hash_rows
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'hq';
-- Past 15 minutes the older one goes.
UPDATE queen.log_txns t SET created_at = now() - interval '16 minutes'
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE t.partition_id = p.id AND q.name = 'hq' AND t.base_offset = 2;
SELECT queen.retention_sweep();
SELECT p.txns_start,
       (SELECT string_agg(base_offset || '-' || end_offset, ',' ORDER BY base_offset)
          FROM queen.log_txns t WHERE t.partition_id = p.id) AS hash_rows
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'hq';

-- A group that meets the partition after its hashes were purged still
-- acks what it is given: below txns_start the ack reads the frames.
CREATE TEMP TABLE late AS SELECT queen.pop('hq', consumer_group => 'g3', batch => 3) AS r;
SELECT pg_temp.txns(r) FROM late;
SELECT a->>'transactionId' AS txn, a->>'success' AS success, a->>'error' AS error,
       a->>'leaseReleased' AS released
  FROM late, jsonb_array_elements(queen.ack(jsonb_build_object('consumerGroup', 'g3',
         'acknowledgments', jsonb_build_array(
           jsonb_build_object('transactionId', 'm0', 'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId'),
           jsonb_build_object('transactionId', 'nope', 'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId'))))) a;
SELECT a->>'transactionId' AS txn, a->>'success' AS success, a->>'error' AS error,
       a->>'leaseReleased' AS released
  FROM late, jsonb_array_elements(queen.ack(jsonb_build_object('transactionId', 'm1', 'status', 'failed',
         'consumerGroup', 'g3', 'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId'))) a;
SELECT c.committed, c.batch_end, c.batch_retry_count
  FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'hq' AND c.consumer_group = 'g3';
DELETE FROM late;
INSERT INTO late SELECT queen.pop('hq', consumer_group => 'g3', batch => 4);
SELECT pg_temp.txns(r) FROM late;
SELECT a->>'transactionId' AS txn, a->>'success' AS success, a->>'leaseReleased' AS released
  FROM late, jsonb_array_elements(queen.ack(jsonb_build_object('consumerGroup', 'g3',
         'acknowledgments', jsonb_build_array(
           jsonb_build_object('transactionId', 'm3', 'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId'),
           jsonb_build_object('transactionId', 'm4', 'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId'))))) a;
SELECT c.committed, c.batch_end
  FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'hq' AND c.consumer_group = 'g3';

DROP EXTENSION queen_streams CASCADE;
