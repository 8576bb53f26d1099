\set ECHO none
-- queen.push and queen.push_text on the same text (\i after CREATE
-- EXTENSION): sql/push_text.sql and sql/push_text_differential.sql.

-- An answer without its generated ids: per item its index, status, queue,
-- transaction id, which item's message id it reports, which item first
-- named its partition, its trace id, and its keys.
CREATE FUNCTION pg_temp.norm(r jsonb) RETURNS text LANGUAGE sql AS $$
	WITH e AS (SELECT x, n FROM jsonb_array_elements(r) WITH ORDINALITY AS a(x, n))
	SELECT coalesce(string_agg(format('%s/%s/%s/%s/id%s/p%s/%s/%s',
	         x->>'index', x->>'status', x->>'queueName',
	         CASE WHEN x->>'transaction_id' = x->>'message_id' THEN '<id>' ELSE x->>'transaction_id' END,
	         (SELECT min(e2.n) - 1 FROM e e2 WHERE e2.x->>'message_id' = e.x->>'message_id'),
	         (SELECT min(e2.n) - 1 FROM e e2 WHERE e2.x->>'partition_id' = e.x->>'partition_id'),
	         coalesce(x->>'trace_id', 'no trace'),
	         (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(x) k)), ' ' ORDER BY n), '[]')
	  FROM e
$$;

-- Run queen.push(t::jsonb) and queen.push_text(t), each rolled back, and
-- compare their answers (normalized) or errors.
CREATE FUNCTION pg_temp.both(t text, tenant uuid DEFAULT NULL) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	a text;
	b text;
	d text;
BEGIN
	BEGIN
		a := pg_temp.norm(queen.push(t::jsonb, tenant));
		RAISE EXCEPTION USING ERRCODE = 'QS999', MESSAGE = a;
	EXCEPTION WHEN SQLSTATE 'QS999' THEN
		a := SQLERRM;
	WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
		a := SQLSTATE || ': ' || SQLERRM || coalesce(' (' || nullif(d, '') || ')', '');
	END;
	BEGIN
		b := pg_temp.norm(queen.push_text(t, tenant)::jsonb);
		RAISE EXCEPTION USING ERRCODE = 'QS999', MESSAGE = b;
	EXCEPTION WHEN SQLSTATE 'QS999' THEN
		b := SQLERRM;
	WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
		b := SQLSTATE || ': ' || SQLERRM || coalesce(' (' || nullif(d, '') || ')', '');
	END;
	IF a IS NOT DISTINCT FROM b THEN
		RETURN 'same: ' || a;
	END IF;
	RETURN 'DIFFER: push ' || coalesce(a, 'NULL') || ' | push_text ' || coalesce(b, 'NULL');
END $$;
\set ECHO all
