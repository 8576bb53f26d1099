-- Dead letters (GET /api/v1/dlq, DELETE /api/v1/messages/:p/:t and the
-- requeue POST /api/v1/messages/:p/:t/retry) and message traces
-- (/api/v1/traces...). See src/storage/dlq.c and src/storage/traces.c.
\echo Use "ALTER EXTENSION queen_streams UPDATE TO '0.2.0'" to load this file. \quit

--------------------------------------------------------------------------
-- Dead letters
--------------------------------------------------------------------------
-- Delete and requeue find a message's dead letters by transaction id.
CREATE INDEX log_dlq_partition_txn_idx ON queen.log_dlq (partition_id, transaction_id);

CREATE FUNCTION queen.dlq(
	queue text DEFAULT NULL,
	consumer_group text DEFAULT NULL,
	partition text DEFAULT NULL,
	from_time timestamptz DEFAULT NULL,
	to_time timestamptz DEFAULT NULL,
	lim int DEFAULT 100,
	off int DEFAULT 0,
	tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_dlq' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.dlq(text, text, text, timestamptz, timestamptz, int, int, uuid) IS
	'dead letters, newest failure first, filtered and paged, with the total count (GET /api/v1/dlq)';

CREATE FUNCTION queen.delete_message(partition_id uuid, transaction_id text, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_delete_message' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.delete_message(uuid, text, uuid) IS
	'delete a message''s dead letters; log messages themselves are immutable (DELETE /api/v1/messages/:partitionId/:transactionId)';

CREATE FUNCTION queen.retry_message(partition_id uuid, transaction_id text, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_retry_message' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.retry_message(uuid, text, uuid) IS
	'requeue a dead letter as a new message with the same transaction id (POST /api/v1/messages/:partitionId/:transactionId/retry)';

--------------------------------------------------------------------------
-- Message traces
--------------------------------------------------------------------------
CREATE TABLE queen.message_traces (
	id uuid PRIMARY KEY,
	tenant_id uuid NOT NULL,
	partition_id uuid NOT NULL,
	transaction_id text NOT NULL,
	consumer_group text NOT NULL DEFAULT '__QUEUE_MODE__',
	event_type text NOT NULL DEFAULT 'info',
	trace_names text[] NOT NULL DEFAULT '{}',
	data jsonb NOT NULL,
	created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE queen.message_traces IS
	'trace events of messages, keyed by (partition, transaction id); deleted with their queue';
-- A message's traces, and a queue delete.
CREATE INDEX message_traces_message_idx ON queen.message_traces (partition_id, transaction_id, created_at);
-- Traces by name.
CREATE INDEX message_traces_names_idx ON queen.message_traces USING gin (trace_names);
-- The names of a tenant.
CREATE INDEX message_traces_tenant_idx ON queen.message_traces (tenant_id, created_at);
REVOKE ALL ON queen.message_traces FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('queen.message_traces', '');

CREATE FUNCTION queen.trace_add(request jsonb, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_trace_add' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.trace_add(jsonb, uuid) IS
	'record a trace event of a message (POST /api/v1/traces)';

CREATE FUNCTION queen.traces(partition_id uuid, transaction_id text, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_traces' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.traces(uuid, text, uuid) IS
	'the traces of one message, oldest first (GET /api/v1/traces/:partitionId/:transactionId)';

CREATE FUNCTION queen.traces_by_name(name text, lim int DEFAULT 100, off int DEFAULT 0, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_traces_by_name' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.traces_by_name(text, int, int, uuid) IS
	'the traces carrying a name, oldest first, paged, with the total count (GET /api/v1/traces/by-name/:name)';

CREATE FUNCTION queen.trace_names(lim int DEFAULT 50, off int DEFAULT 0, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_trace_names' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.trace_names(int, int, uuid) IS
	'the trace names in use with their counts, most recently seen first (GET /api/v1/traces/names)';

--------------------------------------------------------------------------
-- Privileges: nobody may call these until granted; they run with the
-- extension owner's rights and a fixed search_path.
--------------------------------------------------------------------------
DO $$
DECLARE
	f regprocedure;
BEGIN
	FOREACH f IN ARRAY ARRAY[
		'queen.dlq(text, text, text, timestamptz, timestamptz, int, int, uuid)',
		'queen.delete_message(uuid, text, uuid)',
		'queen.retry_message(uuid, text, uuid)',
		'queen.trace_add(jsonb, uuid)',
		'queen.traces(uuid, text, uuid)',
		'queen.traces_by_name(text, int, int, uuid)',
		'queen.trace_names(int, int, uuid)']::regprocedure[]
	LOOP
		EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
		EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, pg_temp', f);
	END LOOP;
END $$;
