--------------------------------------------------------------------------
-- A partition's row is updated by every append, a cursor's by every pop
-- and ack: each page keeps room for their new versions (HOT updates, which
-- pruning can reclaim). Packed pages of such rows overflow as soon as
-- versions outlive a transaction (two group commits alternating on one
-- partition): updates then leave the page, index entries pile up, and each
-- visit of the row walks them. A row that must leave its page moves to an
-- emptier one, so an existing database settles on its own.
--------------------------------------------------------------------------
ALTER TABLE queen.log_partitions SET (fillfactor = 10);
ALTER TABLE queen.log_consumers SET (fillfactor = 10);
