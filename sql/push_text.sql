-- queen.push_text: the push request as text, read in one pass. The same
-- answers and errors as queen.push for the same input; payloads stored as
-- the JSON text sent; linear in items.
CREATE EXTENSION queen_streams;

-- SQLSTATE, message and detail of a failing statement, or 'ok'.
CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	d text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
	RETURN SQLSTATE || ': ' || SQLERRM || coalesce(' (' || nullif(d, '') || ')', '');
END $$;

\i test/include/push_both.sql

-- Answers: several queues and partitions, intra-request duplicates, traces,
-- server-minted ids, empty transaction ids, absent payloads.
SELECT pg_temp.both('{"items":[
  {"queue":"billing.invoices.eu","payload":{"n":0},"transactionId":"a"},
  {"queue":"billing.invoices.eu","partition":"p1","payload":1,"transactionId":"b"},
  {"queue":"plain","payload":"x"},
  {"queue":"billing.invoices.eu","payload":[3],"transactionId":"c"},
  {"queue":"billing.invoices.eu","partition":"p1","transactionId":"d"},
  {"queue":"plain","payload":{"e":true},"transactionId":""},
  {"queue":"billing.invoices.eu","payload":2,"transactionId":"a"},
  {"queue":"traced","payload":1,"transactionId":"t","traceId":"11111111-2222-4333-8444-555555555555"}]}');
-- jsonb's rules: the last of repeated keys counts, escaped key names are
-- their text, null is absent, data stands in for a null or absent payload,
-- other keys (nested or not) are ignored, the last "items" is the request.
SELECT pg_temp.both('{"items":[{"queue":"x","queue":"repeated"}]}');
SELECT pg_temp.both('{"items":[{"qu\u0065ue":"escaped","partition":"p\u00e9"}]}');
SELECT pg_temp.both('{"items":[{"queue":"nulls","partition":null,"transactionId":null,"traceId":null,"payload":null,"data":{"d":1}}]}');
SELECT pg_temp.both('{"items":[{"queue":"q","payload":1,"payload":null}]}');
SELECT pg_temp.both('{"items":[{"queue":"q","transactionId":5,"transactionId":"five"}]}');
SELECT pg_temp.both('{"other":{"items":[1]},"items":[{"queue":"q","extra":{"queue":1,"items":[{}]},"more":[[{"a":1}]]}],"tail":[null]}');
SELECT pg_temp.both('{"items":[1],"items":[{"queue":"last-items"}]}');
SELECT pg_temp.both('{"items":[{"queue":"first"}],"items":[]}');
SELECT pg_temp.both('{"items":[]}');
SELECT pg_temp.both('{"items":[{"queue":"t2","transactionId":"a"}]}', '22222222-2222-2222-2222-222222222222');

-- Errors: every validation of queen.push, with its SQLSTATE and message.
SELECT pg_temp.try($$SELECT queen.push_text(NULL)$$);
SELECT pg_temp.both('[]');
SELECT pg_temp.both('"items"');
SELECT pg_temp.both('5');
SELECT pg_temp.both('{}');
SELECT pg_temp.both('{"items":null}');
SELECT pg_temp.both('{"items":{"queue":"a"}}');
SELECT pg_temp.both('{"items":"a"}');
SELECT pg_temp.both('{"items":[1]}');
SELECT pg_temp.both('{"items":[null]}');
SELECT pg_temp.both('{"items":[{"queue":"a"},[]]}');
SELECT pg_temp.both('{"items":[{"payload":1}]}');
SELECT pg_temp.both('{"items":[{"queue":null}]}');
SELECT pg_temp.both('{"items":[{"queue":1}]}');
SELECT pg_temp.both('{"items":[{"queue":["a"]}]}');
SELECT pg_temp.both('{"items":[{"queue":{"a":1}}]}');
SELECT pg_temp.both('{"items":[{"queue":""}]}');
SELECT pg_temp.both('{"items":[{"queue":"a","partition":""}]}');
SELECT pg_temp.both(format('{"items":[{"queue":"%s"}]}', repeat('q', 256)));
SELECT pg_temp.both(format('{"items":[{"queue":"a","partition":"%s"}]}', repeat('p', 256)));
SELECT pg_temp.both('{"items":[{"queue":"a"},{"queue":"a","partition":2}]}');
SELECT pg_temp.both('{"items":[{"queue":"a"},{"queue":"orders/eu"}]}');
SELECT pg_temp.both('{"items":[{"queue":"a","partition":"."}]}');
SELECT pg_temp.both('{"items":[{"queue":"a.b:c","partition":"..."}]}');
SELECT pg_temp.both('{"items":[{"queue":"a","transactionId":true}]}');
SELECT pg_temp.both('{"items":[{"queue":"a","traceId":7}]}');
SELECT pg_temp.both('{"items":[{"queue":"a","traceId":"not-a-uuid"}]}');
SELECT pg_temp.both(format('{"items":[{"queue":"a","transactionId":"%s"}]}', repeat('t', 65536)));
-- the first bad item is the one reported; a later "items" replaces it
SELECT pg_temp.both('{"items":[{"queue":"ok"},{"queue":""},{"queue":1}]}');
SELECT pg_temp.both('{"items":[{"queue":""}],"items":[{"queue":"fine"}]}');
SELECT pg_temp.both('{"items":[{"queue":"fine"}],"items":7}');
-- Text jsonb input refuses is refused with the same error, before any
-- field error: syntax, \u0000, lone surrogates, numbers past numeric.
SELECT pg_temp.both('{"items": [');
SELECT pg_temp.both('{"items":[{"queue":""}, ');
SELECT pg_temp.both('{"items":[{"queue":"a","payload":"\u0000"}]}');
SELECT pg_temp.both('{"items":[{"queue":"a","payload":{"s":"\ud800"}}]}');
SELECT pg_temp.both('{"items":[{"queue":"","payload":[1e1000000]}]}');
SELECT pg_temp.both('{"items":[{"queue":"a","payload":1e-100000}]}');
SELECT pg_temp.both('{"items":[{"queue":"a","payload":1E+999}]}');
-- jsonb input checks a number once the token after it has lexed: a bad
-- token right after a number past numeric is the error reported.
SELECT pg_temp.both(E'{"items":[{"queue":"a","payload":1e999999\x01}]}');
SELECT pg_temp.both('{"items":[{"queue":"a","payload":[1e999999\u0041]}]}');
SELECT pg_temp.both('{"items":[{"queue":"a","payload":1e999999 +1}]}');
SELECT pg_temp.both('{"items":[{"queue":"a","payload":1e999999 "b"}]}');
SELECT pg_temp.both('{"items":[{"queue":"a","payload":[1e999999 , 1]}]}');
SELECT pg_temp.both('{"items":[{"queue":"a","payload":1e999999');
SELECT pg_temp.both('{"items":[{"queue":"a","payload":1e999999]}');
SELECT pg_temp.both('{"items":[{"queue":"a","payload":[1e999999:1]}]}');
SELECT pg_temp.both('{"items":[{"queue":"a"}]} x');
SELECT pg_temp.both('{"items":[{"queue":"a",}]}');
SELECT pg_temp.both('');

-- The scanner of the common request and the parser it falls back to agree:
-- white space, escapes, literals, numbers, nesting, escaped keys and ids.
SELECT pg_temp.both(E' \n\t{ "items" :\r[ { "queue" : "ws" , "payload" : { } , "data" : [ ] } ] } \n');
SELECT pg_temp.both('{"items":[{"queue":"esc","payload":"a\"b\\c\/d\b\f\n\r\t","transactionId":"e1"}]}');
SELECT pg_temp.both('{"items":[{"queue":"esc","transactionId":"with \"quotes\""}]}');
SELECT pg_temp.both('{"it\u0065ms":[{"queue":"escaped-items"}]}');
SELECT pg_temp.both('{"items":[{"queue":"lit","payload":[true,false,null,-0,0.5,-1.25e-3,1E2,{"":[]}]}]}');
SELECT pg_temp.both('{"items":[{"queue":"lit","payload":truex}]}');
SELECT pg_temp.both('{"items":[{"queue":"lit","payload":nul}]}');
SELECT pg_temp.both('{"items":[{"queue":"num","payload":1a}]}');
SELECT pg_temp.both('{"items":[{"queue":"num","payload":01}]}');
SELECT pg_temp.both('{"items":[{"queue":"num","payload":-}]}');
SELECT pg_temp.both('{"items":[{"queue":"num","payload":1.}]}');
SELECT pg_temp.both('{"items":[{"queue":"num","payload":.5}]}');
SELECT pg_temp.both('{"items":[{"queue":"num","payload":1e}]}');
SELECT pg_temp.both(E'{"items":[{"queue":"ctl","payload":"tab\there"}]}');
SELECT pg_temp.both('{"items":[{"queue":"bad-escape","payload":"\x"}]}');
SELECT pg_temp.both('{"items":[{"queue":"nest","payload":' || repeat('[', 500) || repeat(']', 500) || '}]}');
SELECT pg_temp.both('{"items":[{"queue":"nest","payload":' || repeat('{"a":', 600) || '1' || repeat('}', 600) || '}]}');
SELECT pg_temp.both('{"items":[{"queue":"nest","payload":' || repeat('[', 600) || repeat(']', 599) || '}]}');
SELECT pg_temp.both('{"items":[{"queue":"colon" "payload":1}]}');
SELECT pg_temp.both('{"items":[{"queue":"comma","payload":1},]}');
SELECT pg_temp.both('{"items":[{"queue":"obj","payload":{"a":1,"b"}}]}');
SELECT pg_temp.both('{"items":[{"queue":"obj","payload":{1:2}}]}');
-- Strings are scanned 8 bytes at a time: a quote, a backslash escape, a
-- control character (raw or escaped), a multibyte character or a plain one
-- at each offset of a word (k bytes before it, 17 - k after), in a
-- payload's key and value (the scanner reads the request), in a
-- transaction id (which the answer writes back, escaped), then in the
-- queue name too (an escaped name or id sends the request to the parser).
SELECT what, count(*) AS cases,
       string_agg(DISTINCT substring(r FROM '^(same: [^/:]*|DIFFER)'), ', ') AS results,
       count(*) FILTER (WHERE r LIKE 'DIFFER%') AS differ
  FROM (VALUES (1, 'quote', '\"'), (2, 'backslash', '\\'), (3, 'unicode escape', '\u00e9'),
               (4, 'two-byte', 'é'), (5, 'tab', E'\t'), (6, '0x1f', E'\x1f'),
               (7, 'escaped tab', '\t'), (8, 'escaped 0x1f', '\u001f'),
               (9, 'space', ' '), (10, 'tilde', '~')) AS v(n, what, c),
       generate_series(0, 16) k,
       LATERAL (SELECT repeat('a', k) || c || repeat('b', 17 - k) AS s) x,
       LATERAL (VALUES (pg_temp.both(format('{"items":[{"queue":"q","payload":{"%s":"%s"}}]}', s, s))),
                       (pg_temp.both(format('{"items":[{"queue":"q","transactionId":"%s","payload":1}]}', s))),
                       (pg_temp.both(format('{"items":[{"queue":"q%s","transactionId":"%s","payload":"%s"}]}',
                                            s, s, s)))) AS b(r)
 GROUP BY n, what ORDER BY n;
-- An item's key spelled with a \u escape at each of its bytes is that key
-- (the second item is a duplicate), wherever the escape falls in a word.
SELECT count(*) AS cases, string_agg(DISTINCT left(r, 30), ', ') AS results,
       count(*) FILTER (WHERE r LIKE 'DIFFER%') AS differ
  FROM generate_series(0, 12) i,
       LATERAL (SELECT left('transactionId', i) || '\u' || lpad(to_hex(ascii(substr('transactionId', i + 1, 1))), 4, '0')
                       || substr('transactionId', i + 2) AS key) x,
       LATERAL pg_temp.both(format('{"items":[{"queue":"q","%s":"same"},{"queue":"q","%s":"same"}]}', key, key)) AS r;

-- A duplicate of a committed push answers the original's id, as push does.
CREATE TEMP TABLE orig AS
SELECT queen.push_text('{"items":[{"queue":"dup","payload":1,"transactionId":"o1"},
                                  {"queue":"dup","payload":2,"transactionId":"o2"}]}')::jsonb AS r;
CREATE TEMP TABLE again AS
SELECT queen.push_text('{"items":[{"queue":"dup","payload":9,"transactionId":"o2"},
                                  {"queue":"dup","payload":3,"transactionId":"o3"},
                                  {"queue":"dup","payload":9,"transactionId":"o1"}]}')::jsonb AS r;
SELECT x->>'transaction_id' AS txn, x->>'status' AS status,
       x->>'message_id' = (SELECT o->>'message_id' FROM orig, jsonb_array_elements(orig.r) o
                            WHERE o->>'transaction_id' = x->>'transaction_id') AS original_id
  FROM again, jsonb_array_elements(again.r) x;
SELECT pg_temp.both('{"items":[{"queue":"dup","transactionId":"o1"},{"queue":"dup","transactionId":"new"}]}');

-- Payloads are stored as the JSON text sent (queen.push stores jsonb's
-- rendering), the producer subject on every frame; both pop as the same JSON.
SELECT x->>'status' AS status FROM jsonb_array_elements(queen.push_text(
  '{"items":[{"queue":"raw","payload": { "b" : 1,  "a":[1 , 2.50] } ,"transactionId":"r1"},
             {"queue":"raw","data":"h\u00e9 \"q\"","transactionId":"r2"},
             {"queue":"raw","payload":-0.0e0,"transactionId":"r3"},
             {"queue":"raw","transactionId":"r4"}]}', NULL, 'alice')::jsonb) x;
SELECT x->>'status' AS status FROM jsonb_array_elements(queen.push(
  '{"items":[{"queue":"raw","payload": { "b" : 1,  "a":[1 , 2.50] } ,"transactionId":"j1"}]}')) x;
SELECT f.transaction_id, f.payload, f.producer_sub
  FROM queen.log_segments s
  JOIN queen.log_partitions p ON p.id = s.partition_id
  JOIN queen.queues q ON q.id = p.queue_id,
       queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
 WHERE q.name = 'raw' ORDER BY s.base_offset, f.idx;
SELECT m->>'transactionId' AS txn, m->'data' AS data
  FROM jsonb_array_elements(queen.pop('raw', batch => 10)->'messages') m;

-- 100,000 items in one call, two partitions, a quarter of them repeating a
-- client id: one segment per partition, every payload as sent.
CREATE TEMP TABLE big_text AS
SELECT '{"items":[' || string_agg(
         CASE WHEN i % 2 = 0
              THEN format('{"queue":"bigt","partition":"even","payload":{"i": %s}}', i)
              ELSE format('{"queue":"bigt","transactionId":"t%s","payload":[%s, "x"]}', i % 75000, i) END,
         ',' ORDER BY i) || ']}' AS t
  FROM generate_series(1, 100000) i;
CREATE TEMP TABLE big_res AS SELECT queen.push_text(t)::jsonb AS r FROM big_text;
SELECT e->>'status' AS status, count(*) FROM big_res, jsonb_array_elements(r) e GROUP BY 1 ORDER BY 1;
SELECT p.name, s.end_offset - s.base_offset + 1 AS frames,
       (SELECT count(*) FILTER (WHERE f.payload = CASE WHEN p.name = 'even' THEN format('{"i": %s}', 2 * f.idx + 2)
                                                        ELSE format('[%s, "x"]', 2 * f.idx + 1) END)
          FROM queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f) AS payloads_as_sent
  FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'bigt' ORDER BY 1;

-- A fully duplicate retry (a client that lost the answer): 3,000 items with
-- 2 KB payloads sent again, through push_text and through push: every item
-- a duplicate naming its original id, nothing stored twice.
CREATE TEMP TABLE retry_body AS
SELECT '{"items":[' || string_agg(format('{"queue":"retryq","partition":"p%s","transactionId":"rt%s","payload":{"i":%s,"pad":"%s"}}',
         i % 3, i, i, repeat('x', 2000)), ',') || ']}' AS t
  FROM generate_series(1, 3000) i;
CREATE TEMP TABLE retry_orig AS SELECT queen.push_text(t)::jsonb AS r FROM retry_body;
CREATE TEMP TABLE retry_again AS SELECT queen.push_text(t)::jsonb AS r1, queen.push(t::jsonb) AS r2 FROM retry_body;
WITH o AS (SELECT n, x FROM retry_orig, jsonb_array_elements(r) WITH ORDINALITY e(x, n)),
     t AS (SELECT n, x FROM retry_again, jsonb_array_elements(r1) WITH ORDINALITY e(x, n)),
     j AS (SELECT n, x FROM retry_again, jsonb_array_elements(r2) WITH ORDINALITY e(x, n))
SELECT count(*) FILTER (WHERE o.x->>'status' = 'queued') AS original_queued,
       count(*) FILTER (WHERE t.x->>'status' = 'duplicate' AND t.x->>'message_id' = o.x->>'message_id') AS text_retry_original_ids,
       count(*) FILTER (WHERE j.x->>'status' = 'duplicate' AND j.x->>'message_id' = o.x->>'message_id') AS jsonb_retry_original_ids
  FROM o JOIN t USING (n) JOIN j USING (n);
SELECT sum(s.end_offset - s.base_offset + 1) AS frames_stored
  FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'retryq';

-- Segments are compressed before the window probe, as if nothing repeated;
-- the probe's verdict still decides. A retry whose payload has grown past
-- max_segment_size is still the duplicate of its original (dedup goes by
-- transactionId), and its fresh neighbour lands alone; a fresh item that
-- large is refused.
SET queen_streams.max_segment_size = '64kB';
SELECT queen.push_text('{"items":[{"queue":"limitq","transactionId":"L1","payload":1}]}')::jsonb->0->>'status' AS first;
SELECT x->>'status' AS status
  FROM jsonb_array_elements(queen.push_text('{"items":[{"queue":"limitq","transactionId":"L1","payload":"'
         || repeat('x', 70000) || '"},{"queue":"limitq","transactionId":"L2","payload":2}]}')::jsonb) x;
SELECT f.transaction_id, f.payload
  FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id
  JOIN queen.queues q ON q.id = p.queue_id,
       queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
 WHERE q.name = 'limitq' ORDER BY s.base_offset, f.idx;
-- The same for a segment over the limit as a whole, not once its
-- duplicate is set aside.
SELECT queen.push_text('{"items":[{"queue":"limitq","transactionId":"M1","payload":"' || repeat('m', 40000) || '"}]}')::jsonb->0->>'status' AS first;
SELECT x->>'status' AS status
  FROM jsonb_array_elements(queen.push_text('{"items":[{"queue":"limitq","transactionId":"M1","payload":"'
         || repeat('m', 40000) || '"},{"queue":"limitq","transactionId":"M2","payload":"' || repeat('n', 40000) || '"}]}')::jsonb) x;
SELECT queen.push_text('{"items":[{"queue":"limitq","transactionId":"L3","payload":"' || repeat('x', 70000) || '"}]}');
RESET queen_streams.max_segment_size;

-- A huge push_text is cancelled by statement_timeout while it parses:
-- 57014, and nothing of it is written.
CREATE TEMP TABLE cut_text AS
SELECT '{"items":[' || string_agg(format('{"queue":"cutt","transactionId":"c%s","payload":"%s"}', i, repeat('x', 200)), ',') || ']}' AS t
  FROM generate_series(1, 200000) i;
\set VERBOSITY sqlstate
SET statement_timeout = '100ms';
SELECT queen.push_text(t) IS NOT NULL FROM cut_text;
RESET statement_timeout;
\set VERBOSITY default
SELECT count(*) AS cut_queues FROM queen.queues WHERE name = 'cutt';

-- An error about the text says so in its context (the listener answers
-- those "bad body", doc/http.md); an item's error, raised once the whole
-- text has parsed, does not, nor does a cancel.
SELECT queen.push_text('{"items": [');
SELECT queen.push_text('{"items":[{"queue":"q","payload":1e999999}]}');
SELECT queen.push_text('{"items":[{"queue":"q","traceId":"no"}]}');
SELECT queen.push('{"items":[{"queue":"q","traceId":"no"}]}');
SET statement_timeout = '100ms';
DO $$
DECLARE
	ctx text;
BEGIN
	PERFORM queen.push_text(t) FROM cut_text;
EXCEPTION WHEN query_canceled THEN
	GET STACKED DIAGNOSTICS ctx = PG_EXCEPTION_CONTEXT;
	RAISE NOTICE 'cancel marked as the text''s: %', ctx LIKE '%push request''s JSON text%';
END $$;
RESET statement_timeout;

DROP EXTENSION queen_streams CASCADE;
