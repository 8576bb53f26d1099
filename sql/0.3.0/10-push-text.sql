--------------------------------------------------------------------------
-- queen.push_text: queen.push on the request's text, read in one pass
-- (the listener's push route calls it on the raw body). Same arguments
-- and answer as queen.push; payloads are stored as the JSON text sent.
--------------------------------------------------------------------------
CREATE FUNCTION queen.push_text(request text, tenant uuid DEFAULT NULL, producer_sub text DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_push_text' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.push_text(text, uuid, text) IS
	'queen.push on the request text, parsed once; payloads kept as the JSON text sent (POST /api/v1/push calls it on the raw body)';

REVOKE EXECUTE ON FUNCTION queen.push_text(text, uuid, text) FROM PUBLIC;
ALTER FUNCTION queen.push_text(text, uuid, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
