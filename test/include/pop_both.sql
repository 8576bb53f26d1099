\set ECHO none
-- queen.pop and queen.pop_text on the same state (\i after CREATE
-- EXTENSION): sql/pop_text.sql and sql/pop_differential.sql.

-- A pop's answer with the pop's own lease id read as <lease>.
CREATE FUNCTION pg_temp.norm(r jsonb) RETURNS jsonb LANGUAGE sql AS $$
	SELECT jsonb_set(r || jsonb_build_object('leaseId', CASE WHEN r->>'leaseId' IS NULL THEN NULL
	                                                          WHEN r->>'leaseId' = '' THEN '' ELSE '<lease>' END),
	                 '{messages}', coalesce((SELECT jsonb_agg(m || jsonb_build_object('leaseId',
	                                                   CASE WHEN m->>'leaseId' = '' THEN '' ELSE '<lease>' END)
	                                                 ORDER BY n)
	                                           FROM jsonb_array_elements(r->'messages') WITH ORDINALITY e(m, n)),
	                                        '[]'))
$$;

-- What a pop leaves behind: every cursor (its lease as held or not and its
-- length in seconds, the clock's own times aside) and every subscription.
CREATE FUNCTION pg_temp.pop_state() RETURNS text LANGUAGE sql AS $$
	SELECT coalesce((SELECT string_agg(format('%s/%s:%s,%s,%s,%s,%s,%s,%s,%s,%s', p.name, c.consumer_group,
	                          c.committed, c.batch_end, c.worker_id IS NOT NULL,
	                          round(extract(epoch FROM c.lease_expires_at - c.lease_acquired_at)),
	                          c.batch_retry_count, c.attempt_offset, c.attempt_count, c.total_consumed,
	                          c.lease_conflated), ' ' ORDER BY p.id, c.consumer_group)
	                   FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id), '')
	    || ' | ' || coalesce((SELECT string_agg(format('%s:%s,%s', consumer_group, subscription_mode,
	                                                   subscription_timestamp IS NOT NULL),
	                                            ' ' ORDER BY queue_id, consumer_group)
	                            FROM queen.consumer_groups_metadata), '')
$$;

-- pop and pop_text on the same state (each rolled back): the same answer,
-- or the same error, and the same state left behind.
CREATE FUNCTION pg_temp.same(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	a jsonb;
	b jsonb;
	t json;
	sa text;
	sb text;
BEGIN
	BEGIN
		EXECUTE format('SELECT queen.pop(%s)', q) INTO a;
		sa := pg_temp.pop_state();
		RAISE EXCEPTION USING ERRCODE = 'QS999', MESSAGE = 'undo';
	EXCEPTION WHEN SQLSTATE 'QS999' THEN NULL;
	WHEN OTHERS THEN a := to_jsonb('error: ' || SQLSTATE || ' ' || SQLERRM);
	END;
	BEGIN
		EXECUTE format('SELECT queen.pop_text(%s)', q) INTO t;
		b := t::jsonb;
		sb := pg_temp.pop_state();
		RAISE EXCEPTION USING ERRCODE = 'QS999', MESSAGE = 'undo';
	EXCEPTION WHEN SQLSTATE 'QS999' THEN NULL;
	WHEN OTHERS THEN b := to_jsonb('error: ' || SQLSTATE || ' ' || SQLERRM);
	END;
	IF jsonb_typeof(a) = 'object' THEN
		a := pg_temp.norm(a);
		b := pg_temp.norm(b);
	END IF;
	IF a = b AND sa IS NOT DISTINCT FROM sb THEN
		RETURN 'same: ' || CASE WHEN jsonb_typeof(a) = 'object'
		                        THEN jsonb_array_length(a->'messages') || ' messages' ELSE a::text END;
	END IF;
	RETURN 'DIFFER: ' || a::text || ' | ' || b::text
		|| CASE WHEN sa IS DISTINCT FROM sb THEN ' (state ' || coalesce(sa, 'none') || ' | ' || coalesce(sb, 'none') || ')' ELSE '' END;
END $$;
\set ECHO all
