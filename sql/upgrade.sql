-- ALTER EXTENSION queen_streams UPDATE: a database made at 0.1.0 and filled
-- with queues, messages, cursors, a live lease, dead letters and stream
-- state serves all of it after the update as before; and the updated schema
-- is the one a fresh install makes (catalogs compared).
CREATE EXTENSION queen_streams VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'queen_streams';

-- Everything the extension's objects are made of, one row per fact.
CREATE FUNCTION pg_temp.catalog() RETURNS TABLE (fact text) LANGUAGE sql AS $$
	WITH ext AS (SELECT oid FROM pg_extension WHERE extname = 'queen_streams'),
	members AS (
		SELECT d.classid, d.objid FROM pg_depend d, ext
		 WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'),
	rels AS (
		SELECT c.oid, c.relname, c.relkind FROM pg_class c JOIN members m
		    ON m.classid = 'pg_class'::regclass AND m.objid = c.oid)
	SELECT 'member ' || pg_describe_object(classid, objid, 0) FROM members
	UNION ALL
	SELECT 'column ' || r.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
	       || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
	       || coalesce(' default ' || pg_get_expr(ad.adbin, ad.adrelid), '')
	       || coalesce(' collate ' || nullif(co.collname, 'default'), '')
	       || ' storage ' || a.attstorage::text
	  FROM rels r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
	  LEFT JOIN pg_attrdef ad ON ad.adrelid = r.oid AND ad.adnum = a.attnum
	  LEFT JOIN pg_collation co ON co.oid = a.attcollation
	UNION ALL
	SELECT 'index ' || pg_get_indexdef(i.indexrelid) FROM rels r JOIN pg_index i ON i.indrelid = r.oid
	UNION ALL
	SELECT 'constraint ' || r.relname || ' ' || pg_get_constraintdef(k.oid)
	  FROM rels r JOIN pg_constraint k ON k.conrelid = r.oid
	UNION ALL
	SELECT 'relation ' || r.relname || ' ' || r.relkind::text || ' acl ' || coalesce(c.relacl::text, '-')
	       || ' options ' || coalesce(c.reloptions::text, '-')
	  FROM rels r JOIN pg_class c ON c.oid = r.oid
	UNION ALL
	SELECT 'view ' || r.relname || ' ' || pg_get_viewdef(r.oid) FROM rels r WHERE r.relkind = 'v'
	UNION ALL
	SELECT 'function ' || p.oid::regprocedure || ' acl ' || coalesce(p.proacl::text, '-')
	       || ' definer ' || p.prosecdef || ' config ' || coalesce(p.proconfig::text, '-')
	       || ' ' || pg_get_functiondef(p.oid)
	  FROM members m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
	UNION ALL
	SELECT 'dumped ' || c::regclass::text FROM pg_extension e, unnest(e.extconfig) c
	 WHERE e.extname = 'queen_streams'
$$;

-- Fill it at 0.1.0.
SELECT queen.configure('{"queue":"up","options":{"leaseTime":120,"retryLimit":0}}')->>'queue' AS configured;
SELECT count(*) AS pushed FROM jsonb_array_elements(queen.push(jsonb_build_object('items',
	(SELECT jsonb_agg(jsonb_build_object('queue', 'up', 'transactionId', 'u' || i,
	                                     'payload', jsonb_build_object('i', i)) ORDER BY i)
	   FROM generate_series(1, 6) i))));
CREATE TEMP TABLE popped AS SELECT queen.pop('up', consumer_group => 'g', batch => 2) AS r;
SELECT string_agg(m->>'transactionId', ',') AS leased FROM popped, jsonb_array_elements(r->'messages') m;
CREATE TEMP TABLE failed AS SELECT queen.pop('up', batch => 1) AS r;
SELECT x->>'dlq' AS dead_lettered
  FROM failed, jsonb_array_elements(queen.ack(jsonb_build_object(
	'transactionId', 'u1', 'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId',
	'status', 'failed', 'error', 'boom'))) x;
SELECT queen_streams.register_query('{"name":"up.q","source_queue":"up","config_hash":"h1"}')->>'fresh' AS registered;
CREATE TEMP TABLE qid AS SELECT id FROM queen_streams.queries WHERE name = 'up.q';
INSERT INTO queen_streams.state (query_id, partition_id, key, value)
SELECT id, (SELECT id FROM queen.log_partitions LIMIT 1), 'k1', '{"acc":7}' FROM qid;

ALTER EXTENSION queen_streams UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'queen_streams';

-- Served as before: the options, the live lease, the backlog, the dead
-- letter and the state.
SELECT r->'options'->>'leaseTime' AS lease_time, r->'options'->>'maxSize' AS max_size
  FROM (SELECT queen.configure('{"queue":"up","options":{"leaseTime":120,"retryLimit":0}}') r) c;
SELECT x->>'success' AS lease_still_acks
  FROM popped, jsonb_array_elements(queen.ack(jsonb_build_object(
	'consumerGroup', 'g', 'acknowledgments', jsonb_build_array(jsonb_build_object(
	  'transactionId', r->'messages'->1->>'transactionId', 'partitionId', r->>'partitionId',
	  'leaseId', r->>'leaseId'))))) x;
SELECT string_agg(m->>'transactionId', ',') AS group_resumes
  FROM jsonb_array_elements(queen.pop('up', consumer_group => 'g', batch => 10)->'messages') m;
SELECT string_agg(m->>'transactionId', ',') AS queue_resumes
  FROM jsonb_array_elements(queen.pop('up', batch => 10)->'messages') m;
SELECT transaction_id, error FROM queen.log_dlq;
SELECT key, value FROM queen_streams.state;
SELECT queen_streams.register_query('{"name":"up.q","source_queue":"up","config_hash":"h1"}')->>'fresh' AS still_registered;
-- The 0.2.0 ... 0.7.0 functions work on the updated database.
SELECT queen.maintenance()->>'maintenanceMode' AS maintenance;
SELECT pg_typeof(queen.push_text('{"items":[{"queue":"up.text","payload":1}]}')) AS push_text,
       queen.pop_text('up.text', auto_ack => true)->'messages'->0->>'data' AS pop_text;
SELECT (queen.push_text_many(ARRAY['{"items":[{"queue":"up.text","payload":2}]}'])::jsonb[])[1]->0->>'status' AS push_text_many;
SELECT (queen_streams.cycle_many(ARRAY[jsonb_build_object('query_id', (SELECT id FROM qid),
          'partition_id', (SELECT id FROM queen.log_partitions LIMIT 1))]))[1]->>'success' AS cycle_many;
SET queen_streams.dedup_partition_entries = 1;	-- 0.7.0: probed through log_txn_keys
SELECT string_agg(queen.push_text(format('{"items":[{"queue":"up","transactionId":"%s","payload":1}]}', t))::jsonb->0->>'status', ',')
         AS keyed_dedup
  FROM unnest(ARRAY['k1', 'k2', 'k1', 'k2']) t;
RESET queen_streams.dedup_partition_entries;

-- The updated schema is a fresh install's.
CREATE TEMP TABLE updated AS SELECT * FROM pg_temp.catalog();
DROP EXTENSION queen_streams CASCADE;
CREATE EXTENSION queen_streams;
CREATE TEMP TABLE fresh AS SELECT * FROM pg_temp.catalog();
SELECT count(*) > 100 AS facts_compared FROM fresh;
(SELECT 'only updated: ' || fact FROM updated EXCEPT SELECT 'only updated: ' || fact FROM fresh)
UNION ALL
(SELECT 'only fresh: ' || fact FROM fresh EXCEPT SELECT 'only fresh: ' || fact FROM updated)
ORDER BY 1;

DROP EXTENSION queen_streams CASCADE;
