-- queen.log_push_one_v1: the allocator (stride guard, auto-create, dedup
-- probe, offsets, results).
CREATE EXTENSION queen_streams;

\i test/include/helpers.sql

-- A segment of frames with fixed ids for the given transaction ids.
CREATE FUNCTION pg_temp.seg(txns text[]) RETURNS bytea LANGUAGE sql AS $$
	SELECT queen.segment_pack(jsonb_agg(jsonb_build_object(
	         'id', '01890a5d-ac96-774b-bcce-' || lpad(i::text, 12, '0'),
	         'transactionId', txns[i], 'payload', jsonb_build_object('t', txns[i])) ORDER BY i))
	  FROM generate_subscripts(txns, 1) i
$$;
CREATE FUNCTION pg_temp.hashes(txns text[]) RETURNS bytea LANGUAGE sql AS $$
	SELECT string_agg(queen.txn_hash(t), ''::bytea ORDER BY i)
	  FROM unnest(txns) WITH ORDINALITY AS u(t, i)
$$;
CREATE FUNCTION pg_temp.push(q text, txns text[], verified bigint DEFAULT -1,
                             win int DEFAULT NULL, part text DEFAULT 'Default',
                             tenant uuid DEFAULT '00000000-0000-0000-0000-000000000001')
RETURNS jsonb LANGUAGE sql AS $$
	SELECT queen.log_push_one_v1(q, part, cardinality(txns), pg_temp.hashes(txns), verified,
	                             pg_temp.seg(txns), NULL, win, tenant)
$$;
-- The result without its timestamp.
CREATE FUNCTION pg_temp.verdict(r jsonb) RETURNS jsonb LANGUAGE sql AS $$
	SELECT r - 'createdAt'
$$;

-- Stride guard: count >= 1 and 16 bytes of hash per message.
SELECT pg_temp.try($$SELECT queen.log_push_one_v1('q', 'Default', 0, ''::bytea, -1, pg_temp.seg('{a}'))$$);
SELECT pg_temp.try($$SELECT queen.log_push_one_v1('q', 'Default', 2, pg_temp.hashes('{a}'), -1, pg_temp.seg('{a}'))$$);
SELECT pg_temp.try($$SELECT queen.log_push_one_v1('q', 'Default', 1, '\x00'::bytea, -1, pg_temp.seg('{a}'))$$);
SELECT pg_temp.try($$SELECT queen.log_push_one_v1('q', 'Default', -1, ''::bytea, -1, pg_temp.seg('{a}'))$$);
SELECT pg_temp.try($$SELECT queen.log_push_one_v1('q', 'Default', 1, NULL, -1, pg_temp.seg('{a}'))$$);
SELECT pg_temp.try($$SELECT queen.log_push_one_v1(NULL, 'Default', 1, pg_temp.hashes('{a}'), -1, pg_temp.seg('{a}'))$$);
SELECT pg_temp.try($$SELECT queen.log_push_one_v1('', 'Default', 1, pg_temp.hashes('{a}'), -1, pg_temp.seg('{a}'))$$);
SELECT pg_temp.try($$SELECT queen.log_push_one_v1('q', '', 1, pg_temp.hashes('{a}'), -1, pg_temp.seg('{a}'))$$);
-- The segment itself is checked before anything is stored: it must decode
-- into exactly msg_count frames, each hash must belong to its frame, and
-- payloads must be JSON. (A segment failing these would stop every later pop
-- of the partition, or leave its messages unackable.)
SELECT pg_temp.try($$SELECT queen.log_push_one_v1('q', 'Default', 2, pg_temp.hashes('{a,b}'), -1, pg_temp.seg('{a}'))$$);
SELECT pg_temp.try($$SELECT queen.log_push_one_v1('q', 'Default', 1, pg_temp.hashes('{a}'), -1, pg_temp.seg('{a,b}'))$$);
SELECT pg_temp.try($$SELECT queen.log_push_one_v1('q', 'Default', 1, pg_temp.hashes('{a}'), -1, '\x00010203'::bytea)$$);
SELECT pg_temp.try($$SELECT queen.log_push_one_v1('q', 'Default', 2, pg_temp.hashes('{b,a}'), -1, pg_temp.seg('{a,b}'))$$);
-- A hand-made zstd frame (one raw block) lets a frame carry any payload bytes.
CREATE FUNCTION pg_temp.le(n int, len int) RETURNS bytea LANGUAGE sql AS $$
	SELECT string_agg(set_byte('\x00'::bytea, 0, (n >> (8 * i)) & 255), ''::bytea ORDER BY i)
	  FROM generate_series(0, len - 1) i
$$;
CREATE FUNCTION pg_temp.raw_seg(txn text, payload text) RETURNS bytea LANGUAGE sql AS $$
	WITH f AS (
	  SELECT '\x00'::bytea || '\x01890a5dac96774bbcceb302099a8057'::bytea
	         || pg_temp.le(octet_length(txn), 2) || convert_to(txn, 'UTF8') || convert_to(payload, 'UTF8') AS body),
	     frame AS (SELECT pg_temp.le(octet_length(body), 4) || body AS b FROM f)
	SELECT '\x28b52ffd20'::bytea || pg_temp.le(octet_length(b), 1) || pg_temp.le(1 | (octet_length(b) << 3), 3) || b
	  FROM frame
$$;
SELECT transaction_id, payload FROM queen.segment_frames(pg_temp.raw_seg('r', '{"ok": 1}'), 1);
SELECT pg_temp.try($$SELECT queen.log_push_one_v1('q', 'Default', 1, pg_temp.hashes('{r}'), -1, pg_temp.raw_seg('r', 'not json'))$$);
SELECT pg_temp.try($$SELECT queen.log_push_one_v1('q', 'Default', 1, pg_temp.hashes('{r}'), -1, pg_temp.raw_seg('r', '{"a":'))$$);
-- Nothing was created by the refused calls.
SELECT count(*) AS queues FROM queen.queues;

-- queued: baseOffset and createdAt (UTC, microseconds) of the new segment;
-- queue and partition are auto-created, namespace/task from the dotted name.
CREATE TEMP TABLE r1 AS SELECT pg_temp.push('orders.create', '{a,b,c}') AS r;
SELECT pg_temp.verdict(r) AS result,
       r->>'createdAt' ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$' AS created_at_format
  FROM r1;
SELECT s.base_offset, s.end_offset,
       to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') = r->>'createdAt' AS created_at_matches,
       t.hashes = pg_temp.hashes('{a,b,c}') AS hashes_stored
  FROM r1, queen.log_segments s JOIN queen.log_txns t USING (partition_id, base_offset);
SELECT q.name, q.namespace, q.task, p.name AS part, p.last_offset
  FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id;

-- The next segment starts right after.
SELECT pg_temp.verdict(pg_temp.push('orders.create', '{d,e}'));

-- duplicate: any hash already stored inside the window makes the whole
-- segment a duplicate; dups lists [incoming index, original offset], and
-- nothing is written.
SELECT pg_temp.push('orders.create', '{x,b,y,e}');
SELECT pg_temp.push('orders.create', '{c}');
SELECT p.last_offset, (SELECT count(*) FROM queen.log_segments) AS segments,
       (SELECT count(*) FROM queen.log_txns) AS hash_rows
  FROM queen.log_partitions p;

-- Within one segment nothing is deduplicated: positions are kept.
SELECT pg_temp.verdict(pg_temp.push('orders.create', '{f,f}'));
-- A hash stored several times reports its lowest (original) offset.
SELECT pg_temp.push('orders.create', '{f}');

-- p_verified: the caller vouches for everything up to that offset, so only
-- later segments are probed.
SELECT pg_temp.verdict(pg_temp.push('orders.create', '{a}', verified => 1));
SELECT pg_temp.verdict(pg_temp.push('orders.create', '{a}', verified => 2));

-- p_window = 0 (or a queue with dedup_window_seconds = 0) skips the probe.
SELECT pg_temp.verdict(pg_temp.push('orders.create', '{b}', win => 0));
UPDATE queen.queues SET dedup_window_seconds = 0;
SELECT pg_temp.verdict(pg_temp.push('orders.create', '{b}'));
UPDATE queen.queues SET dedup_window_seconds = 60;
SELECT pg_temp.push('orders.create', '{b}');
-- The window is time-bounded: rows older than it are not probed.
UPDATE queen.queues SET dedup_window_seconds = 1;
SELECT pg_sleep(1.1);
SELECT pg_temp.verdict(pg_temp.push('orders.create', '{b}'));
UPDATE queen.queues SET dedup_window_seconds = 60;

-- An explicit partition id and window skip the name lookup.
SELECT pg_temp.verdict(queen.log_push_one_v1('ignored', 'ignored', 1, pg_temp.hashes('{z}'), -1,
         pg_temp.seg('{z}'), (SELECT id FROM queen.log_partitions), 3600));
SELECT count(*) AS queues, (SELECT count(*) FROM queen.log_partitions) AS partitions FROM queen.queues;
SELECT queen.log_push_one_v1('ignored', 'ignored', 1, pg_temp.hashes('{z}'), -1,
         pg_temp.seg('{z}'), (SELECT id FROM queen.log_partitions), 3600);

-- Offsets, frames and hashes line up over the whole log.
SELECT s.base_offset, s.end_offset,
       (SELECT string_agg(f.transaction_id, ',' ORDER BY f.idx)
          FROM queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f) AS txns,
       t.hashes = (SELECT string_agg(queen.txn_hash(f.transaction_id), ''::bytea ORDER BY f.idx)
                     FROM queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f) AS hashes_ok
  FROM queen.log_segments s JOIN queen.log_txns t USING (partition_id, base_offset)
 ORDER BY 1;
-- created_at is monotone in offsets.
SELECT bool_and(prev IS NULL OR prev <= created_at) AS monotone
  FROM (SELECT created_at, lag(created_at) OVER (ORDER BY base_offset) AS prev
          FROM queen.log_segments) s;

-- Tenants: the same names under another tenant are another queue.
SELECT pg_temp.verdict(pg_temp.push('orders.create', '{a}', tenant => '33333333-3333-3333-3333-333333333333'));
SELECT q.tenant_id, q.name, p.name AS part, p.last_offset
  FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id ORDER BY 1;
-- A new partition of an existing queue is created on first push.
SELECT pg_temp.verdict(pg_temp.push('orders.create', '{a}', part => 'eu'));
SELECT q.tenant_id, p.name AS part, p.last_offset
  FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id ORDER BY 1, 2;

-- A hand-made segment that passes the checks is stored and delivered as is.
SELECT pg_temp.verdict(queen.log_push_one_v1('raw', 'Default', 1, pg_temp.hashes('{r}'), -1,
                                             pg_temp.raw_seg('r', '{"hand": "made"}')));
SELECT m->>'transactionId' AS txn, m->'data' AS data
  FROM jsonb_array_elements(queen.pop('raw', auto_ack => true)->'messages') m;

-- The writes go through the table access method, not a statement
-- (segment_write.c): the allocator row moves, its timestamps are set, and
-- AFTER ROW triggers fire as they would for a statement (UPDATE OF too).
CREATE TABLE pg_temp.seen (tbl text, base bigint);
CREATE FUNCTION pg_temp.seen_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO pg_temp.seen VALUES (TG_TABLE_NAME, NEW.base_offset);
	RETURN NEW;
END $$;
CREATE FUNCTION pg_temp.seen_alloc() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO pg_temp.seen VALUES (TG_TABLE_NAME || ' ' || TG_NAME, NEW.last_offset);
	RETURN NEW;
END $$;
CREATE TRIGGER seen AFTER INSERT ON queen.log_txns FOR EACH ROW EXECUTE FUNCTION pg_temp.seen_row();
CREATE TRIGGER seen AFTER UPDATE OF last_offset ON queen.log_partitions
	FOR EACH ROW EXECUTE FUNCTION pg_temp.seen_alloc();
CREATE TRIGGER unseen AFTER UPDATE OF name ON queen.log_partitions
	FOR EACH ROW EXECUTE FUNCTION pg_temp.seen_alloc();
BEGIN;
SELECT pg_temp.verdict(pg_temp.push('writes', '{w1}'));
SELECT pg_temp.verdict(pg_temp.push('writes', '{w2,w3}'));
SELECT pg_temp.verdict(pg_temp.push('writes', '{w4}'));
SELECT p.last_offset, p.last_write_at = now() AS write_at_now,
       p.oldest_live_at = now() AS live_at_now, p.oldest_txn_at = now() AS txn_at_now
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'writes';
SELECT tbl, base FROM pg_temp.seen ORDER BY tbl, base;
COMMIT;
DROP TRIGGER seen ON queen.log_txns;
DROP TRIGGER seen ON queen.log_partitions;
DROP TRIGGER unseen ON queen.log_partitions;
-- Triggers it cannot run make the push fail, and nothing is written.
CREATE FUNCTION pg_temp.keep_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
BEGIN;
CREATE TRIGGER before_row BEFORE INSERT ON queen.log_txns FOR EACH ROW EXECUTE FUNCTION pg_temp.keep_row();
SELECT pg_temp.try($$SELECT pg_temp.push('writes', '{w5}')$$);
ROLLBACK;
BEGIN;
CREATE TRIGGER per_statement AFTER UPDATE ON queen.log_partitions FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.keep_row();
SELECT pg_temp.try($$SELECT pg_temp.push('writes', '{w5}')$$);
ROLLBACK;
-- A column the append does not know would be written NULL: it refuses.
BEGIN;
ALTER TABLE queen.log_segments ADD COLUMN extra int DEFAULT 7;
SELECT pg_temp.try($$SELECT pg_temp.push('writes', '{w5}')$$);
ROLLBACK;
SELECT pg_temp.verdict(pg_temp.push('writes', '{w5}'));

DROP EXTENSION queen_streams CASCADE;
