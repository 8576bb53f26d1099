-- The dashboard's reads (sql/0.2.0/80-dashboard.sql): dashboard_streams
-- (queries, per source partition the cursor and lag of streams.<name>,
-- state rows, tenants apart), dashboard_groups (queue_stats' rows of a
-- tenant), dashboard_throughput (no listener here: no samples, the shape
-- only) and dashboard_workers. Uuids and times masked.
CREATE EXTENSION queen_streams;

\set t_b 'bbbbbbbb-0000-4000-8000-00000000000b'

CREATE FUNCTION pg_temp.m(j jsonb) RETURNS text LANGUAGE sql AS $$
	SELECT regexp_replace(regexp_replace(jsonb_pretty(j),
	         '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<uuid>', 'g'),
	         '"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"', '"<ms-time>"', 'g')
$$;

-- Nothing registered yet.
SELECT pg_temp.m(queen_streams.dashboard_streams());

-- orders: eu (5 messages), us (2); a query reading it as streams.orders.count.
SELECT jsonb_array_length(queen.push(jsonb_build_object('items', (
	SELECT jsonb_agg(jsonb_build_object('queue', 'orders', 'partition', p, 'payload', i))
	  FROM (VALUES ('eu', 5), ('us', 2)) v(p, n), generate_series(1, v.n) i)))) AS pushed;
SELECT queen_streams.register_query('{"name":"orders.count","source_queue":"orders",
	"sink_queue":"orders.counts","config_hash":"h1"}') ->> 'success' AS registered;
SELECT queen_streams.register_query('{"name":"idle","source_queue":"nowhere","config_hash":"h"}') ->> 'success' AS registered;

-- The group reads three of eu and commits them with two state rows.
CREATE TEMP TABLE popped AS
SELECT queen.pop('orders', 'eu', 'streams.orders.count', 3) AS r;
SELECT queen_streams.cycle(jsonb_build_object(
	'query_id', (SELECT id FROM queen_streams.queries WHERE name = 'orders.count'),
	'partition_id', (SELECT r #>> '{messages,0,partitionId}' FROM popped),
	'consumer_group', 'streams.orders.count',
	'state_ops', '[{"type":"upsert","key":"a","value":1},{"type":"upsert","key":"b","value":2}]'::jsonb,
	'ack', jsonb_build_object('leaseId', (SELECT r ->> 'leaseId' FROM popped), 'status', 'completed'))) ->> 'success' AS cycled;

SELECT pg_temp.m(queen_streams.dashboard_streams());

-- A lease shows as such.
SELECT jsonb_array_length(queen.pop('orders', 'us', 'streams.orders.count', 1) -> 'messages') AS leased;
SELECT p ->> 'partition' AS partition, p ->> 'leaseActive' AS lease, p ->> 'lag' AS lag
  FROM jsonb_array_elements(queen_streams.dashboard_streams() #> '{queries,1,partitions}') p;

-- Another tenant sees none of it, and its own.
SELECT queen_streams.dashboard_streams(:'t_b');

-- Without the listener (http_port = 0 here) there are no samples.
SELECT queen_streams.dashboard_throughput();
SELECT queen_streams.dashboard_throughput('orders', :'t_b');
SELECT jsonb_typeof(w -> 'workers') AS workers, w -> 'connections' AS connections,
       w -> 'sampleIntervalSeconds' AS interval
  FROM queen_streams.dashboard_workers() w;

-- Backlog and lag per queue and group (dashboard_groups): the tenant's rows
-- of queue_stats, which GET /metrics's gauges show too; no queue-mode row
-- on orders: only streams.orders.count reads it.
SELECT g ->> 'queue' AS queue, g ->> 'consumerGroup' AS grp, g -> 'partitions' AS parts,
       g -> 'backlog' AS backlog, g -> 'partitionsWithBacklog' AS parts_backlog,
       g -> 'leasedPartitions' AS leased, g -> 'deadLetters' AS dead, g -> 'messages' AS messages,
       (g ->> 'lagSeconds')::numeric > 0 AS lagging, g ? 'oldestUnackedAt' AS has_oldest
  FROM jsonb_array_elements(queen_streams.dashboard_groups() -> 'groups') g;
SELECT (SELECT jsonb_agg(jsonb_build_array(queue, consumer_group, backlog_messages, partitions_with_backlog,
                                           leased_partitions, dead_letters, date_trunc('milliseconds', oldest_unacked_at))
                         ORDER BY queue COLLATE "C", consumer_group COLLATE "C")
          FROM queen_streams.queue_stats WHERE tenant_id = '00000000-0000-0000-0000-000000000001')
     = (SELECT jsonb_agg(jsonb_build_array(g ->> 'queue', g ->> 'consumerGroup', g -> 'backlog',
                                           g -> 'partitionsWithBacklog', g -> 'leasedPartitions', g -> 'deadLetters',
                                           (g ->> 'oldestUnackedAt')::timestamptz))
          FROM jsonb_array_elements(queen_streams.dashboard_groups() -> 'groups') g) AS same_as_queue_stats;
SELECT queen_streams.dashboard_groups(:'t_b');

-- Route functions: owner's rights, closed to PUBLIC.
SELECT p.oid::regprocedure AS fn, p.prosecdef AS definer, p.proconfig,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_may
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'queen_streams' AND p.proname LIKE 'dashboard\_%'
 ORDER BY 1::text;

DROP EXTENSION queen_streams CASCADE;
