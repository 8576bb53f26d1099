-- queen.push: auto-create under a tenant, one segment per (queue, partition),
-- duplicates (intra-request and across requests), results, validation.
CREATE EXTENSION queen_streams;

\i test/include/helpers.sql

-- One line per result item; generated ids are shown only as what they are.
CREATE FUNCTION pg_temp.results(res jsonb)
RETURNS TABLE (idx int, status text, queue text, txn text, id_is_v7 boolean)
LANGUAGE sql AS $$
	SELECT (r->>'index')::int, r->>'status', r->>'queueName',
	       CASE WHEN r->>'transaction_id' = r->>'message_id' THEN '<message id>'
	            ELSE r->>'transaction_id' END,
	       r->>'message_id' ~ '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'
	  FROM jsonb_array_elements(res) WITH ORDINALITY AS e(r, n)
	 ORDER BY n
$$;

-- Every stored segment of the default tenant: offsets and decoded frames.
CREATE FUNCTION pg_temp.segs()
RETURNS TABLE (queue text, part text, base bigint, "end" bigint, frames text)
LANGUAGE sql AS $$
SELECT q.name::text AS queue, p.name AS part, s.base_offset AS base, s.end_offset AS "end",
       (SELECT string_agg(f.transaction_id || '=' || f.payload, ' ' ORDER BY f.idx)
          FROM queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f) AS frames
  FROM queen.log_segments s
  JOIN queen.log_partitions p ON p.id = s.partition_id
  JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.tenant_id = '00000000-0000-0000-0000-000000000001'
$$;

-- A first push creates queues and partitions on the fly, in request order.
CREATE TEMP TABLE first_push AS
SELECT queen.push('{"items":[
  {"queue":"billing.invoices.eu","payload":{"n":0},"transactionId":"a"},
  {"queue":"billing.invoices.eu","partition":"p1","payload":1,"transactionId":"b"},
  {"queue":"plain","payload":"x"},
  {"queue":"billing.invoices.eu","payload":[3],"transactionId":"c"},
  {"queue":"billing.invoices.eu","partition":"p1","transactionId":"d"},
  {"queue":"plain","payload":{"e":true},"transactionId":""}]}') AS r;
SELECT * FROM pg_temp.results((SELECT r FROM first_push));

-- namespace/task come from the dotted name; tenant is the default one.
SELECT name, namespace, task, tenant_id, dedup_window_seconds, lease_time, retry_limit
  FROM queen.queues ORDER BY name;
SELECT q.name AS queue, p.name AS part, p.last_offset, p.log_start,
       p.oldest_live_at IS NOT NULL AS live, p.last_write_at IS NOT NULL AS written
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 ORDER BY 1, 2;
-- One segment per (queue, partition); absent payload is stored empty.
SELECT queue, part, base, "end",
       regexp_replace(frames, '[0-9a-f]{8}-[0-9a-f-]{27}', '<id>', 'g') AS frames
  FROM pg_temp.segs() ORDER BY 1, 2, 3;
-- Message ids in the segments are the ones the push answered.
SELECT count(*) AS ids_match
  FROM first_push, jsonb_array_elements(r) e,
       queen.log_segments s, queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
 WHERE f.message_id = (e->>'message_id')::uuid AND f.transaction_id = e->>'transaction_id';
-- The hash sidecar holds the xxh3-128 of each frame's transaction id, in order.
SELECT bool_and(t.hashes = (SELECT string_agg(queen.txn_hash(f.transaction_id), ''::bytea ORDER BY f.idx)
                              FROM queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f)
                AND t.end_offset = s.end_offset AND t.created_at = s.created_at) AS hashes_match,
       count(*) AS segments
  FROM queen.log_segments s
  JOIN queen.log_txns t ON t.partition_id = s.partition_id AND t.base_offset = s.base_offset;

-- A second push appends: the next segment starts at last_offset + 1.
SELECT * FROM pg_temp.results(queen.push('{"items":[
  {"queue":"billing.invoices.eu","payload":5,"transactionId":"e"},
  {"queue":"billing.invoices.eu","payload":6,"transactionId":"f"}]}'));
SELECT queue, part, base, "end", frames FROM pg_temp.segs()
 WHERE queue = 'billing.invoices.eu' AND part = 'Default' ORDER BY base;

-- Intra-request duplicates collapse (first wins) before anything is written;
-- the same id in another partition or queue is a different message.
CREATE TEMP TABLE intra AS
SELECT queen.push('{"items":[
  {"queue":"dups","payload":1,"transactionId":"x"},
  {"queue":"dups","payload":2,"transactionId":"x"},
  {"queue":"dups","partition":"other","payload":3,"transactionId":"x"},
  {"queue":"dups2","payload":4,"transactionId":"x"},
  {"queue":"dups","payload":5,"transactionId":"y"},
  {"queue":"dups","payload":6,"transactionId":"x"}]}') AS r;
SELECT * FROM pg_temp.results((SELECT r FROM intra));
SELECT r->1->>'message_id' = r->0->>'message_id' AS follower_has_leader_id,
       r->5->>'message_id' = r->0->>'message_id' AS second_follower_too,
       r->2->>'message_id' <> r->0->>'message_id' AS other_partition_distinct
  FROM intra;
SELECT queue, part, base, "end", frames FROM pg_temp.segs() WHERE queue LIKE 'dups%' ORDER BY 1, 2, 3;

-- Across requests, within the dedup window (3600 s by default): a repeated
-- transaction id answers "duplicate" with the original's message id, and
-- only the new items are written (one new segment).
CREATE TEMP TABLE cross_push AS
SELECT queen.push('{"items":[
  {"queue":"billing.invoices.eu","payload":"again","transactionId":"a"},
  {"queue":"billing.invoices.eu","payload":7,"transactionId":"g"},
  {"queue":"billing.invoices.eu","payload":"again","transactionId":"a"},
  {"queue":"billing.invoices.eu","payload":"again","transactionId":"c"}]}') AS r;
SELECT * FROM pg_temp.results((SELECT r FROM cross_push));
SELECT c.r->0->>'message_id' = f.r->0->>'message_id' AS dup_reports_original,
       c.r->2->>'message_id' = f.r->0->>'message_id' AS follower_reports_original,
       c.r->3->>'message_id' = f.r->3->>'message_id' AS second_dup_reports_original
  FROM cross_push c, first_push f;
SELECT queue, part, base, "end", frames FROM pg_temp.segs()
 WHERE queue = 'billing.invoices.eu' AND part = 'Default' ORDER BY base;

-- A request made only of duplicates writes nothing at all.
SELECT * FROM pg_temp.results(queen.push('{"items":[
  {"queue":"billing.invoices.eu","payload":0,"transactionId":"e"},
  {"queue":"billing.invoices.eu","partition":"p1","payload":0,"transactionId":"b"}]}'));
SELECT q.name AS queue, p.name AS part, p.last_offset,
       (SELECT count(*) FROM queen.log_segments s WHERE s.partition_id = p.id) AS segments,
       (SELECT count(*) FROM queen.log_txns t WHERE t.partition_id = p.id) AS hash_rows
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = 'billing.invoices.eu' ORDER BY 2;

-- The window is time-bounded: an original older than the window no longer counts.
UPDATE queen.queues SET dedup_window_seconds = 1 WHERE name = 'billing.invoices.eu';
SELECT pg_sleep(1.1);
SELECT * FROM pg_temp.results(queen.push('{"items":[
  {"queue":"billing.invoices.eu","partition":"p1","payload":"late","transactionId":"b"}]}'));
UPDATE queen.queues SET dedup_window_seconds = 3600 WHERE name = 'billing.invoices.eu';

-- dedup_window_seconds = 0 disables the probe; intra-request collapse remains.
UPDATE queen.queues SET dedup_window_seconds = 0 WHERE name = 'plain';
SELECT * FROM pg_temp.results(queen.push('{"items":[{"queue":"plain","payload":1,"transactionId":"k"}]}'));
SELECT * FROM pg_temp.results(queen.push('{"items":[{"queue":"plain","payload":2,"transactionId":"k"},
                                                    {"queue":"plain","payload":3,"transactionId":"k"}]}'));
SELECT queue, part, base, "end",
       regexp_replace(frames, '[0-9a-f]{8}-[0-9a-f-]{27}', '<id>', 'g') AS frames
  FROM pg_temp.segs() WHERE queue = 'plain' ORDER BY base;

-- Trace ids are stored in the frame (flag 1).
SELECT * FROM pg_temp.results(queen.push('{"items":[{"queue":"traced","payload":1,"transactionId":"t",
  "traceId":"11111111-2222-4333-8444-555555555555"}]}'));
SELECT f.flags, f.trace_id, f.transaction_id
  FROM queen.log_segments s
  JOIN queen.log_partitions p ON p.id = s.partition_id
  JOIN queen.queues q ON q.id = p.queue_id,
       queen.segment_frames(s.blob, 1) f
 WHERE q.name = 'traced';

-- Tenants: the same queue name under another tenant is another queue, with
-- its own partitions, offsets and dedup history.
SELECT * FROM pg_temp.results(queen.push('{"items":[
  {"queue":"billing.invoices.eu","payload":"t2","transactionId":"a"}]}',
  '22222222-2222-2222-2222-222222222222'));
SELECT q.tenant_id, q.name, q.namespace, q.task, p.name AS part, p.last_offset
  FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id
 WHERE q.name = 'billing.invoices.eu' ORDER BY 1, 5;
SELECT * FROM pg_temp.results(queen.push('{"items":[
  {"queue":"billing.invoices.eu","payload":"t2","transactionId":"a"}]}',
  '22222222-2222-2222-2222-222222222222'));
-- A NULL tenant is the default tenant.
SELECT * FROM pg_temp.results(queen.push('{"items":[
  {"queue":"billing.invoices.eu","payload":"again","transactionId":"a"}]}', NULL));

-- An empty request answers an empty array and creates nothing.
SELECT queen.push('{"items":[]}');

-- Validation: SQLSTATE 22023 with a message naming the field.
SELECT pg_temp.try($$SELECT queen.push(NULL)$$);
SELECT pg_temp.try($$SELECT queen.push('[]')$$);
SELECT pg_temp.try($$SELECT queen.push('"items"')$$);
SELECT pg_temp.try($$SELECT queen.push('{}')$$);
SELECT pg_temp.try($$SELECT queen.push('{"items":null}')$$);
SELECT pg_temp.try($$SELECT queen.push('{"items":{"queue":"a"}}')$$);
SELECT pg_temp.try($$SELECT queen.push('{"items":[1]}')$$);
SELECT pg_temp.try($$SELECT queen.push('{"items":[{"queue":"a"},[]]}')$$);
SELECT pg_temp.try($$SELECT queen.push('{"items":[{"payload":1}]}')$$);
SELECT pg_temp.try($$SELECT queen.push('{"items":[{"queue":null}]}')$$);
SELECT pg_temp.try($$SELECT queen.push('{"items":[{"queue":1}]}')$$);
SELECT pg_temp.try($$SELECT queen.push('{"items":[{"queue":["a"]}]}')$$);
SELECT pg_temp.try($$SELECT queen.push('{"items":[{"queue":""}]}')$$);
SELECT pg_temp.try($$SELECT queen.push('{"items":[{"queue":"a"},{"queue":"a","partition":2}]}')$$);
SELECT pg_temp.try($$SELECT queen.push('{"items":[{"queue":"a","partition":""}]}')$$);
SELECT pg_temp.try($$SELECT queen.push('{"items":[{"queue":"a","transactionId":5}]}')$$);
SELECT pg_temp.try($$SELECT queen.push('{"items":[{"queue":"a","transactionId":{"x":1}}]}')$$);
SELECT pg_temp.try($$SELECT queen.push('{"items":[{"queue":"a"},{"queue":"a"},{"queue":"a","traceId":"nope"}]}')$$);
SELECT pg_temp.try($$SELECT queen.push('{"items":[{"queue":"a","traceId":7}]}')$$);
SELECT pg_temp.try(format($$SELECT queen.push('{"items":[{"queue":"%s"}]}')$$, repeat('q', 256)));
SELECT pg_temp.try(format($$SELECT queen.push('{"items":[{"queue":"a","partition":"%s"}]}')$$, repeat('p', 256)));
SELECT pg_temp.try(format($$SELECT queen.push('{"items":[{"queue":"a","transactionId":"%s"}]}')$$, repeat('t', 65536)));
-- Names every HTTP route can carry as one path segment: no "/", not "." or "..".
SELECT pg_temp.try($$SELECT queen.push('{"items":[{"queue":"orders/eu"}]}')$$);
SELECT pg_temp.try($$SELECT queen.push('{"items":[{"queue":"a","partition":".."}]}')$$);
SELECT pg_temp.try($$SELECT queen.push('{"items":[{"queue":"."}]}')$$);
-- 255 bytes is still a valid name.
SELECT status FROM pg_temp.results(queen.push(jsonb_build_object('items',
  jsonb_build_array(jsonb_build_object('queue', repeat('q', 255), 'payload', 1)))));
-- A bad item fails the whole request: nothing of the good items was written.
SELECT count(*) AS queues_named_a FROM queen.queues WHERE name = 'a';
SELECT count(*) AS segments_total FROM queen.log_segments;

DROP EXTENSION queen_streams CASCADE;
