/*
 * routes_admin.c: queue administration over HTTP (admin level with auth):
 * POST /api/v1/configure and DELETE /api/v1/resources/queues/:queue, each
 * calling the SQL function of the same job (queen.configure,
 * queen.delete_queue) under the request tenant.
 */
#include "http/dispatch/route.h"
#include "common/json.h"
#include "common/ids.h"
#include "common/spi.h"

#include "catalog/pg_type_d.h"
#include "utils/builtins.h"

static QsPlan configure_plan = {
	"SELECT queen.configure($1, $2)", 2, {JSONBOID, UUIDOID}
};

static QsPlan delete_plan = {
	"SELECT queen.delete_queue($1, $2)", 2, {TEXTOID, UUIDOID}
};

static bool
configure_parse(QsReq *req)
{
	req->state = qs_http_body_jsonb(req);
	return true;
}

static void
respond(QsReq *req, int status, Jsonb *jb)
{
	req->status = status;
	req->resp = qs_http_jsonb_text(jb, &req->resp_len);
}

static void
configure_run(QsReq *req)
{
	Datum		args[2];
	Jsonb	   *res;

	args[0] = JsonbPGetDatum((Jsonb *) req->state);
	args[1] = qs_uuid_datum(&req->tenant);
	qs_spi_connect();
	res = qs_http_call(&configure_plan, args, NULL, req->ctx);
	qs_spi_finish();
	respond(req, 200, res);
}

static void
delete_run(QsReq *req)
{
	Datum		args[2];
	Jsonb	   *res;

	args[0] = CStringGetTextDatum(req->arg);
	args[1] = qs_uuid_datum(&req->tenant);
	qs_spi_connect();
	res = qs_http_call(&delete_plan, args, NULL, req->ctx);
	qs_spi_finish();
	/* 200 whether it existed or not, as Queen: a cleanup may delete twice */
	respond(req, 200, res);
}

const QsRouteDef qs_route_configure = {configure_parse, configure_run, NULL, "configure failed", true, true};
const QsRouteDef qs_route_delete_queue = {NULL, delete_run, NULL, "delete failed", true, true};
