/*
 * status.c: the HTTP status of a streams response, computed from the body
 * alone so that SQL callers and the listener can never disagree.
 *
 *   queries:   success -> 200; denied -> 403; other success:false -> 409
 *   state/get: success -> 200; success:false -> 400; an error without
 *              success -> 500
 *   cycle:     a completed call is always 200 (read `success`)
 *
 * A call that raised maps by its SQLSTATE, in the listener (http/dispatch/execute.c).
 */
#include "streams/streams.h"

#include "utils/builtins.h"

static bool
body_bool(Jsonb *body, const char *key, bool *present)
{
	JsonbValue	v;

	*present = false;
	if (!JB_ROOT_IS_OBJECT(body) ||
		getKeyJsonValueFromContainer(&body->root, key, strlen(key), &v) == NULL)
		return false;
	*present = true;
	return v.type == jbvBool && v.val.boolean;
}

int
qs_http_status(const char *route, Jsonb *response)
{
	bool		has_success,
				has_denied,
				has_error;
	bool		success = body_bool(response, "success", &has_success);
	bool		denied = body_bool(response, "denied", &has_denied);

	(void) body_bool(response, "error", &has_error);

	if (strcmp(route, QS_ROUTE_QUERIES) == 0)
		return success ? 200 : (denied ? 403 : 409);
	if (strcmp(route, QS_ROUTE_STATE_GET) == 0)
	{
		if (success)
			return 200;
		return (has_error && !has_success) ? 500 : 400;
	}
	if (strcmp(route, QS_ROUTE_CYCLE) == 0)
		return 200;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown streams route \"%s\"", route),
			 errhint("Use \"queries\", \"state/get\" or \"cycle\".")));
	return 500;					/* keep the compiler quiet */
}

/* SQL: queen_streams.http_status(route text, response jsonb) */
PG_FUNCTION_INFO_V1(qs_http_status_sql);
Datum
qs_http_status_sql(PG_FUNCTION_ARGS)
{
	char	   *route = text_to_cstring(PG_GETARG_TEXT_PP(0));

	PG_RETURN_INT32(qs_http_status(route, PG_GETARG_JSONB_P(1)));
}
