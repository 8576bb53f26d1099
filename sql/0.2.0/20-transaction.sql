-- queen.transaction: POST /api/v1/transaction, pushes and acks of several
-- queues in one database transaction, all or nothing.
\echo Use "ALTER EXTENSION queen_streams UPDATE TO '0.2.0'" to load this file. \quit

CREATE FUNCTION queen.transaction(request jsonb, tenant uuid DEFAULT NULL, producer_sub text DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_transaction' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.transaction(jsonb, uuid, text) IS
	'body and result of POST /api/v1/transaction: push and ack operations applied together or not at all; producer_sub (the caller''s token subject) is stored on every pushed frame';

REVOKE EXECUTE ON FUNCTION queen.transaction(jsonb, uuid, text) FROM PUBLIC;
ALTER FUNCTION queen.transaction(jsonb, uuid, text)
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
