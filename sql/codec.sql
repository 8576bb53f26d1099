-- Segment codec: hash vectors, frame bytes, round trips and corruption.
CREATE EXTENSION queen_streams;

-- The two pinned xxh3-128 vectors (big endian).
SELECT encode(queen.txn_hash(''), 'hex') AS empty_hash,
       encode(queen.txn_hash('txn-0001'), 'hex') AS txn_0001_hash;

-- Frame bytes: u32 LE body_len | flags | id | u16 LE txn_len | txn | payload
SELECT encode(queen.segment_decompress(queen.segment_pack(
  '[{"id":"01890a5d-ac96-774b-bcce-b302099a8057","transactionId":"t1","payload":{"a":1}}]')), 'hex') AS frame;

-- Trace id and producer sub set their flags and sit where the format says.
SELECT encode(queen.segment_decompress(queen.segment_pack(
  '[{"id":"01890a5d-ac96-774b-bcce-b302099a8057","traceId":"11111111-2222-4333-8444-555555555555",
     "transactionId":"t","producerSub":"svc","payload":null}]')), 'hex') AS frame_with_trace_and_sub;

-- Round trip of several frames, including an empty payload.
SELECT idx, flags, message_id, trace_id, transaction_id, producer_sub, payload
  FROM queen.segment_frames(queen.segment_pack(
  '[{"id":"01890a5d-ac96-774b-bcce-b302099a8057","transactionId":"a","payload":{"k":"v"}},
    {"id":"01890a5d-ac96-774b-bcce-b302099a8058","transactionId":"b"},
    {"id":"01890a5d-ac96-774b-bcce-b302099a8059","transactionId":"c","traceId":"11111111-2222-4333-8444-555555555555","producerSub":"me","payload":[1,2]}]'), 3);

-- Both sides of the small-segment size (1024 packed bytes). Below it zstd
-- runs at level -1, which stores literals raw: a payload of hex digits (few
-- repeats, 4 bits of entropy a byte) stays about its size, and from 1024 on
-- the literal stage of level 1 halves it. Either way the frames come back whole.
CREATE TEMP TABLE hex AS
SELECT string_agg(md5(i::text), '' ORDER BY i) AS h FROM generate_series(1, 40) i;
SELECT n AS packed_bytes, length(queen.segment_decompress(b)) = n AS whole,
       round(length(b)::numeric / n, 1) AS stored_ratio,
       (SELECT payload::jsonb = to_jsonb(substr(h, 1, n - 26))
          FROM queen.segment_frames(b, 1)) AS payload_back
  FROM hex, (SELECT n, queen.segment_pack(jsonb_build_array(jsonb_build_object(
                  'id', '01890a5d-ac96-774b-bcce-b302099a8057', 'transactionId', 'a',
                  'payload', substr(h, 1, n - 26)))) AS b
          FROM hex, (VALUES (1023), (1024), (1025)) v(n)) s
 ORDER BY n;

-- The decoder never returns a short batch: a wrong count is an error.
SELECT count(*) FROM queen.segment_frames(queen.segment_pack(
  '[{"id":"01890a5d-ac96-774b-bcce-b302099a8057","transactionId":"a","payload":1}]'), 2);
SELECT count(*) FROM queen.segment_frames(queen.segment_pack(
  '[{"id":"01890a5d-ac96-774b-bcce-b302099a8057","transactionId":"a","payload":1},
    {"id":"01890a5d-ac96-774b-bcce-b302099a8058","transactionId":"b","payload":2}]'), 1);
-- Not zstd at all.
SELECT count(*) FROM queen.segment_frames('\x00010203'::bytea, 1);
-- A corrupt byte inside the compressed data is caught (content checksum).
SELECT count(*) FROM queen.segment_frames(
  overlay(queen.segment_pack('[{"id":"01890a5d-ac96-774b-bcce-b302099a8057","transactionId":"abcdefgh","payload":"0123456789"}]')
          placing '\xff'::bytea from 12 for 1), 1);
-- A segment that claims more than the cap is refused before decompressing,
-- and the encoder refuses to write one.
CREATE TEMP TABLE big AS SELECT queen.segment_pack(
  ('[{"id":"01890a5d-ac96-774b-bcce-b302099a8057","transactionId":"a","payload":"' || repeat('x', 70000) || '"}]')::jsonb) AS b;
SET queen_streams.max_segment_size = '64kB';
SELECT count(*) FROM big, queen.segment_frames(b, 1);
SELECT queen.segment_pack(
  ('[{"id":"01890a5d-ac96-774b-bcce-b302099a8057","transactionId":"a","payload":"' || repeat('x', 70000) || '"}]')::jsonb);
RESET queen_streams.max_segment_size;

-- A corrupt stored segment names its partition and base offset.
SELECT queen.push('{"items":[{"queue":"codec_q","payload":1}]}') IS NOT NULL AS pushed;
UPDATE queen.log_segments SET blob = '\x28b52ffd00'::bytea;
DO $$
BEGIN
  PERFORM queen.pop('codec_q', 'Default');  -- named: a wildcard pop skips it
EXCEPTION WHEN data_corrupted THEN
  RAISE NOTICE '%', regexp_replace(SQLERRM, '[0-9a-f-]{36}', '<pid>');
END $$;

-- UUIDv7: version 7, RFC variant, strictly increasing within a backend.
SELECT bool_and(substr(u::text, 15, 1) = '7') AS v7,
       bool_and(substr(u::text, 20, 1) IN ('8', '9', 'a', 'b')) AS rfc_variant
  FROM (SELECT queen.uuid_generate_v7() AS u FROM generate_series(1, 1000)) s;
SELECT bool_and(a < b) AS monotonic
  FROM (SELECT u AS a, lead(u) OVER (ORDER BY n) AS b
          FROM (SELECT n, queen.uuid_generate_v7() AS u FROM generate_series(1, 5000) n) s) t
 WHERE b IS NOT NULL;

DROP EXTENSION queen_streams CASCADE;
