--------------------------------------------------------------------------
-- What an operator watches (GET /metrics shows the same numbers): per
-- queue and consumer group its backlog, lag and dead letters; per declared
-- stream its lag, open windows, late events and errors. Every tenant's:
-- not granted to PUBLIC (GRANT EXECUTE to a monitoring role).
--------------------------------------------------------------------------
CREATE FUNCTION queen.queue_stats(
	OUT tenant_id uuid, OUT queue text, OUT consumer_group text, OUT partitions bigint,
	OUT partitions_with_backlog bigint, OUT leased_partitions bigint, OUT backlog_messages bigint,
	OUT oldest_unacked_at timestamptz, OUT lag_seconds double precision, OUT dead_letters bigint,
	OUT messages bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'qs_queue_stats' LANGUAGE C STABLE;
COMMENT ON FUNCTION queen.queue_stats() IS
	'per queue and consumer group (queue mode: __QUEUE_MODE__): backlog, lag, leased partitions, dead letters, from offsets and cursors';
REVOKE EXECUTE ON FUNCTION queen.queue_stats() FROM PUBLIC;
ALTER FUNCTION queen.queue_stats() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

CREATE VIEW queen_streams.queue_stats AS SELECT * FROM queen.queue_stats();
COMMENT ON VIEW queen_streams.queue_stats IS
	'per queue and consumer group: backlog, lag in messages and seconds, partitions, leased partitions, dead letters';
REVOKE ALL ON queen_streams.queue_stats FROM PUBLIC;

-- lag: offsets past the stream's cursor (none: its log start) over its
-- source queue's partitions; open_windows: state rows but the watermarks.
-- src/http/metrics_gauges.c runs the same query (keep them equal).
CREATE FUNCTION queen_streams.stream_stats(
	OUT tenant_id uuid, OUT stream text, OUT paused boolean, OUT lag_messages bigint,
	OUT open_windows bigint, OUT events bigint, OUT late_events bigint, OUT errors bigint,
	OUT windows_emitted bigint)
RETURNS SETOF record LANGUAGE sql STABLE
AS $$
	SELECT d.tenant_id, d.name, d.paused,
		   (SELECT COALESCE(sum(GREATEST(p.last_offset - GREATEST(COALESCE(c.committed, -1), p.log_start - 1), 0)), 0)
			  FROM queen.queues sq
			  JOIN queen.log_partitions p ON p.queue_id = sq.id
			  LEFT JOIN queen.log_consumers c
				ON c.partition_id = p.id AND c.consumer_group = d.definition ->> 'consumer_group'
			 WHERE sq.tenant_id = d.tenant_id AND sq.name = q.source_queue)::bigint,
		   (SELECT count(*) FROM queen_streams.state s WHERE s.query_id = d.query_id AND s.key <> '__wm__'),
		   COALESCE(st.events, 0)::bigint, COALESCE(st.late, 0)::bigint, COALESCE(st.errors, 0)::bigint,
		   COALESCE(st.windows, 0)::bigint
	  FROM queen_streams.declared_streams d
	  JOIN queen_streams.queries q ON q.id = d.query_id
	  LEFT JOIN (SELECT query_id, sum(events) AS events, sum(late) AS late, sum(errors) AS errors,
						sum(windows) AS windows
				   FROM queen_streams.declared_stats GROUP BY query_id) st ON st.query_id = d.query_id
	 ORDER BY d.tenant_id, d.name
$$;
COMMENT ON FUNCTION queen_streams.stream_stats() IS
	'per declared stream of every tenant: lag in messages, open windows, events, late events, errors, windows emitted';
REVOKE EXECUTE ON FUNCTION queen_streams.stream_stats() FROM PUBLIC;
ALTER FUNCTION queen_streams.stream_stats() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
