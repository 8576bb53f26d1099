-- Hashes of the partitions that the shared dedup cache does not hold (it
-- is full, or they pass dedup_partition_entries), one row each, so probing
-- such a partition looks its incoming hashes up instead of reading its
-- window. Derived from log_txns: the probe that needs them writes them,
-- under the partition row lock, and log_txn_marks says up to which offset
-- they are complete. Dumps leave both out; a restored server writes them
-- again as it needs them.
CREATE TABLE queen.log_txn_keys (
	partition_id uuid NOT NULL,
	hash uuid NOT NULL,			-- the 16 hash bytes
	msg_offset bigint NOT NULL,
	created_at timestamptz NOT NULL
);
-- The only index: a second one (by offset, for retention) halved the rate
-- at which a backlog is keyed; retention's purge reads a partition's keys.
CREATE INDEX log_txn_keys_hash ON queen.log_txn_keys (partition_id, hash);
COMMENT ON TABLE queen.log_txn_keys IS
	'one row per transaction-id hash of the partitions the shared dedup cache does not hold; derived from log_txns, not dumped';

CREATE TABLE queen.log_txn_marks (
	partition_id uuid PRIMARY KEY,
	indexed bigint NOT NULL		-- every log_txns row up to this offset is in log_txn_keys
);
COMMENT ON TABLE queen.log_txn_marks IS
	'per partition, the offset up to which every log_txns row is in log_txn_keys';
REVOKE ALL ON queen.log_txn_keys, queen.log_txn_marks FROM PUBLIC;

-- A tenant's keys and marks go with its partitions. They are not in
-- queen.tenant_tables: a moved tenant's target cell writes its own.
CREATE OR REPLACE FUNCTION queen.tenant_delete(tenant uuid)
RETURNS jsonb LANGUAGE plpgsql VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	t record;
	n bigint;
	out jsonb := '{}';
BEGIN
	DELETE FROM queen.log_txn_keys x WHERE x.partition_id IN (SELECT p.id FROM queen.log_partitions p
	  JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = tenant);
	DELETE FROM queen.log_txn_marks x WHERE x.partition_id IN (SELECT p.id FROM queen.log_partitions p
	  JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = tenant);
	FOR t IN SELECT * FROM (SELECT *, row_number() OVER () AS k FROM queen.tenant_tables()) s ORDER BY k DESC LOOP
		EXECUTE format('DELETE FROM %s x WHERE %s', t.tbl, t.cond) USING tenant;
		GET DIAGNOSTICS n = ROW_COUNT;
		out := out || jsonb_build_object(t.tbl, n);
	END LOOP;
	RETURN out;
END
$$;

