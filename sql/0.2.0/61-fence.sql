--------------------------------------------------------------------------
-- A corrupt segment fences its partition only: wildcard pops skip it;
-- operators list damaged segments and move one aside into quarantine,
-- after which every group reads past its offsets as past a retention gap.
--------------------------------------------------------------------------
CREATE TABLE queen.log_quarantine (
	partition_id uuid NOT NULL REFERENCES queen.log_partitions (id) ON DELETE CASCADE,
	base_offset bigint NOT NULL,
	end_offset bigint NOT NULL,
	created_at timestamptz NOT NULL,
	blob bytea NOT NULL,
	error text NOT NULL,
	quarantined_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (partition_id, base_offset)
);
ALTER TABLE queen.log_quarantine ALTER COLUMN blob SET STORAGE EXTERNAL;
COMMENT ON TABLE queen.log_quarantine IS
	'segments moved aside by queen.skip_segment because they do not decode, kept as they were';
SELECT pg_catalog.pg_extension_config_dump('queen.log_quarantine', '');

CREATE FUNCTION queen.corrupt_segments(queue text DEFAULT NULL, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_corrupt_segments' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.corrupt_segments(text, uuid) IS
	'{skipped, segments:[...]}: the live segments that do not decode (reads every segment), and how often wildcard pops skipped one since server start';

CREATE FUNCTION queen.skip_segment(partition_id uuid, base_offset bigint, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_skip_segment' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.skip_segment(uuid, bigint, uuid) IS
	'move a segment that does not decode into queen.log_quarantine; consumers read past its offsets';

DO $$
DECLARE
	f regprocedure;
BEGIN
	FOREACH f IN ARRAY ARRAY[
		'queen.corrupt_segments(text, uuid)',
		'queen.skip_segment(uuid, bigint, uuid)']::regprocedure[]
	LOOP
		EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
		EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, pg_temp', f);
	END LOOP;
END $$;
