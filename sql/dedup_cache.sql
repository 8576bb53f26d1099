-- The dedup probe's shared cache must answer exactly like reading the
-- window: across rollbacks, subtransactions, prepared transactions, other
-- sessions' pushes, window changes, retention and the cap.
CREATE EXTENSION queen_streams;

\set cap 0
\i test/include/dedup_scenario.sql

DROP EXTENSION dblink;
DROP EXTENSION queen_streams CASCADE;
