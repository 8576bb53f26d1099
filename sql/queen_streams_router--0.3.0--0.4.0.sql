\echo Use "ALTER EXTENSION queen_streams_router UPDATE TO '0.4.0'" to load this file. \quit
-- queen_streams 0.6.0's queen_streams.cycle_many: its routed twin.
CREATE FUNCTION queen_streams.cycle_many(requests jsonb[], tenant uuid DEFAULT NULL)
RETURNS jsonb[] LANGUAGE plproxy
AS $$ CLUSTER 'queen_cells'; RUN ON queen_router.cell_for_write(tenant); $$;
COMMENT ON FUNCTION queen_streams.cycle_many(jsonb[], uuid) IS 'runs on the tenant''s cell (write)';
REVOKE EXECUTE ON FUNCTION queen_streams.cycle_many(jsonb[], uuid) FROM PUBLIC;
