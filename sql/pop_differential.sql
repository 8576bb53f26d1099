-- queen.pop_text against queen.pop over generated histories of 3,000 steps:
-- pushes (text and jsonb; odd payloads, "data" and none; transaction ids,
-- trace ids and producer subjects; an encrypted queue, a dead letter queue
-- and a delayed queue whose messages are never due), real pops and acks
-- (completed and failed, all of a batch or part of it, now and then under a
-- wrong lease), and leases that expire. In about a third of the steps the
-- same generated pop runs as queen.pop and as queen.pop_text, each rolled
-- back (now and then with no encryption key, so that an encrypted message is
-- served as stored): both must give the same answer (the pop's lease id
-- aside) or the same error, leave the same cursors and subscriptions, and
-- pop_text must keep its layout. setseed() fixes the random choices, not the
-- history: partition ids are random, and they decide which partition a
-- wildcard pop tries first. Errors the history meets are counted by kind.
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

-- One pushed item: JSON values of every shape as payload (or as "data", or
-- none), transaction ids with escapes, sometimes a trace id. Two payloads
-- are refused by jsonb ("\u0000", a lone surrogate), and with them the whole
-- request: about a quarter of the pushes.
CREATE FUNCTION pg_temp.item() RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	k float8;
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
	k := random();
	IF k < 0.95 THEN
		f := f || (CASE WHEN k < 0.9 THEN '"payload":' ELSE '"data":' END
			|| pg_temp.pick(ARRAY['{"k":1}', '{ "b" : 1,  "a":[1 , 2.50] }', '[]', '{}',
			'1', '-0', '0.5e3', '-0.0e-0', '2E+3', '1e400', '123456789012345678901234567890', 'null', 'true',
			'"s"', '""', '"\u00e9"', '"\ud83d\ude00"', '"tab\tnl\n\r\b\f"', '"\/"', '"é漢字😀"',
			'{"a":1,"a":2}', '{"":""}', '[[[[[]]]]]', '{"x":{"y":[null,false,"\"q\""]}}',
			'"' || repeat('w', 3000) || '"', '"\u0000"', '"\ud800"']));
	END IF;
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
-- or failed ones (the dead letter queue on "dr"; no retry delay, which would
-- make a pop depend on the clock); sometimes under another lease.
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
END $$;

CREATE TEMP TABLE outcomes (step int, args text, r text);
CREATE TEMP TABLE errors (step int, what text, state text);

CREATE FUNCTION pg_temp.history(steps int) RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	k float8;
	args text;
	r jsonb;
	req text;
	key text := current_setting('queen_streams.encryption_key');
	level text := current_setting('client_min_messages');
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
				INSERT INTO errors VALUES (s, 'push', SQLSTATE);
			END;
		ELSIF k < 0.7 THEN
			args := pg_temp.pop_args();
			IF random() < 0.1 THEN
				-- no key: encrypted messages are served as stored (each with a warning)
				PERFORM set_config('queen_streams.encryption_key', '', false),
				        set_config('client_min_messages', 'error', false);
				INSERT INTO outcomes VALUES (s, args || ' -- no key', pg_temp.same(args));
				PERFORM set_config('queen_streams.encryption_key', key, false),
				        set_config('client_min_messages', level, false);
			ELSE
				INSERT INTO outcomes VALUES (s, args, pg_temp.same(args));
			END IF;
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
				INSERT INTO errors VALUES (s, 'pop and ack', SQLSTATE);
			END;
		ELSE
			-- leases that expire: the next pops of their groups find them free
			UPDATE queen.log_consumers SET lease_expires_at = clock_timestamp() - interval '1 second'
			 WHERE worker_id IS NOT NULL AND random() < 0.3;
		END IF;
	END LOOP;
END $$;

SELECT setseed(0.5);
SELECT pg_temp.history(3000);

-- What the history exercised. The history varies from run to run (above):
-- each count is checked against a bound at most half of the least seen in
-- eight runs of this seed.
SELECT CASE WHEN r = 'same: 0 messages' THEN 'no messages'
			WHEN r ~ '^same: [0-9]+ messages$' THEN 'messages'
			WHEN r LIKE 'same: "error: %' THEN 'error ' || substr(r, 15, 5)
			ELSE 'differ' END AS outcome,
	   count(*) > 80 AS over_80
  FROM outcomes GROUP BY 1 ORDER BY 1;
SELECT count(*) > 500 AS compared, count(DISTINCT r) > 25 AS varied,
       count(*) FILTER (WHERE args LIKE '% -- no key' AND args LIKE $$'de'%$$ AND r ~ '^same: [1-9]') > 5
         AS served_as_stored
  FROM outcomes;
SELECT (SELECT count(*) FROM queen.log_consumers WHERE committed >= 0) > 50 AS cursors_moved,
       (SELECT count(*) FROM queen.log_dlq) > 8 AS dead_letters,
       (SELECT count(*) FROM queen.consumer_groups_metadata WHERE subscription_mode <> 'all') > 10 AS subscriptions;
-- the errors met, by kind: refused payloads, and pops with bad arguments
SELECT what, state, count(*) > 20 AS over_20 FROM errors GROUP BY 1, 2 ORDER BY 1, 2;

-- the differences: none
SELECT step, args, r FROM outcomes WHERE r IS NULL OR r NOT LIKE 'same: %' ORDER BY step;

DROP EXTENSION queen_streams CASCADE;
