-- The resource and status reads (facts §6): queues_list, queue_detail,
-- overview, namespaces, tasks, status, status_queues, status_queue,
-- queue_messages, messages and message. Counts after push, pop, ack and a
-- dead letter; every field; the 404s; paging; the status filter; tenant
-- isolation; an encrypted payload. Uuids and times are masked.
CREATE EXTENSION queen_streams;

\i test/include/helpers.sql

-- A result with uuids and times masked, one key per line: <ms-time> is
-- YYYY-MM-DDTHH:MI:SS.mmmZ, <s-time> the same without the fraction.
CREATE FUNCTION pg_temp.m(j jsonb) RETURNS text LANGUAGE sql AS $$
	SELECT regexp_replace(regexp_replace(regexp_replace(jsonb_pretty(j),
	         '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<uuid>', 'g'),
	         '"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"', '"<ms-time>"', 'g'),
	         '"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"', '"<s-time>"', 'g')
$$;
-- Push n messages t<a>..t<b> to one partition in one segment.
CREATE FUNCTION pg_temp.push(q text, part text, a int, b int, tenant uuid DEFAULT NULL)
RETURNS int LANGUAGE sql AS $$
	SELECT jsonb_array_length(queen.push(jsonb_build_object('items',
	         (SELECT jsonb_agg(jsonb_build_object('queue', q, 'partition', part,
	                   'transactionId', 't' || i, 'payload', jsonb_build_object('i', i)) ORDER BY i)
	            FROM generate_series(a, b) i)), tenant))
$$;
-- transactionId:status of a listing, in order.
CREATE FUNCTION pg_temp.ts(msgs jsonb) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg((m->>'partition') || ':' || (m->>'transactionId') || ':' || (m->>'status'), ' '
	                           ORDER BY n), '(none)')
	  FROM jsonb_array_elements(msgs) WITH ORDINALITY AS e(m, n)
$$;
-- Each segment pushed a different, known time ago (all its messages share it).
CREATE FUNCTION pg_temp.age(q text, part text, base bigint, age interval) RETURNS void LANGUAGE sql AS $$
	UPDATE queen.log_segments SET created_at = now() - age
	 WHERE partition_id = pg_temp.pid(q, part) AND base_offset = base
$$;

-------------------------------------------------------------------------
-- Nothing yet: empty lists and zeros.
-------------------------------------------------------------------------
SELECT queen.queues_list();
SELECT queen.namespaces(), queen.tasks();
SELECT pg_temp.m(queen.overview());
SELECT pg_temp.try($$SELECT queen.queue_detail('nope')$$) AS detail_404,
       pg_temp.try($$SELECT queen.status_queue('nope')$$) AS status_404,
       pg_temp.try($$SELECT queen.queue_messages('nope')$$) AS messages_404,
       pg_temp.try($$SELECT queen.queue_detail('')$$) AS detail_empty;

-------------------------------------------------------------------------
-- Two queues: shop.orders (namespace shop, task fulfil; configure adds an empty Default) with partitions eu
-- (5 + 3 messages, two segments) and us (2), and plain (namespace plain, no task).
-------------------------------------------------------------------------
SELECT (queen.configure('{"queue":"shop.orders","namespace":"shop","task":"fulfil",
  "options":{"leaseTime":120,"retryLimit":2}}'))->>'created' AS configured;
SELECT pg_temp.push('shop.orders', 'eu', 1, 5), pg_temp.push('shop.orders', 'eu', 6, 8),
       pg_temp.push('shop.orders', 'us', 1, 2), pg_temp.push('plain', 'Default', 1, 1);
-- Known ages: eu's first segment 30 min ago, its second 10, us 20, plain 40; created_at ordering too.
SELECT pg_temp.age('shop.orders', 'eu', 0, '30 minutes'), pg_temp.age('shop.orders', 'eu', 5, '10 minutes'),
       pg_temp.age('shop.orders', 'us', 0, '20 minutes'), pg_temp.age('plain', 'Default', 0, '40 minutes');
UPDATE queen.queues SET created_at = now() - interval '1 day' WHERE name = 'shop.orders';

-- Fresh: all pending, newest queue first.
SELECT pg_temp.m(queen.queues_list());

-- Pop 3 from eu (offsets 0-2 leased), ack t1 (completed), dead-letter t2.
SELECT jsonb_array_length(r->'messages') AS popped, r->>'leaseId' AS lease_id
  FROM queen.pop('shop.orders', 'eu', batch => 3) r \gset
SELECT :popped AS popped;
SELECT r->0->>'success' AS t1_acked
  FROM queen.ack(jsonb_build_object('transactionId', 't1', 'partitionId', pg_temp.pid('shop.orders', 'eu'),
                                    'status', 'completed', 'leaseId', :'lease_id')) r;
SELECT r->0->>'dlq' AS t2_dead
  FROM queen.ack(jsonb_build_object('transactionId', 't2', 'partitionId', pg_temp.pid('shop.orders', 'eu'),
                                    'status', 'dlq', 'error', 'poison', 'leaseId', :'lease_id')) r;
-- The dead letter ended the lease; pop t3 again (offset 2 leased).
SELECT jsonb_array_length(queen.pop('shop.orders', 'eu', batch => 1)->'messages') AS popped_again;
-- A bus group reads us to its end with autoAck.
SELECT jsonb_array_length(queen.pop('shop.orders', 'us', 'audit', batch => 10, auto_ack => true)->'messages') AS audit_read;
SELECT committed, batch_end, worker_id IS NOT NULL AS leased FROM queen.log_consumers
 WHERE partition_id = pg_temp.pid('shop.orders', 'eu');

-- eu: total 8 = pending 6 (t3 leased: processing 1) + completed 1 + dead 1.
-- The lists show pending less processing (Queen's get_queues_v2), the details not.
SELECT pg_temp.m(queen.queues_list());
SELECT pg_temp.m(queen.queue_detail('shop.orders'));
SELECT pg_temp.m(queen.status_queue('shop.orders'));
SELECT pg_temp.m(queen.namespaces());
SELECT pg_temp.m(queen.tasks());
SELECT pg_temp.m(o - 'lag') FROM queen.overview() o;
-- Lag over the partitions with a backlog: eu's oldest pending (t3) is 30 min
-- old, us 20, plain 40 (seconds; shown in minutes so a slow run cannot move it).
SELECT (SELECT jsonb_object_agg(k, (v::text::int) / 60) FROM jsonb_each(o->'lag'->'time') e(k, v)) AS time_lag_minutes,
       o->'lag'->'offset' AS offset_lag
  FROM queen.overview() o;

-- status: pushed per minute over the last hour, newest first.
SELECT pg_temp.m(queen.status());
SELECT p->>'ingested' AS ingested,
       (p->>'timestamp')::timestamptz = (SELECT date_bin('1 minute', max(created_at), '2000-01-01') FROM queen.log_segments) AS at_bucket
  FROM jsonb_array_elements(queen.status()->'throughput') p LIMIT 1;
-- A range of a day buckets by 15 minutes; a filter narrows everything.
SELECT s->'bucketMinutes' AS bucket, s->'messages'->'total' AS total, jsonb_array_length(s->'queues') AS queues,
       (SELECT sum((p->>'ingested')::int) FROM jsonb_array_elements(s->'throughput') p) AS ingested,
       (SELECT bool_and(extract(minute FROM (p->>'timestamp')::timestamptz)::int % 15 = 0)
          FROM jsonb_array_elements(s->'throughput') p) AS on_quarters
  FROM queen.status(now() - interval '1 day', now()) s;
SELECT s->'bucketMinutes' AS bucket FROM queen.status(now() - interval '3 hours', now()) s
UNION ALL SELECT s->'bucketMinutes' FROM queen.status(now() - interval '3 days', now()) s
UNION ALL SELECT s->'bucketMinutes' FROM queen.status(now() - interval '30 days', now()) s;
SELECT s->'pointCount' AS points, s->'messages'->'total' AS total, s->'queues'->0->>'name' AS queue,
       s->'leases' AS leases, s->'deadLetterQueue' AS dlq
  FROM queen.status(queue => 'plain') s;
SELECT s->'messages'->'total' AS total FROM queen.status(namespace => 'shop') s
UNION ALL SELECT s->'messages'->'total' FROM queen.status(task => 'nothing') s;
SELECT (s->'timeRange'->>'to')::timestamptz - (s->'timeRange'->>'from')::timestamptz AS span
  FROM queen.status(to_time => now() - interval '2 hours') s;
SELECT pg_temp.try($$SELECT queen.status(now(), now() - interval '1 second')$$) AS from_after_to;

-- status_queues: paging and filters.
SELECT s->'pagination' AS page, pg_temp.m(s->'queues') AS queues FROM queen.status_queues() s;
SELECT (SELECT string_agg(q->>'name', ',') FROM jsonb_array_elements(s->'queues') q) AS names, s->'pagination' AS page
  FROM queen.status_queues(lim => 1, off => 0) s
UNION ALL SELECT (SELECT string_agg(q->>'name', ',') FROM jsonb_array_elements(s->'queues') q), s->'pagination'
  FROM queen.status_queues(lim => 1, off => 1) s
UNION ALL SELECT coalesce((SELECT string_agg(q->>'name', ',') FROM jsonb_array_elements(s->'queues') q), ''), s->'pagination'
  FROM queen.status_queues(lim => 5, off => 2) s
UNION ALL SELECT (SELECT string_agg(q->>'name', ',') FROM jsonb_array_elements(s->'queues') q), s->'pagination'
  FROM queen.status_queues(namespace => 'shop') s
UNION ALL SELECT (SELECT string_agg(q->>'name', ',') FROM jsonb_array_elements(s->'queues') q), s->'pagination'
  FROM queen.status_queues(task => 'fulfil') s;
SELECT pg_temp.try($$SELECT queen.status_queues(lim => -1)$$) AS negative_limit,
       pg_temp.try($$SELECT queen.status_queues(off => -1)$$) AS negative_offset;

-------------------------------------------------------------------------
-- Message listings: newest first across partitions, each with its status.
-------------------------------------------------------------------------
SELECT pg_temp.m(queen.queue_messages('shop.orders', 2));
SELECT pg_temp.ts(queen.queue_messages('shop.orders')) AS all_messages;
SELECT pg_temp.ts(queen.queue_messages('shop.orders', 4, 0)) AS page1,
       pg_temp.ts(queen.queue_messages('shop.orders', 4, 4)) AS page2,
       pg_temp.ts(queen.queue_messages('shop.orders', 4, 8)) AS page3,
       pg_temp.ts(queen.queue_messages('shop.orders', 0)) AS none;
SELECT pg_temp.try($$SELECT queen.queue_messages('shop.orders', -1)$$) AS negative_limit;

SELECT pg_temp.m(queen.messages(queue => 'shop.orders', lim => 1));
SELECT pg_temp.m(queen.messages(queue => 'shop.orders', partition => 'eu', status => 'processing'));
SELECT pg_temp.ts(queen.messages()->'messages') AS last_hour,
       pg_temp.ts(queen.messages(from_time => now() - interval '15 minutes')->'messages') AS last_15_min,
       pg_temp.ts(queen.messages(to_time => now() - interval '25 minutes')->'messages') AS older_than_25_min;
SELECT s AS status, pg_temp.ts(queen.messages(status => s)->'messages') AS messages
  FROM unnest(ARRAY['pending', 'processing', 'completed', 'dead_letter']) s;
SELECT pg_temp.ts(queen.messages(status => 'pending', lim => 2, off => 3)->'messages') AS pending_page,
       pg_temp.ts(queen.messages(partition => 'us')->'messages') AS partition_us,
       pg_temp.ts(queen.messages(namespace => 'plain')->'messages') AS ns_plain,
       pg_temp.ts(queen.messages(task => 'fulfil', lim => 2)->'messages') AS task_fulfil;
SELECT m->>'transactionId' AS txn, m->'busStatus' AS bus, m->>'queueStatus' AS queue_status
  FROM jsonb_array_elements(queen.messages(partition => 'us')->'messages') m;
SELECT queen.messages(queue => 'plain')->'mode' AS plain_mode,
       queen.messages(queue => 'shop.orders')->'mode' AS orders_mode,
       queen.messages(queue => 'shop.orders', partition => 'us')->'mode' AS us_mode;
SELECT pg_temp.try($$SELECT queen.messages(status => 'failed')$$) AS bad_status,
       pg_temp.try($$SELECT queen.messages(lim => -5)$$) AS negative_limit,
       pg_temp.try($$SELECT queen.messages(from_time => now(), to_time => now() - interval '1 minute')$$) AS from_after_to,
       pg_temp.ts(queen.messages(queue => 'nope')->'messages') AS unknown_queue;

-------------------------------------------------------------------------
-- One message.
-------------------------------------------------------------------------
SELECT pg_temp.m(queen.message(pg_temp.pid('shop.orders', 'eu'), 't2'));
SELECT r->>'status' AS status, r->'leaseExpiresAt' IS NOT NULL AND r->>'leaseExpiresAt' IS NOT NULL AS leased,
       pg_temp.m(r->'consumerGroups') AS groups
  FROM queen.message(pg_temp.pid('shop.orders', 'eu'), 't3') r;
SELECT r->>'status' AS status, r->'payload' AS payload, r->'consumerGroups' AS groups, r->'mode' AS mode
  FROM queen.message(pg_temp.pid('shop.orders', 'us'), 't2') r;
SELECT r->>'status' AS t1, (SELECT queen.message(pg_temp.pid('shop.orders', 'eu'), 't8'))->>'status' AS t8
  FROM queen.message(pg_temp.pid('shop.orders', 'eu'), 't1') r;
-- Hashes purged (below txns_start): the segments themselves are searched.
UPDATE queen.log_partitions SET txns_start = 5 WHERE id = pg_temp.pid('shop.orders', 'eu');
DELETE FROM queen.log_txns WHERE partition_id = pg_temp.pid('shop.orders', 'eu') AND base_offset = 0;
SELECT (queen.message(pg_temp.pid('shop.orders', 'eu'), 't4'))->'payload' AS found_by_scan;
SELECT pg_temp.try(format('SELECT queen.message(%L, %L)', pg_temp.pid('shop.orders', 'eu'), 'nope')) AS unknown_txn,
       pg_temp.try(format('SELECT queen.message(%L, %L)', gen_random_uuid(), 't1')) AS unknown_partition,
       pg_temp.try(format('SELECT queen.message(%L, NULL)', pg_temp.pid('shop.orders', 'eu'))) AS no_txn;

-- Encrypted: the frame is flagged, the payload comes back decrypted.
SET queen_streams.encryption_key = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SELECT (queen.configure('{"queue":"vault","options":{"encryptionEnabled":true}}'))->>'created' AS configured;
SELECT jsonb_array_length(queen.push('{"items":[{"queue":"vault","transactionId":"v1","payload":{"secret":42}}]}')) AS pushed;
SELECT r->'payload' AS payload, r->'isEncrypted' AS encrypted, r->'queueConfig'->'encryptionEnabled' AS cfg
  FROM queen.message(pg_temp.pid('vault', 'Default'), 'v1') r;
SELECT r->'payload' AS payload, r->'isEncrypted' AS encrypted
  FROM queen.message(pg_temp.pid('shop.orders', 'eu'), 't8') r;

-------------------------------------------------------------------------
-- Tenant isolation: tenant B sees none of the default tenant's queues, and
-- the default tenant none of B's.
-------------------------------------------------------------------------
SELECT pg_temp.push('b.only', 'Default', 1, 2, :'t_b');
SELECT queen.queues_list(:'t_b')->'queues'->0->>'name' AS b_sees,
       jsonb_array_length(queen.queues_list(:'t_b')->'queues') AS b_count,
       (SELECT string_agg(q->>'name', ',' ORDER BY q->>'name') FROM jsonb_array_elements(queen.queues_list()->'queues') q) AS default_sees;
SELECT pg_temp.try(format('SELECT queen.queue_detail(%L, %L)', 'shop.orders', :'t_b')) AS b_detail,
       pg_temp.try(format('SELECT queen.status_queue(%L, %L)', 'shop.orders', :'t_b')) AS b_status,
       pg_temp.try(format('SELECT queen.queue_messages(%L, 10, 0, %L)', 'shop.orders', :'t_b')) AS b_messages,
       pg_temp.try(format('SELECT queen.message(%L, %L, %L)', pg_temp.pid('shop.orders', 'eu'), 't3', :'t_b')) AS b_message,
       pg_temp.try($$SELECT queen.queue_detail('b.only')$$) AS default_detail;
-- B's two messages were just pushed: 2 in the last 5 minutes.
SELECT o->'queues' AS queues, o->'messages'->'total' AS total, o->'namespaces' AS namespaces,
       o->'throughput' AS throughput
  FROM queen.overview(:'t_b') o;
SELECT pg_temp.ts(queen.messages(tenant => :'t_b')->'messages') AS b_messages,
       queen.namespaces(:'t_b') AS b_namespaces, queen.tasks(:'t_b') AS b_tasks,
       queen.status(tenant => :'t_b')->'messages'->'total' AS b_total,
       jsonb_array_length(queen.status_queues(tenant => :'t_b')->'queues') AS b_status_queues;

-- Privileges: nobody but the owner may call them until granted.
SELECT p.oid::regprocedure AS function, p.prosecdef AS definer,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_exec,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS commented
  FROM pg_proc p
 WHERE p.pronamespace = 'queen'::regnamespace
   AND p.proname IN ('queues_list', 'queue_detail', 'overview', 'namespaces', 'tasks', 'status',
                     'status_queues', 'status_queue', 'queue_messages', 'messages', 'message')
 ORDER BY p.proname;

DROP EXTENSION queen_streams CASCADE;
