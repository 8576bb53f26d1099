--------------------------------------------------------------------------
-- Several push requests of one tenant as one push: each answer is
-- push_text's for its request, as if they had been pushed one after the
-- other in one transaction, with one segment per partition for them all.
-- The listener's group commit calls it on the pushes of a group.
--------------------------------------------------------------------------
CREATE FUNCTION queen.push_text_many(requests text[], tenant uuid DEFAULT NULL, producer_subs text[] DEFAULT NULL)
RETURNS json[]
AS 'MODULE_PATHNAME', 'qs_push_text_many' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.push_text_many(text[], uuid, text[]) IS
	'queen.push_text on several requests as one push: one answer per request, as if pushed one after the other; any error fails the call';
REVOKE EXECUTE ON FUNCTION queen.push_text_many(text[], uuid, text[]) FROM PUBLIC;
ALTER FUNCTION queen.push_text_many(text[], uuid, text[]) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
