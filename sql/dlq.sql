-- queen.dlq (GET /api/v1/dlq), queen.delete_message (DELETE
-- /api/v1/messages/:p/:t) and queen.retry_message (POST .../retry): every
-- field, each filter, paging with the total, tenant isolation, deletes, and
-- requeued dead letters popped and acked again (encrypted queues included).
CREATE EXTENSION queen_streams;
SET timezone = 'UTC';

\i test/include/helpers.sql

-- Push m<a>..m<b> in one segment; m1 carries a trace id.
CREATE FUNCTION pg_temp.push(q text, a int, b int, part text DEFAULT 'Default',
                             tenant uuid DEFAULT NULL, psub text DEFAULT NULL)
RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(r->>'status', ',')
	  FROM jsonb_array_elements(queen.push(jsonb_build_object('items',
	         (SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object('queue', q, 'partition', part,
	                   'transactionId', 'm' || i, 'payload', jsonb_build_object('i', i, 'q', q),
	                   'traceId', CASE WHEN i = 1 THEN '0190aaaa-0000-7000-8000-000000000001' END)) ORDER BY i)
	            FROM generate_series(a, b) i)), tenant, psub)) r
$$;
-- The first frame of a partition holding a transaction id (offset order),
-- and the last one (the requeued copy).
CREATE FUNCTION pg_temp.frame(pid uuid, txn text, newest boolean DEFAULT false,
	OUT "offset" bigint, OUT message_id uuid, OUT created_at timestamptz, OUT psub text,
	OUT trace_id uuid, OUT flags int, OUT payload text)
LANGUAGE sql AS $$
	SELECT s.base_offset + f.idx, f.message_id, s.created_at, f.producer_sub, f.trace_id, f.flags, f.payload
	  FROM queen.log_segments s, queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
	 WHERE s.partition_id = pid AND f.transaction_id = txn
	 ORDER BY CASE WHEN newest THEN -(s.base_offset + f.idx) ELSE s.base_offset + f.idx END LIMIT 1
$$;
-- Pop a partition (batch 10) and ack one transaction with a status and error.
CREATE FUNCTION pg_temp.dead(q text, part text, grp text, txn text, st text, err text,
                             tenant uuid DEFAULT NULL) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r jsonb := queen.pop(q, part, grp, 10, tenant => tenant);
	a jsonb;
BEGIN
	a := queen.ack(jsonb_strip_nulls(jsonb_build_object('transactionId', txn,
	       'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId', 'consumerGroup', grp,
	       'status', st, 'error', err)), tenant);
	RETURN (SELECT string_agg(m->>'transactionId', ',') FROM jsonb_array_elements(r->'messages') m)
	       || ' -> ' || (a->0->>'success') || '/dlq ' || (a->0->>'dlq');
END $$;
-- One line per dead letter of a dlq answer, with each field checked
-- against the log: id is the id of a frame of the partition carrying the
-- transaction id, createdAt that frame's segment time.
CREATE FUNCTION pg_temp.dl(r jsonb)
RETURNS TABLE (n bigint, txn text, queue text, part text, grp text, error text, retries int,
               data jsonb, psub text, failed text, id_ok boolean, pid_ok boolean, created_ok boolean)
LANGUAGE sql AS $$
	SELECT e.n, m->>'transactionId', m->>'queue', m->>'partition', m->>'consumerGroup',
	       m->>'errorMessage', (m->>'retryCount')::int, m->'data', m->>'producerSub',
	       to_char((m->>'failedAt')::timestamptz, 'HH24:MI'),
	       f.transaction_id IS NOT DISTINCT FROM m->>'transactionId',
	       (m->>'partitionId')::uuid = pg_temp.pid(m->>'queue', m->>'partition'),
	       (m->>'createdAt')::timestamptz = f.created_at
	  FROM jsonb_array_elements(r->'messages') WITH ORDINALITY AS e(m, n)
	  LEFT JOIN LATERAL (
	         SELECT x.transaction_id, s.created_at
	           FROM queen.log_segments s, queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) x
	          WHERE s.partition_id = (m->>'partitionId')::uuid AND x.message_id = (m->>'id')::uuid) f ON true
	 ORDER BY e.n
$$;
-- total, pagination and the error messages in answer order.
CREATE FUNCTION pg_temp.errs(r jsonb, OUT total int, OUT lim int, OUT off int, OUT errors text)
LANGUAGE sql AS $$
	SELECT (r->>'total')::int, (r->'pagination'->>'limit')::int, (r->'pagination'->>'offset')::int,
	       (SELECT coalesce(string_agg(m->>'errorMessage', ' | ' ORDER BY n), '')
	          FROM jsonb_array_elements(r->'messages') WITH ORDINALITY AS e(m, n))
$$;

-------------------------------------------------------------------------
-- Fixture: dead letters on two queues, two partitions, two groups (one
-- message dead-lettered by both), one after a spent retry budget, and one
-- of tenant B. failed_at is then set to fixed hours, one per row.
-------------------------------------------------------------------------
SELECT pg_temp.push('dq', 0, 3, 'p1', psub => 'alice'), pg_temp.push('dq', 0, 1, 'p2'),
       pg_temp.push('dq2', 0, 1), pg_temp.push('dq', 0, 1, tenant => :'t_b');
UPDATE queen.queues SET retry_limit = 1, retry_delay = 0;
SELECT pg_temp.dead('dq', 'p1', NULL, 'm0', 'dlq', 'p1 m0 qm');
SELECT pg_temp.dead('dq', 'p1', 'g1', 'm0', 'dlq', 'p1 m0 g1');
SELECT pg_temp.dead('dq', 'p1', NULL, 'm1', 'failed', NULL);
SELECT pg_temp.dead('dq', 'p1', NULL, 'm1', 'failed', NULL);
SELECT pg_temp.dead('dq', 'p2', NULL, 'm0', 'dlq', 'p2 m0');
SELECT pg_temp.dead('dq2', 'Default', NULL, 'm0', 'dlq', 'dq2 m0');
SELECT pg_temp.dead('dq', 'Default', NULL, 'm0', 'dlq', 'tenant b m0', :'t_b');
UPDATE queen.log_dlq SET failed_at = '2026-01-01 00:00:00+00'::timestamptz + interval '1 hour' *
       CASE error WHEN 'p1 m0 qm' THEN 1 WHEN 'p1 m0 g1' THEN 2 WHEN 'Retries exhausted' THEN 3
                  WHEN 'p2 m0' THEN 4 WHEN 'dq2 m0' THEN 5 ELSE 6 END;

-------------------------------------------------------------------------
-- queen.dlq: the answer's shape, every field, newest failure first.
-------------------------------------------------------------------------
SELECT array_agg(k ORDER BY k) AS answer_keys FROM jsonb_object_keys(queen.dlq()) k;
SELECT array_agg(k ORDER BY k) AS message_keys FROM jsonb_object_keys(queen.dlq()->'messages'->0) k;
SELECT pg_temp.mask(queen.dlq('dq', partition => 'p1', lim => 1, off => 2));
SELECT * FROM pg_temp.dl(queen.dlq());
SELECT * FROM pg_temp.errs(queen.dlq());

-- Filters, alone and combined; '' means no filter; from and to are
-- inclusive bounds on failedAt.
SELECT f.label, e.*
  FROM (VALUES
	('queue dq', queen.dlq('dq')),
	('queue dq2', queen.dlq('dq2')),
	('queue nope', queen.dlq('nope')),
	('queue empty', queen.dlq('')),
	('group g1', queen.dlq(consumer_group => 'g1')),
	('group queue mode', queen.dlq(consumer_group => '__QUEUE_MODE__')),
	('group nope', queen.dlq(consumer_group => 'nope')),
	('partition p2', queen.dlq(partition => 'p2')),
	('queue dq partition p1', queen.dlq('dq', partition => 'p1')),
	('queue dq2 partition p1', queen.dlq('dq2', partition => 'p1')),
	('queue dq group g1', queen.dlq('dq', 'g1')),
	('from 03:00', queen.dlq(from_time => '2026-01-01 03:00+00')),
	('to 03:00', queen.dlq(to_time => '2026-01-01 03:00+00')),
	('from 02:00 to 04:00', queen.dlq(from_time => '2026-01-01 02:00+00', to_time => '2026-01-01 04:00+00')),
	('from 04:00 to 02:00', queen.dlq(from_time => '2026-01-01 04:00+00', to_time => '2026-01-01 02:00+00')),
	('queue dq p1 qm from 02:00', queen.dlq('dq', '__QUEUE_MODE__', 'p1', '2026-01-01 02:00+00'))
  ) f(label, r), LATERAL pg_temp.errs(f.r) e;

-- Paging: limit and offset page for real; total counts every match.
SELECT f.label, e.*
  FROM (VALUES
	('limit 2', queen.dlq(lim => 2)),
	('limit 2 offset 2', queen.dlq(lim => 2, off => 2)),
	('limit 2 offset 4', queen.dlq(lim => 2, off => 4)),
	('limit 2 offset 6', queen.dlq(lim => 2, off => 6)),
	('offset 100', queen.dlq(off => 100)),
	('limit 0', queen.dlq(lim => 0)),
	('limit null offset null', queen.dlq(lim => NULL, off => NULL)),
	('limit 10000', queen.dlq(lim => 10000)),
	('queue dq limit 1 offset 1', queen.dlq('dq', lim => 1, off => 1))
  ) f(label, r), LATERAL pg_temp.errs(f.r) e;
SELECT pg_temp.try($$SELECT queen.dlq(lim => -1)$$) AS negative_limit;
SELECT pg_temp.try($$SELECT queen.dlq(lim => 10001)$$) AS huge_limit;
SELECT pg_temp.try($$SELECT queen.dlq(off => -1)$$) AS negative_offset;

-- Tenants: each sees its own dead letters only.
SELECT * FROM pg_temp.errs(queen.dlq(tenant => :'t_b'));
SELECT n, txn, queue, part, grp, error, retries, data, psub, failed
  FROM pg_temp.dl(queen.dlq(tenant => :'t_b'));
SELECT * FROM pg_temp.errs(queen.dlq('dq', tenant => 'cccccccc-0000-4000-8000-00000000000c'));
SELECT * FROM pg_temp.errs(queen.dlq(partition => 'Default'));

-- A dead letter whose segment retention removed: data is the stored copy,
-- createdAt falls back to the message id's millisecond stamp, producerSub
-- is no longer known.
CREATE TEMP TABLE gone AS SELECT * FROM pg_temp.frame(pg_temp.pid('dq2'), 'm0');
DELETE FROM queen.log_segments WHERE partition_id = pg_temp.pid('dq2');
UPDATE queen.log_partitions SET log_start = last_offset + 1 WHERE id = pg_temp.pid('dq2');
SELECT m->>'transactionId' AS txn, m->'data' AS data, m->>'producerSub' AS psub,
       (m->>'id')::uuid = gone.message_id AS id_kept,
       (m->>'createdAt')::timestamptz = date_trunc('milliseconds', (m->>'createdAt')::timestamptz) AS created_ms,
       abs(extract(epoch FROM (m->>'createdAt')::timestamptz - gone.created_at)) < 5 AS created_near
  FROM gone, jsonb_array_elements(queen.dlq('dq2')->'messages') m;

-------------------------------------------------------------------------
-- queen.delete_message: only dead-letter rows can go (segments are
-- immutable); every answer is {success, partitionId, transactionId, message}.
-------------------------------------------------------------------------
CREATE FUNCTION pg_temp.del(pid uuid, txn text, tenant uuid DEFAULT NULL,
	OUT keys text[], OUT success boolean, OUT pid_echoed boolean, OUT txn_echoed text, OUT message text)
LANGUAGE sql AS $$
	SELECT (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(r) k), (r->>'success')::boolean,
	       (r->>'partitionId')::uuid = pid, r->>'transactionId', r->>'message'
	  FROM queen.delete_message(pid, txn, tenant) r
$$;
-- m0 of p1 was dead-lettered by two groups: both rows go.
SELECT * FROM pg_temp.del(pg_temp.pid('dq', 'p1'), 'm0');
SELECT * FROM pg_temp.errs(queen.dlq('dq', partition => 'p1'));
-- Again: the message is still in the log, but no longer dead-lettered.
SELECT * FROM pg_temp.del(pg_temp.pid('dq', 'p1'), 'm0');
-- A transaction id that never was, in a partition whose hashes cover it all.
SELECT * FROM pg_temp.del(pg_temp.pid('dq', 'p1'), 'zzz');
-- Another tenant's partition, and a partition that does not exist: not found,
-- and nothing is deleted.
SELECT * FROM pg_temp.del(pg_temp.pid('dq', 'p2'), 'm0', :'t_b');
SELECT * FROM pg_temp.del('01890a5d-ac96-774b-bcce-b302099a8057', 'm0');
SELECT * FROM pg_temp.errs(queen.dlq(partition => 'p2'));
-- A single row: deleted.
SELECT * FROM pg_temp.del(pg_temp.pid('dq', 'Default', :'t_b'), 'm0', :'t_b');
SELECT * FROM pg_temp.errs(queen.dlq(tenant => :'t_b'));
-- Beyond the newest 256 hash rows, or when hashes no longer cover every
-- live offset, a miss is not conclusive and says so.
SELECT pg_temp.push('dq_many', 0, 0);
SELECT count(pg_temp.push('dq_many', i, i)) AS pushes FROM generate_series(1, 300) i;
SELECT message FROM pg_temp.del(pg_temp.pid('dq_many'), 'm0');
SELECT message FROM pg_temp.del(pg_temp.pid('dq_many'), 'zzz');
SELECT message FROM pg_temp.del(pg_temp.pid('dq_many'), 'm300');
SELECT message FROM pg_temp.del(pg_temp.pid('dq_many'), 'm45');
UPDATE queen.log_partitions SET txns_start = 1 WHERE id = pg_temp.pid('dq', 'p1');
SELECT message FROM pg_temp.del(pg_temp.pid('dq', 'p1'), 'zzz');
UPDATE queen.log_partitions SET txns_start = 0 WHERE id = pg_temp.pid('dq', 'p1');
-- Validation.
SELECT pg_temp.try($$SELECT queen.delete_message(NULL, 'm0')$$) AS null_partition;
SELECT pg_temp.try($$SELECT queen.delete_message('01890a5d-ac96-774b-bcce-b302099a8057', NULL)$$) AS null_txn;
SELECT pg_temp.try($$SELECT queen.delete_message('01890a5d-ac96-774b-bcce-b302099a8057', '')$$) AS empty_txn;

-------------------------------------------------------------------------
-- queen.retry_message: the dead letter goes back onto its partition as a
-- new message with the same transaction id (never a dedup duplicate), its
-- trace id and producer, and its rows go.
-------------------------------------------------------------------------
CREATE TEMP TABLE rq (r jsonb);
INSERT INTO rq SELECT queen.retry_message(pg_temp.pid('dq', 'p1'), 'm1');
SELECT array_agg(k ORDER BY k) AS answer_keys FROM rq, jsonb_object_keys(r) k;
SELECT r->>'success' AS success, r->>'transactionId' AS txn, r->>'queue' AS queue,
       r->>'partition' AS part, (r->>'partitionId')::uuid = pg_temp.pid('dq', 'p1') AS pid_ok,
       (r->>'messageId')::uuid <> (pg_temp.frame(pg_temp.pid('dq', 'p1'), 'm1')).message_id AS new_id
  FROM rq;
SELECT f."offset", f.message_id = (r->>'messageId')::uuid AS id_ok, f.psub, f.trace_id, f.flags, f.payload
  FROM rq, pg_temp.frame(pg_temp.pid('dq', 'p1'), 'm1', newest => true) f;
SELECT * FROM pg_temp.errs(queen.dlq('dq', partition => 'p1'));
-- Popped again (after m2 and m3, which the queue-mode cursor had not
-- reached), with the original's data, trace and producer, and acked.
CREATE TEMP TABLE rp AS SELECT queen.pop('dq', 'p1', batch => 10) AS r;
SELECT m->>'transactionId' AS txn, m->'data' AS data, m->>'traceId' AS trace_id,
       m->>'producerSub' AS psub, (m->>'id')::uuid = (SELECT (r->>'messageId')::uuid FROM rq) AS is_requeued
  FROM rp, jsonb_array_elements(r->'messages') m;
SELECT a->>'success' AS success, a->>'error' AS error, a->>'leaseReleased' AS released
  FROM rp, jsonb_array_elements(queen.ack(jsonb_build_object('transactionId', 'm1',
         'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId'))) a;
SELECT committed, batch_end, worker_id IS NOT NULL AS leased FROM queen.log_consumers
 WHERE partition_id = pg_temp.pid('dq', 'p1') AND consumer_group = '__QUEUE_MODE__';
-- Group g1 had dead-lettered m0 only; it meets the requeued m1 at the end of its backlog.
SELECT string_agg(m->>'transactionId', ',') AS g1_backlog
  FROM jsonb_array_elements(queen.pop('dq', 'p1', 'g1', 10, auto_ack => true)->'messages') m;
-- Nothing left to requeue; another tenant never finds it.
SELECT pg_temp.try($$SELECT queen.retry_message(pg_temp.pid('dq', 'p1'), 'm1')$$, mask_uuids => true) AS again;
SELECT pg_temp.try($$SELECT queen.retry_message(pg_temp.pid('dq', 'p2'), 'm0', 'bbbbbbbb-0000-4000-8000-00000000000b')$$, mask_uuids => true) AS other_tenant;
SELECT pg_temp.try($$SELECT queen.retry_message('01890a5d-ac96-774b-bcce-b302099a8057', 'm0')$$, mask_uuids => true) AS no_partition;
SELECT * FROM pg_temp.errs(queen.dlq(partition => 'p2'));
SELECT pg_temp.try($$SELECT queen.retry_message(NULL, 'm0')$$) AS null_partition;
SELECT pg_temp.try($$SELECT queen.retry_message(pg_temp.pid('dq', 'p2'), NULL)$$) AS null_txn;
SELECT pg_temp.try($$SELECT queen.retry_message(pg_temp.pid('dq', 'p2'), '')$$) AS empty_txn;

-- Requeued, failed again, requeued again.
SELECT queen.retry_message(pg_temp.pid('dq', 'p2'), 'm0')->>'success' AS requeued;
SELECT pg_temp.dead('dq', 'p2', NULL, 'm0', 'dlq', 'p2 m0 again');
SELECT n, txn, error, retries, data, id_ok, created_ok,
       (SELECT d.message_id FROM queen.log_dlq d WHERE d.error = 'p2 m0 again')
         = (pg_temp.frame(pg_temp.pid('dq', 'p2'), 'm0', newest => true)).message_id AS copy_dead_lettered
  FROM pg_temp.dl(queen.dlq(partition => 'p2'));
SELECT queen.retry_message(pg_temp.pid('dq', 'p2'), 'm0')->>'success' AS requeued;
SELECT string_agg(m->>'transactionId', ',') AS redelivered
  FROM jsonb_array_elements(queen.pop('dq', 'p2', batch => 10, auto_ack => true)->'messages') m;

-- The segment is gone: the stored payload is requeued, without trace or producer.
SELECT queen.retry_message(pg_temp.pid('dq2'), 'm0')->>'success' AS requeued;
SELECT "offset", psub, trace_id, payload FROM pg_temp.frame(pg_temp.pid('dq2'), 'm0');
SELECT m->>'transactionId' AS txn, m->'data' AS data
  FROM jsonb_array_elements(queen.pop('dq2', batch => 10, auto_ack => true)->'messages') m;
SELECT * FROM pg_temp.errs(queen.dlq());

-- Encrypted queue: ack stores the dead letter as the frame's envelope (no
-- plaintext in queen.log_dlq), queen.dlq opens it; the requeue is opened and
-- enveloped again by the push core, and pops decrypt it.
SET queen_streams.encryption_key = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SELECT queen.configure('{"queue":"dq_enc","options":{"encryptionEnabled":true,"retryDelay":0}}')->>'configured' AS configured;
SELECT queen.push('{"items":[{"queue":"dq_enc","transactionId":"e1","payload":{"secret":"plain-marker"}}]}')->0->>'status' AS pushed;
SELECT pg_temp.dead('dq_enc', 'Default', NULL, 'e1', 'dlq', 'enc');
SELECT encrypted, (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(payload) k) AS stored_keys,
       position('plain-marker' IN payload::text) > 0 AS plaintext_in_table
  FROM queen.log_dlq WHERE partition_id = pg_temp.pid('dq_enc');
SELECT data FROM pg_temp.dl(queen.dlq('dq_enc'));
-- without the key: queen.dlq serves the envelope (with a WARNING), the requeue is refused
SET queen_streams.encryption_key = '';
SELECT (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(data) k) AS keys_without_key
  FROM pg_temp.dl(queen.dlq('dq_enc'));
SELECT pg_temp.try($$SELECT queen.retry_message(pg_temp.pid('dq_enc'), 'e1')$$);
SELECT count(*) AS still_dead FROM queen.log_dlq WHERE partition_id = pg_temp.pid('dq_enc');
SET queen_streams.encryption_key = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SELECT queen.retry_message(pg_temp.pid('dq_enc'), 'e1')->>'success' AS requeued;
CREATE FUNCTION pg_temp.stored(q text)
RETURNS TABLE ("offset" bigint, encrypted boolean, envelope_keys text, plaintext_in_segment boolean)
LANGUAGE sql AS $$
	SELECT s.base_offset + f.idx, f.flags & 4 = 4,
	       CASE WHEN f.flags & 4 = 4 THEN (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(f.payload::jsonb) k) END,
	       position('plain-marker'::bytea IN queen.segment_decompress(s.blob)) > 0
	  FROM queen.log_segments s, queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
	 WHERE s.partition_id = pg_temp.pid(q) ORDER BY 1
$$;
SELECT * FROM pg_temp.stored('dq_enc');
SELECT pg_temp.dead('dq_enc', 'Default', NULL, 'e1', 'dlq', 'enc again');
-- A dead letter holds the envelope: it is opened when read and before the
-- push wraps it again: one envelope, never two.
UPDATE queen.log_dlq SET payload = (pg_temp.frame(pg_temp.pid('dq_enc'), 'e1')).payload::jsonb
 WHERE partition_id = pg_temp.pid('dq_enc');
SELECT (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(data) k) AS dlq_data_keys
  FROM pg_temp.dl(queen.dlq('dq_enc'));
SELECT queen.retry_message(pg_temp.pid('dq_enc'), 'e1')->>'success' AS requeued;
SELECT * FROM pg_temp.stored('dq_enc');
SELECT m->>'transactionId' AS txn, m->'data' AS data
  FROM jsonb_array_elements(queen.pop('dq_enc', batch => 10, auto_ack => true)->'messages') m;
RESET queen_streams.encryption_key;

-- Access: the functions are the owner's and need a grant.
SELECT p.oid::regprocedure AS function, p.prosecdef AS definer, p.proconfig,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS commented
  FROM pg_proc p WHERE p.proname IN ('dlq', 'delete_message', 'retry_message')
   AND p.pronamespace = 'queen'::regnamespace ORDER BY 1::text;

DROP EXTENSION queen_streams CASCADE;
