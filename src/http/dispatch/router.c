/*
 * router.c: request routing, and the helpers routes read their request and
 * call SQL with.
 *
 * A request is routed and checked (limits, tenant header, body size) when
 * its headers arrive, parsed (JSON body, query parameters) once its body is
 * in, both with no transaction open. A writing route then joins the
 * worker's next group commit (group.c); any other runs alone (execute.c).
 */
#include "http/dispatch/route.h"
#include "http/dispatch/cells.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/spi.h"
#include "common/text.h"

#include <microhttpd.h>

#include "access/xact.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "pgstat.h"
#include "utils/array.h"
#include "utils/fmgrprotos.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timeout.h"

/* A JSON body must be there, free of NUL and in the database's encoding. */
void
qs_http_body_check(QsReq *req)
{
	if (req->body.len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bad body: a JSON body is required")));
	if ((int) strlen(req->body.data) != req->body.len ||
		!pg_verify_mbstr(GetDatabaseEncoding(), req->body.data, req->body.len, true))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bad body: invalid byte sequence for encoding \"%s\"",
						GetDatabaseEncodingName())));
}

/* The body as jsonb, parsed with no transaction; bad JSON is invalid input. */
Jsonb *
qs_http_body_jsonb(QsReq *req)
{
	MemoryContext cxt = CurrentMemoryContext;
	Jsonb	   *volatile jb = NULL;

	qs_http_body_check(req);
	PG_TRY();
	{
		jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(req->body.data)));
	}
	PG_CATCH();
	{
		qs_http_raise_bad_body(cxt);
	}
	PG_END_TRY();
	return jb;
}

/*
 * In a PG_CATCH of a JSON parse: raise the caught error again as invalid
 * input, "bad body: ...", the answer every JSON route gives.
 */
void
qs_http_raise_bad_body(MemoryContext cxt)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	/* not dropped: raised again as invalid input */
	FlushErrorState();
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 edata->detail ? errmsg("bad body: %s: %s", edata->message, edata->detail)
			 : errmsg("bad body: %s", edata->message)));
}

/* Run a prepared "SELECT fn(...)": its one value, never NULL. The caller is connected to SPI. */
Datum
qs_http_call_value(void *plan, Datum *args, const char *nulls)
{
	bool		isnull;
	Datum		d;

	qs_exec((QsPlan *) plan, args, nulls, 1);
	if (SPI_processed != 1)
		elog(ERROR, "%s returned no row", ((QsPlan *) plan)->sql);
	d = qs_col(0, 1, &isnull);
	if (isnull)
		elog(ERROR, "%s returned NULL", ((QsPlan *) plan)->sql);
	return d;
}

/*
 * Run a prepared "SELECT fn(...)" returning jsonb; the result is copied into
 * `into`. The caller is connected to SPI.
 */
Jsonb *
qs_http_call(void *plan, Datum *args, const char *nulls, MemoryContext into)
{
	Datum		d = qs_http_call_value(plan, args, nulls);
	MemoryContext old = MemoryContextSwitchTo(into);
	Jsonb	   *jb = DatumGetJsonbPCopy(d);

	MemoryContextSwitchTo(old);
	return jb;
}

/* The same for a function answering JSON text (json or text): the text, copied into `into`. */
char *
qs_http_call_text(void *plan, Datum *args, const char *nulls, MemoryContext into, int *len)
{
	return qs_http_text_copy(DatumGetTextPP(qs_http_call_value(plan, args, nulls)), into, len);
}

/*
 * Whether a group's requests may be served by one call of `schema.fn`, with
 * the argument types of `plan`: not on a router, whose counting reads each
 * answer, nor while the installed extension is older than the library
 * (before ALTER EXTENSION UPDATE has made the function).
 */
bool
qs_http_many_available(const char *schema, const char *fn, void *plan)
{
	QsPlan	   *p = (QsPlan *) plan;

	if (qs_cells_is_router)
		return false;
	return OidIsValid(LookupFuncName(list_make2(makeString(pstrdup(schema)), makeString(pstrdup(fn))),
									 p->nargs, p->argtypes, true));
}

/*
 * Run a prepared "SELECT fn_many(...)" that answers n requests with an
 * array of n values of `elemtype` (json or jsonb): its elements, none NULL.
 * The caller is connected to SPI.
 */
Datum *
qs_http_call_many(void *plan, Datum *args, const char *nulls, Oid elemtype, int n)
{
	ArrayType  *answers = DatumGetArrayTypeP(qs_http_call_value(plan, args, nulls));
	Datum	   *elems;
	bool	   *elem_nulls;
	int			nelems;

	deconstruct_array(answers, elemtype, -1, false, TYPALIGN_INT, &elems, &elem_nulls, &nelems);
	if (nelems != n)
		elog(ERROR, "%s returned %d answers for %d requests", ((QsPlan *) plan)->sql, nelems, n);
	for (int k = 0; k < n; k++)
		if (elem_nulls[k])
			elog(ERROR, "%s returned a NULL answer", ((QsPlan *) plan)->sql);
	return elems;
}

/* A text value (json, text) as a NUL-terminated string in `into`, and its length. */
char *
qs_http_text_copy(text *t, MemoryContext into, int *len)
{
	char	   *out;

	*len = VARSIZE_ANY_EXHDR(t);
	out = MemoryContextAlloc(into, *len + 1);
	memcpy(out, VARDATA_ANY(t), *len);
	out[*len] = '\0';
	return out;
}

/* ---------------------------------------------------------------- routing */

/* The name of the i-th ":name" of a pattern. */
static void
param_name(const char *pattern, int i, char *out, size_t size)
{
	const char *s = strchr(pattern, ':');

	while (s && i-- > 0)
		s = strchr(s + 1, ':');
	if (s == NULL)
	{
		strlcpy(out, "path", size);
		return;
	}
	strlcpy(out, s + 1, Min(size, (size_t) (strchrnul(s + 1, '/') - s)));
}

/*
 * Path parameters and query keys that name a queue, a partition or a
 * consumer group (or a subscription mode): push's 255 bytes.
 */
static bool
param_is_name(const char *name)
{
	return strcmp(name, "queue") == 0 || strcmp(name, "partition") == 0 ||
		strcmp(name, "group") == 0 || strcmp(name, "consumerGroup") == 0 ||
		strcmp(name, "subscriptionMode") == 0;
}

/*
 * A query value of the request, NULL when absent or empty. It obeys the one
 * text rule (valid UTF-8, no NUL, names within 255 bytes) or the request is
 * invalid input naming it (22023: 400).
 */
const char *
qs_http_query_value(QsReq *req, const char *key)
{
	const char *v = MHD_lookup_connection_value(req->mhd, MHD_GET_ARGUMENT_KIND, key);

	if (v == NULL || v[0] == '\0')
		return NULL;
	qs_check_text(key, v, strlen(v), param_is_name(key) ? QS_NAME_MAX : 0);
	return v;
}

/*
 * Match the path against the route table; sets req->route and the path
 * parameters, or answers 404 (no pattern matches), 405 (a pattern matches
 * but not with this method) or 400 (a parameter that is not valid text).
 */
static bool
match_route(QsReq *req)
{
	char	   *path = req->url;
	int			len = strlen(path);
	QsRouteId	path_match = QS_R_NONE;

	if (len > 1 && path[len - 1] == '/')
		path[--len] = '\0';

	for (int id = 1; id < qs_nroutes; id++)
	{
		const char *ps[QS_MAX_PARAMS];
		int			pl[QS_MAX_PARAMS];
		int			np;

		if (!qs_pattern_match(qs_routes[id].pattern, path, ps, pl, &np))
			continue;
		if (strcmp(req->method, qs_routes[id].method) != 0)
		{
			if (path_match == QS_R_NONE)
				path_match = id;
			continue;
		}
		req->route = id;
		for (int i = 0; i < np; i++)
		{
			char		name[32];
			const char *why;

			param_name(qs_routes[id].pattern, i, name, sizeof(name));
			why = qs_text_problem(ps[i], pl[i], param_is_name(name) ? QS_NAME_MAX : 0);
			if (why != NULL)
			{
				qs_http_error(req, 400, psprintf("%s %s", name, why));
				return false;
			}
			req->params[i] = pnstrdup(ps[i], pl[i]);
		}
		req->arg = req->params[0];
		return true;
	}
	if (path_match == QS_R_NONE)
	{
		req->close = false;
		qs_http_error(req, 404, "not found");
		return false;
	}
	req->route = path_match;
	qs_http_error(req, 405, "method not allowed");
	return false;
}

/*
 * With queen_streams.auth = jwt: no or a bad bearer token is 401 with a
 * challenge, too low a level 403. Runs with no transaction open and never
 * raises (qs_jwt_verify reports, it does not throw).
 */
static bool
authenticate(QsReq *req)
{
	const char *h;
	const char *err;
	QsToken		tok;

	req->sub = NULL;
	if (qs_auth_mode != QS_AUTH_JWT || qs_routes[req->route].access == QS_ACCESS_NONE)
		return true;
	h = MHD_lookup_connection_value(req->mhd, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	if (h == NULL || pg_strncasecmp(h, "Bearer ", 7) != 0)
	{
		req->www_authenticate = "Bearer realm=\"queen\"";
		qs_http_error(req, 401, "a bearer token is required");
		return false;
	}
	for (h += 7; *h == ' '; h++)
		;
	err = qs_jwt_verify(h, strlen(h), &tok);
	if (err != NULL)
	{
		req->www_authenticate = "Bearer realm=\"queen\", error=\"invalid_token\"";
		qs_http_error(req, 401, err);
		return false;
	}
	if (!qs_access_allows(tok.level, qs_routes[req->route].access))
	{
		qs_http_error(req, 403, "the token's role does not grant this route");
		return false;
	}
	req->sub = tok.sub;
	req->token_checked = true;
	req->level = tok.level;
	req->token = tok;
	return true;
}

static enum MHD_Result
count_tenant_headers(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	if (pg_strcasecmp(key, "x-queen-tenant") == 0)
		(*(int *) cls)++;
	return MHD_YES;
}

static bool
parse_tenant(QsReq *req)
{
	const char *h;
	int			n = 0;

	req->tenant = qs_default_tenant;
	if (qs_http_tenancy != QS_TENANCY_HEADER)
		return true;
	/* two tenant headers: a client's and the proxy's; trust neither */
	MHD_get_connection_values(req->mhd, MHD_HEADER_KIND, count_tenant_headers, &n);
	if (n > 1)
	{
		qs_http_error(req, 400, "invalid x-queen-tenant header (must be a UUID)");
		return false;
	}
	h = MHD_lookup_connection_value(req->mhd, MHD_HEADER_KIND, "x-queen-tenant");
	if (h == NULL || h[0] == '\0')
		return true;
	if (!qs_uuid_parse(h, strlen(h), &req->tenant))
	{
		qs_http_error(req, 400, "invalid x-queen-tenant header (must be a UUID)");
		return false;
	}
	return true;
}

/*
 * An admin route that takes no tenant (the maintenance switches): it acts
 * on every tenant at once.
 */
static bool
route_spans_tenants(QsRouteId id)
{
	const QsCall *call = qs_routes[id].call;

	if (qs_routes[id].access != QS_ACCESS_ADMIN || call == NULL)
		return false;
	for (int i = 0; i < QS_CALL_MAX_ARGS && call->args[i] != NULL; i++)
		if (strcmp(call->args[i], "tenant") == 0)
			return false;
	return true;
}

/*
 * With auth = jwt and tenancy = header, the tenant a token acts for comes
 * from its queen_streams.jwt_tenant_claim claim, failing closed:
 *  - a tenant UUID: the request's tenant (x-queen-tenant, the default tenant
 *    when absent) must be that one;
 *  - "*" with role admin: a server-wide admin, any tenant;
 *  - no claim (or the claim's name unset): refused, unless
 *    jwt_trust_tenant_header (the behaviour before 0.8), where the header
 *    is trusted and an admin token is server-wide;
 *  - anything else: refused.
 * Every refusal is 403 (the token is valid; it does not grant the tenant).
 * An admin route that spans tenants needs a server-wide admin. Without
 * tenancy there is one tenant, and every admin token is server-wide.
 */
static bool
token_grants_tenant(QsReq *req)
{
	const QsToken *tok = &req->token;
	pg_uuid_t	claimed;

	req->server_admin = false;
	if (!req->token_checked)
		return true;
	if (qs_http_tenancy != QS_TENANCY_HEADER)
	{
		req->server_admin = tok->level == QS_ACCESS_ADMIN;
		return true;
	}
	if (!tok->tenant_present)
	{
		if (!qs_http_jwt_trust_tenant_header)
		{
			qs_http_error(req, 403, "the token names no tenant");
			return false;
		}
		req->server_admin = tok->level == QS_ACCESS_ADMIN;
	}
	else if (tok->tenant != NULL && strcmp(tok->tenant, "*") == 0 &&
			 tok->level == QS_ACCESS_ADMIN)
		req->server_admin = true;
	else if (tok->tenant == NULL ||
			 !qs_uuid_parse(tok->tenant, strlen(tok->tenant), &claimed) ||
			 memcmp(&claimed, &req->tenant, sizeof(pg_uuid_t)) != 0)
	{
		qs_http_error(req, 403, "the token does not grant this tenant");
		return false;
	}
	if (route_spans_tenants(req->route) && !req->server_admin)
	{
		qs_http_error(req, 403, "the route acts on every tenant: it needs a server-wide admin token");
		return false;
	}
	return true;
}

typedef struct Framing
{
	int			host;
	int			te;
	int			cl;
	bool		chunked;
	bool		cl_conflict;
	const char *cl_first;
} Framing;

static enum MHD_Result
framing_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	Framing    *f = (Framing *) cls;

	if (value == NULL)
		value = "";
	if (pg_strcasecmp(key, "Host") == 0)
		f->host++;
	else if (pg_strcasecmp(key, "Transfer-Encoding") == 0)
	{
		f->te++;
		f->chunked = pg_strcasecmp(value, "chunked") == 0;
	}
	else if (pg_strcasecmp(key, "Content-Length") == 0)
	{
		if (f->cl++ == 0)
			f->cl_first = value;
		else if (strcmp(f->cl_first, value) != 0)
			f->cl_conflict = true;
	}
	return MHD_YES;
}

/*
 * The framing rules of RFC 9112 that libmicrohttpd leaves to us, for every
 * request (the first one of a connection was screened already, screen.c):
 * one Host in HTTP/1.1, Content-Length headers that agree, no
 * Content-Length beside Transfer-Encoding, no transfer coding but chunked.
 * Each refusal closes the connection.
 */
static bool
framing_ok(QsReq *req)
{
	Framing		f;
	int			status = 0;
	const char *msg = NULL;

	memset(&f, 0, sizeof(f));
	MHD_get_connection_values(req->mhd, MHD_HEADER_KIND, framing_header, &f);
	if (f.cl_conflict)
		status = 400, msg = "conflicting Content-Length headers";
	else if (f.te > 0 && f.cl > 0)
		status = 400, msg = "Content-Length together with Transfer-Encoding";
	else if (f.te > 1 || (f.te == 1 && !f.chunked))
		status = 501, msg = "unsupported transfer coding (only chunked is)";
	else if (req->http11 && f.host == 0)
		status = 400, msg = "a Host header is required";
	else if (f.host > 1)
		status = 400, msg = "more than one Host header";
	if (status == 0)
		return true;
	req->close = true;
	qs_http_error(req, status, msg);
	return false;
}

/*
 * Headers are in, the body is not: refuse what must be refused before
 * reading it. Any answer set here is sent at once.
 */
void
qs_http_route(QsReq *req)
{
	const char *cl;

	if (req->conn && req->conn->over_limit)
	{
		req->close = true;
		req->retry_after = "1";
		qs_http_error(req, 503, "too many connections");
		return;
	}
	if (req->header_bytes > qs_http_max_header_bytes)
	{
		req->close = true;
		qs_http_error(req, 431, "request headers too large");
		return;
	}
	if (!framing_ok(req))
		return;
	if (!match_route(req) || !authenticate(req))
		return;
	cl = MHD_lookup_connection_value(req->mhd, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl != NULL && strtoll(cl, NULL, 10) > (long long) qs_http_max_body_bytes)
	{
		req->close = true;
		qs_http_error(req, 413, "request body too large");
		return;
	}
	if (parse_tenant(req))
		(void) token_grants_tenant(req);
}

/* Parse the request; an error becomes its answer (false). No transaction. */
static bool
parse(QsReq *req, const QsRouteDef *def)
{
	MemoryContext cxt = req->ctx;
	volatile bool proceed = true;

	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		if (def->parse)
			proceed = def->parse(req);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		/* not dropped: it is the answer (qs_http_fail logs all but a 400 or 404) */
		FlushErrorState();
		qs_http_fail(req, def->failed, edata);
		proceed = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	return proceed;
}

/* The body is complete: serve the request, park it or queue it for a group. */
void
qs_http_dispatch(QsReq *req)
{
	const QsRouteDef *def = qs_route_def(req->route);

	req->dispatched = true;
	if (def == NULL)
	{
		qs_http_error(req, 404, "not found");
		return;
	}
	if (qs_role_refuses(req))
		return;
	if (!parse(req, def))
		return;
	/* a writing route waits for the worker's next group (group.c) */
	if (qs_group_wants(req))
	{
		qs_group_add(req);
		return;
	}
	qs_http_execute(req, def);
	qs_role_after(req);
}
