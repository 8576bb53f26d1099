-- queen.configure (POST /api/v1/configure) and queen.delete_queue
-- (DELETE /api/v1/resources/queues/:queue): create vs replace, namespace and
-- task, validation (nothing written on error), every stored option with its
-- observable effect, and a tenant-scoped delete of everything a queue owns.
CREATE EXTENSION queen_streams;

\i test/include/helpers.sql

-- The defaults configure writes for an option left out.
CREATE TEMP TABLE defaults AS SELECT '{"priority":0,"leaseTime":300,"retryLimit":3,
  "retryDelay":1000,"maxSize":0,"ttl":3600,"deadLetterQueue":true,"dlqAfterMaxRetries":true,
  "delayedProcessing":0,"windowBuffer":0,"retentionSeconds":0,"completedRetentionSeconds":0,
  "retentionEnabled":false,"encryptionEnabled":false,"maxWaitTimeSeconds":0,
  "dedupWindowSeconds":3600}'::jsonb AS d;

-- A queue's stored settings, under their wire names.
CREATE FUNCTION pg_temp.stored(queue text, tenant uuid DEFAULT '00000000-0000-0000-0000-000000000001')
RETURNS jsonb LANGUAGE sql AS $$
	SELECT jsonb_build_object('priority', priority, 'leaseTime', lease_time,
	         'retryLimit', retry_limit, 'retryDelay', retry_delay, 'maxSize', max_queue_size,
	         'ttl', ttl, 'maxWaitTimeSeconds', max_wait_time_seconds,
	         'deadLetterQueue', dead_letter_queue,
	         'dlqAfterMaxRetries', dlq_after_max_retries, 'delayedProcessing', delayed_processing,
	         'windowBuffer', window_buffer, 'retentionSeconds', retention_seconds,
	         'completedRetentionSeconds', completed_retention_seconds,
	         'retentionEnabled', retention_enabled, 'encryptionEnabled', encryption_enabled,
	         'dedupWindowSeconds', dedup_window_seconds)
	  FROM queen.queues WHERE name = queue AND tenant_id = tenant
$$;

-- The options of a set that differ from the defaults ({} when none).
CREATE FUNCTION pg_temp.nondefault(o jsonb) RETURNS jsonb LANGUAGE sql AS $$
	SELECT coalesce(jsonb_object_agg(e.key, e.value), '{}')
	  FROM defaults, jsonb_each(o) e WHERE d->e.key IS DISTINCT FROM e.value
$$;

-- A queue's namespace and task as stored.
CREATE FUNCTION pg_temp.ns_task(queue text, tenant uuid) RETURNS text[] LANGUAGE sql AS $$
	SELECT ARRAY[namespace::text, task::text] FROM queen.queues WHERE name = queue AND tenant_id = tenant
$$;

-- One configure call: what it answered (options as far as they differ from
-- the defaults), whether the answer lists every option, and whether the
-- stored row says exactly what the answer says.
CREATE FUNCTION pg_temp.cfg(req jsonb, tenant uuid DEFAULT NULL,
	OUT created boolean, OUT namespace text, OUT task text, OUT options jsonb,
	OUT all_listed boolean, OUT stored_as_answered boolean)
LANGUAGE sql AS $$
	WITH c AS (SELECT queen.configure(req, tenant) AS r)
	SELECT (r->>'created')::boolean, r->>'namespace', r->>'task', pg_temp.nondefault(r->'options'),
	       (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(r->'options') k)
	         = (SELECT array_agg(k ORDER BY k) FROM defaults, jsonb_object_keys(d) k),
	       r->'options' = pg_temp.stored(r->>'queue', coalesce(tenant, '00000000-0000-0000-0000-000000000001'))
	         AND ARRAY[r->>'namespace', r->>'task']
	             = pg_temp.ns_task(r->>'queue', coalesce(tenant, '00000000-0000-0000-0000-000000000001'))
	  FROM c
$$;

CREATE FUNCTION pg_temp.push(q text, a int, b int, part text DEFAULT 'Default', tenant uuid DEFAULT NULL)
RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(r->>'status', ',')
	  FROM jsonb_array_elements(queen.push(jsonb_build_object('items',
	         (SELECT jsonb_agg(jsonb_build_object('queue', q, 'partition', part,
	                   'transactionId', 'm' || i, 'payload', jsonb_build_object('i', i)) ORDER BY i)
	            FROM generate_series(a, b) i)), tenant)) r
$$;
-- The segments of a queue's partition as base-end, oldest first.
CREATE FUNCTION pg_temp.segs(q text, part text DEFAULT 'Default') RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(base_offset || '-' || end_offset, ',' ORDER BY base_offset), '')
	  FROM queen.log_segments WHERE partition_id = pg_temp.pid(q, part)
$$;
CREATE FUNCTION pg_temp.hashes(q text, part text DEFAULT 'Default') RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(base_offset || '-' || end_offset, ',' ORDER BY base_offset), '')
	  FROM queen.log_txns WHERE partition_id = pg_temp.pid(q, part)
$$;
-- Set the age of a queue's segment at `base` (every segment when NULL), and
-- the partition's oldest_live_at to match, as time passing would.
CREATE FUNCTION pg_temp.set_age(q text, age interval, base bigint DEFAULT NULL) RETURNS void LANGUAGE sql AS $$
	UPDATE queen.log_segments SET created_at = now() - age
	 WHERE partition_id = pg_temp.pid(q) AND (base IS NULL OR base_offset = base);
	UPDATE queen.log_partitions p
	   SET oldest_live_at = (SELECT min(created_at) FROM queen.log_segments s WHERE s.partition_id = p.id)
	 WHERE p.id = pg_temp.pid(q);
$$;
-- The cursor of a queue's partition and group.
CREATE FUNCTION pg_temp.cursor(q text, grp text DEFAULT '__QUEUE_MODE__', part text DEFAULT 'Default')
RETURNS TABLE (committed bigint, batch_end bigint, leased boolean, retries int)
LANGUAGE sql AS $$
	SELECT c.committed, c.batch_end, c.worker_id IS NOT NULL, c.batch_retry_count
	  FROM queen.log_consumers c WHERE c.partition_id = pg_temp.pid(q, part) AND c.consumer_group = grp
$$;
CREATE FUNCTION pg_temp.dlq(q text) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(format('%s@%s %s "%s" retries=%s', transaction_id, "offset", payload, error, retry_count),
	                           '; ' ORDER BY "offset"), '(none)')
	  FROM queen.log_dlq WHERE partition_id = pg_temp.pid(q)
$$;

-------------------------------------------------------------------------
-- Create, then replace: the answer lists every option; an option left out
-- takes its default (leaseTime 300), not its previous value.
-------------------------------------------------------------------------
SELECT queen.configure('{"queue":"cfg.orders"}') - '{queueId,partitionId}'::text[] AS first_answer;
SELECT pg_temp.stored('cfg.orders') = (SELECT d FROM defaults) AS stored_defaults;
SELECT * FROM pg_temp.cfg('{"queue":"cfg.orders","options":{"leaseTime":30,"retryLimit":7,
  "retryDelay":250,"deadLetterQueue":false,"dlqAfterMaxRetries":false,"delayedProcessing":5,
  "windowBuffer":6,"retentionSeconds":7200,"completedRetentionSeconds":60,"retentionEnabled":true,
  "encryptionEnabled":true,"dedupWindowSeconds":0}}');
SELECT id AS orders_id FROM queen.queues WHERE name = 'cfg.orders' \gset
SELECT * FROM pg_temp.cfg('{"queue":"cfg.orders","options":{"retryLimit":1}}');
SELECT * FROM pg_temp.cfg('{"queue":"cfg.orders","options":{}}');
SELECT * FROM pg_temp.cfg('{"queue":"cfg.orders"}');
-- Zero is a valid value of every option but leaseTime; null is "left out".
SELECT * FROM pg_temp.cfg('{"queue":"cfg.orders","options":{"retryLimit":0,"retryDelay":0,
  "dedupWindowSeconds":0,"retentionSeconds":0,"completedRetentionSeconds":0,"delayedProcessing":0,
  "windowBuffer":0}}');
SELECT * FROM pg_temp.cfg('{"queue":"cfg.orders","options":{"leaseTime":null,"deadLetterQueue":null}}');
-- A replace keeps the queue (same id) and everything in it.
SELECT pg_temp.push('cfg.orders', 0, 1);
SELECT * FROM pg_temp.cfg('{"queue":"cfg.orders","options":{"leaseTime":99}}');
SELECT id = :'orders_id' AS same_queue, pg_temp.segs('cfg.orders') AS segments
  FROM queen.queues WHERE name = 'cfg.orders';
-- A queue that a push auto-created (leasing at 60, the column default) is
-- replaced like any other.
SELECT pg_temp.push('cfg_auto', 0, 0);
SELECT lease_time AS auto_created_lease_time FROM queen.queues WHERE name = 'cfg_auto';
SELECT * FROM pg_temp.cfg('{"queue":"cfg_auto"}');
-- retryDelay is stored and answered (its effect has tests of its own).
SELECT * FROM pg_temp.cfg('{"queue":"cfg_auto","options":{"retryDelay":2500}}');
SELECT retry_delay FROM queen.queues WHERE name = 'cfg_auto';
SELECT * FROM pg_temp.cfg('{"queue":"cfg_auto"}');
SELECT retry_delay FROM queen.queues WHERE name = 'cfg_auto';

-------------------------------------------------------------------------
-- namespace and task: as Queen's configure, what was given, and '' for
-- anything that is not a string (left out and null included); a replace
-- wipes them when left out, even for a queue a push named with dots.
-------------------------------------------------------------------------
SELECT q AS queue, c.namespace, c.task
  FROM (VALUES ('{"queue":"cfg_plain"}'::jsonb), ('{"queue":"billing.invoices"}'),
               ('{"queue":"a.b.c"}'), ('{"queue":".lead"}'), ('{"queue":"trail."}'),
               ('{"queue":"given","namespace":"ns","task":"tk"}'),
               ('{"queue":"half.given","namespace":"ns"}'),
               ('{"queue":"other.half","task":"tk"}'),
               ('{"queue":"empty.given","namespace":"","task":""}'),
               ('{"queue":"null.given","namespace":null,"task":5}')) v(q),
       LATERAL pg_temp.cfg(q) c;
SELECT * FROM pg_temp.cfg('{"queue":"given"}');
SELECT * FROM pg_temp.cfg('{"queue":"billing.invoices","namespace":"billing2","task":"inv"}');

-------------------------------------------------------------------------
-- Per tenant: the same name under tenant B is another queue; configuring
-- one never touches the other.
-------------------------------------------------------------------------
SELECT * FROM pg_temp.cfg('{"queue":"cfg.orders","options":{"leaseTime":11}}', :'t_b');
SELECT CASE tenant_id WHEN :'t_def' THEN 'default' ELSE 'b' END AS tenant, lease_time
  FROM queen.queues WHERE name = 'cfg.orders' ORDER BY 1 DESC;
SELECT * FROM pg_temp.cfg('{"queue":"cfg.orders","options":{"leaseTime":12}}');
SELECT CASE tenant_id WHEN :'t_def' THEN 'default' ELSE 'b' END AS tenant, lease_time
  FROM queen.queues WHERE name = 'cfg.orders' ORDER BY 1 DESC;

-------------------------------------------------------------------------
-- Validation: 22023 (HTTP 400) naming the field, and nothing written.
-------------------------------------------------------------------------
CREATE TEMP TABLE before AS SELECT name, tenant_id, namespace, task, pg_temp.stored(name, tenant_id) AS o
  FROM queen.queues;
SELECT pg_temp.try(format('SELECT queen.configure(%L)', r)) AS error,
       CASE WHEN length(r::text) > 80 THEN left(r::text, 40) || '...' ELSE r::text END AS request
  FROM (VALUES
    ('{"queue":"cfg_new","options":{"leaseTime":30,"retryLimit":-1}}'::jsonb),
    ('{"queue":"cfg.orders","options":{"leaseTime":"30s"}}'),
    ('{"queue":"cfg.orders","options":{"leaseTime":""}}'),
    ('{"queue":"cfg.orders","options":{"maxSize":1.5}}'),
    ('{"queue":"cfg.orders","options":{"leaseTime":30.5}}'),
    ('{"queue":"cfg.orders","options":{"leaseTime":true}}'),
    ('{"queue":"cfg.orders","options":{"leaseTime":[30]}}'),
    ('{"queue":"cfg.orders","options":{"retryLimit":{}}}'),
    ('{"queue":"cfg.orders","options":{"deadLetterQueue":1}}'),
    ('{"queue":"cfg.orders","options":{"encryptionEnabled":"maybe"}}'),
    ('{"queue":"cfg.orders","options":{"retentionEnabled":0}}'),
    ('{"queue":"cfg.orders","options":{"leaseTime":2147483648}}'),
    ('{"queue":"cfg.orders","options":[]}'),
    ('{"queue":"cfg.orders","options":"leaseTime=30"}'),
    ('{"queue":5}'),
    ('{"queue":""}'),
    ('{"options":{"leaseTime":30}}'),
    (jsonb_build_object('queue', repeat('q', 256))),
    ('{"queue":"orders/eu"}'),
    ('{"queue":".."}'),
    ('[]'),
    ('"cfg.orders"')) v(r);
SELECT pg_temp.try($$SELECT queen.configure(NULL)$$) AS null_body;
-- Every integer option refuses a negative number.
SELECT k AS option, pg_temp.try(format('SELECT queen.configure(%L)',
         jsonb_build_object('queue', 'cfg.orders', 'options', jsonb_build_object('leaseTime', 30, k, -1)))) AS error
  FROM defaults, jsonb_each(d) e(k, v) WHERE jsonb_typeof(v) = 'number' AND k <> 'priority' ORDER BY k;
-- A name of 255 bytes is accepted (256 are refused above).
SELECT (pg_temp.cfg(jsonb_build_object('queue', repeat('q', 255)))).created AS name_255_bytes;
DELETE FROM queen.queues WHERE name = repeat('q', 255);
-- Nothing was created or changed by any of them.
SELECT count(*) AS changed_or_new
  FROM (SELECT name, tenant_id, namespace, task, pg_temp.stored(name, tenant_id) AS o FROM queen.queues
        EXCEPT SELECT * FROM before) x;
SELECT count(*) AS gone FROM (SELECT * FROM before EXCEPT
  SELECT name, tenant_id, namespace, task, pg_temp.stored(name, tenant_id) FROM queen.queues) x;

-------------------------------------------------------------------------
-- What Queen's clients send is accepted: the JS client's defaults (maxSize,
-- priority included), names Queen does not know (dropped, but listed under
-- "ignored", in jsonb key order), integers as digit strings, booleans as
-- PostgreSQL literals, a negative priority, leaseTime 0 (pop then leases for
-- 60, tested with leaseTime below), a null namespace and task.
-------------------------------------------------------------------------
SELECT r->'ignored' AS ignored, pg_temp.nondefault(r->'options') AS options, r->>'configured' AS configured
  FROM (VALUES
    ('{"queue":"cfg_js","namespace":null,"task":null,"options":{"leaseTime":300,"retryLimit":3,
       "priority":0,"delayedProcessing":0,"windowBuffer":0,"maxSize":0,"retentionSeconds":0,
       "completedRetentionSeconds":0,"encryptionEnabled":false}}'::jsonb),
    ('{"queue":"cfg_js","options":{"leaseTim":30,"bogus":{"x":1},"ttl":5,"priority":-2}}'),
    ('{"queue":"cfg_js","options":{"leaseTime":"30","maxSize":"1000","encryptionEnabled":"yes",
       "retentionEnabled":"t","dlqAfterMaxRetries":"off"}}'),
    ('{"queue":"cfg_js","options":{"leaseTime":0,"maxWaitTimeSeconds":120,"retryDelay":null}}'),
    ('{"queue":"cfg_js","options":null,"extra":"dropped"}')) v(q),
    LATERAL (SELECT queen.configure(q) AS r) c;
SELECT pg_temp.stored('cfg_js') = (SELECT d FROM defaults) AS last_replace_is_defaults;
SELECT r ?& ARRAY['configured', 'queueId', 'partitionId', 'queue', 'namespace', 'task', 'storage',
                  'options', 'ignored'] AS queen_shape,
       r->>'partitionId' = pg_temp.pid('cfg_js')::text AS partition_is_default,
       r->>'queueId' = (SELECT id::text FROM queen.queues WHERE name = 'cfg_js') AS queue_id
  FROM (SELECT queen.configure('{"queue":"cfg_js"}') AS r) c;
DELETE FROM queen.queues WHERE name = 'cfg_js';

-------------------------------------------------------------------------
-- leaseTime: a pop without lease_seconds leases for that long; lease_seconds
-- overrides it; a push-created queue leases for 60.
-------------------------------------------------------------------------
SELECT (pg_temp.cfg('{"queue":"cfg_lease","options":{"leaseTime":45,"retryDelay":0}}')).options;
SELECT pg_temp.push('cfg_lease', 0, 2);
CREATE FUNCTION pg_temp.lease_len(q text) RETURNS numeric LANGUAGE sql AS $$
	SELECT round(extract(epoch FROM c.lease_expires_at - c.lease_acquired_at))
	  FROM queen.log_consumers c WHERE c.partition_id = pg_temp.pid(q) AND c.worker_id IS NOT NULL
$$;
SELECT pg_temp.txns(queen.pop('cfg_lease', batch => 1)) AS popped, pg_temp.lease_len('cfg_lease') AS lease_seconds;
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second' WHERE partition_id = pg_temp.pid('cfg_lease');
SELECT pg_temp.txns(queen.pop('cfg_lease', batch => 1, lease_seconds => 7)) AS popped, pg_temp.lease_len('cfg_lease') AS lease_seconds;
-- leaseTime 0 (Queen's "no lease time") leases for 60.
SELECT (pg_temp.cfg('{"queue":"cfg_l0","options":{"leaseTime":0}}')).options;
SELECT pg_temp.push('cfg_l0', 0, 0);
SELECT pg_temp.txns(queen.pop('cfg_l0', batch => 1)) AS popped, pg_temp.lease_len('cfg_l0') AS lease_seconds;
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second' WHERE partition_id = pg_temp.pid('cfg_lease');
SELECT (pg_temp.cfg('{"queue":"cfg_lease","options":{"retryDelay":0}}')).options;
SELECT pg_temp.txns(queen.pop('cfg_lease', batch => 1)) AS popped, pg_temp.lease_len('cfg_lease') AS lease_seconds;
SELECT pg_temp.push('cfg_lease_auto', 0, 0);
SELECT pg_temp.txns(queen.pop('cfg_lease_auto', batch => 1)) AS popped, pg_temp.lease_len('cfg_lease_auto') AS lease_seconds;

-------------------------------------------------------------------------
-- retryLimit, deadLetterQueue, dlqAfterMaxRetries: a failed ack redelivers
-- while the budget lasts (retryLimit failures), the next one dead-letters
-- (when either DLQ flag is on) or drops the message (both off). retryDelay 0
-- here, so each redelivery is immediate.
-------------------------------------------------------------------------
-- `times` rounds of: pop one message, ack it with `status`; what happened
-- and where the cursor is after each.
CREATE FUNCTION pg_temp.fail(q text, times int, status text DEFAULT 'failed')
RETURNS TABLE (attempt int, popped text, success boolean, released boolean, dlq boolean,
               committed bigint, retries int)
LANGUAGE plpgsql AS $$
DECLARE
	p jsonb;
	a jsonb;
BEGIN
	FOR i IN 1 .. times LOOP
		p := queen.pop(q, batch => 1);
		a := queen.ack(jsonb_build_object('transactionId', p->'messages'->0->>'transactionId',
		                                  'partitionId', p->>'partitionId', 'leaseId', p->>'leaseId',
		                                  'status', status));
		RETURN QUERY
			SELECT i, pg_temp.txns(p), (a->0->>'success')::boolean, (a->0->>'leaseReleased')::boolean,
			       (a->0->>'dlq')::boolean, c.committed, c.retries
			  FROM pg_temp.cursor(q) c;
	END LOOP;
END $$;
SELECT (pg_temp.cfg('{"queue":"cfg_retry","options":{"retryLimit":2,"retryDelay":0}}')).options;
SELECT pg_temp.push('cfg_retry', 0, 1);
SELECT * FROM pg_temp.fail('cfg_retry', 4);
SELECT pg_temp.dlq('cfg_retry');
-- retryLimit 0: the first failure is final.
SELECT (pg_temp.cfg('{"queue":"cfg_retry0","options":{"retryLimit":0,"retryDelay":0}}')).options;
SELECT pg_temp.push('cfg_retry0', 0, 1);
SELECT * FROM pg_temp.fail('cfg_retry0', 2);
SELECT pg_temp.dlq('cfg_retry0');
-- Either DLQ flag dead-letters; both off drop the message (no DLQ row, not
-- redelivered); an explicit dlq status dead-letters regardless.
SELECT (pg_temp.cfg('{"queue":"cfg_dlq_1","options":{"retryLimit":1,"retryDelay":0,
  "deadLetterQueue":true,"dlqAfterMaxRetries":false}}')).options;
SELECT (pg_temp.cfg('{"queue":"cfg_dlq_2","options":{"retryLimit":1,"retryDelay":0,
  "deadLetterQueue":false,"dlqAfterMaxRetries":true}}')).options;
SELECT (pg_temp.cfg('{"queue":"cfg_dlq_3","options":{"retryLimit":1,"retryDelay":0,
  "deadLetterQueue":false,"dlqAfterMaxRetries":false}}')).options;
SELECT pg_temp.push('cfg_dlq_1', 0, 2), pg_temp.push('cfg_dlq_2', 0, 2), pg_temp.push('cfg_dlq_3', 0, 2);
SELECT * FROM pg_temp.fail('cfg_dlq_1', 3);
SELECT pg_temp.dlq('cfg_dlq_1');
SELECT * FROM pg_temp.fail('cfg_dlq_2', 3);
SELECT pg_temp.dlq('cfg_dlq_2');
SELECT * FROM pg_temp.fail('cfg_dlq_3', 3);
SELECT pg_temp.dlq('cfg_dlq_3');
SELECT * FROM pg_temp.fail('cfg_dlq_3', 1, 'dlq');
SELECT pg_temp.dlq('cfg_dlq_3');
SELECT pg_temp.txns(queen.pop('cfg_dlq_3')) AS rest;

-------------------------------------------------------------------------
-- delayedProcessing: pops do not see segments younger than N seconds.
-------------------------------------------------------------------------
SELECT (pg_temp.cfg('{"queue":"cfg_delay","options":{"delayedProcessing":60}}')).options;
SELECT pg_temp.push('cfg_delay', 0, 1), pg_temp.push('cfg_delay', 2, 3);
SELECT r->'partitionsClaimed' AS claimed, pg_temp.txns(r) AS young FROM queen.pop('cfg_delay') r;
SELECT * FROM pg_temp.cursor('cfg_delay');
-- The first segment 40 s old: still hidden; 70 s old: visible, the second not.
SELECT pg_temp.set_age('cfg_delay', interval '40 seconds', 0);
SELECT pg_temp.txns(queen.pop('cfg_delay')) AS at_40s;
SELECT pg_temp.set_age('cfg_delay', interval '70 seconds', 0);
SELECT pg_temp.txns(queen.pop('cfg_delay', auto_ack => true)) AS at_70s;
SELECT pg_temp.txns(queen.pop('cfg_delay', auto_ack => true)) AS second_still_young;
-- A consumer group is held back the same way, and a named partition.
SELECT pg_temp.txns(queen.pop('cfg_delay', consumer_group => 'g', auto_ack => true)) AS group_pop;
SELECT pg_temp.txns(queen.pop('cfg_delay', consumer_group => 'g', auto_ack => true)) AS group_pop_again;
SELECT pg_temp.txns(queen.pop('cfg_delay', 'Default', consumer_group => 'h')) AS named_partition;
-- Replaced without delayedProcessing (0): everything is visible at once.
SELECT (pg_temp.cfg('{"queue":"cfg_delay"}')).options;
SELECT pg_temp.txns(queen.pop('cfg_delay', auto_ack => true)) AS no_delay;
SELECT pg_temp.push('cfg_delay', 4, 4);
SELECT pg_temp.txns(queen.pop('cfg_delay', auto_ack => true)) AS fresh_no_delay;

-------------------------------------------------------------------------
-- windowBuffer: a pop returns nothing while the partition's newest segment
-- is younger than N seconds, then everything at once.
-------------------------------------------------------------------------
SELECT (pg_temp.cfg('{"queue":"cfg_window","options":{"windowBuffer":30}}')).options;
SELECT pg_temp.push('cfg_window', 0, 1), pg_temp.push('cfg_window', 2, 3);
SELECT pg_temp.txns(queen.pop('cfg_window')) AS all_young;
-- The older segment quiet long enough, the newest 10 s old: still nothing.
SELECT pg_temp.set_age('cfg_window', interval '1 minute', 0);
SELECT pg_temp.set_age('cfg_window', interval '10 seconds', 2);
SELECT pg_temp.txns(queen.pop('cfg_window')) AS newest_young;
SELECT pg_temp.txns(queen.pop('cfg_window', 'Default')) AS newest_young_named;
SELECT pg_temp.set_age('cfg_window', interval '31 seconds', 2);
SELECT pg_temp.txns(queen.pop('cfg_window', auto_ack => true)) AS quiet;
-- A new push starts the wait again.
SELECT pg_temp.push('cfg_window', 4, 4);
SELECT pg_temp.txns(queen.pop('cfg_window', auto_ack => true)) AS debounced;
SELECT (pg_temp.cfg('{"queue":"cfg_window"}')).options;
SELECT pg_temp.txns(queen.pop('cfg_window', auto_ack => true)) AS no_buffer;

-------------------------------------------------------------------------
-- retentionSeconds + retentionEnabled: queen.retention_sweep() deletes whole
-- segments older than retentionSeconds, only when retention is enabled.
-------------------------------------------------------------------------
SELECT (pg_temp.cfg('{"queue":"cfg_ret","options":{"retentionSeconds":3600,"retentionEnabled":true}}')).options;
SELECT pg_temp.push('cfg_ret', 0, 1), pg_temp.push('cfg_ret', 2, 3), pg_temp.push('cfg_ret', 4, 5);
-- Ages: 3 hours, 50 minutes, fresh.
SELECT pg_temp.set_age('cfg_ret', interval '3 hours', 0), pg_temp.set_age('cfg_ret', interval '50 minutes', 2);
SELECT queen.retention_sweep();
SELECT pg_temp.segs('cfg_ret'), (SELECT log_start FROM queen.log_partitions WHERE id = pg_temp.pid('cfg_ret'));
-- Retention off (left out on a replace): the second segment, now 110
-- minutes old, stays.
SELECT (pg_temp.cfg('{"queue":"cfg_ret","options":{"retentionSeconds":3600}}')).options;
SELECT pg_temp.set_age('cfg_ret', interval '110 minutes', 2);
SELECT queen.retention_sweep();
SELECT pg_temp.segs('cfg_ret');
-- Enabled with no retentionSeconds (0): nothing expires either.
SELECT (pg_temp.cfg('{"queue":"cfg_ret","options":{"retentionEnabled":true}}')).options;
SELECT queen.retention_sweep();
SELECT pg_temp.segs('cfg_ret');
-- Enabled, 2 hours: the 110-minute segment stays; at 130 minutes it goes.
SELECT (pg_temp.cfg('{"queue":"cfg_ret","options":{"retentionSeconds":7200,"retentionEnabled":true}}')).options;
SELECT queen.retention_sweep();
SELECT pg_temp.segs('cfg_ret');
SELECT pg_temp.set_age('cfg_ret', interval '130 minutes', 2);
SELECT queen.retention_sweep();
SELECT pg_temp.segs('cfg_ret'), (SELECT log_start FROM queen.log_partitions WHERE id = pg_temp.pid('cfg_ret'));
SELECT pg_temp.txns(queen.pop('cfg_ret', auto_ack => true)) AS left_to_read;

-------------------------------------------------------------------------
-- completedRetentionSeconds: how long hash rows outlive consumption. The
-- sweep purges consumed hash rows older than the largest of the dedup
-- window, completedRetentionSeconds and 15 minutes.
-------------------------------------------------------------------------
SELECT (pg_temp.cfg('{"queue":"cfg_done_0","options":{"dedupWindowSeconds":0}}')).options;
SELECT (pg_temp.cfg('{"queue":"cfg_done_7200","options":{"dedupWindowSeconds":0,"completedRetentionSeconds":7200}}')).options;
SELECT pg_temp.push('cfg_done_0', 0, 1), pg_temp.push('cfg_done_0', 2, 3);
SELECT pg_temp.push('cfg_done_7200', 0, 1), pg_temp.push('cfg_done_7200', 2, 3);
SELECT pg_temp.txns(queen.pop('cfg_done_0', batch => 2, auto_ack => true)) AS consumed;
SELECT pg_temp.txns(queen.pop('cfg_done_7200', batch => 2, auto_ack => true)) AS consumed;
CREATE FUNCTION pg_temp.age_hashes(q text, age interval) RETURNS void LANGUAGE sql AS $$
	UPDATE queen.log_txns SET created_at = now() - age WHERE partition_id = pg_temp.pid(q);
	UPDATE queen.log_partitions SET oldest_txn_at = now() - age WHERE id = pg_temp.pid(q);
$$;
-- An hour old: the consumed row goes with 0 (past 15 minutes), stays with
-- 7200; the unconsumed row stays either way.
SELECT pg_temp.age_hashes('cfg_done_0', interval '1 hour'), pg_temp.age_hashes('cfg_done_7200', interval '1 hour');
SELECT queen.retention_sweep() ->> 'txnsPurged' AS purged;
SELECT pg_temp.hashes('cfg_done_0') AS done_0, pg_temp.hashes('cfg_done_7200') AS done_7200;
-- Past two hours the consumed row of cfg_done_7200 goes too.
SELECT pg_temp.age_hashes('cfg_done_7200', interval '121 minutes');
SELECT queen.retention_sweep() ->> 'txnsPurged' AS purged;
SELECT pg_temp.hashes('cfg_done_0') AS done_0, pg_temp.hashes('cfg_done_7200') AS done_7200;

-------------------------------------------------------------------------
-- dedupWindowSeconds: a repeated transactionId is a duplicate within the
-- window (default an hour); 0 disables the check. (Time really passes here:
-- the probe may answer from a per-backend cache, so aging the hash rows by
-- UPDATE would not be time passing.)
-------------------------------------------------------------------------
SELECT (pg_temp.cfg('{"queue":"cfg_dedup_0","options":{"dedupWindowSeconds":0}}')).options;
SELECT (pg_temp.cfg('{"queue":"cfg_dedup_1","options":{"dedupWindowSeconds":1}}')).options;
SELECT (pg_temp.cfg('{"queue":"cfg_dedup_default"}')).options;
-- m0, m1, then m1 and m2 again at once.
SELECT q, pg_temp.push(q, 0, 1) AS first, pg_temp.push(q, 1, 2) AS again
  FROM unnest(ARRAY['cfg_dedup_0', 'cfg_dedup_1', 'cfg_dedup_default']) q;
SELECT pg_temp.segs('cfg_dedup_0') AS d0, pg_temp.segs('cfg_dedup_1') AS d1,
       pg_temp.segs('cfg_dedup_default') AS ddefault;
-- Past one second: no longer a duplicate there, still one within the hour.
SELECT pg_sleep(1.1);
SELECT pg_temp.push('cfg_dedup_1', 2, 2) AS d1, pg_temp.push('cfg_dedup_default', 2, 2) AS ddefault;
-- A window set on a replace applies to the next push.
SELECT (pg_temp.cfg('{"queue":"cfg_dedup_0"}')).options;
SELECT pg_temp.push('cfg_dedup_0', 2, 2) AS d0;

-------------------------------------------------------------------------
-- encryptionEnabled: payloads stored as {encrypted, iv, authTag} envelopes
-- with the ENCRYPTED flag (4), no plaintext in the decompressed segment; pop
-- decrypts. Another key: served as stored, with a WARNING.
-------------------------------------------------------------------------
SET queen_streams.encryption_key = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SELECT (pg_temp.cfg('{"queue":"cfg_enc","options":{"encryptionEnabled":true}}')).options;
SELECT jsonb_array_length(queen.push('{"items":[{"queue":"cfg_enc","transactionId":"e1","payload":{"secret":"plain-marker-1"}},
  {"queue":"cfg_enc","transactionId":"e2","payload":"plain-marker-2"}]}')) AS pushed;
CREATE FUNCTION pg_temp.frames(q text)
RETURNS TABLE (base bigint, txn text, flags int, stored text, plaintext_in_segment boolean)
LANGUAGE sql AS $$
	SELECT s.base_offset, f.transaction_id, f.flags,
	       CASE WHEN f.flags & 4 = 4
	            THEN (SELECT string_agg(k || ':' || CASE k WHEN 'encrypted' THEN 'b64' WHEN 'v' THEN f.payload::jsonb->>k
	                                     ELSE length(decode(f.payload::jsonb->>k, 'base64'))::text END, ','
	                                    ORDER BY k)
	                    FROM jsonb_object_keys(f.payload::jsonb) k)
	            ELSE f.payload END,
	       position('plain-marker'::bytea IN queen.segment_decompress(s.blob)) > 0
	  FROM queen.log_segments s, queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
	 WHERE s.partition_id = pg_temp.pid(q) ORDER BY s.base_offset, f.idx
$$;
SELECT * FROM pg_temp.frames('cfg_enc');
SELECT m->>'transactionId' AS txn, m->'data' AS data
  FROM jsonb_array_elements((queen.pop('cfg_enc', batch => 10))->'messages') m;
-- Another key: the envelope is served as stored, with a WARNING.
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second' WHERE partition_id = pg_temp.pid('cfg_enc');
SET queen_streams.encryption_key = 'ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff';
SELECT m->>'transactionId' AS txn, (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(m->'data') k) AS data_keys
  FROM jsonb_array_elements((queen.pop('cfg_enc', batch => 1))->'messages') m;
-- No key at all: the push is refused and nothing is stored (fails closed) ...
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second' WHERE partition_id = pg_temp.pid('cfg_enc');
SET queen_streams.encryption_key = '';
SELECT queen.push('{"items":[{"queue":"cfg_enc","transactionId":"e3","payload":{"secret":"plain-marker-3"}}]}')->0->>'status' AS status;
SET queen_streams.encryption_key = 'not hex';
SELECT queen.push('{"items":[{"queue":"cfg_enc","transactionId":"e3","payload":{"secret":"plain-marker-3"}}]}')->0->>'status' AS status;
SELECT count(*) AS segments FROM queen.log_segments WHERE partition_id = pg_temp.pid('cfg_enc');
-- ... unless queen_streams.encryption_fail_open (Queen's behaviour): plaintext, with a WARNING.
SET queen_streams.encryption_key = '';
SET queen_streams.encryption_fail_open = on;
SELECT queen.push('{"items":[{"queue":"cfg_enc","transactionId":"e3","payload":{"secret":"plain-marker-3"}}]}')->0->>'status' AS status;
RESET queen_streams.encryption_fail_open;
-- Encryption off again (left out on a replace): plaintext from then on;
-- older envelopes still decrypt with the right key.
SET queen_streams.encryption_key = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SELECT (pg_temp.cfg('{"queue":"cfg_enc"}')).options;
SELECT queen.push('{"items":[{"queue":"cfg_enc","transactionId":"e4","payload":{"secret":"plain-marker-4"}}]}')->0->>'status' AS status;
SELECT * FROM pg_temp.frames('cfg_enc');
SELECT m->>'transactionId' AS txn, m->'data' AS data
  FROM jsonb_array_elements((queen.pop('cfg_enc', batch => 10, auto_ack => true))->'messages') m;
-- Pop decrypts only frames flagged ENCRYPTED: an envelope pushed as the
-- plaintext payload of a queue without encryption is served as pushed.
SELECT (pg_temp.cfg('{"queue":"cfg_plain_env"}')).options->'encryptionEnabled' AS enc;
SELECT queen.push(jsonb_build_object('items', jsonb_build_array(jsonb_build_object('queue', 'cfg_plain_env',
         'transactionId', 'pe1', 'payload', f.payload::jsonb))))->0->>'status' AS status
  FROM queen.log_segments s, queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
 WHERE s.partition_id = pg_temp.pid('cfg_enc') AND f.transaction_id = 'e1';
SELECT f.flags, (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(m->'data') k) AS served_keys,
       m->'data' ? 'secret' AS decrypted
  FROM jsonb_array_elements((queen.pop('cfg_plain_env', batch => 10, auto_ack => true))->'messages') m,
       queen.log_segments s, queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
 WHERE s.partition_id = pg_temp.pid('cfg_plain_env');
RESET queen_streams.encryption_key;

-------------------------------------------------------------------------
-- delete_queue: the queue with its partitions, segments, hashes, cursors,
-- subscriptions, dead letters and stream state, under the tenant only.
-------------------------------------------------------------------------
-- The same fixture for cfg_del (default tenant and tenant B) and cfg_keep:
-- two partitions, a consumer group cursor, a queue-mode lease, a dead
-- letter, and stream state on a partition.
CREATE FUNCTION pg_temp.fixture(q text, tenant uuid) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	p jsonb;
	qid uuid;
BEGIN
	PERFORM queen.configure(jsonb_build_object('queue', q, 'options', '{"retryLimit":0,"retryDelay":0}'::jsonb), tenant);
	PERFORM pg_temp.push(q, 0, 2, 'p1', tenant), pg_temp.push(q, 0, 1, 'p2', tenant);
	PERFORM queen.pop(q, consumer_group => 'grp', batch => 10, partitions => 2, tenant => tenant, auto_ack => true);
	p := queen.pop(q, 'p1', batch => 1, tenant => tenant);
	PERFORM queen.ack(jsonb_build_object('transactionId', 'm0', 'partitionId', p->>'partitionId',
	                                     'leaseId', p->>'leaseId', 'status', 'failed'), tenant);
	PERFORM queen.pop(q, 'p1', batch => 1, tenant => tenant);
	qid := (queen_streams.register_query(jsonb_build_object('name', 'del.' || q, 'source_queue', q,
	          'config_hash', 'h'), tenant))->>'query_id';
	RETURN queen_streams.cycle(jsonb_build_object('query_id', qid, 'partition_id', p->>'partitionId',
	          'state_ops', '[{"type":"upsert","key":"k","value":1}]'::jsonb), tenant)->>'success';
END $$;
-- The partition ids of the fixture queues, kept to count rows after a delete.
CREATE TEMP TABLE pids (name text, tid uuid, pid uuid);
-- What each table holds for a (tenant, queue).
CREATE FUNCTION pg_temp.holdings(q text, tenant uuid,
	OUT queues bigint, OUT partitions bigint, OUT segments bigint, OUT hashes bigint,
	OUT cursors bigint, OUT subscriptions bigint, OUT dead_letters bigint, OUT state bigint)
LANGUAGE sql AS $$
	WITH qq AS (SELECT id FROM queen.queues WHERE name = q AND tenant_id = tenant),
	     p AS (SELECT id FROM queen.log_partitions WHERE queue_id IN (SELECT id FROM qq)),
	     -- rows whose partition is gone are counted through the partition ids kept before
	     k AS (SELECT pid FROM pids WHERE name = q AND tid = tenant)
	SELECT (SELECT count(*) FROM qq), (SELECT count(*) FROM p),
	       (SELECT count(*) FROM queen.log_segments WHERE partition_id IN (SELECT pid FROM k)),
	       (SELECT count(*) FROM queen.log_txns WHERE partition_id IN (SELECT pid FROM k)),
	       (SELECT count(*) FROM queen.log_consumers WHERE partition_id IN (SELECT pid FROM k)),
	       (SELECT count(*) FROM queen.consumer_groups_metadata m WHERE m.tenant_id = tenant
	           AND m.queue_id IN (SELECT id FROM qq)),
	       (SELECT count(*) FROM queen.log_dlq WHERE partition_id IN (SELECT pid FROM k)),
	       (SELECT count(*) FROM queen_streams.state WHERE partition_id IN (SELECT pid FROM k))
$$;
-- Tenant B may register stream queries.
INSERT INTO queen_streams.quota (tenant_id) VALUES (:'t_b');
SELECT q, label AS tenant, pg_temp.fixture(q, t::uuid) AS cycled
  FROM (VALUES ('cfg_del', 'default', :'t_def'), ('cfg_del', 'b', :'t_b'), ('cfg_keep', 'default', :'t_def')) v(q, label, t);
INSERT INTO pids
  SELECT q.name, q.tenant_id AS tid, p.id AS pid FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
   WHERE q.name IN ('cfg_del', 'cfg_keep');
CREATE FUNCTION pg_temp.all_holdings() RETURNS TABLE (queue text, tenant text, queues bigint, partitions bigint,
	segments bigint, hashes bigint, cursors bigint, subscriptions bigint, dead_letters bigint, state bigint)
LANGUAGE sql AS $$
	SELECT v.q, CASE v.t WHEN '00000000-0000-0000-0000-000000000001' THEN 'default' ELSE 'b' END, h.*
	  FROM (VALUES ('cfg_del', '00000000-0000-0000-0000-000000000001'::uuid),
	               ('cfg_del', 'bbbbbbbb-0000-4000-8000-00000000000b'), ('cfg_keep', '00000000-0000-0000-0000-000000000001')) v(q, t),
	       LATERAL pg_temp.holdings(v.q, v.t) h
$$;
SELECT * FROM pg_temp.all_holdings();
SELECT queen.delete_queue('cfg_del');
SELECT * FROM pg_temp.all_holdings();
-- The registered queries stay (their state on the deleted partitions is gone).
SELECT name, CASE tenant_id WHEN :'t_def' THEN 'default' ELSE 'b' END AS tenant
  FROM queen_streams.queries WHERE name LIKE 'del.%' ORDER BY 1, 2 DESC;
-- Deleting it again, or a queue that never was: existed false (Queen's answer).
SELECT queen.delete_queue('cfg_del');
SELECT queen.delete_queue('cfg_never');
-- Tenant B's own.
SELECT queen.delete_queue('cfg_del', :'t_b');
SELECT * FROM pg_temp.all_holdings();
-- A push after the delete auto-creates a new queue: offsets from 0, the
-- settings of an auto-created queue (leasing at 60), nothing left over.
SELECT pg_temp.push('cfg_del', 5, 5);
SELECT pg_temp.segs('cfg_del'), pg_temp.nondefault(pg_temp.stored('cfg_del')) AS nondefault_options,
       (SELECT count(*) FROM queen.log_dlq d JOIN pids ON pids.pid = d.partition_id WHERE pids.name = 'cfg_del') AS old_dead_letters;
SELECT pg_temp.try($$SELECT queen.delete_queue(NULL)$$) AS null_queue;
SELECT pg_temp.try($$SELECT queen.delete_queue('')$$) AS empty_queue;

-------------------------------------------------------------------------
-- retryDelay: a failed (budget left) or retry ack releases the batch but
-- keeps it unclaimable that long; 0 redelivers at once. Time is simulated
-- by moving the hold's deadline, never by sleeping.
-------------------------------------------------------------------------
SELECT created, options FROM pg_temp.cfg('{"queue":"cfg_rd","options":{"retryDelay":60000}}');
SELECT pg_temp.push('cfg_rd', 1, 2);
CREATE TEMP TABLE rd_pop AS SELECT queen.pop('cfg_rd', batch => 10) AS r;
SELECT pg_temp.txns(r) AS leased FROM rd_pop;
SELECT a.x->>'success' AS ok, a.x->>'leaseReleased' AS released
  FROM rd_pop, LATERAL jsonb_array_elements(queen.ack(jsonb_build_object(
         'transactionId', 'm1', 'partitionId', rd_pop.r->>'partitionId',
         'leaseId', rd_pop.r->>'leaseId', 'status', 'failed'))) a(x);
SELECT pg_temp.txns(queen.pop('cfg_rd', batch => 10)) AS during_the_hold;
SELECT c.worker_id IS NULL AS no_holder, c.batch_end IS NULL AS no_batch,
       c.lease_expires_at - clock_timestamp() > interval '50 seconds' AS held_about_a_minute,
       c.batch_retry_count AS retries
  FROM queen.log_consumers c WHERE c.partition_id = pg_temp.pid('cfg_rd')::uuid;
-- the old lease is gone: acking with it again is refused
SELECT a.x->>'error' AS late_ack
  FROM rd_pop, LATERAL jsonb_array_elements(queen.ack(jsonb_build_object(
         'transactionId', 'm2', 'partitionId', rd_pop.r->>'partitionId',
         'leaseId', rd_pop.r->>'leaseId'))) a(x);
UPDATE queen.log_consumers SET lease_expires_at = clock_timestamp() - interval '1 millisecond'
 WHERE partition_id = pg_temp.pid('cfg_rd')::uuid;
TRUNCATE rd_pop;
INSERT INTO rd_pop SELECT queen.pop('cfg_rd', batch => 10);
SELECT pg_temp.txns(r) AS after_the_hold FROM rd_pop;
-- retry holds too, and does not charge the budget
SELECT a.x->>'success' AS ok
  FROM rd_pop, LATERAL jsonb_array_elements(queen.ack(jsonb_build_object(
         'transactionId', 'm1', 'partitionId', rd_pop.r->>'partitionId',
         'leaseId', rd_pop.r->>'leaseId', 'status', 'retry'))) a(x);
SELECT pg_temp.txns(queen.pop('cfg_rd', batch => 10)) AS during_retry_hold,
       (SELECT batch_retry_count FROM queen.log_consumers
         WHERE partition_id = pg_temp.pid('cfg_rd')::uuid) AS retries;
-- retryDelay 0: the next pop gets the batch back at once
SELECT created, options FROM pg_temp.cfg('{"queue":"cfg_rd","options":{"retryDelay":0}}');
UPDATE queen.log_consumers SET lease_expires_at = clock_timestamp() - interval '1 millisecond'
 WHERE partition_id = pg_temp.pid('cfg_rd')::uuid;
TRUNCATE rd_pop;
INSERT INTO rd_pop SELECT queen.pop('cfg_rd', batch => 10);
SELECT a.x->>'success' AS ok
  FROM rd_pop, LATERAL jsonb_array_elements(queen.ack(jsonb_build_object(
         'transactionId', 'm1', 'partitionId', rd_pop.r->>'partitionId',
         'leaseId', rd_pop.r->>'leaseId', 'status', 'failed'))) a(x);
SELECT pg_temp.txns(queen.pop('cfg_rd', batch => 10)) AS immediately;

DROP EXTENSION queen_streams CASCADE;
