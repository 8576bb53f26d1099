-- queen.transaction (POST /api/v1/transaction): pushes and acks of several
-- queues in one transaction, all or nothing; the JS TransactionBuilder's
-- body; every result field and error string; duplicates on retry; dead
-- letters through a transaction; tenants.
CREATE EXTENSION queen_streams;

\i test/include/helpers.sql

CREATE FUNCTION pg_temp.cursor(q text, part text DEFAULT 'Default', grp text DEFAULT '__QUEUE_MODE__')
RETURNS TABLE (committed bigint, leased boolean, retries int, total_consumed bigint)
LANGUAGE sql AS $$
	SELECT c.committed, c.worker_id IS NOT NULL, c.batch_retry_count, c.total_consumed
	  FROM queen.log_consumers c
	 WHERE c.partition_id = pg_temp.pid(q, part) AND c.consumer_group = grp
$$;
-- The envelope, uuids masked; transactionId checked to be a UUIDv7.
CREATE FUNCTION pg_temp.head(res jsonb)
RETURNS TABLE (keys text, success boolean, txid_v7 boolean, error text, nresults int)
LANGUAGE sql AS $$
	SELECT (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(res) k),
	       (res->>'success')::boolean,
	       res->>'transactionId' ~ '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$',
	       res->>'error', jsonb_array_length(res->'results')
$$;
-- The results, one line per op. A push's messageId and partitionId are
-- checked against the log instead of printed: `msg_is` says whether the
-- messageId is the id of the frame with that transaction id (the original
-- for a duplicate), `part_is` whether partitionId is the queue's partition.
CREATE FUNCTION pg_temp.results(res jsonb, tenant uuid DEFAULT '00000000-0000-0000-0000-000000000001')
RETURNS TABLE (idx int, type text, success boolean, txn text, status text, queue text,
               msg_is boolean, part_is text, error text, dlq boolean, keys text)
LANGUAGE sql AS $$
	SELECT (r->>'index')::int, r->>'type', (r->>'success')::boolean,
	       regexp_replace(r->>'transactionId', '^[0-9a-f]{8}-[0-9a-f-]{27}$', '<uuid>'),
	       r->>'status', r->>'queueName',
	       CASE WHEN r->>'type' = 'push' THEN EXISTS (
	         SELECT 1 FROM queen.log_segments s,
	                LATERAL queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
	          WHERE s.partition_id = (r->>'partitionId')::uuid
	            AND f.transaction_id = r->>'transactionId' AND f.message_id = (r->>'messageId')::uuid) END,
	       CASE WHEN r->>'type' = 'push' THEN
	         (SELECT p.name FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
	           WHERE p.id = (r->>'partitionId')::uuid AND q.name = r->>'queueName' AND q.tenant_id = tenant) END,
	       r->>'error', (r->>'dlq')::boolean,
	       (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(r) k)
	  FROM jsonb_array_elements(res->'results') WITH ORDINALITY AS e(r, n) ORDER BY n
$$;
CREATE TEMP TABLE last (r jsonb);
CREATE FUNCTION pg_temp.txn(req jsonb, tenant uuid DEFAULT NULL, psub text DEFAULT NULL)
RETURNS SETOF jsonb LANGUAGE sql AS $$
	DELETE FROM last;
	INSERT INTO last SELECT queen.transaction(req, tenant, psub) RETURNING r;
$$;
-- What a pop sees (and leases): transaction ids and data.
CREATE TEMP TABLE last_pop (r jsonb);
CREATE FUNCTION pg_temp.pop(q text, part text DEFAULT NULL, grp text DEFAULT NULL,
                            tenant uuid DEFAULT NULL, auto boolean DEFAULT false)
RETURNS TABLE (txn text, data jsonb, partition text, trace text, psub text) LANGUAGE sql AS $$
	DELETE FROM last_pop;
	INSERT INTO last_pop SELECT queen.pop(q, part, grp, 100, NULL, auto, tenant);
	SELECT regexp_replace(m->>'transactionId', '^[0-9a-f]{8}-[0-9a-f-]{27}$', '<uuid>'),
	       m->'data', m->>'partition', m->>'traceId', m->>'producerSub'
	  FROM last_pop, jsonb_array_elements(r->'messages') m;
$$;
-- Ack ops for every message of the last pop, as the JS builder makes them
-- (no leaseId on the op; the lease ids go to requiredLeases).
CREATE FUNCTION pg_temp.acks(status text DEFAULT 'completed', grp text DEFAULT NULL)
RETURNS jsonb LANGUAGE sql AS $$
	SELECT coalesce(jsonb_agg(jsonb_strip_nulls(jsonb_build_object('type', 'ack',
	         'transactionId', m->>'transactionId', 'partitionId', m->>'partitionId',
	         'status', status, 'consumerGroup', grp))), '[]')
	  FROM last_pop, jsonb_array_elements(r->'messages') m
$$;
CREATE FUNCTION pg_temp.push(q text, a int, b int) RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(r->>'status', ',')
	  FROM jsonb_array_elements(queen.push(jsonb_build_object('items',
	         (SELECT jsonb_agg(jsonb_build_object('queue', q, 'transactionId', 'm' || i,
	                   'payload', jsonb_build_object('i', i)) ORDER BY i)
	            FROM generate_series(a, b) i)))) r
$$;

-------------------------------------------------------------------------
-- Refused before anything runs (22023, HTTP 400): no operations array, an
-- empty one, a malformed op.
-------------------------------------------------------------------------
SELECT body, pg_temp.try(format('SELECT queen.transaction(%L)', body)) AS error
  FROM (VALUES (NULL), ('{}'), ('[]'), ('{"operations":null}'), ('{"operations":{}}'),
               ('{"operations":"push"}'), ('{"operations":[]}'),
               ('{"operations":[1]}'),
               ('{"operations":[{"type":"push"}]}'),
               ('{"operations":[{"type":"push","items":[{"payload":1}]}]}'),
               ('{"operations":[{"type":"push","items":{"queue":"x"}}]}'),
               ('{"operations":[{"type":"push","items":["x"]}]}'),
               ('{"operations":[{"type":"push","items":[{"queue":""}]}]}'),
               ('{"operations":[{"type":"push","items":[{"queue":"x","partition":""}]}]}'),
               ('{"operations":[{"type":"push","queue":7}]}'),
               ('{"operations":[{"type":"push","queue":"x","transactionId":5}]}'),
               ('{"operations":[{"type":"push","queue":"x","traceId":"not-a-uuid"}]}'),
               ('{"operations":[{"type":"ack","partitionId":"00000000-0000-0000-0000-000000000000"}]}'),
               ('{"operations":[{"type":"ack","transactionId":"t"}]}'),
               ('{"operations":[{"type":"ack","transactionId":"t","partitionId":"p1"}]}'),
               ('{"operations":[{"type":"ack","transactionId":"t","partitionId":"00000000-0000-0000-0000-000000000000","status":1}]}'),
               ('{"operations":[{"type":"push","queue":"ok1"},{"type":"ack","transactionId":"t"}]}')) v(body);
-- nothing of the refused bodies was written, not even a queue
SELECT count(*) AS queues FROM queen.queues;
SELECT pg_temp.try(format('SELECT queen.transaction(%L)', '{"operations":[{"type":"push","items":[{"queue":"' || repeat('q', 256) || '"}]}]}')) AS long_name;

-------------------------------------------------------------------------
-- The JS builder's exact body: .queue(q).push(items) twice (one with a
-- partition), no transactionId or traceId on items, top-level requiredLeases
-- (read and ignored, even when it names no real lease).
-------------------------------------------------------------------------
SELECT * FROM pg_temp.head((SELECT pg_temp.txn('{"operations":[
  {"type":"push","items":[{"queue":"orders","payload":{"n":1}},{"queue":"orders","payload":{"n":2}}]},
  {"type":"push","items":[{"queue":"audit","partition":"eu","payload":"text"}]}],
  "requiredLeases":["no-such-lease"]}')));
SELECT * FROM pg_temp.results((SELECT r FROM last));
-- without a client transaction id, an item's transactionId is its messageId
SELECT bool_and(e->>'transactionId' = e->>'messageId') AS txn_is_message_id
  FROM last, jsonb_array_elements(r->'results') e;
SELECT txn, data, partition FROM pg_temp.pop('orders', auto => true);
SELECT txn, data, partition FROM pg_temp.pop('audit', 'eu', auto => true);
-- a push op with no items adds no op: nothing to do, and success
SELECT * FROM pg_temp.head((SELECT pg_temp.txn('{"operations":[{"type":"push","items":[]}]}')));

-------------------------------------------------------------------------
-- Push to several queues and ack in one call: the source's cursor moves and
-- the pushes are popped.
-------------------------------------------------------------------------
SELECT pg_temp.push('src', 0, 2) AS src_pushed;
SELECT txn, data FROM pg_temp.pop('src');
SELECT * FROM pg_temp.head((SELECT pg_temp.txn(jsonb_build_object('operations',
  jsonb_build_array(
    jsonb_build_object('type', 'push', 'items', jsonb_build_array(
      jsonb_build_object('queue', 'out1', 'payload', jsonb_build_object('from', 'm0'), 'transactionId', 'o1'),
      jsonb_build_object('queue', 'out2', 'payload', jsonb_build_object('from', 'm1'), 'transactionId', 'o2'))))
  || pg_temp.acks(),
  'requiredLeases', (SELECT jsonb_build_array(r->>'leaseId') FROM last_pop)))));
SELECT * FROM pg_temp.results((SELECT r FROM last));
SELECT * FROM pg_temp.cursor('src');
SELECT txn, data FROM pg_temp.pop('out1', auto => true);
SELECT txn, data FROM pg_temp.pop('out2', auto => true);

-------------------------------------------------------------------------
-- A failing ack rolls back the pushes of the same call: results up to and
-- including the failing op, nothing visible, not even the new queue.
-------------------------------------------------------------------------
SELECT pg_temp.push('src', 3, 5) AS src_pushed;
SELECT txn FROM pg_temp.pop('src');
SELECT * FROM pg_temp.head((SELECT pg_temp.txn(jsonb_build_object('operations', jsonb_build_array(
  jsonb_build_object('type', 'push', 'queue', 'rolled', 'payload', 1, 'transactionId', 'r1'),
  jsonb_build_object('type', 'ack', 'transactionId', 'm3', 'partitionId', pg_temp.pid('src')),
  jsonb_build_object('type', 'ack', 'transactionId', 'nope', 'partitionId', pg_temp.pid('src')),
  jsonb_build_object('type', 'push', 'queue', 'rolled', 'payload', 2, 'transactionId', 'r2'),
  jsonb_build_object('type', 'ack', 'transactionId', 'm4', 'partitionId', pg_temp.pid('src')))))));
SELECT * FROM pg_temp.results((SELECT r FROM last));
SELECT pg_temp.pid('rolled') IS NULL AS no_rolled_queue;
SELECT * FROM pg_temp.cursor('src');  -- the good ack of m3 rolled back too
-- The lease an ack op names is checked: a wrong one is rejected...
SELECT * FROM pg_temp.head((SELECT pg_temp.txn(jsonb_build_object('operations', jsonb_build_array(
  jsonb_build_object('type', 'push', 'queue', 'rolled', 'payload', 1),
  jsonb_build_object('type', 'ack', 'transactionId', 'm5', 'partitionId', pg_temp.pid('src'),
                     'leaseId', 'not-the-lease'))))));
SELECT pg_temp.pid('rolled') IS NULL AS no_rolled_queue;
-- ... the holder's is accepted, and completes the batch.
SELECT * FROM pg_temp.head((SELECT pg_temp.txn(jsonb_build_object('operations', jsonb_build_array(
  jsonb_build_object('type', 'ack', 'transactionId', 'm5', 'partitionId', pg_temp.pid('src'),
                     'leaseId', (SELECT r->>'leaseId' FROM last_pop)))))));
SELECT * FROM pg_temp.results((SELECT r FROM last));
SELECT * FROM pg_temp.cursor('src');
-- An ack of a partition nobody consumes: no cursor row.
SELECT * FROM pg_temp.head((SELECT pg_temp.txn(jsonb_build_object('operations', jsonb_build_array(
  jsonb_build_object('type', 'ack', 'transactionId', 'm0', 'partitionId', pg_temp.pid('src'),
                     'consumerGroup', 'never-popped'))))));
-- An ack of a partition that does not exist.
SELECT * FROM pg_temp.head((SELECT pg_temp.txn('{"operations":[{"type":"ack","transactionId":"m0",
  "partitionId":"00000000-0000-0000-0000-000000000000"}]}')));

-------------------------------------------------------------------------
-- Retried: pushes with client transaction ids come back duplicate (with the
-- original's messageId). The acks of a batch the first run consumed find it
-- consumed: rejected, so the replay rolls back whole and nothing is consumed
-- or pushed twice. A retried transaction of pushes only succeeds, all
-- duplicates.
-------------------------------------------------------------------------
SELECT pg_temp.push('src', 6, 7) AS src_pushed;
SELECT txn FROM pg_temp.pop('src');
CREATE TEMP TABLE retry AS SELECT jsonb_build_object('operations', jsonb_build_array(
  jsonb_build_object('type', 'push', 'items', jsonb_build_array(
    jsonb_build_object('queue', 'dup', 'payload', 1, 'transactionId', 'd1'),
    jsonb_build_object('queue', 'dup', 'payload', 2, 'transactionId', 'd2'),
    jsonb_build_object('queue', 'dup', 'payload', 3, 'transactionId', 'd1'))))
  || pg_temp.acks()) AS body;
SELECT * FROM pg_temp.head((SELECT pg_temp.txn(body) FROM retry));
SELECT * FROM pg_temp.results((SELECT r FROM last));
CREATE TEMP TABLE first_ids AS SELECT DISTINCT e->>'transactionId' AS txn, e->>'messageId' AS mid
  FROM last, jsonb_array_elements(r->'results') e WHERE e->>'type' = 'push';
SELECT * FROM pg_temp.head((SELECT pg_temp.txn(body) FROM retry));
SELECT * FROM pg_temp.results((SELECT r FROM last));
SELECT count(*) AS pushes, bool_and(f.mid = e->>'messageId') AS same_message_ids
  FROM last, jsonb_array_elements(r->'results') e JOIN first_ids f ON f.txn = e->>'transactionId'
 WHERE e->>'type' = 'push';
SELECT * FROM pg_temp.cursor('src');
SELECT * FROM pg_temp.head((SELECT pg_temp.txn(jsonb_build_object('operations', jsonb_build_array(body->'operations'->0))) FROM retry));
SELECT * FROM pg_temp.results((SELECT r FROM last));
SELECT txn, data FROM pg_temp.pop('dup', auto => true);

-------------------------------------------------------------------------
-- Flat push ops: queue, partition, payload or data, transactionId, traceId;
-- producer_sub stamped from the caller.
-------------------------------------------------------------------------
SELECT * FROM pg_temp.head((SELECT pg_temp.txn('{"operations":[
  {"type":"push","queue":"flat","partition":"p1","payload":{"k":"payload"},"transactionId":"f1",
   "traceId":"11111111-2222-4333-8444-555555555555"},
  {"type":"push","queue":"flat","partition":"p1","data":{"k":"data"},"transactionId":"f2"},
  {"type":"push","queue":"flat","partition":"p1","payload":null,"data":"ignored","transactionId":"f3"},
  {"type":"push","queue":"flat","partition":"p1","transactionId":"f4","messageId":"11111111-2222-4333-8444-555555555555"},
  {"type":"push","queue":"flat","partition":"p1","items":null,"transactionId":"f5","namespace":"n","task":"t"}]}',
  NULL, 'svc-user')));
SELECT * FROM pg_temp.results((SELECT r FROM last));
SELECT * FROM pg_temp.pop('flat', 'p1', auto => true);
-- the message ids are the server's, never the client's messageId
SELECT count(*) AS client_message_ids FROM last, jsonb_array_elements(r->'results') e
 WHERE e->>'messageId' = '11111111-2222-4333-8444-555555555555';

-------------------------------------------------------------------------
-- Statuses through the ack core, as queen.ack normalises them: dlq dead
-- letters at once; failed uses the retry budget, then dead letters; retry
-- releases; a consumer group is honoured.
-------------------------------------------------------------------------
SELECT queen.configure('{"queue":"poison","options":{"retryLimit":1,"retryDelay":0}}') IS NOT NULL AS configured;
SELECT pg_temp.push('poison', 0, 1) AS pushed;
SELECT txn FROM pg_temp.pop('poison', grp => 'workers');
SELECT * FROM pg_temp.head((SELECT pg_temp.txn(jsonb_build_object('operations', jsonb_build_array(
  jsonb_build_object('type', 'ack', 'transactionId', 'm0', 'partitionId', pg_temp.pid('poison'),
                     'status', 'dlq', 'consumerGroup', 'workers', 'error', 'bad payload'))))));
SELECT * FROM pg_temp.results((SELECT r FROM last));
SELECT consumer_group, "offset", transaction_id, error, payload FROM queen.log_dlq;
SELECT * FROM pg_temp.cursor('poison', grp => 'workers');
-- failed with budget left: success, no dead letter, lease released, retried
SELECT txn FROM pg_temp.pop('poison', grp => 'workers');
SELECT * FROM pg_temp.head((SELECT pg_temp.txn(jsonb_build_object('operations',
  pg_temp.acks('failed', 'workers')))));
SELECT * FROM pg_temp.results((SELECT r FROM last));
SELECT * FROM pg_temp.cursor('poison', grp => 'workers');
-- failed again with the budget spent: dead letter
SELECT txn FROM pg_temp.pop('poison', grp => 'workers');
SELECT * FROM pg_temp.head((SELECT pg_temp.txn(jsonb_build_object('operations',
  pg_temp.acks('failed', 'workers')))));
SELECT * FROM pg_temp.results((SELECT r FROM last));
SELECT "offset", transaction_id, error, retry_count FROM queen.log_dlq WHERE transaction_id = 'm1';
SELECT * FROM pg_temp.cursor('poison', grp => 'workers');
-- a dead letter in a transaction that then fails is rolled back with it
SELECT pg_temp.push('poison', 2, 2) AS pushed;
SELECT txn FROM pg_temp.pop('poison', grp => 'workers');
SELECT * FROM pg_temp.head((SELECT pg_temp.txn(jsonb_build_object('operations',
  pg_temp.acks('dlq', 'workers') || '[{"type":"ack","transactionId":"x","partitionId":"00000000-0000-0000-0000-000000000000"}]'))));
SELECT count(*) AS dlq_rows FROM queen.log_dlq;
-- retry: released, cursor untouched
SELECT * FROM pg_temp.head((SELECT pg_temp.txn(jsonb_build_object('operations',
  pg_temp.acks('retry', 'workers')))));
SELECT * FROM pg_temp.cursor('poison', grp => 'workers');

-------------------------------------------------------------------------
-- An unknown op type fails the transaction; its result carries the type as
-- sent; ops after it are neither run nor listed.
-------------------------------------------------------------------------
SELECT * FROM pg_temp.head((SELECT pg_temp.txn('{"operations":[
  {"type":"push","items":[{"queue":"unk","payload":1}]},{"type":"delete","queue":"unk"},
  {"type":"push","queue":"unk","payload":2}]}')));
SELECT * FROM pg_temp.results((SELECT r FROM last));
SELECT r->'results'->1 AS unknown_result FROM last;
SELECT pg_temp.pid('unk') IS NULL AS no_unk_queue;
SELECT r->>'error' AS error, r->'results'->0 AS unknown_result
  FROM (SELECT queen.transaction('{"operations":[{"queue":"unk"}]}') AS r) x;
SELECT r->>'error' AS error, r->'results'->0 AS unknown_result
  FROM (SELECT queen.transaction('{"operations":[{"type":7}]}') AS r) x;
SELECT r->>'error' AS error FROM (SELECT queen.transaction('{"operations":[{"type":"PUSH","queue":"unk"}]}') AS r) x;
-- an ack failing before the unknown op is the failing op
SELECT * FROM pg_temp.head((SELECT pg_temp.txn('{"operations":[
  {"type":"ack","transactionId":"x","partitionId":"00000000-0000-0000-0000-000000000000"},{"type":"nope"}]}')));

-------------------------------------------------------------------------
-- Tenants: pushes land in the caller's tenant; an ack of another tenant's
-- partition is rejected and takes the call's pushes with it.
-------------------------------------------------------------------------
SELECT pg_temp.push('src', 8, 8) AS src_pushed;
SELECT txn FROM pg_temp.pop('src');
SELECT * FROM pg_temp.head((SELECT pg_temp.txn(jsonb_build_object('operations',
  '[{"type":"push","queue":"tb","payload":1}]'::jsonb || pg_temp.acks()), :'t_b')));
SELECT * FROM pg_temp.results((SELECT r FROM last), :'t_b');
SELECT pg_temp.pid('tb', tenant => :'t_b') IS NULL AS no_tb_queue;
SELECT * FROM pg_temp.cursor('src');
-- the same acks apply under the default tenant
SELECT * FROM pg_temp.head((SELECT pg_temp.txn(jsonb_build_object('operations', pg_temp.acks()))));
SELECT * FROM pg_temp.cursor('src');
-- tenant B's own pushes: B's queue of the same name, not the default tenant's
SELECT * FROM pg_temp.head((SELECT pg_temp.txn('{"operations":[{"type":"push","queue":"src","payload":"b"}]}', :'t_b')));
SELECT * FROM pg_temp.results((SELECT r FROM last), :'t_b');
SELECT txn, data FROM pg_temp.pop('src', tenant => :'t_b', auto => true);
SELECT txn, data FROM pg_temp.pop('src', auto => true);

-------------------------------------------------------------------------
-- Encryption as queen.push: an encrypted queue stores envelopes, pop decrypts.
-------------------------------------------------------------------------
SET queen_streams.encryption_key = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SELECT queen.configure('{"queue":"enc","options":{"encryptionEnabled":true}}') IS NOT NULL AS configured;
SELECT (pg_temp.head((SELECT pg_temp.txn('{"operations":[{"type":"push","items":[{"queue":"enc","payload":{"secret":"plain-marker"}}]}]}')))).success;
SELECT f.flags, position('plain-marker'::bytea IN queen.segment_decompress(s.blob)) > 0 AS plaintext_stored
  FROM queen.log_segments s, queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
 WHERE s.partition_id = pg_temp.pid('enc');
SELECT data FROM pg_temp.pop('enc', auto => true);
RESET queen_streams.encryption_key;

-------------------------------------------------------------------------
-- One push reader (issue 41): a transaction's push items are read by
-- push's item rules. A queue or partition name push refuses ("/", ".",
-- "..") is refused here with push's error, naming the item; nothing is
-- written.
-------------------------------------------------------------------------
SELECT field, name,
       pg_temp.try(format('SELECT queen.push(%L)', jsonb_build_object('items',
         jsonb_build_array(jsonb_build_object('queue', 'nm', field, name))))) AS push,
       pg_temp.try(format('SELECT queen.transaction(%L)', jsonb_build_object('operations',
         jsonb_build_array(jsonb_build_object('type', 'push', 'items',
           jsonb_build_array(jsonb_build_object('queue', 'nm', field, name))))))) AS transaction,
       pg_temp.try(format('SELECT queen.transaction(%L)', jsonb_build_object('operations',
         jsonb_build_array(jsonb_build_object('type', 'push', 'queue', 'nm', field, name))))) AS flat_op
  FROM (VALUES ('queue'), ('partition')) f(field), (VALUES ('a/b'), ('.'), ('..')) n(name)
 ORDER BY field, name;
SELECT count(*) AS nm_queues FROM queen.queues WHERE name IN ('nm', 'a/b', '.', '..');

-- A null payload is stored as push stores it (empty, read as null) by
-- push, push_text and a transaction; one not given is null in a push and
-- {} in a transaction (Queen's route). The stored frames, and a pop.
SELECT jsonb_array_length(queen.push('{"items":[{"queue":"pl_push","transactionId":"null","payload":null},
  {"queue":"pl_push","transactionId":"absent"},{"queue":"pl_push","transactionId":"null-data","payload":null,"data":7}]}')) AS pushed;
SELECT queen.push_text('{"items":[{"queue":"pl_text","transactionId":"null","payload":null},
  {"queue":"pl_text","transactionId":"absent"},{"queue":"pl_text","transactionId":"null-data","payload":null,"data":7}]}') IS NOT NULL AS pushed;
SELECT (pg_temp.head((SELECT pg_temp.txn('{"operations":[{"type":"push","items":[
  {"queue":"pl_txn","transactionId":"null","payload":null},{"queue":"pl_txn","transactionId":"absent"},
  {"queue":"pl_txn","transactionId":"null-data","payload":null,"data":7}]}]}')))).success;
SELECT q.name AS queue, f.transaction_id, quote_nullable(f.payload) AS stored
  FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id
  JOIN queen.log_segments s ON s.partition_id = p.id,
       queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
 WHERE q.name IN ('pl_push', 'pl_text', 'pl_txn')
 ORDER BY q.name, f.idx;
SELECT 'pl_push' AS queue, txn, data FROM pg_temp.pop('pl_push', auto => true);
SELECT 'pl_txn' AS queue, txn, data FROM pg_temp.pop('pl_txn', auto => true);

-- Not callable by PUBLIC; runs as its owner with a fixed search_path.
SELECT has_function_privilege('public', 'queen.transaction(jsonb, uuid, text)', 'EXECUTE') AS public_can_execute,
       p.prosecdef, p.proconfig
  FROM pg_proc p WHERE p.oid = 'queen.transaction(jsonb, uuid, text)'::regprocedure;

DROP EXTENSION queen_streams CASCADE;
