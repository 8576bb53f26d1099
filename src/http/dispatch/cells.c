/*
 * cells.c: the listener on a router database (the queen_streams_router
 * extension, README "Deploying beyond one server"). There the queen
 * functions are PL/Proxy calls that run on the tenant's cell, so the
 * listener serves the same routes unchanged; four things differ:
 *
 * - the extension that makes a database servable may be the router's;
 * - the listener's own partition check asks the cell (queen.partition_queue);
 * - a push through the router commits on the cell, whose commit hook wakes
 *   the cell's parked pops, not the router's: after a push or a cycle the
 *   router wakes its own pops parked on the queues it pushed to (pushes made
 *   on a cell directly are seen by the parked pops' recheck);
 * - PL/Proxy re-raises a cell's error with its SQLSTATE and the message
 *   prefixed "fn(args): [db] REMOTE ERROR: ", which is cut off again so
 *   that 400 and 404 bodies read as on a cell;
 * - a cell commits its part of a write on its own, when the call returns:
 *   an error on the router after that (a statement timeout, the router's
 *   own commit) does not undo it, so it is answered "outcome unknown",
 *   never "nothing was committed".
 */
#include "http/dispatch/route.h"
#include "http/dispatch/cells.h"
#include "common/ids.h"
#include "common/spi.h"
#include "storage/storage.h"

#include "catalog/pg_type_d.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/builtins.h"

bool		qs_cells_is_router = false;

/* The oid of queen_streams, else of queen_streams_router (InvalidOid: neither). */
Oid
qs_cells_extension_oid(void)
{
	Oid			oid = get_extension_oid("queen_streams", true);

	qs_cells_is_router = false;
	if (!OidIsValid(oid))
	{
		oid = get_extension_oid("queen_streams_router", true);
		qs_cells_is_router = OidIsValid(oid);
	}
	return oid;
}

static QsPlan partition_queue_plan = {
	"SELECT q FROM queen.partition_queue($1, $2) q WHERE q IS NOT NULL",
	2, {UUIDOID, UUIDOID}
};

/*
 * The queue of a partition the tenant owns (NULL: not the tenant's). On a
 * cell the storage layer's own check; on a router, where there are no
 * tables, the cell's queen.partition_queue. Inside SPI.
 */
char *
qs_cells_partition_queue(const pg_uuid_t *tenant, const pg_uuid_t *pid)
{
	Datum		args[2];
	bool		isnull;

	if (!qs_cells_is_router)
		return qs_partition_owned(tenant, pid, false);
	args[0] = qs_uuid_datum(pid);
	args[1] = qs_uuid_datum(tenant);
	qs_exec(&partition_queue_plan, args, NULL, 1);
	if (SPI_processed != 1)
		return NULL;
	return TextDatumGetCString(qs_col(0, 1, &isnull));
}

/*
 * On a router, in the request's transaction: count and wake, at commit, the
 * queues of the stored items of a push answer (an array of results) or of a
 * cycle's push_results. Elsewhere the push hook already did.
 */
void
qs_cells_pushed(QsReq *req, Jsonb *results)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	if (!qs_cells_is_router || results == NULL || !JB_ROOT_IS_ARRAY(results) ||
		JB_ROOT_IS_SCALAR(results))
		return;
	it = JsonbIteratorInit(&results->root);
	tok = JsonbIteratorNext(&it, &v, true);	/* WJB_BEGIN_ARRAY */
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		JsonbContainer *o;
		char	   *status;
		char	   *queue;
		int64		n;

		CHECK_FOR_INTERRUPTS();
		if (tok != WJB_ELEM || (o = qs_json_container(&v)) == NULL || !JsonContainerIsObject(o))
			continue;
		status = qs_json_string(o, "status", "push result", false);
		if (status == NULL || strcmp(status, "queued") != 0)
			continue;
		queue = qs_json_string(o, "queueName", "push result", false);
		if (queue == NULL)
			queue = qs_json_string(o, "queue", "push result", false);
		if (queue == NULL)
			continue;
		n = qs_json_int(o, "count", "push result", 1);
		qs_queue_pushed_at_commit(&req->tenant, queue, (int) Min(Max(n, 1), INT_MAX));
	}
}

/* A cell's message as the cell said it, without PL/Proxy's prefix. */
const char *
qs_cells_remote_message(const char *message)
{
	const char *marker = " REMOTE ERROR: ";
	const char *at;

	if (message == NULL || (at = strstr(message, marker)) == NULL)
		return message;
	return at + strlen(marker);
}

/*
 * A write's body starts on a router: from here a cell may commit. (Set on
 * every run, so a parked pop's retry and a group member count too.)
 */
void
qs_cells_body_starts(QsReq *req)
{
	req->cell_may_commit = qs_cells_is_router && qs_route_needs_primary(req->route);
}

/*
 * Did a write through the router fail after a cell may have committed its
 * part? A cell's own error (PL/Proxy's "REMOTE ERROR") means the cell
 * rolled back; any other error once the body started may come after a
 * cell's commit (a timeout or a cancel while the call ran or after it, the
 * router's commit).
 */
bool
qs_cells_outcome_unknown(QsReq *req, ErrorData *edata)
{
	if (!qs_cells_is_router || !req->cell_may_commit)
		return false;
	return edata->message == NULL || strstr(edata->message, " REMOTE ERROR: ") == NULL;
}

/* 500 {"error": ..., "outcome": "unknown"}: retry with the same transaction ids. */
void
qs_cells_answer_unknown(QsReq *req, const char *failed)
{
	QsJson		j;
	MemoryContext old = MemoryContextSwitchTo(req->ctx);

	qsj_init(&j);
	qsj_object(&j, NULL);
	qsj_str(&j, "error", psprintf("%s: outcome unknown: a cell may have committed its part "
								  "before the router failed; retry with the same transaction ids",
								  failed));
	qsj_str(&j, "outcome", "unknown");
	qsj_end_object(&j);
	req->status = 500;
	req->resp = j.buf.data;
	req->resp_len = j.buf.len;
	MemoryContextSwitchTo(old);
}
