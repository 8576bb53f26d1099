-- queen_streams.cycle_many: several cycles of one tenant in one call (the
-- listener's group commit). Each answer is cycle's for its request, as if
-- the cycles had run one after the other in one transaction, and so is
-- what the database holds afterwards: state, cursors and sink segments.
-- The sink items of the cycles that succeed are pushed as one push.
CREATE EXTENSION queen_streams;
\i test/include/helpers.sql

-- The answers without createdAt (checked to be a timestamp where queued)
-- and without the ids they echo; the partition's name instead.
CREATE FUNCTION pg_temp.norm(answers jsonb[]) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(
	         (a - 'push_results' - 'query_id' - 'partition_id' || jsonb_build_object(
	            'partition', (SELECT name FROM queen.log_partitions WHERE id::text = a->>'partition_id'),
	            'push_results',
	            (SELECT coalesce(jsonb_agg(e - 'createdAt' ORDER BY n), '[]')
	               FROM jsonb_array_elements(a->'push_results') WITH ORDINALITY AS x(e, n)
	              WHERE e->>'status' <> 'queued' OR (e->>'createdAt')::timestamptz IS NOT NULL)))::text,
	         E'\n' ORDER BY k), '(none)')
	  FROM unnest(answers) WITH ORDINALITY AS u(a, k)
$$;

-- What the cycles leave behind: state rows, the source cursors, and every
-- sink message as queue/partition@offset=transaction id:payload (generated
-- ids shown as <v7>). How the messages are cut into segments is not shown:
-- as one, each sink partition gets one segment for all the cycles.
CREATE FUNCTION pg_temp.world() RETURNS text LANGUAGE sql AS $$
	SELECT concat_ws(E'\n',
	  'state: ' || (SELECT coalesce(string_agg(p.name || ':' || s.key || '=' || s.value::text, ' '
	                                  ORDER BY p.name, s.key), '(empty)')
	                  FROM queen_streams.state s JOIN queen.log_partitions p ON p.id = s.partition_id),
	  'cursors: ' || (SELECT string_agg(format('%s:%s/%s/%s', p.name, c.committed, c.batch_end,
	                                           c.worker_id IS NOT NULL), ' ' ORDER BY p.name)
	                    FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id),
	  'sinks: ' || (SELECT coalesce(string_agg(format('%s/%s@%s=%s:%s', q.name, p.name, s.base_offset + f.idx,
	                  regexp_replace(f.transaction_id,
	                    '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$', '<v7>'),
	                  f.payload), ' ' ORDER BY q.name, p.name, s.base_offset + f.idx), '(none)')
	                  FROM queen.log_segments s
	                  JOIN queen.log_partitions p ON p.id = s.partition_id
	                  JOIN queen.queues q ON q.id = p.queue_id,
	                  LATERAL queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
	                 WHERE q.name LIKE 'snk%'))
$$;

-- The cycles run one by one (cycle, in order) and as one (cycle_many):
-- the same answers and the same world, or both shown.
CREATE FUNCTION pg_temp.seq_many(reqs jsonb[]) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	a text := pg_temp.rolled_back('SELECT pg_temp.norm(ARRAY(SELECT queen_streams.cycle(r)'
	                              ' FROM unnest($1) WITH ORDINALITY AS u(r, n) ORDER BY n))',
	                              reqs, 'SELECT pg_temp.world()');
	b text := pg_temp.rolled_back('SELECT pg_temp.norm(queen_streams.cycle_many($1))', reqs,
	                              'SELECT pg_temp.world()');
BEGIN
	IF a IS NOT DISTINCT FROM b THEN
		RETURN 'same:' || E'\n' || a;
	END IF;
	RETURN 'DIFFERENT: one by one' || E'\n' || a || E'\n' || 'as one' || E'\n' || b;
END $$;

-- Fixtures: cm.q over cm_src, three partitions (a, b, c) of two messages
-- each, each leased; snk dedups (the default window), snk0 does not.
SELECT queen_streams.register_query(
  '{"name":"cm.q","source_queue":"cm_src","sink_queue":"snk","config_hash":"h"}')->>'query_id' AS q \gset
SELECT queen.configure('{"queue":"snk0","options":{"dedupWindowSeconds":0}}')->>'configured' AS snk0;
SELECT jsonb_array_length(queen.push(jsonb_build_object('items',
  (SELECT jsonb_agg(jsonb_build_object('queue', 'cm_src', 'partition', p, 'payload', i))
     FROM unnest(ARRAY['a', 'b', 'c']) p, generate_series(1, 2) i)))) AS pushed;
CREATE TEMP TABLE lease (pid text, lease text);
INSERT INTO lease SELECT p->>'partitionId', p->>'leaseId' FROM queen.pop('cm_src', batch => 10, lease_seconds => 3600) p;
INSERT INTO lease SELECT p->>'partitionId', p->>'leaseId' FROM queen.pop('cm_src', batch => 10, lease_seconds => 3600) p;
INSERT INTO lease SELECT p->>'partitionId', p->>'leaseId' FROM queen.pop('cm_src', batch => 10, lease_seconds => 3600) p;
SELECT count(DISTINCT pid) AS leased_partitions FROM lease;

-- One cycle's request: on partition `part`, with state ops, push items and an ack (or none).
CREATE FUNCTION pg_temp.req(part text, ops jsonb, items jsonb, ack jsonb DEFAULT '{"count":2}',
                             extra jsonb DEFAULT '{}')
RETURNS jsonb LANGUAGE sql AS $$
	SELECT extra || jsonb_build_object('query_id', (SELECT id FROM queen_streams.queries WHERE name = 'cm.q'),
	                          'partition_id', p.id, 'state_ops', ops, 'push_items', items,
	                          'ack', CASE WHEN ack IS NULL THEN NULL
	                                      ELSE jsonb_build_object('leaseId', l.lease) || ack END)
	  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
	  LEFT JOIN lease l ON l.pid = p.id::text
	 WHERE q.name = 'cm_src' AND p.name = part
$$;

-- Three cycles, each its state, a push to the same sink partition and its ack.
SELECT pg_temp.seq_many(ARRAY[
  pg_temp.req('a', '[{"type":"upsert","key":"k","value":{"n":1}}]', '[{"queue":"snk","payload":"a1"}]'),
  pg_temp.req('b', '[{"type":"upsert","key":"k","value":{"n":2}}]', '[{"queue":"snk","payload":"b1"},{"queue":"snk","payload":"b2"}]'),
  pg_temp.req('c', '[{"type":"upsert","key":"k","value":{"n":3}},{"type":"delete","key":"gone"}]', '[{"queue":"snk","payload":"c1"}]')]);

-- An id an earlier cycle pushed: a duplicate of it where the sink dedups,
-- stored again where it does not; a cycle's own repeats collapse.
SELECT pg_temp.seq_many(ARRAY[
  pg_temp.req('a', '[]', '[{"queue":"snk","transactionId":"x","payload":1},{"queue":"snk0","transactionId":"x","payload":1}]', NULL),
  pg_temp.req('b', '[]', '[{"queue":"snk","transactionId":"y","payload":2},{"queue":"snk","transactionId":"x","payload":2},{"queue":"snk","transactionId":"x","payload":3},{"queue":"snk0","transactionId":"x","payload":2}]', NULL),
  pg_temp.req('c', '[]', '[{"queue":"snk","transactionId":"y","payload":4},{"queue":"snk","transactionId":"z","payload":4}]', NULL)]);

-- A sink item's own message id is its transaction id: a later cycle's item
-- naming it is its duplicate where the sink dedups.
SELECT pg_temp.seq_many(ARRAY[
  pg_temp.req('a', '[]', '[{"queue":"snk","messageId":"22222222-2222-4222-8222-222222222222","payload":1},{"queue":"snk0","messageId":"22222222-2222-4222-8222-222222222222","payload":1}]', NULL),
  pg_temp.req('b', '[]', '[{"queue":"snk","transactionId":"22222222-2222-4222-8222-222222222222","payload":2},{"queue":"snk0","transactionId":"22222222-2222-4222-8222-222222222222","payload":2}]', NULL)]);

-- ... but not a later item of its own cycle (one push: neither is in the
-- window yet), and where the window already held the id, that earlier
-- message is the original.
SELECT pg_temp.seq_many(ARRAY[
  pg_temp.req('a', '[]', '[{"queue":"snk","messageId":"33333333-3333-4333-8333-333333333333","payload":1},{"queue":"snk","transactionId":"33333333-3333-4333-8333-333333333333","payload":2}]', NULL)]);
SELECT jsonb_array_length(queen.push('{"items":[{"queue":"snkold","transactionId":"44444444-4444-4444-8444-444444444444","payload":0}]}')) AS pushed_before;
SELECT pg_temp.seq_many(ARRAY[
  pg_temp.req('a', '[]', '[{"queue":"snkold","messageId":"44444444-4444-4444-8444-444444444444","payload":1}]', NULL),
  pg_temp.req('b', '[]', '[{"queue":"snkold","transactionId":"44444444-4444-4444-8444-444444444444","payload":2}]', NULL)]);
SELECT queen.delete_queue('snkold') IS NOT NULL AS deleted;

-- Several sink partitions: each cycle's results in the order it names them.
SELECT pg_temp.seq_many(ARRAY[
  pg_temp.req('a', '[]', '[{"queue":"snk","partition":"p2","payload":1},{"queue":"snk","partition":"p1","payload":2},{"queue":"snk0","payload":3}]', NULL),
  pg_temp.req('b', '[]', '[{"queue":"snk0","payload":4},{"queue":"snk","partition":"p1","payload":5},{"queue":"snk","partition":"p2","payload":6}]', NULL)]);

-- A failed cycle fails alone, whatever fails: its lease, an op, an item,
-- a name; nothing of it is applied, its sink items are not pushed.
SELECT pg_temp.seq_many(ARRAY[
  pg_temp.req('a', '[{"type":"upsert","key":"k","value":1}]', '[{"queue":"snk","payload":"a"}]'),
  pg_temp.req('b', '[{"type":"upsert","key":"k","value":2}]', '[{"queue":"snk","payload":"b"}]', '{"leaseId":"nope","count":2}'),
  pg_temp.req('c', '[{"type":"upsert","key":"k","value":3}]', '[{"queue":"snk","payload":"c"}]')]);
SELECT pg_temp.seq_many(ARRAY[
  pg_temp.req('a', '[{"type":"merge","key":"k"}]', '[{"queue":"snk","payload":"a"}]', NULL),
  pg_temp.req('b', '[]', '[7]', NULL),
  pg_temp.req('c', '[]', jsonb_build_array(jsonb_build_object('queue', 'snk', 'partition', repeat('x', 256))), NULL),
  pg_temp.req('b', '[]', jsonb_build_array(jsonb_build_object('queue', 'snk', 'transactionId', repeat('t', 70000))), NULL),
  pg_temp.req('a', '[]', '[{"queue":"snk","payload":"ok"}]', NULL)]);

-- Two cycles on one partition: the second runs after the first, on its
-- state and its partial ack (the lease kept) ...
SELECT pg_temp.seq_many(ARRAY[
  pg_temp.req('a', '[{"type":"upsert","key":"k","value":1}]', '[{"queue":"snk","payload":"1"}]', '{"count":1}', '{"release_lease":false}'),
  pg_temp.req('a', '[{"type":"upsert","key":"k","value":2}]', '[{"queue":"snk","payload":"2"}]', '{"count":1}')]);
-- ... and after an ack that released the lease it is refused: exactly once.
SELECT pg_temp.seq_many(ARRAY[
  pg_temp.req('a', '[]', '[{"queue":"snk","payload":"first"}]'),
  pg_temp.req('a', '[]', '[{"queue":"snk","payload":"retry"}]')]);

-- Another tenant's partition: not found.
INSERT INTO queen_streams.quota (tenant_id) VALUES ('44444444-4444-4444-8444-444444444444');
SELECT a->>'success' AS success, a->>'error' AS error
  FROM unnest(queen_streams.cycle_many(ARRAY[pg_temp.req('a', '[]', '[]', NULL)],
                                       '44444444-4444-4444-8444-444444444444')) a;

-- A request that does not parse fails the whole call, as it fails its cycle.
SELECT pg_temp.seq_many(ARRAY[pg_temp.req('a', '[]', '[{"queue":"snk"}]', NULL), '{"partition_id":"x"}']);
SELECT pg_temp.seq_many(ARRAY[pg_temp.req('a', '[]', '[{"queue":"snk"}]', NULL), NULL]);
SELECT queen_streams.cycle_many('{}') AS no_requests;
SELECT queen_streams.cycle_many(NULL) AS null_requests;

-- 500 generated groups of one to four cycles on partitions a, b and c:
-- state ops, sink items whose ids repeat within and across cycles, acks
-- that keep, release or miss the lease, now and then a bad op or item.
-- Every group answers and leaves the world as its cycles one by one do.
SELECT setseed(0.75);
CREATE FUNCTION pg_temp.pick(a jsonb) RETURNS jsonb LANGUAGE sql VOLATILE AS
$$ SELECT a->(floor(random() * jsonb_array_length(a))::int) $$;
CREATE FUNCTION pg_temp.gen_cycle() RETURNS jsonb LANGUAGE sql VOLATILE AS $$
	SELECT pg_temp.req(
		(ARRAY['a', 'b', 'c'])[1 + floor(random() * 3)::int],
		(SELECT coalesce(jsonb_agg(pg_temp.pick('[{"type":"upsert","key":"k","value":1},
			{"type":"upsert","key":"k","value":{"n":2}}, {"type":"upsert","key":"j","value":"s"},
			{"type":"delete","key":"k"}, {"type":"delete","key":"none"}, {"type":"upsert","key":"k"},
			{"type":"upsert","key":"k","value":3}, {"type":"upsert","key":"j","value":[4]}]')), '[]') FROM generate_series(1, floor(random() * 3)::int) i),
		(SELECT coalesce(jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
			'queue', pg_temp.pick('["snk", "snk", "snk", "snk", "snk", "snk", "snk0", "snk0", "snk0", ""]'),
			'partition', pg_temp.pick('["p1", null, null, null]'),
			'transactionId', pg_temp.pick('["k1", "k2", null]'),
			'messageId', CASE WHEN random() < 0.1 THEN '55555555-5555-4555-8555-55555555555' || floor(random() * 2)::int END,
			'payload', i))), '[]') FROM generate_series(1, floor(random() * 4)::int) i),
		nullif(pg_temp.pick('[null, null, {"count":1}, {"count":2}, {"leaseId":"nope","count":1}]'), 'null'),
		pg_temp.pick('[{}, {"release_lease":false}, {"release_lease":false}]')) $$;
CREATE TEMP TABLE cycle_groups AS
SELECT g, ARRAY(SELECT pg_temp.gen_cycle() FROM generate_series(1, 1 + floor(random() * 4)::int + g * 0)) AS reqs
  FROM generate_series(1, 500) g;
SELECT count(DISTINCT reqs) > 450 AS varied FROM cycle_groups;
CREATE TEMP TABLE cycle_outcomes AS SELECT g, reqs, pg_temp.seq_many(reqs) AS r FROM cycle_groups;
SELECT count(*) AS groups,
       count(*) FILTER (WHERE r LIKE '%"success": true%') > 100 AS some_succeed,
       count(*) FILTER (WHERE r LIKE '%"success": false%') > 100 AS some_fail,
       count(*) FILTER (WHERE r LIKE '%"dups"%') > 20 AS repeats_collapsed,
       count(*) FILTER (WHERE r LIKE '%"duplicate"%') > 20 AS duplicates_across
  FROM cycle_outcomes;
SELECT g, reqs, r FROM cycle_outcomes WHERE r NOT LIKE 'same:%' ORDER BY g;

-- 600 cycles, two items each into 6 sink partitions: one segment per partition.
SELECT count(*) FILTER (WHERE a->>'success' = 'true') AS succeeded,
       sum(jsonb_array_length(a->'push_results')) AS results
  FROM unnest(queen_streams.cycle_many(ARRAY(
         SELECT pg_temp.req('a', '[]', jsonb_build_array(
                  jsonb_build_object('queue', 'snk', 'partition', 'big' || (i % 6), 'payload', i),
                  jsonb_build_object('queue', 'snk', 'partition', 'big' || ((i + 1) % 6), 'payload', i)), NULL)
           FROM generate_series(1, 600) i))) a;
SELECT count(*) AS segments, sum(s.end_offset - s.base_offset + 1) AS messages
  FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id
 WHERE p.name LIKE 'big%';

-- Only the owner and those it grants may call it.
CREATE ROLE cm_nobody;
SET ROLE cm_nobody;
SELECT queen_streams.cycle_many('{}');
RESET ROLE;
DROP ROLE cm_nobody;

DROP EXTENSION queen_streams CASCADE;
