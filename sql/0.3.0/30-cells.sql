--------------------------------------------------------------------------
-- Cells: what a router (the queen_streams_router extension) asks of a
-- cell besides the route functions. The listener's own reads go through
-- queen.partition_queue so that a router, whose queen schema holds only
-- PL/Proxy functions, can answer them from the tenant's cell; moving a
-- tenant between cells exports, imports, counts and deletes its rows here.
--------------------------------------------------------------------------

-- The name of the queue that owns a partition, when the tenant owns it.
CREATE FUNCTION queen.partition_queue(partition_id uuid, tenant uuid DEFAULT NULL)
RETURNS text LANGUAGE sql STABLE
AS $$
	SELECT q.name::text FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
	 WHERE p.id = $1 AND q.tenant_id = COALESCE($2, '00000000-0000-0000-0000-000000000001'::uuid)
$$;
COMMENT ON FUNCTION queen.partition_queue(uuid, uuid) IS
	'the queue of a partition of the tenant, NULL when the tenant has no such partition';

-- Every table that holds a tenant's rows, parents first, with the condition
-- that selects them (x is the row, $1 the tenant). One list serves export,
-- import, counts and delete, so a table cannot be copied but not deleted.
CREATE FUNCTION queen.tenant_tables(OUT tbl text, OUT cond text)
RETURNS SETOF record LANGUAGE sql IMMUTABLE
AS $$
	VALUES
	('queen.queues', 'x.tenant_id = $1'),
	('queen.log_partitions', 'x.queue_id IN (SELECT id FROM queen.queues WHERE tenant_id = $1)'),
	('queen.log_segments', 'x.partition_id IN (SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = $1)'),
	('queen.log_txns', 'x.partition_id IN (SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = $1)'),
	('queen.log_consumers', 'x.partition_id IN (SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = $1)'),
	('queen.log_dlq', 'x.partition_id IN (SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = $1)'),
	('queen.log_quarantine', 'x.partition_id IN (SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = $1)'),
	('queen.consumer_groups_metadata', 'x.tenant_id = $1'),
	('queen.message_traces', 'x.tenant_id = $1'),
	('queen.push_buffer', 'x.tenant_id = $1'),
	('queen_streams.queries', 'x.tenant_id = $1'),
	('queen_streams.state', 'x.query_id IN (SELECT id FROM queen_streams.queries WHERE tenant_id = $1)'),
	('queen_streams.quota', 'x.tenant_id = $1')
$$;
COMMENT ON FUNCTION queen.tenant_tables() IS
	'the tables that hold a tenant''s rows, parents first, and the condition that selects them';

-- The tenant's rows as JSON, table by table in parent order, 500 rows a chunk.
CREATE FUNCTION queen.tenant_export(tenant uuid, OUT tbl text, OUT rows jsonb)
RETURNS SETOF record LANGUAGE plpgsql STABLE
AS $$
DECLARE
	t record;
BEGIN
	FOR t IN SELECT * FROM queen.tenant_tables() LOOP
		RETURN QUERY EXECUTE format(
			'SELECT %L::text, jsonb_agg(r ORDER BY n) FROM'
			' (SELECT to_jsonb(x) AS r, row_number() OVER (%s) - 1 AS n FROM %s x WHERE %s) s'
			' GROUP BY n / 500 ORDER BY n / 500',
			t.tbl, CASE WHEN t.tbl = 'queen.push_buffer' THEN 'ORDER BY x.id' ELSE '' END, t.tbl, t.cond)
			USING tenant;
	END LOOP;
END
$$;
COMMENT ON FUNCTION queen.tenant_export(uuid) IS
	'a tenant''s rows, in chunks of 500 per table, for queen.tenant_import on another cell';

-- Loads one chunk of queen.tenant_export. Buffered pushes take this cell's
-- ids (in the exported order); every other row keeps its keys.
CREATE FUNCTION queen.tenant_import(tenant uuid, tbl text, rows jsonb)
RETURNS bigint LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
	n bigint;
BEGIN
	IF NOT EXISTS (SELECT 1 FROM queen.tenant_tables() t WHERE t.tbl = $2) THEN
		RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('%s is not a tenant table', $2);
	END IF;
	IF EXISTS (SELECT 1 FROM jsonb_array_elements($3) e
			   WHERE $2 IN ('queen.queues', 'queen.consumer_groups_metadata', 'queen.message_traces',
							'queen.push_buffer', 'queen_streams.queries', 'queen_streams.quota')
				 AND (e->>'tenant_id')::uuid IS DISTINCT FROM $1) THEN
		RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('rows for %s name another tenant', $2);
	END IF;
	IF $2 = 'queen.push_buffer' THEN
		INSERT INTO queen.push_buffer (tenant_id, producer_sub, request, items, created_at, failed_at, error)
		SELECT r.tenant_id, r.producer_sub, r.request, r.items, r.created_at, r.failed_at, r.error
		  FROM jsonb_populate_recordset(NULL::queen.push_buffer, $3) r ORDER BY r.id;
	ELSE
		EXECUTE format('INSERT INTO %s SELECT * FROM jsonb_populate_recordset(NULL::%s, $1)', $2, $2)
			USING $3;
	END IF;
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$$;
COMMENT ON FUNCTION queen.tenant_import(uuid, text, jsonb) IS
	'loads one chunk of queen.tenant_export from another cell';

-- Per table: how many rows and a digest of their contents (buffered pushes
-- without their ids, which each cell numbers itself).
CREATE FUNCTION queen.tenant_counts(tenant uuid)
RETURNS jsonb LANGUAGE plpgsql STABLE
AS $$
DECLARE
	t record;
	c jsonb;
	out jsonb := '{}';
BEGIN
	FOR t IN SELECT * FROM queen.tenant_tables() LOOP
		EXECUTE format(
			'SELECT jsonb_build_object(''rows'', count(*), ''digest'','
			' coalesce(md5(string_agg(h, '''' ORDER BY h)), '''')) FROM'
			' (SELECT md5((to_jsonb(x) %s)::text) AS h FROM %s x WHERE %s) s',
			CASE WHEN t.tbl = 'queen.push_buffer' THEN '- ''id''' ELSE '' END, t.tbl, t.cond)
			INTO c USING tenant;
		out := out || jsonb_build_object(t.tbl, c);
	END LOOP;
	RETURN out;
END
$$;
COMMENT ON FUNCTION queen.tenant_counts(uuid) IS
	'per tenant table: row count and content digest, to verify a copy';

-- Deletes the tenant's rows, children first.
CREATE FUNCTION queen.tenant_delete(tenant uuid)
RETURNS jsonb LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
	t record;
	n bigint;
	out jsonb := '{}';
BEGIN
	FOR t IN SELECT * FROM (SELECT *, row_number() OVER () AS k FROM queen.tenant_tables()) s ORDER BY k DESC LOOP
		EXECUTE format('DELETE FROM %s x WHERE %s', t.tbl, t.cond) USING tenant;
		GET DIAGNOSTICS n = ROW_COUNT;
		out := out || jsonb_build_object(t.tbl, n);
	END LOOP;
	RETURN out;
END
$$;
COMMENT ON FUNCTION queen.tenant_delete(uuid) IS
	'deletes every row of a tenant on this cell (after it moved to another)';

-- The tenants that have rows on this cell.
CREATE FUNCTION queen.tenant_ids()
RETURNS SETOF uuid LANGUAGE sql STABLE
AS $$
	SELECT tenant_id FROM queen.queues
	UNION SELECT tenant_id FROM queen_streams.queries
	UNION SELECT tenant_id FROM queen.push_buffer
$$;
COMMENT ON FUNCTION queen.tenant_ids() IS 'the tenants with queues, queries or buffered pushes here';

DO $$
DECLARE
	f regprocedure;
BEGIN
	FOREACH f IN ARRAY ARRAY[
		'queen.partition_queue(uuid, uuid)', 'queen.tenant_tables()', 'queen.tenant_export(uuid)',
		'queen.tenant_import(uuid, text, jsonb)', 'queen.tenant_counts(uuid)',
		'queen.tenant_delete(uuid)', 'queen.tenant_ids()']::regprocedure[]
	LOOP
		EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
		EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, pg_temp', f);
	END LOOP;
END
$$;
