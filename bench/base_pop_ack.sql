-- Row-per-message baseline, pgmq's read + delete: lease up to 100 visible rows
-- (FOR UPDATE SKIP LOCKED, push vt forward, bump read_ct) in one transaction,
-- returning the 100 messages to the client; then delete exactly those rows in
-- another. `ids` (the same on every row) carries the leased msg_ids to the
-- delete, since pgbench keeps only the last row's values. Run with -M prepared.
\set n 0
WITH c AS (SELECT msg_id FROM bench.q_pop WHERE vt <= clock_timestamp()
            ORDER BY msg_id LIMIT 100 FOR UPDATE SKIP LOCKED),
     r AS (UPDATE bench.q_pop m SET vt = clock_timestamp() + interval '60 seconds',
                  read_ct = m.read_ct + 1
             FROM c WHERE m.msg_id = c.msg_id
           RETURNING m.msg_id, m.read_ct, m.enqueued_at, m.vt, m.message)
SELECT r.*, count(*) OVER () AS n, array_agg(r.msg_id) OVER () AS ids FROM r \aset
\if :n > 0
DELETE FROM bench.q_pop WHERE msg_id = ANY(:ids::bigint[]) RETURNING msg_id;
\endif
