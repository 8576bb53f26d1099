-- queen.maintenance, queen.set_maintenance and queen.push_buffer: Queen's
-- push and pop maintenance modes. Pushes held during push maintenance are
-- replayed in order when it is turned off, each queue's maxSize checked at
-- replay; what cannot be replayed stays in the buffer with its error.
CREATE EXTENSION queen_streams;

\i test/include/helpers.sql

CREATE FUNCTION pg_temp.stored(q text) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(p.name || ':' || f.payload, ',' ORDER BY p.name, s.base_offset, f.idx), '')
	  FROM queen.queues qq JOIN queen.log_partitions p ON p.queue_id = qq.id
	  JOIN queen.log_segments s ON s.partition_id = p.id,
	       queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f
	 WHERE qq.name = q
$$;

-- Off by default, in Queen's shape.
SELECT queen.maintenance();
SELECT queen.maintenance('pop');
SELECT queen.maintenance('buffers');

-- Bad requests: 22023 and nothing changed.
SELECT pg_temp.try(format('SELECT queen.set_maintenance(%L, %L)', m, r)) AS error, m, r
  FROM (VALUES ('push', '{}'::jsonb), ('push', '{"enabled":"yes"}'), ('pop', '{"enabled":null}'),
               ('pop', '[]'), ('push', NULL), ('sideways', '{"enabled":true}'), (NULL, '{"enabled":true}')) v(m, r);
SELECT pg_temp.try($$SELECT queen.maintenance('sideways')$$) AS error;
SELECT count(*) AS state_rows FROM queen.system_state;

-- Push maintenance on: a push body is held, answered as Queen's buffered items.
SELECT queen.set_maintenance('push', '{"enabled":true}') - 'message' AS turned_on;
SELECT queen.maintenance()->>'maintenanceMode' AS on;
SELECT queen.configure('{"queue":"small","options":{"maxSize":2}}')->'options'->>'maxSize' AS small_max;
SELECT queen.push_buffer('{"items":[{"queue":"big","payload":1,"transactionId":"b1"},
                                    {"queue":"big","partition":"p2","payload":2}]}');
SELECT queen.push_buffer('{"items":[{"queue":"small","payload":1,"transactionId":"s1"},
                                    {"queue":"small","payload":2,"transactionId":"s2"},
                                    {"queue":"small","payload":3,"transactionId":"s3"}]}');
SELECT queen.push_buffer('{"items":[{"queue":"big","payload":3,"transactionId":"b3"}]}', NULL, 'svc-a');
SELECT queen.push_buffer('{"items":[]}') AS empty_is_nothing;
SELECT pg_temp.try(format('SELECT queen.push_buffer(%L)', r)) AS error
  FROM (VALUES ('{}'::jsonb), ('{"items":{}}'), ('{"items":[{"payload":1}]}'), ('{"items":[5]}'),
               ('{"items":[{"queue":""}]}'), ('[]')) v(r);
SELECT id, items, producer_sub, failed_at IS NULL AS pending FROM queen.push_buffer ORDER BY id;
SELECT queen.maintenance()->'bufferStats' AS stats, queen.maintenance()->'bufferedMessages' AS buffered;
SELECT queen.maintenance('buffers');
-- Nothing reached the log.
SELECT pg_temp.stored('big') AS big, pg_temp.stored('small') AS small;

-- Turning it off replays in order; the body that would take "small" past
-- its maxSize of 2 stays behind with its error.
SELECT queen.set_maintenance('push', '{"enabled":false}') - 'message' AS turned_off;
SELECT pg_temp.stored('big') AS big, pg_temp.stored('small') AS small;
SELECT f.producer_sub FROM queen.log_segments s,
       queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f WHERE f.transaction_id = 'b3';
SELECT id, items, failed_at IS NOT NULL AS failed, error FROM queen.push_buffer ORDER BY id;
SELECT queen.maintenance()->'bufferStats'->'failedFiles'->>'count' AS failed_files;
-- A body that failed is not retried by itself: it waits for an operator.
SELECT queen.set_maintenance('push', '{"enabled":true}')->>'maintenanceMode' AS on_again;
SELECT queen.set_maintenance('push', '{"enabled":false}')->>'replayed' AS replayed_nothing;

-- Pop maintenance is its own switch.
SELECT queen.set_maintenance('pop', '{"enabled":true}');
SELECT queen.maintenance()->>'maintenanceMode' AS push_mode, queen.maintenance()->>'popMaintenanceMode' AS pop_mode;
SELECT queen.set_maintenance('pop', '{"enabled":false}');
SELECT key, value FROM queen.system_state ORDER BY key;

DROP EXTENSION queen_streams CASCADE;
