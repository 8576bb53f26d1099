-- The storage schema contract (facts §1.1-§1.6): tables, columns, keys,
-- indexes, blob storage and the signatures of the storage functions.
BEGIN;
SELECT plan(120);

SELECT has_schema('queen');

-- Tables.
SELECT has_table('queen', t, 'table queen.' || t)
  FROM unnest(ARRAY['queues', 'log_partitions', 'log_segments', 'log_txns',
                    'log_consumers', 'log_dlq', 'consumer_groups_metadata']) t;

-- Columns.
SELECT columns_are('queen', 'queues', ARRAY[
	'id', 'name', 'tenant_id', 'namespace', 'task', 'priority', 'lease_time', 'retry_limit',
	'retry_delay', 'ttl', 'dead_letter_queue', 'dlq_after_max_retries', 'delayed_processing',
	'window_buffer', 'retention_seconds', 'completed_retention_seconds', 'retention_enabled',
	'encryption_enabled', 'max_wait_time_seconds', 'max_queue_size', 'min_pop_wait_time',
	'dedup_window_seconds', 'retention_sink_hold', 'retention_sink_hold_max_seconds', 'created_at']);
SELECT columns_are('queen', 'log_partitions', ARRAY[
	'id', 'queue_id', 'name', 'last_offset', 'log_start', 'txns_start', 'last_write_at',
	'oldest_live_at', 'oldest_txn_at', 'created_at']);
SELECT columns_are('queen', 'log_segments', ARRAY[
	'partition_id', 'base_offset', 'end_offset', 'created_at', 'blob']);
SELECT columns_are('queen', 'log_txns', ARRAY[
	'partition_id', 'base_offset', 'end_offset', 'created_at', 'hashes']);
-- 0.7.0: the keys of partitions the dedup cache does not hold, and their marks.
SELECT columns_are('queen', 'log_txn_keys', ARRAY['partition_id', 'hash', 'msg_offset', 'created_at']);
SELECT columns_are('queen', 'log_txn_marks', ARRAY['partition_id', 'indexed']);
SELECT col_is_pk('queen', 'log_txn_marks', ARRAY['partition_id'], 'log_txn_marks: PK (partition_id)');
SELECT has_index('queen', 'log_txn_keys', 'log_txn_keys_hash', ARRAY['partition_id', 'hash'],
                 'log_txn_keys is probed by (partition_id, hash)');
SELECT col_type_is('queen', 'log_txn_keys', 'hash', 'uuid', 'a key holds its 16 hash bytes as a uuid');
SELECT columns_are('queen', 'log_consumers', ARRAY[
	'partition_id', 'consumer_group', 'committed', 'batch_end', 'worker_id', 'lease_expires_at',
	'lease_acquired_at', 'batch_retry_count', 'attempt_offset', 'attempt_count', 'total_consumed',
	'lease_conflated', 'created_at']);
SELECT columns_are('queen', 'log_dlq', ARRAY[
	'id', 'partition_id', 'consumer_group', 'offset', 'message_id', 'transaction_id', 'payload',
	'error', 'retry_count', 'failed_at', 'encrypted']);

-- Column types of the load-bearing columns.
SELECT col_type_is('queen', tbl, col, typ, format('queen.%s.%s is %s', tbl, col, typ))
  FROM (VALUES
	('queues', 'id', 'uuid'), ('queues', 'name', 'character varying(255)'),
	('queues', 'tenant_id', 'uuid'), ('queues', 'dedup_window_seconds', 'integer'),
	('queues', 'retry_limit', 'integer'), ('queues', 'dead_letter_queue', 'boolean'),
	('queues', 'retention_seconds', 'integer'), ('queues', 'retention_enabled', 'boolean'),
	('queues', 'encryption_enabled', 'boolean'), ('queues', 'lease_time', 'integer'),
	('log_partitions', 'id', 'uuid'), ('log_partitions', 'queue_id', 'uuid'),
	('log_partitions', 'name', 'text'), ('log_partitions', 'last_offset', 'bigint'),
	('log_partitions', 'log_start', 'bigint'), ('log_partitions', 'txns_start', 'bigint'),
	('log_segments', 'base_offset', 'bigint'), ('log_segments', 'end_offset', 'bigint'),
	('log_segments', 'created_at', 'timestamp with time zone'), ('log_segments', 'blob', 'bytea'),
	('log_txns', 'hashes', 'bytea'),
	('log_consumers', 'consumer_group', 'text'), ('log_consumers', 'committed', 'bigint'),
	('log_consumers', 'batch_end', 'bigint'), ('log_consumers', 'worker_id', 'text'),
	('log_consumers', 'lease_expires_at', 'timestamp with time zone'),
	('log_consumers', 'batch_retry_count', 'integer'), ('log_consumers', 'total_consumed', 'bigint'),
	('log_dlq', 'offset', 'bigint'), ('log_dlq', 'payload', 'jsonb'), ('log_dlq', 'message_id', 'uuid')
  ) AS c(tbl, col, typ);

-- Defaults the engine relies on.
SELECT col_default_is('queen', 'queues', 'tenant_id', '00000000-0000-0000-0000-000000000001'::uuid,
                      'queues.tenant_id defaults to the default tenant');
SELECT col_default_is('queen', 'queues', 'dedup_window_seconds', 3600, 'dedup window defaults to 3600 s');
SELECT col_default_is('queen', 'queues', 'retry_limit', 3, 'retry_limit defaults to 3');
SELECT col_default_is('queen', 'queues', 'lease_time', 60, 'lease_time defaults to 60 s');
SELECT col_default_is('queen', 'queues', 'dead_letter_queue', true, 'dead letters are on by default');
SELECT col_default_is('queen', 'log_partitions', 'name', 'Default'::text, 'partition name defaults to Default');
SELECT col_default_is('queen', 'log_partitions', 'last_offset', -1, 'last_offset starts at -1');
SELECT col_default_is('queen', 'log_partitions', 'log_start', 0, 'log_start starts at 0');
SELECT col_default_is('queen', 'log_consumers', 'consumer_group', '__QUEUE_MODE__'::text,
                      'consumer_group defaults to queue mode');
SELECT col_default_is('queen', 'log_consumers', 'committed', -1, 'committed starts at -1');

-- Primary keys.
SELECT col_is_pk('queen', 'queues', 'id', 'queues: PK id');
SELECT col_is_pk('queen', 'log_partitions', 'id', 'log_partitions: PK id');
SELECT col_is_pk('queen', 'log_segments', ARRAY['partition_id', 'base_offset'], 'log_segments: PK (partition_id, base_offset)');
SELECT col_is_pk('queen', 'log_txns', ARRAY['partition_id', 'base_offset'], 'log_txns: PK (partition_id, base_offset)');
SELECT col_is_pk('queen', 'log_consumers', ARRAY['partition_id', 'consumer_group'], 'log_consumers: PK (partition_id, consumer_group)');
SELECT col_is_pk('queen', 'log_dlq', 'id', 'log_dlq: PK id');

-- Queue identity is (tenant, name); a partition is unique within its queue.
SELECT has_index('queen', 'queues', 'queues_tenant_name_uk', ARRAY['tenant_id', 'name']);
SELECT index_is_unique('queen', 'queues', 'queues_tenant_name_uk');
SELECT col_is_unique('queen', 'log_partitions', ARRAY['queue_id', 'name'], 'log_partitions: UNIQUE (queue_id, name)');
SELECT hasnt_index('queen', 'log_segments', 'log_segments_created_at_idx',
                   'log_segments has no index but its PK (the PK is the pop path)');
SELECT is((SELECT count(*)::int FROM pg_index i WHERE i.indrelid = 'queen.log_segments'::regclass), 1,
          'log_segments has exactly one index');

-- Secondary indexes.
SELECT has_index('queen', 'log_partitions', 'log_partitions_last_write_idx', ARRAY['queue_id', 'last_write_at']);
SELECT has_index('queen', 'log_partitions', 'log_partitions_oldest_live_idx', ARRAY['queue_id', 'oldest_live_at']);
SELECT has_index('queen', 'log_partitions', 'log_partitions_oldest_txn_idx', ARRAY['queue_id', 'oldest_txn_at']);
SELECT has_index('queen', 'log_consumers', 'log_consumers_worker_idx', ARRAY['worker_id']);
SELECT has_index('queen', 'log_dlq', 'log_dlq_partition_failed_idx', ARRAY['partition_id', 'failed_at']);

-- Foreign keys: partitions and cursors go with their parent; the log
-- tables (an FK check per append locks the partition row) and log_dlq
-- deliberately have none: queen.delete_queue deletes them.
-- Rows updated at every append, pop and ack keep room for their new versions.
SELECT ok((SELECT 'fillfactor=10' = ANY (reloptions) FROM pg_class WHERE oid = 'queen.log_partitions'::regclass),
          'log_partitions pages keep room for HOT updates');
SELECT ok((SELECT 'fillfactor=10' = ANY (reloptions) FROM pg_class WHERE oid = 'queen.log_consumers'::regclass),
          'log_consumers pages keep room for HOT updates');
SELECT fk_ok('queen', 'log_partitions', 'queue_id', 'queen', 'queues', 'id');
SELECT hasnt_fk('queen', 'log_segments', 'log_segments has no foreign key');
SELECT fk_ok('queen', 'log_consumers', 'partition_id', 'queen', 'log_partitions', 'id');
SELECT hasnt_fk('queen', 'log_txns', 'log_txns has no foreign key');
SELECT hasnt_fk('queen', 'log_dlq', 'log_dlq has no foreign key (retention keeps DLQ rows)');
SELECT is((SELECT array_agg(DISTINCT c.confdeltype::text) FROM pg_constraint c
            WHERE c.contype = 'f' AND c.conrelid IN ('queen.log_partitions'::regclass,
                  'queen.log_segments'::regclass, 'queen.log_consumers'::regclass)),
          ARRAY['c'], 'storage foreign keys cascade on delete');

-- Blobs are already zstd: no TOAST compression.
SELECT is((SELECT attstorage::text FROM pg_attribute
            WHERE attrelid = 'queen.log_segments'::regclass AND attname = 'blob'),
          'e', 'log_segments.blob storage is EXTERNAL');
SELECT is((SELECT attstorage::text FROM pg_attribute
            WHERE attrelid = 'queen.log_txns'::regclass AND attname = 'hashes'),
          'e', 'log_txns.hashes storage is EXTERNAL');

-- Function signatures and return types.
SELECT has_function('queen', 'log_push_one_v1',
                    ARRAY['text', 'text', 'integer', 'bytea', 'bigint', 'bytea', 'uuid', 'integer', 'uuid']);
SELECT function_returns('queen', 'log_push_one_v1',
                        ARRAY['text', 'text', 'integer', 'bytea', 'bigint', 'bytea', 'uuid', 'integer', 'uuid'], 'jsonb');
SELECT is((SELECT array_to_string(proargnames, ',') FROM pg_proc
            WHERE oid = 'queen.log_push_one_v1(text,text,int,bytea,bigint,bytea,uuid,int,uuid)'::regprocedure),
          'p_queue,p_partition,p_msg_count,p_hashes,p_verified,p_blob,p_pid,p_window,p_tenant',
          'log_push_one_v1 argument names');
SELECT is((SELECT pronargdefaults::int FROM pg_proc
            WHERE oid = 'queen.log_push_one_v1(text,text,int,bytea,bigint,bytea,uuid,int,uuid)'::regprocedure),
          3, 'log_push_one_v1: pid, window and tenant are optional');
SELECT has_function('queen', 'push', ARRAY['jsonb', 'uuid', 'text']);
SELECT function_returns('queen', 'push', ARRAY['jsonb', 'uuid', 'text'], 'jsonb');
SELECT has_function('queen', 'pop',
                    ARRAY['text', 'text', 'text', 'integer', 'integer', 'boolean', 'uuid', 'text', 'text', 'integer']);
SELECT function_returns('queen', 'pop',
                        ARRAY['text', 'text', 'text', 'integer', 'integer', 'boolean', 'uuid', 'text', 'text', 'integer'], 'jsonb');
SELECT is((SELECT array_to_string(proargnames, ',') FROM pg_proc
            WHERE oid = 'queen.pop(text,text,text,int,int,boolean,uuid,text,text,int)'::regprocedure),
          'queue,partition,consumer_group,batch,lease_seconds,auto_ack,tenant,subscription_mode,subscription_from,partitions',
          'pop argument names');
SELECT is((SELECT pronargdefaults::int FROM pg_proc
            WHERE oid = 'queen.pop(text,text,text,int,int,boolean,uuid,text,text,int)'::regprocedure),
          9, 'pop: everything but the queue is optional');
SELECT has_function('queen', 'ack', ARRAY['jsonb', 'uuid']);
SELECT function_returns('queen', 'ack', ARRAY['jsonb', 'uuid'], 'jsonb');
SELECT has_function('queen', 'renew_lease', ARRAY['text', 'integer', 'uuid']);
SELECT function_returns('queen', 'renew_lease', ARRAY['text', 'integer', 'uuid'], 'jsonb');
SELECT has_function('queen', 'retention_sweep', ARRAY[]::text[]);
SELECT function_returns('queen', 'retention_sweep', ARRAY[]::text[], 'jsonb');
SELECT function_lang_is('queen', f, args, 'c', 'queen.' || f || ' is written in C')
  FROM (VALUES ('push', ARRAY['jsonb', 'uuid', 'text']), ('ack', ARRAY['jsonb', 'uuid']),
               ('renew_lease', ARRAY['text', 'integer', 'uuid']), ('retention_sweep', ARRAY[]::text[]),
               ('log_push_one_v1', ARRAY['text', 'text', 'integer', 'bytea', 'bigint', 'bytea', 'uuid', 'integer', 'uuid']),
               ('pop', ARRAY['text', 'text', 'text', 'integer', 'integer', 'boolean', 'uuid', 'text', 'text', 'integer'])
       ) AS f(f, args);
SELECT volatility_is('queen', f, args, 'volatile', 'queen.' || f || ' is volatile')
  FROM (VALUES ('push', ARRAY['jsonb', 'uuid', 'text']), ('ack', ARRAY['jsonb', 'uuid']),
               ('pop', ARRAY['text', 'text', 'text', 'integer', 'integer', 'boolean', 'uuid', 'text', 'text', 'integer'])
       ) AS f(f, args);

-- The codec helpers.
SELECT has_function('queen', 'txn_hash', ARRAY['text']);
SELECT function_returns('queen', 'txn_hash', ARRAY['text'], 'bytea');
SELECT has_function('queen', 'segment_frames', ARRAY['bytea', 'bigint']);
SELECT function_returns('queen', 'segment_frames', ARRAY['bytea', 'bigint'], 'setof record');
SELECT has_function('queen', 'log_unnest_hashes', ARRAY['bytea']);
SELECT has_function('queen', 'uuid_generate_v7', ARRAY[]::text[]);
SELECT function_returns('queen', 'uuid_generate_v7', ARRAY[]::text[], 'uuid');

-- The extension owns its objects.
SELECT has_extension('queen_streams');
SELECT is((SELECT extversion FROM pg_extension WHERE extname = 'queen_streams'), '0.8.0',
          'queen_streams version 0.8.0');

SELECT * FROM finish();
ROLLBACK;
