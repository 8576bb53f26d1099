-- Declared streams: create_stream and its siblings, every definition field
-- with its default and its errors (22023 naming the field), the
-- registration they share with POST /streams/v1/queries (config_hash, the
-- 409 as 55000, reset), and the listings. The stream workers run in the
-- listener's database, not this one: nothing here is ever run.
CREATE EXTENSION queen_streams;
\set VERBOSITY default

-- SQLSTATE, message and detail of a failing create_stream, or 'ok'.
CREATE FUNCTION pg_temp.bad(def jsonb, name text DEFAULT 's') RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	d text;
BEGIN
	PERFORM queen_streams.create_stream(name, def);
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
	RETURN SQLSTATE || ': ' || SQLERRM || coalesce(' / ' || d, '');
END $$;

-- A valid definition, with one field replaced (NULL value: removed).
CREATE FUNCTION pg_temp.def(path text[] DEFAULT NULL, val jsonb DEFAULT NULL) RETURNS jsonb
LANGUAGE sql AS $$
	SELECT CASE WHEN path IS NULL THEN d
	            WHEN val IS NULL THEN d #- path
	            ELSE jsonb_set(d, path, val, true) END
	  FROM (SELECT '{"source": "orders", "sink": "orders.per_minute", "key": "$.customer",
	                 "window": {"type": "tumbling", "size": 60},
	                 "aggregates": {"count": {"fn": "count"},
	                                "total": {"fn": "sum", "path": "$.amount"}}}'::jsonb AS d) x
$$;

-- The smallest definition, normalized: every default filled in.
SELECT jsonb_pretty(queen_streams.create_stream('orders.per_minute', pg_temp.def()) - 'query_id'
	- 'config_hash');
SELECT name, source_queue, sink_queue, consumer_group, paused, definition->'time' AS time
  FROM queen_streams.list_streams();
-- It is a registered query, under the definition's hash.
SELECT q.source_queue, q.sink_queue, q.config_hash = d.config_hash AS same_hash,
       length(q.config_hash) AS hash_len
  FROM queen_streams.queries q JOIN queen_streams.declared_streams d ON d.query_id = q.id;

-- Top level.
SELECT pg_temp.bad(NULL);
SELECT pg_temp.bad('[]');
SELECT pg_temp.bad('"x"');
SELECT pg_temp.bad(pg_temp.def('{colour}', '"red"'));
SELECT pg_temp.bad(pg_temp.def(), NULL);
SELECT pg_temp.bad(pg_temp.def(), '');
SELECT pg_temp.bad(pg_temp.def(), 'orders.per_minute');
-- source and sink
SELECT pg_temp.bad(pg_temp.def('{source}'));
SELECT pg_temp.bad(pg_temp.def('{source}', '""'));
SELECT pg_temp.bad(pg_temp.def('{source}', '5'));
SELECT pg_temp.bad(pg_temp.def('{source}', to_jsonb(repeat('q', 300))));
SELECT pg_temp.bad(pg_temp.def('{sink}'));
SELECT pg_temp.bad(pg_temp.def('{sink}', '[]'));
-- consumer_group and subscription
SELECT pg_temp.bad(pg_temp.def('{consumer_group}', '"__QUEUE_MODE__"'));
SELECT pg_temp.bad(pg_temp.def('{consumer_group}', '""'));
SELECT pg_temp.bad(pg_temp.def('{subscription}', '"yesterday-ish"'));
SELECT pg_temp.bad(pg_temp.def('{subscription}', '7'));
-- filter and key: jsonpaths
SELECT pg_temp.bad(pg_temp.def('{filter}', '"$.amount >"'));
SELECT pg_temp.bad(pg_temp.def('{filter}', 'true'));
SELECT pg_temp.bad(pg_temp.def('{key}', '"$$.x"'));
-- an unsupported regex flag (jsonpath_in's 0A000) judges the text too: 22023
SELECT pg_temp.bad(pg_temp.def('{filter}', '"$.name like_regex \"a\" flag \"x\""'));
-- window
SELECT pg_temp.bad(pg_temp.def('{window}'));
SELECT pg_temp.bad(pg_temp.def('{window}', '60'));
SELECT pg_temp.bad(pg_temp.def('{window,type}'));
SELECT pg_temp.bad(pg_temp.def('{window,type}', '"rolling"'));
SELECT pg_temp.bad(pg_temp.def('{window,size}'));
SELECT pg_temp.bad(pg_temp.def('{window,size}', '0'));
SELECT pg_temp.bad(pg_temp.def('{window,size}', '1.5'));
SELECT pg_temp.bad(pg_temp.def('{window,size}', '"60"'));
SELECT pg_temp.bad(pg_temp.def('{window,grace}', '-1'));
SELECT pg_temp.bad(pg_temp.def('{window,slide}', '30'));
SELECT pg_temp.bad(pg_temp.def('{window,every}', '30'));
SELECT pg_temp.bad(pg_temp.def('{window}', '{"type": "hopping", "size": 60}'));
SELECT pg_temp.bad(pg_temp.def('{window}', '{"type": "hopping", "size": 60, "slide": 61}'));
SELECT pg_temp.bad(pg_temp.def('{window}', '{"type": "sliding", "size": 6000, "slide": 1}'));
SELECT pg_temp.bad(pg_temp.def('{window}', '{"type": "hopping", "size": 60, "slide": 30, "gap": 5}'));
SELECT pg_temp.bad(pg_temp.def('{window}', '{"type": "session"}'));
SELECT pg_temp.bad(pg_temp.def('{window}', '{"type": "session", "gap": 30, "size": 60}'));
-- time
SELECT pg_temp.bad(pg_temp.def('{time}', '"event"'));
SELECT pg_temp.bad(pg_temp.def('{time}', '{}'));
SELECT pg_temp.bad(pg_temp.def('{time}', '{"type": "wall"}'));
SELECT pg_temp.bad(pg_temp.def('{time}', '{"type": "processing", "path": "$.ts"}'));
SELECT pg_temp.bad(pg_temp.def('{time}', '{"type": "event"}'));
SELECT pg_temp.bad(pg_temp.def('{time}', '{"type": "event", "path": "ts("}'));
SELECT pg_temp.bad(pg_temp.def('{time}', '{"type": "event", "path": "$.ts", "lateness": -5}'));
SELECT pg_temp.bad(pg_temp.def('{time}', '{"type": "event", "path": "$.ts", "late": "keep"}'));
SELECT pg_temp.bad(pg_temp.def('{time}', '{"type": "event", "path": "$.ts", "late": "queue"}'));
SELECT pg_temp.bad(pg_temp.def('{time}', '{"type": "event", "path": "$.ts", "late_queue": "x"}'));
SELECT pg_temp.bad(pg_temp.def('{time}', '{"type": "event", "path": "$.ts", "zone": "UTC"}'));
-- aggregates
SELECT pg_temp.bad(pg_temp.def('{aggregates}'));
SELECT pg_temp.bad(pg_temp.def('{aggregates}', '{}'));
SELECT pg_temp.bad(pg_temp.def('{aggregates}', '["count"]'));
SELECT pg_temp.bad(pg_temp.def('{aggregates,n}', '"count"'));
SELECT pg_temp.bad(pg_temp.def('{aggregates,n}', '{}'));
SELECT pg_temp.bad(pg_temp.def('{aggregates,n}', '{"fn": "median", "path": "$.x"}'));
SELECT pg_temp.bad(pg_temp.def('{aggregates,n}', '{"fn": "count", "path": "$.x"}'));
SELECT pg_temp.bad(pg_temp.def('{aggregates,n}', '{"fn": "sum"}'));
SELECT pg_temp.bad(pg_temp.def('{aggregates,n}', '{"fn": "max", "path": "$.x["}'));
SELECT pg_temp.bad(pg_temp.def('{aggregates,n}', '{"fn": "avg", "path": "$.x", "scale": 2}'));
SELECT pg_temp.bad(pg_temp.def('{aggregates,windowStart}', '{"fn": "count"}'));
SELECT pg_temp.bad(pg_temp.def('{aggregates,key}', '{"fn": "count"}'));
SELECT pg_temp.bad(pg_temp.def('{aggregates}', jsonb_build_object(repeat('a', 64), '{"fn": "count"}'::jsonb)));
-- run options
SELECT pg_temp.bad(pg_temp.def('{batch}', '0'));
SELECT pg_temp.bad(pg_temp.def('{lease}', '3601'));
SELECT pg_temp.bad(pg_temp.def('{partitions}', '"all"'));
SELECT pg_temp.bad(pg_temp.def('{idle_flush}', '-1'));
SELECT pg_temp.bad(pg_temp.def('{reset}', '"yes"'));
-- nothing of a refused definition was written
SELECT count(*) AS streams, (SELECT count(*) FROM queen_streams.queries) AS queries
  FROM queen_streams.declared_streams;

-- Every field, normalized: hopping, event time with a late queue, each aggregate.
SELECT jsonb_pretty(queen_streams.create_stream('clicks.hop', '{
	"source": "clicks", "consumer_group": "my.group", "subscription": "new",
	"filter": "$.kind == \"click\"", "key": "partition",
	"window": {"type": "sliding", "size": 120, "slide": 30, "grace": 5},
	"time": {"type": "event", "path": "$.at", "lateness": 10, "late": "queue", "late_queue": "clicks.late"},
	"aggregates": {"n": {"fn": "count"}, "s": {"fn": "sum", "path": "$.v"}, "lo": {"fn": "min", "path": "$.v"},
	               "hi": {"fn": "max", "path": "$.v"}, "mean": {"fn": "avg", "path": "$.v"},
	               "f": {"fn": "first", "path": "$.v"}, "l": {"fn": "last", "path": "$.v"},
	               "u": {"fn": "count_distinct", "path": "$.user"}},
	"sink": "clicks.hop", "batch": 50, "lease": 10, "partitions": 8, "idle_flush": 0}')->'definition');
SELECT queen_streams.create_stream('visits', '{"source": "visits", "sink": "visits.sessions",
	"window": {"type": "session", "gap": 1800}, "time": {"type": "event", "path": "$.ts"},
	"aggregates": {"pages": {"fn": "count"}}, "subscription": "2026-01-01T00:00:00Z"}')->'definition'
	-> 'window' AS session_window;

-- The hash covers the fold only: a new sink or batch keeps it, a new
-- aggregate changes it.
CREATE TEMP TABLE h AS SELECT config_hash FROM queen_streams.declared_streams WHERE name = 'orders.per_minute';
SELECT r->>'success' AS success, r->>'config_hash' = (SELECT config_hash FROM h) AS same_hash
  FROM queen_streams.alter_stream('orders.per_minute',
	pg_temp.def('{sink}', '"orders.minutely"') || '{"batch": 10}') r;
SELECT sink_queue, definition->'batch' AS batch FROM queen_streams.list_streams() WHERE name = 'orders.per_minute';
-- a changed fold is the registration's 409: 55000, nothing changed
DO $$
BEGIN
	PERFORM queen_streams.alter_stream('orders.per_minute',
		pg_temp.def('{aggregates,hi}', '{"fn": "max", "path": "$.amount"}'));
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE '%: %', SQLSTATE, SQLERRM;
END $$;
SELECT definition->'aggregates' ? 'hi' AS has_hi FROM queen_streams.list_streams() WHERE name = 'orders.per_minute';
-- with reset it goes through and the open windows go
INSERT INTO queen_streams.state (query_id, partition_id, key, value)
SELECT query_id, gen_random_uuid(), 'tumb:60' || chr(31) || 'w' || chr(31) || 'k', '{}' FROM queen_streams.declared_streams
 WHERE name = 'orders.per_minute';
SELECT r->>'success' AS success, r->>'reset' AS reset, r->>'config_hash' = (SELECT config_hash FROM h) AS same_hash
  FROM queen_streams.alter_stream('orders.per_minute',
	pg_temp.def('{aggregates,hi}', '{"fn": "max", "path": "$.amount"}'), reset => true) r;
SELECT count(*) AS state_rows FROM queen_streams.state;
DO $$
BEGIN
	PERFORM queen_streams.alter_stream('nope', pg_temp.def());
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE '%: %', SQLSTATE, SQLERRM;
END $$;
DO $$
BEGIN
	PERFORM queen_streams.alter_stream('orders.per_minute', pg_temp.def('{reset}', 'true'));
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE '%: %', SQLSTATE, SQLERRM;
END $$;

-- An SDK worker's registration of the same name: adopted when the hash
-- matches, a 55000 when it does not, unless the definition says reset.
CREATE TEMP TABLE d AS SELECT definition - 'consumer_group' - 'subscription' AS d, config_hash
  FROM queen_streams.declared_streams WHERE name = 'visits';
SELECT queen_streams.register_query(jsonb_build_object('name', 'sdk.same', 'source_queue', 'visits',
	'config_hash', (SELECT config_hash FROM d)))->>'fresh' AS fresh;
SELECT r->>'fresh' AS fresh FROM queen_streams.create_stream('sdk.same', (SELECT d FROM d)) r;
SELECT queen_streams.register_query('{"name": "sdk.other", "source_queue": "visits", "config_hash": "abc"}')->>'fresh' AS fresh;
SELECT pg_temp.bad((SELECT d FROM d), 'sdk.other');
SELECT r->>'fresh' AS fresh FROM queen_streams.create_stream('sdk.other', (SELECT d FROM d) || '{"reset": true}') r;
SELECT q.name, q.config_hash = d.config_hash AS declared_hash
  FROM queen_streams.queries q JOIN queen_streams.declared_streams d ON d.query_id = q.id ORDER BY q.name;
-- the tenant gate applies to a new name, as for register_query
DO $$
DECLARE
	d text;
BEGIN
	PERFORM queen_streams.create_stream('t.s', pg_temp.def(), '00000000-0000-0000-0000-0000000000aa');
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
	RAISE NOTICE '%: % / %', SQLSTATE, SQLERRM, d;
END $$;

-- pause, resume, drop; an unknown name is 42704
SELECT r->>'paused' AS paused FROM queen_streams.pause_stream('visits') r;
SELECT name, paused FROM queen_streams.list_streams() ORDER BY name;
SELECT r->>'paused' AS paused FROM queen_streams.resume_stream('visits') r;
SELECT stream, partition, lag, open_windows, cycles, errors
  FROM queen_streams.stream_status('visits');
-- a declared stream is not dropped as a bare query: its group would stay
DO $$ BEGIN
	PERFORM queen_streams.drop_query('visits');
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE 'drop_query: %: %', SQLSTATE, SQLERRM;
END $$;
SELECT r->>'dropped' AS dropped FROM queen_streams.drop_stream('visits') r;
-- a source queue that exists draws no notice
SELECT jsonb_array_length(queen.push('{"items":[{"queue":"declared.src","payload":1}]}')) AS pushed;
SELECT queen_streams.create_stream('declared.present', pg_temp.def('{source}', '"declared.src"'))->>'name' AS created;
SELECT r->>'dropped' AS dropped FROM queen_streams.drop_stream('declared.present') r;
SELECT count(*) AS visits_query FROM queen_streams.queries WHERE name = 'visits';
DO $$
DECLARE
	f text;
BEGIN
	FOREACH f IN ARRAY ARRAY['drop_stream', 'pause_stream', 'resume_stream'] LOOP
		BEGIN
			EXECUTE format('SELECT queen_streams.%I(%L)', f, 'visits');
		EXCEPTION WHEN OTHERS THEN
			RAISE NOTICE '%: %: %', f, SQLSTATE, SQLERRM;
		END;
	END LOOP;
END $$;

-- GET /streams/v1/streams's body
SELECT jsonb_array_length(b->'streams') AS streams, b->'streams'->0->>'name' AS first,
       b->'streams'->0->'partitions' AS partitions
  FROM queen_streams.streams() b;

DROP EXTENSION queen_streams CASCADE;
