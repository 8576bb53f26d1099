/*
 * answer.c: a request's answer (a JSON body, or an error's) and the
 * counting of answers per route and status for /metrics.
 */
#include "http/dispatch/route.h"
#include "common/json.h"

#include "utils/jsonb.h"
#include "utils/memutils.h"

const char *
qs_route_name(QsRouteId id)
{
	return qs_routes[id].name;
}

const char *
qs_route_method(QsRouteId id)
{
	return qs_routes[id].method;
}

int
qs_route_count(void)
{
	return qs_nroutes;
}

/* libmicrohttpd sends 100..999; we send no code past 599 (one would count as 500) */
static int
qs_code_index(int status)
{
	if (status < QS_CODE_MIN || status >= QS_CODE_MIN + QS_CODE_COUNT)
		status = 500;
	return status - QS_CODE_MIN;
}

void
qs_http_count_status(QsRouteId route, int status)
{
	QsHttpShared *s = qs_http_shared;

	pg_atomic_fetch_add_u64(&s->requests[route][qs_code_index(status)], 1);
	pg_atomic_fetch_add_u64(&s->workers[qs_http_worker_index].requests, 1);
}

void
qs_http_count(QsReq *req)
{
	qs_http_count_status(req->route, req->status);
}

/* ---------------------------------------------------------------- responses */

void
qs_http_json(QsReq *req, int status, const char *json, int len)
{
	req->status = status;
	req->resp = MemoryContextAlloc(req->ctx, len + 1);
	memcpy(req->resp, json, len);
	req->resp[len] = '\0';
	req->resp_len = len;
}

void
qs_http_error(QsReq *req, int status, const char *message)
{
	QsJson		j;
	MemoryContext old = MemoryContextSwitchTo(req->ctx);

	qsj_init(&j);
	qsj_object(&j, NULL);
	qsj_str(&j, "error", message);
	qsj_end_object(&j);
	req->status = status;
	req->resp = j.buf.data;
	req->resp_len = j.buf.len;
	MemoryContextSwitchTo(old);
}

char *
qs_http_jsonb_text(Jsonb *jb, int *len)
{
	StringInfoData out;

	initStringInfo(&out);
	(void) JsonbToCString(&out, &jb->root, VARSIZE(jb));
	*len = out.len;
	return out.data;
}
