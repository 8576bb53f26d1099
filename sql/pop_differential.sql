-- queen.pop_text against queen.pop over generated histories: 3,000 steps
-- that push (text and jsonb, odd payloads, transaction ids, trace ids and
-- producer subjects, an encrypted queue), pop for real and ack (completed
-- and failed, all of a batch or part of it, now and then with a wrong
-- lease). Before about a third of the steps, the same generated pop runs as
-- queen.pop and as queen.pop_text, each rolled back: both must give the same
-- answer (lease ids aside) or the same error, and leave the same cursors and
-- subscriptions. setseed() fixes the generated steps.
CREATE EXTENSION queen_streams;

\i test/include/pop_both.sql

CREATE FUNCTION pg_temp.pick(a text[]) RETURNS text LANGUAGE sql VOLATILE AS
$$ SELECT a[1 + floor(random() * array_length(a, 1))::int] $$;

SET queen_streams.encryption_key = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SELECT count(queen.configure(c::jsonb)) AS configured FROM unnest(ARRAY[
	'{"queue":"dq","options":{"leaseTime":3600,"retryDelay":0}}',
	'{"queue":"de","options":{"leaseTime":3600,"retryDelay":0,"encryptionEnabled":true}}',
	'{"queue":"dr","options":{"leaseTime":3600,"retryDelay":0,"retryLimit":0,"dlqAfterMaxRetries":true}}',
	'{"queue":"dh","options":{"leaseTime":3600,"retryDelay":0,"delayedProcessing":3600}}']) c;

-- One pushed item: JSON values of every shape as payload, transaction ids
-- with escapes, sometimes a trace id; a few are refused by push.
CREATE FUNCTION pg_temp.item() RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	f text[] := ARRAY['"queue":' || pg_temp.pick(ARRAY['"dq"', '"dq"', '"de"', '"dr"', '"dh"'])];
BEGIN
	IF random() < 0.7 THEN
		f := f || ('"partition":' || pg_temp.pick(ARRAY['"Default"', '"p1"', '"p2"', '"ü 漢"']));
	END IF;
	IF random() < 0.8 THEN
		f := f || ('"transactionId":' || pg_temp.pick(ARRAY['"t' || floor(random() * 400)::int || '"',
			'"t' || floor(random() * 400)::int || '"', '"q\"b\\s"', '"\u0001c\u001f"', '"é😀\u2028"',
			'"tab\t"', '"\/x"', '"' || repeat('z', 200) || floor(random() * 50)::int || '"']));
	END IF;
	IF random() < 0.2 THEN
		f := f || '"traceId":"0190c0de-0000-7000-8000-00000000000a"'::text;
	END IF;
	f := f || ('"payload":' || pg_temp.pick(ARRAY['{"k":1}', '{ "b" : 1,  "a":[1 , 2.50] }', '[]', '{}',
		'1', '-0', '0.5e3', '-0.0e-0', '2E+3', '1e400', '123456789012345678901234567890', 'null', 'true',
		'"s"', '""', '"\u00e9"', '"\ud83d\ude00"', '"tab\tnl\n\r\b\f"', '"\/"', '"é漢字😀"',
		'{"a":1,"a":2}', '{"":""}', '[[[[[]]]]]', '{"x":{"y":[null,false,"\"q\""]}}',
		'"' || repeat('w', 3000) || '"', '"\u0000"', '"\ud800"']));
	RETURN '{' || array_to_string(f, ',') || '}';
END $$;

-- One pop's arguments, as named SQL arguments.
CREATE FUNCTION pg_temp.pop_args() RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	a text := quote_literal(pg_temp.pick(ARRAY['dq', 'dq', 'de', 'dr', 'dr', 'dh', 'nothing']));
BEGIN
	IF random() < 0.4 THEN
		a := a || ', partition => ' || quote_literal(pg_temp.pick(ARRAY['Default', 'p1', 'p2', 'ü 漢', 'nope', '']));
	END IF;
	IF random() < 0.7 THEN
		-- three groups that live long, and fresh ones that meet queues first
		a := a || ', consumer_group => ' || quote_literal(pg_temp.pick(ARRAY['g1', 'g2', 'g3', '', '__QUEUE_MODE__',
			'f' || floor(random() * 100)::int, 'f' || floor(random() * 100)::int, 'f' || floor(random() * 100)::int]));
	END IF;
	a := a || ', batch => ' || pg_temp.pick(ARRAY['1', '2', '3', '5', '10', '200']);
	IF random() < 0.2 THEN
		a := a || ', lease_seconds => ' || pg_temp.pick(ARRAY['3600', '7200', '0']);
	END IF;
	IF random() < 0.3 THEN
		a := a || ', auto_ack => true';
	END IF;
	IF random() < 0.5 THEN
		a := a || ', subscription_mode => ' || quote_literal(pg_temp.pick(ARRAY['new', 'all', 'from_beginning', '']));
	END IF;
	IF random() < 0.3 THEN
		a := a || ', subscription_from => ' || quote_literal(pg_temp.pick(ARRAY['now', '2020-01-01T00:00:00Z',
			'2999-01-01T00:00:00Z', 'garbage', '']));
	END IF;
	IF random() < 0.3 THEN
		a := a || ', partitions => ' || pg_temp.pick(ARRAY['2', '3', '10', '0']);
	END IF;
	RETURN a;
END $$;

-- Ack some of a real pop's messages: all completed, a prefix, the last only,
-- or failed ones (retries, then the dead letter queue on "dr"; no retry
-- delay, which would make a pop depend on the clock); sometimes
-- under another lease.
CREATE FUNCTION pg_temp.ack_some(r jsonb) RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	k float8 := random();
	st text := CASE WHEN random() < 0.5 THEN 'failed' ELSE 'completed' END;
	lease text := CASE WHEN random() < 0.1 THEN '0190c0de-0000-7000-8000-00000000ffff' ELSE r->>'leaseId' END;
	n int := jsonb_array_length(r->'messages');
	keep int := CASE WHEN k < 0.5 THEN n WHEN k < 0.8 THEN 1 + floor(random() * n)::int ELSE 1 END;
BEGIN
	PERFORM queen.ack(jsonb_build_object('consumerGroup', r->>'consumerGroup',
		'acknowledgments', (SELECT jsonb_agg(jsonb_build_object('transactionId', m->>'transactionId',
		                                 'partitionId', m->>'partitionId', 'leaseId', lease, 'status', st))
		                      FROM jsonb_array_elements(r->'messages') WITH ORDINALITY e(m, i)
		                     WHERE CASE WHEN k >= 0.8 THEN i = n ELSE i <= keep END)));
EXCEPTION WHEN OTHERS THEN
	NULL;	-- a refused ack is part of the history
END $$;

CREATE TEMP TABLE outcomes (step int, args text, r text);

CREATE FUNCTION pg_temp.history(steps int) RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	k float8;
	args text;
	r jsonb;
	req text;
BEGIN
	FOR s IN 1 .. steps LOOP
		k := random();
		IF k < 0.35 THEN
			req := '{"items":[' || (SELECT string_agg(pg_temp.item(), ',')
			                          FROM generate_series(1, 1 + floor(random() * 6)::int)) || ']}';
			BEGIN
				IF random() < 0.5 THEN
					PERFORM queen.push_text(req, NULL, pg_temp.pick(ARRAY[NULL, 'alice', 'b "q" \ 😀']));
				ELSE
					PERFORM queen.push(req::jsonb, NULL, pg_temp.pick(ARRAY[NULL, 'alice']));
				END IF;
			EXCEPTION WHEN OTHERS THEN
				NULL;	-- refused payloads ("\u0000", a lone surrogate)
			END;
		ELSIF k < 0.7 THEN
			args := pg_temp.pop_args();
			INSERT INTO outcomes VALUES (s, args, pg_temp.same(args));
		ELSIF k < 0.85 THEN
			args := pg_temp.pop_args();
			BEGIN
				IF random() < 0.5 THEN
					EXECUTE format('SELECT queen.pop(%s)', args) INTO r;
				ELSE
					EXECUTE format('SELECT queen.pop_text(%s)::jsonb', args) INTO r;
				END IF;
				IF random() < 0.7 AND r->>'leaseId' <> '' AND jsonb_array_length(r->'messages') > 0 THEN
					PERFORM pg_temp.ack_some(r);
				END IF;
			EXCEPTION WHEN OTHERS THEN
				NULL;
			END;
		ELSE
			-- a lease given up: the next pops of its group find it free again
			UPDATE queen.log_consumers SET lease_expires_at = clock_timestamp() - interval '1 second'
			 WHERE worker_id IS NOT NULL AND random() < 0.3;
		END IF;
	END LOOP;
END $$;

SELECT setseed(0.5);
SELECT pg_temp.history(3000);

-- what the compared pops exercised
SELECT CASE WHEN r = 'same: 0 messages' THEN 'no messages'
			WHEN r ~ '^same: [0-9]+ messages$' THEN 'messages'
			WHEN r LIKE 'same: "error: %' THEN 'error ' || substr(r, 15, 5)
			ELSE 'differ' END AS outcome,
	   count(*) > 100 AS over_100
  FROM outcomes GROUP BY 1 ORDER BY 1;
SELECT count(*) > 800 AS compared, count(DISTINCT r) > 30 AS varied FROM outcomes;
-- (the partitions' ids are random and decide which partition a pop tries
-- first, so the history varies from run to run: these counts are 4 times
-- their bounds or more in runs of this seed)
SELECT (SELECT count(*) FROM queen.log_consumers WHERE committed >= 0) > 30 AS cursors_moved,
       (SELECT count(*) FROM queen.log_dlq) > 5 AS dead_letters,
       (SELECT count(*) FROM queen.consumer_groups_metadata WHERE subscription_mode <> 'all') > 5 AS subscriptions;

-- the differences: none
SELECT step, args, r FROM outcomes WHERE r NOT LIKE 'same: %' ORDER BY step;

DROP EXTENSION queen_streams CASCADE;
