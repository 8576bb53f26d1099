-- A corrupt segment fences its partition only (issue 13, point 2): wildcard
-- pops skip the damaged partition and serve the healthy ones, counted and
-- listed by queen.corrupt_segments(); a pop naming the partition still
-- raises; queen.skip_segment() moves the segment aside and consumers read
-- past it. And a batch across such a gap leases from its first offset.
CREATE EXTENSION queen_streams;

\i test/include/helpers.sql

-- One segment of n messages in (queue, partition), transaction ids tag1..tagn.
CREATE FUNCTION pg_temp.push(q text, part text, tag text, n int) RETURNS void LANGUAGE sql AS $$
	SELECT queen.push(jsonb_build_object('items', (SELECT jsonb_agg(jsonb_build_object(
		'queue', q, 'partition', part, 'transactionId', tag || i, 'payload', jsonb_build_object('i', i)) ORDER BY i)
		FROM generate_series(1, n) i)));
$$;
CREATE FUNCTION pg_temp.part_pid(part text) RETURNS uuid LANGUAGE sql AS $$
	SELECT id FROM queen.log_partitions WHERE name = part
$$;
CREATE FUNCTION pg_temp.part_txns(r jsonb) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(m->>'partition' || ':' || (m->>'transactionId'), ',' ORDER BY m->>'partition', m->>'transactionId'), '-')
	  FROM jsonb_array_elements(r->'messages') m
$$;

SELECT pg_temp.push('cq', 'bad', 'b', 2);
SELECT pg_temp.push('cq', 'bad', 'c', 2);
SELECT pg_temp.push('cq', 'good', 'g', 3);
SELECT pg_temp.push('cq', 'half', 'h', 2);
SELECT pg_temp.push('cq', 'half', 'x', 2);
SELECT pg_temp.push('cq', 'half', 'k', 2);
SELECT queen.corrupt_segments('cq')->'segments' AS none_yet;

-- Damage the first segment of "bad" and the middle one of "half".
UPDATE queen.log_segments SET blob = '\x0102030405'::bytea
 WHERE partition_id = pg_temp.part_pid('bad') AND base_offset = 0;
UPDATE queen.log_segments SET blob = set_byte(blob, octet_length(blob) - 2, get_byte(blob, octet_length(blob) - 2) # 255)
 WHERE partition_id = pg_temp.part_pid('half') AND base_offset = 2;

-- Wildcard pops serve every healthy message: "bad" is skipped, "half"
-- gives the frames before its damaged segment.
SELECT pg_temp.part_txns(r) AS served, r->>'partitionsClaimed' AS claimed
  FROM (SELECT queen.pop('cq', consumer_group => 'g', batch => 100, partitions => 10) r) p;
SELECT pg_temp.part_txns(r) AS served_again
  FROM (SELECT queen.pop('cq', consumer_group => 'g', batch => 100, partitions => 10) r) p;
-- queue mode too, and with auto-ack
SELECT pg_temp.part_txns(r) AS queue_mode
  FROM (SELECT queen.pop('cq', batch => 100, partitions => 10, auto_ack => true) r) p;
-- Nothing was leased or moved on the damaged partition by those pops.
SELECT c.consumer_group, c.committed, c.worker_id IS NULL AS not_leased
  FROM queen.log_consumers c WHERE c.partition_id = pg_temp.part_pid('bad') ORDER BY 1;

-- A pop naming the partition answers the clear error.
SELECT pg_temp.try($$SELECT queen.pop('cq', 'bad', consumer_group => 'g')$$, mask_uuids => true) AS named;
SELECT pg_temp.try($$SELECT queen.pop('cq', 'half', consumer_group => 'g2')$$) AS named_half_first;
SELECT pg_temp.try($$SELECT queen.pop('cq', 'half', consumer_group => 'g3', auto_ack => true)$$) AS named_half_ok;
SELECT pg_temp.try($$SELECT queen.pop('cq', 'half', consumer_group => 'g3')$$, mask_uuids => true) AS named_half_then;

-- Counted (the wildcard skips above) and listed.
SELECT (queen.corrupt_segments('cq')->>'skipped')::int >= 3 AS counted;
SELECT s->>'partition' AS partition, s->>'baseOffset' AS base, s->>'endOffset' AS "end", s->>'error' AS error
  FROM jsonb_array_elements(queen.corrupt_segments('cq')->'segments') s ORDER BY 1;
SELECT jsonb_array_length(queen.corrupt_segments()->'segments') AS all_queues,
       jsonb_array_length(queen.corrupt_segments('cq', '00000000-0000-0000-0000-0000000000aa')->'segments') AS other_tenant;

-- Skipping: only a damaged segment, only the tenant's, only one that exists.
SELECT pg_temp.try($$SELECT queen.skip_segment(pg_temp.part_pid('good'), 0)$$) AS healthy;
SELECT pg_temp.try($$SELECT queen.skip_segment(pg_temp.part_pid('bad'), 1)$$) AS no_such;
SELECT pg_temp.try($$SELECT queen.skip_segment(pg_temp.part_pid('bad'), 0, '00000000-0000-0000-0000-0000000000aa')$$) AS not_owned;
SELECT r - 'partitionId' - 'error' AS skipped
  FROM (SELECT queen.skip_segment(pg_temp.part_pid('bad'), 0) r) s;
SELECT r - 'partitionId' - 'error' AS skipped
  FROM (SELECT queen.skip_segment(pg_temp.part_pid('half'), 2) r) s;
SELECT p.name, q.base_offset, q.end_offset, q.error <> '' AS has_error
  FROM queen.log_quarantine q JOIN queen.log_partitions p ON p.id = q.partition_id ORDER BY 1;
SELECT queen.corrupt_segments('cq')->'segments' AS none_left;

-- Every group reads past the gap: the named pop, the wildcard group and
-- queue mode all resume after it.
SELECT pg_temp.part_txns(r) AS named_after
  FROM (SELECT queen.pop('cq', 'bad', consumer_group => 'g4', auto_ack => true) r) p;
SELECT pg_temp.part_txns(r) AS wildcard_after
  FROM (SELECT queen.pop('cq', consumer_group => 'g', batch => 100, partitions => 10) r) p;

-- A batch across the gap leases from its first offset, not from
-- last - taken + 1 (which lands inside the gap).
CREATE TEMP TABLE across AS SELECT queen.pop('cq', 'half', consumer_group => 'g5', batch => 10) r;
SELECT pg_temp.part_txns(r) AS across_gap FROM across;
SELECT attempt_offset, batch_end, attempt_count
  FROM queen.log_consumers WHERE partition_id = pg_temp.part_pid('half') AND consumer_group = 'g5';
SELECT x->>'success' AS acked
  FROM across, jsonb_array_elements(queen.ack(jsonb_build_object('consumerGroup', 'g5',
	'acknowledgments', (SELECT jsonb_agg(jsonb_build_object('transactionId', m->>'transactionId',
	  'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId')) FROM jsonb_array_elements(r->'messages') m)))) x;
SELECT committed FROM queen.log_consumers WHERE partition_id = pg_temp.part_pid('half') AND consumer_group = 'g5';

-- Deleting the queue takes its quarantine with it.
SELECT queen.delete_queue('cq')->>'existed' AS deleted;
SELECT count(*) AS quarantined FROM queen.log_quarantine;

DROP EXTENSION queen_streams;
