-- The operator's dashboard (GET /): the reads it needs that the other routes
-- do not answer: the listener's workers, the sampled throughput
-- (src/http/samples.c) and the registered stream queries with their cursors.
\echo Use "CREATE EXTENSION queen_streams" to load this file. \quit

CREATE FUNCTION queen_streams.dashboard_throughput(queue text DEFAULT NULL, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_dashboard_throughput' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen_streams.dashboard_throughput(text, uuid) IS
	'messages pushed, popped and acked per sample interval over the last 60 intervals, for the tenant''s queues or one (GET /api/v1/dashboard/throughput)';

CREATE FUNCTION queen_streams.dashboard_workers()
RETURNS jsonb LANGUAGE sql VOLATILE
AS $$
	SELECT jsonb_build_object(
		'workers', COALESCE(jsonb_agg(jsonb_build_object(
			'worker', w.worker, 'pid', w.pid,
			'startedAt', to_char(w.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
			'connections', w.connections, 'parkedPops', w.parked_pops,
			'requests', w.requests, 'listening', w.listening) ORDER BY w.worker), '[]'::jsonb),
		'connections', COALESCE(sum(w.connections), 0),
		'sampleIntervalSeconds', extract(epoch FROM current_setting('queen_streams.sample_interval', true)::interval)::int)
	FROM queen_streams.http_workers() w
$$;
COMMENT ON FUNCTION queen_streams.dashboard_workers() IS
	'the HTTP listener''s workers with their open connections (GET /api/v1/dashboard/workers)';

-- A query reads its source queue as the consumer group streams.<name>
-- (README, examples/window_counter.pl): per source partition, that group's
-- cursor and lag, and the query's state rows.
CREATE FUNCTION queen_streams.dashboard_streams(tenant uuid DEFAULT NULL)
RETURNS jsonb LANGUAGE sql STABLE
AS $$
	WITH q AS (
		SELECT * FROM queen_streams.queries
		 WHERE tenant_id = COALESCE($1, '00000000-0000-0000-0000-000000000001'::uuid)),
	p AS (
		SELECT q.id AS query_id, p.id, p.name, p.last_offset, c.committed,
			   GREATEST(p.last_offset - GREATEST(COALESCE(c.committed, -1), p.log_start - 1), 0) AS lag,
			   COALESCE(c.worker_id IS NOT NULL AND c.lease_expires_at > now(), false) AS lease,
			   c.lease_acquired_at, st.n, st.last
		  FROM q
		  JOIN queen.queues sq ON sq.tenant_id = q.tenant_id AND sq.name = q.source_queue
		  JOIN queen.log_partitions p ON p.queue_id = sq.id
		  LEFT JOIN queen.log_consumers c
			ON c.partition_id = p.id AND c.consumer_group = 'streams.' || q.name
		  LEFT JOIN LATERAL (
			SELECT count(*) AS n, max(s.updated_at) AS last FROM queen_streams.state s
			 WHERE s.query_id = q.id AND s.partition_id = p.id) st ON true)
	SELECT jsonb_build_object('queries', COALESCE(jsonb_agg(jsonb_build_object(
		'id', q.id, 'name', q.name, 'sourceQueue', q.source_queue, 'sinkQueue', q.sink_queue,
		'configHash', q.config_hash, 'consumerGroup', 'streams.' || q.name,
		'createdAt', to_char(q.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
		'updatedAt', to_char(q.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
		'stateRows', (SELECT count(*) FROM queen_streams.state s WHERE s.query_id = q.id),
		'lastStateWriteAt', (SELECT to_char(max(s.updated_at) AT TIME ZONE 'UTC',
			'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') FROM queen_streams.state s WHERE s.query_id = q.id),
		'totalLag', (SELECT COALESCE(sum(p.lag), 0) FROM p WHERE p.query_id = q.id),
		'partitions', (SELECT COALESCE(jsonb_agg(jsonb_build_object(
			'partition', p.name, 'partitionId', p.id, 'lastOffset', p.last_offset,
			'cursor', p.committed, 'lag', p.lag, 'leaseActive', p.lease,
			'lastLeaseAt', to_char(p.lease_acquired_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
			'stateRows', p.n,
			'lastStateWriteAt', to_char(p.last AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
			ORDER BY p.name), '[]'::jsonb) FROM p WHERE p.query_id = q.id))
		ORDER BY q.name), '[]'::jsonb))
	FROM q
$$;
COMMENT ON FUNCTION queen_streams.dashboard_streams(uuid) IS
	'the tenant''s stream queries: per source partition the cursor and lag of group streams.<name>, and state rows (GET /api/v1/dashboard/streams)';

DO $$
DECLARE
	f regprocedure;
BEGIN
	FOREACH f IN ARRAY ARRAY[
		'queen_streams.dashboard_throughput(text, uuid)',
		'queen_streams.dashboard_workers()',
		'queen_streams.dashboard_streams(uuid)']::regprocedure[]
	LOOP
		EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
		EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, pg_temp', f);
	END LOOP;
END $$;
