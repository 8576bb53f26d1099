\set ECHO none
-- Helpers the pg_regress tests share (\i test/include/helpers.sql, after
-- CREATE EXTENSION): psql runs the tests from the top directory.

-- The tenants the tests use: the default one and a second.
\set t_def '00000000-0000-0000-0000-000000000001'
\set t_b 'bbbbbbbb-0000-4000-8000-00000000000b'

-- Run q: 'ok', or its SQLSTATE, message and detail; with mask_uuids the
-- uuids in them read <uuid>.
CREATE FUNCTION pg_temp.try(q text, mask_uuids boolean DEFAULT false)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	d text;
	r text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
	r := SQLSTATE || ': ' || SQLERRM || coalesce(' (' || nullif(d, '') || ')', '');
	IF mask_uuids THEN
		r := regexp_replace(r, '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<uuid>', 'g');
	END IF;
	RETURN r;
END $$;

-- The transaction ids of a pop's messages, in order.
CREATE FUNCTION pg_temp.txns(r jsonb) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(m->>'transactionId', ',' ORDER BY n), '')
	  FROM jsonb_array_elements(r->'messages') WITH ORDINALITY AS e(m, n)
$$;

-- The id of a queue's partition.
CREATE FUNCTION pg_temp.pid(q text, part text DEFAULT 'Default',
                            tenant uuid DEFAULT '00000000-0000-0000-0000-000000000001')
RETURNS uuid LANGUAGE sql AS $$
	SELECT p.id FROM queen.log_partitions p JOIN queen.queues qq ON qq.id = p.queue_id
	 WHERE qq.name = q AND p.name = part AND qq.tenant_id = tenant
$$;

-- A result, pretty, with uuids and (microsecond) times masked.
CREATE FUNCTION pg_temp.mask(j jsonb) RETURNS text LANGUAGE sql AS $$
	SELECT regexp_replace(regexp_replace(jsonb_pretty(j),
	         '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<uuid>', 'g'),
	         '\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z', '<time>', 'g')
$$;

-- Run q (a query of one text value) with $1 = args, then the query `after`
-- if given (its value appended on a new line), and roll it all back: the
-- text, or the error as SQLSTATE: message.
CREATE FUNCTION pg_temp.rolled_back(q text, args anyarray, after text DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r text;
	w text;
BEGIN
	EXECUTE q INTO r USING args;
	IF after IS NOT NULL THEN
		EXECUTE after INTO w;
		r := r || E'\n' || w;
	END IF;
	RAISE EXCEPTION USING ERRCODE = 'QS999', MESSAGE = r;
EXCEPTION WHEN SQLSTATE 'QS999' THEN
	RETURN SQLERRM;
WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
\set ECHO all
