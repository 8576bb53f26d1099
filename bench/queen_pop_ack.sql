-- queen: pop a batch of 100 (one transaction), then ack it (another transaction).
-- Acking the last transactionId of the batch completes the whole batch and
-- releases the lease. The response (all 100 messages) travels to the client.
-- Run with -M prepared.
\set n 0
SELECT r AS body, jsonb_array_length(r->'messages') AS n,
       coalesce(r->>'leaseId', '') AS lease, coalesce(r->>'partitionId', '') AS pid,
       coalesce(r->'messages'->-1->>'transactionId', '') AS txn
  FROM queen.pop('bench_pop', batch => 100) AS r \gset
\if :n > 0
SELECT queen.ack(jsonb_build_object('transactionId', :txn::text, 'partitionId', :pid::text,
                                    'leaseId', :lease::text));
\endif
