-- queen.pop: response shape, queue mode, leases, mid-segment and spanning
-- batches, retention gaps, expiry, auto-ack, consumer groups and
-- subscriptions, wildcard pops, tenants, validation.
CREATE EXTENSION queen_streams;

\i test/include/helpers.sql

-- Push transaction ids <prefix><a..b> as one segment; returns the statuses.
CREATE FUNCTION pg_temp.push(q text, a int, b int, part text DEFAULT 'Default',
                             prefix text DEFAULT 'm', tenant uuid DEFAULT NULL)
RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(r->>'status', ',')
	  FROM jsonb_array_elements(queen.push(jsonb_build_object('items',
	         (SELECT jsonb_agg(jsonb_build_object('queue', q, 'partition', part,
	                   'transactionId', prefix || i, 'payload', jsonb_build_object('i', i)) ORDER BY i)
	            FROM generate_series(a, b) i)), tenant)) r
$$;
-- Cursor state of a (queue, partition, group).
CREATE FUNCTION pg_temp.cursor(q text, part text DEFAULT 'Default', grp text DEFAULT '__QUEUE_MODE__')
RETURNS TABLE (committed bigint, batch_end bigint, leased boolean, attempt_offset bigint,
               attempt_count int, total_consumed bigint)
LANGUAGE sql AS $$
	SELECT c.committed, c.batch_end, c.worker_id IS NOT NULL AND c.lease_expires_at > clock_timestamp(),
	       c.attempt_offset, c.attempt_count, c.total_consumed
	  FROM queen.log_consumers c
	  JOIN queen.log_partitions p ON p.id = c.partition_id
	  JOIN queen.queues qq ON qq.id = p.queue_id
	 WHERE qq.name = q AND p.name = part AND c.consumer_group = grp
	   AND qq.tenant_id = '00000000-0000-0000-0000-000000000001'
$$;
CREATE FUNCTION pg_temp.ack_all(r jsonb) RETURNS boolean LANGUAGE sql AS $$
	SELECT bool_and((a->>'success')::boolean)
	  FROM jsonb_array_elements(queen.ack(jsonb_build_object(
	         'consumerGroup', r->>'consumerGroup',
	         'acknowledgments', (SELECT jsonb_agg(jsonb_build_object(
	             'transactionId', m->>'transactionId', 'partitionId', m->>'partitionId',
	             'leaseId', m->>'leaseId'))
	           FROM jsonb_array_elements(r->'messages') m)))) a
$$;
CREATE FUNCTION pg_temp.expire(q text) RETURNS void LANGUAGE sql AS $$
	UPDATE queen.log_consumers c SET lease_expires_at = now() - interval '1 second'
	  FROM queen.log_partitions p JOIN queen.queues qq ON qq.id = p.queue_id
	 WHERE c.partition_id = p.id AND qq.name = q AND c.worker_id IS NOT NULL
$$;

-- Nothing to pop: an unknown queue, an empty one, an unknown partition.
SELECT queen.pop('nowhere');
SELECT pg_temp.push('shape', 0, 1);
SELECT queen.pop('shape', 'missing');

-- The response and its messages.
CREATE TEMP TABLE r AS SELECT queen.pop('shape') AS r;
SELECT array_agg(k ORDER BY k) AS response_keys FROM r, jsonb_object_keys(r) k;
SELECT array_agg(k ORDER BY k) AS message_keys FROM r, jsonb_object_keys(r->'messages'->0) k;
SELECT r->'success' AS success, r->>'queue' AS queue, r->>'partition' AS partition,
       r->>'consumerGroup' AS grp, r->'partitionsClaimed' AS claimed,
       r->>'partitionId' = (SELECT id::text FROM queen.log_partitions) AS partition_id_ok,
       r->>'leaseId' ~ '^[0-9a-f]{8}-[0-9a-f]{4}-7' AS lease_is_v7,
       r->>'leaseId' = (SELECT worker_id FROM queen.log_consumers) AS lease_stored
  FROM r;
SELECT m->>'transactionId' AS txn, m->'data' AS data, m->'traceId' AS trace,
       m->'producerSub' AS psub, m->>'partition' AS partition,
       m->>'consumerGroup' AS grp,
       m->>'leaseId' = r->>'leaseId' AS lease_ok,
       m->>'partitionId' = r->>'partitionId' AS pid_ok,
       m->>'createdAt' = to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_ok,
       (m->>'id')::uuid = f.message_id AS id_ok
  FROM r, jsonb_array_elements(r->'messages') WITH ORDINALITY AS e(m, n),
       queen.log_segments s, queen.segment_frames(s.blob, 2) f
 WHERE f.idx = n - 1
 ORDER BY n;
-- Payloads of every JSON type come back as they were pushed.
SELECT count(*) FROM jsonb_array_elements(queen.push('{"items":[
  {"queue":"types","payload":{"o":{"n":[1,2.5,"s"]}}},
  {"queue":"types","payload":"text"},
  {"queue":"types","payload":42},
  {"queue":"types","payload":true},
  {"queue":"types","payload":null},
  {"queue":"types"},
  {"queue":"types","payload":[]}]}'));
SELECT m->'data' AS data FROM jsonb_array_elements(queen.pop('types', auto_ack => true)->'messages') m;

-- Queue mode: the lease covers the batch; nobody else gets those offsets
-- while it lives.
SELECT pg_temp.push('q', 0, 4), pg_temp.push('q', 5, 9);
CREATE TEMP TABLE p1 AS SELECT queen.pop('q', batch => 3) AS r;
SELECT pg_temp.txns(r) FROM p1;
SELECT * FROM pg_temp.cursor('q');
SELECT pg_temp.txns(queen.pop('q', batch => 3)) AS while_leased;
SELECT pg_temp.txns(queen.pop('q', 'Default', batch => 3)) AS while_leased_by_name;
-- Acked: the next batch starts mid-segment and spans into the next segment.
SELECT pg_temp.ack_all(r) FROM p1;
SELECT * FROM pg_temp.cursor('q');
CREATE TEMP TABLE p2 AS SELECT queen.pop('q', batch => 4) AS r;
SELECT pg_temp.txns(r) AS mid_and_span FROM p2;
SELECT * FROM pg_temp.cursor('q');
-- Every message of one segment carries that segment's createdAt.
SELECT count(DISTINCT m->>'createdAt') AS created_stamps FROM p2, jsonb_array_elements(r->'messages') m;
SELECT pg_temp.ack_all(r) FROM p2;

-- Lease expiry: the same batch is delivered again, attempt_count counts it.
CREATE TEMP TABLE p3 AS SELECT queen.pop('q', batch => 2) AS r;
SELECT pg_temp.txns(r) FROM p3;
SELECT pg_temp.expire('q');
SELECT * FROM pg_temp.cursor('q');
CREATE TEMP TABLE p4 AS SELECT queen.pop('q', batch => 2) AS r;
SELECT pg_temp.txns(r) AS redelivered, (SELECT r->>'leaseId' FROM p3) <> r->>'leaseId' AS new_lease FROM p4;
SELECT * FROM pg_temp.cursor('q');
-- A larger batch after expiry starts at the same place and goes further.
SELECT pg_temp.expire('q');
CREATE TEMP TABLE p5 AS SELECT queen.pop('q', batch => 10) AS r;
SELECT pg_temp.txns(r) FROM p5;
SELECT * FROM pg_temp.cursor('q');
SELECT pg_temp.ack_all(r) FROM p5;
SELECT * FROM pg_temp.cursor('q');
SELECT queen.pop('q')->'partitionsClaimed' AS drained;

-- Lease length: lease_seconds, else the queue's lease_time.
SELECT pg_temp.push('q', 10, 12);
SELECT pg_temp.txns(queen.pop('q', batch => 1, lease_seconds => 5));
SELECT lease_expires_at - lease_acquired_at BETWEEN interval '4.9 s' AND interval '5.1 s' AS five_seconds
  FROM queen.log_consumers WHERE worker_id IS NOT NULL ORDER BY lease_acquired_at DESC LIMIT 1;
SELECT pg_temp.expire('q');
UPDATE queen.queues SET lease_time = 300 WHERE name = 'q';
SELECT pg_temp.txns(queen.pop('q', batch => 1));
SELECT lease_expires_at - lease_acquired_at BETWEEN interval '299.9 s' AND interval '300.1 s' AS queue_lease_time
  FROM queen.log_consumers WHERE worker_id IS NOT NULL ORDER BY lease_acquired_at DESC LIMIT 1;
SELECT pg_temp.expire('q');

-- Auto-ack: no lease, the cursor moves past the batch at once.
CREATE TEMP TABLE p6 AS SELECT queen.pop('q', batch => 2, auto_ack => true) AS r;
SELECT pg_temp.txns(r), r->>'leaseId' AS lease_id,
       (SELECT bool_and(m->>'leaseId' = '') FROM jsonb_array_elements(r->'messages') m) AS empty_leases
  FROM p6;
SELECT * FROM pg_temp.cursor('q');
SELECT pg_temp.txns(queen.pop('q', auto_ack => true));
SELECT * FROM pg_temp.cursor('q');
SELECT pg_temp.txns(queen.pop('q', auto_ack => true)) AS nothing_left;

-- Consumer groups: each group has its own cursor over the same log.
SELECT pg_temp.txns(queen.pop('q', consumer_group => 'g1', batch => 4, auto_ack => true));
SELECT pg_temp.txns(queen.pop('q', consumer_group => 'g2', batch => 2));
SELECT pg_temp.txns(queen.pop('q', consumer_group => 'g1', batch => 4, auto_ack => true));
SELECT pg_temp.txns(queen.pop('q', consumer_group => 'g2', batch => 2)) AS g2_leased;
SELECT (r->'messages'->0->>'consumerGroup') AS grp, r->>'consumerGroup' AS response_grp
  FROM queen.pop('q', consumer_group => 'g3', batch => 1) r;
SELECT consumer_group, committed, batch_end FROM queen.log_consumers ORDER BY 1;
-- An empty group name is queue mode.
SELECT queen.pop('q', consumer_group => '')->>'consumerGroup' AS empty_group;

-- Subscriptions: 'new' (or subscription_from 'now') starts after the
-- backlog; queue mode always reads the backlog. The first pop of a group
-- records its subscription, later pops keep it.
SELECT pg_temp.push('subs', 0, 2), pg_temp.push('subs', 0, 1, 'side', 's');
SELECT pg_temp.txns(queen.pop('subs', 'Default', consumer_group => 'late', subscription_mode => 'new'));
SELECT pg_temp.txns(queen.pop('subs', 'Default', consumer_group => 'now', subscription_from => 'now'));
SELECT pg_temp.txns(queen.pop('subs', 'Default', consumer_group => 'all', subscription_mode => 'all', auto_ack => true));
SELECT pg_temp.txns(queen.pop('subs', 'Default', subscription_mode => 'new', auto_ack => true)) AS queue_mode;
SELECT pg_temp.push('subs', 3, 4);
SELECT pg_temp.txns(queen.pop('subs', 'Default', consumer_group => 'late', auto_ack => true));
SELECT pg_temp.txns(queen.pop('subs', 'Default', consumer_group => 'now', subscription_mode => 'all', auto_ack => true));
SELECT pg_temp.txns(queen.pop('subs', 'Default', consumer_group => 'all', subscription_mode => 'new', auto_ack => true));
-- The subscription is durable and per queue: a partition the 'new' group
-- meets later starts after the subscription moment too, whatever this pop asks.
SELECT pg_temp.txns(queen.pop('subs', 'side', consumer_group => 'late', subscription_mode => 'all')) AS side_backlog;
SELECT pg_temp.txns(queen.pop('subs', 'side', consumer_group => 'all', auto_ack => true)) AS side_for_all;
-- A 'new' group meets a partition created after it subscribed: all of it is new.
SELECT pg_temp.push('subs', 5, 6, 'later');
SELECT pg_temp.txns(queen.pop('subs', 'later', consumer_group => 'late', auto_ack => true));
SELECT pg_temp.txns(queen.pop('subs', 'later', consumer_group => 'fresh', subscription_mode => 'new')) AS fresh_new;
SELECT g.consumer_group, g.subscription_mode, g.subscription_timestamp IS NOT NULL AS has_ts
  FROM queen.consumer_groups_metadata g ORDER BY 1;
-- subscription_from = a timestamp: start at the first segment written at or after it.
SELECT pg_temp.push('stamped', 0, 1), pg_temp.push('stamped', 2, 3), pg_temp.push('stamped', 4, 5);
UPDATE queen.log_segments s SET created_at = timestamptz '2030-01-01 00:00:00+00' + s.base_offset * interval '1 hour'
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE s.partition_id = p.id AND q.name = 'stamped';
SELECT pg_temp.txns(queen.pop('stamped', consumer_group => 'ts', subscription_from => '2030-01-01T01:30:00Z'));
SELECT pg_temp.txns(queen.pop('stamped', consumer_group => 'ts_late', subscription_from => '2031-01-01T00:00:00Z'));
SELECT pg_temp.txns(queen.pop('stamped', consumer_group => 'ts_early', subscription_from => '2029-01-01T00:00:00Z'));
SELECT consumer_group, subscription_mode,
       to_char(subscription_timestamp AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') AS ts
  FROM queen.consumer_groups_metadata g WHERE consumer_group LIKE 'ts%' ORDER BY 1;

-- Retention gaps: a batch that would start in a removed segment starts at
-- the next live one.
SELECT pg_temp.push('gap', 0, 2), pg_temp.push('gap', 3, 5), pg_temp.push('gap', 6, 8);
SELECT pg_temp.txns(queen.pop('gap', batch => 1, auto_ack => true));
DELETE FROM queen.log_segments s USING queen.log_partitions p, queen.queues q
 WHERE s.partition_id = p.id AND p.queue_id = q.id AND q.name = 'gap' AND s.base_offset < 6;
UPDATE queen.log_partitions p SET log_start = 6 FROM queen.queues q WHERE q.id = p.queue_id AND q.name = 'gap';
SELECT pg_temp.txns(queen.pop('gap', batch => 5)) AS after_gap;
SELECT * FROM pg_temp.cursor('gap');
-- A hole that log_start does not know about yet is skipped as well.
SELECT pg_temp.txns(queen.pop('gap', consumer_group => 'other', batch => 1, auto_ack => true));
SELECT pg_temp.push('gap', 9, 10), pg_temp.push('gap', 11, 12);
DELETE FROM queen.log_segments s USING queen.log_partitions p, queen.queues q
 WHERE s.partition_id = p.id AND p.queue_id = q.id AND q.name = 'gap' AND s.base_offset = 9;
SELECT pg_temp.txns(queen.pop('gap', consumer_group => 'other', auto_ack => true)) AS skips_hole;
-- Everything past the cursor removed: the cursor is sealed at the end, no phantom backlog.
SELECT pg_temp.push('gone', 0, 3);
DELETE FROM queen.log_segments s USING queen.log_partitions p, queen.queues q
 WHERE s.partition_id = p.id AND p.queue_id = q.id AND q.name = 'gone';
SELECT pg_temp.txns(queen.pop('gone')) AS nothing;
SELECT * FROM pg_temp.cursor('gone');
SELECT pg_temp.push('gone', 4, 5);
SELECT pg_temp.txns(queen.pop('gone', auto_ack => true)) AS only_new;

-- delayed_processing hides segments younger than N seconds; window_buffer
-- holds a partition back while its newest segment is that young.
SELECT pg_temp.push('slow', 0, 1);
UPDATE queen.queues SET delayed_processing = 600 WHERE name = 'slow';
SELECT pg_temp.txns(queen.pop('slow')) AS delayed;
UPDATE queen.log_segments SET created_at = created_at - interval '601 seconds';
SELECT pg_temp.push('slow', 2, 3);
SELECT pg_temp.txns(queen.pop('slow', auto_ack => true)) AS old_enough;
UPDATE queen.queues SET delayed_processing = 0, window_buffer = 600 WHERE name = 'slow';
SELECT pg_temp.txns(queen.pop('slow', auto_ack => true)) AS buffered;
UPDATE queen.log_segments SET created_at = created_at - interval '601 seconds';
SELECT pg_temp.txns(queen.pop('slow', auto_ack => true)) AS quiet_now;

-- Wildcard pop over several partitions: `partitions` caps the partitions
-- claimed, `batch` caps the messages in total; one lease id for all.
SELECT pg_temp.push('wide', 0, 1, 'a', 'a'), pg_temp.push('wide', 0, 1, 'b', 'b'),
       pg_temp.push('wide', 0, 1, 'c', 'c');
CREATE TEMP TABLE w1 AS SELECT queen.pop('wide', batch => 10, partitions => 2) AS r;
SELECT r->'partitionsClaimed' AS claimed, jsonb_array_length(r->'messages') AS messages,
       (SELECT count(DISTINCT m->>'leaseId') FROM jsonb_array_elements(r->'messages') m) AS lease_ids,
       (SELECT count(DISTINCT m->>'partitionId') FROM jsonb_array_elements(r->'messages') m) AS partitions,
       r->>'partition' = r->'messages'->0->>'partition' AS first_partition_named,
       r->>'partitionId' = r->'messages'->0->>'partitionId' AS first_partition_id
  FROM w1;
CREATE TEMP TABLE w2 AS SELECT queen.pop('wide', batch => 10, partitions => 5) AS r;
SELECT r->'partitionsClaimed' AS claimed, jsonb_array_length(r->'messages') AS messages FROM w2;
SELECT string_agg(t, ',' ORDER BY t) AS every_message_once
  FROM (SELECT m->>'transactionId' AS t
          FROM (SELECT r FROM w1 UNION ALL SELECT r FROM w2) x, jsonb_array_elements(x.r->'messages') m) y;
SELECT queen.pop('wide', partitions => 5)->'partitionsClaimed' AS all_leased;
SELECT pg_temp.ack_all(r) FROM w1;
SELECT pg_temp.ack_all(r) FROM w2;
-- The batch is a total: three messages from partitions of two each.
SELECT pg_temp.push('wide', 2, 3, 'a', 'a'), pg_temp.push('wide', 2, 3, 'b', 'b'),
       pg_temp.push('wide', 2, 3, 'c', 'c');
SELECT r->'partitionsClaimed' AS claimed, jsonb_array_length(r->'messages') AS messages
  FROM queen.pop('wide', batch => 3, partitions => 3, auto_ack => true) r;
-- Least recently served first: single-partition pops rotate over partitions.
SELECT pg_temp.push('rr', 0, 9, 'a', 'a'), pg_temp.push('rr', 0, 9, 'b', 'b'),
       pg_temp.push('rr', 0, 9, 'c', 'c');
CREATE TEMP TABLE served (n serial, part text);
INSERT INTO served (part) SELECT queen.pop('rr', batch => 1, auto_ack => true)->>'partition';
INSERT INTO served (part) SELECT queen.pop('rr', batch => 1, auto_ack => true)->>'partition';
INSERT INTO served (part) SELECT queen.pop('rr', batch => 1, auto_ack => true)->>'partition';
SELECT count(DISTINCT part) AS distinct_partitions FROM served;
INSERT INTO served (part) SELECT queen.pop('rr', batch => 1, auto_ack => true)->>'partition';
INSERT INTO served (part) SELECT queen.pop('rr', batch => 1, auto_ack => true)->>'partition';
INSERT INTO served (part) SELECT queen.pop('rr', batch => 1, auto_ack => true)->>'partition';
SELECT count(DISTINCT part) AS distinct_partitions FROM served WHERE n > 3;
SELECT bool_and(a.part = b.part) AS same_rotation FROM served a JOIN served b ON b.n = a.n + 3;
SELECT p.name, c.committed FROM queen.log_consumers c
  JOIN queen.log_partitions p ON p.id = c.partition_id JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = 'rr' ORDER BY 1;

-- Tenants: another tenant's queue of the same name is a different queue.
SELECT pg_temp.push('shared', 0, 1, prefix => 'default-');
SELECT pg_temp.push('shared', 0, 2, prefix => 'other-', tenant => '44444444-4444-4444-4444-444444444444');
SELECT pg_temp.txns(queen.pop('shared', tenant => '44444444-4444-4444-4444-444444444444'));
SELECT pg_temp.txns(queen.pop('shared'));
SELECT pg_temp.txns(queen.pop('shared', tenant => '55555555-5555-5555-5555-555555555555')) AS third_tenant;
SELECT pg_temp.txns(queen.pop('shared', tenant => '00000000-0000-0000-0000-000000000001')) AS default_leased;

-- Validation: 22023 with a precise message; nothing is claimed.
SELECT pg_temp.try($$SELECT queen.pop(NULL)$$);
SELECT pg_temp.try($$SELECT queen.pop('')$$);
SELECT pg_temp.try($$SELECT queen.pop('q', batch => 0)$$);
SELECT pg_temp.try($$SELECT queen.pop('q', batch => -5)$$);
SELECT pg_temp.try($$SELECT queen.pop('q', lease_seconds => 0)$$);
SELECT pg_temp.try($$SELECT queen.pop('q', partitions => 0)$$);
-- Caps (queen_streams.max_pop_batch, max_pop_partitions): the defaults are
-- accepted, one more is refused with the setting named; a superuser may
-- raise them for a session, a role without superuser may not.
SELECT pg_temp.push('capped', 0, 2);
SELECT pg_temp.try($$SELECT queen.pop('capped', batch => 10001)$$);
SELECT pg_temp.try($$SELECT queen.pop('capped', partitions => 1001)$$);
SELECT pg_temp.try($$SELECT queen.pop('capped', batch => 2147483647, partitions => 2147483647)$$);
SELECT pg_temp.try($$SELECT queen.pop('capped', batch => 10000, partitions => 1000, auto_ack => false)$$);
SELECT pg_temp.cursor('capped');
SET queen_streams.max_pop_batch = 2;
SELECT pg_temp.try($$SELECT queen.pop('capped', batch => 3)$$);
RESET queen_streams.max_pop_batch;
CREATE ROLE capped_user;
SET ROLE capped_user;
SELECT pg_temp.try($$SET queen_streams.max_pop_batch = 100000$$);
RESET ROLE;
DROP ROLE capped_user;
SELECT pg_temp.try($$SELECT queen.pop('q', subscription_mode => 'latest')$$);
SELECT pg_temp.try($$SELECT queen.pop('q', consumer_group => 'bad_ts', subscription_from => 'yesterday-ish')$$);
SELECT count(*) AS bad_ts_rows FROM queen.consumer_groups_metadata WHERE consumer_group = 'bad_ts';
-- NULL batch, lease and mode mean the defaults.
SELECT pg_temp.push('defaults', 0, 2);
SELECT pg_temp.txns(queen.pop('defaults', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL));

-- The answer is built as a jsonb value: it is exactly what its own text
-- parses to (keys in jsonb's order, payloads as jsonb_in reads them), with
-- and without trace ids, producer subs and an empty batch.
SELECT queen.push('{"items":[
  {"queue":"built","transactionId":"s1","traceId":"11111111-2222-3333-4444-555555555555",
   "payload":{"b":1,"a":[1,"x\u00e9\n",null,true,{"zz":2,"y":1e5}],"b":3}},
  {"queue":"built","transactionId":"s2","payload":"\ud83d\ude00"},
  {"queue":"built","transactionId":"s3","payload":-0.50}]}'::jsonb) IS NOT NULL AS pushed;
SELECT queen.push('{"items":[{"queue":"built","transactionId":"s4","payload":[]}]}', producer_sub => 'bob') IS NOT NULL AS pushed;
WITH r AS (SELECT queen.pop('built', batch => 10) AS r)
SELECT r = (r::text)::jsonb AS same, jsonb_array_length(r->'messages') AS n,
       jsonb_path_query_array(r, '$.messages[*].data') AS data,
       jsonb_path_query_array(r, '$.messages[*].producerSub') AS psubs,
       jsonb_path_query_array(r, '$.messages[*].traceId') AS traces
  FROM r;
WITH r AS (SELECT queen.pop('built', batch => 10) AS r)
SELECT r = (r::text)::jsonb AS same, r->'messages' AS messages, r->'partitionId' AS pid FROM r;

DROP EXTENSION queen_streams CASCADE;
