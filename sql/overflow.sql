-- Sizes computed from input cannot wrap (issue 13, point 10).
CREATE EXTENSION queen_streams;

\i test/include/helpers.sql

-- The decoder: a frame count whose count * 23 wraps around 2^64 (to 17)
-- is refused as corrupt, as is any count the buffer cannot hold.
CREATE TEMP TABLE seg AS SELECT queen.segment_pack('[{"id":"01890a5d-ac96-774b-bcce-b302099a8057","transactionId":"t","payload":{"a":1}}]') AS b;
SELECT count(*) AS frames FROM seg, queen.segment_frames(b, 1);
SELECT pg_temp.try($$SELECT count(*) FROM seg, queen.segment_frames(b, 802032351030850071)$$) AS wraps;
SELECT pg_temp.try($$SELECT count(*) FROM seg, queen.segment_frames(b, 9223372036854775807)$$) AS max;
SELECT pg_temp.try($$SELECT count(*) FROM seg, queen.segment_frames(b, 2)$$) AS two;
-- and through log_push_one_v1, whose count is an int
SELECT pg_temp.try($$SELECT queen.log_push_one_v1('o', 'Default', 2147483647, ''::bytea, -1, (SELECT b FROM seg))$$) AS push_count;

-- pop: partitions => INT_MAX asks for every partition (the candidate limit
-- was partitions * 4, which wrapped to a negative and fell back to 16).
SELECT count(*) AS pushed FROM jsonb_array_elements(queen.push(jsonb_build_object('items',
	(SELECT jsonb_agg(jsonb_build_object('queue', 'o', 'partition', 'p' || i, 'payload', i)) FROM generate_series(1, 20) i))));
SET queen_streams.max_pop_partitions = 2147483647;
SELECT r->>'partitionsClaimed' AS claimed, jsonb_array_length(r->'messages') AS messages
  FROM (SELECT queen.pop('o', batch => 100, partitions => 2147483647) r) p;
RESET queen_streams.max_pop_partitions;

DROP EXTENSION queen_streams;
