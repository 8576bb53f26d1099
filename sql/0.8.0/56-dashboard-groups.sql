--------------------------------------------------------------------------
-- The dashboard's backlog and lag per queue and consumer group: the rows of
-- queen.queue_stats() (GET /metrics's gauges) for one tenant, so the page,
-- SQL and Prometheus show the same numbers (GET /api/v1/dashboard/groups).
--------------------------------------------------------------------------
CREATE FUNCTION queen_streams.dashboard_groups(tenant uuid DEFAULT NULL)
RETURNS jsonb LANGUAGE sql STABLE
AS $$
	SELECT jsonb_build_object('groups', COALESCE(jsonb_agg(jsonb_build_object(
		'queue', s.queue, 'consumerGroup', s.consumer_group, 'partitions', s.partitions,
		'partitionsWithBacklog', s.partitions_with_backlog, 'leasedPartitions', s.leased_partitions,
		'backlog', s.backlog_messages,
		'oldestUnackedAt', to_char(s.oldest_unacked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
		'lagSeconds', round(s.lag_seconds::numeric, 3), 'deadLetters', s.dead_letters, 'messages', s.messages)
		ORDER BY s.queue COLLATE "C", s.consumer_group COLLATE "C"), '[]'::jsonb))
	  FROM queen.queue_stats() s
	 WHERE s.tenant_id = COALESCE($1, '00000000-0000-0000-0000-000000000001'::uuid)
$$;
COMMENT ON FUNCTION queen_streams.dashboard_groups(uuid) IS
	'the tenant''s rows of queen.queue_stats(): backlog, lag, partitions, leases, dead letters per queue and consumer group (GET /api/v1/dashboard/groups)';
REVOKE EXECUTE ON FUNCTION queen_streams.dashboard_groups(uuid) FROM PUBLIC;
ALTER FUNCTION queen_streams.dashboard_groups(uuid) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
