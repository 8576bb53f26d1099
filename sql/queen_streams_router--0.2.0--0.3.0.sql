\echo Use "ALTER EXTENSION queen_streams_router UPDATE TO '0.3.0'" to load this file. \quit
-- queen_streams 0.5.0's queen.push_text_many: its routed twin.
CREATE FUNCTION queen.push_text_many(requests text[], tenant uuid DEFAULT NULL, producer_subs text[] DEFAULT NULL)
RETURNS json[] LANGUAGE plproxy
AS $$ CLUSTER 'queen_cells'; RUN ON queen_router.cell_for_write(tenant); $$;
COMMENT ON FUNCTION queen.push_text_many(text[], uuid, text[]) IS 'runs on the tenant''s cell (write)';
REVOKE EXECUTE ON FUNCTION queen.push_text_many(text[], uuid, text[]) FROM PUBLIC;
