--------------------------------------------------------------------------
-- log_segments loses its foreign key, as log_txns never had one: its check
-- took a share lock on the partition row at every append, which the
-- subtransactions of one group commit turned into a MultiXact per push
-- (and a read of the MultiXact files for every visit of the row).
-- queen.delete_queue deletes a queue's segments itself.
--------------------------------------------------------------------------
ALTER TABLE queen.log_segments DROP CONSTRAINT log_segments_partition_id_fkey;
