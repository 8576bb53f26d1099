-- Stale cycles (issue 42) from SQL: the answer (success:false, stale,
-- sqlstate 40001, HTTP 200) and that nothing of the cycle committed; a
-- delete of a missing key without U+001F stays Queen's no-op; a stale cycle
-- on a declared stream's shard counts in stream_status.stale_cycles.
CREATE EXTENSION queen_streams;

SELECT queen_streams.create_stream('st.counts', '{"source": "st_src", "sink": "st_sink",
	"window": {"type": "tumbling", "size": 60}, "aggregates": {"n": {"fn": "count"}}}'::jsonb)
	IS NOT NULL AS created;
SELECT query_id AS q, consumer_group AS grp FROM queen_streams.list_streams()
 WHERE name = 'st.counts' \gset
SELECT queen.push('{"items": [{"queue": "st_src", "payload": {"a": 1}}]}'::jsonb) IS NOT NULL AS pushed;
SELECT p->>'partitionId' AS pid, p->>'leaseId' AS lease
  FROM queen.pop('st_src', consumer_group => :'grp', batch => 10) p \gset
INSERT INTO queen_streams.state (query_id, partition_id, key, value)
VALUES (:'q', :'pid', 'tumb:60' || chr(31) || '1970-01-01T00:00:00.000Z' || chr(31) || 'k',
        '{"acc": {"n": 1}, "windowStart": 0, "windowEnd": 60000}');

CREATE TEMP TABLE fx AS SELECT :'q'::uuid AS q, :'pid'::uuid AS pid, :'grp'::text AS grp;
CREATE FUNCTION pg_temp.flush(k text) RETURNS jsonb LANGUAGE sql AS $$
	SELECT queen_streams.cycle(jsonb_build_object('query_id', q, 'partition_id', pid,
		'consumer_group', grp, 'ack', NULL,
		'state_ops', jsonb_build_array(jsonb_build_object('type', 'delete', 'key', k)),
		'push_items', '[{"queue": "st_sink", "payload": {"n": 1}}]'::jsonb)) - 'query_id' - 'partition_id'
	  FROM fx
$$;
CREATE FUNCTION pg_temp.wkey(w text) RETURNS text LANGUAGE sql AS $$
	SELECT 'tumb:60' || chr(31) || w || chr(31) || 'k' $$;

-- An idle flush while the stream's group holds the lease: refused, HTTP 200.
SELECT r AS body, queen_streams.http_status('cycle', r) AS http
  FROM pg_temp.flush(pg_temp.wkey('1970-01-01T00:00:00.000Z')) r;
SELECT count(*) AS windows_left FROM queen_streams.state WHERE key <> '__wm__';
SELECT count(*) AS sink_queues FROM queen.queues WHERE name = 'st_sink';

-- The batch acked (the lease released, all consumed): the flush commits.
SELECT r->>'success' AS acked FROM queen_streams.cycle(jsonb_build_object('query_id', :'q',
	'partition_id', :'pid', 'consumer_group', :'grp',
	'ack', jsonb_build_object('leaseId', :'lease', 'count', 1))) r;
SELECT r->>'success' AS success, r->>'stale' AS stale
  FROM pg_temp.flush(pg_temp.wkey('1970-01-01T00:00:00.000Z')) r;
-- Again: the window is gone (another cycle emitted it), refused.
SELECT r->>'success' AS success, r->>'stale' AS stale, r->>'error' AS error
  FROM pg_temp.flush(pg_temp.wkey('1970-01-01T00:00:00.000Z')) r;
-- A key without U+001F is not a window: a missing one is a no-op, as in Queen.
SELECT r->>'success' AS success, r->>'stale' AS stale FROM pg_temp.flush('never-there') r;

-- Retention deleted what the group had not consumed (log_start past its
-- cursor, as a maxWaitTimeSeconds sweep leaves it): nothing is left to fold,
-- so the idle flush commits rather than waiting forever.
SELECT jsonb_array_length(queen.push('{"items": [{"queue": "st_src", "payload": {"a": 2}}]}'::jsonb)) AS pushed;
INSERT INTO queen_streams.state (query_id, partition_id, key, value)
VALUES (:'q', :'pid', pg_temp.wkey('1970-01-01T00:01:00.000Z'),
        '{"acc": {"n": 1}, "windowStart": 60000, "windowEnd": 120000}');
SELECT r->>'success' AS success, r->>'stale' AS stale
  FROM pg_temp.flush(pg_temp.wkey('1970-01-01T00:01:00.000Z')) r;
UPDATE queen.log_partitions SET log_start = last_offset + 1 WHERE id = :'pid';
SELECT r->>'success' AS after_retention
  FROM pg_temp.flush(pg_temp.wkey('1970-01-01T00:01:00.000Z')) r;
-- A group with no cursor on the partition never folded it: not judged.
INSERT INTO queen_streams.state (query_id, partition_id, key, value)
VALUES (:'q', :'pid', pg_temp.wkey('1970-01-01T00:02:00.000Z'),
        '{"acc": {"n": 1}, "windowStart": 120000, "windowEnd": 180000}');
UPDATE pg_temp.fx SET grp = 'no-such-group';
SELECT r->>'success' AS unknown_group
  FROM pg_temp.flush(pg_temp.wkey('1970-01-01T00:02:00.000Z')) r;

SELECT partition IS NOT NULL AS has_partition, cycles, stale_cycles
  FROM queen_streams.stream_status('st.counts');

DROP EXTENSION queen_streams CASCADE;
