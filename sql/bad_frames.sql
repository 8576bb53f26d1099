-- One validation for every string (issue 13, point 3): a caller-made
-- segment whose transaction id, producer subject or payload is not valid
-- UTF-8, holds a NUL byte, or whose payload is not JSON text, is refused by
-- queen.log_push_one_v1 before anything is stored (a pop would serve it).
-- And pop refuses names over push's limits and a subscriptionFrom that is
-- not a timestamp, as invalid input.
CREATE EXTENSION queen_streams;

\i test/include/helpers.sql

CREATE FUNCTION pg_temp.le(n int, len int) RETURNS bytea LANGUAGE sql AS $$
	SELECT string_agg(set_byte('\x00'::bytea, 0, (n >> (8 * i)) & 255), ''::bytea ORDER BY i)
	  FROM generate_series(0, len - 1) i
$$;
-- A hand-made segment (a zstd frame of one raw block) of one frame with any
-- bytes as transaction id, producer subject (flag 0x02 when given) and payload.
CREATE FUNCTION pg_temp.seg(txn bytea, psub bytea, payload bytea) RETURNS bytea LANGUAGE sql AS $$
	WITH f AS (
	  SELECT CASE WHEN psub IS NULL THEN '\x00' ELSE '\x02' END::bytea
	         || '\x01890a5dac96774bbcceb302099a8057'::bytea
	         || pg_temp.le(octet_length(txn), 2) || txn
	         || CASE WHEN psub IS NULL THEN ''::bytea ELSE pg_temp.le(octet_length(psub), 2) || psub END
	         || payload AS body),
	     frame AS (SELECT pg_temp.le(octet_length(body), 4) || body AS b FROM f)
	SELECT '\x28b52ffd20'::bytea || pg_temp.le(octet_length(b), 1) || pg_temp.le(1 | (octet_length(b) << 3), 3) || b
	  FROM frame
$$;
CREATE FUNCTION pg_temp.push(txn bytea, psub bytea, payload bytea, hash bytea DEFAULT NULL) RETURNS text LANGUAGE sql AS $$
	SELECT pg_temp.try(format('SELECT queen.log_push_one_v1(%L, %L, 1, %L::bytea, -1, %L::bytea)',
	                          'bf', 'Default', coalesce(hash, queen.txn_hash('r')), pg_temp.seg(txn, psub, payload)))
$$;
-- queen.txn_hash takes text, so the hashes of transaction ids that are not
-- text were computed outside (XXH3-128, canonical), as this one was:
SELECT queen.txn_hash('r') = '\x7b20385c5bc80ee2bd7b38f7b4af0b35'::bytea AS hash_computed_alike;

-- The frames decode as built.
SELECT transaction_id, producer_sub, payload
  FROM queen.segment_frames(pg_temp.seg('r', 'alice', '{"ok":1}'), 1);
SELECT pg_temp.push('r', 'alice', '{"ok":1}') AS good;

-- transaction id (with its right hash: only the text rule refuses it)
SELECT pg_temp.push('\xff41'::bytea, NULL, '{}', '\xfed950ddf86286c5b24653a44acd5234') AS txn_invalid_utf8;
SELECT pg_temp.push('\x610062'::bytea, NULL, '{}', '\x39797789ed4c7ea0d5a06cd078125351') AS txn_nul;
SELECT pg_temp.push('\xc3'::bytea, NULL, '{}', '\xdaf65df25d857344ee5fa5121cc81e25') AS txn_truncated_sequence;
-- producer subject
SELECT pg_temp.push('r', '\xfe'::bytea, '{}') AS psub_invalid_utf8;
SELECT pg_temp.push('r', '\x6100'::bytea, '{}') AS psub_nul;
-- payload
SELECT pg_temp.push('r', NULL, '\x7b2261223a22ff227d'::bytea) AS payload_invalid_utf8_in_string;
SELECT pg_temp.push('r', NULL, '\x7b7d00'::bytea) AS payload_trailing_nul;
SELECT pg_temp.push('r', NULL, 'nope') AS payload_not_json;
SELECT pg_temp.push('r2', NULL, convert_to('"\u00e9t\u00e9"', 'UTF8'), queen.txn_hash('r2')) AS payload_escaped_ok;
SELECT pg_temp.push('r3', NULL, convert_to('"été"', 'UTF8'), queen.txn_hash('r3')) AS payload_utf8_ok;
-- an empty payload is served as null, as push stores an absent one
SELECT pg_temp.push('r4', NULL, '', queen.txn_hash('r4')) AS payload_empty;

-- Only the good ones were stored, and every stored frame pops as JSON.
SELECT p.last_offset FROM queen.log_partitions p;
SELECT m->>'transactionId' AS txn, m->'data' AS data, m->>'producerSub' AS psub
  FROM jsonb_array_elements(queen.pop('bf', batch => 10, auto_ack => true)->'messages') m;

-- Pop: names within push's limits, a subscriptionFrom that parses.
SELECT pg_temp.try(format('SELECT queen.pop(%L)', repeat('q', 256))) AS long_queue;
SELECT pg_temp.try(format('SELECT queen.pop(%L, %L)', 'bf', repeat('p', 256))) AS long_partition;
SELECT pg_temp.try(format('SELECT queen.pop(%L, consumer_group => %L)', 'bf', repeat('g', 256))) AS long_group;
SELECT pg_temp.try($$SELECT queen.pop('bf', consumer_group => 'g', subscription_from => 'notadate')$$) AS bad_from;
SELECT pg_temp.try($$SELECT queen.pop('bf', consumer_group => 'g', subscription_from => '2026-13-45')$$) AS bad_from_range;
SELECT pg_temp.try($$SELECT queen.pop('bf', consumer_group => 'g', subscription_from => 'infinity')$$) AS infinite_from;
SELECT pg_temp.try($$SELECT queen.pop('bf', consumer_group => 'g', subscription_from => '2020-01-01T00:00:00Z')$$) AS good_from;
SELECT pg_temp.try($$SELECT queen.pop('bf', consumer_group => 'g2', subscription_from => 'now')$$) AS now_from;
SELECT consumer_group, subscription_mode FROM queen.consumer_groups_metadata ORDER BY 1;

DROP EXTENSION queen_streams;
