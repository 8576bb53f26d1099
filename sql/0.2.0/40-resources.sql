-- Resource and status reads (Queen facts §6): counts from offsets and
-- cursors, listings from the newest segments (src/storage/resources.c,
-- dashboard.c, messages.c, message_get.c).
\echo Use "CREATE EXTENSION queen_streams" to load this file. \quit

-- No new index: log_segments keeps only its primary key (the pop path);
-- time ranges walk each recently written partition newest segment first.

CREATE FUNCTION queen.queues_list(tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_queues_list' LANGUAGE C STABLE;
COMMENT ON FUNCTION queen.queues_list(uuid) IS
	'the tenant''s queues, newest first, with partition and message counts (GET /api/v1/resources/queues)';

CREATE FUNCTION queen.queue_detail(queue text, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_queue_detail' LANGUAGE C STABLE;
COMMENT ON FUNCTION queen.queue_detail(text, uuid) IS
	'one queue with per-partition counts and totals (GET /api/v1/resources/queues/:queue)';

CREATE FUNCTION queen.overview(tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_overview' LANGUAGE C STABLE;
COMMENT ON FUNCTION queen.overview(uuid) IS
	'system totals, backlog lag and ingest rate of the tenant (GET /api/v1/resources/overview)';

CREATE FUNCTION queen.namespaces(tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_namespaces' LANGUAGE C STABLE;
COMMENT ON FUNCTION queen.namespaces(uuid) IS
	'queues, partitions and messages per namespace (GET /api/v1/resources/namespaces)';

CREATE FUNCTION queen.tasks(tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_tasks' LANGUAGE C STABLE;
COMMENT ON FUNCTION queen.tasks(uuid) IS
	'queues, partitions and messages per task (GET /api/v1/resources/tasks)';

CREATE FUNCTION queen.status(
	from_time timestamptz DEFAULT NULL, to_time timestamptz DEFAULT NULL,
	queue text DEFAULT NULL, namespace text DEFAULT NULL, task text DEFAULT NULL,
	tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_status' LANGUAGE C STABLE;
COMMENT ON FUNCTION queen.status(timestamptz, timestamptz, text, text, text, uuid) IS
	'dashboard status: pushed messages per bucket over [from, to] (default the last hour), queues, counts, leases, dead letters (GET /api/v1/status)';

CREATE FUNCTION queen.status_queues(
	namespace text DEFAULT NULL, task text DEFAULT NULL,
	lim int DEFAULT 100, off int DEFAULT 0, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_status_queues' LANGUAGE C STABLE;
COMMENT ON FUNCTION queen.status_queues(text, text, int, int, uuid) IS
	'a page of the tenant''s queues, newest first (GET /api/v1/status/queues)';

CREATE FUNCTION queen.status_queue(queue text, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_status_queue' LANGUAGE C STABLE;
COMMENT ON FUNCTION queen.status_queue(text, uuid) IS
	'one queue with its config, per-partition counts and cursors (GET /api/v1/status/queues/:queue)';

CREATE FUNCTION queen.queue_messages(queue text, lim int DEFAULT 50, off int DEFAULT 0,
	tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_queue_messages' LANGUAGE C STABLE;
COMMENT ON FUNCTION queen.queue_messages(text, int, int, uuid) IS
	'a page of a queue''s messages, newest first, with their status (GET /api/v1/status/queues/:queue/messages)';

CREATE FUNCTION queen.messages(
	queue text DEFAULT NULL, partition text DEFAULT NULL,
	namespace text DEFAULT NULL, task text DEFAULT NULL, status text DEFAULT NULL,
	from_time timestamptz DEFAULT NULL, to_time timestamptz DEFAULT NULL,
	lim int DEFAULT 200, off int DEFAULT 0, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_messages' LANGUAGE C STABLE;
COMMENT ON FUNCTION queen.messages(text, text, text, text, text, timestamptz, timestamptz, int, int, uuid) IS
	'messages pushed in [from, to] (default the last hour), newest first, filtered by queue, partition, namespace, task and status (GET /api/v1/messages)';

CREATE FUNCTION queen.message(partition_id uuid, transaction_id text, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_message' LANGUAGE C STABLE;
COMMENT ON FUNCTION queen.message(uuid, text, uuid) IS
	'one message with its payload (decrypted), status, dead-letter error and consumer groups (GET /api/v1/messages/:partitionId/:transactionId)';

DO $$
DECLARE
	f regprocedure;
BEGIN
	FOREACH f IN ARRAY ARRAY[
		'queen.queues_list(uuid)',
		'queen.queue_detail(text, uuid)',
		'queen.overview(uuid)',
		'queen.namespaces(uuid)',
		'queen.tasks(uuid)',
		'queen.status(timestamptz, timestamptz, text, text, text, uuid)',
		'queen.status_queues(text, text, int, int, uuid)',
		'queen.status_queue(text, uuid)',
		'queen.queue_messages(text, int, int, uuid)',
		'queen.messages(text, text, text, text, text, timestamptz, timestamptz, int, int, uuid)',
		'queen.message(uuid, text, uuid)']::regprocedure[]
	LOOP
		EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
		EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, pg_temp', f);
	END LOOP;
END $$;
