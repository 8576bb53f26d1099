-- The wildcard pop's ready set (src/storage/pop_ready.c): what the periodic
-- rebuild removes. Rows of a partition whose messages all went past
-- retention, caught-up rows, and a partition's extra rows go; a partition
-- with a backlog keeps its row.
CREATE EXTENSION queen_streams;

CREATE FUNCTION pg_temp.push(part text, txn text) RETURNS text LANGUAGE sql AS $$
	SELECT queen.push(jsonb_build_object('items', jsonb_build_array(jsonb_build_object(
	         'queue', 'rr', 'partition', part, 'transactionId', txn, 'payload', 1))))->0->>'status'
$$;
-- The group's rows, by partition name (one line per row: extra rows show twice).
CREATE FUNCTION pg_temp.ready(grp text) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(p.name, ',' ORDER BY p.name), '')
	  FROM queen.log_ready r JOIN queen.log_partitions p ON p.id = r.partition_id
	 WHERE r.consumer_group = grp
$$;
-- Make the next wildcard pop of the group rebuild its set.
CREATE FUNCTION pg_temp.due(grp text) RETURNS void LANGUAGE sql AS $$
	UPDATE queen.log_ready_groups SET checked_at = checked_at - interval '1 hour'
	 WHERE consumer_group = grp
$$;

SELECT pg_temp.push('a', 'a0'), pg_temp.push('b', 'b0'), pg_temp.push('c', 'c0');
-- the first pop builds the set: a row per partition; it leases all three
SELECT jsonb_array_length(queen.pop('rr', consumer_group => 'g', batch => 3, partitions => 3)->'messages') AS got;
SELECT pg_temp.ready('g');

-- retention moves b's log_start past its end (what retention.c does once
-- b's segments are past the queue's retention): b has no backlog any more
UPDATE queen.log_partitions SET log_start = last_offset + 1 WHERE name = 'b';
-- an extra row of c (a push that raced a delete leaves one)
INSERT INTO queen.log_ready (partition_id, consumer_group, queue_id, served_at)
SELECT partition_id, consumer_group, queue_id, served_at FROM queen.log_ready r
 WHERE r.consumer_group = 'g'
   AND r.partition_id = (SELECT id FROM queen.log_partitions WHERE name = 'c');
SELECT pg_temp.ready('g');

-- the next rebuild prunes b's row and c's extra row; a and c keep theirs
-- (leased: the pop gets nothing)
SELECT pg_temp.due('g');
SELECT jsonb_array_length(queen.pop('rr', consumer_group => 'g', batch => 1)->'messages') AS got;
SELECT pg_temp.ready('g');

-- cursors that caught up by a path that does not delete the rows (a
-- stream cycle's ack moves log_consumers directly): pruned too
UPDATE queen.log_consumers c SET committed = p.last_offset, lease_expires_at = NULL
  FROM queen.log_partitions p
 WHERE p.id = c.partition_id AND c.consumer_group = 'g';
SELECT pg_temp.ready('g');
SELECT pg_temp.due('g');
SELECT jsonb_array_length(queen.pop('rr', consumer_group => 'g', batch => 1)->'messages') AS got;
SELECT pg_temp.ready('g');

-- below queen_streams.pop_ready_min_partitions (the test instances set 0),
-- a queue is read whole: a new group's pop keeps no set for it
SET queen_streams.pop_ready_min_partitions = 256;
SELECT jsonb_array_length(queen.pop('rr', consumer_group => 'small', batch => 3, partitions => 3)->'messages') AS got;
SELECT count(*) AS sets FROM queen.log_ready_groups WHERE consumer_group = 'small';
RESET queen_streams.pop_ready_min_partitions;

DROP EXTENSION queen_streams CASCADE;
