-- Push and ack are linear in their input: a 200,000-item push (with
-- in-request duplicates among client transaction ids) and a 200,000-entry
-- batch ack finish (this file runs in seconds), and a huge push is
-- cancelled by statement_timeout, leaving nothing written.
CREATE EXTENSION queen_streams;

-- 200,000 items: 150,000 distinct client ids, then 50,000 repeats of them,
-- interleaved with items into a second partition that repeat nothing.
CREATE TEMP TABLE big_body AS
SELECT jsonb_build_object('items', jsonb_agg(
         CASE WHEN i % 4 = 0
              THEN jsonb_build_object('queue', 'big', 'partition', 'other', 'payload', i)
              ELSE jsonb_build_object('queue', 'big', 'transactionId', 't' || (i % 200000 % 150001),
                                      'payload', jsonb_build_object('i', i)) END ORDER BY i)) AS b
  FROM generate_series(1, 200000) i;
CREATE TEMP TABLE big_res AS SELECT queen.push(b) AS r FROM big_body;
SELECT e->>'status' AS status, count(*) FROM big_res, jsonb_array_elements(r) e GROUP BY 1 ORDER BY 1;
-- every duplicate answers its leader's message id
WITH e AS (SELECT x FROM big_res, jsonb_array_elements(r) x)
SELECT count(*) FILTER (WHERE d.x->>'message_id' = q.x->>'message_id') AS dup_ids_match,
       count(*) AS dups
  FROM e d JOIN e q ON q.x->>'transaction_id' = d.x->>'transaction_id' AND q.x->>'status' = 'queued'
 WHERE d.x->>'status' = 'duplicate';
SELECT p.name, s.end_offset - s.base_offset + 1 AS frames
  FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'big' ORDER BY 1;

-- Pop the whole Default partition and ack every message in one batch ack
-- (and the first 1,000 twice more: no-ops of a moved cursor are answered).
SET queen_streams.max_pop_batch = 200000;	-- one pop of the whole partition (a superuser may)
CREATE TEMP TABLE big_pop AS SELECT queen.pop('big', 'Default', batch => 200000) AS p;
SELECT p->>'leaseId' AS big_lease, p->>'partitionId' AS big_pid FROM big_pop \gset
CREATE TEMP TABLE big_msgs AS
SELECT n, m->>'transactionId' AS txn FROM big_pop, jsonb_array_elements(p->'messages') WITH ORDINALITY AS x(m, n);
SELECT count(*) AS popped FROM big_msgs;
CREATE TEMP TABLE big_ack AS
SELECT queen.ack(jsonb_build_object('acknowledgments', jsonb_agg(jsonb_build_object(
         'transactionId', txn, 'partitionId', :'big_pid', 'leaseId', :'big_lease') ORDER BY n))) AS r
  FROM big_msgs;
SELECT e->>'success' AS success, e->>'error' AS error, count(*)
  FROM big_ack, jsonb_array_elements(r) e GROUP BY 1, 2 ORDER BY 1, 2;
SELECT c.committed, c.worker_id IS NULL AS released, c.total_consumed
  FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
 WHERE p.name = 'Default' AND p.queue_id = (SELECT id FROM queen.queues WHERE name = 'big');
-- acks matched by hash: a batch of 200,000 acks of unknown ids, one lookup each
SELECT e->>'error' AS error, count(*)
  FROM (SELECT queen.ack(jsonb_build_object('acknowledgments', jsonb_agg(jsonb_build_object(
                 'transactionId', 'nope-' || i, 'partitionId', :'big_pid'))))
          FROM generate_series(1, 200000) i) a(r), jsonb_array_elements(r) e GROUP BY 1;

-- One push into 100 queues: one group each, every answer names its partition
-- (a few only: the listener's per-queue counters are shared by every test).
SELECT count(*) AS answers, count(DISTINCT e->>'partition_id') AS partitions,
       count(*) FILTER (WHERE e->>'status' = 'queued') AS queued
  FROM jsonb_array_elements(queen.push(jsonb_build_object('items',
         (SELECT jsonb_agg(jsonb_build_object('queue', 'many' || i % 100, 'payload', i))
            FROM generate_series(1, 200) i)))) e;

-- A huge push is cancelled by statement_timeout inside the C loops:
-- 57014, and nothing of it is written (not even its auto-created queue).
CREATE TEMP TABLE cut_body AS
SELECT jsonb_build_object('items', jsonb_agg(jsonb_build_object(
         'queue', 'cut', 'transactionId', 'c' || i, 'payload', repeat('x', 200)))) AS b
  FROM generate_series(1, 200000) i;
\set VERBOSITY sqlstate
SET statement_timeout = '100ms';
SELECT queen.push(b) IS NOT NULL FROM cut_body;
RESET statement_timeout;
\set VERBOSITY default
SELECT count(*) AS cut_queues FROM queen.queues WHERE name = 'cut';

DROP EXTENSION queen_streams CASCADE;
