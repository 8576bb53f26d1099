-- queen_streams_router install script: a router database for cells
-- (README, "Deploying beyond one server"). Each tenant lives on one cell (a
-- database with queen_streams); here the queen functions are PL/Proxy
-- functions of the same names and signatures that run on the tenant's cell,
-- and the functions that span tenants run on every cell and merge.
\echo Use "CREATE EXTENSION queen_streams_router CASCADE" to load this file. \quit

CREATE SCHEMA queen_router;
COMMENT ON SCHEMA queen_router IS 'queen_streams cells: the cells, the placement of tenants, moves';
-- The cells' schemas, holding the routed functions of the same names.
CREATE SCHEMA queen;
COMMENT ON SCHEMA queen IS 'queen_streams on a router: the queen functions, run on the tenant''s cell';
CREATE SCHEMA queen_streams;
COMMENT ON SCHEMA queen_streams IS 'queen_streams on a router: the streams functions, run on the tenant''s cell';

-- The cells, numbered 0..n-1: the number is the PL/Proxy partition.
CREATE TABLE queen_router.cells (
	cell text PRIMARY KEY,
	idx int NOT NULL UNIQUE CHECK (idx >= 0),
	connstr text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE queen_router.cells IS
	'cells by name: idx is the PL/Proxy partition, connstr the libpq string the router connects with';

-- Tenants placed on a cell; a tenant not listed lives on its hash's cell.
CREATE TABLE queen_router.placement (
	tenant_id uuid PRIMARY KEY,
	cell text NOT NULL REFERENCES queen_router.cells (cell),
	moving boolean NOT NULL DEFAULT false,
	moved_at timestamptz
);
COMMENT ON TABLE queen_router.placement IS
	'tenant -> cell; moving: writes answer 503 while queen_router.move_tenant copies it';

-- The router's own maintenance switches, read by its listener (the same
-- table as a cell's; queen.set_maintenance sets them with every cell's).
CREATE TABLE queen.system_state (
	key text PRIMARY KEY CHECK (key IN ('maintenance_mode', 'pop_maintenance_mode')),
	value jsonb NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now()
);
-- Empty on a router (its listener buffers on the tenant's cell), read by
-- the maintenance switch it shares with the cells.
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

REVOKE ALL ON queen_router.cells, queen_router.placement, queen.system_state, queen.push_buffer FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('queen_router.cells', '');
SELECT pg_catalog.pg_extension_config_dump('queen_router.placement', '');
SELECT pg_catalog.pg_extension_config_dump('queen.system_state', '');

--------------------------------------------------------------------------
-- PL/Proxy's cluster configuration (its config functions, schema plproxy)
--------------------------------------------------------------------------
CREATE SCHEMA plproxy;

-- PL/Proxy wants a power of two partitions: the cells, then cell 0 again up
-- to the next power of two. RUN ON only ever names a real cell; RUN ON ALL
-- runs once per connection string, so the repeats do not run twice.
CREATE FUNCTION plproxy.get_cluster_partitions(cluster_name text)
RETURNS SETOF text LANGUAGE plpgsql STABLE
AS $$
DECLARE
	n int;
BEGIN
	IF cluster_name <> 'queen_cells' THEN
		RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format('unknown cluster %s', cluster_name);
	END IF;
	SELECT count(*) INTO n FROM queen_router.cells;
	IF n = 0 THEN
		RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = 'no cells',
			HINT = 'Add one with queen_router.add_cell(name, connstr).';
	END IF;
	RETURN QUERY
		SELECT c.connstr FROM generate_series(0, (1 << ceil(log(2, n))::int) - 1) i
		  JOIN queen_router.cells c ON c.idx = CASE WHEN i < n THEN i ELSE 0 END
		 ORDER BY i;
END
$$;

-- Changes whenever a cell is added or its connection string changes.
CREATE FUNCTION plproxy.get_cluster_version(cluster_name text)
RETURNS int LANGUAGE sql STABLE
AS $$
	SELECT coalesce(hashtext(string_agg(idx || '=' || connstr, ' ' ORDER BY idx)), 0)
	  FROM queen_router.cells
$$;

CREATE FUNCTION plproxy.get_cluster_config(IN cluster_name text, OUT key text, OUT val text)
RETURNS SETOF record LANGUAGE sql STABLE
AS $$
	SELECT 'connection_lifetime'::text, '1800'::text
$$;

--------------------------------------------------------------------------
-- Placement
--------------------------------------------------------------------------

-- The cell of a tenant that is not placed: a hash over the cells.
CREATE FUNCTION queen_router.hash_cell(tenant uuid)
RETURNS int LANGUAGE sql STABLE
AS $$
	SELECT idx FROM queen_router.cells ORDER BY idx
	OFFSET (hashtext(COALESCE($1, '00000000-0000-0000-0000-000000000001'::uuid)::text) & 2147483647)
		   % greatest((SELECT count(*) FROM queen_router.cells), 1)
	LIMIT 1
$$;

-- The cell (PL/Proxy partition) a call of the tenant runs on. Every routed
-- call holds the tenant's advisory lock shared until its transaction ends,
-- so move_tenant can wait for the calls in flight; while it holds it
-- exclusively, or while the tenant is marked moving (writes only), the
-- call is refused with 57P03, which the listener answers 503 Retry-After.
CREATE FUNCTION queen_router.cell_for(tenant uuid, write boolean)
RETURNS int LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
	t uuid := COALESCE(tenant, '00000000-0000-0000-0000-000000000001');
	c int;
	m boolean;
BEGIN
	IF NOT pg_try_advisory_xact_lock_shared(hashtext('queen_router.tenant'), hashtext(t::text)) THEN
		RAISE EXCEPTION USING ERRCODE = '57P03', MESSAGE = 'tenant is moving between cells',
			DETAIL = format('Tenant %s is being copied to another cell.', t),
			HINT = 'Retry in a moment.';
	END IF;
	SELECT cl.idx, p.moving INTO c, m
	  FROM queen_router.placement p JOIN queen_router.cells cl ON cl.cell = p.cell
	 WHERE p.tenant_id = t;
	IF NOT FOUND THEN
		c := queen_router.hash_cell(t);
		IF c IS NULL THEN
			RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = 'no cells',
				HINT = 'Add one with queen_router.add_cell(name, connstr).';
		END IF;
	ELSIF m AND write THEN
		RAISE EXCEPTION USING ERRCODE = '57P03', MESSAGE = 'tenant is moving between cells',
			DETAIL = format('Tenant %s is being copied to another cell.', t),
			HINT = 'Retry in a moment.';
	END IF;
	RETURN c;
END
$$;

CREATE FUNCTION queen_router.cell_for_write(tenant uuid)
RETURNS int LANGUAGE sql VOLATILE
AS $$ SELECT queen_router.cell_for($1, true) $$;

CREATE FUNCTION queen_router.cell_for_read(tenant uuid)
RETURNS int LANGUAGE sql VOLATILE
AS $$ SELECT queen_router.cell_for($1, false) $$;

-- The cell name of a tenant, for operators and tests.
CREATE FUNCTION queen_router.cell_of(tenant uuid)
RETURNS text LANGUAGE sql STABLE
AS $$
	SELECT cell FROM queen_router.cells
	 WHERE idx = COALESCE((SELECT c.idx FROM queen_router.placement p
							 JOIN queen_router.cells c ON c.cell = p.cell
							WHERE p.tenant_id = COALESCE($1, '00000000-0000-0000-0000-000000000001')),
						   queen_router.hash_cell($1))
$$;

-- The tenants each cell holds (queues, queries or buffered pushes).
CREATE FUNCTION queen_router.cell_tenants(cell int)
RETURNS SETOF uuid LANGUAGE plproxy
AS $$ CLUSTER 'queen_cells'; RUN ON cell; SELECT t FROM queen.tenant_ids() t; $$;

-- Adds a cell. The hash of unplaced tenants depends on the number of cells,
-- so every tenant found on the existing cells is first placed where it is.
CREATE FUNCTION queen_router.add_cell(name text, connstr text)
RETURNS int LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
	n int;
BEGIN
	SELECT count(*) INTO n FROM queen_router.cells;
	IF n > 0 THEN
		INSERT INTO queen_router.placement (tenant_id, cell)
		SELECT t, c.cell FROM queen_router.cells c, queen_router.cell_tenants(c.idx) t
		ON CONFLICT (tenant_id) DO NOTHING;
	END IF;
	INSERT INTO queen_router.cells (cell, idx, connstr) VALUES (name, n, connstr);
	RETURN n;
END
$$;

-- Places a tenant (not yet holding data anywhere) on a cell.
CREATE FUNCTION queen_router.place_tenant(tenant uuid, cell text)
RETURNS void LANGUAGE sql VOLATILE
AS $$
	INSERT INTO queen_router.placement (tenant_id, cell) VALUES ($1, $2)
	ON CONFLICT (tenant_id) DO UPDATE SET cell = EXCLUDED.cell
$$;

--------------------------------------------------------------------------
-- Merging the answers of every cell: numbers add up, booleans or, arrays
-- concatenate, objects merge member by member, anything else the first.
--------------------------------------------------------------------------
CREATE FUNCTION queen_router.merge(a jsonb, b jsonb)
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
	IF a IS NULL THEN RETURN b; END IF;
	IF b IS NULL THEN RETURN a; END IF;
	IF jsonb_typeof(a) <> jsonb_typeof(b) THEN RETURN a; END IF;
	CASE jsonb_typeof(a)
		WHEN 'number' THEN RETURN to_jsonb(a::numeric + b::numeric);
		WHEN 'boolean' THEN RETURN to_jsonb(a::boolean OR b::boolean);
		WHEN 'array' THEN RETURN a || b;
		WHEN 'object' THEN
			RETURN (SELECT jsonb_object_agg(k, queen_router.merge(a -> k, b -> k))
					  FROM (SELECT jsonb_object_keys(a) UNION SELECT jsonb_object_keys(b)) s(k));
		ELSE RETURN a;
	END CASE;
END
$$;

CREATE AGGREGATE queen_router.merge_all(jsonb) (SFUNC = queen_router.merge, STYPE = jsonb);

--------------------------------------------------------------------------
-- The routed functions: the cell's signatures, run on the tenant's cell.
-- Writes (and pops, which lease) are refused while the tenant moves;
-- reads go on to the old cell until the switch.
--------------------------------------------------------------------------
DO $gen$
DECLARE
	d text[];
BEGIN
	FOREACH d SLICE 1 IN ARRAY ARRAY[
		-- name, arguments, write or read, the tenant argument
		['queen.push', 'request jsonb, tenant uuid DEFAULT NULL, producer_sub text DEFAULT NULL', 'write', 'tenant'],
		['queen.push_buffer', 'request jsonb, tenant uuid DEFAULT NULL, producer_sub text DEFAULT NULL', 'write', 'tenant'],
		['queen.push_text', 'request text, tenant uuid DEFAULT NULL, producer_sub text DEFAULT NULL', 'write', 'tenant'],
		['queen_streams.create_stream', 'name text, definition jsonb, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen_streams.alter_stream', 'name text, definition jsonb, reset boolean DEFAULT false, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen_streams.drop_stream', 'name text, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen_streams.pause_stream', 'name text, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen_streams.resume_stream', 'name text, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen_streams.streams', 'tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.pop', 'queue text, partition text DEFAULT NULL, consumer_group text DEFAULT NULL, batch integer DEFAULT 200, lease_seconds integer DEFAULT NULL, auto_ack boolean DEFAULT false, tenant uuid DEFAULT NULL, subscription_mode text DEFAULT NULL, subscription_from text DEFAULT NULL, partitions integer DEFAULT 1', 'write', 'tenant'],
		['queen.ack', 'request jsonb, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen.renew_lease', 'lease_id text, seconds integer DEFAULT 60, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen.transaction', 'request jsonb, tenant uuid DEFAULT NULL, producer_sub text DEFAULT NULL', 'write', 'tenant'],
		['queen.configure', 'request jsonb, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen.delete_queue', 'queue text, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen.delete_message', 'partition_id uuid, transaction_id text, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen.retry_message', 'partition_id uuid, transaction_id text, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen.delete_consumer_group', 'consumer_group text, queue text DEFAULT NULL, delete_metadata boolean DEFAULT true, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen.update_subscription', 'consumer_group text, request jsonb, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen.seek', 'consumer_group text, queue text, request jsonb, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen.seek_partition', 'consumer_group text, queue text, partition text, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen.trace_add', 'request jsonb, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen.skip_segment', 'partition_id uuid, base_offset bigint, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen.log_push_one_v1', 'p_queue text, p_partition text, p_msg_count integer, p_hashes bytea, p_verified bigint, p_blob bytea, p_pid uuid DEFAULT NULL, p_window integer DEFAULT NULL, p_tenant uuid DEFAULT ''00000000-0000-0000-0000-000000000001''', 'write', 'p_tenant'],
		['queen_streams.register_query', 'request jsonb, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen_streams.cycle', 'request jsonb, tenant uuid DEFAULT NULL', 'write', 'tenant'],
		['queen_streams.state_get', 'request jsonb, tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.dlq', 'queue text DEFAULT NULL, consumer_group text DEFAULT NULL, partition text DEFAULT NULL, from_time timestamptz DEFAULT NULL, to_time timestamptz DEFAULT NULL, lim integer DEFAULT 100, off integer DEFAULT 0, tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.messages', 'queue text DEFAULT NULL, partition text DEFAULT NULL, namespace text DEFAULT NULL, task text DEFAULT NULL, status text DEFAULT NULL, from_time timestamptz DEFAULT NULL, to_time timestamptz DEFAULT NULL, lim integer DEFAULT 200, off integer DEFAULT 0, tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.message', 'partition_id uuid, transaction_id text, tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.consumer_groups', 'tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.consumer_groups_lagging', 'min_lag_seconds integer DEFAULT 3600, tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.consumer_group', 'consumer_group text, tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.queues_list', 'tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.queue_detail', 'queue text, tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.overview', 'tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.namespaces', 'tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.tasks', 'tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.status', 'from_time timestamptz DEFAULT NULL, to_time timestamptz DEFAULT NULL, queue text DEFAULT NULL, namespace text DEFAULT NULL, task text DEFAULT NULL, tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.status_queues', 'namespace text DEFAULT NULL, task text DEFAULT NULL, lim integer DEFAULT 100, off integer DEFAULT 0, tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.status_queue', 'queue text, tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.queue_messages', 'queue text, lim integer DEFAULT 50, off integer DEFAULT 0, tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.traces', 'partition_id uuid, transaction_id text, tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.traces_by_name', 'name text, lim integer DEFAULT 100, off integer DEFAULT 0, tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.trace_names', 'lim integer DEFAULT 50, off integer DEFAULT 0, tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen.corrupt_segments', 'queue text DEFAULT NULL, tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen_streams.dashboard_streams', 'tenant uuid DEFAULT NULL', 'read', 'tenant'],
		['queen_streams.dashboard_throughput', 'queue text DEFAULT NULL, tenant uuid DEFAULT NULL', 'read', 'tenant']
	] LOOP
		EXECUTE format('CREATE FUNCTION %s(%s) RETURNS jsonb LANGUAGE plproxy AS %L',
					   d[1], d[2], format('CLUSTER %L; RUN ON queen_router.cell_for_%s(%s);',
										  'queen_cells', d[3], d[4]));
		EXECUTE format('COMMENT ON FUNCTION %s IS %L', to_regprocedure(d[1] || '(' ||
						   (SELECT string_agg(split_part(trim(a), ' ', 2), ',')
							  FROM unnest(string_to_array(regexp_replace(d[2], ' DEFAULT [^,]*', '', 'g'), ',')) a) || ')'),
					   format('runs on the tenant''s cell (%s)', d[3]));
	END LOOP;
END
$gen$;

-- Declared streams' listings (SETOF record on the cell too).
CREATE FUNCTION queen_streams.list_streams(tenant uuid DEFAULT NULL, OUT name text, OUT query_id uuid,
	OUT source_queue text, OUT sink_queue text, OUT consumer_group text, OUT paused boolean,
	OUT config_hash text, OUT definition jsonb, OUT created_at timestamptz, OUT updated_at timestamptz)
RETURNS SETOF record LANGUAGE plproxy
AS $$ CLUSTER 'queen_cells'; RUN ON queen_router.cell_for_read(tenant); $$;
CREATE FUNCTION queen_streams.stream_status(name text DEFAULT NULL, tenant uuid DEFAULT NULL,
	OUT stream text, OUT paused boolean, OUT partition text, OUT partition_id uuid, OUT cursor bigint,
	OUT last_offset bigint, OUT lag bigint, OUT lease_active boolean, OUT open_windows bigint,
	OUT watermark timestamptz, OUT cycles bigint, OUT events bigint, OUT filtered bigint, OUT late bigint,
	OUT windows_emitted bigint, OUT errors bigint, OUT last_cycle_at timestamptz, OUT last_error text,
	OUT last_error_at timestamptz, OUT events_per_second numeric)
RETURNS SETOF record LANGUAGE plproxy
AS $$ CLUSTER 'queen_cells'; RUN ON queen_router.cell_for_read(tenant); $$;

-- The listener's partition check (HTTP acks, the streams tenancy gate).
CREATE FUNCTION queen.partition_queue(partition_id uuid, tenant uuid DEFAULT NULL)
RETURNS text LANGUAGE plproxy
AS $$ CLUSTER 'queen_cells'; RUN ON queen_router.cell_for_read(tenant); $$;

--------------------------------------------------------------------------
-- Spanning tenants: every cell, merged
--------------------------------------------------------------------------
CREATE FUNCTION queen_router.retention_sweep_all()
RETURNS SETOF jsonb LANGUAGE plproxy
AS $$ CLUSTER 'queen_cells'; RUN ON ALL; TARGET queen.retention_sweep; $$;

CREATE FUNCTION queen.retention_sweep()
RETURNS jsonb LANGUAGE sql VOLATILE
AS $$ SELECT queen_router.merge_all(r) FROM queen_router.retention_sweep_all() r $$;
COMMENT ON FUNCTION queen.retention_sweep() IS 'every cell''s retention sweep, counts added up';

CREATE FUNCTION queen_router.maintenance_all(mode text)
RETURNS SETOF jsonb LANGUAGE plproxy
AS $$ CLUSTER 'queen_cells'; RUN ON ALL; TARGET queen.maintenance; $$;

CREATE FUNCTION queen.maintenance(mode text DEFAULT 'push')
RETURNS jsonb LANGUAGE sql VOLATILE
AS $$ SELECT queen_router.merge_all(r) FROM queen_router.maintenance_all($1) r $$;
COMMENT ON FUNCTION queen.maintenance(text) IS
	'every cell''s maintenance state: on when any cell''s is, counts added up';

CREATE FUNCTION queen_router.set_maintenance_all(mode text, request jsonb)
RETURNS SETOF jsonb LANGUAGE plproxy
AS $$ CLUSTER 'queen_cells'; RUN ON ALL; TARGET queen.set_maintenance; $$;

-- The switch of queen_streams itself, on the router's own table: what the
-- router's listener reads for each push and pop.
CREATE FUNCTION queen_router.set_local_maintenance(mode text, request jsonb)
RETURNS jsonb
AS '$libdir/queen_streams', 'qs_set_maintenance' LANGUAGE C VOLATILE;

CREATE FUNCTION queen.set_maintenance(mode text, request jsonb)
RETURNS jsonb LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
	r jsonb;
BEGIN
	-- the cells validate and switch first (turning push maintenance off
	-- replays each cell's buffer), then the router's listener follows
	SELECT queen_router.merge_all(x) INTO r FROM queen_router.set_maintenance_all(mode, request) x;
	PERFORM queen_router.set_local_maintenance(mode, request);
	RETURN r;
END
$$;
COMMENT ON FUNCTION queen.set_maintenance(text, jsonb) IS
	'switches maintenance on every cell and on the router''s listener';

--------------------------------------------------------------------------
-- The router's own: codec tools and its listener (queen_streams's C code)
--------------------------------------------------------------------------
CREATE FUNCTION queen.txn_hash(txn text) RETURNS bytea
AS '$libdir/queen_streams', 'qs_txn_hash_sql' LANGUAGE C IMMUTABLE STRICT;
CREATE FUNCTION queen.uuid_generate_v7() RETURNS uuid
AS '$libdir/queen_streams', 'qs_uuid_generate_v7' LANGUAGE C VOLATILE;
CREATE FUNCTION queen_streams.http_status(route text, response jsonb) RETURNS integer
AS '$libdir/queen_streams', 'qs_http_status_sql' LANGUAGE C IMMUTABLE STRICT;
CREATE FUNCTION queen_streams.verify_token(token text) RETURNS jsonb
AS '$libdir/queen_streams', 'qs_verify_token' LANGUAGE C STABLE STRICT;
CREATE FUNCTION queen_streams.http_workers(OUT worker integer, OUT pid integer,
	OUT started_at timestamptz, OUT connections integer, OUT parked_pops integer,
	OUT requests bigint, OUT listening boolean)
RETURNS SETOF record
AS '$libdir/queen_streams', 'qs_http_workers_sql' LANGUAGE C VOLATILE;
CREATE FUNCTION queen_streams.queue_metrics(OUT tenant_id uuid, OUT queue text, OUT pushed bigint,
	OUT popped bigint, OUT acked bigint, OUT nacked bigint, OUT cycles bigint, OUT cycles_failed bigint)
RETURNS SETOF record
AS '$libdir/queen_streams', 'qs_queue_metrics' LANGUAGE C VOLATILE;
CREATE VIEW queen_streams.metrics AS SELECT * FROM queen_streams.queue_metrics();
CREATE FUNCTION queen_streams.dashboard_workers()
RETURNS jsonb LANGUAGE sql VOLATILE
AS $$
	SELECT jsonb_build_object(
		'workers', COALESCE(jsonb_agg(jsonb_build_object(
			'worker', w.worker, 'pid', w.pid,
			'startedAt', to_char(w.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
			'connections', w.connections, 'parkedPops', w.parked_pops,
			'requests', w.requests, 'listening', w.listening) ORDER BY w.worker), '[]'::jsonb),
		'connections', COALESCE(sum(w.connections), 0),
		'sampleIntervalSeconds', extract(epoch FROM current_setting('queen_streams.sample_interval', true)::interval)::int)
	FROM queen_streams.http_workers() w
$$;

--------------------------------------------------------------------------
-- Moving a tenant to another cell (README: the procedure and its limits)
--------------------------------------------------------------------------

-- Gives up a move that failed half-way: the tenant stays where it was.
CREATE FUNCTION queen_router.cancel_move(tenant uuid)
RETURNS void LANGUAGE sql VOLATILE
AS $$ UPDATE queen_router.placement SET moving = false WHERE tenant_id = $1 $$;

CREATE PROCEDURE queen_router.move_tenant(tenant uuid, to_cell text)
LANGUAGE plpgsql
AS $$
DECLARE
	t uuid := COALESCE(tenant, '00000000-0000-0000-0000-000000000001');
	k1 int := hashtext('queen_router.tenant');
	k2 int := hashtext(COALESCE(tenant, '00000000-0000-0000-0000-000000000001')::text);
	from_cell text;
	from_conn text;
	to_conn text;
	r record;
	src jsonb;
	dst jsonb;
BEGIN
	SELECT connstr INTO to_conn FROM queen_router.cells WHERE cell = to_cell;
	IF NOT FOUND THEN
		RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format('cell "%s" does not exist', to_cell);
	END IF;
	from_cell := queen_router.cell_of(t);
	SELECT connstr INTO from_conn FROM queen_router.cells WHERE cell = from_cell;
	IF from_cell = to_cell THEN
		RAISE NOTICE 'tenant % is already on cell %', t, to_cell;
		UPDATE queen_router.placement SET moving = false WHERE tenant_id = t;
		RETURN;
	END IF;

	-- 1. writes of the tenant answer 503 from now on
	INSERT INTO queen_router.placement (tenant_id, cell, moving) VALUES (t, from_cell, true)
	ON CONFLICT (tenant_id) DO UPDATE SET moving = true;
	COMMIT;
	-- 2. wait for the calls that read the placement before that
	PERFORM pg_advisory_lock(k1, k2);
	PERFORM pg_advisory_unlock(k1, k2);

	-- 3. copy in one transaction on the new cell, from one snapshot of the
	-- old, replacing whatever an earlier failed move left there; verify
	PERFORM dblink_connect('queen_move_to', to_conn);
	PERFORM dblink_connect('queen_move_from', from_conn);
	BEGIN
		PERFORM dblink_exec('queen_move_from', 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
		PERFORM dblink_exec('queen_move_to', 'BEGIN');
		PERFORM * FROM dblink('queen_move_to', format('SELECT queen.tenant_delete(%L)::text', t)) AS x(r text);
		PERFORM dblink_open('queen_move_from', 'queen_move_rows',
							format('SELECT tbl, rows::text FROM queen.tenant_export(%L)', t));
		LOOP
			SELECT * INTO r FROM dblink_fetch('queen_move_from', 'queen_move_rows', 1) AS x(tbl text, rows text);
			EXIT WHEN NOT FOUND;
			PERFORM * FROM dblink('queen_move_to',
				format('SELECT queen.tenant_import(%L, %L, %L::jsonb)::text', t, r.tbl, r.rows)) AS x(n text);
		END LOOP;
		PERFORM dblink_close('queen_move_from', 'queen_move_rows');
		SELECT c::jsonb INTO src FROM dblink('queen_move_from',
			format('SELECT queen.tenant_counts(%L)::text', t)) AS x(c text);
		SELECT c::jsonb INTO dst FROM dblink('queen_move_to',
			format('SELECT queen.tenant_counts(%L)::text', t)) AS x(c text);
		IF src IS DISTINCT FROM dst THEN
			RAISE EXCEPTION USING ERRCODE = 'XX001', MESSAGE = 'the copy does not match its source',
				DETAIL = format('Source %s, copy %s.', src, dst);
		END IF;
		PERFORM dblink_exec('queen_move_to', 'COMMIT');
		PERFORM dblink_exec('queen_move_from', 'COMMIT');
	EXCEPTION WHEN OTHERS THEN
		PERFORM dblink_disconnect('queen_move_to');
		PERFORM dblink_disconnect('queen_move_from');
		RAISE;
	END;

	-- 4. switch: the tenant's calls go to the new cell
	UPDATE queen_router.placement SET cell = to_cell, moving = false, moved_at = now() WHERE tenant_id = t;
	COMMIT;

	-- 5. once the reads still running on the old cell are done, delete there
	PERFORM pg_advisory_lock(k1, k2);
	PERFORM * FROM dblink('queen_move_from', format('SELECT queen.tenant_delete(%L)::text', t)) AS x(r text);
	PERFORM pg_advisory_unlock(k1, k2);
	PERFORM dblink_disconnect('queen_move_to');
	PERFORM dblink_disconnect('queen_move_from');
	RAISE NOTICE 'tenant % moved from cell % to cell %: %', t, from_cell, to_cell, src;
END
$$;
COMMENT ON PROCEDURE queen_router.move_tenant(uuid, text) IS
	'copies a tenant to another cell, verifies, switches its placement and deletes it from the old cell';

-- Access: like the cells' functions, EXECUTE only for whom the owner grants.
DO $$
DECLARE
	f regprocedure;
BEGIN
	FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
			  WHERE p.pronamespace IN ('queen'::regnamespace, 'queen_streams'::regnamespace,
									   'queen_router'::regnamespace)
				AND p.prokind = 'f'
	LOOP
		EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
	END LOOP;
END
$$;
REVOKE EXECUTE ON PROCEDURE queen_router.move_tenant(uuid, text) FROM PUBLIC;
