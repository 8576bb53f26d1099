-- queen.ack: single and batch forms, status normalisation, implicit acks,
-- retry budget, dead letters, stale/no-op reporting, lease and ownership errors.
CREATE EXTENSION queen_streams;

\i test/include/helpers.sql

CREATE FUNCTION pg_temp.push(q text, a int, b int, part text DEFAULT 'Default')
RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(r->>'status', ',')
	  FROM jsonb_array_elements(queen.push(jsonb_build_object('items',
	         (SELECT jsonb_agg(jsonb_build_object('queue', q, 'partition', part,
	                   'transactionId', 'm' || i, 'payload', jsonb_build_object('i', i)) ORDER BY i)
	            FROM generate_series(a, b) i)))) r
$$;
CREATE FUNCTION pg_temp.cursor(q text, part text DEFAULT 'Default', grp text DEFAULT '__QUEUE_MODE__')
RETURNS TABLE (committed bigint, batch_end bigint, leased boolean, retries int,
               attempt_count int, total_consumed bigint)
LANGUAGE sql AS $$
	SELECT c.committed, c.batch_end, c.worker_id IS NOT NULL, c.batch_retry_count,
	       c.attempt_count, c.total_consumed
	  FROM queen.log_consumers c
	 WHERE c.partition_id = pg_temp.pid(q, part)::uuid AND c.consumer_group = grp
$$;
-- The ack results, one line per item, without the echoed fields.
CREATE FUNCTION pg_temp.results(res jsonb)
RETURNS TABLE (idx int, txn text, success boolean, error text, released boolean, dlq boolean, noop boolean)
LANGUAGE sql AS $$
	SELECT (r->>'index')::int, r->>'transactionId', (r->>'success')::boolean, r->>'error',
	       (r->>'leaseReleased')::boolean, (r->>'dlq')::boolean, (r->>'noop')::boolean
	  FROM jsonb_array_elements(res) WITH ORDINALITY AS e(r, n) ORDER BY n
$$;
-- Ack one transaction of the last pop kept in table `last_pop`.
CREATE TEMP TABLE last_pop (r jsonb);
CREATE FUNCTION pg_temp.pop(q text, batch int DEFAULT 10, part text DEFAULT 'Default',
                            grp text DEFAULT NULL) RETURNS text LANGUAGE sql AS $$
	DELETE FROM last_pop;
	INSERT INTO last_pop SELECT queen.pop(q, part, grp, batch);
	SELECT pg_temp.txns(r) FROM last_pop;
$$;
CREATE FUNCTION pg_temp.ack(t text, status text DEFAULT NULL, with_lease boolean DEFAULT true,
                            extra jsonb DEFAULT '{}')
RETURNS TABLE (idx int, txn text, success boolean, error text, released boolean, dlq boolean, noop boolean)
LANGUAGE sql AS $$
	SELECT x.* FROM last_pop,
	       LATERAL pg_temp.results(queen.ack(jsonb_strip_nulls(jsonb_build_object(
	         'transactionId', t, 'partitionId', r->>'partitionId', 'status', status,
	         'consumerGroup', r->>'consumerGroup',
	         'leaseId', CASE WHEN with_lease THEN r->>'leaseId' END)) || extra)) x
$$;
CREATE FUNCTION pg_temp.expire() RETURNS void LANGUAGE sql AS $$
	UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second'
	 WHERE worker_id IS NOT NULL
$$;

-- The single form and its result.
SELECT pg_temp.push('a', 0, 9);
UPDATE queen.queues SET retry_delay = 0 WHERE name = 'a';  -- nacks redeliver at once here
SELECT pg_temp.pop('a', 3);
SELECT array_agg(k ORDER BY k) AS result_keys
  FROM last_pop, jsonb_object_keys(queen.ack(jsonb_build_object('transactionId', 'm0',
         'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId'))->0) k;
SELECT * FROM pg_temp.cursor('a');
-- Acking m2 completes m1 implicitly and, at the batch end, releases the lease.
SELECT * FROM pg_temp.ack('m2', 'success');
SELECT * FROM pg_temp.cursor('a');
-- Below the cursor: the lease is gone, so naming it fails; without a lease
-- a completed ack is a no-op and a signal is reported stale.
SELECT * FROM pg_temp.ack('m1');
SELECT * FROM pg_temp.ack('m1', with_lease => false);
SELECT * FROM pg_temp.ack('m1', 'failed', with_lease => false);
SELECT * FROM pg_temp.ack('m0', 'dlq', with_lease => false);
SELECT * FROM pg_temp.ack('m1', 'retry', with_lease => false);
SELECT * FROM pg_temp.cursor('a');

-- Inside a live lease: unknown ids and ids past the batch are not found;
-- a no-op mixed into a batch is reported as such.
SELECT pg_temp.pop('a', 3);
SELECT * FROM pg_temp.ack('zzz');
SELECT * FROM pg_temp.ack('m9');
SELECT x.* FROM last_pop,
     LATERAL pg_temp.results(queen.ack(jsonb_build_object('acknowledgments', jsonb_build_array(
  jsonb_build_object('transactionId', 'm2', 'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId'),
  jsonb_build_object('transactionId', 'm4', 'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId'),
  jsonb_build_object('transactionId', 'nope', 'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId'))))) x;
SELECT * FROM pg_temp.cursor('a');
SELECT * FROM pg_temp.ack('m5', 'acked');
SELECT * FROM pg_temp.cursor('a');

-- Status normalisation, one fresh single-message queue per status:
-- absent|completed|success|acked|ok => completed, retry, dlq, anything else => failed.
CREATE FUNCTION pg_temp.status_case(st text)
RETURNS TABLE (status text, success boolean, released boolean, dlq boolean,
               committed bigint, retries int, dlq_rows bigint)
LANGUAGE plpgsql AS $$
DECLARE
	q text := 'norm_' || coalesce(nullif(st, ''), '<empty>');
	res jsonb;
BEGIN
	IF st IS NULL THEN q := 'norm_<absent>'; END IF;
	PERFORM pg_temp.push(q, 0, 0);
	PERFORM pg_temp.pop(q, 1);
	SELECT queen.ack(jsonb_strip_nulls(jsonb_build_object('transactionId', 'm0',
	         'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId', 'status', st)))
	  INTO res FROM last_pop;
	RETURN QUERY
	SELECT coalesce(st, '<absent>'), (res->0->>'success')::boolean,
	       (res->0->>'leaseReleased')::boolean, (res->0->>'dlq')::boolean,
	       c.committed, c.retries,
	       (SELECT count(*) FROM queen.log_dlq d WHERE d.partition_id = pg_temp.pid(q)::uuid)
	  FROM pg_temp.cursor(q) c;
END $$;
SELECT s.* FROM unnest(ARRAY[NULL, 'completed', 'success', 'acked', 'ok', 'retry', 'dlq',
                             'failed', 'nack', 'COMPLETED', 'error', '']) WITH ORDINALITY AS u(st, n),
     LATERAL pg_temp.status_case(u.st) s
 ORDER BY u.n;

-- Signals: the lowest failed/dlq/retry position clamps the cursor below it;
-- completed acks above it do not count.
SELECT pg_temp.push('sig', 0, 5);
UPDATE queen.queues SET retry_delay = 0 WHERE name = 'sig';  -- nacks redeliver at once here
SELECT pg_temp.pop('sig', 5);
SELECT x.* FROM last_pop,
     LATERAL pg_temp.results(queen.ack(jsonb_build_object('acknowledgments', jsonb_build_array(
  jsonb_build_object('transactionId', 'm0', 'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId'),
  jsonb_build_object('transactionId', 'm3', 'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId'),
  jsonb_build_object('transactionId', 'm2', 'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId', 'status', 'retry'),
  jsonb_build_object('transactionId', 'm1', 'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId', 'status', 'failed'))))) x;
SELECT * FROM pg_temp.cursor('sig');
-- The rest of the batch is delivered again from the failed one on.
SELECT pg_temp.pop('sig', 5);
-- On a tie at the same position dlq wins over failed and retry.
SELECT x.* FROM last_pop,
     LATERAL pg_temp.results(queen.ack(jsonb_build_object('acknowledgments', jsonb_build_array(
  jsonb_build_object('transactionId', 'm1', 'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId', 'status', 'retry'),
  jsonb_build_object('transactionId', 'm1', 'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId', 'status', 'dlq'),
  jsonb_build_object('transactionId', 'm1', 'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId', 'status', 'failed'))))) x;
SELECT "offset", transaction_id, payload, error, retry_count FROM queen.log_dlq
 WHERE partition_id = pg_temp.pid('sig')::uuid;
SELECT * FROM pg_temp.cursor('sig');

-- Retry budget (queue retry_limit): each failed ack charges it once and
-- redelivers; when it is spent the message goes to the DLQ, decoded, and the
-- cursor moves past it. retry and lease expiry never charge it.
SELECT pg_temp.push('budget', 0, 3);
UPDATE queen.queues SET retry_delay = 0 WHERE name = 'budget';  -- nacks redeliver at once here
UPDATE queen.queues SET retry_limit = 2 WHERE name = 'budget';
SELECT pg_temp.pop('budget', 3);
SELECT * FROM pg_temp.ack('m1', 'failed');
SELECT * FROM pg_temp.cursor('budget');
SELECT pg_temp.pop('budget', 3);
SELECT * FROM pg_temp.ack('m1', 'retry');
SELECT * FROM pg_temp.cursor('budget');
SELECT pg_temp.pop('budget', 3);
SELECT pg_temp.expire();
SELECT pg_temp.pop('budget', 3);
SELECT * FROM pg_temp.cursor('budget');
SELECT * FROM pg_temp.ack('m1', 'failed');
SELECT * FROM pg_temp.cursor('budget');
SELECT pg_temp.pop('budget', 3);
SELECT * FROM pg_temp.ack('m1', 'failed');
SELECT * FROM pg_temp.cursor('budget');
SELECT d.consumer_group, d."offset", d.transaction_id, d.payload, d.error, d.retry_count,
       d.message_id = f.message_id AS message_id_ok
  FROM queen.log_dlq d, queen.log_segments s, queen.segment_frames(s.blob, 4) f
 WHERE d.partition_id = pg_temp.pid('budget')::uuid AND s.partition_id = d.partition_id
   AND f.idx = d."offset";
-- The rest of the batch comes next; completing a batch resets the counter.
SELECT pg_temp.pop('budget', 3);
SELECT * FROM pg_temp.ack('m2', 'failed');
SELECT * FROM pg_temp.cursor('budget');
SELECT pg_temp.pop('budget', 3);
SELECT * FROM pg_temp.ack('m3');
SELECT * FROM pg_temp.cursor('budget');

-- The nack's error reason is kept in the DLQ row; an explicit dlq skips the budget.
SELECT pg_temp.push('reason', 0, 2);
UPDATE queen.queues SET retry_delay = 0 WHERE name = 'reason';  -- nacks redeliver at once here
SELECT pg_temp.pop('reason', 3);
SELECT * FROM pg_temp.ack('m1', 'dlq', extra => '{"error":"bad payload"}');
SELECT "offset", transaction_id, payload, error, retry_count FROM queen.log_dlq
 WHERE partition_id = pg_temp.pid('reason')::uuid;
SELECT * FROM pg_temp.cursor('reason');
SELECT pg_temp.pop('reason', 3);

-- Dead letters disabled: a spent budget drops the message (no DLQ row);
-- an explicit dlq still dead-letters.
SELECT pg_temp.push('nodlq', 0, 3);
UPDATE queen.queues SET retry_delay = 0 WHERE name = 'nodlq';  -- nacks redeliver at once here
UPDATE queen.queues SET retry_limit = 0, dead_letter_queue = false, dlq_after_max_retries = false
 WHERE name = 'nodlq';
SELECT pg_temp.pop('nodlq', 2);
SELECT * FROM pg_temp.ack('m0', 'failed');
SELECT * FROM pg_temp.cursor('nodlq');
SELECT count(*) AS dlq_rows FROM queen.log_dlq WHERE partition_id = pg_temp.pid('nodlq')::uuid;
SELECT pg_temp.pop('nodlq', 2);
SELECT * FROM pg_temp.ack('m1', 'dlq');
SELECT count(*) AS dlq_rows FROM queen.log_dlq WHERE partition_id = pg_temp.pid('nodlq')::uuid;
-- Either flag enables dead letters.
UPDATE queen.queues SET dlq_after_max_retries = true WHERE name = 'nodlq';
SELECT pg_temp.pop('nodlq', 2);
SELECT * FROM pg_temp.ack('m2', 'failed');
SELECT count(*) AS dlq_rows FROM queen.log_dlq WHERE partition_id = pg_temp.pid('nodlq')::uuid;
SELECT * FROM pg_temp.cursor('nodlq');

-- Lease errors: another lease id, or the right one after it expired.
SELECT pg_temp.push('lease', 0, 3);
UPDATE queen.queues SET retry_delay = 0 WHERE name = 'lease';  -- nacks redeliver at once here
SELECT pg_temp.pop('lease', 2);
SELECT * FROM pg_temp.ack('m0', extra => '{"leaseId":"01890a5d-ac96-774b-bcce-b302099a8057"}');
SELECT pg_temp.expire();
SELECT * FROM pg_temp.ack('m0');
SELECT * FROM pg_temp.cursor('lease');
-- Without a lease id the lease is not checked (the cursor still moves).
SELECT * FROM pg_temp.ack('m0', with_lease => false);
SELECT * FROM pg_temp.cursor('lease');
-- A re-claimed batch can only be acked with the new lease.
CREATE TEMP TABLE old_pop AS SELECT r FROM last_pop;
SELECT pg_temp.pop('lease', 2);
SELECT x.* FROM old_pop,
     LATERAL pg_temp.results(queen.ack(jsonb_build_object('transactionId', 'm1',
         'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId'))) x;
SELECT * FROM pg_temp.ack('m2');
SELECT * FROM pg_temp.cursor('lease');

-- Consumer groups: the ack names the group it popped under.
SELECT pg_temp.pop('lease', 2, grp => 'g1');
SELECT x.* FROM last_pop,
     LATERAL pg_temp.results(queen.ack(jsonb_build_object('transactionId', 'm1',
         'partitionId', r->>'partitionId', 'leaseId', r->>'leaseId'))) x;
SELECT x.* FROM last_pop,
     LATERAL pg_temp.results(queen.ack(jsonb_build_object('transactionId', 'm1',
         'partitionId', r->>'partitionId', 'consumerGroup', 'nobody'))) x;
SELECT * FROM pg_temp.ack('m1');
SELECT * FROM pg_temp.cursor('lease', grp => 'g1');
SELECT * FROM pg_temp.cursor('lease');

-- Ownership: a partition of another tenant, or no partition at all.
SELECT pg_temp.pop('lease', 2, grp => 'g1');
SELECT x.* FROM last_pop,
     LATERAL pg_temp.results(queen.ack(jsonb_build_object('transactionId', 'm2',
         'partitionId', r->>'partitionId', 'consumerGroup', 'g1', 'leaseId', r->>'leaseId'),
         '66666666-6666-6666-6666-666666666666')) x;
SELECT * FROM pg_temp.results(queen.ack('{"transactionId":"m2","partitionId":"01890a5d-ac96-774b-bcce-b302099a8057"}'));
SELECT * FROM pg_temp.cursor('lease', grp => 'g1');
-- The other tenant's same-named queue answers its own partition only.
SELECT pg_temp.try($$SELECT queen.push('{"items":[{"queue":"lease","transactionId":"m2"}]}',
                                        '66666666-6666-6666-6666-666666666666')$$);
SELECT x.* FROM (SELECT queen.pop('lease', consumer_group => 'g1', tenant => '66666666-6666-6666-6666-666666666666') AS r) p,
     LATERAL pg_temp.results(queen.ack(jsonb_build_object('transactionId', 'm2',
         'partitionId', r->>'partitionId', 'consumerGroup', 'g1'), '66666666-6666-6666-6666-666666666666')) x;
SELECT * FROM pg_temp.ack('m2');
SELECT * FROM pg_temp.cursor('lease', grp => 'g1');

-- The batch form: one result per item in request order, over several
-- partitions and groups; per-item consumerGroup overrides the batch's.
SELECT pg_temp.push('multi', 0, 2, 'p1'), pg_temp.push('multi', 0, 2, 'p2');
UPDATE queen.queues SET retry_delay = 0 WHERE name = 'multi';  -- nacks redeliver at once here
CREATE TEMP TABLE mp AS
SELECT queen.pop('multi', 'p1', 'grp', 3) AS r1, queen.pop('multi', 'p2', 'grp', 3) AS r2,
       queen.pop('multi', 'p2', NULL, 3) AS r3;
SELECT * FROM pg_temp.results((SELECT queen.ack(jsonb_build_object('consumerGroup', 'grp',
  'acknowledgments', jsonb_build_array(
    jsonb_build_object('transactionId', 'm2', 'partitionId', r2->>'partitionId', 'leaseId', r2->>'leaseId'),
    jsonb_build_object('transactionId', 'm1', 'partitionId', r1->>'partitionId', 'leaseId', r1->>'leaseId'),
    jsonb_build_object('transactionId', 'm0', 'partitionId', r3->>'partitionId', 'leaseId', r3->>'leaseId',
                       'consumerGroup', '__QUEUE_MODE__', 'status', 'failed'),
    jsonb_build_object('transactionId', 'm0', 'partitionId', r1->>'partitionId', 'leaseId', r2->>'leaseId'),
    jsonb_build_object('transactionId', 'm0', 'partitionId', r2->>'partitionId')))) FROM mp));
SELECT p.name, c.consumer_group, c.committed, c.batch_end, c.worker_id IS NOT NULL AS leased,
       c.batch_retry_count AS retries
  FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'multi' ORDER BY 1, 2;
SELECT queen.ack('{"acknowledgments":[]}');

-- Validation: 22023 naming the field; a bad item fails the whole request.
SELECT pg_temp.try($$SELECT queen.ack(NULL)$$);
SELECT pg_temp.try($$SELECT queen.ack('[]')$$);
SELECT pg_temp.try($$SELECT queen.ack('{}')$$);
SELECT pg_temp.try($$SELECT queen.ack('{"transactionId":1,"partitionId":"01890a5d-ac96-774b-bcce-b302099a8057"}')$$);
SELECT pg_temp.try($$SELECT queen.ack('{"transactionId":"m1"}')$$);
SELECT pg_temp.try($$SELECT queen.ack('{"transactionId":"m1","partitionId":"p1"}')$$);
SELECT pg_temp.try($$SELECT queen.ack('{"transactionId":"m1","partitionId":42}')$$);
SELECT pg_temp.try($$SELECT queen.ack('{"transactionId":"m1","partitionId":"01890a5d-ac96-774b-bcce-b302099a8057","status":false}')$$);
SELECT pg_temp.try($$SELECT queen.ack('{"transactionId":"m1","partitionId":"01890a5d-ac96-774b-bcce-b302099a8057","leaseId":7}')$$);
SELECT pg_temp.try($$SELECT queen.ack('{"transactionId":"m1","partitionId":"01890a5d-ac96-774b-bcce-b302099a8057","error":{}}')$$);
SELECT pg_temp.try($$SELECT queen.ack('{"acknowledgments":{}}')$$);
SELECT pg_temp.try($$SELECT queen.ack('{"acknowledgments":["m1"]}')$$);
SELECT pg_temp.try($$SELECT queen.ack('{"consumerGroup":5,"acknowledgments":[]}')$$);
SELECT pg_temp.push('atomic', 0, 1);
UPDATE queen.queues SET retry_delay = 0 WHERE name = 'atomic';  -- nacks redeliver at once here
SELECT pg_temp.pop('atomic', 2);
SELECT pg_temp.try(format($$SELECT queen.ack('{"acknowledgments":[
  {"transactionId":"m1","partitionId":"%s","leaseId":"%s"},
  {"transactionId":"m0","partitionId":"not-a-uuid"}]}')$$, r->>'partitionId', r->>'leaseId')) FROM last_pop;
SELECT * FROM pg_temp.cursor('atomic');

-- Acks without leaseId. Off (the default, Queen's rule): the lease is not
-- checked, so anyone's lease-less ack commits the batch another consumer holds.
SELECT pg_temp.push('lease_less', 0, 5);
SELECT pg_temp.pop('lease_less', 2);
SELECT * FROM pg_temp.ack('m1', with_lease => false);
SELECT * FROM pg_temp.cursor('lease_less');
-- On: refused while a live lease covers the acked message, whatever its status
SET queen_streams.ack_requires_lease = on;
SELECT pg_temp.pop('lease_less', 2);
SELECT * FROM pg_temp.ack('m3', with_lease => false);
SELECT * FROM pg_temp.ack('m2', 'failed', with_lease => false);
SELECT x.* FROM last_pop,
     LATERAL pg_temp.results(queen.ack(jsonb_build_object('acknowledgments', jsonb_build_array(
  jsonb_build_object('transactionId', 'm2', 'partitionId', r->>'partitionId'),
  jsonb_build_object('transactionId', 'm0', 'partitionId', r->>'partitionId'))))) x;
SELECT * FROM pg_temp.cursor('lease_less');
-- naming the lease still works, and below the cursor a lease-less ack is the no-op it was
SELECT * FROM pg_temp.ack('m2');
SELECT * FROM pg_temp.ack('m1', with_lease => false);
-- once the lease has expired nothing covers the message: accepted again
SELECT pg_temp.expire();
SELECT * FROM pg_temp.ack('m3', with_lease => false);
SELECT * FROM pg_temp.cursor('lease_less');
RESET queen_streams.ack_requires_lease;
-- only a superuser sets it
CREATE ROLE ack_nobody;
SET ROLE ack_nobody;
SELECT pg_temp.try($$SET queen_streams.ack_requires_lease = off$$);
RESET ROLE;
DROP ROLE ack_nobody;

DROP EXTENSION queen_streams CASCADE;
