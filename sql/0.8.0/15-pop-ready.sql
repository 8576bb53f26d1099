-- The wildcard pop's ready sets (src/storage/pop_ready.c has the rules).
-- log_ready holds, per (queue, consumer group) that a wildcard pop has met
-- (log_ready_groups), a row for every partition that may have a backlog for
-- that group, ordered by when the group last served it: the pop reads the
-- head of that order instead of every partition of the queue. Both are
-- derived state: UNLOGGED, so a crash or a failover empties them (a standby
-- and a promoted server start with them empty), and dumps leave them out;
-- a group with no log_ready_groups row is rebuilt from the cursors by its
-- next wildcard pop.
CREATE UNLOGGED TABLE queen.log_ready_groups (
	queue_id uuid NOT NULL,
	consumer_group text NOT NULL,
	built_at timestamptz NOT NULL,		-- registered and first built
	checked_at timestamptz NOT NULL,	-- last rebuild from the cursors
	PRIMARY KEY (queue_id, consumer_group)
);
COMMENT ON TABLE queen.log_ready_groups IS
	'the (queue, consumer group) pairs whose ready set log_ready keeps; derived, unlogged, not dumped';

CREATE UNLOGGED TABLE queen.log_ready (
	partition_id uuid NOT NULL,
	consumer_group text NOT NULL,
	queue_id uuid NOT NULL,
	served_at timestamptz			-- when the group last claimed the partition; NULL: never
) WITH (fillfactor = 50);
-- No unique key, on purpose: a push never waits on a ready row, so two rows
-- of one partition can exist for a while (the pop skips the extra one, a
-- rebuild removes it). Without a key every UPDATE is a "no key" update,
-- which a push's FOR KEY SHARE does not wait for.
CREATE INDEX log_ready_partition_idx ON queen.log_ready (partition_id, consumer_group);
CREATE INDEX log_ready_order_idx
	ON queen.log_ready (queue_id, consumer_group, served_at NULLS FIRST, partition_id);
COMMENT ON TABLE queen.log_ready IS
	'per (queue, consumer group), the partitions that may have a backlog, least recently served first; derived, unlogged, not dumped';
REVOKE ALL ON queen.log_ready_groups, queen.log_ready FROM PUBLIC;
