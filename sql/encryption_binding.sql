-- Envelopes are bound to their partition and transaction id (AES-GCM AAD,
-- envelope version 2): copied into another queue, another partition or
-- another message they do not open (a WARNING, XX001, the envelope served
-- as stored); in place they do. Queen's envelopes (no "v", no AAD) still
-- open, unless queen_streams.encryption_unbound_read is off.
CREATE EXTENSION queen_streams;

\i test/include/helpers.sql

SET queen_streams.encryption_key = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SELECT queen.configure('{"queue":"seal","options":{"encryptionEnabled":true}}')->>'configured' AS configured;
SELECT queen.push('{"items":[{"queue":"seal","transactionId":"s1","payload":{"secret":"sealed"}}]}')->0->>'status' AS status;

-- The stored envelope: version 2.
CREATE TEMP TABLE stolen AS
SELECT s.blob, f.payload AS envelope
  FROM queen.log_segments s
  JOIN queen.log_partitions p ON p.id = s.partition_id
  JOIN queen.queues q ON q.id = p.queue_id,
       queen.segment_frames(s.blob, 1) f
 WHERE q.name = 'seal';
SELECT (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(envelope::jsonb) k) AS keys,
       envelope::jsonb->'v' AS v FROM stolen;

-- What a pop serves: the transaction id and whether it opened.
CREATE FUNCTION pg_temp.served(r jsonb) RETURNS TABLE (txn text, data jsonb) LANGUAGE sql AS $$
	SELECT m->>'transactionId',
	       CASE WHEN m->'data' ? 'encrypted' THEN '"<served as stored>"'::jsonb ELSE m->'data' END
	  FROM jsonb_array_elements(r->'messages') m
$$;
-- Append one frame as it stands through log_push_one_v1 (what a role that
-- may call it can do with an envelope it read elsewhere).
CREATE FUNCTION pg_temp.plant(q text, part text, txn text, envelope text) RETURNS text LANGUAGE sql AS $$
	SELECT queen.log_push_one_v1(q, part, 1, queen.txn_hash(txn), -1,
	         queen.segment_pack(jsonb_build_array(jsonb_build_object(
	           'id', '01890a5d-ac96-774b-bcce-b302099a8057', 'transactionId', txn,
	           'payload', envelope::jsonb, 'encrypted', true))))->>'status'
$$;

-- In place it opens.
SELECT * FROM pg_temp.served(queen.pop('seal', auto_ack => true));

-- The same segment bytes in another queue: refused (and the code is XX001).
SELECT queen.log_push_one_v1('elsewhere', 'Default', 1, queen.txn_hash('s1'), -1, blob)->>'status' AS status FROM stolen;
\set VERBOSITY sqlstate
SELECT * FROM pg_temp.served(queen.pop('elsewhere', auto_ack => true));
\set VERBOSITY default
-- ... in another partition of its own queue:
SELECT queen.log_push_one_v1('seal', 'p2', 1, queen.txn_hash('s1'), -1, blob)->>'status' AS status FROM stolen;
SELECT * FROM pg_temp.served(queen.pop('seal', 'p2', auto_ack => true));
-- ... as another message of its own partition:
SELECT pg_temp.plant('seal', 'Default', 's2', envelope) AS status FROM stolen;
SELECT * FROM pg_temp.served(queen.pop('seal', auto_ack => true));
-- (planted back where it was, it is the original's duplicate)
SELECT pg_temp.plant('seal', 'Default', 's1', envelope) AS status FROM stolen;

-- The message and dead-letter reads open it with its own binding too.
SELECT queen.push('{"items":[{"queue":"seal","partition":"dl","transactionId":"d1","payload":{"secret":"dead"}}]}')->0->>'status' AS status;
SELECT jsonb_array_length(queen.pop('seal', 'dl')->'messages') AS leased;
SELECT queen.ack(jsonb_build_object('transactionId', 'd1', 'partitionId',
         (SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
           WHERE q.name = 'seal' AND p.name = 'dl'), 'status', 'dlq')) IS NOT NULL AS acked;
SELECT encrypted, payload ? 'v' AS stored_as_envelope FROM queen.log_dlq;
SELECT m->>'transactionId' AS txn, m->'data' AS data FROM jsonb_array_elements(queen.dlq('seal')->'messages') m;
SELECT queen.message((SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
                           WHERE q.name = 'seal' AND p.name = 'dl'), 'd1')->'payload' AS payload;
-- A requeue opens it with its binding, and the push seals it anew to where it goes.
SELECT queen.retry_message((SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
                             WHERE q.name = 'seal' AND p.name = 'dl'), 'd1')->>'success' AS requeued;
SELECT * FROM pg_temp.served(queen.pop('seal', 'dl', auto_ack => true));

-- An empty payload is sealed and opened too (the AAD is all the cipher reads).
SELECT queen.push_text('{"items":[{"queue":"seal","partition":"empty","transactionId":"z1"}]}') IS NOT NULL AS pushed;
SELECT * FROM pg_temp.served(queen.pop('seal', 'empty', auto_ack => true));

-- Queen's envelope (no "v", no AAD; made with the same key by another
-- AES-GCM implementation) still opens wherever it is ...
SELECT pg_temp.plant('seal', 'old', 'o1',
  '{"encrypted":"nToTQSHpOJ9AFPK2YhTtuB/eNHHmlT8=","iv":"oKGio6SlpqeoqaqrrK2urw==","authTag":"xHK3Qwh1g+0BW9rK1fKm3A=="}') AS status;
SELECT * FROM pg_temp.served(queen.pop('seal', 'old'));
-- ... unless queen_streams.encryption_unbound_read is off.
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second';
SET queen_streams.encryption_unbound_read = off;
SELECT * FROM pg_temp.served(queen.pop('seal', 'old', auto_ack => true));
RESET queen_streams.encryption_unbound_read;
-- An envelope of an unknown version is not an envelope.
SELECT pg_temp.plant('seal', 'v3', 'x1', '{"v":3,"encrypted":"","iv":"oKGio6SlpqeoqaqrrK2urw==","authTag":"xHK3Qwh1g+0BW9rK1fKm3A=="}') AS status;
SELECT * FROM pg_temp.served(queen.pop('seal', 'v3', auto_ack => true));

RESET queen_streams.encryption_key;
DROP EXTENSION queen_streams;
