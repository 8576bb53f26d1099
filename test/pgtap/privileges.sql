-- Access over SQL (issue 5): the route functions are SECURITY DEFINER with a
-- fixed search_path, nobody but the owner may call them until granted, the
-- tables are closed, and the pure codec helpers stay open to everyone.
BEGIN;
-- The count follows the schema: every function and table is checked.
SELECT no_plan();

CREATE ROLE qs_tap_nobody;

-- Every route function runs with the owner's rights and a fixed search_path.
SELECT is_definer(s, f, args, s || '.' || f || ' is SECURITY DEFINER')
  FROM (VALUES
	('queen', 'push', ARRAY['jsonb', 'uuid', 'text']),
	('queen', 'pop', ARRAY['text', 'text', 'text', 'integer', 'integer', 'boolean', 'uuid', 'text', 'text', 'integer']),
	('queen', 'ack', ARRAY['jsonb', 'uuid']),
	('queen', 'renew_lease', ARRAY['text', 'integer', 'uuid']),
	('queen', 'retention_sweep', ARRAY[]::text[]),
	('queen', 'configure', ARRAY['jsonb', 'uuid']),
	('queen', 'delete_queue', ARRAY['text', 'uuid']),
	('queen', 'log_push_one_v1', ARRAY['text', 'text', 'integer', 'bytea', 'bigint', 'bytea', 'uuid', 'integer', 'uuid']),
	('queen_streams', 'register_query', ARRAY['jsonb', 'uuid']),
	('queen_streams', 'state_get', ARRAY['jsonb', 'uuid']),
	('queen_streams', 'cycle', ARRAY['jsonb', 'uuid'])) AS r(s, f, args);

-- And so is every other function but the open helpers: a release that adds
-- one cannot forget it.
SELECT ok(p.prosecdef, p.oid::regprocedure || ' is SECURITY DEFINER')
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname IN ('queen', 'queen_streams')
   AND p.oid::regprocedure::text NOT IN ('queen.txn_hash(text)', 'queen.uuid_generate_v7()',
	 'queen.log_unnest_hashes(bytea)', 'queen.segment_frames(bytea,bigint)',
	 'queen.segment_decompress(bytea)', 'queen.segment_pack(jsonb)',
	 'queen_streams.http_status(text,jsonb)', 'queen_streams.queue_metrics()',
	 'queen_streams.http_workers()', 'queen_streams.verify_token(text)')
 ORDER BY p.oid::regprocedure::text;

SELECT is(p.proconfig, ARRAY['search_path=pg_catalog, pg_temp'], p.oid::regprocedure || ' fixes search_path')
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname IN ('queen', 'queen_streams') AND p.prosecdef
 ORDER BY p.oid::regprocedure::text;

-- Nobody may call them without a grant.
SELECT ok(NOT has_function_privilege('qs_tap_nobody', p.oid, 'EXECUTE'),
          p.oid::regprocedure || ' needs a grant')
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname IN ('queen', 'queen_streams') AND p.prosecdef
 ORDER BY p.oid::regprocedure::text;

-- The tables are closed to PUBLIC; the schemas may be looked into.
SELECT ok(NOT has_table_privilege('qs_tap_nobody', c.oid, 'SELECT'), c.oid::regclass || ' is closed')
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname IN ('queen', 'queen_streams') AND c.relkind IN ('r', 'v')
 ORDER BY c.oid::regclass::text;
SELECT ok(has_schema_privilege('qs_tap_nobody', 'queen', 'USAGE'), 'schema queen is usable');

-- The codec helpers are open.
SELECT ok(has_function_privilege('qs_tap_nobody', f, 'EXECUTE'), f || ' is open')
  FROM unnest(ARRAY['queen.txn_hash(text)', 'queen.uuid_generate_v7()',
                    'queen.segment_frames(bytea, bigint)', 'queen.segment_pack(jsonb)',
                    'queen_streams.http_status(text, jsonb)']) f;

-- A granted role can push and pop through the functions, never the tables.
GRANT EXECUTE ON FUNCTION queen.push(jsonb, uuid, text),
	queen.pop(text, text, text, int, int, boolean, uuid, text, text, int) TO qs_tap_nobody;
SET LOCAL ROLE qs_tap_nobody;
SELECT is(queen.push('{"items":[{"queue":"tap_priv","payload":1}]}')->0->>'status', 'queued',
          'a granted role pushes');
SELECT is(jsonb_array_length(queen.pop('tap_priv')->'messages'), 1, 'and pops');
SELECT throws_ok('SELECT count(*) FROM queen.log_segments', '42501', NULL,
                 'but cannot read the segments table');
SELECT throws_ok($$SELECT queen.ack('{}')$$, '42501', NULL, 'nor call a function it was not granted');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
