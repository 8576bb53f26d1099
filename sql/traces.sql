-- Message traces: queen.trace_add (POST /api/v1/traces), queen.traces
-- (GET /api/v1/traces/:p/:t), queen.traces_by_name (GET
-- /api/v1/traces/by-name/:name) and queen.trace_names (GET
-- /api/v1/traces/names): every field and default, validation, the message
-- check, paging with totals, tenant isolation, and removal with the queue.
CREATE EXTENSION queen_streams;
SET timezone = 'UTC';

\i test/include/helpers.sql

CREATE FUNCTION pg_temp.push(q text, a int, b int, part text DEFAULT 'Default', tenant uuid DEFAULT NULL)
RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(r->>'status', ',')
	  FROM jsonb_array_elements(queen.push(jsonb_build_object('items',
	         (SELECT jsonb_agg(jsonb_build_object('queue', q, 'partition', part,
	                   'transactionId', 'm' || i, 'payload', jsonb_build_object('i', i)) ORDER BY i)
	            FROM generate_series(a, b) i)), tenant)) r
$$;
-- Add a trace for (queue, partition, txn) with extra body fields.
CREATE FUNCTION pg_temp.add(q text, part text, txn text, extra jsonb, tenant uuid DEFAULT NULL)
RETURNS jsonb LANGUAGE sql AS $$
	SELECT queen.trace_add(jsonb_build_object('transactionId', txn,
	         'partitionId', pg_temp.pid(q, part, coalesce(tenant, '00000000-0000-0000-0000-000000000001'))) || extra,
	         tenant)
$$;
-- One line per trace of an answer; ids and times checked against the table.
CREATE FUNCTION pg_temp.tr(r jsonb)
RETURNS TABLE (n bigint, txn text, pid_ok boolean, grp text, event text, names jsonb, data jsonb,
               queue text, part text, row_ok boolean)
LANGUAGE sql AS $$
	SELECT e.n, t->>'transactionId', (t->>'partitionId')::uuid = pg_temp.pid(coalesce(t->>'queueName', 'tq'),
	         coalesce(t->>'partitionName', 'p1')), t->>'consumerGroup', t->>'eventType', t->'traceNames',
	       t->'data', t->>'queueName', t->>'partitionName',
	       EXISTS (SELECT 1 FROM queen.message_traces x WHERE x.id = (t->>'id')::uuid
	                  AND x.created_at = (t->>'createdAt')::timestamptz)
	  FROM jsonb_array_elements(r->'traces') WITH ORDINALITY AS e(t, n)
	 ORDER BY e.n
$$;

SELECT pg_temp.push('tq', 0, 2, 'p1'), pg_temp.push('tq', 0, 0, 'p2'), pg_temp.push('tq', 0, 0, tenant => :'t_b');

-------------------------------------------------------------------------
-- queen.trace_add: defaults (consumerGroup __QUEUE_MODE__, eventType info,
-- no names), every field, names deduplicated and sorted, any JSON as data.
-------------------------------------------------------------------------
CREATE TEMP TABLE added (label text, r jsonb);
INSERT INTO added SELECT 'minimal', pg_temp.add('tq', 'p1', 'm0', '{"data":{"step":1}}');
SELECT label, pg_temp.mask(r) FROM added;
SELECT (r->>'traceId')::uuid = (SELECT id FROM queen.message_traces) AS trace_id_ok FROM added;
INSERT INTO added SELECT 'all fields', pg_temp.add('tq', 'p1', 'm0',
  '{"data":{"step":2},"consumerGroup":"g1","eventType":"processing","traceNames":"flow-a"}');
INSERT INTO added SELECT 'names array', pg_temp.add('tq', 'p1', 'm0',
  '{"data":"text data","eventType":"error","traceNames":["flow-b","flow-a","","flow-b"]}');
INSERT INTO added SELECT 'empties', pg_temp.add('tq', 'p1', 'm0',
  '{"data":[1,2],"consumerGroup":"","eventType":"","traceNames":null}');
INSERT INTO added SELECT 'empty name', pg_temp.add('tq', 'p1', 'm1', '{"data":7,"traceNames":""}');
INSERT INTO added SELECT 'p1 m1', pg_temp.add('tq', 'p1', 'm1', '{"data":{},"traceNames":["flow-a"]}');
INSERT INTO added SELECT 'p2 m0', pg_temp.add('tq', 'p2', 'm0', '{"data":{},"traceNames":["flow-a","flow-c"]}');
INSERT INTO added SELECT 'unknown keys', pg_temp.add('tq', 'p1', 'm2', '{"data":{},"workerId":"w1","extra":true}');
SELECT label, r->>'success' AS success FROM added ORDER BY label;
SELECT consumer_group, event_type, trace_names, data, tenant_id = '00000000-0000-0000-0000-000000000001' AS default_tenant
  FROM queen.message_traces ORDER BY created_at;

-- Validation: 22023.
SELECT pg_temp.try($$SELECT queen.trace_add(NULL)$$) AS null_body;
SELECT pg_temp.try($$SELECT queen.trace_add('[]')$$) AS array_body;
SELECT pg_temp.try($$SELECT queen.trace_add('{}')$$) AS empty_body;
SELECT pg_temp.try($$SELECT queen.trace_add('{"transactionId":"m0","data":{}}')$$) AS no_partition;
SELECT pg_temp.try($$SELECT queen.trace_add('{"partitionId":"01890a5d-ac96-774b-bcce-b302099a8057","data":{}}')$$) AS no_txn;
SELECT pg_temp.try($$SELECT queen.trace_add('{"transactionId":"","partitionId":"01890a5d-ac96-774b-bcce-b302099a8057","data":{}}')$$) AS empty_txn;
SELECT pg_temp.try($$SELECT queen.trace_add('{"transactionId":"m0","partitionId":null,"data":{}}')$$) AS null_partition;
SELECT pg_temp.try($$SELECT queen.trace_add('{"transactionId":5,"partitionId":"01890a5d-ac96-774b-bcce-b302099a8057","data":{}}')$$) AS number_txn;
SELECT pg_temp.try($$SELECT queen.trace_add('{"transactionId":"m0","partitionId":"nope","data":{}}')$$) AS bad_partition;
SELECT pg_temp.try($$SELECT queen.trace_add('{"transactionId":"m0","partitionId":"01890a5d-ac96-774b-bcce-b302099a8057"}')$$) AS no_data;
SELECT pg_temp.try($$SELECT queen.trace_add('{"transactionId":"m0","partitionId":"01890a5d-ac96-774b-bcce-b302099a8057","data":null}')$$) AS null_data;
SELECT pg_temp.try(format($$SELECT pg_temp.add('tq', 'p1', 'm0', %L)$$, x)) AS bad_field
  FROM unnest(ARRAY['{"data":{},"traceNames":5}', '{"data":{},"traceNames":{"a":1}}',
                    '{"data":{},"traceNames":["a",1]}', '{"data":{},"eventType":5}',
                    '{"data":{},"consumerGroup":true}']) x;

-- The message must be the tenant's: unknown partition, another tenant's
-- partition, an unknown transaction id (42704, nothing written).
SELECT pg_temp.try($$SELECT queen.trace_add('{"transactionId":"m0","partitionId":"01890a5d-ac96-774b-bcce-b302099a8057","data":{}}')$$) AS unknown_partition;
SELECT pg_temp.try(format($$SELECT queen.trace_add('{"transactionId":"m0","partitionId":"%s","data":{}}', %L)$$,
                          pg_temp.pid('tq', 'p1'), :'t_b')) AS other_tenant;
SELECT pg_temp.try($$SELECT pg_temp.add('tq', 'p1', 'zzz', '{"data":{}}')$$) AS unknown_txn;
SELECT count(*) AS traces FROM queen.message_traces;
-- A dead letter whose segment retention removed is still traceable.
SELECT pg_temp.push('tq_dead', 0, 0);
SELECT (queen.ack(jsonb_build_object('transactionId', 'm0', 'partitionId', r->>'partitionId',
          'leaseId', r->>'leaseId', 'status', 'dlq')))->0->>'dlq' AS dead
  FROM (SELECT queen.pop('tq_dead') AS r) p;
DELETE FROM queen.log_segments WHERE partition_id = pg_temp.pid('tq_dead');
UPDATE queen.log_partitions SET log_start = last_offset + 1 WHERE id = pg_temp.pid('tq_dead');
SELECT pg_temp.add('tq_dead', 'Default', 'm0', '{"data":{}}')->>'success' AS dead_letter_traced;
SELECT pg_temp.try($$SELECT pg_temp.add('tq_dead', 'Default', 'm1', '{"data":{}}')$$) AS gone_no_dead_letter;
-- Beyond the newest 256 hash rows the message cannot be ruled out cheaply:
-- the trace is taken.
SELECT pg_temp.push('tq_many', 0, 0);
SELECT count(pg_temp.push('tq_many', i, i)) AS pushes FROM generate_series(1, 300) i;
SELECT pg_temp.add('tq_many', 'Default', 'm0', '{"data":{}}')->>'success' AS old_message;
SELECT pg_temp.add('tq_many', 'Default', 'never', '{"data":{}}')->>'success' AS unverifiable;
SELECT pg_temp.add('tq_many', 'Default', 'm300', '{"data":{}}')->>'success' AS recent_message;
-- Tenant B traces its own message.
SELECT pg_temp.add('tq', 'Default', 'm0', '{"data":{"b":1},"traceNames":["flow-a","flow-b"]}', :'t_b')->>'success' AS tenant_b;

-------------------------------------------------------------------------
-- queen.traces: one message's traces, oldest first.
-------------------------------------------------------------------------
SELECT pg_temp.mask(queen.traces(pg_temp.pid('tq', 'p1'), 'm1'));
SELECT * FROM pg_temp.tr(queen.traces(pg_temp.pid('tq', 'p1'), 'm0'));
SELECT array_agg(k ORDER BY k) AS trace_keys
  FROM jsonb_object_keys(queen.traces(pg_temp.pid('tq', 'p1'), 'm0')->'traces'->0) k;
-- Nothing for another tenant, an unknown message, or an unknown partition.
SELECT queen.traces(pg_temp.pid('tq', 'p1'), 'm0', :'t_b') AS other_tenant;
SELECT queen.traces(pg_temp.pid('tq', 'p1'), 'zzz') AS unknown_txn;
SELECT queen.traces('01890a5d-ac96-774b-bcce-b302099a8057', 'm0') AS unknown_partition;
SELECT jsonb_array_length(queen.traces(pg_temp.pid('tq', 'Default', :'t_b'), 'm0', :'t_b')->'traces') AS tenant_b_own;
SELECT pg_temp.try($$SELECT queen.traces(NULL, 'm0')$$) AS null_partition;
SELECT pg_temp.try($$SELECT queen.traces('01890a5d-ac96-774b-bcce-b302099a8057', NULL)$$) AS null_txn;
SELECT pg_temp.try($$SELECT queen.traces('01890a5d-ac96-774b-bcce-b302099a8057', '')$$) AS empty_txn;

-------------------------------------------------------------------------
-- queen.traces_by_name: oldest first, paged, with the total, plus the
-- queue and partition names.
-------------------------------------------------------------------------
SELECT array_agg(k ORDER BY k) AS answer_keys FROM jsonb_object_keys(queen.traces_by_name('flow-a')) k;
SELECT array_agg(k ORDER BY k) AS trace_keys FROM jsonb_object_keys(queen.traces_by_name('flow-a')->'traces'->0) k;
SELECT r->'total' AS total, r->'pagination' AS pagination FROM queen.traces_by_name('flow-a') r;
SELECT * FROM pg_temp.tr(queen.traces_by_name('flow-a'));
SELECT f.label, r->'total' AS total, r->'pagination' AS pagination,
       (SELECT string_agg(t->>'transactionId' || '/' || (t->>'partitionName') || '/' || (t->>'eventType'), ' ' ORDER BY n)
          FROM jsonb_array_elements(r->'traces') WITH ORDINALITY AS e(t, n)) AS traces
  FROM (VALUES
	('flow-a limit 2', queen.traces_by_name('flow-a', 2)),
	('flow-a limit 2 offset 2', queen.traces_by_name('flow-a', 2, 2)),
	('flow-a offset 4', queen.traces_by_name('flow-a', off => 4)),
	('flow-a limit 0', queen.traces_by_name('flow-a', 0)),
	('flow-a nulls', queen.traces_by_name('flow-a', NULL, NULL)),
	('flow-b', queen.traces_by_name('flow-b')),
	('flow-c', queen.traces_by_name('flow-c')),
	('nope', queen.traces_by_name('nope')),
	('flow-a tenant b', queen.traces_by_name('flow-a', tenant => :'t_b')),
	('flow-c tenant b', queen.traces_by_name('flow-c', tenant => :'t_b'))
  ) f(label, r);
SELECT pg_temp.try($$SELECT queen.traces_by_name(NULL)$$) AS null_name;
SELECT pg_temp.try($$SELECT queen.traces_by_name('')$$) AS empty_name;
SELECT pg_temp.try($$SELECT queen.traces_by_name('flow-a', -1)$$) AS negative_limit;
SELECT pg_temp.try($$SELECT queen.traces_by_name('flow-a', 10001)$$) AS huge_limit;
SELECT pg_temp.try($$SELECT queen.traces_by_name('flow-a', 1, -1)$$) AS negative_offset;

-------------------------------------------------------------------------
-- queen.trace_names: counts per name, most recently seen first.
-------------------------------------------------------------------------
SELECT array_agg(k ORDER BY k) AS answer_keys FROM jsonb_object_keys(queen.trace_names()) k;
SELECT r->'total' AS total, r->'pagination' AS pagination FROM queen.trace_names() r;
CREATE FUNCTION pg_temp.names(r jsonb)
RETURNS TABLE (n bigint, name text, traces int, messages int, last_seen_ok boolean, keys text[])
LANGUAGE sql AS $$
	SELECT e.n, x->>'trace_name', (x->>'trace_count')::int, (x->>'message_count')::int,
	       (x->>'last_seen')::timestamptz = (SELECT max(created_at) FROM queen.message_traces t
	                                           WHERE x->>'trace_name' = ANY (t.trace_names)
	                                             AND t.tenant_id = coalesce(r->>'_tenant', '00000000-0000-0000-0000-000000000001')::uuid),
	       (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(x) k)
	  FROM jsonb_array_elements(r->'trace_names') WITH ORDINALITY AS e(x, n)
	 ORDER BY e.n
$$;
SELECT * FROM pg_temp.names(queen.trace_names());
SELECT f.label, r->'total' AS total, r->'pagination' AS pagination,
       (SELECT string_agg(x->>'trace_name', ' ' ORDER BY n)
          FROM jsonb_array_elements(r->'trace_names') WITH ORDINALITY AS e(x, n)) AS names
  FROM (VALUES
	('limit 1', queen.trace_names(1)),
	('limit 1 offset 1', queen.trace_names(1, 1)),
	('offset 3', queen.trace_names(off => 3)),
	('limit 0', queen.trace_names(0)),
	('nulls', queen.trace_names(NULL, NULL))
  ) f(label, r);
SELECT * FROM pg_temp.names(queen.trace_names(tenant => :'t_b') || jsonb_build_object('_tenant', :'t_b'));
SELECT queen.trace_names(tenant => 'cccccccc-0000-4000-8000-00000000000c') AS nobody;
SELECT pg_temp.try($$SELECT queen.trace_names(-1)$$) AS negative_limit;
SELECT pg_temp.try($$SELECT queen.trace_names(1, -1)$$) AS negative_offset;

-------------------------------------------------------------------------
-- Traces go with their queue (queen.delete_queue), under the tenant only.
-------------------------------------------------------------------------
SELECT count(*) FILTER (WHERE tenant_id = :'t_b') AS tenant_b, count(*) AS all_traces FROM queen.message_traces;
SELECT queen.delete_queue('tq')->>'deleted' AS deleted;
SELECT count(*) FILTER (WHERE tenant_id = :'t_b') AS tenant_b, count(*) AS all_traces FROM queen.message_traces;
SELECT * FROM pg_temp.names(queen.trace_names());

-------------------------------------------------------------------------
-- Access: the functions are the owner's and need a grant; the table is
-- closed and kept by pg_dump.
-------------------------------------------------------------------------
SELECT p.oid::regprocedure AS function, p.prosecdef AS definer, p.proconfig,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS commented
  FROM pg_proc p WHERE p.proname IN ('trace_add', 'traces', 'traces_by_name', 'trace_names')
   AND p.pronamespace = 'queen'::regnamespace ORDER BY 1::text;
SELECT has_table_privilege('public', 'queen.message_traces', 'SELECT') AS public_select,
       'queen.message_traces'::regclass = ANY (e.extconfig) AS dumped
  FROM pg_extension e WHERE e.extname = 'queen_streams';
SELECT indexrelid::regclass AS index FROM pg_index WHERE indrelid = 'queen.message_traces'::regclass ORDER BY 1::text;

DROP EXTENSION queen_streams CASCADE;
