-- queen_streams.register_query (POST /streams/v1/queries): the four outcomes,
-- the tenant gate for new names only, validation, and the HTTP status of each.
CREATE EXTENSION queen_streams;

\i test/include/helpers.sql

-- Every response is kept (with its generated query_id) under a step name;
-- what is shown is the body without the id, and the HTTP status.
CREATE TEMP TABLE reg_log (n serial, step text PRIMARY KEY, r jsonb NOT NULL);
CREATE FUNCTION pg_temp.reg(step text, req jsonb, tenant uuid DEFAULT NULL)
RETURNS TABLE (body jsonb, http int) LANGUAGE sql AS $$
	WITH c AS (SELECT queen_streams.register_query(req, tenant) AS r),
	     i AS (INSERT INTO reg_log (step, r) SELECT step, r FROM c)
	SELECT r - 'query_id', queen_streams.http_status('queries', r) FROM c
$$;
-- The id a step answered.
CREATE FUNCTION pg_temp.rid(s text) RETURNS uuid LANGUAGE sql AS $$
	SELECT (r->>'query_id')::uuid FROM reg_log WHERE step = s
$$;
-- The registrations of a tenant, ids shown only as which step answered them.
CREATE FUNCTION pg_temp.queries(t uuid)
RETURNS TABLE (name text, source_queue text, sink_queue text, config_hash text, first_answered_by text)
LANGUAGE sql AS $$
	SELECT q.name, q.source_queue, q.sink_queue, q.config_hash,
	       (SELECT l.step FROM reg_log l WHERE (l.r->>'query_id')::uuid = q.id ORDER BY l.n LIMIT 1)
	  FROM queen_streams.queries q WHERE q.tenant_id = t ORDER BY q.name
$$;

\set t_a 'aaaaaaaa-0000-4000-8000-00000000000a'
\set p1 '11111111-1111-4111-8111-111111111111'
\set p2 '22222222-2222-4222-8222-222222222222'

-------------------------------------------------------------------------
-- Outcome 1: the name is new. Inserted, fresh:true, 200.
-------------------------------------------------------------------------
SELECT * FROM pg_temp.reg('a1 fresh',
  '{"name":"reg.orders","source_queue":"reg_src","sink_queue":"reg_sink","config_hash":"h1"}');
-- The query_id is a UUIDv7 and the stored row is the registration.
SELECT pg_temp.rid('a1 fresh')::text ~ '^[0-9a-f]{8}-[0-9a-f]{4}-7' AS id_is_v7,
       (SELECT id FROM queen_streams.queries WHERE name = 'reg.orders') = pg_temp.rid('a1 fresh') AS id_stored;
SELECT * FROM pg_temp.queries(:'t_def');
-- An explicit default tenant is the same tenant as NULL.
SELECT * FROM pg_temp.reg('a2 fresh, default tenant explicit',
  '{"name":"reg.other","source_queue":"reg_src","config_hash":"x1"}', :'t_def');
SELECT * FROM pg_temp.queries(:'t_def');

-- Accumulators: two partitions of reg.orders, one of reg.other.
INSERT INTO queen_streams.state (query_id, partition_id, key, value)
VALUES (pg_temp.rid('a1 fresh'), :'p1', 'k1', '{"acc":1}'),
       (pg_temp.rid('a1 fresh'), :'p1', 'k2', '{"acc":2}'),
       (pg_temp.rid('a1 fresh'), :'p2', 'k1', '{"acc":3}'),
       (pg_temp.rid('a2 fresh, default tenant explicit'), :'p1', 'k1', '{"acc":4}');

-------------------------------------------------------------------------
-- Outcome 3: the name exists and config_hash matches. source_queue and
-- sink_queue are updated to the supplied values, accumulators kept,
-- fresh:false, same query_id.
-------------------------------------------------------------------------
SELECT * FROM pg_temp.reg('b1 match, new source, empty sink',
  '{"name":"reg.orders","source_queue":"reg_src2","sink_queue":"","config_hash":"h1"}');
SELECT pg_temp.rid('b1 match, new source, empty sink') = pg_temp.rid('a1 fresh') AS same_id;
SELECT * FROM pg_temp.queries(:'t_def');
SELECT * FROM pg_temp.reg('b2 match, sink back',
  '{"name":"reg.orders","source_queue":"reg_src2","sink_queue":"reg_sink2","config_hash":"h1","reset":false}');
SELECT * FROM pg_temp.queries(:'t_def');
-- An absent or null sink_queue is null as well.
SELECT * FROM pg_temp.reg('b3 match, sink null',
  '{"name":"reg.orders","source_queue":"reg_src2","sink_queue":null,"config_hash":"h1"}');
SELECT sink_queue IS NULL AS sink_is_null FROM queen_streams.queries WHERE name = 'reg.orders';
SELECT * FROM pg_temp.reg('b4 match, sink absent',
  '{"name":"reg.orders","source_queue":"reg_src","config_hash":"h1"}');
SELECT * FROM pg_temp.reg('b5 match, sink again',
  '{"name":"reg.orders","source_queue":"reg_src","sink_queue":"reg_sink","config_hash":"h1"}');
SELECT * FROM pg_temp.queries(:'t_def');
-- Every accumulator is still there.
SELECT q.name, s.partition_id = :'p1' AS on_p1, s.key, s.value
  FROM queen_streams.state s JOIN queen_streams.queries q ON q.id = s.query_id
 ORDER BY 1, 2 DESC, 3;

-------------------------------------------------------------------------
-- Outcome 4a: the name exists, config_hash differs, no reset: 409 with the
-- caller's own query_id and an error naming the query. Nothing changes.
-------------------------------------------------------------------------
SELECT * FROM pg_temp.reg('c1 mismatch',
  '{"name":"reg.orders","source_queue":"reg_src9","sink_queue":"reg_sink9","config_hash":"h2"}');
SELECT pg_temp.rid('c1 mismatch') = pg_temp.rid('a1 fresh') AS own_id,
       (SELECT r ? 'denied' FROM reg_log WHERE step = 'c1 mismatch') AS has_denied;
SELECT * FROM pg_temp.reg('c2 mismatch, reset false',
  '{"name":"reg.orders","source_queue":"reg_src9","config_hash":"h2","reset":false}');
SELECT * FROM pg_temp.reg('c3 mismatch, reset null',
  '{"name":"reg.orders","source_queue":"reg_src9","config_hash":"h2","reset":null}');
SELECT * FROM pg_temp.queries(:'t_def');
SELECT count(*) AS state_rows FROM queen_streams.state;

-------------------------------------------------------------------------
-- Outcome 4b: config_hash differs with reset:true. Every state row of that
-- query (all its partitions, only that query) is deleted, the new hash
-- stored, source and sink updated, reset:true, 200.
-------------------------------------------------------------------------
SELECT * FROM pg_temp.reg('d1 mismatch, reset',
  '{"name":"reg.orders","source_queue":"reg_src3","sink_queue":"reg_sink3","config_hash":"h2","reset":true}');
SELECT pg_temp.rid('d1 mismatch, reset') = pg_temp.rid('a1 fresh') AS same_id;
SELECT * FROM pg_temp.queries(:'t_def');
SELECT q.name, s.partition_id = :'p1' AS on_p1, s.key, s.value
  FROM queen_streams.state s JOIN queen_streams.queries q ON q.id = s.query_id
 ORDER BY 1, 2 DESC, 3;
-- The new hash now matches: no 409, no reset.
SELECT * FROM pg_temp.reg('d2 match new hash',
  '{"name":"reg.orders","source_queue":"reg_src3","sink_queue":"reg_sink3","config_hash":"h2"}');
-- The old hash is now the mismatch.
SELECT * FROM pg_temp.reg('d3 old hash is a mismatch',
  '{"name":"reg.orders","source_queue":"reg_src3","config_hash":"h1"}');

-- reset:true with a MATCHING hash. The spec says both "reset: delete every
-- state row for this query before rewriting the registration" and "the
-- name exists and config_hash matches ... the accumulators are kept"; the
-- reference procedure (facts 6.1) only wipes on a mismatch. This pins what
-- the code does today: it wipes. Open question: if the outcome sentence
-- wins, expect reset:false here and the row kept.
INSERT INTO queen_streams.state (query_id, partition_id, key, value)
VALUES (pg_temp.rid('a1 fresh'), :'p1', 'k9', '{"acc":9}');
SELECT * FROM pg_temp.reg('d4 match with reset',
  '{"name":"reg.orders","source_queue":"reg_src3","sink_queue":"reg_sink3","config_hash":"h2","reset":true}');
SELECT count(*) AS reg_orders_state_rows FROM queen_streams.state
 WHERE query_id = pg_temp.rid('a1 fresh');

-------------------------------------------------------------------------
-- Outcome 2: the tenant gate, for new names of a non-default tenant only.
-------------------------------------------------------------------------
-- No grant row: denied, 403, nothing inserted.
SELECT * FROM pg_temp.reg('e1 no grant',
  '{"name":"reg.a1","source_queue":"reg_src","config_hash":"h1"}', :'t_a');
SELECT count(*) AS tenant_a_queries FROM queen_streams.queries WHERE tenant_id = :'t_a';
-- A disabled grant: denied the same way.
INSERT INTO queen_streams.quota (tenant_id, enabled) VALUES (:'t_a', false);
SELECT * FROM pg_temp.reg('e2 disabled grant',
  '{"name":"reg.a1","source_queue":"reg_src","config_hash":"h1"}', :'t_a');
SELECT count(*) AS tenant_a_queries FROM queen_streams.queries WHERE tenant_id = :'t_a';
-- Enabled without a cap: no limit.
UPDATE queen_streams.quota SET enabled = true WHERE tenant_id = :'t_a';
SELECT * FROM pg_temp.reg('e3 granted',
  '{"name":"reg.a1","source_queue":"reg_src","config_hash":"h1"}', :'t_a');
-- max_queries is an exact cap on this tenant's own queries (the default
-- tenant's two do not count): with 1 of 2 the second passes, the third not.
UPDATE queen_streams.quota SET max_queries = 2 WHERE tenant_id = :'t_a';
SELECT * FROM pg_temp.reg('e4 second of two',
  '{"name":"reg.a2","source_queue":"reg_src","config_hash":"h1"}', :'t_a');
SELECT * FROM pg_temp.reg('e5 third of two',
  '{"name":"reg.a3","source_queue":"reg_src","config_hash":"h1"}', :'t_a');
SELECT * FROM pg_temp.queries(:'t_a');
-- Re-registration of an existing name passes at a full cap: match, 409, reset.
SELECT * FROM pg_temp.reg('e6 full cap, match',
  '{"name":"reg.a1","source_queue":"reg_src_a","config_hash":"h1"}', :'t_a');
SELECT * FROM pg_temp.reg('e7 full cap, mismatch',
  '{"name":"reg.a1","source_queue":"reg_src_a","config_hash":"h2"}', :'t_a');
SELECT * FROM pg_temp.reg('e8 full cap, reset',
  '{"name":"reg.a1","source_queue":"reg_src_a","config_hash":"h2","reset":true}', :'t_a');
-- Raising the cap by one admits exactly one more.
UPDATE queen_streams.quota SET max_queries = 3 WHERE tenant_id = :'t_a';
SELECT * FROM pg_temp.reg('e9 third of three',
  '{"name":"reg.a3","source_queue":"reg_src","config_hash":"h1"}', :'t_a');
SELECT * FROM pg_temp.reg('e10 fourth of three',
  '{"name":"reg.a4","source_queue":"reg_src","config_hash":"h1"}', :'t_a');
-- A cap of 0 admits nothing new.
UPDATE queen_streams.quota SET max_queries = 0 WHERE tenant_id = :'t_a';
SELECT * FROM pg_temp.reg('e11 cap zero',
  '{"name":"reg.a5","source_queue":"reg_src","config_hash":"h1"}', :'t_a');
SELECT * FROM pg_temp.reg('e12 cap zero, existing name',
  '{"name":"reg.a2","source_queue":"reg_src","config_hash":"h1"}', :'t_a');
-- Revoking the grant stops new names without stranding existing ones.
UPDATE queen_streams.quota SET enabled = false, max_queries = NULL WHERE tenant_id = :'t_a';
SELECT * FROM pg_temp.reg('f1 revoked, new name',
  '{"name":"reg.a5","source_queue":"reg_src","config_hash":"h1"}', :'t_a');
SELECT * FROM pg_temp.reg('f2 revoked, match',
  '{"name":"reg.a2","source_queue":"reg_src_b","config_hash":"h1"}', :'t_a');
SELECT * FROM pg_temp.reg('f3 revoked, mismatch',
  '{"name":"reg.a2","source_queue":"reg_src_b","config_hash":"h2"}', :'t_a');
SELECT * FROM pg_temp.reg('f4 revoked, reset',
  '{"name":"reg.a2","source_queue":"reg_src_b","config_hash":"h2","reset":true}', :'t_a');
DELETE FROM queen_streams.quota WHERE tenant_id = :'t_a';
SELECT * FROM pg_temp.reg('f5 grant row gone, new name',
  '{"name":"reg.a5","source_queue":"reg_src","config_hash":"h1"}', :'t_a');
SELECT * FROM pg_temp.reg('f6 grant row gone, match',
  '{"name":"reg.a3","source_queue":"reg_src","config_hash":"h1"}', :'t_a');
SELECT * FROM pg_temp.queries(:'t_a');

-- The default tenant never reads the grant table: a disabled, zero-cap row
-- for it changes nothing, and neither does the table being gone.
INSERT INTO queen_streams.quota (tenant_id, enabled, max_queries) VALUES (:'t_def', false, 0);
SELECT * FROM pg_temp.reg('g1 default tenant, disabled row',
  '{"name":"reg.def1","source_queue":"reg_src","config_hash":"h1"}');
BEGIN;
ALTER TABLE queen_streams.quota RENAME TO quota_elsewhere;
SELECT * FROM pg_temp.reg('g2 default tenant, no grant table',
  '{"name":"reg.def2","source_queue":"reg_src","config_hash":"h1"}', :'t_def');
-- (a gated tenant does read it)
SELECT pg_temp.try($$SELECT queen_streams.register_query(
  '{"name":"reg.a6","source_queue":"reg_src","config_hash":"h1"}', 'aaaaaaaa-0000-4000-8000-00000000000a')$$);
ROLLBACK;

-------------------------------------------------------------------------
-- Names are per tenant: the same name under another tenant is another query,
-- and its 409 reveals only that tenant's own query_id.
-------------------------------------------------------------------------
INSERT INTO queen_streams.quota (tenant_id) VALUES (:'t_b');
SELECT * FROM pg_temp.reg('h1 tenant b, same name',
  '{"name":"reg.orders","source_queue":"reg_src_b","config_hash":"hb"}', :'t_b');
SELECT * FROM pg_temp.reg('h2 tenant b, mismatch',
  '{"name":"reg.orders","source_queue":"reg_src_b","config_hash":"h2"}', :'t_b');
SELECT pg_temp.rid('h1 tenant b, same name') <> pg_temp.rid('a1 fresh') AS another_query,
       pg_temp.rid('h2 tenant b, mismatch') = pg_temp.rid('h1 tenant b, same name') AS own_id_in_409;
SELECT * FROM pg_temp.queries(:'t_b');
SELECT name, config_hash FROM queen_streams.queries WHERE tenant_id = :'t_def' AND name = 'reg.orders';

-------------------------------------------------------------------------
-- Validation: SQLSTATE 22023 (HTTP 400) before anything runs, in the order
-- name, source_queue, config_hash.
-------------------------------------------------------------------------
SELECT pg_temp.try($$SELECT queen_streams.register_query('{}')$$) AS empty_body;
SELECT pg_temp.try($$SELECT queen_streams.register_query('{"name":"","source_queue":"s","config_hash":"h"}')$$) AS empty_name;
SELECT pg_temp.try($$SELECT queen_streams.register_query('{"name":null,"source_queue":"s","config_hash":"h"}')$$) AS null_name;
SELECT pg_temp.try($$SELECT queen_streams.register_query('{"name":7,"source_queue":"s","config_hash":"h"}')$$) AS number_name;
SELECT pg_temp.try($$SELECT queen_streams.register_query('{"name":"reg.bad","config_hash":"h"}')$$) AS no_source;
SELECT pg_temp.try($$SELECT queen_streams.register_query('{"name":"reg.bad","source_queue":"","config_hash":"h"}')$$) AS empty_source;
SELECT pg_temp.try($$SELECT queen_streams.register_query('{"name":"reg.bad","source_queue":"s"}')$$) AS no_hash;
SELECT pg_temp.try($$SELECT queen_streams.register_query('{"name":"reg.bad","source_queue":"s","config_hash":""}')$$) AS empty_hash;
SELECT pg_temp.try($$SELECT queen_streams.register_query('{"name":"reg.bad","source_queue":"s","config_hash":null}')$$) AS null_hash;
-- A missing hash on an existing name is still 400, not a 409.
SELECT pg_temp.try($$SELECT queen_streams.register_query('{"name":"reg.orders","source_queue":"s","config_hash":""}')$$) AS empty_hash_existing;
-- ... and on a tenant with no grant, 400 rather than 403.
SELECT pg_temp.try($$SELECT queen_streams.register_query('{"name":"reg.bad","source_queue":"s"}',
  'cccccccc-0000-4000-8000-00000000000c')$$) AS no_hash_ungranted;
SELECT pg_temp.try($$SELECT queen_streams.register_query('{"name":"reg.bad","source_queue":"s","config_hash":"h","sink_queue":5}')$$) AS number_sink;
SELECT pg_temp.try($$SELECT queen_streams.register_query('{"name":"reg.bad","source_queue":"s","config_hash":"h","reset":"yes"}')$$) AS string_reset;
SELECT pg_temp.try($$SELECT queen_streams.register_query('[]')$$) AS array_body;
SELECT pg_temp.try($$SELECT queen_streams.register_query(NULL)$$) AS null_body;
SELECT count(*) AS bad_registered FROM queen_streams.queries WHERE name = 'reg.bad';

-------------------------------------------------------------------------
-- queen_streams.http_status for queries, on bodies of each shape.
-------------------------------------------------------------------------
SELECT b AS body, queen_streams.http_status('queries', b) AS http
  FROM (VALUES ('{"success":true,"fresh":true}'::jsonb),
               ('{"success":false,"denied":true,"error":"streams not granted for this tenant"}'),
               ('{"success":false,"error":"config_hash mismatch"}'),
               ('{"success":false,"denied":false,"error":"x"}')) v(b);
SELECT queen_streams.http_status('queries', NULL) IS NULL AS strict;
SELECT pg_temp.try($$SELECT queen_streams.http_status('nope', '{}')$$) AS unknown_route;

-------------------------------------------------------------------------
-- queen_streams.drop_query: the query and its state go; unknown names are
-- 42704; the name can then be registered afresh.
-------------------------------------------------------------------------
SELECT queen_streams.register_query('{"name":"drop.me","source_queue":"src","config_hash":"h1"}')->>'fresh' AS registered;
INSERT INTO queen_streams.state (query_id, partition_id, key, value)
SELECT id, gen_random_uuid(), 'k' || i, '{}' FROM queen_streams.queries, generate_series(1, 3) i
 WHERE name = 'drop.me';
SELECT queen_streams.drop_query('drop.me') - 'query_id' AS dropped;
SELECT count(*) AS query_rows FROM queen_streams.queries WHERE name = 'drop.me';
SELECT count(*) AS state_rows FROM queen_streams.state s
 WHERE NOT EXISTS (SELECT 1 FROM queen_streams.queries q WHERE q.id = s.query_id);
SELECT pg_temp.try($$SELECT queen_streams.drop_query('drop.me')$$) AS dropped_twice;
SELECT pg_temp.try($$SELECT queen_streams.drop_query(NULL)$$) AS null_name;
SELECT queen_streams.register_query('{"name":"drop.me","source_queue":"src","config_hash":"h2"}')->>'fresh' AS registered_again;

-- The answered steps, in order, with their HTTP status.
SELECT step, queen_streams.http_status('queries', r) AS http, r->>'success' AS success
  FROM reg_log ORDER BY n;

DROP EXTENSION queen_streams CASCADE;
