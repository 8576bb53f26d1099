--------------------------------------------------------------------------
-- Maintenance mode: server-wide switches that outlive a restart, and the
-- buffer that holds HTTP pushes while push maintenance is on.
--------------------------------------------------------------------------
CREATE TABLE queen.system_state (
	key text PRIMARY KEY CHECK (key IN ('maintenance_mode', 'pop_maintenance_mode')),
	value jsonb NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE queen.system_state IS 'server-wide switches: {"enabled": bool} per maintenance mode';

-- One row per buffered POST /api/v1/push body, replayed in id order.
CREATE TABLE queen.push_buffer (
	id bigserial PRIMARY KEY,
	tenant_id uuid NOT NULL,
	producer_sub text,
	request jsonb NOT NULL,
	items int NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	failed_at timestamptz,
	error text
);
COMMENT ON TABLE queen.push_buffer IS
	'pushes received during push maintenance; a row that could not be replayed keeps its error';

SELECT pg_catalog.pg_extension_config_dump('queen.system_state', '');
SELECT pg_catalog.pg_extension_config_dump('queen.push_buffer', '');
SELECT pg_catalog.pg_extension_config_dump('queen.push_buffer_id_seq', '');

CREATE FUNCTION queen.maintenance(mode text DEFAULT 'push')
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_maintenance' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.maintenance(text) IS
	'maintenance state: push (GET /api/v1/system/maintenance), pop (.../pop) or buffers (GET /api/v1/status/buffers)';

CREATE FUNCTION queen.set_maintenance(mode text, request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_set_maintenance' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.set_maintenance(text, jsonb) IS
	'turn push or pop maintenance on or off ({"enabled": bool}); turning push maintenance off replays the buffer';

CREATE FUNCTION queen.push_buffer(request jsonb, tenant uuid DEFAULT NULL, producer_sub text DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_push_buffer' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.push_buffer(jsonb, uuid, text) IS
	'hold a push body for replay (what POST /api/v1/push does during push maintenance)';

REVOKE ALL ON queen.system_state, queen.push_buffer, queen.push_buffer_id_seq FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION queen.maintenance(text), queen.set_maintenance(text, jsonb),
	queen.push_buffer(jsonb, uuid, text) FROM PUBLIC;
ALTER FUNCTION queen.maintenance(text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION queen.set_maintenance(text, jsonb) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION queen.push_buffer(jsonb, uuid, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
