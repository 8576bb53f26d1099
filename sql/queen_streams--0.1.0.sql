-- queen_streams install script (source of sql/queen_streams--<version>.sql)
\echo Use "CREATE EXTENSION queen_streams" to load this file. \quit

--------------------------------------------------------------------------
-- Storage: queues, partitions, compressed log segments, cursors, DLQ
--------------------------------------------------------------------------
CREATE SCHEMA queen;
COMMENT ON SCHEMA queen IS 'queen_streams log storage: queues, partitions, segments, cursors and leases';

CREATE TABLE queen.queues (
	id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	name varchar(255) NOT NULL,
	tenant_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001',
	namespace varchar(255) NOT NULL DEFAULT '',
	task varchar(255) NOT NULL DEFAULT '',
	priority int NOT NULL DEFAULT 0,
	lease_time int NOT NULL DEFAULT 60,
	retry_limit int NOT NULL DEFAULT 3,
	retry_delay int NOT NULL DEFAULT 1000,
	ttl int NOT NULL DEFAULT 3600,
	dead_letter_queue boolean NOT NULL DEFAULT true,
	dlq_after_max_retries boolean NOT NULL DEFAULT true,
	delayed_processing int NOT NULL DEFAULT 0,
	window_buffer int NOT NULL DEFAULT 0,
	retention_seconds int NOT NULL DEFAULT 0,
	completed_retention_seconds int NOT NULL DEFAULT 0,
	retention_enabled boolean NOT NULL DEFAULT false,
	encryption_enabled boolean NOT NULL DEFAULT false,
	max_wait_time_seconds int NOT NULL DEFAULT 0,
	max_queue_size int NOT NULL DEFAULT 0,
	min_pop_wait_time int NOT NULL DEFAULT 0,
	dedup_window_seconds int NOT NULL DEFAULT 3600,
	retention_sink_hold text NOT NULL DEFAULT '',
	retention_sink_hold_max_seconds int NOT NULL DEFAULT 604800,
	created_at timestamptz NOT NULL DEFAULT now(),
	CONSTRAINT queues_name_not_empty CHECK (name <> '')
);
CREATE UNIQUE INDEX queues_tenant_name_uk ON queen.queues (tenant_id, name);

CREATE TABLE queen.log_partitions (
	id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	queue_id uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
	name text NOT NULL DEFAULT 'Default',
	last_offset bigint NOT NULL DEFAULT -1,
	log_start bigint NOT NULL DEFAULT 0,
	txns_start bigint NOT NULL DEFAULT 0,
	last_write_at timestamptz,
	oldest_live_at timestamptz,
	oldest_txn_at timestamptz,
	created_at timestamptz NOT NULL DEFAULT now(),
	UNIQUE (queue_id, name)
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0,
		autovacuum_vacuum_threshold = 500, autovacuum_vacuum_cost_delay = 0,
		vacuum_truncate = off);
CREATE INDEX log_partitions_last_write_idx ON queen.log_partitions (queue_id, last_write_at);
CREATE INDEX log_partitions_oldest_live_idx ON queen.log_partitions (queue_id, oldest_live_at)
	WHERE oldest_live_at IS NOT NULL;
CREATE INDEX log_partitions_oldest_txn_idx ON queen.log_partitions (queue_id, oldest_txn_at)
	WHERE oldest_txn_at IS NOT NULL;

-- One row per pushed batch: frames packed and zstd-compressed (see src/storage/codec.c).
CREATE TABLE queen.log_segments (
	partition_id uuid NOT NULL REFERENCES queen.log_partitions (id) ON DELETE CASCADE,
	base_offset bigint NOT NULL,
	end_offset bigint NOT NULL,
	created_at timestamptz NOT NULL,
	blob bytea NOT NULL,
	PRIMARY KEY (partition_id, base_offset),
	CHECK (end_offset >= base_offset)
) WITH (toast_tuple_target = 8160,	-- segments up to a page stay inline
		autovacuum_vacuum_scale_factor = 0.1, autovacuum_vacuum_insert_scale_factor = 0.3,
		autovacuum_vacuum_cost_limit = 4000, autovacuum_vacuum_cost_delay = 0,
		toast.autovacuum_vacuum_scale_factor = 0.1, toast.autovacuum_vacuum_cost_delay = 0);
-- Already zstd: keep TOAST from trying pglz on it.
ALTER TABLE queen.log_segments ALTER COLUMN blob SET STORAGE EXTERNAL;

-- Hash sidecar: 16 bytes (xxh3-128, big endian, of the transactionId) per frame.
CREATE TABLE queen.log_txns (
	partition_id uuid NOT NULL,
	base_offset bigint NOT NULL,
	end_offset bigint NOT NULL,
	created_at timestamptz NOT NULL,
	hashes bytea NOT NULL,
	PRIMARY KEY (partition_id, base_offset)
);
ALTER TABLE queen.log_txns ALTER COLUMN hashes SET STORAGE EXTERNAL;

CREATE TABLE queen.log_consumers (
	partition_id uuid NOT NULL REFERENCES queen.log_partitions (id) ON DELETE CASCADE,
	consumer_group text NOT NULL DEFAULT '__QUEUE_MODE__',
	committed bigint NOT NULL DEFAULT -1,
	batch_end bigint,
	worker_id text,
	lease_expires_at timestamptz,
	lease_acquired_at timestamptz,
	batch_retry_count int NOT NULL DEFAULT 0,
	attempt_offset bigint,
	attempt_count int NOT NULL DEFAULT 0,
	total_consumed bigint NOT NULL DEFAULT 0,
	lease_conflated boolean NOT NULL DEFAULT false,
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (partition_id, consumer_group)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0,
		autovacuum_vacuum_threshold = 500, autovacuum_vacuum_cost_delay = 0,
		vacuum_truncate = off);
CREATE INDEX log_consumers_worker_idx ON queen.log_consumers (worker_id) WHERE worker_id IS NOT NULL;

CREATE TABLE queen.log_dlq (
	id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	partition_id uuid NOT NULL,
	consumer_group text NOT NULL,
	"offset" bigint NOT NULL,
	message_id uuid,
	transaction_id text,
	payload jsonb,
	error text,
	retry_count int NOT NULL DEFAULT 0,
	failed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX log_dlq_partition_failed_idx ON queen.log_dlq (partition_id, failed_at DESC);

-- Durable subscription of a consumer group: where a group that first meets a
-- partition starts ('all' = the backlog, 'new'/'timestamp' = segments at or after the stamp).
CREATE TABLE queen.consumer_groups_metadata (
	id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	tenant_id uuid NOT NULL,
	consumer_group text NOT NULL,
	queue_id uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
	subscription_mode text NOT NULL DEFAULT 'all'
		CHECK (subscription_mode IN ('all', 'new', 'timestamp')),
	subscription_timestamp timestamptz,
	created_at timestamptz NOT NULL DEFAULT now(),
	UNIQUE (queue_id, consumer_group)
);

--------------------------------------------------------------------------
-- Storage functions (C)
--------------------------------------------------------------------------
CREATE FUNCTION queen.log_push_one_v1(
	p_queue text, p_partition text, p_msg_count int, p_hashes bytea,
	p_verified bigint, p_blob bytea, p_pid uuid DEFAULT NULL,
	p_window int DEFAULT NULL,
	p_tenant uuid DEFAULT '00000000-0000-0000-0000-000000000001')
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_log_push_one_v1' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.log_push_one_v1(text, text, int, bytea, bigint, bytea, uuid, int, uuid) IS
	'append one packed segment to a partition: dedup probe, offset allocation, segment and hash rows';

CREATE FUNCTION queen.push(request jsonb, tenant uuid DEFAULT NULL, producer_sub text DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_push' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.push(jsonb, uuid, text) IS
	'body and result of POST /api/v1/push; producer_sub (the pusher''s token subject) is stored on every frame';

CREATE FUNCTION queen.pop(
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
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_pop' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.pop(text, text, text, int, int, boolean, uuid, text, text, int) IS
	'claim and lease a batch (body of GET /api/v1/pop/queue/:queue[/partition/:partition])';

CREATE FUNCTION queen.ack(request jsonb, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_ack' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.ack(jsonb, uuid) IS 'body and result of POST /api/v1/ack and /api/v1/ack/batch';

CREATE FUNCTION queen.renew_lease(lease_id text, seconds int DEFAULT 60, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_renew_lease' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.renew_lease(text, int, uuid) IS
	'extend every live lease of a worker, never shortening (POST /api/v1/lease/:leaseId/extend)';

CREATE FUNCTION queen.retention_sweep()
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_retention_sweep' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.retention_sweep() IS
	'delete whole expired segments of retention-enabled queues, move log_start, purge old hashes';

CREATE FUNCTION queen.log_unnest_hashes(hashes bytea, OUT idx int, OUT h bytea)
RETURNS SETOF record
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
	SELECT i, substring(hashes FROM i * 16 + 1 FOR 16)
	FROM generate_series(0, octet_length(hashes) / 16 - 1) AS i
$$;
COMMENT ON FUNCTION queen.log_unnest_hashes(bytea) IS 'split a hash sidecar into (0-based index, 16-byte hash) rows';

-- Codec helpers, for inspection and tests.
CREATE FUNCTION queen.txn_hash(txn text)
RETURNS bytea
AS 'MODULE_PATHNAME', 'qs_txn_hash_sql' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION queen.txn_hash(text) IS 'xxh3-128 of the transaction id bytes, big endian (16 bytes)';

CREATE FUNCTION queen.segment_frames(
	blob bytea, msg_count bigint,
	OUT idx int, OUT flags int, OUT message_id uuid, OUT trace_id uuid,
	OUT transaction_id text, OUT producer_sub text, OUT payload text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'qs_segment_frames' LANGUAGE C IMMUTABLE STRICT;
COMMENT ON FUNCTION queen.segment_frames(bytea, bigint) IS 'decode a zstd segment into its frames';

CREATE FUNCTION queen.segment_decompress(blob bytea)
RETURNS bytea
AS 'MODULE_PATHNAME', 'qs_segment_decompress' LANGUAGE C IMMUTABLE STRICT;
COMMENT ON FUNCTION queen.segment_decompress(bytea) IS 'the packed frames of a zstd segment';

CREATE FUNCTION queen.segment_pack(items jsonb)
RETURNS bytea
AS 'MODULE_PATHNAME', 'qs_segment_pack' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION queen.segment_pack(jsonb) IS
	'pack [{id, transactionId, payload, traceId?, producerSub?}] into one zstd segment';

CREATE FUNCTION queen.uuid_generate_v7()
RETURNS uuid
AS 'MODULE_PATHNAME', 'qs_uuid_generate_v7' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.uuid_generate_v7() IS 'UUIDv7, monotonic within a backend';

--------------------------------------------------------------------------
-- Streams: registered queries, their state shards, tenant quotas
--------------------------------------------------------------------------
CREATE SCHEMA queen_streams;
COMMENT ON SCHEMA queen_streams IS 'queen_streams stream processing: queries, state, quotas';

CREATE TABLE queen_streams.queries (
	id uuid PRIMARY KEY,
	tenant_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001',
	name text NOT NULL,
	source_queue text NOT NULL,
	sink_queue text,
	config_hash text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX queries_tenant_name_uk ON queen_streams.queries (tenant_id, name);

-- Keys compare bytewise (COLLATE "C"): a key_prefix read is an index range
-- scan, and rows come back in the same order on every server.
CREATE TABLE queen_streams.state (
	query_id uuid NOT NULL REFERENCES queen_streams.queries (id) ON DELETE CASCADE,
	partition_id uuid NOT NULL,
	key text COLLATE "C" NOT NULL,
	value jsonb NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (query_id, partition_id, key)
);
CREATE INDEX state_updated_at_idx ON queen_streams.state (updated_at);

-- Written by the control plane: which non-default tenants may register queries.
CREATE TABLE queen_streams.quota (
	tenant_id uuid PRIMARY KEY,
	enabled boolean NOT NULL DEFAULT true,
	max_queries bigint CHECK (max_queries IS NULL OR max_queries >= 0),
	created_at timestamptz NOT NULL DEFAULT now(),
	updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION queen_streams.register_query(request jsonb, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_register_query' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen_streams.register_query(jsonb, uuid) IS
	'body and result of POST /streams/v1/queries';

CREATE FUNCTION queen_streams.state_get(request jsonb, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_state_get' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen_streams.state_get(jsonb, uuid) IS
	'body and result of POST /streams/v1/state/get';

CREATE FUNCTION queen_streams.cycle(request jsonb, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_cycle' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen_streams.cycle(jsonb, uuid) IS
	'body and result of POST /streams/v1/cycle: state ops, sink pushes and the source ack in one transaction';

CREATE FUNCTION queen_streams.http_status(route text, response jsonb)
RETURNS int
AS 'MODULE_PATHNAME', 'qs_http_status_sql' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION queen_streams.http_status(text, jsonb) IS
	'the HTTP status the listener sends for a completed call of a streams route';

--------------------------------------------------------------------------
-- Queue administration
--------------------------------------------------------------------------
CREATE FUNCTION queen.configure(request jsonb, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_configure' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.configure(jsonb, uuid) IS
	'create or replace a queue''s settings (POST /api/v1/configure)';

CREATE FUNCTION queen.delete_queue(queue text, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_delete_queue' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.delete_queue(text, uuid) IS
	'delete a queue with its partitions, segments, cursors and state (DELETE /api/v1/resources/queues/:queue)';

--------------------------------------------------------------------------
-- HTTP listener: counters and workers (shared memory; empty unless preloaded)
--------------------------------------------------------------------------
CREATE FUNCTION queen_streams.queue_metrics(
	OUT tenant_id uuid, OUT queue text, OUT pushed bigint, OUT popped bigint,
	OUT acked bigint, OUT nacked bigint, OUT cycles bigint, OUT cycles_failed bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'qs_queue_metrics' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen_streams.queue_metrics() IS
	'per-queue counters since server start, as GET /metrics shows them';

CREATE VIEW queen_streams.metrics AS SELECT * FROM queen_streams.queue_metrics();
COMMENT ON VIEW queen_streams.metrics IS
	'per-queue counters: pushes from every backend; pops, acks and cycles served over HTTP';

CREATE FUNCTION queen_streams.http_workers(
	OUT worker int, OUT pid int, OUT started_at timestamptz, OUT connections int,
	OUT parked_pops int, OUT requests bigint, OUT listening boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'qs_http_workers_sql' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen_streams.http_workers() IS 'the HTTP listener workers that are running';

--------------------------------------------------------------------------
-- Access tokens
--------------------------------------------------------------------------
CREATE FUNCTION queen_streams.verify_token(token text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_verify_token' LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION queen_streams.verify_token(text) IS
	'check a bearer token as the HTTP listener does: {valid, error, role, sub}';

--------------------------------------------------------------------------
-- Privileges: over SQL, access is PostgreSQL's own. The route functions run
-- with the extension owner's rights (SECURITY DEFINER, fixed search_path)
-- and nobody may call them until granted; see README "Access over SQL".
--------------------------------------------------------------------------
REVOKE ALL ON ALL TABLES IN SCHEMA queen, queen_streams FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA queen, queen_streams FROM PUBLIC;
GRANT USAGE ON SCHEMA queen, queen_streams TO PUBLIC;

-- Pure codec helpers stay open to everyone.
GRANT EXECUTE ON FUNCTION
	queen.txn_hash(text), queen.uuid_generate_v7(), queen.log_unnest_hashes(bytea),
	queen.segment_frames(bytea, bigint), queen.segment_decompress(bytea),
	queen.segment_pack(jsonb), queen_streams.http_status(text, jsonb)
	TO PUBLIC;

DO $$
DECLARE
	f regprocedure;
BEGIN
	FOREACH f IN ARRAY ARRAY[
		'queen.log_push_one_v1(text, text, int, bytea, bigint, bytea, uuid, int, uuid)',
		'queen.push(jsonb, uuid, text)',
		'queen.pop(text, text, text, int, int, boolean, uuid, text, text, int)',
		'queen.ack(jsonb, uuid)',
		'queen.renew_lease(text, int, uuid)',
		'queen.retention_sweep()',
		'queen.configure(jsonb, uuid)',
		'queen.delete_queue(text, uuid)',
		'queen_streams.register_query(jsonb, uuid)',
		'queen_streams.state_get(jsonb, uuid)',
		'queen_streams.cycle(jsonb, uuid)']::regprocedure[]
	LOOP
		EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, pg_temp', f);
	END LOOP;
END $$;
