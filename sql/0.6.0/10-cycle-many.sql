--------------------------------------------------------------------------
-- Several cycles of one tenant in one call: each answer is cycle's for its
-- request, as if they had run one after the other in one transaction; the
-- sink items of those that succeed are pushed as one push. The listener's
-- group commit calls it on the cycles of a group.
--------------------------------------------------------------------------
CREATE FUNCTION queen_streams.cycle_many(requests jsonb[], tenant uuid DEFAULT NULL)
RETURNS jsonb[]
AS 'MODULE_PATHNAME', 'qs_cycle_many' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen_streams.cycle_many(jsonb[], uuid) IS
	'queen_streams.cycle on several requests in one call: one answer per request, as if run one after the other; a failed cycle fails alone, a request that does not parse or a failed sink push fails the call';
REVOKE EXECUTE ON FUNCTION queen_streams.cycle_many(jsonb[], uuid) FROM PUBLIC;
ALTER FUNCTION queen_streams.cycle_many(jsonb[], uuid) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
