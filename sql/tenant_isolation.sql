-- The cross-tenant suite (facts §12) over SQL: tenants A, B, C, D and the
-- default tenant use the same query, queue and sink names and stay
-- independent; another tenant's query_id, partition_id or lease id is of no
-- use (empty reads, "query not found", "partition not found", "partition not
-- owned by tenant", nothing renewed) and nothing of it is written; the quota
-- ladder; reset wipes only the caller's state; the encryption flag is read
-- from the request tenant's queue only.
CREATE EXTENSION queen_streams;

\i test/include/helpers.sql

-- The tenants, by label.
CREATE TEMP TABLE t (label text PRIMARY KEY, id uuid NOT NULL UNIQUE);
INSERT INTO t VALUES ('default', '00000000-0000-0000-0000-000000000001'),
	('A', 'aaaaaaaa-0000-4000-8000-00000000000a'), ('B', 'bbbbbbbb-0000-4000-8000-00000000000b'),
	('C', 'cccccccc-0000-4000-8000-00000000000c'), ('D', 'dddddddd-0000-4000-8000-00000000000d');
CREATE FUNCTION pg_temp.tid(l text) RETURNS uuid LANGUAGE sql AS $$ SELECT id FROM t WHERE label = l $$;
CREATE FUNCTION pg_temp.tl(u uuid) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce((SELECT label FROM t WHERE id = u), 'other') $$;
-- Label order: default first, then A..D.
CREATE FUNCTION pg_temp.ord(l text) RETURNS text LANGUAGE sql AS $$
	SELECT CASE l WHEN 'default' THEN '0' ELSE l END $$;

-- Fixture values (query ids, partition ids, leases) by tenant and name.
CREATE TEMP TABLE fx (label text, name text, val text, PRIMARY KEY (label, name));
CREATE FUNCTION pg_temp.fx(l text, n text) RETURNS text LANGUAGE sql AS $$
	SELECT val FROM fx WHERE label = l AND name = n $$;
CREATE FUNCTION pg_temp.keep(l text, n text, v text) RETURNS void LANGUAGE sql AS $$
	INSERT INTO fx VALUES (l, n, v) ON CONFLICT (label, name) DO UPDATE SET val = EXCLUDED.val $$;

-- The stored id of a tenant's query.
CREATE FUNCTION pg_temp.qid(l text, n text) RETURNS text LANGUAGE sql AS $$
	SELECT id::text FROM queen_streams.queries WHERE tenant_id = pg_temp.tid(l) AND name = n $$;

-- One registration: its verdict, and whether the query_id answered is the
-- caller's own stored query (`own`; null when none is answered).
CREATE FUNCTION pg_temp.reg(l text, n text, hash text DEFAULT 'h1', extra jsonb DEFAULT '{}',
	OUT success text, OUT fresh text, OUT reset text, OUT denied text, OUT error text,
	OUT http int, OUT own boolean)
LANGUAGE sql AS $$
	WITH c AS (SELECT queen_streams.register_query(jsonb_build_object('name', n,
	             'source_queue', 'iso_src', 'sink_queue', 'iso_sink', 'config_hash', hash) || extra,
	             pg_temp.tid(l)) AS r)
	SELECT r->>'success', r->>'fresh', r->>'reset', r->>'denied', r->>'error',
	       queen_streams.http_status('queries', r), r->>'query_id' = pg_temp.qid(l, n)
	  FROM c
$$;

-- Queries per tenant.
CREATE FUNCTION pg_temp.queries() RETURNS TABLE (tenant text, queries text) LANGUAGE sql AS $$
	SELECT t.label, coalesce(string_agg(q.name, ',' ORDER BY q.name), '')
	  FROM t LEFT JOIN queen_streams.queries q ON q.tenant_id = t.id
	 GROUP BY t.label ORDER BY pg_temp.ord(t.label)
$$;

-- A queue under each tenant: its partitions and, per segment, the payloads.
CREATE FUNCTION pg_temp.queue(qname text)
RETURNS TABLE (tenant text, namespace text, part text, base bigint, payloads text)
LANGUAGE sql AS $$
	SELECT pg_temp.tl(q.tenant_id), q.namespace::text, p.name, s.base_offset,
	       (SELECT string_agg(f.payload, ' ' ORDER BY f.idx)
	          FROM queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f)
	  FROM queen.queues q LEFT JOIN queen.log_partitions p ON p.queue_id = q.id
	  LEFT JOIN queen.log_segments s ON s.partition_id = p.id
	 WHERE q.name = qname ORDER BY pg_temp.ord(pg_temp.tl(q.tenant_id)), p.name, s.base_offset
$$;

-- The messages of a pop: transaction ids and data.
CREATE FUNCTION pg_temp.msgs(r jsonb) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(m->>'transactionId' || '=' || (m->'data')::text, ' ' ORDER BY n), '(none)')
	  FROM jsonb_array_elements(r->'messages') WITH ORDINALITY AS e(m, n)
$$;

-- A cursor, with the lease named relative to the one expected.
CREATE FUNCTION pg_temp.cur(pid text, expect_lease text, grp text DEFAULT '__QUEUE_MODE__')
RETURNS TABLE (committed bigint, batch_end bigint, lease text, live boolean)
LANGUAGE sql AS $$
	SELECT c.committed, c.batch_end,
	       CASE WHEN c.worker_id IS NULL THEN 'none' WHEN c.worker_id = expect_lease THEN 'same' ELSE 'other' END,
	       c.lease_expires_at > now()
	  FROM queen.log_consumers c WHERE c.partition_id = pid::uuid AND c.consumer_group = grp
$$;

-- Everything the tables hold, as one fingerprint: compared before and after
-- calls that must write nothing.
CREATE FUNCTION pg_temp.world() RETURNS text LANGUAGE sql AS $$
	SELECT md5(concat_ws('|',
	  (SELECT string_agg(concat_ws(',', id, tenant_id, name, lease_time, encryption_enabled), ';' ORDER BY id) FROM queen.queues),
	  (SELECT string_agg(concat_ws(',', id, queue_id, name, last_offset, log_start), ';' ORDER BY id) FROM queen.log_partitions),
	  (SELECT string_agg(concat_ws(',', partition_id, base_offset, end_offset, md5(blob)), ';' ORDER BY partition_id, base_offset) FROM queen.log_segments),
	  (SELECT string_agg(concat_ws(',', partition_id, base_offset, md5(hashes)), ';' ORDER BY partition_id, base_offset) FROM queen.log_txns),
	  (SELECT string_agg(concat_ws(',', partition_id, consumer_group, committed, batch_end, worker_id, lease_expires_at,
	                               batch_retry_count, total_consumed), ';' ORDER BY partition_id, consumer_group) FROM queen.log_consumers),
	  (SELECT string_agg(concat_ws(',', id, partition_id, "offset"), ';' ORDER BY id) FROM queen.log_dlq),
	  (SELECT string_agg(concat_ws(',', id, tenant_id, name, config_hash, updated_at), ';' ORDER BY id) FROM queen_streams.queries),
	  (SELECT string_agg(concat_ws(',', query_id, partition_id, key, value, updated_at), ';' ORDER BY query_id, partition_id, key) FROM queen_streams.state)))
$$;
CREATE TEMP TABLE snap (at text PRIMARY KEY, world text);
-- The per-queue counters live as long as the server: keep where they start.
CREATE TEMP TABLE metrics_before AS SELECT tenant_id, queue, pushed FROM queen_streams.metrics;

-- A cycle's verdict (generated ids left out).
CREATE FUNCTION pg_temp.cyc(l text, req jsonb,
	OUT success text, OUT error text, OUT applied int, OUT pushed jsonb, OUT ack jsonb)
LANGUAGE sql AS $$
	SELECT r->>'success', r->>'error', (r->>'state_ops_applied')::int,
	       (SELECT coalesce(jsonb_agg(jsonb_build_object('queue', e->'queue', 'status', e->'status',
	                                                     'count', e->'count') ORDER BY n), '[]')
	          FROM jsonb_array_elements(r->'push_results') WITH ORDINALITY AS x(e, n)),
	       r->'ack_result'
	  FROM queen_streams.cycle(req, pg_temp.tid(l)) r
$$;

-- Stream state per tenant, as key=value.
CREATE FUNCTION pg_temp.state() RETURNS TABLE (tenant text, state text) LANGUAGE sql AS $$
	SELECT t.label, coalesce(string_agg(s.key || '=' || s.value::text, ' ' ORDER BY s.key), '(empty)')
	  FROM t LEFT JOIN queen_streams.queries q ON q.tenant_id = t.id
	  LEFT JOIN queen_streams.state s ON s.query_id = q.id
	 GROUP BY t.label ORDER BY pg_temp.ord(t.label)
$$;

-------------------------------------------------------------------------
-- Same names, independent: the query iso.q (source iso_src, sink iso_sink)
-- registered under the default tenant, A, B and C is four queries, each
-- fresh once. Re-registering answers the caller's own query.
-------------------------------------------------------------------------
INSERT INTO queen_streams.quota (tenant_id) SELECT pg_temp.tid(l) FROM unnest(ARRAY['A', 'B', 'C']) l;
SELECT l AS tenant, r.* FROM unnest(ARRAY['default', 'A', 'B', 'C']) l, LATERAL pg_temp.reg(l, 'iso.q') r;
SELECT l AS tenant, r.* FROM unnest(ARRAY['default', 'A', 'B', 'C']) l, LATERAL pg_temp.reg(l, 'iso.q') r;
SELECT count(*) AS rows, count(DISTINCT id) AS ids, count(DISTINCT tenant_id) AS tenants
  FROM queen_streams.queries WHERE name = 'iso.q';
SELECT pg_temp.keep(l, 'q', pg_temp.qid(l, 'iso.q')) FROM unnest(ARRAY['default', 'A', 'B', 'C']) l;
-- A changed config_hash under B is B's own 409: B's query_id, never denied,
-- and nobody else's registration moves.
CREATE TEMP TABLE snap_reg AS SELECT * FROM queen_streams.queries;
SELECT * FROM pg_temp.reg('B', 'iso.q', 'h2');
SELECT count(*) AS unchanged_registrations FROM queen_streams.queries q JOIN snap_reg s USING (id)
 WHERE (q.config_hash, q.updated_at) = (s.config_hash, s.updated_at);

-- The same queue name and the same transactionId under every tenant: five
-- queues, each with its own message; dedup is per tenant's queue.
SELECT l AS tenant, queen.push(jsonb_build_object('items', jsonb_build_array(
         jsonb_build_object('queue', 'iso_src', 'transactionId', 'same-txn', 'payload', jsonb_build_object('t', l)))),
         pg_temp.tid(l))->0->>'status' AS status
  FROM unnest(ARRAY['default', 'A', 'B', 'C', 'D']) l;
SELECT queen.push('{"items":[{"queue":"iso_src","transactionId":"same-txn","payload":{"t":"A again"}}]}',
                  pg_temp.tid('A'))->0->>'status' AS a_again;
SELECT * FROM pg_temp.queue('iso_src');
-- Each tenant's pop finds its own message only.
CREATE TEMP TABLE pops (label text PRIMARY KEY, r jsonb);
INSERT INTO pops SELECT l, queen.pop('iso_src', batch => 10, tenant => pg_temp.tid(l))
  FROM unnest(ARRAY['default', 'A', 'B', 'C', 'D']) l;
SELECT label AS tenant, pg_temp.msgs(r) FROM pops ORDER BY pg_temp.ord(label);
SELECT count(DISTINCT r->>'partitionId') AS partitions, count(DISTINCT r->>'leaseId') AS leases FROM pops;
SELECT pg_temp.keep(label, 'pid', r->>'partitionId'), pg_temp.keep(label, 'lease', r->>'leaseId') FROM pops;

-- Without a tenant argument (or with NULL) a call is the default tenant's.
SELECT r->>'fresh' AS fresh, r->>'query_id' = pg_temp.fx('default', 'q') AS default_query
  FROM queen_streams.register_query('{"name":"iso.q","source_queue":"iso_src","sink_queue":"iso_sink","config_hash":"h1"}') r;
SELECT r->>'fresh' AS fresh, r->>'query_id' = pg_temp.fx('default', 'q') AS default_query
  FROM queen_streams.register_query('{"name":"iso.q","source_queue":"iso_src","sink_queue":"iso_sink","config_hash":"h1"}', NULL) r;

-------------------------------------------------------------------------
-- Cycles with the same sink name: the default tenant's iso_sink exists with
-- a segment; every other tenant's sink is auto-created under that tenant and
-- never grows another tenant's same-named queue.
-------------------------------------------------------------------------
SELECT queen.push('{"items":[{"queue":"iso_sink","payload":{"pre":"default"}}]}')->0->>'status' AS pre_existing;
SELECT l AS tenant, c.*
  FROM unnest(ARRAY['default', 'A', 'B', 'C']) l,
       LATERAL pg_temp.cyc(l, jsonb_build_object('query_id', pg_temp.fx(l, 'q'), 'partition_id', pg_temp.fx(l, 'pid'),
         'state_ops', jsonb_build_array(jsonb_build_object('type', 'upsert', 'key', 'k', 'value', jsonb_build_object('t', l))),
         'push_items', jsonb_build_array(jsonb_build_object('queue', 'iso_sink', 'payload', jsonb_build_object('from', l))),
         'ack', jsonb_build_object('leaseId', pg_temp.fx(l, 'lease'), 'count', 1))) c;
SELECT * FROM pg_temp.queue('iso_sink');
SELECT * FROM pg_temp.state();
SELECT label AS tenant, c.* FROM pops, LATERAL pg_temp.cur(r->>'partitionId', r->>'leaseId') c
 ORDER BY pg_temp.ord(label);
-- Without a tenant argument the default tenant's shard is read, and the
-- default tenant's query only.
SELECT queen_streams.state_get(jsonb_build_object('query_id', pg_temp.fx('default', 'q'),
         'partition_id', pg_temp.fx('default', 'pid'))) -> 'rows' -> 0 -> 'value' AS default_state;
SELECT queen_streams.state_get(jsonb_build_object('query_id', pg_temp.fx('A', 'q'),
         'partition_id', pg_temp.fx('A', 'pid'))) AS a_state_read_without_tenant;

-------------------------------------------------------------------------
-- state_get: every tenant reads its own query's shard; another tenant's
-- query_id (with that tenant's own partition) reads as success:true with no
-- rows, exactly like an unknown one.
-------------------------------------------------------------------------
SELECT caller.l AS caller, owner.l AS owner, r->>'success' AS success,
       jsonb_array_length(r->'rows') AS rows, queen_streams.http_status('state/get', r) AS http
  FROM unnest(ARRAY['default', 'A', 'B', 'C']) caller(l), unnest(ARRAY['default', 'A', 'B', 'C']) owner(l),
       LATERAL queen_streams.state_get(jsonb_build_object('query_id', pg_temp.fx(owner.l, 'q'),
                 'partition_id', pg_temp.fx(owner.l, 'pid')), pg_temp.tid(caller.l)) r
 ORDER BY pg_temp.ord(caller.l), pg_temp.ord(owner.l);
-- Filters do not change that: keys and prefix that match B's row, read by A.
SELECT queen_streams.state_get(jsonb_build_object('query_id', pg_temp.fx('B', 'q'), 'partition_id', pg_temp.fx('B', 'pid'),
         'keys', '["k"]'::jsonb, 'key_prefix', 'k'), pg_temp.tid('A')) AS a_reads_b;
SELECT queen_streams.state_get(jsonb_build_object('query_id', '01900000-0000-7000-8000-000000000000',
         'partition_id', pg_temp.fx('B', 'pid')), pg_temp.tid('B')) AS unknown_query;

-------------------------------------------------------------------------
-- cycle: another tenant's partition is "partition not found" (checked
-- first, as a bogus one is); another tenant's query is "query not found".
-- Each carries state ops, sink pushes (to an existing and a new sink) and
-- an ack with the owner's live lease; none of it is written.
-------------------------------------------------------------------------
INSERT INTO pops SELECT l, NULL FROM unnest(ARRAY['default', 'A', 'B', 'C']) l
  ON CONFLICT (label) DO NOTHING;
SELECT l AS tenant, queen.push(jsonb_build_object('items', jsonb_build_array(
         jsonb_build_object('queue', 'iso_src', 'transactionId', 'second', 'payload', jsonb_build_object('t', l, 'n', 2)))),
         pg_temp.tid(l))->0->>'status' AS status
  FROM unnest(ARRAY['default', 'A', 'B', 'C']) l;
UPDATE pops SET r = queen.pop('iso_src', batch => 10, tenant => pg_temp.tid(label));
SELECT label AS tenant, pg_temp.msgs(r) FROM pops ORDER BY pg_temp.ord(label);
SELECT pg_temp.keep(label, 'lease', r->>'leaseId') FROM pops WHERE r->>'leaseId' IS NOT NULL;
-- Every request: caller, whose query, whose partition.
CREATE FUNCTION pg_temp.foreign_cycle(caller text, q_of text, p_of text) RETURNS TABLE (success text, error text,
	applied int, pushed jsonb, ack jsonb) LANGUAGE sql AS $$
	SELECT * FROM pg_temp.cyc(caller, jsonb_build_object(
	  'query_id', coalesce(pg_temp.fx(q_of, 'q'), '01900000-0000-7000-8000-000000000000'),
	  'partition_id', coalesce(pg_temp.fx(p_of, 'pid'), '01900000-0000-7000-8000-00000000000f'),
	  'state_ops', '[{"type":"upsert","key":"k","value":{"t":"intruder"}},{"type":"upsert","key":"new","value":1}]'::jsonb,
	  'push_items', '[{"queue":"iso_sink","payload":{"from":"intruder"}},{"queue":"iso_intruder_sink","payload":1}]'::jsonb,
	  'ack', jsonb_build_object('leaseId', pg_temp.fx(p_of, 'lease'), 'count', 5)))
$$;
INSERT INTO snap VALUES ('before foreign cycles', pg_temp.world());
SELECT caller, q_of AS query_of, p_of AS partition_of, c.*
  FROM (VALUES ('A', 'A', 'B'), ('A', 'B', 'A'), ('A', 'B', 'B'), ('A', 'A', 'nobody'), ('A', 'nobody', 'A'),
               ('B', 'A', 'A'), ('C', 'C', 'A'), ('default', 'A', 'A'), ('default', 'default', 'A'),
               ('default', 'A', 'default'), ('A', 'default', 'default')) v(caller, q_of, p_of),
       LATERAL pg_temp.foreign_cycle(caller, q_of, p_of) c;
SELECT world = pg_temp.world() AS nothing_written FROM snap WHERE at = 'before foreign cycles';
SELECT count(*) AS intruder_sinks FROM queen.queues WHERE name = 'iso_intruder_sink';
SELECT label AS tenant, c.* FROM pops, LATERAL pg_temp.cur(r->>'partitionId', r->>'leaseId') c
 ORDER BY pg_temp.ord(label);
-- The owners' own cycles still go through on those leases.
SELECT l AS tenant, c.success, c.error, c.ack
  FROM unnest(ARRAY['default', 'A', 'B', 'C']) l,
       LATERAL pg_temp.cyc(l, jsonb_build_object('query_id', pg_temp.fx(l, 'q'), 'partition_id', pg_temp.fx(l, 'pid'),
         'ack', jsonb_build_object('leaseId', pg_temp.fx(l, 'lease'), 'count', 1))) c;

-------------------------------------------------------------------------
-- pop, ack and renew_lease across tenants: a pop under B of A's queue name
-- finds B's own queue (or nothing); A's partitionId is "partition not owned
-- by tenant" to B's ack; A's lease id renews nothing under B.
-------------------------------------------------------------------------
SELECT queen.push('{"items":[{"queue":"iso_work","partition":"p","transactionId":"a-1","payload":{"t":"A"}},
                             {"queue":"iso_work","partition":"p","transactionId":"a-2","payload":{"t":"A"}}]}',
                  pg_temp.tid('A'))->0->>'status' AS pushed_a;
CREATE TEMP TABLE work (label text PRIMARY KEY, r jsonb);
INSERT INTO work SELECT 'A', queen.pop('iso_work', batch => 1, tenant => pg_temp.tid('A'));
SELECT pg_temp.msgs(r) AS a_popped FROM work WHERE label = 'A';
-- B has no iso_work: nothing, and no queue is created for it by the pop.
SELECT r->'partitionsClaimed' AS claimed, r->'leaseId' AS lease, pg_temp.msgs(r)
  FROM queen.pop('iso_work', batch => 10, tenant => pg_temp.tid('B')) r;
SELECT r->'partitionsClaimed' AS claimed, pg_temp.msgs(r)
  FROM queen.pop('iso_work', 'p', batch => 10, tenant => pg_temp.tid('B')) r;
SELECT r->'partitionsClaimed' AS claimed, pg_temp.msgs(r)
  FROM queen.pop('iso_work', 'p', consumer_group => 'g', batch => 10, tenant => pg_temp.tid('B')) r;
SELECT pg_temp.tl(tenant_id) AS tenant, name FROM queen.queues WHERE name = 'iso_work';
-- Once B has its own iso_work, a pop under B finds B's message only.
SELECT queen.push('{"items":[{"queue":"iso_work","partition":"p","transactionId":"a-2","payload":{"t":"B"}}]}',
                  pg_temp.tid('B'))->0->>'status' AS pushed_b;
INSERT INTO work SELECT 'B', queen.pop('iso_work', batch => 10, tenant => pg_temp.tid('B'));
SELECT label AS tenant, pg_temp.msgs(r), r->>'partition' AS partition FROM work ORDER BY label;
SELECT count(DISTINCT r->>'partitionId') AS distinct_partitions FROM work;
INSERT INTO snap VALUES ('before foreign acks', pg_temp.world());
-- Acks under B (and the default tenant, and C) naming A's partition, lease
-- and transaction: not owned, whatever the status or form.
CREATE FUNCTION pg_temp.ack_as(l text, body jsonb) RETURNS TABLE (success text, error text, released text, dlq text)
LANGUAGE sql AS $$
	SELECT a->>'success', a->>'error', a->>'leaseReleased', a->>'dlq'
	  FROM jsonb_array_elements(queen.ack(body, pg_temp.tid(l))) a
$$;
SELECT l AS caller, status, a.*
  FROM unnest(ARRAY['B', 'default', 'C']) l, unnest(ARRAY['completed', 'failed', 'dlq', 'retry']) status, work w,
       LATERAL pg_temp.ack_as(l, jsonb_build_object('transactionId', 'a-1', 'partitionId', w.r->>'partitionId',
                                                    'leaseId', w.r->>'leaseId', 'status', status)) a
 WHERE w.label = 'A' ORDER BY pg_temp.ord(l), status;
SELECT a.* FROM work w, LATERAL pg_temp.ack_as('B', jsonb_build_object('acknowledgments', jsonb_build_array(
         jsonb_build_object('transactionId', 'a-1', 'partitionId', w.r->>'partitionId', 'leaseId', w.r->>'leaseId'),
         jsonb_build_object('transactionId', 'a-1', 'partitionId', w.r->>'partitionId')))) a
 WHERE w.label = 'A';
-- Without a lease id (the lease is checked only when named) it is still not B's.
SELECT a.* FROM work w, LATERAL pg_temp.ack_as('B', jsonb_build_object('transactionId', 'a-1',
         'partitionId', w.r->>'partitionId')) a WHERE w.label = 'A';
-- A partition that does not exist answers the same.
SELECT * FROM pg_temp.ack_as('B', '{"transactionId":"a-1","partitionId":"01900000-0000-7000-8000-00000000000f"}');
-- Under A, B's lease id on A's partition is not A's lease.
SELECT a.* FROM work wa, work wb, LATERAL pg_temp.ack_as('A', jsonb_build_object('transactionId', 'a-1',
         'partitionId', wa.r->>'partitionId', 'leaseId', wb.r->>'leaseId')) a
 WHERE wa.label = 'A' AND wb.label = 'B';
-- B's cycle naming A's lease on B's own partition: not a lease of B's.
SELECT c.success, c.error FROM work wa,
       LATERAL pg_temp.cyc('B', jsonb_build_object('query_id', pg_temp.fx('B', 'q'),
         'partition_id', (SELECT r->>'partitionId' FROM work WHERE label = 'B'),
         'state_ops', '[{"type":"upsert","key":"stolen","value":1}]'::jsonb,
         'ack', jsonb_build_object('leaseId', wa.r->>'leaseId', 'count', 1))) c
 WHERE wa.label = 'A';
-- Renewing A's lease under B, C or the default tenant renews nothing.
SELECT l AS caller, x->>'success' AS success, x->>'renewed' AS renewed, x->>'expiresAt' AS expires_at
  FROM unnest(ARRAY['B', 'C', 'default']) l, work w,
       LATERAL queen.renew_lease(w.r->>'leaseId', 3600, pg_temp.tid(l)) x
 WHERE w.label = 'A' ORDER BY pg_temp.ord(l);
SELECT world = pg_temp.world() AS nothing_written FROM snap WHERE at = 'before foreign acks';
SELECT w.label AS tenant, c.* FROM work w, LATERAL pg_temp.cur(w.r->>'partitionId', w.r->>'leaseId') c ORDER BY 1;
-- A's own renewal and ack work.
SELECT x->>'success' AS success, x->>'renewed' AS renewed
  FROM work w, LATERAL queen.renew_lease(w.r->>'leaseId', 3600, pg_temp.tid('A')) x WHERE w.label = 'A';
SELECT a.* FROM work w, LATERAL pg_temp.ack_as('A', jsonb_build_object('transactionId', 'a-1',
         'partitionId', w.r->>'partitionId', 'leaseId', w.r->>'leaseId')) a WHERE w.label = 'A';
SELECT w.label AS tenant, c.* FROM work w, LATERAL pg_temp.cur(w.r->>'partitionId', w.r->>'leaseId') c ORDER BY 1;
-- B's message is still B's to take; A's next pop gets A's next message.
SELECT pg_temp.msgs(queen.pop('iso_work', batch => 10, tenant => pg_temp.tid('A'), auto_ack => true)) AS a_next;

-------------------------------------------------------------------------
-- The quota ladder (tenant D): no quota row: denied; enabled: granted;
-- revoked: the existing query still re-registers (hash match, 409, reset)
-- while a new name is denied. The default tenant is never gated.
-------------------------------------------------------------------------
SELECT * FROM pg_temp.reg('D', 'iso.q');
SELECT * FROM pg_temp.queries() WHERE tenant = 'D';
INSERT INTO queen_streams.quota (tenant_id) VALUES (pg_temp.tid('D'));
SELECT * FROM pg_temp.reg('D', 'iso.q');
SELECT * FROM pg_temp.reg('D', 'iso.d2');
UPDATE queen_streams.quota SET enabled = false WHERE tenant_id = pg_temp.tid('D');
SELECT 'same hash' AS re_register, * FROM pg_temp.reg('D', 'iso.q');
SELECT 'other hash' AS re_register, * FROM pg_temp.reg('D', 'iso.q', 'h9');
SELECT 'other hash, reset' AS re_register, * FROM pg_temp.reg('D', 'iso.q', 'h9', '{"reset":true}');
SELECT 'new name' AS re_register, * FROM pg_temp.reg('D', 'iso.d3');
-- The row removed altogether: the same.
DELETE FROM queen_streams.quota WHERE tenant_id = pg_temp.tid('D');
SELECT * FROM pg_temp.reg('D', 'iso.d2');
SELECT * FROM pg_temp.reg('D', 'iso.d3');
-- The default tenant: no quota row, and even a disabled one with a zero cap
-- is never read.
SELECT * FROM pg_temp.reg('default', 'iso.default2');
INSERT INTO queen_streams.quota (tenant_id, enabled, max_queries) VALUES (pg_temp.tid('default'), false, 0);
SELECT * FROM pg_temp.reg('default', 'iso.default3');
DELETE FROM queen_streams.quota WHERE tenant_id = pg_temp.tid('default');
-- max_queries is exact and per tenant: C may have 3 queries, A 2, B 3.
UPDATE queen_streams.quota SET max_queries = v.m
  FROM (VALUES ('A', 2), ('B', 3), ('C', 3)) v(l, m) WHERE tenant_id = pg_temp.tid(v.l);
SELECT * FROM pg_temp.queries();
SELECT 'C' AS tenant, 'iso.c2' AS name, * FROM pg_temp.reg('C', 'iso.c2');
SELECT 'C' AS tenant, 'iso.c3' AS name, * FROM pg_temp.reg('C', 'iso.c3');
SELECT 'C' AS tenant, 'iso.c4' AS name, * FROM pg_temp.reg('C', 'iso.c4');
SELECT 'C' AS tenant, 'iso.c3' AS name, * FROM pg_temp.reg('C', 'iso.c3');
SELECT 'A' AS tenant, 'iso.a2' AS name, * FROM pg_temp.reg('A', 'iso.a2');
SELECT 'A' AS tenant, 'iso.a3' AS name, * FROM pg_temp.reg('A', 'iso.a3');
SELECT 'B' AS tenant, 'iso.c4' AS name, * FROM pg_temp.reg('B', 'iso.c4');
SELECT 'B' AS tenant, 'iso.b3' AS name, * FROM pg_temp.reg('B', 'iso.b3');
SELECT * FROM pg_temp.queries();
-- A cap lowered below the count: existing queries still re-register; 0
-- denies every new name.
UPDATE queen_streams.quota SET max_queries = 1 WHERE tenant_id = pg_temp.tid('C');
SELECT * FROM pg_temp.reg('C', 'iso.c2');
SELECT * FROM pg_temp.reg('C', 'iso.c5');
UPDATE queen_streams.quota SET max_queries = 0, enabled = true WHERE tenant_id = pg_temp.tid('A');
SELECT * FROM pg_temp.reg('A', 'iso.a4');
SELECT * FROM pg_temp.queries();

-------------------------------------------------------------------------
-- reset wipes only the caller's state: B re-registers iso.q with reset.
-------------------------------------------------------------------------
SELECT * FROM pg_temp.state();
SELECT * FROM pg_temp.reg('B', 'iso.q', 'h1', '{"reset":true}');
SELECT * FROM pg_temp.state();
SELECT * FROM pg_temp.reg('C', 'iso.q', 'h3', '{"reset":true}');
SELECT * FROM pg_temp.state();

-------------------------------------------------------------------------
-- Encryption is read from the request tenant's own queue: A's iso_enc is
-- encrypted, the same name under B, C and the default tenant is not (and B's
-- iso_enc2 is, A's is not), for pushes and for cycle sinks alike.
-------------------------------------------------------------------------
SET queen_streams.encryption_key = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SELECT queen.configure('{"queue":"iso_enc","options":{"encryptionEnabled":true}}', pg_temp.tid('A'))->'options'->'encryptionEnabled' AS a_enc;
SELECT queen.configure('{"queue":"iso_enc","options":{"encryptionEnabled":false}}', pg_temp.tid('C'))->'options'->'encryptionEnabled' AS c_enc;
SELECT queen.configure('{"queue":"iso_enc2","options":{"encryptionEnabled":true}}', pg_temp.tid('B'))->'options'->'encryptionEnabled' AS b_enc2;
SELECT l AS tenant, queen.push(jsonb_build_object('items', jsonb_build_array(
         jsonb_build_object('queue', 'iso_enc', 'transactionId', 'push-' || l, 'payload', jsonb_build_object('secret', 'plain-' || l)),
         jsonb_build_object('queue', 'iso_enc2', 'transactionId', 'push-' || l, 'payload', jsonb_build_object('secret', 'plain-' || l)))),
         pg_temp.tid(l))->0->>'status' AS status
  FROM unnest(ARRAY['default', 'A', 'B', 'C']) l;
-- Idle-flush cycles (no ack) with sink pushes to both names.
SELECT l AS tenant, c.success, c.pushed
  FROM unnest(ARRAY['default', 'A', 'B', 'C']) l,
       LATERAL pg_temp.cyc(l, jsonb_build_object('query_id', pg_temp.fx(l, 'q'), 'partition_id', pg_temp.fx(l, 'pid'),
         'push_items', jsonb_build_array(
           jsonb_build_object('queue', 'iso_enc', 'transactionId', 'sink-' || l, 'payload', jsonb_build_object('secret', 'plain-' || l)),
           jsonb_build_object('queue', 'iso_enc2', 'transactionId', 'sink-' || l, 'payload', jsonb_build_object('secret', 'plain-' || l))))) c;
SELECT pg_temp.tl(q.tenant_id) AS tenant, q.name AS queue, q.encryption_enabled, f.transaction_id, f.flags,
       CASE WHEN f.flags & 4 = 4 THEN (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(f.payload::jsonb) k)
            ELSE f.payload END AS stored,
       position('plain-'::bytea IN queen.segment_decompress(s.blob)) > 0 AS plaintext_in_segment
  FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id
  JOIN queen.log_segments s ON s.partition_id = p.id,
       queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
 WHERE q.name IN ('iso_enc', 'iso_enc2')
 ORDER BY q.name, pg_temp.ord(pg_temp.tl(q.tenant_id)), s.base_offset, f.idx;
-- Each tenant's pop serves its own plaintext.
SELECT l AS tenant, pg_temp.msgs(queen.pop('iso_enc', batch => 10, tenant => pg_temp.tid(l), auto_ack => true)) AS iso_enc,
       pg_temp.msgs(queen.pop('iso_enc2', batch => 10, tenant => pg_temp.tid(l), auto_ack => true)) AS iso_enc2
  FROM unnest(ARRAY['default', 'A', 'B', 'C']) l;
RESET queen_streams.encryption_key;

-------------------------------------------------------------------------
-- Per-tenant counters: each tenant's iso_src pushes are counted under that
-- tenant only.
-------------------------------------------------------------------------
SELECT pg_temp.tl(m.tenant_id) AS tenant, m.pushed - coalesce(b.pushed, 0) AS pushed
  FROM queen_streams.metrics m LEFT JOIN metrics_before b USING (tenant_id, queue)
 WHERE m.queue = 'iso_src' ORDER BY pg_temp.ord(pg_temp.tl(m.tenant_id));

DROP EXTENSION queen_streams CASCADE;
