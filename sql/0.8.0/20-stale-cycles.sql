-- Stale cycles (issue 42): cycles refused as stale on a declared stream's
-- state shard, any caller's (its own workers or an SDK worker of the same
-- query), counted per source partition and shown by stream_status.
ALTER TABLE queen_streams.declared_stats ADD COLUMN stale bigint NOT NULL DEFAULT 0;

DROP FUNCTION queen_streams.stream_status(text, uuid);
-- open_windows: state rows but the watermark; events_per_second: events
-- folded since the start of the current one-minute interval, per second;
-- stale_cycles: cycles on the partition's shard refused as stale.
CREATE FUNCTION queen_streams.stream_status(name text DEFAULT NULL, tenant uuid DEFAULT NULL,
	OUT stream text, OUT paused boolean, OUT partition text, OUT partition_id uuid,
	OUT cursor bigint, OUT last_offset bigint, OUT lag bigint, OUT lease_active boolean,
	OUT open_windows bigint, OUT watermark timestamptz, OUT cycles bigint, OUT events bigint,
	OUT filtered bigint, OUT late bigint, OUT windows_emitted bigint, OUT errors bigint,
	OUT last_cycle_at timestamptz, OUT last_error text, OUT last_error_at timestamptz,
	OUT events_per_second numeric, OUT stale_cycles bigint)
RETURNS SETOF record LANGUAGE sql STABLE
AS $$
	WITH d AS (
		SELECT d.*, q.source_queue FROM queen_streams.declared_streams d
		  JOIN queen_streams.queries q ON q.id = d.query_id
		 WHERE d.tenant_id = COALESCE($2, '00000000-0000-0000-0000-000000000001'::uuid)
		   AND ($1 IS NULL OR d.name = $1)),
	parts AS (
		SELECT d.query_id, p.id, p.name, p.last_offset, p.log_start
		  FROM d
		  JOIN queen.queues sq ON sq.tenant_id = d.tenant_id AND sq.name = d.source_queue
		  JOIN queen.log_partitions p ON p.queue_id = sq.id
		UNION
		SELECT s.query_id, s.partition_id, NULL, NULL, NULL
		  FROM queen_streams.declared_stats s JOIN d USING (query_id)
		 WHERE s.partition_id = '00000000-0000-0000-0000-000000000000')
	SELECT d.name, d.paused, p.name, p.id, c.committed, p.last_offset,
		   CASE WHEN p.last_offset IS NULL THEN NULL ELSE
		   GREATEST(p.last_offset - GREATEST(COALESCE(c.committed, -1), p.log_start - 1), 0) END,
		   COALESCE(c.worker_id IS NOT NULL AND c.lease_expires_at > now(), false),
		   (SELECT count(*) FROM queen_streams.state s
			 WHERE s.query_id = d.query_id AND s.partition_id = p.id AND s.key <> '__wm__'),
		   (SELECT to_timestamp((s.value ->> 'eventTimeMs')::numeric / 1000) FROM queen_streams.state s
			 WHERE s.query_id = d.query_id AND s.partition_id = p.id AND s.key = '__wm__'),
		   COALESCE(st.cycles, 0), COALESCE(st.events, 0), COALESCE(st.filtered, 0),
		   COALESCE(st.late, 0), COALESCE(st.windows, 0), COALESCE(st.errors, 0),
		   st.last_cycle_at, st.last_error, st.last_error_at,
		   CASE WHEN st.rate_since IS NULL THEN 0 ELSE
		   round(st.rate_events / GREATEST(extract(epoch FROM now() - st.rate_since), 1), 1) END,
		   COALESCE(st.stale, 0)
	  FROM d
	  JOIN parts p ON p.query_id = d.query_id
	  LEFT JOIN queen.log_consumers c
		ON c.partition_id = p.id AND c.consumer_group = d.definition ->> 'consumer_group'
	  LEFT JOIN queen_streams.declared_stats st ON st.query_id = d.query_id AND st.partition_id = p.id
	 ORDER BY d.name, p.name NULLS FIRST
$$;
COMMENT ON FUNCTION queen_streams.stream_status(text, uuid) IS
	'per declared stream and source partition: cursor, lag, open windows, watermark, last cycle, errors, throughput, stale cycles';
REVOKE EXECUTE ON FUNCTION queen_streams.stream_status(text, uuid) FROM PUBLIC;
ALTER FUNCTION queen_streams.stream_status(text, uuid) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
