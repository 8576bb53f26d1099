-- The cycle bodies of bench/http/run.sh and bench/http/group_commit.sh
-- (bench_cycle_bodies in bench/lib.sh): one query, :conns source
-- partitions; one body per connection or pgbench client, on its own source
-- partition (the cycle's advisory lock) and its own sink partition (the
-- allocator row).
SELECT queen.push(jsonb_build_object('items',
	(SELECT jsonb_agg(jsonb_build_object('queue', 'bench.src', 'partition', 'p' || i, 'payload', '{}'::jsonb))
	   FROM generate_series(1, :conns) i)));
SELECT queen_streams.register_query(
	'{"name":"bench","source_queue":"bench.src","sink_queue":"bench.sink","config_hash":"h"}');
CREATE TABLE bench_bodies AS
SELECT row_number() OVER (ORDER BY p.name)::int AS i,
       jsonb_build_object(
         'query_id', (SELECT id FROM queen_streams.queries WHERE name = 'bench'),
         'partition_id', p.id,
         'state_ops', jsonb_build_array(jsonb_build_object('type', 'upsert', 'key', 'tumb:60' || chr(31) || 'k',
             'value', '{"acc":{"count":1},"windowStart":0,"windowEnd":60000}'::jsonb)),
         'push_items', jsonb_build_array(jsonb_build_object('queue', 'bench.sink',
             'partition', 's' || p.name, 'payload', '{"key":"k","count":1}'::jsonb)),
         'ack', NULL) AS body
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = 'bench.src';
