\set ECHO none
-- queen.pop and queen.pop_text on the same state (\i after CREATE
-- EXTENSION): sql/pop_text.sql and sql/pop_differential.sql.

-- A pop's answer with its own lease id read as <lease>, at the top and in
-- the messages that carry it; no member is added or removed.
CREATE FUNCTION pg_temp.norm(r jsonb) RETURNS jsonb LANGUAGE sql AS $$
	SELECT CASE WHEN coalesce(r->>'leaseId', '') = '' THEN r ELSE
	  jsonb_set(r, '{leaseId}', '"<lease>"', false)
	  || CASE WHEN jsonb_typeof(r->'messages') = 'array' THEN jsonb_build_object('messages', coalesce(
	       (SELECT jsonb_agg(CASE WHEN m->'leaseId' = r->'leaseId'
	                              THEN jsonb_set(m, '{leaseId}', '"<lease>"', false) ELSE m END ORDER BY n)
	          FROM jsonb_array_elements(r->'messages') WITH ORDINALITY e(m, n)), '[]'))
	     ELSE '{}' END END
$$;

-- What a pop leaves behind: every cursor (its lease as the pop's own, another
-- or none, and its length in seconds: the clock's own times aside) and every
-- subscription.
CREATE FUNCTION pg_temp.pop_state(lease text) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce((SELECT string_agg(format('%s/%s:%s,%s,%s,%s,%s,%s,%s,%s,%s', p.name, c.consumer_group,
	                          c.committed, c.batch_end,
	                          CASE WHEN c.worker_id IS NULL THEN 'none' WHEN c.worker_id = lease THEN 'own' ELSE 'other' END,
	                          round(extract(epoch FROM c.lease_expires_at - c.lease_acquired_at)),
	                          c.batch_retry_count, c.attempt_offset, c.attempt_count, c.total_consumed,
	                          c.lease_conflated), ' ' ORDER BY p.id, c.consumer_group)
	                   FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id), '')
	    || ' | ' || coalesce((SELECT string_agg(format('%s:%s,%s', consumer_group, subscription_mode,
	                                                   subscription_timestamp IS NOT NULL),
	                                            ' ' ORDER BY queue_id, consumer_group)
	                            FROM queen.consumer_groups_metadata), '')
$$;

-- An object's keys in order, duplicates kept (json, not jsonb).
CREATE FUNCTION pg_temp.keys(o json) RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(k, ',' ORDER BY n) FROM json_object_keys(o) WITH ORDINALITY e(k, n)
$$;

-- pop_text's own layout, which a cast to jsonb would hide (duplicate keys,
-- order): its members in order, the messages last, and each message's.
CREATE FUNCTION pg_temp.layout(t json) RETURNS text LANGUAGE sql AS $$
	SELECT CASE WHEN json_typeof(t) <> 'object' THEN 'not an object'
	            WHEN pg_temp.keys(t) <> 'success,queue,consumerGroup,leaseId,partition,partitionId,partitionsClaimed,messages'
	            THEN 'members ' || pg_temp.keys(t)
	            ELSE coalesce((SELECT 'message ' || string_agg(DISTINCT l, ' / ')
	                             FROM (SELECT pg_temp.keys(m) AS l FROM json_array_elements(t->'messages') m) x
	                            WHERE l IS DISTINCT FROM
	                                  'id,transactionId,partitionId,partition,consumerGroup,leaseId,createdAt,traceId,producerSub,data'),
	                          'ok') END
$$;

-- pop and pop_text on the same state (each rolled back): the same answer,
-- or the same error, and the same state left behind; pop_text laid out as
-- it promises.
CREATE FUNCTION pg_temp.same(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	a jsonb;
	b jsonb;
	t json;
	sa text;
	sb text;
	lay text := 'ok';
BEGIN
	BEGIN
		EXECUTE format('SELECT queen.pop(%s)', q) INTO a;
		sa := pg_temp.pop_state(a->>'leaseId');
		RAISE EXCEPTION USING ERRCODE = 'QS999', MESSAGE = 'undo';
	EXCEPTION WHEN SQLSTATE 'QS999' THEN NULL;
	WHEN OTHERS THEN a := to_jsonb('error: ' || SQLSTATE || ' ' || SQLERRM);
	END;
	BEGIN
		EXECUTE format('SELECT queen.pop_text(%s)', q) INTO t;
		lay := pg_temp.layout(t);
		b := t::jsonb;
		sb := pg_temp.pop_state(b->>'leaseId');
		RAISE EXCEPTION USING ERRCODE = 'QS999', MESSAGE = 'undo';
	EXCEPTION WHEN SQLSTATE 'QS999' THEN NULL;
	WHEN OTHERS THEN b := to_jsonb('error: ' || SQLSTATE || ' ' || SQLERRM);
	END;
	IF jsonb_typeof(a) = 'object' AND jsonb_typeof(b) = 'object' THEN
		a := pg_temp.norm(a);
		b := pg_temp.norm(b);
	END IF;
	IF a = b AND sa IS NOT DISTINCT FROM sb AND lay = 'ok' THEN
		RETURN 'same: ' || CASE WHEN jsonb_typeof(a) = 'object'
		                        THEN jsonb_array_length(a->'messages') || ' messages' ELSE a::text END;
	END IF;
	RETURN 'DIFFER: ' || coalesce(a::text, 'NULL') || ' | ' || coalesce(b::text, 'NULL')
		|| CASE WHEN lay <> 'ok' THEN ' (pop_text layout: ' || lay || ')' ELSE '' END
		|| CASE WHEN sa IS DISTINCT FROM sb THEN ' (state ' || coalesce(sa, 'none') || ' | ' || coalesce(sb, 'none') || ')' ELSE '' END;
END $$;
\set ECHO all
