-- queen.pop_text and queen.push_text answer JSON text (type json): the
-- members of queen.pop's and queen.push's answers, the payloads as stored.
CREATE EXTENSION queen_streams;

\i test/include/helpers.sql

\i test/include/pop_both.sql

SELECT pg_typeof(queen.push_text('{"items":[{"queue":"pt","payload":{"k":1}}]}')) AS push_text_type;
SELECT pg_typeof(queen.pop_text('pt', auto_ack => true)) AS pop_text_type;

-- Payloads of every kind: text as sent, jsonb's rendering, escapes, null,
-- a trace id, a producer subject, encrypted at rest.
SELECT x->>'status' AS status FROM json_array_elements(queen.push_text(
  '{"items":[{"queue":"tx","payload": { "b" : 1,  "a":[1 , 2.50] } ,"transactionId":"r1"},
             {"queue":"tx","data":"h\u00e9 \"q\"\n","transactionId":"r2"},
             {"queue":"tx","transactionId":"r3 \"quoted\"","traceId":"11111111-2222-4333-8444-555555555555"},
             {"queue":"tx","payload":[-0.0e0, true, null],"transactionId":"r4"}]}', NULL, 'alice')) x;
SELECT x->>'status' AS status FROM jsonb_array_elements(queen.push(
  '{"items":[{"queue":"tx","payload":{"b":1,"a":[1,2.50]},"transactionId":"j1"}]}')) x;
SET queen_streams.encryption_key = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SELECT queen.configure('{"queue":"tx.enc","options":{"encryptionEnabled":true}}') IS NOT NULL AS configured;
SELECT x->>'status' AS status FROM json_array_elements(queen.push_text(
  '{"items":[{"queue":"tx.enc","payload":{"secret":"s1"},"transactionId":"e1"}]}')) x;

SELECT pg_temp.same($$'tx', batch => 10$$);
SELECT pg_temp.same($$'tx', consumer_group => 'g', batch => 2, auto_ack => true$$);
SELECT pg_temp.same($$'tx', partition => 'Default', batch => 3, lease_seconds => 30$$);
SELECT pg_temp.same($$'tx.enc'$$);
SELECT pg_temp.same($$'nothing-here'$$);
SELECT pg_temp.same($$'tx', batch => 0$$);
SELECT pg_temp.same($$NULL$$);

-- The payloads as stored, byte for byte; the messages come last.
SELECT (queen.pop_text('tx', batch => 10)::text) ~ '"data":\{ "b" : 1,  "a":\[1 , 2.50\] \}' AS sent_text_kept,
       position('"messages"' IN queen.pop_text('tx', consumer_group => 'h')::text)
         > position('"leaseId"' IN queen.pop_text('tx', consumer_group => 'h2')::text) AS messages_last;
SELECT m->>'transactionId' AS txn, m->'data' AS data, m->>'producerSub' AS sub, m->>'traceId' AS trace
  FROM json_array_elements(queen.pop_text('tx', consumer_group => 'k', batch => 10)->'messages') m;
SELECT m->'data' AS decrypted FROM json_array_elements(queen.pop_text('tx.enc', consumer_group => 'k')->'messages') m;

-- A leased pop_text acks as a pop does.
CREATE TEMP TABLE leased AS SELECT queen.pop_text('tx', consumer_group => 'ack', batch => 10)::jsonb AS r;
SELECT bool_and((a->>'success')::boolean) AS acked
  FROM leased, jsonb_array_elements(queen.ack(jsonb_build_object('consumerGroup', 'ack',
         'acknowledgments', (SELECT jsonb_agg(jsonb_build_object('transactionId', m->>'transactionId',
                                  'partitionId', m->>'partitionId', 'leaseId', m->>'leaseId'))
                               FROM jsonb_array_elements(r->'messages') m)))) a;
SELECT jsonb_array_length(queen.pop('tx', consumer_group => 'ack')->'messages') AS left_after_ack;

DROP EXTENSION queen_streams CASCADE;
