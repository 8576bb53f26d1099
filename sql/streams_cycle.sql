-- queen_streams.cycle (POST /streams/v1/cycle): validation, ownership, state
-- ops in order, the all-or-nothing rollback, sink packing and auto-create,
-- every row of the ack table, the lease guard, the response shape and the
-- exactly-once retry.
CREATE EXTENSION queen_streams;

\i test/include/helpers.sql

\set nobody '44444444-4444-4444-8444-444444444444'

-- Fixture ids by name, for the helpers below.
CREATE TEMP TABLE fx (name text PRIMARY KEY, id uuid NOT NULL);
CREATE FUNCTION pg_temp.fx(n text) RETURNS uuid LANGUAGE sql AS $$ SELECT id FROM fx WHERE name = n $$;

-- A cycle's response, generated parts checked and left out: query_id and
-- partition_id must echo the request, each push result's createdAt must be a
-- timestamp; `http` is queen_streams.http_status('cycle', response).
CREATE FUNCTION pg_temp.cyc(req jsonb, tenant uuid DEFAULT NULL,
	OUT success text, OUT error text, OUT applied int, OUT push_results jsonb,
	OUT ack_result jsonb, OUT queue text, OUT echo boolean, OUT http int)
LANGUAGE sql AS $$
	WITH c AS (SELECT queen_streams.cycle(req, tenant) AS r)
	SELECT r->>'success', r->>'error', (r->>'state_ops_applied')::int,
	       (SELECT coalesce(jsonb_agg(e - 'createdAt' ORDER BY n), '[]')
	          FROM jsonb_array_elements(r->'push_results') WITH ORDINALITY AS x(e, n)
	         WHERE e->>'status' <> 'queued' OR (e->>'createdAt')::timestamptz IS NOT NULL),
	       r->'ack_result', r->>'queueName',
	       r->>'query_id' = req->>'query_id' AND r->>'partition_id' = req->>'partition_id',
	       queen_streams.http_status('cycle', r)
	  FROM c
$$;

-- The cursor of a partition: `lease` says whose lease it holds (relative to
-- the lease the test expects), `live` whether it is unexpired.
CREATE FUNCTION pg_temp.cur(pid uuid, expect_lease text, grp text DEFAULT '__QUEUE_MODE__')
RETURNS TABLE (committed bigint, batch_end bigint, lease text, live boolean, retry int,
               attempt_offset bigint, attempt_count int, total_consumed bigint)
LANGUAGE sql AS $$
	SELECT c.committed, c.batch_end,
	       CASE WHEN c.worker_id IS NULL THEN 'none' WHEN c.worker_id = expect_lease THEN 'same' ELSE 'other' END,
	       c.lease_expires_at > now(), c.batch_retry_count, c.attempt_offset, c.attempt_count, c.total_consumed
	  FROM queen.log_consumers c WHERE c.partition_id = pid AND c.consumer_group = grp
$$;

-- Message ids as shown: generated ones (UUIDv7; the ids the tests give are
-- v4) as <v7>; `transactionId/id`, or just the id when both are the same.
CREATE FUNCTION pg_temp.ids(txn text, id text) RETURNS text LANGUAGE sql AS $$
	SELECT CASE WHEN txn = id THEN '' ELSE txn || '/' END
	    || regexp_replace(id, '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$', '<v7>')
$$;

-- The segments of a queue (per tenant): offsets and frames as ids=payload.
CREATE FUNCTION pg_temp.segs(queue text, tenant uuid DEFAULT '00000000-0000-0000-0000-000000000001')
RETURNS TABLE (part text, base bigint, "end" bigint, frames text)
LANGUAGE sql AS $$
	SELECT p.name, s.base_offset, s.end_offset,
	       (SELECT string_agg(pg_temp.ids(f.transaction_id, f.message_id::text) || '=' || f.payload,
	                          ' ' ORDER BY f.idx)
	          FROM queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f)
	  FROM queen.log_segments s
	  JOIN queen.log_partitions p ON p.id = s.partition_id
	  JOIN queen.queues q ON q.id = p.queue_id
	 WHERE q.name = queue AND q.tenant_id = tenant
	 ORDER BY p.name, s.base_offset
$$;

-- Number of segments, over every queue of every tenant.
CREATE FUNCTION pg_temp.nsegs() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM queen.log_segments $$;

-- The state shard of a query and partition, as key=value.
CREATE FUNCTION pg_temp.state(q uuid, pid uuid) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(key || '=' || value::text, ' ' ORDER BY key), '(empty)')
	  FROM queen_streams.state WHERE query_id = q AND partition_id = pid
$$;

-- The messages of a pop, in order: their ids (as above) and data.
CREATE FUNCTION pg_temp.popped(p jsonb) RETURNS TABLE (ids text, data jsonb) LANGUAGE sql AS $$
	SELECT pg_temp.ids(m->>'transactionId', m->>'id'), m->'data'
	  FROM jsonb_array_elements(p->'messages') WITH ORDINALITY AS x(m, n) ORDER BY n
$$;

-------------------------------------------------------------------------
-- Fixtures: the query cyc.q over cyc_src (3 messages, leased), tenant B with
-- its own cyc.q and its own cyc_src.
-------------------------------------------------------------------------
SELECT queen_streams.register_query(
  '{"name":"cyc.q","source_queue":"cyc_src","sink_queue":"cyc_sink","config_hash":"h"}')->>'query_id' AS q \gset
INSERT INTO queen_streams.quota (tenant_id) VALUES (:'t_b');
SELECT queen_streams.register_query(
  '{"name":"cyc.q","source_queue":"cyc_src","sink_queue":"cyc_sink","config_hash":"h"}', :'t_b')->>'query_id' AS q_b \gset
SELECT jsonb_array_length(queen.push('{"items":[{"queue":"cyc_src","payload":{"m":1}},
  {"queue":"cyc_src","payload":{"m":2}},{"queue":"cyc_src","payload":{"m":3}}]}')) AS pushed;
SELECT jsonb_array_length(queen.push('{"items":[{"queue":"cyc_src","payload":{"b":1}}]}', :'t_b')) AS pushed_b;
SELECT p->>'leaseId' AS lease, p->>'partitionId' AS pid, jsonb_array_length(p->'messages') AS n
  FROM queen.pop('cyc_src', batch => 10) p \gset
SELECT :n AS popped;
SELECT p->>'leaseId' AS lease_b, p->>'partitionId' AS pid_b FROM queen.pop('cyc_src', batch => 10, tenant => :'t_b') p \gset
INSERT INTO fx VALUES ('q', :'q'), ('q_b', :'q_b'), ('pid', :'pid'), ('pid_b', :'pid_b');
SELECT * FROM pg_temp.cur(:'pid', :'lease');

-------------------------------------------------------------------------
-- Validation: SQLSTATE 22023 (HTTP 400), before anything runs.
-------------------------------------------------------------------------
SELECT pg_temp.try($$SELECT queen_streams.cycle('{}')$$) AS empty_body;
SELECT pg_temp.try($$SELECT queen_streams.cycle('{"query_id":"","partition_id":"11111111-1111-4111-8111-111111111111"}')$$) AS empty_query_id;
SELECT pg_temp.try($$SELECT queen_streams.cycle('{"query_id":null,"partition_id":"11111111-1111-4111-8111-111111111111"}')$$) AS null_query_id;
SELECT pg_temp.try($$SELECT queen_streams.cycle('{"query_id":7,"partition_id":"11111111-1111-4111-8111-111111111111"}')$$) AS number_query_id;
SELECT pg_temp.try($$SELECT queen_streams.cycle('{"query_id":"11111111-1111-4111-8111-111111111111"}')$$) AS no_partition_id;
SELECT pg_temp.try($$SELECT queen_streams.cycle('{"query_id":"11111111-1111-4111-8111-111111111111","partition_id":""}')$$) AS empty_partition_id;
SELECT pg_temp.try($$SELECT queen_streams.cycle('{"query_id":"nope","partition_id":"11111111-1111-4111-8111-111111111111"}')$$) AS bad_query_id;
SELECT pg_temp.try($$SELECT queen_streams.cycle('{"query_id":"11111111-1111-4111-8111-111111111111","partition_id":"x"}')$$) AS bad_partition_id;
SELECT pg_temp.try(format($$SELECT queen_streams.cycle(%L)$$, jsonb_build_object('query_id', :'q', 'partition_id', :'pid', 'ack', 5))) AS number_ack;
SELECT pg_temp.try(format($$SELECT queen_streams.cycle(%L)$$, jsonb_build_object('query_id', :'q', 'partition_id', :'pid', 'ack', '[]'::jsonb))) AS array_ack;
SELECT pg_temp.try(format($$SELECT queen_streams.cycle(%L)$$, jsonb_build_object('query_id', :'q', 'partition_id', :'pid', 'state_ops', 'x'))) AS string_state_ops;
SELECT pg_temp.try(format($$SELECT queen_streams.cycle(%L)$$, jsonb_build_object('query_id', :'q', 'partition_id', :'pid', 'push_items', '{}'::jsonb))) AS object_push_items;
SELECT pg_temp.try(format($$SELECT queen_streams.cycle(%L)$$, jsonb_build_object('query_id', :'q', 'partition_id', :'pid', 'release_lease', 'no'))) AS string_release;
SELECT pg_temp.try(format($$SELECT queen_streams.cycle(%L)$$, jsonb_build_object('query_id', :'q', 'partition_id', :'pid', 'consumer_group', 5))) AS number_group;
SELECT pg_temp.try($$SELECT queen_streams.cycle('[]')$$) AS array_body;
SELECT pg_temp.try($$SELECT queen_streams.cycle(NULL)$$) AS null_body;

-------------------------------------------------------------------------
-- Ownership first: "partition not found" for an unknown partition or
-- another tenant's (checked before the query), "query not found" for an
-- unknown query or another tenant's. 200 with success:false; nothing of the
-- cycle (state ops, sink pushes, ack) is applied.
-------------------------------------------------------------------------
CREATE TEMP TABLE everything AS SELECT jsonb_build_object(
  'state_ops', '[{"type":"upsert","key":"own","value":{"v":1}}]'::jsonb,
  'push_items', '[{"queue":"cyc_own_sink","payload":{"v":1}}]'::jsonb,
  'ack', jsonb_build_object('leaseId', :'lease', 'count', 3)) AS body;
SELECT * FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'nobody') || (SELECT body FROM everything));
SELECT * FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid_b') || (SELECT body FROM everything));
SELECT * FROM pg_temp.cyc(jsonb_build_object('query_id', :'nobody', 'partition_id', :'pid') || (SELECT body FROM everything));
SELECT * FROM pg_temp.cyc(jsonb_build_object('query_id', :'q_b', 'partition_id', :'pid') || (SELECT body FROM everything));
SELECT * FROM pg_temp.cyc(jsonb_build_object('query_id', :'nobody', 'partition_id', :'nobody') || (SELECT body FROM everything));
-- Tenant B: the default tenant's partition and query are not its own.
SELECT * FROM pg_temp.cyc(jsonb_build_object('query_id', :'q_b', 'partition_id', :'pid') || (SELECT body FROM everything), :'t_b');
SELECT * FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid_b') || (SELECT body FROM everything), :'t_b');
-- Nothing happened anywhere.
SELECT count(*) AS state_rows FROM queen_streams.state;
SELECT count(*) AS own_sink_queues FROM queen.queues WHERE name = 'cyc_own_sink';
SELECT * FROM pg_temp.cur(:'pid', :'lease');
SELECT * FROM pg_temp.cur(:'pid_b', :'lease_b');

-------------------------------------------------------------------------
-- State ops are applied in order, scoped to (query, partition). An idle
-- flush (ack null) leaves the cursor and the lease alone.
-------------------------------------------------------------------------
SELECT * FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid', 'ack', NULL,
  'state_ops', '[{"type":"upsert","key":"k1","value":{"v":1}},
                 {"type":"upsert","key":"k2","value":{"v":2}},
                 {"type":"upsert","key":"k1","value":{"v":3}},
                 {"type":"delete","key":"k2"},
                 {"type":"upsert","key":"k3"},
                 {"type":"delete","key":"never-there"},
                 {"type":"upsert","key":"k4","value":{"v":4}},
                 {"type":"delete","key":"k4"},
                 {"type":"delete","key":"k5"},
                 {"type":"upsert","key":"k5","value":[5]},
                 {"type":"upsert","key":"k6","value":null}]'::jsonb));
SELECT pg_temp.state(:'q', :'pid');
SELECT query_id = :'q' AS query, partition_id = :'pid' AS part, count(*)
  FROM queen_streams.state GROUP BY 1, 2;
SELECT * FROM pg_temp.cur(:'pid', :'lease');
-- An empty cycle is a valid idle flush too (ack absent; arrays absent, null, []).
SELECT * FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid'));
SELECT * FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid', 'state_ops', NULL, 'push_items', '[]'::jsonb,
                                             'release_lease', false));
SELECT * FROM pg_temp.cur(:'pid', :'lease');

-------------------------------------------------------------------------
-- Any type other than upsert or delete fails the whole cycle, naming the
-- type: state, sink and cursor all unchanged (the upsert before it too).
-------------------------------------------------------------------------
SELECT pg_temp.nsegs() AS segs_before \gset
SELECT * FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'state_ops', '[{"type":"upsert","key":"k1","value":{"v":99}},{"type":"upsertt","key":"k9","value":{}}]'::jsonb,
  'push_items', '[{"queue":"cyc_never","payload":{"v":1}},{"queue":"cyc_src","payload":{"v":1}}]'::jsonb,
  'ack', jsonb_build_object('leaseId', :'lease', 'count', 3)));
SELECT pg_temp.state(:'q', :'pid');
SELECT pg_temp.nsegs() - :segs_before AS new_segments,
       (SELECT count(*) FROM queen.queues WHERE name = 'cyc_never') AS cyc_never_queues;
SELECT * FROM pg_temp.cur(:'pid', :'lease');
SELECT error FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'state_ops', '[{"key":"k1"}]'::jsonb));
SELECT error FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'state_ops', '[{"type":null,"key":"k1"}]'::jsonb));
SELECT error FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'state_ops', '[{"type":7,"key":"k1"}]'::jsonb));
SELECT error FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'state_ops', '[{"type":"UPSERT","key":"k1","value":{}}]'::jsonb));
SELECT error FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'state_ops', '[{"type":"delete","key":"k1"},{"type":"remove","key":"k3"}]'::jsonb));
SELECT error FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'state_ops', '["upsert"]'::jsonb));
SELECT error FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'state_ops', '[{"type":"upsert","value":{}}]'::jsonb));
SELECT pg_temp.state(:'q', :'pid');
-- A failed cycle's envelope: success:false with the error, nothing reported applied.
SELECT r - 'query_id' - 'partition_id' AS body, queen_streams.http_status('cycle', r) AS http
  FROM queen_streams.cycle(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
       'state_ops', '[{"type":"upsert","key":"k1","value":{}},{"type":"bogus","key":"k1"}]'::jsonb,
       'push_items', '[{"queue":"cyc_never","payload":1}]'::jsonb)) r;

-------------------------------------------------------------------------
-- Sink packing: empty queue skipped; partition defaults to Default; payload,
-- else data, else {}; given messageId/transactionId kept, else a UUIDv7
-- that is also the transaction id; grouped by (queue, partition) in
-- first-seen order, one segment each, offsets from the allocator.
-------------------------------------------------------------------------
SELECT * FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid', 'ack', NULL,
  'push_items', '[{"queue":"","payload":{"n":0}},
                  {"queue":"cyc_sink","payload":{"n":1}},
                  {"queue":"cyc_sink","partition":"p2","data":{"n":2}},
                  {"queue":"cyc_sink","payload":{"n":3},"messageId":"11111111-2222-4333-8444-555555555555","transactionId":"tx-3"},
                  {"queue":"cyc_sink2","payload":"four"},
                  {"queue":"cyc_sink","partition":"Default","payload":{"n":5},"data":{"ignored":true}},
                  {"queue":"cyc_sink"},
                  {"partition":"p2","payload":{"n":7}},
                  {"queue":null,"payload":{"n":8}},
                  {"queue":"cyc_sink","partition":"","payload":{"n":9}},
                  {"queue":"cyc_sink","transactionId":"","payload":{"n":10}},
                  {"queue":"cyc_sink","partition":"p2","transactionId":"tx-11","data":[11]},
                  {"queue":"cyc_sink","messageId":"11111111-2222-4333-8444-666666666666","payload":{"n":12}}]'::jsonb));
SELECT * FROM pg_temp.segs('cyc_sink');
SELECT * FROM pg_temp.segs('cyc_sink2');
-- Sink queues were auto-created under the request tenant.
SELECT name, tenant_id = :'t_def' AS default_tenant FROM queen.queues WHERE name LIKE 'cyc\_sink%' ORDER BY name;
-- The sink is an ordinary queue: a pop sees the messages, ids and payloads as packed.
SELECT * FROM pg_temp.popped(queen.pop('cyc_sink', 'Default', batch => 20));
SELECT * FROM pg_temp.popped(queen.pop('cyc_sink', 'p2', batch => 20));
-- The next push to the same partition continues its offsets.
SELECT push_results FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'push_items', '[{"queue":"cyc_sink","payload":{"n":13}},{"queue":"cyc_sink","payload":{"n":14}}]'::jsonb));
-- A given transactionId already on the partition is reported as a
-- duplicate (not an error) with its original's offset; alone it writes
-- nothing, and a fresh item beside it is still stored (one new segment).
SELECT pg_temp.nsegs() AS segs_before \gset
SELECT push_results FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'push_items', '[{"queue":"cyc_sink","payload":{"again":3},"transactionId":"tx-3"}]'::jsonb));
SELECT push_results FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'push_items', '[{"queue":"cyc_sink","payload":{"n":15}},{"queue":"cyc_sink","payload":{"again":11},"transactionId":"tx-3"}]'::jsonb));
SELECT pg_temp.nsegs() - :segs_before AS new_segments;
-- Two items of one cycle with the same transactionId: one frame.
SELECT push_results FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'push_items', '[{"queue":"cyc_sink3","payload":{"n":1},"transactionId":"tx-x"},
                  {"queue":"cyc_sink3","payload":{"n":2},"transactionId":"tx-x"}]'::jsonb));
SELECT * FROM pg_temp.segs('cyc_sink3');
-- A bad item fails the whole cycle.
SELECT error FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'push_items', '[{"queue":"cyc_sink","payload":1},{"queue":"cyc_sink","messageId":"nope"}]'::jsonb));
SELECT error FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'push_items', '[{"queue":"cyc_sink","payload":1},"cyc_sink"]'::jsonb));
SELECT error FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'push_items', '[{"queue":5,"payload":1}]'::jsonb));
-- One push reader (issue 41): sink items are read by push's item rules. A
-- name push refuses fails the cycle with push's error; nothing is written.
SELECT pg_temp.nsegs() AS segs_before \gset
SELECT item, error FROM (VALUES ('{"queue":"a/b","payload":1}'), ('{"queue":"..","payload":1}'),
                                ('{"queue":"cyc_sink","partition":"p/q","payload":1}'),
                                ('{"queue":"cyc_sink","partition":".","payload":1}')) v(item),
       pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
         'push_items', jsonb_build_array('{"queue":"cyc_sink","payload":1}'::jsonb, item::jsonb)));
SELECT pg_temp.nsegs() - :segs_before AS new_segments,
       (SELECT count(*) FROM queen.queues WHERE name IN ('a/b', '..')) AS bad_queues;
-- A null payload is stored as push stores it (empty, read as null); one
-- not given is {} (the protocol's default), as a transaction's.
SELECT push_results FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'push_items', '[{"queue":"cyc_pl","transactionId":"null","payload":null},
                  {"queue":"cyc_pl","transactionId":"absent"},
                  {"queue":"cyc_pl","transactionId":"null-data","payload":null,"data":7}]'::jsonb));
SELECT jsonb_array_length(queen.push('{"items":[{"queue":"cyc_pl","transactionId":"push-null","payload":null}]}')) AS pushed;
SELECT f.transaction_id, quote_nullable(f.payload) AS stored
  FROM queen.log_segments s, queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
 WHERE s.partition_id = pg_temp.pid('cyc_pl')
 ORDER BY s.base_offset, f.idx;

-- Tenant B: a sink named like the default tenant's resolves (and is
-- auto-created) under tenant B; the default tenant's queue is untouched.
SELECT pg_temp.nsegs() AS segs_before \gset
SELECT * FROM pg_temp.cyc(jsonb_build_object('query_id', :'q_b', 'partition_id', :'pid_b',
  'state_ops', '[{"type":"upsert","key":"kb","value":{"b":1}}]'::jsonb,
  'push_items', '[{"queue":"cyc_sink","payload":{"b":1}},{"queue":"cyc_sink_b","payload":{"b":2}}]'::jsonb), :'t_b');
SELECT name, CASE tenant_id WHEN :'t_def' THEN 'default' WHEN :'t_b' THEN 'b' END AS tenant
  FROM queen.queues WHERE name LIKE 'cyc\_sink%' ORDER BY name, tenant;
SELECT * FROM pg_temp.segs('cyc_sink', :'t_b');
SELECT * FROM pg_temp.segs('cyc_sink_b', :'t_b');
SELECT pg_temp.nsegs() - :segs_before AS new_segments;
SELECT pg_temp.state(:'q_b', :'pid_b') AS state_b;
-- An existing same-named queue of tenant B is the one B's sink resolves to.
SELECT push_results FROM pg_temp.cyc(jsonb_build_object('query_id', :'q_b', 'partition_id', :'pid_b',
  'push_items', '[{"queue":"cyc_sink","payload":{"b":3}}]'::jsonb), :'t_b');
SELECT * FROM pg_temp.segs('cyc_sink', :'t_b');
SELECT count(*) AS default_cyc_sink_default_segments FROM pg_temp.segs('cyc_sink') WHERE part = 'Default';

-- Encryption: a sink queue with encryption_enabled gets envelopes (flag 4,
-- {encrypted, iv, authTag}), decrypted again on pop; the flag is read from the
-- request tenant's own queue, never another tenant's same-named one; with no
-- key the cycle fails and stores nothing (encryption fails closed).
SELECT jsonb_array_length(queen.push('{"items":[{"queue":"cyc_enc","payload":{"seed":0}}]}')) AS pushed;
UPDATE queen.queues SET encryption_enabled = true WHERE name = 'cyc_enc' AND tenant_id = :'t_def';
SET queen_streams.encryption_key = '';
SELECT success, push_results FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'push_items', '[{"queue":"cyc_enc","payload":{"secret":1}}]'::jsonb));
SET queen_streams.encryption_key = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SELECT success, push_results FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'push_items', '[{"queue":"cyc_enc","payload":{"secret":2}}]'::jsonb));
SELECT success, push_results FROM pg_temp.cyc(jsonb_build_object('query_id', :'q_b', 'partition_id', :'pid_b',
  'push_items', '[{"queue":"cyc_enc","payload":{"secret":3}}]'::jsonb), :'t_b');
SELECT CASE q.tenant_id WHEN :'t_def' THEN 'default' ELSE 'b' END AS tenant, s.base_offset, f.flags,
       CASE WHEN f.flags & 4 = 4 THEN (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(f.payload::jsonb) k)
            ELSE f.payload END AS stored
  FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id
  JOIN queen.queues q ON q.id = p.queue_id, queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
 WHERE q.name = 'cyc_enc' ORDER BY 1 DESC, 2;
SELECT data FROM pg_temp.popped(queen.pop('cyc_enc', batch => 10));
RESET queen_streams.encryption_key;

-------------------------------------------------------------------------
-- The ack table. Each round pushes n fresh messages to cyc_round, pops them
-- (one lease over the whole batch), sets batch_retry_count to 2 and runs one
-- cycle with the given ack (leaseId added) and extra fields. Offsets are
-- shown relative to the cursor before the batch; `attempt` is the redelivery
-- telemetry (attempt_offset, attempt_count) pop recorded.
-------------------------------------------------------------------------
CREATE FUNCTION pg_temp.round(n int, ack jsonb, extra jsonb DEFAULT '{}', grp text DEFAULT NULL,
	OUT batch bigint, OUT committed bigint, OUT batch_end bigint, OUT lease text,
	OUT consumed bigint, OUT retry int, OUT attempt text,
	OUT ack_result jsonb, OUT success boolean, OUT error text)
LANGUAGE plpgsql AS $$
DECLARE
	g text := coalesce(grp, '__QUEUE_MODE__');
	p jsonb;
	pid uuid;
	l text;
	c0 bigint;
	t0 bigint;
	a0 bigint;
	n0 int;
	req jsonb;
	r jsonb;
	c record;
BEGIN
	-- start clean: a cursor for the group, nothing outstanding, no lease
	PERFORM queen.pop('cyc_round', consumer_group => grp, batch => 1000);
	UPDATE queen.log_consumers lc SET committed = lp.last_offset, worker_id = NULL,
	       lease_expires_at = NULL, batch_end = NULL
	  FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
	 WHERE lc.partition_id = lp.id AND q.name = 'cyc_round' AND lc.consumer_group = g;
	PERFORM queen.push(jsonb_build_object('items',
		(SELECT jsonb_agg(jsonb_build_object('queue', 'cyc_round', 'payload', jsonb_build_object('i', k)))
		   FROM generate_series(1, n) k)));
	p := queen.pop('cyc_round', consumer_group => grp, batch => 100);
	pid := (p->>'partitionId')::uuid;
	l := p->>'leaseId';
	UPDATE queen.log_consumers SET batch_retry_count = 2 WHERE partition_id = pid AND consumer_group = g;
	SELECT lc.committed, lc.total_consumed, lc.attempt_offset, lc.attempt_count INTO c0, t0, a0, n0
	  FROM queen.log_consumers lc WHERE partition_id = pid AND consumer_group = g;
	req := jsonb_build_object('query_id', pg_temp.fx('q'), 'partition_id', pid) || extra;
	IF jsonb_typeof(ack) = 'object' THEN
		req := req || jsonb_build_object('ack', jsonb_build_object('leaseId', l) || ack);
	ELSIF ack IS NOT NULL THEN
		req := req || jsonb_build_object('ack', ack);
	END IF;
	r := queen_streams.cycle(req);
	SELECT * INTO c FROM queen.log_consumers lc WHERE partition_id = pid AND consumer_group = g;
	batch := jsonb_array_length(p->'messages');
	committed := c.committed - c0;
	batch_end := c.batch_end - c0;
	lease := CASE WHEN c.worker_id IS NULL THEN 'none' WHEN c.worker_id = l THEN 'same' ELSE 'other' END
	         || CASE WHEN c.worker_id IS NOT NULL AND c.lease_expires_at <= now() THEN ' (expired)' ELSE '' END;
	consumed := c.total_consumed - t0;
	retry := c.batch_retry_count;
	attempt := CASE WHEN c.attempt_offset IS NULL AND c.attempt_count = 0 THEN 'cleared'
	                WHEN c.attempt_offset IS NOT DISTINCT FROM a0 AND c.attempt_count = n0 THEN 'kept'
	                ELSE 'changed' END;
	ack_result := r->'ack_result';
	success := (r->>'success')::boolean;
	error := r->>'error';
	RETURN;
END $$;

-- ok + release_lease true (the default): committed jumps to batch_end, lease
-- and retry state cleared, total_consumed grows by count. Every success
-- status, an absent one included; release_lease explicit true; the count
-- feeds only total_consumed (never negative).
SELECT 'completed' AS status, * FROM pg_temp.round(3, '{"status":"completed","count":3,"transactionId":"ignored"}');
SELECT 'success' AS status, * FROM pg_temp.round(3, '{"status":"success","count":3}');
SELECT 'acked' AS status, * FROM pg_temp.round(3, '{"status":"acked","count":3}');
SELECT 'ok' AS status, * FROM pg_temp.round(3, '{"status":"ok","count":3}');
SELECT '(absent)' AS status, * FROM pg_temp.round(3, '{"count":3}');
SELECT 'null' AS status, * FROM pg_temp.round(3, '{"status":null,"count":3}');
SELECT 'ok, release true' AS status, * FROM pg_temp.round(3, '{"status":"completed","count":3}', '{"release_lease":true}');
SELECT 'ok, count 1 of 3' AS status, * FROM pg_temp.round(3, '{"status":"completed","count":1}');
SELECT 'ok, count absent' AS status, * FROM pg_temp.round(3, '{"status":"completed"}');
SELECT 'ok, count -4' AS status, * FROM pg_temp.round(3, '{"status":"completed","count":-4}');
SELECT 'ok, count 10 of 3' AS status, * FROM pg_temp.round(3, '{"status":"completed","count":10}');
-- The cursor after a full ack.
SELECT c.committed = p.last_offset AS at_last_offset, c.batch_end, c.worker_id, c.lease_expires_at,
       c.batch_retry_count, c.attempt_offset, c.attempt_count
  FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'cyc_round';

-- not ok, either release_lease: the lease is released, the cursor and the
-- retry state untouched, the count forced to 0. Anything outside the
-- success set is a nack, a misspelling or another case included.
SELECT 'failed' AS status, * FROM pg_temp.round(3, '{"status":"failed","count":3}');
SELECT 'failed, release false' AS status, * FROM pg_temp.round(3, '{"status":"failed","count":3}', '{"release_lease":false}');
SELECT 'nack' AS status, * FROM pg_temp.round(3, '{"status":"nack","count":3}');
SELECT 'Completed' AS status, * FROM pg_temp.round(3, '{"status":"Completed","count":3}');
SELECT 'complete' AS status, * FROM pg_temp.round(3, '{"status":"complete","count":3}');
SELECT 'OK' AS status, * FROM pg_temp.round(3, '{"status":"OK","count":3}');
SELECT 'empty' AS status, * FROM pg_temp.round(3, '{"status":"","count":3}');
SELECT 'dlq' AS status, * FROM pg_temp.round(3, '{"status":"dlq","count":3}');
-- A nack redelivers the whole batch, in order, to the next pop.
SELECT 'failed' AS status, * FROM pg_temp.round(2, '{"status":"failed","count":2}');
SELECT * FROM pg_temp.popped(queen.pop('cyc_round', batch => 100));
-- A status that is not a string is not a success word either: a nack.
SELECT 'number' AS status, * FROM pg_temp.round(1, '{"status":5}');

-- ack null (or absent), either release_lease: the lease block is skipped.
SELECT 'ack null' AS status, * FROM pg_temp.round(3, 'null');
SELECT 'ack null, release false' AS status, * FROM pg_temp.round(3, 'null', '{"release_lease":false}');
SELECT 'ack absent' AS status, * FROM pg_temp.round(3, NULL);
SELECT 'ack absent, release true' AS status, * FROM pg_temp.round(3, NULL, '{"release_lease":true}');

-- consumer_group defaults to __QUEUE_MODE__ when absent, null or empty; a
-- named group acks its own cursor.
SELECT 'group ""' AS status, * FROM pg_temp.round(2, '{"count":2}', '{"consumer_group":""}');
SELECT 'group null' AS status, * FROM pg_temp.round(2, '{"count":2}', '{"consumer_group":null}');
SELECT 'group __QUEUE_MODE__' AS status, * FROM pg_temp.round(2, '{"count":2}', '{"consumer_group":"__QUEUE_MODE__"}');
SELECT 'group streams.cyc.q' AS status, * FROM pg_temp.round(2, '{"count":2}', '{"consumer_group":"streams.cyc.q"}', 'streams.cyc.q');
-- ... and a lease of another group is not a lease of the default one.
SELECT 'leased by streams.cyc.q, acked as default' AS status, * FROM pg_temp.round(2, '{"count":2}', '{}', 'streams.cyc.q');

-------------------------------------------------------------------------
-- ok + release_lease false (the gate's partial ack): committed advances by
-- exactly `count` frames over the real segment ranges, skipping offsets
-- retention removed; the lease (and batch_end) is kept.
-------------------------------------------------------------------------
-- cyc_gate: segments [0,1] [2,4] [5,6] [7,8] [9], all leased in one batch.
SELECT count(*) AS pushed FROM generate_series(1, 5) s,
  LATERAL (SELECT queen.push(jsonb_build_object('items',
    (SELECT jsonb_agg(jsonb_build_object('queue', 'cyc_gate', 'payload', jsonb_build_object('seg', s, 'i', k)))
       FROM generate_series(1, (ARRAY[2,3,2,2,1])[s]) k)))) x;
SELECT p->>'leaseId' AS glease, p->>'partitionId' AS gpid FROM queen.pop('cyc_gate', batch => 100) p \gset
SELECT base_offset, end_offset FROM queen.log_segments WHERE partition_id = :'gpid' ORDER BY 1;
CREATE TEMP TABLE gate_req AS SELECT jsonb_build_object('query_id', :'q', 'partition_id', :'gpid',
  'release_lease', false, 'ack', jsonb_build_object('leaseId', :'glease', 'status', 'completed')) AS req;
CREATE FUNCTION pg_temp.gate(cnt jsonb) RETURNS TABLE (ack_result jsonb, success text, error text) LANGUAGE sql AS $$
	SELECT r->'ack_result', r->>'success', r->>'error'
	  FROM gate_req, queen_streams.cycle(jsonb_set(req, '{ack,count}', cnt)) r
$$;
SELECT * FROM pg_temp.cur(:'gpid', :'glease');
SELECT * FROM pg_temp.gate('1');
SELECT * FROM pg_temp.cur(:'gpid', :'glease');
SELECT * FROM pg_temp.gate('0');
SELECT * FROM pg_temp.cur(:'gpid', :'glease');
-- Retention removes the segment [2,4] (aged past a 60 s retention).
UPDATE queen.queues SET retention_enabled = true, retention_seconds = 60 WHERE name = 'cyc_gate';
UPDATE queen.log_segments SET created_at = now() - interval '1 hour' WHERE partition_id = :'gpid' AND base_offset = 2;
UPDATE queen.log_partitions SET oldest_live_at = now() - interval '1 hour' WHERE id = :'gpid';
SELECT queen.retention_sweep() ->> 'segmentsDeleted' AS swept;
SELECT base_offset, end_offset FROM queen.log_segments WHERE partition_id = :'gpid' ORDER BY 1;
-- 3 frames from offset 1: 1, then 5 and 6 (2..4 are gone and not counted).
SELECT * FROM pg_temp.gate('3');
SELECT * FROM pg_temp.cur(:'gpid', :'glease');
-- More than is left of the batch: the walk stops at batch_end (7, 8, 9).
SELECT * FROM pg_temp.gate('5');
SELECT * FROM pg_temp.cur(:'gpid', :'glease');
SELECT * FROM pg_temp.gate('2');
SELECT * FROM pg_temp.cur(:'gpid', :'glease');
-- The lease is still the guard: a full ack now releases it.
SELECT r->'ack_result' AS ack_result FROM gate_req,
  queen_streams.cycle(jsonb_set(req - 'release_lease', '{ack,count}', '0')) r;
SELECT * FROM pg_temp.cur(:'gpid', :'glease');
-- The walk starting inside a retention gap: segments [10,11] [12,13], the
-- first removed after the pop.
SELECT jsonb_array_length(queen.push('{"items":[{"queue":"cyc_gate","payload":{"seg":6,"i":1}},{"queue":"cyc_gate","payload":{"seg":6,"i":2}}]}')) AS pushed;
SELECT jsonb_array_length(queen.push('{"items":[{"queue":"cyc_gate","payload":{"seg":7,"i":1}},{"queue":"cyc_gate","payload":{"seg":7,"i":2}}]}')) AS pushed;
SELECT p->>'leaseId' AS glease FROM queen.pop('cyc_gate', batch => 100) p \gset
UPDATE gate_req SET req = jsonb_set(req, '{ack,leaseId}', to_jsonb(:'glease'::text));
UPDATE queen.log_segments SET created_at = now() - interval '1 hour' WHERE partition_id = :'gpid' AND base_offset = 10;
UPDATE queen.log_partitions SET oldest_live_at = now() - interval '1 hour' WHERE id = :'gpid';
SELECT queen.retention_sweep() ->> 'segmentsDeleted' AS swept;
SELECT * FROM pg_temp.cur(:'gpid', :'glease');
SELECT * FROM pg_temp.gate('1');
SELECT * FROM pg_temp.cur(:'gpid', :'glease');
-- The un-acked tail comes back, in order, once the lease expires.
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second' WHERE partition_id = :'gpid';
SELECT * FROM pg_temp.popped(queen.pop('cyc_gate', batch => 100));

-------------------------------------------------------------------------
-- The lease guard: an absent, empty, foreign or expired leaseId, a cursor
-- without a lease, or no cursor row at all answers success:false "invalid
-- or expired lease", and the whole cycle (state ops, sink pushes, a sink
-- queue's auto-creation) rolls back. The lease is checked before the status.
-------------------------------------------------------------------------
SELECT jsonb_array_length(queen.push('{"items":[{"queue":"cyc_src","payload":{"m":4}}]}')) AS pushed;
SELECT pg_temp.nsegs() AS segs_before \gset
CREATE TEMP TABLE guarded AS SELECT jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'state_ops', '[{"type":"upsert","key":"guarded","value":{"v":1}}]'::jsonb,
  'push_items', '[{"queue":"cyc_guard_sink","payload":{"v":1}},{"queue":"cyc_sink","payload":{"v":1}}]'::jsonb) AS req;
CREATE FUNCTION pg_temp.guarded(ack jsonb, extra jsonb DEFAULT '{}')
RETURNS TABLE (success text, error text, applied int, push_results jsonb, ack_result jsonb) LANGUAGE sql AS $$
	SELECT success, error, applied, push_results, ack_result
	  FROM guarded, pg_temp.cyc(req || jsonb_build_object('ack', ack) || extra)
$$;
SELECT * FROM pg_temp.cur(:'pid', :'lease');
SELECT 'absent' AS lease_id, * FROM pg_temp.guarded('{"status":"completed","count":3}');
SELECT 'null' AS lease_id, * FROM pg_temp.guarded('{"leaseId":null,"count":3}');
SELECT 'empty' AS lease_id, * FROM pg_temp.guarded('{"leaseId":"","count":3}');
SELECT 'foreign' AS lease_id, * FROM pg_temp.guarded('{"leaseId":"01900000-0000-7000-8000-000000000000","count":3}');
SELECT 'tenant b''s' AS lease_id, * FROM pg_temp.guarded(jsonb_build_object('leaseId', :'lease_b', 'count', 3));
SELECT 'foreign, nack' AS lease_id, * FROM pg_temp.guarded('{"leaseId":"someone-else","status":"failed"}');
SELECT 'foreign, partial' AS lease_id, * FROM pg_temp.guarded('{"leaseId":"someone-else","count":1}', '{"release_lease":false}');
SELECT 'own, other group' AS lease_id, * FROM pg_temp.guarded(jsonb_build_object('leaseId', :'lease', 'count', 3), '{"consumer_group":"nobody"}');
-- Expired: the right leaseId, past lease_expires_at.
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second' WHERE partition_id = :'pid';
SELECT 'own, expired' AS lease_id, * FROM pg_temp.guarded(jsonb_build_object('leaseId', :'lease', 'count', 3));
SELECT 'own, expired, nack' AS lease_id, * FROM pg_temp.guarded(jsonb_build_object('leaseId', :'lease', 'status', 'failed'));
SELECT 'own, expired, partial' AS lease_id, * FROM pg_temp.guarded(jsonb_build_object('leaseId', :'lease', 'count', 1), '{"release_lease":false}');
-- Nothing of any of them committed.
SELECT pg_temp.state(:'q', :'pid');
SELECT pg_temp.nsegs() - :segs_before AS new_segments,
       (SELECT count(*) FROM queen.queues WHERE name = 'cyc_guard_sink') AS guard_sink_queues;
SELECT * FROM pg_temp.cur(:'pid', :'lease');
-- A cursor with no lease at all.
UPDATE queen.log_consumers SET worker_id = NULL, lease_expires_at = NULL, batch_end = NULL WHERE partition_id = :'pid';
SELECT 'own, released' AS lease_id, * FROM pg_temp.guarded(jsonb_build_object('leaseId', :'lease', 'count', 3));
-- A live lease without a leased batch: an ok + release ack has nothing to
-- complete ("no leased batch"); the partial ack walks nothing.
SELECT p->>'leaseId' AS lease FROM queen.pop('cyc_src', batch => 10) p \gset
UPDATE queen.log_consumers SET batch_end = NULL WHERE partition_id = :'pid';
SELECT 'own, no batch' AS lease_id, * FROM pg_temp.guarded(jsonb_build_object('leaseId', :'lease', 'count', 3));
SELECT 'own, no batch, partial' AS lease_id, success, error, ack_result
  FROM pg_temp.guarded(jsonb_build_object('leaseId', :'lease', 'count', 3), '{"release_lease":false,"state_ops":[],"push_items":[]}');
SELECT * FROM pg_temp.cur(:'pid', :'lease');
UPDATE queen.log_consumers SET worker_id = NULL, lease_expires_at = NULL WHERE partition_id = :'pid';

-------------------------------------------------------------------------
-- The response shape of a committed cycle, and its HTTP status (always 200).
-------------------------------------------------------------------------
SELECT p->>'leaseId' AS lease FROM queen.pop('cyc_src', batch => 10) p \gset
SELECT * FROM pg_temp.cur(:'pid', :'lease');
SELECT (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(r) k) AS fields,
       r->'query_id' = to_jsonb(:'q'::text) AS query_id_echoed,
       r->'partition_id' = to_jsonb(:'pid'::text) AS partition_id_echoed,
       r - 'query_id' - 'partition_id' - 'push_results' AS rest,
       (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(r->'push_results'->0) k) AS push_result_fields,
       (r->'push_results'->0) - 'createdAt' AS push_result,
       queen_streams.http_status('cycle', r) AS http
  FROM queen_streams.cycle(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
       'consumer_group', '__QUEUE_MODE__',
       'state_ops', '[{"type":"upsert","key":"shape","value":{"v":1}},{"type":"delete","key":"shape"},{"type":"upsert","key":"k1","value":{"v":4}}]'::jsonb,
       'push_items', '[{"queue":"cyc_shape_sink","payload":{"v":1}}]'::jsonb,
       'ack', jsonb_build_object('transactionId', 'ignored', 'leaseId', :'lease', 'status', 'completed', 'count', 4))) r;
SELECT * FROM pg_temp.cur(:'pid', :'lease');
SELECT pg_temp.state(:'q', :'pid');
SELECT b AS body, queen_streams.http_status('cycle', b) AS http
  FROM (VALUES ('{"success":true}'::jsonb), ('{"success":false,"error":"invalid or expired lease"}'),
               ('{"error":"x"}'), ('{}')) v(b);

-------------------------------------------------------------------------
-- Exactly-once: a cycle retried after its commit (same lease, response lost)
-- fails on the lease and pushes nothing twice.
-------------------------------------------------------------------------
SELECT jsonb_array_length(queen.push('{"items":[{"queue":"cyc_src","payload":{"m":5}},{"queue":"cyc_src","payload":{"m":6}}]}')) AS pushed;
SELECT p->>'leaseId' AS lease FROM queen.pop('cyc_src', batch => 10) p \gset
CREATE TEMP TABLE eo AS SELECT jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
  'state_ops', '[{"type":"upsert","key":"eo","value":{"sum":11}}]'::jsonb,
  'push_items', '[{"queue":"cyc_eo_sink","payload":{"sum":11}}]'::jsonb,
  'ack', jsonb_build_object('leaseId', :'lease', 'status', 'completed', 'count', 2)) AS req;
SELECT * FROM pg_temp.cur(:'pid', :'lease');
SELECT c.* FROM eo, pg_temp.cyc(req) c;
SELECT * FROM pg_temp.segs('cyc_eo_sink');
SELECT * FROM pg_temp.cur(:'pid', :'lease');
SELECT updated_at AS eo_at FROM queen_streams.state WHERE query_id = :'q' AND key = 'eo' \gset
-- The retry.
SELECT c.* FROM eo, pg_temp.cyc(req) c;
SELECT * FROM pg_temp.segs('cyc_eo_sink');
SELECT * FROM pg_temp.cur(:'pid', :'lease');
SELECT updated_at = :'eo_at' AS state_row_untouched FROM queen_streams.state WHERE query_id = :'q' AND key = 'eo';
-- Retried again after another worker leased the next batch: still refused.
SELECT jsonb_array_length(queen.push('{"items":[{"queue":"cyc_src","payload":{"m":7}}]}')) AS pushed;
SELECT p->>'leaseId' AS lease2 FROM queen.pop('cyc_src', batch => 10) p \gset
SELECT c.* FROM eo, pg_temp.cyc(req) c;
SELECT * FROM pg_temp.segs('cyc_eo_sink');
SELECT * FROM pg_temp.cur(:'pid', :'lease2');
SELECT pg_temp.state(:'q', :'pid');
SELECT updated_at = :'eo_at' AS state_row_untouched FROM queen_streams.state WHERE query_id = :'q' AND key = 'eo';
-- The retry of a partial ack (release_lease false) is NOT guarded: its lease
-- is kept by design, so a retry commits again (facts 6.3): exactly-once
-- rests on the released lease, so only a full ack guards its retry.
SELECT c.success, c.push_results, c.ack_result
  FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid', 'release_lease', false,
       'push_items', '[{"queue":"cyc_eo_sink","payload":{"gate":1}}]'::jsonb,
       'ack', jsonb_build_object('leaseId', :'lease2', 'count', 0))) c;
SELECT c.success, c.push_results, c.ack_result
  FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid', 'release_lease', false,
       'push_items', '[{"queue":"cyc_eo_sink","payload":{"gate":1}}]'::jsonb,
       'ack', jsonb_build_object('leaseId', :'lease2', 'count', 0))) c;
SELECT * FROM pg_temp.segs('cyc_eo_sink');

-- A sink group mixing fresh and duplicate items, with the source ack: the
-- fresh items are stored, the duplicate is reported with its original's
-- offset, and the ack (of lease2, still held) commits in the same transaction.
SELECT queen.push('{"items":[{"queue":"cyc_mix","transactionId":"mix-1","payload":{"old":1}}]}')->0->>'status' AS original;
SELECT c.success, c.push_results, c.ack_result
  FROM pg_temp.cyc(jsonb_build_object('query_id', :'q', 'partition_id', :'pid',
       'push_items', '[{"queue":"cyc_mix","transactionId":"mix-0","payload":{"fresh":0}},
                       {"queue":"cyc_mix","transactionId":"mix-1","payload":{"again":1}},
                       {"queue":"cyc_mix","payload":{"fresh":2}}]'::jsonb,
       'ack', jsonb_build_object('leaseId', :'lease2', 'count', 1))) c;
SELECT * FROM pg_temp.segs('cyc_mix');
SELECT committed, lease FROM pg_temp.cur(:'pid', :'lease2');

DROP EXTENSION queen_streams CASCADE;
