--------------------------------------------------------------------------
-- The text entries answer JSON text (type json): built once, written to
-- the client as it is, with the payloads as stored. queen.push and
-- queen.pop keep their jsonb answers for SQL users.
--------------------------------------------------------------------------
DROP FUNCTION queen.push_text(text, uuid, text);
CREATE FUNCTION queen.push_text(request text, tenant uuid DEFAULT NULL, producer_sub text DEFAULT NULL)
RETURNS json
AS 'MODULE_PATHNAME', 'qs_push_text' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.push_text(text, uuid, text) IS
	'queen.push on the request text, parsed once; answers JSON text; payloads kept as the JSON text sent (POST /api/v1/push calls it on the raw body)';
REVOKE EXECUTE ON FUNCTION queen.push_text(text, uuid, text) FROM PUBLIC;
ALTER FUNCTION queen.push_text(text, uuid, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION queen.pop_text(
	queue text,
	partition text DEFAULT NULL,
	consumer_group text DEFAULT NULL,
	batch int DEFAULT 200,
	lease_seconds int DEFAULT NULL,
	auto_ack boolean DEFAULT false,
	tenant uuid DEFAULT NULL,
	subscription_mode text DEFAULT NULL,
	subscription_from text DEFAULT NULL,
	partitions int DEFAULT 1)
RETURNS json
AS 'MODULE_PATHNAME', 'qs_pop_text' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.pop_text(text, text, text, int, int, boolean, uuid, text, text, int) IS
	'queen.pop answering JSON text: the same members, the payloads as stored, the messages last';
REVOKE EXECUTE ON FUNCTION queen.pop_text(text, text, text, int, int, boolean, uuid, text, text, int) FROM PUBLIC;
ALTER FUNCTION queen.pop_text(text, text, text, int, int, boolean, uuid, text, text, int)
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
