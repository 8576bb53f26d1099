-- Consumer groups (facts §4): queen.consumer_groups, consumer_groups_lagging,
-- consumer_group, delete_consumer_group, update_subscription, seek and
-- seek_partition: every field, every error, tenant isolation, and where a pop
-- resumes after a seek, a delete or a subscription update.
CREATE EXTENSION queen_streams;
SET timezone = 'UTC';

\i test/include/helpers.sql

-- Push transaction ids <prefix><a..b> as one segment.
CREATE FUNCTION pg_temp.push(q text, a int, b int, part text DEFAULT 'Default',
                             prefix text DEFAULT 'm', tenant uuid DEFAULT NULL)
RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(r->>'status', ',')
	  FROM jsonb_array_elements(queen.push(jsonb_build_object('items',
	         (SELECT jsonb_agg(jsonb_build_object('queue', q, 'partition', part,
	                   'transactionId', prefix || i, 'payload', i) ORDER BY i)
	            FROM generate_series(a, b) i)), tenant)) r
$$;
-- Give the segment starting at `base` a fixed creation time.
CREATE FUNCTION pg_temp.stamp(q text, part text, base bigint, ts timestamptz,
                              tenant uuid DEFAULT '00000000-0000-0000-0000-000000000001')
RETURNS void LANGUAGE sql AS $$
	UPDATE queen.log_segments s SET created_at = ts
	  FROM queen.log_partitions p JOIN queen.queues qq ON qq.id = p.queue_id
	 WHERE s.partition_id = p.id AND qq.name = q AND p.name = part AND qq.tenant_id = tenant
	   AND s.base_offset = base
$$;
-- Cursor state of a (queue, partition, group).
CREATE FUNCTION pg_temp.cursor(q text, part text, grp text,
                               tenant uuid DEFAULT '00000000-0000-0000-0000-000000000001')
RETURNS TABLE (committed bigint, batch_end bigint, worker boolean, leased boolean,
               retries int, attempt_offset bigint, attempt_count int, total_consumed bigint)
LANGUAGE sql AS $$
	SELECT c.committed, c.batch_end, c.worker_id IS NOT NULL,
	       c.lease_expires_at IS NOT NULL AND c.lease_expires_at > clock_timestamp(),
	       c.batch_retry_count, c.attempt_offset, c.attempt_count, c.total_consumed
	  FROM queen.log_consumers c
	  JOIN queen.log_partitions p ON p.id = c.partition_id
	  JOIN queen.queues qq ON qq.id = p.queue_id
	 WHERE qq.name = q AND p.name = part AND c.consumer_group = grp AND qq.tenant_id = tenant
$$;
-- Ack every message of a pop with its lease id; the first item's error.
CREATE FUNCTION pg_temp.ack_all(r jsonb) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(DISTINCT coalesce(a->>'error', 'ok'), ','), 'nothing')
	  FROM jsonb_array_elements(queen.ack(jsonb_build_object(
	         'consumerGroup', r->>'consumerGroup',
	         'acknowledgments', (SELECT jsonb_agg(jsonb_build_object(
	             'transactionId', m->>'transactionId', 'partitionId', m->>'partitionId',
	             'leaseId', m->>'leaseId'))
	           FROM jsonb_array_elements(r->'messages') m)))) a
$$;
-- Seconds from a time to now, for lags (the call and this check may straddle a second).
CREATE FUNCTION pg_temp.lag_ok(got jsonb, since timestamptz) RETURNS boolean LANGUAGE sql AS $$
	SELECT got::bigint BETWEEN floor(extract(epoch FROM now() - since))::bigint - 1
	                       AND floor(extract(epoch FROM clock_timestamp() - since))::bigint + 1
$$;

-- Queue gq: p1 holds offsets 0-2, 3-5 and 6-9 (three segments), p2 holds 0-1.
SELECT pg_temp.push('gq', 0, 2, 'p1'), pg_temp.push('gq', 3, 5, 'p1'), pg_temp.push('gq', 6, 9, 'p1'),
       pg_temp.push('gq', 0, 1, 'p2', 'n');
SELECT pg_temp.stamp('gq', 'p1', 0, '2020-01-01 00:00:00'), pg_temp.stamp('gq', 'p1', 3, '2020-01-01 01:00:00'),
       pg_temp.stamp('gq', 'p1', 6, '2020-01-01 02:00:00'), pg_temp.stamp('gq', 'p2', 0, '2020-01-02 00:00:00');
-- Queue gs: one segment, fully consumed by group gs.
SELECT pg_temp.push('gs', 0, 1, 'Default', 's');

-- Nothing consumed yet: no groups.
SELECT queen.consumer_groups() AS none, queen.consumer_groups_lagging(0) AS none_lagging;

-- Queue mode consumes m0, m1 (acked). Group ga (mode all) auto-acks m0-m3 of
-- p1 and n0 of p2. Group gn (mode new) meets p2 with nothing new. Group gt
-- subscribes from 00:30 (p1's second segment on) and leases m3. Group gs
-- drains queue gs.
SELECT pg_temp.ack_all(queen.pop('gq', 'p1', batch => 2)) AS queue_mode_ack;
SELECT pg_temp.txns(queen.pop('gq', 'p1', 'ga', batch => 4, auto_ack => true)) AS ga_p1,
       pg_temp.txns(queen.pop('gq', 'p2', 'ga', batch => 1, auto_ack => true)) AS ga_p2;
SELECT pg_temp.txns(queen.pop('gq', 'p2', 'gn', subscription_mode => 'new')) AS gn_p2;
CREATE TEMP TABLE gt_pop AS
	SELECT queen.pop('gq', 'p1', 'gt', batch => 1, subscription_from => '2020-01-01 00:30:00+00') AS r;
SELECT pg_temp.txns(r) AS gt_p1 FROM gt_pop;
SELECT pg_temp.txns(queen.pop('gs', consumer_group => 'gs', auto_ack => true)) AS gs;

---------------------------------------------------------------------------
-- GET /api/v1/consumer-groups: one entry per (group, queue), by name.
---------------------------------------------------------------------------
SELECT jsonb_array_length(queen.consumer_groups()) AS entries;
SELECT array_agg(k ORDER BY k) AS entry_keys FROM jsonb_object_keys(queen.consumer_groups()->0) k;
SELECT e->>'name' AS name, e->'topics' AS topics, e->>'queueName' AS queue, e->'members' AS members,
       e->'partitionsWithLag' AS with_lag, e->'totalLag' AS total_lag, e->>'state' AS state,
       e->>'subscriptionMode' AS mode,
       CASE e->>'subscriptionMode' WHEN 'new' THEN 'the first pop''s time' ELSE e->>'subscriptionTimestamp' END AS sub_ts
  FROM jsonb_array_elements(queen.consumer_groups()) WITH ORDINALITY AS x(e, n) ORDER BY n;
-- mode new: the subscription time is the first pop's (stored, answered in milliseconds).
SELECT (e->>'subscriptionTimestamp')::timestamptz = date_trunc('milliseconds', m.subscription_timestamp) AS new_ts_ok
  FROM jsonb_array_elements(queen.consumer_groups()) e
  JOIN queen.consumer_groups_metadata m ON m.consumer_group = e->>'name'
 WHERE e->>'name' = 'gn';
-- maxTimeLag: seconds since the oldest unconsumed message of the worst partition, 0 without lag.
SELECT e->>'name' AS name, e->>'queueName' AS queue,
       CASE e->>'name'
         WHEN '__QUEUE_MODE__' THEN pg_temp.lag_ok(e->'maxTimeLag', '2020-01-01 00:00:00')
         WHEN 'ga' THEN pg_temp.lag_ok(e->'maxTimeLag', '2020-01-01 01:00:00')
         WHEN 'gt' THEN pg_temp.lag_ok(e->'maxTimeLag', '2020-01-01 01:00:00')
         ELSE (e->'maxTimeLag')::int = 0 END AS max_time_lag_ok,
       (e->>'subscriptionCreatedAt')::timestamptz = date_trunc('milliseconds', m.created_at) AS sub_created_ok,
       e->>'subscriptionCreatedAt' ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$' AS ms_format
  FROM jsonb_array_elements(queen.consumer_groups()) WITH ORDINALITY AS x(e, n)
  LEFT JOIN queen.consumer_groups_metadata m ON m.consumer_group = e->>'name'
 ORDER BY n;

---------------------------------------------------------------------------
-- GET /api/v1/consumer-groups/lagging: snake_case, largest time lag first.
---------------------------------------------------------------------------
SELECT array_agg(k ORDER BY k) AS lagging_keys FROM jsonb_object_keys(queen.consumer_groups_lagging()->0) k;
SELECT e->>'consumer_group' AS grp, e->>'queue_name' AS queue, e->>'partition_name' AS part,
       (e->>'partition_id')::uuid = p.id AS pid_ok,
       e->>'worker_id' IS NOT DISTINCT FROM c.worker_id AS worker_ok, e->'worker_id' = 'null' AS no_worker,
       e->'offset_lag' AS offset_lag,
       pg_temp.lag_ok(e->'time_lag_seconds', (e->>'oldest_unconsumed_at')::timestamptz) AS time_lag_ok,
       (e->'lag_hours')::numeric = round((e->>'time_lag_seconds')::numeric / 3600, 2) AS hours_ok,
       e->>'oldest_unconsumed_at' AS oldest, e->>'last_consumed_at' AS last_consumed
  FROM jsonb_array_elements(queen.consumer_groups_lagging()) WITH ORDINALITY AS x(e, n)
  JOIN queen.log_partitions p ON p.name = e->>'partition_name'
  JOIN queen.queues q ON q.id = p.queue_id AND q.name = e->>'queue_name'
  JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = e->>'consumer_group'
 ORDER BY n;
-- Only lags above the minimum; the default is an hour; a NULL minimum is the default.
SELECT jsonb_array_length(queen.consumer_groups_lagging(2000000000)) AS above_huge,
       jsonb_array_length(queen.consumer_groups_lagging()) AS above_hour,
       jsonb_array_length(queen.consumer_groups_lagging(NULL)) AS above_null,
       jsonb_array_length(queen.consumer_groups_lagging(-5)) AS above_negative;

---------------------------------------------------------------------------
-- GET /api/v1/consumer-groups/:group: keyed by queue name.
---------------------------------------------------------------------------
SELECT array_agg(k ORDER BY k) AS queues FROM jsonb_object_keys(queen.consumer_group('ga')) k;
SELECT array_agg(k ORDER BY k) AS partition_keys
  FROM jsonb_object_keys(queen.consumer_group('ga')->'gq'->'partitions'->0) k;
SELECT q.key AS queue, e->>'partition' AS part, e->'workerId' AS worker, e->>'lastConsumedAt' AS last_consumed,
       e->'totalConsumed' AS consumed, e->'offsetLag' AS offset_lag,
       CASE e->>'partition' WHEN 'p1' THEN pg_temp.lag_ok(e->'timeLagSeconds', '2020-01-01 01:00:00')
            ELSE pg_temp.lag_ok(e->'timeLagSeconds', '2020-01-02 00:00:00') END AS time_lag_ok, e->'leaseActive' AS lease_active
  FROM jsonb_each(queen.consumer_group('ga')) q, jsonb_array_elements(q.value->'partitions') e;
-- gt holds a lease on m3: workerId is the pop's leaseId. Its cursor (m2) was
-- seeded by its subscription, not consumed: lastConsumedAt is null.
SELECT e->>'workerId' = r->>'leaseId' AS worker_is_lease, e->'leaseActive' AS lease_active,
       e->>'lastConsumedAt' AS last_consumed, e->'offsetLag' AS offset_lag, e->'totalConsumed' AS consumed
  FROM gt_pop, jsonb_array_elements(queen.consumer_group('gt')->'gq'->'partitions') e;
SELECT queen.consumer_group('gn') AS gn, queen.consumer_group('nobody') AS unknown;
SELECT pg_temp.try($$SELECT queen.consumer_group('')$$) AS empty_group,
       pg_temp.try($$SELECT queen.consumer_group(NULL)$$) AS null_group;

---------------------------------------------------------------------------
-- Tenant isolation: tenant B has its own gq with group ga.
---------------------------------------------------------------------------
SELECT pg_temp.push('gq', 0, 4, 'p1', 'b', :'t_b');
SELECT pg_temp.txns(queen.pop('gq', 'p1', 'ga', batch => 2, auto_ack => true, tenant => :'t_b')) AS b_ga;
SELECT pg_temp.txns(queen.pop('gq', 'p1', 'gb', batch => 1, subscription_mode => 'new', tenant => :'t_b')) AS b_gb;
SELECT e->>'name' AS name, e->>'queueName' AS queue, e->'members' AS members, e->'totalLag' AS total_lag,
       e->>'subscriptionMode' AS mode
  FROM jsonb_array_elements(queen.consumer_groups(:'t_b')) WITH ORDINALITY AS x(e, n) ORDER BY n;
SELECT count(*) FILTER (WHERE e->>'name' = 'gb') AS b_groups_seen_by_default,
       count(*) AS default_entries
  FROM jsonb_array_elements(queen.consumer_groups()) e;
SELECT queen.consumer_group('ga', :'t_b')->'gq'->'partitions'->0->'offsetLag' AS b_ga_lag,
       queen.consumer_group('ga')->'gq'->'partitions'->0->'offsetLag' AS default_ga_lag,
       queen.consumer_group('gb') AS gb_from_default,
       jsonb_array_length(queen.consumer_groups_lagging(0, :'t_b')) AS b_lagging;
SELECT queen.consumer_groups('cccccccc-0000-4000-8000-00000000000c') AS tenant_c_groups,
       queen.consumer_groups_lagging(0, 'cccccccc-0000-4000-8000-00000000000c') AS tenant_c_lagging;

---------------------------------------------------------------------------
-- POST /api/v1/consumer-groups/:group/subscription
---------------------------------------------------------------------------
SELECT pg_temp.try($$SELECT queen.update_subscription('gt', '{}')$$) AS missing,
       pg_temp.try($$SELECT queen.update_subscription('gt', '{"subscriptionTimestamp":null}')$$) AS json_null;
SELECT pg_temp.try($$SELECT queen.update_subscription('gt', '{"subscriptionTimestamp":5}')$$) AS not_string;
SELECT pg_temp.try($$SELECT queen.update_subscription('gt', '{"subscriptionTimestamp":"garbage"}')$$) AS unparsable;
SELECT pg_temp.try($$SELECT queen.update_subscription('gt', '{"subscriptionTimestamp":""}')$$) AS empty_string;
SELECT pg_temp.try($$SELECT queen.update_subscription('gt', '{"subscriptionTimestamp":"infinity"}')$$) AS infinite;
SELECT pg_temp.try($$SELECT queen.update_subscription('gt', '[1]')$$) AS not_object,
       pg_temp.try($$SELECT queen.update_subscription('gt', NULL)$$) AS null_body,
       pg_temp.try($$SELECT queen.update_subscription('', '{"subscriptionTimestamp":"2020-01-01"}')$$) AS no_group;
-- gt (mode timestamp) is updated; ga (mode all: Queen keeps no row for it) is not;
-- an unknown group updates nothing; tenant B's gb is not touched from the default tenant.
SELECT queen.update_subscription('gt', '{"subscriptionTimestamp":"2020-01-01T01:30:00.000Z"}') AS gt;
SELECT queen.update_subscription('ga', '{"subscriptionTimestamp":"2020-01-01T01:30:00Z"}') AS ga,
       queen.update_subscription('nobody', '{"subscriptionTimestamp":"2020-01-01"}') AS nobody,
       queen.update_subscription('gb', '{"subscriptionTimestamp":"2020-01-01"}') AS gb_from_default;
SELECT m.consumer_group, m.subscription_mode,
       CASE m.subscription_mode WHEN 'new' THEN 'the first pop''s time' ELSE m.subscription_timestamp::text END AS ts,
       CASE m.tenant_id WHEN :'t_def' THEN 'default' ELSE 'b' END AS tenant
  FROM queen.consumer_groups_metadata m ORDER BY 4, 1;
-- Cursors did not move: gt still holds m3 at committed 2.
SELECT * FROM pg_temp.cursor('gq', 'p1', 'gt');

---------------------------------------------------------------------------
-- POST /api/v1/consumer-groups/:group/queues/:queue/seek
---------------------------------------------------------------------------
SELECT pg_temp.try($$SELECT queen.seek('gt', 'gq', '{}')$$) AS neither,
       pg_temp.try($$SELECT queen.seek('gt', 'gq', '{"toEnd":false}')$$) AS to_end_false,
       pg_temp.try($$SELECT queen.seek('gt', 'gq', '{"timestamp":""}')$$) AS empty_timestamp;
SELECT pg_temp.try($$SELECT queen.seek('gt', 'gq', '{"toEnd":"yes"}')$$) AS to_end_not_bool,
       pg_temp.try($$SELECT queen.seek('gt', 'gq', '{"timestamp":5}')$$) AS timestamp_not_string;
SELECT pg_temp.try($$SELECT queen.seek('gt', 'gq', '{"timestamp":"yesterday-ish"}')$$) AS bad_timestamp;
SELECT pg_temp.try($$SELECT queen.seek('gt', 'nowhere', '{"toEnd":true}')$$) AS unknown_queue;
-- Tenant B's gq is another queue: the default tenant's gt has no cursor there.
SELECT queen.seek('gt', 'gq', '{"toEnd":true}', :'t_b')->'partitionsUpdated' AS from_tenant_b;
SELECT pg_temp.try($$SELECT queen.seek('gt', 'gq', NULL)$$) AS null_body,
       pg_temp.try($$SELECT queen.seek('gt', 'gq', '"x"')$$) AS not_object,
       pg_temp.try($$SELECT queen.seek('gt', '', '{"toEnd":true}')$$) AS no_queue,
       pg_temp.try($$SELECT queen.seek(NULL, 'gq', '{"toEnd":true}')$$) AS no_group;

-- To the end, while gt leases m3: the lease is released and batch counters reset.
SELECT * FROM pg_temp.cursor('gq', 'p1', 'gt');
SELECT queen.seek('gt', 'gq', '{"toEnd":true}') AS to_end;
SELECT * FROM pg_temp.cursor('gq', 'p1', 'gt');
-- The old lease id no longer acks; nothing is left to pop; a new push is next.
SELECT pg_temp.ack_all(r) AS ack_old_lease FROM gt_pop;
SELECT pg_temp.txns(queen.pop('gq', 'p1', 'gt')) AS after_end;
SELECT pg_temp.push('gq', 10, 10, 'p1');
SELECT pg_temp.stamp('gq', 'p1', 10, '2020-01-01 03:00:00');
SELECT pg_temp.txns(queen.pop('gq', 'p1', 'gt', auto_ack => true)) AS after_end_push;

-- To a timestamp: the next pop starts right after the last message at or before it.
SELECT queen.seek('ga', 'gq', '{"timestamp":"2020-01-01T01:30:00Z"}') AS to_between;
SELECT * FROM pg_temp.cursor('gq', 'p1', 'ga');
SELECT * FROM pg_temp.cursor('gq', 'p2', 'ga');
SELECT pg_temp.txns(queen.pop('gq', 'p1', 'ga', batch => 2, auto_ack => true)) AS ga_resumes,
       pg_temp.txns(queen.pop('gq', 'p2', 'ga', batch => 5, auto_ack => true)) AS ga_p2_resumes;
-- A segment created exactly at the timestamp counts as at or before it.
SELECT queen.seek('ga', 'gq', '{"timestamp":"2020-01-01T01:00:00.000Z"}')->'partitionsUpdated' AS exact;
SELECT committed FROM pg_temp.cursor('gq', 'p1', 'ga');
-- After everything: the end of the newest segment.
SELECT queen.seek('ga', 'gq', '{"timestamp":"2030-01-01T00:00:00Z"}')->'targetTimestamp' AS after_all;
SELECT committed FROM pg_temp.cursor('gq', 'p1', 'ga');
-- Before everything: the start, so the group replays the partition.
SELECT queen.seek('ga', 'gq', '{"timestamp":"2019-06-01T00:00:00Z"}')->'partitionsUpdated' AS before_all;
SELECT committed FROM pg_temp.cursor('gq', 'p1', 'ga');
SELECT pg_temp.txns(queen.pop('gq', 'p1', 'ga', batch => 3, auto_ack => true)) AS ga_replays;
-- A group with no cursor on the queue: nothing to move (no rows created).
SELECT queen.seek('nobody', 'gq', '{"toEnd":true}')->'partitionsUpdated' AS no_rows,
       (SELECT count(*) FROM queen.log_consumers WHERE consumer_group = 'nobody') AS rows_created;
-- Both given: toEnd wins.
SELECT queen.seek('gn', 'gq', '{"toEnd":true,"timestamp":"2019-01-01"}') AS both_given;
-- Tenant B's ga did not move with the default tenant's.
SELECT committed FROM pg_temp.cursor('gq', 'p1', 'ga', :'t_b');

-- Retention moved log_start past p1's first segment of queue rq: before
-- everything is log_start - 1, and a timestamp inside the gap too.
SELECT pg_temp.push('rq', 0, 1, 'Default', 'r'), pg_temp.push('rq', 2, 3, 'Default', 'r'),
       pg_temp.push('rq', 4, 5, 'Default', 'r');
SELECT pg_temp.stamp('rq', 'Default', 0, '2021-01-01 00:00'), pg_temp.stamp('rq', 'Default', 2, '2021-01-01 01:00'),
       pg_temp.stamp('rq', 'Default', 4, '2021-01-01 02:00');
SELECT pg_temp.txns(queen.pop('rq', consumer_group => 'gr', batch => 1, auto_ack => true)) AS gr_first;
DELETE FROM queen.log_segments s USING queen.log_partitions p, queen.queues q
 WHERE s.partition_id = p.id AND p.queue_id = q.id AND q.name = 'rq' AND s.base_offset = 0;
UPDATE queen.log_partitions p SET log_start = 2 FROM queen.queues q WHERE p.queue_id = q.id AND q.name = 'rq';
SELECT (queen.consumer_group('gr')->'rq'->'partitions'->0) - 'timeLagSeconds' AS gr_after_retention;
SELECT queen.seek('gr', 'rq', '{"timestamp":"2020-01-01T00:00:00Z"}')->'partitionsUpdated' AS before_all;
SELECT committed FROM pg_temp.cursor('rq', 'Default', 'gr');
SELECT queen.seek('gr', 'rq', '{"timestamp":"2021-01-01T01:30:00Z"}')->'partitionsUpdated' AS mid;
SELECT committed FROM pg_temp.cursor('rq', 'Default', 'gr');
SELECT pg_temp.txns(queen.pop('rq', consumer_group => 'gr', auto_ack => true)) AS gr_resumes;
SELECT queen.seek('gr', 'rq', '{"timestamp":"2020-01-01T00:00:00Z"}')->'partitionsUpdated' AS before_all_again;
SELECT pg_temp.txns(queen.pop('rq', consumer_group => 'gr', auto_ack => true)) AS gr_replays_live;

---------------------------------------------------------------------------
-- POST .../queues/:queue/partitions/:partition/seek
---------------------------------------------------------------------------
SELECT pg_temp.try($$SELECT queen.seek_partition('ga', 'nowhere', 'p1')$$) AS unknown_queue,
       pg_temp.try($$SELECT queen.seek_partition('ga', 'gq', 'p9')$$) AS unknown_partition;
SELECT pg_temp.try($$SELECT queen.seek_partition('ga', 'rq', 'Default', 'bbbbbbbb-0000-4000-8000-00000000000b')$$) AS other_tenant,
       pg_temp.try($$SELECT queen.seek_partition('ga', 'gq', '')$$) AS no_partition;
CREATE TEMP TABLE ga_pop AS SELECT queen.pop('gq', 'p1', 'ga', batch => 2) AS r;
SELECT pg_temp.txns(r) AS ga_leased FROM ga_pop;
SELECT * FROM pg_temp.cursor('gq', 'p1', 'ga');
SELECT queen.seek_partition('ga', 'gq', 'p1') AS seek_partition;
SELECT * FROM pg_temp.cursor('gq', 'p1', 'ga');
SELECT pg_temp.ack_all(r) AS ack_old_lease FROM ga_pop;
SELECT pg_temp.txns(queen.pop('gq', 'p1', 'ga')) AS after_partition_end;
-- No cursor row for this group on the partition: not updated, nothing created.
SELECT queen.seek_partition('nobody', 'gq', 'p1') AS no_cursor;

---------------------------------------------------------------------------
-- DELETE /api/v1/consumer-groups/:group[/queues/:queue]
---------------------------------------------------------------------------
SELECT pg_temp.try($$SELECT queen.delete_consumer_group('ga', 'nowhere')$$) AS unknown_queue,
       pg_temp.try($$SELECT queen.delete_consumer_group('')$$) AS no_group,
       pg_temp.try($$SELECT queen.delete_consumer_group('ga', '')$$) AS empty_queue;
-- One queue, metadata kept: gt starts over per its (updated) subscription: 01:30, so from m6.
SELECT queen.delete_consumer_group('gt', 'gq', false) AS gt_gq;
SELECT count(*) AS gt_cursors, (SELECT count(*) FROM queen.consumer_groups_metadata WHERE consumer_group = 'gt') AS gt_meta
  FROM queen.log_consumers WHERE consumer_group = 'gt';
SELECT pg_temp.txns(queen.pop('gq', 'p1', 'gt', batch => 3, auto_ack => true)) AS gt_starts_over;
-- Every queue, metadata deleted: ga's rows on gq go, tenant B's ga stays;
-- with no subscription left, a pop with mode new starts at the end.
SELECT queen.delete_consumer_group('ga') AS ga_all;
SELECT count(*) AS ga_rows_left, count(*) FILTER (WHERE q.tenant_id = :'t_b') AS of_tenant_b
  FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE c.consumer_group = 'ga';
SELECT m.subscription_mode, CASE m.tenant_id WHEN :'t_def' THEN 'default' ELSE 'b' END AS tenant
  FROM queen.consumer_groups_metadata m WHERE m.consumer_group = 'ga';
SELECT pg_temp.txns(queen.pop('gq', 'p1', 'ga', subscription_mode => 'new')) AS ga_new_after_delete;
SELECT m.subscription_mode AS ga_mode FROM queen.consumer_groups_metadata m JOIN queen.queues q ON q.id = m.queue_id
 WHERE m.consumer_group = 'ga' AND q.tenant_id = :'t_def';
SELECT committed, worker FROM pg_temp.cursor('gq', 'p1', 'ga');
-- Mode all after a delete: from the beginning.
SELECT queen.delete_consumer_group('ga', 'gq') AS ga_gq;
SELECT pg_temp.txns(queen.pop('gq', 'p1', 'ga', batch => 3)) AS ga_all_after_delete;
-- Queue mode is a group like any other; unknown groups delete nothing.
SELECT queen.delete_consumer_group('__QUEUE_MODE__', 'gq')->'deletedPartitions' AS queue_mode;
SELECT pg_temp.txns(queen.pop('gq', 'p1', batch => 2)) AS queue_mode_starts_over;
SELECT queen.delete_consumer_group('nobody') AS nobody;
-- From tenant B only B's rows go.
SELECT queen.delete_consumer_group('ga', tenant => :'t_b') AS b_ga;
SELECT count(*) AS ga_default_rows FROM queen.log_consumers WHERE consumer_group = 'ga';
SELECT e->>'name' AS name, e->>'queueName' AS queue
  FROM jsonb_array_elements(queen.consumer_groups(:'t_b')) e;

---------------------------------------------------------------------------
-- Declarations: every route function is SECURITY DEFINER with a fixed
-- search_path, closed to PUBLIC, and commented.
---------------------------------------------------------------------------
SELECT p.oid::regprocedure AS function, p.prosecdef AS definer, p.proconfig AS config,
       p.proacl IS NOT NULL AND NOT EXISTS (SELECT FROM aclexplode(p.proacl) a WHERE a.grantee = 0) AS closed,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS commented
  FROM pg_proc p
 WHERE p.oid IN ('queen.consumer_groups(uuid)'::regprocedure, 'queen.consumer_groups_lagging(int, uuid)'::regprocedure,
                 'queen.consumer_group(text, uuid)'::regprocedure,
                 'queen.delete_consumer_group(text, text, boolean, uuid)'::regprocedure,
                 'queen.update_subscription(text, jsonb, uuid)'::regprocedure,
                 'queen.seek(text, text, jsonb, uuid)'::regprocedure,
                 'queen.seek_partition(text, text, text, uuid)'::regprocedure)
 ORDER BY p.oid::regprocedure::text COLLATE "C";

DROP EXTENSION queen_streams CASCADE;
