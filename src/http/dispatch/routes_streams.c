/*
 * routes_streams.c: POST /streams/v1/queries, /streams/v1/state/get and
 * /streams/v1/cycle.
 *
 * Each calls queen_streams.register_query, state_get or cycle through SPI
 * and answers the status that qs_http_status() (src/streams/status.c)
 * computes from the body, so SQL and HTTP cannot disagree. With tenancy on,
 * state/get and cycle first check that partition_id is the caller's: a
 * foreign partition answers 404 {"error":"not found"}, exactly like a
 * missing one, before the function runs.
 */
#include "http/dispatch/route.h"
#include "http/dispatch/cells.h"
#include "common/ids.h"
#include "common/spi.h"

#include "catalog/pg_type_d.h"
#include "storage/storage.h"
#include "streams/streams.h"
#include "utils/array.h"
#include "utils/builtins.h"

typedef struct StreamsCall
{
	const char *route;			/* as qs_http_status() spells it */
	Jsonb	   *request;
	Jsonb	   *response;
} StreamsCall;

static QsPlan register_plan = {
	"SELECT queen_streams.register_query($1, $2)", 2, {JSONBOID, UUIDOID}
};

static QsPlan state_get_plan = {
	"SELECT queen_streams.state_get($1, $2)", 2, {JSONBOID, UUIDOID}
};

static QsPlan cycle_plan = {
	"SELECT queen_streams.cycle($1, $2)", 2, {JSONBOID, UUIDOID}
};

static QsPlan cycle_many_plan = {
	"SELECT queen_streams.cycle_many($1, $2)", 2, {JSONBARRAYOID, UUIDOID}
};

static bool
parse(QsReq *req, const char *route)
{
	StreamsCall *c = palloc0(sizeof(StreamsCall));

	c->route = route;
	c->request = qs_http_body_jsonb(req);
	req->state = c;
	return true;
}

static bool
queries_parse(QsReq *req)
{
	return parse(req, QS_ROUTE_QUERIES);
}

static bool
state_get_parse(QsReq *req)
{
	return parse(req, QS_ROUTE_STATE_GET);
}

static bool
cycle_parse(QsReq *req)
{
	return parse(req, QS_ROUTE_CYCLE);
}

/*
 * The tenancy gate: false (and a 404) when partition_id is a UUID that is
 * not the tenant's. Anything else is left to the function's own checks.
 */
static bool
partition_visible(QsReq *req, StreamsCall *c)
{
	JsonbValue	v;
	pg_uuid_t	pid;

	if (qs_http_tenancy != QS_TENANCY_HEADER || !JB_ROOT_IS_OBJECT(c->request) ||
		getKeyJsonValueFromContainer(&c->request->root, "partition_id", 12, &v) == NULL ||
		v.type != jbvString ||
		!qs_uuid_parse(v.val.string.val, v.val.string.len, &pid))
		return true;
	if (qs_cells_partition_queue(&req->tenant, &pid) != NULL)
		return true;
	qs_http_error(req, 404, "not found");
	return false;
}

/* The answer to the call's response (in the request's memory): its status and text. */
static void
respond(QsReq *req, StreamsCall *c)
{
	MemoryContext old = MemoryContextSwitchTo(req->ctx);
	int			len;

	req->status = qs_http_status(c->route, c->response);
	req->resp = qs_http_jsonb_text(c->response, &len);
	req->resp_len = len;
	MemoryContextSwitchTo(old);
}

static void
run(QsReq *req, QsPlan *plan, bool gated)
{
	StreamsCall *c = (StreamsCall *) req->state;
	Datum		args[2];

	c->response = NULL;
	qs_spi_connect();
	if (!gated || partition_visible(req, c))
	{
		args[0] = JsonbPGetDatum(c->request);
		args[1] = qs_uuid_datum(&req->tenant);
		c->response = qs_http_call(plan, args, NULL, req->ctx);
	}
	qs_spi_finish();
	if (c->response == NULL)
		return;
	if (qs_cells_is_router && plan == &cycle_plan && JB_ROOT_IS_OBJECT(c->response))
	{
		JsonbValue	v;

		if (getKeyJsonValueFromContainer(&c->response->root, "push_results", 12, &v) != NULL &&
			v.type == jbvBinary)
			qs_cells_pushed(req, JsonbValueToJsonb(&v));
	}
	respond(req, c);
}

static void
queries_run(QsReq *req)
{
	run(req, &register_plan, false);
}

static void
state_get_run(QsReq *req)
{
	run(req, &state_get_plan, true);
}

static void
cycle_run(QsReq *req)
{
	run(req, &cycle_plan, true);
}

/*
 * A group's cycles of one tenant in one call (queen_streams.cycle_many):
 * their sink items are pushed as one push, so each sink partition's row is
 * locked once, last. A foreign partition still answers its 404 first and
 * stays out of the call. Declined on a router, whose counting reads each
 * answer, and before ALTER EXTENSION UPDATE has installed the function.
 * Any error: the caller runs them one by one, each with its own answer.
 */
static bool
cycle_run_many(QsReq **reqs, int n)
{
	Datum	   *bodies = palloc(sizeof(Datum) * n);
	int		   *who = palloc(sizeof(int) * n);
	int			m = 0;
	Datum		args[2];
	Datum	   *elems;

	if (!qs_http_many_available("queen_streams", "cycle_many", &cycle_many_plan))
		return false;
	qs_spi_connect();
	for (int k = 0; k < n; k++)
	{
		StreamsCall *c = (StreamsCall *) reqs[k]->state;

		c->response = NULL;
		if (!partition_visible(reqs[k], c))
			continue;
		bodies[m] = JsonbPGetDatum(c->request);
		who[m++] = k;
	}
	if (m > 0)
	{
		args[0] = PointerGetDatum(construct_array(bodies, m, JSONBOID, -1, false, TYPALIGN_INT));
		args[1] = qs_uuid_datum(&reqs[0]->tenant);
		elems = qs_http_call_many(&cycle_many_plan, args, NULL, JSONBOID, m);
		for (int i = 0; i < m; i++)
		{
			QsReq	   *req = reqs[who[i]];
			StreamsCall *c = (StreamsCall *) req->state;
			MemoryContext old;

			old = MemoryContextSwitchTo(req->ctx);
			c->response = DatumGetJsonbPCopy(elems[i]);
			MemoryContextSwitchTo(old);
			respond(req, c);
		}
	}
	qs_spi_finish();
	return true;
}

/*
 * After commit: the cycle's source ack and the cycle itself count on the
 * source queue. Its sink pushes were counted at commit like any push.
 */
static void
cycle_after(QsReq *req)
{
	StreamsCall *c = (StreamsCall *) req->state;
	JsonbContainer *resp;
	JsonbContainer *ackreq = NULL;
	JsonbValue	v;
	char	   *queue;
	bool		success;

	if (c->response == NULL || !JB_ROOT_IS_OBJECT(c->response))
		return;
	resp = &c->response->root;
	queue = qs_json_string(resp, "queueName", "cycle response", false);
	if (queue == NULL)
		return;
	success = qs_json_bool(resp, "success", "cycle response", false);
	qs_stat_add(&req->tenant, queue, success ? QS_STAT_CYCLES : QS_STAT_CYCLES_FAILED, 1);
	if (!success)
		return;

	if (getKeyJsonValueFromContainer(&c->request->root, "ack", 3, &v) != NULL)
		ackreq = qs_json_container(&v);
	if (ackreq != NULL && JsonContainerIsObject(ackreq) &&
		getKeyJsonValueFromContainer(resp, "ack_result", 10, &v) != NULL)
	{
		JsonbContainer *ackres = qs_json_container(&v);
		char	   *status = qs_json_string(ackreq, "status", "ack", false);
		bool		ok = qs_ack_status(status, status ? strlen(status) : 0) == QS_ACK_COMPLETED;

		if (ackres == NULL)
			return;
		if (ok)
			qs_stat_add(&req->tenant, queue, QS_STAT_ACKED,
						qs_json_int(ackres, "count", "ack_result", 0));
		else
			qs_stat_add(&req->tenant, queue, QS_STAT_NACKED,
						qs_json_int(ackreq, "count", "ack", 0));
	}
}

const QsRouteDef qs_route_queries = {queries_parse, queries_run, NULL, "register failed", true, true};
const QsRouteDef qs_route_state_get = {state_get_parse, state_get_run, NULL, "state get failed", true, true};
const QsRouteDef qs_route_cycle = {cycle_parse, cycle_run, cycle_after, "cycle failed", true, true, cycle_run_many};
