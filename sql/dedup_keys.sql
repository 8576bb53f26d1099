-- The same scenario, every partition past one hash left out of the shared
-- cache (queen_streams.dedup_partition_entries = 1): its probes go through
-- queen.log_txn_keys, and each verdict must be the cache's.
CREATE EXTENSION queen_streams;
\set cap 1
\i test/include/dedup_scenario.sql

-- Keys were written for the partitions probed by key, up to their mark.
SELECT count(*) > 0 AS has_keys, count(DISTINCT partition_id) > 1 AS several_partitions
  FROM queen.log_txn_keys;
SELECT bool_and(m.indexed <= p.last_offset) AS marks_within_the_log
  FROM queen.log_txn_marks m JOIN queen.log_partitions p ON p.id = m.partition_id;
-- Every hash row up to a partition's mark has all its keys.
SELECT count(*) AS partitions_missing_keys FROM queen.log_txn_marks m
 WHERE (SELECT count(*) FROM queen.log_txn_keys k WHERE k.partition_id = m.partition_id AND k.msg_offset <= m.indexed)
    <> (SELECT coalesce(sum(t.end_offset - t.base_offset + 1), 0) FROM queen.log_txns t
         WHERE t.partition_id = m.partition_id AND t.base_offset <= m.indexed);
-- Each key is its hash row's hash, at its offset.
SELECT count(*) AS keys_not_in_their_row
  FROM queen.log_txn_keys k
 WHERE NOT EXISTS (SELECT 1 FROM queen.log_txns t
                    WHERE t.partition_id = k.partition_id
                      AND k.msg_offset BETWEEN t.base_offset AND t.end_offset
                      AND substr(t.hashes, (k.msg_offset - t.base_offset)::int * 16 + 1, 16)
                          = decode(replace(k.hash::text, '-', ''), 'hex'));

-- A duplicate within one keyed push of 5,000 ids, then the whole retry.
SELECT count(*) FILTER (WHERE pg_temp.push('dd_big', 'b' || i) = 'queued') AS warm_up
  FROM generate_series(1, 3) i;
SELECT (SELECT count(*) FROM jsonb_array_elements(queen.push(jsonb_build_object('items',
          (SELECT jsonb_agg(jsonb_build_object('queue', 'dd_big', 'transactionId', 'b' || i, 'payload', i))
             FROM generate_series(1, 5000) i)))) e WHERE e->>'status' = s) AS n, s
  FROM unnest(ARRAY['queued', 'duplicate']) s;
SELECT (SELECT count(*) FROM jsonb_array_elements(queen.push(jsonb_build_object('items',
          (SELECT jsonb_agg(jsonb_build_object('queue', 'dd_big', 'transactionId', 'b' || i, 'payload', i))
             FROM generate_series(1, 5000) i)))) e WHERE e->>'status' = 'duplicate') AS retry_duplicates;

-- Past the key budget (queen_streams.dedup_key_budget, 6,500 hashes here):
-- 8,000 hashes stored with dedup off, in 80 rows, are keyed over two
-- probes, each answering right.
SET queen_streams.dedup_key_budget = 6500;
SELECT jsonb_array_length(queen.push('{"items":[{"queue":"dd_budget","payload":0}]}')) AS created;
UPDATE queen.queues SET dedup_window_seconds = 0 WHERE name = 'dd_budget';
SELECT count(*) AS filled FROM generate_series(1, 80) k,
  LATERAL jsonb_array_elements(queen.push(jsonb_build_object('items',
    (SELECT jsonb_agg(jsonb_build_object('queue', 'dd_budget', 'transactionId', format('g%s-%s', k, i), 'payload', i))
       FROM generate_series(1, 100) i))));
UPDATE queen.queues SET dedup_window_seconds = 3600 WHERE name = 'dd_budget';
CREATE FUNCTION pg_temp.budget_push(VARIADIC ids text[]) RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(e->>'status', ',' ORDER BY (e->>'index')::int)
	  FROM jsonb_array_elements(queen.push(jsonb_build_object('items',
	         (SELECT jsonb_agg(jsonb_build_object('queue', 'dd_budget', 'transactionId', t, 'payload', 0)) FROM unnest(ids) t)))) e
$$;
CREATE FUNCTION pg_temp.budget_state() RETURNS TABLE (mark bigint, last_offset bigint, keys bigint) LANGUAGE sql AS $$
	SELECT (SELECT indexed FROM queen.log_txn_marks WHERE partition_id = p.id), p.last_offset,
	       (SELECT count(*) FROM queen.log_txn_keys WHERE partition_id = p.id)
	  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'dd_budget'
$$;
SELECT pg_temp.budget_push('g1-1', 'g80-100', 'fresh-1') AS first_probe;
SELECT mark, last_offset, keys, mark BETWEEN 6500 AND 6599 AS keyed_one_budget FROM pg_temp.budget_state();
SELECT pg_temp.budget_push('g2-2', 'g79-5', 'fresh-1', 'fresh-2') AS second_probe;
SELECT mark, last_offset, keys, keys = mark + 1 AS every_offset_keyed FROM pg_temp.budget_state();
SELECT pg_temp.budget_push('g80-99', 'fresh-2', 'fresh-3') AS third_probe;
RESET queen_streams.dedup_key_budget;

-- A partition keyed since the last ANALYZE looks rare to the planner: its
-- probe still descends the index once per incoming hash and never reads
-- all of the partition's keys (index entries returned in this
-- transaction: the one duplicate's key, not the 3,000). Autovacuum stays
-- off meanwhile, so the statistics stay the ones ANALYZE took here.
ALTER TABLE queen.log_txn_keys SET (autovacuum_enabled = off);
ANALYZE queen.log_txn_keys;
SELECT count(*) AS filled FROM generate_series(1, 31) k,
  LATERAL jsonb_array_elements(queen.push(jsonb_build_object('items',
    (SELECT jsonb_agg(jsonb_build_object('queue', 'dd_rare', 'transactionId', format('r%s-%s', k, i), 'payload', i))
       FROM generate_series(1, 100) i))));
SELECT count(*) >= 3000 AS keyed FROM queen.log_txn_keys k
  JOIN queen.log_partitions p ON p.id = k.partition_id JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = 'dd_rare';
BEGIN;	-- no statistics flush inside: the difference is the pushes'
SELECT pg_stat_get_xact_tuples_returned('queen.log_txn_keys_hash'::regclass) AS entries_before \gset
SELECT pg_temp.push('dd_rare', 'r7-7') AS old, pg_temp.push('dd_rare', 'r-fresh') AS fresh;
SELECT pg_stat_get_xact_tuples_returned('queen.log_txn_keys_hash'::regclass) - :entries_before
       AS key_entries_read;
COMMIT;
ALTER TABLE queen.log_txn_keys RESET (autovacuum_enabled);

-- At REPEATABLE READ a partition left out of the cache is probed by reading
-- its window (keys written from an old snapshot could miss rows): same
-- verdicts, no key or mark written.
SELECT pg_temp.push('dd_rr', 'r1') AS r1, pg_temp.push('dd_rr', 'r2') AS r2, pg_temp.push('dd_rr', 'r3') AS r3;
CREATE TEMP TABLE rr_before AS SELECT (SELECT count(*) FROM queen.log_txn_keys) AS keys,
       (SELECT string_agg(indexed::text, ',' ORDER BY partition_id) FROM queen.log_txn_marks) AS marks;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.push('dd_rr', 'r3') AS r3_again, pg_temp.push('dd_rr', 'r1') AS r1_again,
       pg_temp.push('dd_rr', 'r4') AS r4;
SELECT (SELECT count(*) FROM queen.log_txn_keys) = keys AS no_keys_written,
       (SELECT string_agg(indexed::text, ',' ORDER BY partition_id) FROM queen.log_txn_marks) = marks AS no_mark_moved
  FROM rr_before;
COMMIT;
SELECT pg_temp.push('dd_rr', 'r4') AS r4_by_key;

-- Retention purges the keys of the hash rows it purges, and only those:
-- below the purge, an id is fresh again; above it, still a duplicate.
SELECT count(*) > 0 AS dd_cap_has_keys FROM queen.log_txn_keys k
  JOIN queen.log_partitions p ON p.id = k.partition_id JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = 'dd_cap';
UPDATE queen.log_partitions p SET log_start = 1500
  FROM queen.queues q WHERE q.id = p.queue_id AND q.name = 'dd_cap';
SELECT queen.retention_sweep() IS NOT NULL AS swept;
SELECT count(*) > 0 AS keys_left, min(k.msg_offset) >= 1500 AS only_past_the_purge
  FROM queen.log_txn_keys k
  JOIN queen.log_partitions p ON p.id = k.partition_id JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = 'dd_cap';
SELECT pg_temp.push('dd_cap', 't10') AS purged_id, pg_temp.push('dd_cap', 't2500') AS kept_id;

-- Deleting a queue drops its keys and mark.
SELECT (SELECT count(*) FROM queen.log_txn_keys WHERE partition_id = p.id) AS dd_big_keys,
       (SELECT indexed FROM queen.log_txn_marks WHERE partition_id = p.id) AS dd_big_mark
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'dd_big';
SELECT queen.delete_queue('dd_big') IS NOT NULL AS deleted;
SELECT count(*) AS orphan_keys FROM queen.log_txn_keys k
 WHERE NOT EXISTS (SELECT 1 FROM queen.log_partitions p WHERE p.id = k.partition_id);
SELECT count(*) AS orphan_marks FROM queen.log_txn_marks m
 WHERE NOT EXISTS (SELECT 1 FROM queen.log_partitions p WHERE p.id = m.partition_id);

-- Deleting the tenant deletes its keys and marks too.
SELECT (SELECT count(*) FROM queen.log_txn_keys) > 0 AS keys_before,
       (SELECT count(*) FROM queen.log_txn_marks) > 0 AS marks_before;
SELECT queen.tenant_delete('00000000-0000-0000-0000-000000000001') ? 'queen.log_txns' AS tenant_deleted;
SELECT (SELECT count(*) FROM queen.log_txn_keys) AS keys_after,
       (SELECT count(*) FROM queen.log_txn_marks) AS marks_after;

DROP EXTENSION dblink;
DROP EXTENSION queen_streams CASCADE;
