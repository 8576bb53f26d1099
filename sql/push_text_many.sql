-- queen.push_text_many: several push requests of one tenant as one push
-- (the listener's group commit). Each answer is push_text's for its
-- request, as if the requests had been pushed one after the other in one
-- transaction; each partition gets one segment for all of them.
CREATE EXTENSION queen_streams;
\i test/include/helpers.sql

-- Every answer of a list of requests without its generated ids: per item
-- its request and index, status, queue, transaction id, the first item
-- (over all requests) reporting its message id, and the first naming its
-- partition.
CREATE FUNCTION pg_temp.norm_all(answers jsonb[]) RETURNS text LANGUAGE sql AS $$
	WITH e AS (
		SELECT x, r, n, row_number() OVER (ORDER BY r, n) AS g
		  FROM unnest(answers) WITH ORDINALITY AS u(a, r),
		       jsonb_array_elements(a) WITH ORDINALITY AS j(x, n))
	SELECT coalesce(string_agg(format('%s.%s/%s/%s/%s/id%s/p%s',
	         r, x->>'index', x->>'status', x->>'queueName',
	         CASE WHEN x->>'transaction_id' = x->>'message_id' THEN '<id>' ELSE x->>'transaction_id' END,
	         (SELECT min(e2.g) FROM e e2 WHERE e2.x->>'message_id' = e.x->>'message_id'),
	         (SELECT min(e2.g) FROM e e2 WHERE e2.x->>'partition_id' = e.x->>'partition_id')),
	         ' ' ORDER BY g), '[]')
	  FROM e
$$;

-- The requests pushed one by one (push_text, in order) and as one
-- (push_text_many): their answers (normalized) or errors compared.
CREATE FUNCTION pg_temp.seq_many(reqs text[]) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	a text := pg_temp.rolled_back('SELECT pg_temp.norm_all(ARRAY(SELECT queen.push_text(r)::jsonb'
	                          ' FROM unnest($1) WITH ORDINALITY AS u(r, n) ORDER BY n))', reqs);
	b text := pg_temp.rolled_back('SELECT pg_temp.norm_all(queen.push_text_many($1)::jsonb[])', reqs);
BEGIN
	IF a IS NOT DISTINCT FROM b THEN
		RETURN 'same: ' || a;
	END IF;
	RETURN 'DIFFERENT: one by one ' || a || ' | as one ' || b;
END $$;

-- m dedups (the default window), m0 does not.
SELECT queen.configure('{"queue":"m0","options":{"dedupWindowSeconds":0}}')->>'configured' AS m0;
SELECT queen.push_text('{"items":[{"queue":"m","transactionId":"old"},{"queue":"m0","transactionId":"old"}]}')::jsonb->0->>'status' AS stored_before;

-- fresh ids: every item queued, the indexes per request
SELECT pg_temp.seq_many(ARRAY['{"items":[{"queue":"m","payload":1},{"queue":"m","payload":2}]}',
                              '{"items":[{"queue":"m","payload":3}]}']);
-- an id of an earlier request: a duplicate of it where the queue dedups ...
SELECT pg_temp.seq_many(ARRAY['{"items":[{"queue":"m","transactionId":"x1"},{"queue":"m","transactionId":"x2"}]}',
                              '{"items":[{"queue":"m","transactionId":"x2"},{"queue":"m","transactionId":"x3"}]}']);
-- ... and stored again where it does not
SELECT pg_temp.seq_many(ARRAY['{"items":[{"queue":"m0","transactionId":"x1"},{"queue":"m0","transactionId":"x2"}]}',
                              '{"items":[{"queue":"m0","transactionId":"x2"},{"queue":"m0","transactionId":"x3"}]}']);
-- a request's own repeats collapse either way; the third request repeats both
SELECT pg_temp.seq_many(ARRAY['{"items":[{"queue":"m","transactionId":"y"},{"queue":"m0","transactionId":"y"}]}',
                              '{"items":[{"queue":"m","transactionId":"y"},{"queue":"m","transactionId":"y"},{"queue":"m0","transactionId":"y"},{"queue":"m0","transactionId":"y"}]}',
                              '{"items":[{"queue":"m0","transactionId":"y"},{"queue":"m","transactionId":"y"}]}']);
-- an id stored before the call: a duplicate of the stored message in every request
SELECT pg_temp.seq_many(ARRAY['{"items":[{"queue":"m","transactionId":"old"},{"queue":"m","transactionId":"n1"}]}',
                              '{"items":[{"queue":"m","transactionId":"old"}]}',
                              '{"items":[{"queue":"m0","transactionId":"old"}]}']);
-- the same id in another partition or queue is another id
SELECT pg_temp.seq_many(ARRAY['{"items":[{"queue":"m","partition":"a","transactionId":"z"},{"queue":"m","partition":"b","transactionId":"z"}]}',
                              '{"items":[{"queue":"m","partition":"b","transactionId":"z"},{"queue":"m","partition":"a","transactionId":"z"},{"queue":"m.other","transactionId":"z"}]}']);
-- one request, and none
SELECT pg_temp.seq_many(ARRAY['{"items":[{"queue":"m","payload":{"a":[1,2]}}]}']);
SELECT queen.push_text_many('{}') AS no_requests;
-- an empty items array answers an empty list
SELECT pg_temp.seq_many(ARRAY['{"items":[]}', '{"items":[{"queue":"m"}]}']);

-- Any request's error fails the whole call with that error; its context
-- names the request.
SELECT pg_temp.seq_many(ARRAY['{"items":[{"queue":"m"}]}', '{"items":[{"payload":1}]}']);
SELECT pg_temp.seq_many(ARRAY['{"items":[{"queue":"m"}]}', '{"items": ['] );
SELECT pg_temp.seq_many(ARRAY['{"items":[{"queue":"m"}]}', '{"nope":1}']);
SELECT pg_temp.seq_many(ARRAY['{"items":[{"queue":"m"}]}', '{"items":[{"queue":"' || repeat('q', 300) || '"}]}']);
\set VERBOSITY default
SELECT queen.push_text_many(ARRAY['{"items":[{"queue":"m"}]}', '{"items":[{"queue":"m","traceId":"no"}]}']);
SELECT queen.push_text_many(ARRAY['{"items":[{"queue":"m"}]}', NULL]);
SELECT queen.push_text_many(NULL);
SELECT queen.push_text_many(ARRAY['{"items":[{"queue":"m"}]}'], NULL, ARRAY['a', 'b']);

-- Stored: one segment per partition for the whole call, the messages in
-- request order, each with its request's producer subject.
SELECT count(*) AS segments_before FROM queen.log_segments s
  JOIN queen.log_partitions p ON p.id = s.partition_id JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = 'one';
SELECT array_length(queen.push_text_many(
	ARRAY['{"items":[{"queue":"one","payload":"a1"},{"queue":"one","payload":"a2"}]}',
	      '{"items":[{"queue":"one","payload":"b1"}]}',
	      '{"items":[{"queue":"one","payload":"c1"},{"queue":"one","payload":"c2"}]}'],
	NULL, ARRAY['alice', NULL, 'carol']), 1) AS answers;
SELECT count(*) AS segments_after, sum(s.end_offset - s.base_offset + 1) AS messages
  FROM queen.log_segments s
  JOIN queen.log_partitions p ON p.id = s.partition_id JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = 'one';
SELECT m->>'data' AS data, m->>'producerSub' AS producer_sub
  FROM jsonb_array_elements(queen.pop('one', batch => 10, auto_ack => true)->'messages') m;

-- Under a tenant: the queue is the tenant's, not the default tenant's.
SELECT (queen.push_text_many(ARRAY['{"items":[{"queue":"t.q"}]}', '{"items":[{"queue":"t.q"}]}'],
	'0193f0c4-0000-7000-8000-00000000000a')::jsonb[])[2]->0->>'status' AS tenant_push;
SELECT tenant_id, count(*) FROM queen.queues WHERE name = 't.q' GROUP BY 1;

-- Linear: 100 requests of 1,000 items each, every id repeated by the next request.
SELECT count(*) FILTER (WHERE x->>'status' = 'queued') AS queued,
       count(*) FILTER (WHERE x->>'status' = 'duplicate') AS duplicate
  FROM unnest(queen.push_text_many(ARRAY(
	SELECT json_build_object('items', (SELECT json_agg(json_build_object('queue', 'lin',
	         'transactionId', 't' || (r * 500 + i)::text, 'payload', i)) FROM generate_series(1, 1000) i))::text
	  FROM generate_series(1, 100) r))::jsonb[]) a, jsonb_array_elements(a) x;

-- 2,000 generated groups of one to five requests (ids from a small pool,
-- so that they repeat within and across requests, queues with and without
-- a window, two partitions, now and then a bad item or a bad text): every
-- group answers as its requests one by one do.
SELECT setseed(0.5);
CREATE FUNCTION pg_temp.gen_item() RETURNS text LANGUAGE sql VOLATILE AS $$
	SELECT '{' || concat_ws(',',
		'"queue":' || (ARRAY['"m"', '"m0"', '"m.p"', '"m"', '"m0"', '""'])[1 + floor(random() * (CASE WHEN random() < 0.97 THEN 5 ELSE 6 END))::int],
		CASE WHEN random() < 0.5 THEN '"partition":' || (ARRAY['"a"', '"b"', 'null'])[1 + floor(random() * 3)::int] END,
		CASE WHEN random() < 0.7 THEN '"transactionId":' || (ARRAY['"k1"', '"k2"', '"k3"', '"old"', 'null'])[1 + floor(random() * 5)::int] END,
		CASE WHEN random() < 0.02 THEN '"traceId":"no"' END,
		'"payload":' || (ARRAY['1', '{"a":[1,2]}', '"é"', '1e5', 'null'])[1 + floor(random() * 5)::int]) || '}' $$;
CREATE FUNCTION pg_temp.gen_request() RETURNS text LANGUAGE sql VOLATILE AS $$
	SELECT CASE WHEN random() < 0.01 THEN '{"items":[' ELSE
		'{"items":[' || coalesce((SELECT string_agg(pg_temp.gen_item(), ',') FROM generate_series(1, floor(random() * 5)::int)), '') || ']}' END $$;
CREATE TEMP TABLE groups AS
SELECT g, ARRAY(SELECT pg_temp.gen_request() FROM generate_series(1, 1 + floor(random() * 5)::int + g * 0)) AS reqs
  FROM generate_series(1, 2000) g;
SELECT count(DISTINCT reqs) > 1500 AS varied FROM groups;
CREATE TEMP TABLE group_outcomes AS SELECT g, reqs, pg_temp.seq_many(reqs) AS r FROM groups;
SELECT CASE WHEN r LIKE 'same: 22%' THEN 'same error' WHEN r LIKE 'same: %' THEN 'same answers' ELSE 'different' END AS outcome,
       count(*) > 20 AS over_20
  FROM group_outcomes GROUP BY 1 ORDER BY 1;
SELECT g, reqs, r FROM group_outcomes WHERE r NOT LIKE 'same: %' ORDER BY g;

DROP EXTENSION queen_streams CASCADE;
