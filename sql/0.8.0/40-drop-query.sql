--------------------------------------------------------------------------
-- queen_streams.drop_query: forget a registered query (POST
-- /streams/v1/queries made it) and its state. A declared stream is dropped
-- with drop_stream instead (src/streams/register.c says why).
--------------------------------------------------------------------------
CREATE FUNCTION queen_streams.drop_query(name text, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_drop_query' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen_streams.drop_query(text, uuid) IS
	'drop a registered query and its state rows (its consumer group''s cursors are the client''s: DELETE /api/v1/consumer-groups/:group)';
REVOKE EXECUTE ON FUNCTION queen_streams.drop_query(text, uuid) FROM PUBLIC;
ALTER FUNCTION queen_streams.drop_query(text, uuid) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
