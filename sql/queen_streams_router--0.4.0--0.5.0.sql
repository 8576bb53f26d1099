\echo Use "ALTER EXTENSION queen_streams_router UPDATE TO '0.5.0'" to load this file. \quit
-- queen_streams 0.8.0's queen_streams.drop_query: its routed twin.
CREATE FUNCTION queen_streams.drop_query(name text, tenant uuid DEFAULT NULL)
RETURNS jsonb LANGUAGE plproxy
AS $$ CLUSTER 'queen_cells'; RUN ON queen_router.cell_for_write(tenant); $$;
COMMENT ON FUNCTION queen_streams.drop_query(text, uuid) IS 'runs on the tenant''s cell (write)';
REVOKE EXECUTE ON FUNCTION queen_streams.drop_query(text, uuid) FROM PUBLIC;
