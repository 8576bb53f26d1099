--------------------------------------------------------------------------
-- pg_dump keeps the broker's data: every table that holds user data is an
-- extension configuration table, so a dump carries its rows (the tables
-- made at 0.1.0; the newer ones register themselves where they are made).
-- None has a sequence (their keys are uuids), and CREATE EXTENSION writes
-- no row into any of them, so a restore never collides with a default.
-- pg_dump orders the data of configuration tables by their foreign keys.
--------------------------------------------------------------------------
SELECT pg_catalog.pg_extension_config_dump('queen.queues', '');
SELECT pg_catalog.pg_extension_config_dump('queen.log_partitions', '');
SELECT pg_catalog.pg_extension_config_dump('queen.log_segments', '');
SELECT pg_catalog.pg_extension_config_dump('queen.log_txns', '');
SELECT pg_catalog.pg_extension_config_dump('queen.log_consumers', '');
SELECT pg_catalog.pg_extension_config_dump('queen.log_dlq', '');
SELECT pg_catalog.pg_extension_config_dump('queen.consumer_groups_metadata', '');
SELECT pg_catalog.pg_extension_config_dump('queen_streams.queries', '');
SELECT pg_catalog.pg_extension_config_dump('queen_streams.state', '');
SELECT pg_catalog.pg_extension_config_dump('queen_streams.quota', '');
