\echo Use "ALTER EXTENSION queen_streams_router UPDATE TO '0.2.0'" to load this file. \quit
-- queen_streams 0.4.0's text entries answer JSON text: their routed twins too.
DROP FUNCTION queen.push_text(text, uuid, text);
CREATE FUNCTION queen.push_text(request text, tenant uuid DEFAULT NULL, producer_sub text DEFAULT NULL)
RETURNS json LANGUAGE plproxy
AS $$ CLUSTER 'queen_cells'; RUN ON queen_router.cell_for_write(tenant); $$;
COMMENT ON FUNCTION queen.push_text(text, uuid, text) IS 'runs on the tenant''s cell (write)';

CREATE FUNCTION queen.pop_text(queue text, partition text DEFAULT NULL, consumer_group text DEFAULT NULL,
	batch integer DEFAULT 200, lease_seconds integer DEFAULT NULL, auto_ack boolean DEFAULT false,
	tenant uuid DEFAULT NULL, subscription_mode text DEFAULT NULL, subscription_from text DEFAULT NULL,
	partitions integer DEFAULT 1)
RETURNS json LANGUAGE plproxy
AS $$ CLUSTER 'queen_cells'; RUN ON queen_router.cell_for_write(tenant); $$;
COMMENT ON FUNCTION queen.pop_text(text, text, text, integer, integer, boolean, uuid, text, text, integer) IS
	'runs on the tenant''s cell (write)';

REVOKE EXECUTE ON FUNCTION queen.push_text(text, uuid, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION queen.pop_text(text, text, text, integer, integer, boolean, uuid, text, text, integer)
	FROM PUBLIC;
