-- Declared streams: windowed aggregations defined in SQL and run by the
-- server's stream workers (src/streams/declare.c, runner.c, window.c).
-- A declared stream is a registered query (queen_streams.queries, the same
-- row POST /streams/v1/queries writes) plus its definition; the workers fold
-- it through queen.pop and queen_streams.cycle, as an SDK worker does.
\echo Use "ALTER EXTENSION queen_streams UPDATE TO '0.2.0'" to load this file. \quit

CREATE TABLE queen_streams.declared_streams (
	query_id uuid PRIMARY KEY REFERENCES queen_streams.queries (id) ON DELETE CASCADE,
	tenant_id uuid NOT NULL,
	name text NOT NULL,
	definition jsonb NOT NULL,
	config_hash text NOT NULL,
	paused boolean NOT NULL DEFAULT false,
	created_at timestamptz NOT NULL DEFAULT now(),
	updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE queen_streams.declared_streams IS
	'streams declared with queen_streams.create_stream: the normalized definition of a registered query';
CREATE UNIQUE INDEX declared_streams_tenant_name_uk ON queen_streams.declared_streams (tenant_id, name);
REVOKE ALL ON queen_streams.declared_streams FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('queen_streams.declared_streams', '');

-- One row per (stream, source partition), written by the worker in the
-- cycle's own transaction; errors in a transaction of their own. Partition
-- 00000000-0000-0000-0000-000000000000 holds errors that name no partition.
CREATE TABLE queen_streams.declared_stats (
	query_id uuid NOT NULL REFERENCES queen_streams.declared_streams (query_id) ON DELETE CASCADE,
	partition_id uuid NOT NULL,
	cycles bigint NOT NULL DEFAULT 0,
	events bigint NOT NULL DEFAULT 0,
	filtered bigint NOT NULL DEFAULT 0,
	late bigint NOT NULL DEFAULT 0,
	windows bigint NOT NULL DEFAULT 0,
	errors bigint NOT NULL DEFAULT 0,
	last_cycle_at timestamptz,
	last_error text,
	last_error_at timestamptz,
	rate_since timestamptz,
	rate_events bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (query_id, partition_id)
);
COMMENT ON TABLE queen_streams.declared_stats IS
	'per declared stream and source partition: cycles, events folded, filtered and late, windows emitted, errors';
REVOKE ALL ON queen_streams.declared_stats FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('queen_streams.declared_stats', '');

CREATE FUNCTION queen_streams.create_stream(name text, definition jsonb, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_create_stream' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen_streams.create_stream(text, jsonb, uuid) IS
	'declare a stream: validate and normalize its definition, register its query (config_hash: the definition''s hash)';

CREATE FUNCTION queen_streams.alter_stream(name text, definition jsonb, reset boolean DEFAULT false,
	tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_alter_stream' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen_streams.alter_stream(text, jsonb, boolean, uuid) IS
	'replace a declared stream''s definition; a changed fold needs reset => true, which drops its open windows';

CREATE FUNCTION queen_streams.drop_stream(name text, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_drop_stream' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen_streams.drop_stream(text, uuid) IS
	'drop a declared stream: its query, its state and its consumer group''s cursors';

CREATE FUNCTION queen_streams.pause_stream(name text, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_pause_stream' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen_streams.pause_stream(text, uuid) IS
	'stop the stream workers from running a declared stream (its cursor and open windows stay)';

CREATE FUNCTION queen_streams.resume_stream(name text, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_resume_stream' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen_streams.resume_stream(text, uuid) IS
	'let the stream workers run a paused declared stream again';

CREATE FUNCTION queen_streams.list_streams(tenant uuid DEFAULT NULL,
	OUT name text, OUT query_id uuid, OUT source_queue text, OUT sink_queue text,
	OUT consumer_group text, OUT paused boolean, OUT config_hash text, OUT definition jsonb,
	OUT created_at timestamptz, OUT updated_at timestamptz)
RETURNS SETOF record LANGUAGE sql STABLE
AS $$
	SELECT d.name, d.query_id, q.source_queue, q.sink_queue, d.definition ->> 'consumer_group',
		   d.paused, d.config_hash, d.definition, d.created_at, d.updated_at
	  FROM queen_streams.declared_streams d
	  JOIN queen_streams.queries q ON q.id = d.query_id
	 WHERE d.tenant_id = COALESCE($1, '00000000-0000-0000-0000-000000000001'::uuid)
	 ORDER BY d.name
$$;
COMMENT ON FUNCTION queen_streams.list_streams(uuid) IS 'the tenant''s declared streams';

-- Per stream and source partition. lag: offsets past the group's cursor;
-- open_windows: state rows but the watermark; events_per_second: events
-- folded since the start of the current one-minute interval, per second.
CREATE FUNCTION queen_streams.stream_status(name text DEFAULT NULL, tenant uuid DEFAULT NULL,
	OUT stream text, OUT paused boolean, OUT partition text, OUT partition_id uuid,
	OUT cursor bigint, OUT last_offset bigint, OUT lag bigint, OUT lease_active boolean,
	OUT open_windows bigint, OUT watermark timestamptz, OUT cycles bigint, OUT events bigint,
	OUT filtered bigint, OUT late bigint, OUT windows_emitted bigint, OUT errors bigint,
	OUT last_cycle_at timestamptz, OUT last_error text, OUT last_error_at timestamptz,
	OUT events_per_second numeric)
RETURNS SETOF record LANGUAGE sql STABLE
AS $$
	WITH d AS (
		SELECT d.*, q.source_queue FROM queen_streams.declared_streams d
		  JOIN queen_streams.queries q ON q.id = d.query_id
		 WHERE d.tenant_id = COALESCE($2, '00000000-0000-0000-0000-000000000001'::uuid)
		   AND ($1 IS NULL OR d.name = $1)),
	parts AS (
		SELECT d.query_id, p.id, p.name, p.last_offset, p.log_start
		  FROM d
		  JOIN queen.queues sq ON sq.tenant_id = d.tenant_id AND sq.name = d.source_queue
		  JOIN queen.log_partitions p ON p.queue_id = sq.id
		UNION
		SELECT s.query_id, s.partition_id, NULL, NULL, NULL
		  FROM queen_streams.declared_stats s JOIN d USING (query_id)
		 WHERE s.partition_id = '00000000-0000-0000-0000-000000000000')
	SELECT d.name, d.paused, p.name, p.id, c.committed, p.last_offset,
		   CASE WHEN p.last_offset IS NULL THEN NULL ELSE
		   GREATEST(p.last_offset - GREATEST(COALESCE(c.committed, -1), p.log_start - 1), 0) END,
		   COALESCE(c.worker_id IS NOT NULL AND c.lease_expires_at > now(), false),
		   (SELECT count(*) FROM queen_streams.state s
			 WHERE s.query_id = d.query_id AND s.partition_id = p.id AND s.key <> '__wm__'),
		   (SELECT to_timestamp((s.value ->> 'eventTimeMs')::numeric / 1000) FROM queen_streams.state s
			 WHERE s.query_id = d.query_id AND s.partition_id = p.id AND s.key = '__wm__'),
		   COALESCE(st.cycles, 0), COALESCE(st.events, 0), COALESCE(st.filtered, 0),
		   COALESCE(st.late, 0), COALESCE(st.windows, 0), COALESCE(st.errors, 0),
		   st.last_cycle_at, st.last_error, st.last_error_at,
		   CASE WHEN st.rate_since IS NULL THEN 0 ELSE
		   round(st.rate_events / GREATEST(extract(epoch FROM now() - st.rate_since), 1), 1) END
	  FROM d
	  JOIN parts p ON p.query_id = d.query_id
	  LEFT JOIN queen.log_consumers c
		ON c.partition_id = p.id AND c.consumer_group = d.definition ->> 'consumer_group'
	  LEFT JOIN queen_streams.declared_stats st ON st.query_id = d.query_id AND st.partition_id = p.id
	 ORDER BY d.name, p.name NULLS FIRST
$$;
COMMENT ON FUNCTION queen_streams.stream_status(text, uuid) IS
	'per declared stream and source partition: cursor, lag, open windows, watermark, last cycle, errors, throughput';

-- The body of GET /streams/v1/streams.
CREATE FUNCTION queen_streams.streams(tenant uuid DEFAULT NULL)
RETURNS jsonb LANGUAGE sql STABLE
AS $$
	SELECT jsonb_build_object('streams', COALESCE(jsonb_agg(jsonb_build_object(
		'name', l.name, 'queryId', l.query_id, 'sourceQueue', l.source_queue,
		'sinkQueue', l.sink_queue, 'consumerGroup', l.consumer_group, 'paused', l.paused,
		'configHash', l.config_hash, 'definition', l.definition,
		'partitions', (SELECT COALESCE(jsonb_agg(to_jsonb(s) - 'stream' - 'paused'), '[]'::jsonb)
						 FROM queen_streams.stream_status(l.name, $1) s))
		ORDER BY l.name), '[]'::jsonb))
	  FROM queen_streams.list_streams($1) l
$$;
COMMENT ON FUNCTION queen_streams.streams(uuid) IS
	'the tenant''s declared streams with their status per partition (GET /streams/v1/streams)';

CREATE FUNCTION queen_streams.stream_workers(
	OUT worker int, OUT pid int, OUT started_at timestamptz, OUT cycles bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'qs_stream_workers_sql' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen_streams.stream_workers() IS 'the stream workers that are running';

DO $$
DECLARE
	f regprocedure;
BEGIN
	FOREACH f IN ARRAY ARRAY[
		'queen_streams.create_stream(text, jsonb, uuid)',
		'queen_streams.alter_stream(text, jsonb, boolean, uuid)',
		'queen_streams.drop_stream(text, uuid)',
		'queen_streams.pause_stream(text, uuid)',
		'queen_streams.resume_stream(text, uuid)',
		'queen_streams.list_streams(uuid)',
		'queen_streams.stream_status(text, uuid)',
		'queen_streams.streams(uuid)',
		'queen_streams.stream_workers()']::regprocedure[]
	LOOP
		EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
		EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, pg_temp', f);
	END LOOP;
END $$;
