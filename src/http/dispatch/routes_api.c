/*
 * routes_api.c: routes that are one call of a SQL function (a QsCall row of
 * the route table): bind the arguments from the request, run the
 * statement, answer its jsonb with the row's status. Validation and every
 * rule live in the SQL function, so SQL and HTTP answer alike; a raised
 * error maps to its status in the router (invalid input 400, not found 404).
 */
#include "http/dispatch/route.h"
#include "common/json.h"
#include "common/ids.h"
#include "common/spi.h"

#include <microhttpd.h>

#include "catalog/pg_type_d.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"

/* One kept plan per route row. */
static QsPlan plans[QS_MAX_ROUTES];

static Oid
arg_type(const char *spec)
{
	if (strncmp(spec, "body", 4) == 0)
		return JSONBOID;
	if (strcmp(spec, "tenant") == 0)
		return UUIDOID;
	return TEXTOID;
}

static QsPlan *
call_plan(QsReq *req)
{
	QsPlan	   *p = &plans[req->route];
	const QsCall *call = qs_routes[req->route].call;

	if (p->sql == NULL)
	{
		int			n = 0;

		while (n < QS_CALL_MAX_ARGS && call->args[n] != NULL)
		{
			p->argtypes[n] = arg_type(call->args[n]);
			n++;
		}
		p->nargs = n;
		p->sql = call->sql;
	}
	return p;
}

/* The index of ":name" among the pattern's parameters. */
static int
param_index(const char *pattern, const char *name)
{
	int			i = 0;
	size_t		len = strlen(name);

	for (const char *s = strchr(pattern, ':'); s; s = strchr(s + 1, ':'), i++)
		if (strncmp(s + 1, name, len) == 0 && (s[1 + len] == '/' || s[1 + len] == '\0'))
			return i;
	elog(ERROR, "route %s has no parameter \"%s\"", pattern, name);
	return -1;
}

/* A query parameter as text, NULL when absent or empty; 400 if not text. */
static Datum
query_arg(QsReq *req, const char *key, bool *isnull)
{
	const char *v = qs_http_query_value(req, key);

	*isnull = (v == NULL);
	if (*isnull)
		return (Datum) 0;
	return CStringGetTextDatum(v);
}

static bool
call_parse(QsReq *req)
{
	const QsCall *call = qs_routes[req->route].call;

	for (int i = 0; i < QS_CALL_MAX_ARGS && call->args[i]; i++)
	{
		if (strcmp(call->args[i], "body") == 0 ||
			(strcmp(call->args[i], "body?") == 0 && req->body.len > 0))
			req->state = qs_http_body_jsonb(req);
	}
	return true;
}

static void
call_run(QsReq *req)
{
	const QsRoute *route = &qs_routes[req->route];
	const QsCall *call = route->call;
	QsPlan	   *plan = call_plan(req);
	Datum		args[QS_CALL_MAX_ARGS];
	char		nulls[QS_CALL_MAX_ARGS];
	Jsonb	   *res;

	for (int i = 0; i < plan->nargs; i++)
	{
		const char *spec = call->args[i];
		bool		isnull = false;

		if (spec[0] == ':')
			args[i] = CStringGetTextDatum(req->params[param_index(route->pattern, spec + 1)]);
		else if (spec[0] == '?')
			args[i] = query_arg(req, spec + 1, &isnull);
		else if (strncmp(spec, "body", 4) == 0)
		{
			isnull = req->state == NULL;
			args[i] = isnull ? (Datum) 0 : JsonbPGetDatum((Jsonb *) req->state);
		}
		else if (strcmp(spec, "tenant") == 0)
			args[i] = qs_uuid_datum(&req->tenant);
		else if (strcmp(spec, "sub") == 0)
		{
			isnull = req->sub == NULL;
			args[i] = isnull ? (Datum) 0 : CStringGetTextDatum(req->sub);
		}
		else
			elog(ERROR, "route %s: unknown argument \"%s\"", route->pattern, spec);
		nulls[i] = isnull ? 'n' : ' ';
	}
	qs_spi_connect();
	res = qs_http_call(plan, args, nulls, req->ctx);
	qs_spi_finish();
	req->status = call->ok;
	req->resp = qs_http_jsonb_text(res, &req->resp_len);
}

const QsRouteDef qs_route_call = {call_parse, call_run, NULL, "request failed", true, true};
