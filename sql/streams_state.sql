-- queen_streams.state_get (POST /streams/v1/state/get): keys, literal key
-- prefix, ripeness, ANDed, ordered by key; scoping to the query, partition
-- and tenant; validation; HTTP status; the prefix read is an index range.
CREATE EXTENSION queen_streams;

\i test/include/helpers.sql

\set p1 '11111111-1111-4111-8111-111111111111'
\set p2 '22222222-2222-4222-8222-222222222222'
\set p3 '33333333-3333-4333-8333-333333333333'

SELECT queen_streams.register_query('{"name":"st.q","source_queue":"st_src","config_hash":"h"}')->>'query_id' AS q \gset
SELECT queen_streams.register_query('{"name":"st.other","source_queue":"st_src","config_hash":"h"}')->>'query_id' AS q_other \gset
INSERT INTO queen_streams.quota (tenant_id) VALUES (:'t_b');
SELECT queen_streams.register_query('{"name":"st.q","source_queue":"st_src","config_hash":"h"}', :'t_b')->>'query_id' AS q_b \gset

-- The request for query :q, partition :p1, plus `extra` fields.
CREATE FUNCTION pg_temp.req(extra jsonb DEFAULT '{}') RETURNS jsonb LANGUAGE sql AS $$
	SELECT jsonb_build_object('query_id', (SELECT id FROM queen_streams.queries
	                                        WHERE name = 'st.q' AND tenant_id = '00000000-0000-0000-0000-000000000001'),
	                          'partition_id', '11111111-1111-4111-8111-111111111111') || extra
$$;
-- The keys of a response, in the order it gives them (U+001F shown as <US>),
-- and its HTTP status.
CREATE FUNCTION pg_temp.keys(r jsonb, OUT success text, OUT keys text, OUT http int)
LANGUAGE sql AS $$
	SELECT r->>'success',
	       (SELECT string_agg(replace(e->>'key', E'\x1f', '<US>'), ' | ' ORDER BY n)
	          FROM jsonb_array_elements(r->'rows') WITH ORDINALITY AS x(e, n)),
	       queen_streams.http_status('state/get', r)
$$;
CREATE FUNCTION pg_temp.get(extra jsonb DEFAULT '{}', tenant uuid DEFAULT NULL,
                            OUT success text, OUT keys text, OUT http int)
LANGUAGE sql AS $$
	SELECT * FROM pg_temp.keys(queen_streams.state_get(pg_temp.req(extra), tenant))
$$;

-- The shard (st.q, p1): keys with LIKE metacharacters, windowEnd of every
-- JSON type, the SDK's U+001F-joined window keys, non-ASCII keys.
INSERT INTO queen_streams.state (query_id, partition_id, key, value) VALUES
  (:'q', :'p1', 'a',     '{"acc":1,"windowEnd":100}'),
  (:'q', :'p1', 'ab',    '{"windowEnd":99.5}'),
  (:'q', :'p1', 'abc',   '{"acc":2}'),
  (:'q', :'p1', 'a%c',   '{"windowEnd":150}'),
  (:'q', :'p1', 'a_c',   '{"windowEnd":200}'),
  (:'q', :'p1', 'a\c',   '{"windowEnd":"100"}'),
  (:'q', :'p1', 'aXc',   '{"windowEnd":null}'),
  (:'q', :'p1', 'a\\c',  '{"windowEnd":-5}'),
  (:'q', :'p1', 'b',     '{"windowEnd":{"ms":1}}'),
  (:'q', :'p1', 'b%',    '{"windowEnd":true}'),
  (:'q', :'p1', '%x',    '{"windowEnd":50}'),
  (:'q', :'p1', '_x',    '{"windowEnd":[1]}'),
  (:'q', :'p1', '\x',    '{"windowend":1}'),
  (:'q', :'p1', 'arr',   '[{"windowEnd":1}]'),
  (:'q', :'p1', 'num',   '7'),
  (:'q', :'p1', 'é1',    '{"windowEnd":1}'),
  (:'q', :'p1', 'ê',     '{"windowEnd":1}'),
  (:'q', :'p1', E'tumb:60\x1f2026-08-17T10:00:00.000Z\x1facme',
                         '{"acc":41,"windowStart":1786960800000,"windowEnd":1786960860000}'),
  (:'q', :'p1', E'tumb:60\x1f2026-08-17T10:01:00.000Z\x1facme',
                         '{"acc":7,"windowStart":1786960860000,"windowEnd":1786960920000}'),
  (:'q', :'p1', E'tumb:600\x1f2026-08-17T10:00:00.000Z\x1facme',
                         '{"acc":3,"windowStart":1786960800000,"windowEnd":1786961400000}'),
  (:'q', :'p1', E'sess:30\x1fopen\x1facme',
                         '{"acc":5,"sessionStart":1786960800000,"lastEventTime":1786960805000}'),
  (:'q', :'p1', '__wm__', '{"eventTimeMs":1786960850000}');
-- Other shards that must never show: another partition of the query,
-- another query on the same partition, another tenant's same-named query.
INSERT INTO queen_streams.state (query_id, partition_id, key, value) VALUES
  (:'q', :'p2', 'a', '{"windowEnd":1}'),
  (:'q', :'p2', 'a2', '{"windowEnd":1}'),
  (:'q_other', :'p1', 'a', '{"windowEnd":1}'),
  (:'q_other', :'p1', 'a2', '{"windowEnd":1}'),
  (:'q_b', :'p1', 'a', '{"windowEnd":1}'),
  (:'q_b', :'p1', 'a2', '{"windowEnd":1}');

-------------------------------------------------------------------------
-- No filter: the whole shard, ordered by key (bytewise), each row exactly
-- {key, value, updated_at} with updated_at the row's timestamp.
-------------------------------------------------------------------------
SELECT * FROM pg_temp.get();
SELECT replace(e->>'key', E'\x1f', '<US>') AS key, e->'value' AS value,
       (e->>'updated_at')::timestamptz = s.updated_at AS updated_at_is_the_rows,
       (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(e) k) AS fields
  FROM jsonb_array_elements(queen_streams.state_get(pg_temp.req())->'rows') WITH ORDINALITY AS x(e, n)
  JOIN queen_streams.state s ON s.query_id = :'q' AND s.partition_id = :'p1' AND s.key = e->>'key'
 ORDER BY n;
SELECT queen_streams.state_get(pg_temp.req()) - 'rows' AS envelope;

-------------------------------------------------------------------------
-- keys: absent, null and [] all mean no filter; unknown keys are absent
-- (never a row with a null value); duplicates do not repeat a row.
-------------------------------------------------------------------------
SELECT (SELECT keys FROM pg_temp.get('{"keys":null}')) = (SELECT keys FROM pg_temp.get()) AS null_is_no_filter,
       (SELECT keys FROM pg_temp.get('{"keys":[]}')) = (SELECT keys FROM pg_temp.get()) AS empty_is_no_filter;
SELECT * FROM pg_temp.get('{"keys":["b","a"]}');
SELECT * FROM pg_temp.get('{"keys":["zzz","a","zzz","a"]}');
SELECT * FROM pg_temp.get('{"keys":["zzz"]}');
SELECT queen_streams.state_get(pg_temp.req('{"keys":["nope"]}')) AS unknown_key_only;
-- Keys are exact: no pattern, no case folding, no prefix.
SELECT * FROM pg_temp.get('{"keys":["a%","A","a_c","__wm__"]}');
SELECT * FROM pg_temp.get(jsonb_build_object('keys', jsonb_build_array(E'tumb:60\x1f2026-08-17T10:01:00.000Z\x1facme')));

-------------------------------------------------------------------------
-- key_prefix: a literal prefix. %, _ and \ match only themselves; an empty
-- prefix is absent.
-------------------------------------------------------------------------
SELECT * FROM pg_temp.get('{"key_prefix":"a"}');
SELECT * FROM pg_temp.get('{"key_prefix":"a%"}');
SELECT * FROM pg_temp.get('{"key_prefix":"a_"}');
SELECT * FROM pg_temp.get('{"key_prefix":"a\\"}');
SELECT * FROM pg_temp.get('{"key_prefix":"a\\\\"}');
SELECT * FROM pg_temp.get('{"key_prefix":"%"}');
SELECT * FROM pg_temp.get('{"key_prefix":"_"}');
SELECT * FROM pg_temp.get('{"key_prefix":"\\"}');
SELECT * FROM pg_temp.get('{"key_prefix":"__"}');
SELECT * FROM pg_temp.get('{"key_prefix":"b"}');
SELECT * FROM pg_temp.get('{"key_prefix":"abc"}');
SELECT * FROM pg_temp.get('{"key_prefix":"abcd"}');
SELECT * FROM pg_temp.get('{"key_prefix":"A"}');
SELECT * FROM pg_temp.get('{"key_prefix":"é"}');
SELECT * FROM pg_temp.get('{"key_prefix":"z"}');
SELECT (SELECT keys FROM pg_temp.get('{"key_prefix":""}')) = (SELECT keys FROM pg_temp.get()) AS empty_prefix_is_absent,
       (SELECT keys FROM pg_temp.get('{"key_prefix":null}')) = (SELECT keys FROM pg_temp.get()) AS null_prefix_is_absent;
-- One operator's windows: the operator tag and U+001F, not tumb:600.
SELECT * FROM pg_temp.get(jsonb_build_object('key_prefix', E'tumb:60\x1f'));
SELECT * FROM pg_temp.get('{"key_prefix":"tumb:60"}');

-------------------------------------------------------------------------
-- ripe_at_or_before: only rows whose value.windowEnd is a JSON number at or
-- before the bound. A string, null, boolean, object or array windowEnd,
-- a missing one, or a value that is not an object never matches.
-------------------------------------------------------------------------
SELECT * FROM pg_temp.get('{"ripe_at_or_before":100}');
SELECT * FROM pg_temp.get('{"ripe_at_or_before":99.5}');
SELECT * FROM pg_temp.get('{"ripe_at_or_before":99.4}');
SELECT * FROM pg_temp.get('{"ripe_at_or_before":-5}');
SELECT * FROM pg_temp.get('{"ripe_at_or_before":-6}');
SELECT * FROM pg_temp.get('{"ripe_at_or_before":1e20}');
SELECT * FROM pg_temp.get('{"ripe_at_or_before":1786960860000}');
SELECT (SELECT keys FROM pg_temp.get('{"ripe_at_or_before":null}')) = (SELECT keys FROM pg_temp.get()) AS null_ripe_is_absent;

-------------------------------------------------------------------------
-- The filters are ANDed.
-------------------------------------------------------------------------
SELECT * FROM pg_temp.get('{"keys":["a","ab","b"],"key_prefix":"a"}');
SELECT * FROM pg_temp.get('{"keys":["b"],"key_prefix":"a"}');
SELECT * FROM pg_temp.get('{"key_prefix":"a","ripe_at_or_before":150}');
SELECT * FROM pg_temp.get('{"keys":["a","a%c","a_c","b"],"ripe_at_or_before":150}');
SELECT * FROM pg_temp.get('{"keys":["a","a%c","ab","%x"],"key_prefix":"a","ripe_at_or_before":100}');
-- The idle flush's read: one operator's windows that are due.
SELECT * FROM pg_temp.get(jsonb_build_object('key_prefix', E'tumb:60\x1f', 'ripe_at_or_before', 1786960900000));

-------------------------------------------------------------------------
-- Scoping: an unknown query_id, another tenant's query_id and an unknown
-- partition all read as empty rows; each tenant sees only its own query.
-------------------------------------------------------------------------
SELECT queen_streams.state_get(jsonb_build_object('query_id', '44444444-4444-4444-8444-444444444444',
                                                  'partition_id', :'p1')) AS unknown_query;
SELECT queen_streams.state_get(pg_temp.req(), :'t_b') AS foreign_query;
SELECT * FROM pg_temp.get(jsonb_build_object('partition_id', :'p3')) AS unknown_partition;
SELECT * FROM pg_temp.get(jsonb_build_object('partition_id', :'p2')) AS other_partition;
SELECT * FROM pg_temp.keys(queen_streams.state_get(jsonb_build_object('query_id', :'q_other', 'partition_id', :'p1')));
SELECT * FROM pg_temp.keys(queen_streams.state_get(jsonb_build_object('query_id', :'q_b', 'partition_id', :'p1'), :'t_b'));
SELECT * FROM pg_temp.keys(queen_streams.state_get(jsonb_build_object('query_id', :'q_b', 'partition_id', :'p1')));
-- Unknown request fields are ignored.
SELECT * FROM pg_temp.get('{"keys":["a"],"idx":0,"whatever":true}');

-------------------------------------------------------------------------
-- Validation: 22023 (HTTP 400).
-------------------------------------------------------------------------
SELECT pg_temp.try($$SELECT queen_streams.state_get('{}')$$) AS empty_body;
SELECT pg_temp.try($$SELECT queen_streams.state_get('{"partition_id":"11111111-1111-4111-8111-111111111111"}')$$) AS no_query_id;
SELECT pg_temp.try($$SELECT queen_streams.state_get('{"query_id":null,"partition_id":"11111111-1111-4111-8111-111111111111"}')$$) AS null_query_id;
SELECT pg_temp.try($$SELECT queen_streams.state_get('{"query_id":"11111111-1111-4111-8111-111111111111"}')$$) AS no_partition_id;
SELECT pg_temp.try($$SELECT queen_streams.state_get('{"query_id":"11111111-1111-4111-8111-111111111111","partition_id":null}')$$) AS null_partition_id;
SELECT pg_temp.try($$SELECT queen_streams.state_get('{"query_id":"nope","partition_id":"11111111-1111-4111-8111-111111111111"}')$$) AS bad_query_id;
SELECT pg_temp.try($$SELECT queen_streams.state_get('{"query_id":7,"partition_id":"11111111-1111-4111-8111-111111111111"}')$$) AS number_query_id;
SELECT pg_temp.try($$SELECT queen_streams.state_get('{"query_id":"11111111-1111-4111-8111-111111111111","partition_id":""}')$$) AS empty_partition_id;
SELECT pg_temp.try($$SELECT queen_streams.state_get(pg_temp.req('{"keys":"a"}'))$$) AS string_keys;
SELECT pg_temp.try($$SELECT queen_streams.state_get(pg_temp.req('{"keys":["a",1]}'))$$) AS number_in_keys;
SELECT pg_temp.try($$SELECT queen_streams.state_get(pg_temp.req('{"key_prefix":1}'))$$) AS number_prefix;
SELECT pg_temp.try($$SELECT queen_streams.state_get(pg_temp.req('{"ripe_at_or_before":"100"}'))$$) AS string_ripe;
SELECT pg_temp.try($$SELECT queen_streams.state_get('[]')$$) AS array_body;
SELECT pg_temp.try($$SELECT queen_streams.state_get(NULL)$$) AS null_body;

-------------------------------------------------------------------------
-- queen_streams.http_status for state/get: success 200; success:false (the
-- procedure's "required" verdict) 400; an error without success 500.
-------------------------------------------------------------------------
SELECT b AS body, queen_streams.http_status('state/get', b) AS http
  FROM (VALUES ('{"success":true,"rows":[]}'::jsonb),
               ('{"success":false,"error":"query_id and partition_id are required","rows":[]}'),
               ('{"success":false}'),
               ('{"error":"state get failed: boom"}')) v(b);

-------------------------------------------------------------------------
-- The prefix and ripeness reads are a range on the primary key, not a scan
-- of the query's other partitions: the statements the C code prepares
-- (src/streams/state.c, filters F_PREFIX|F_UPPER|F_RIPE and F_RIPE alone),
-- planned custom and generic, over a table the other shards dominate.
-------------------------------------------------------------------------
INSERT INTO queen_streams.state (query_id, partition_id, key, value)
SELECT :'q', gen_random_uuid(), 'k' || i, '{"windowEnd":1}' FROM generate_series(1, 5000) i;
ANALYZE queen_streams.state;
-- EXPLAIN (COSTS OFF) of a statement, generated ids masked.
CREATE FUNCTION pg_temp.plan(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	line text;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
		RETURN NEXT regexp_replace(line, '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<uuid>', 'g');
	END LOOP;
END $$;
PREPARE prefix_ripe_read(uuid, uuid, uuid, text[], text, text, numeric) AS
SELECT jsonb_build_object('success', true, 'rows',  COALESCE(jsonb_agg(jsonb_build_object(    'key', s.key, 'value', s.value, 'updated_at', s.updated_at)    ORDER BY s.key), '[]'::jsonb))  FROM queen_streams.state s WHERE s.query_id = $1 AND s.partition_id = $2   AND EXISTS (SELECT 1 FROM queen_streams.queries q                WHERE q.id = $1 AND q.tenant_id = $3) AND s.key >= $5 AND s.key < $6 AND CASE WHEN jsonb_typeof(s.value -> 'windowEnd') = 'number'          THEN (s.value -> 'windowEnd')::numeric <= $7          ELSE false END;
PREPARE ripe_read(uuid, uuid, uuid, text[], text, text, numeric) AS
SELECT jsonb_build_object('success', true, 'rows',  COALESCE(jsonb_agg(jsonb_build_object(    'key', s.key, 'value', s.value, 'updated_at', s.updated_at)    ORDER BY s.key), '[]'::jsonb))  FROM queen_streams.state s WHERE s.query_id = $1 AND s.partition_id = $2   AND EXISTS (SELECT 1 FROM queen_streams.queries q                WHERE q.id = $1 AND q.tenant_id = $3) AND CASE WHEN jsonb_typeof(s.value -> 'windowEnd') = 'number'          THEN (s.value -> 'windowEnd')::numeric <= $7          ELSE false END;
-- The plan SPI starts with (custom, parameters known) ...
SELECT * FROM pg_temp.plan(format($$EXECUTE prefix_ripe_read(%L, %L, %L, NULL, 'a', 'b', 100)$$,
                                  :'q', :'p1', '00000000-0000-0000-0000-000000000001'));
-- ... and the generic one it may settle on.
SET plan_cache_mode = force_generic_plan;
SELECT * FROM pg_temp.plan(format($$EXECUTE prefix_ripe_read(%L, %L, %L, NULL, 'a', 'b', 100)$$,
                                  :'q', :'p1', '00000000-0000-0000-0000-000000000001'));
SELECT * FROM pg_temp.plan(format($$EXECUTE ripe_read(%L, %L, %L, NULL, NULL, NULL, 100)$$,
                                  :'q', :'p1', '00000000-0000-0000-0000-000000000001'));
RESET plan_cache_mode;
DEALLOCATE prefix_ripe_read;
DEALLOCATE ripe_read;
-- The other shards change nothing in the answer.
SELECT * FROM pg_temp.get('{"key_prefix":"a","ripe_at_or_before":100}');

DROP EXTENSION queen_streams CASCADE;
