\echo Use "ALTER EXTENSION queen_streams_router UPDATE TO '0.5.0'" to load this file. \quit
-- queen_streams 0.8.0's queen_streams.drop_query: its routed twin.
CREATE FUNCTION queen_streams.drop_query(name text, tenant uuid DEFAULT NULL)
RETURNS jsonb LANGUAGE plproxy
AS $$ CLUSTER 'queen_cells'; RUN ON queen_router.cell_for_write(tenant); $$;
COMMENT ON FUNCTION queen_streams.drop_query(text, uuid) IS 'runs on the tenant''s cell (write)';
REVOKE EXECUTE ON FUNCTION queen_streams.drop_query(text, uuid) FROM PUBLIC;

-- queen_streams 0.8.0's queen_streams.stream_status (its new column
-- stale_cycles): its routed twin, with the same result.
DROP FUNCTION queen_streams.stream_status(text, uuid);
CREATE FUNCTION queen_streams.stream_status(name text DEFAULT NULL, tenant uuid DEFAULT NULL,
	OUT stream text, OUT paused boolean, OUT partition text, OUT partition_id uuid, OUT cursor bigint,
	OUT last_offset bigint, OUT lag bigint, OUT lease_active boolean, OUT open_windows bigint,
	OUT watermark timestamptz, OUT cycles bigint, OUT events bigint, OUT filtered bigint, OUT late bigint,
	OUT windows_emitted bigint, OUT errors bigint, OUT last_cycle_at timestamptz, OUT last_error text,
	OUT last_error_at timestamptz, OUT events_per_second numeric, OUT stale_cycles bigint)
RETURNS SETOF record LANGUAGE plproxy
AS $$ CLUSTER 'queen_cells'; RUN ON queen_router.cell_for_read(tenant); $$;
REVOKE EXECUTE ON FUNCTION queen_streams.stream_status(text, uuid) FROM PUBLIC;

-- queen_streams 0.8.0's queen_streams.dashboard_groups: its routed twin.
CREATE FUNCTION queen_streams.dashboard_groups(tenant uuid DEFAULT NULL)
RETURNS jsonb LANGUAGE plproxy
AS $$ CLUSTER 'queen_cells'; RUN ON queen_router.cell_for_read(tenant); $$;
COMMENT ON FUNCTION queen_streams.dashboard_groups(uuid) IS 'runs on the tenant''s cell (read)';
REVOKE EXECUTE ON FUNCTION queen_streams.dashboard_groups(uuid) FROM PUBLIC;
