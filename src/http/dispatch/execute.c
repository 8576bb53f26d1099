/*
 * execute.c: the one-transaction-per-request wrapper. A route that does not
 * join a group commit runs here in a transaction of its own (or none) and
 * commits; after-commit bookkeeping follows; the answer is set last. A
 * failure aborts the transaction and is answered here (400 for invalid
 * input, 500 otherwise); the worker goes on. A parked pop's retry runs the
 * same way.
 */
#include "http/dispatch/route.h"
#include "common/spi.h"
#include "http/dispatch/cells.h"

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

/*
 * The status of a call that raised, by SQLSTATE: invalid input (22023,
 * 22P02, numbers and dates that do not parse or fit) is 400, a named thing
 * that does not exist (42704) 404, a deadlock or a serialization failure
 * (40P01, 40001) and a tenant being moved (57P03) 503, anything else 500.
 */
static int
qs_http_status_for_error(int sqlerrcode)
{
	switch (sqlerrcode)
	{
		case ERRCODE_INVALID_PARAMETER_VALUE:
		case ERRCODE_INVALID_TEXT_REPRESENTATION:
		case ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE:
		case ERRCODE_PROGRAM_LIMIT_EXCEEDED:
		case ERRCODE_INVALID_DATETIME_FORMAT:
		case ERRCODE_DATETIME_FIELD_OVERFLOW:
			return 400;
		case ERRCODE_UNDEFINED_OBJECT:
			return 404;
		case ERRCODE_CANNOT_CONNECT_NOW:
			/* a router's tenant in the middle of a move (cells.c) */
		case ERRCODE_T_R_DEADLOCK_DETECTED:
		case ERRCODE_T_R_SERIALIZATION_FAILURE:
			/* rolled back whole: Queen's clients retry a 503 */
			return 503;
		default:
			return 500;
	}
}

/*
 * What a 500 tells the client about the error: a few words chosen by its
 * SQLSTATE class, never the PostgreSQL message (which can carry SQL text,
 * names and values); the message itself goes to the server log.
 */
static const char *
qs_http_error_words(int sqlerrcode)
{
	switch (sqlerrcode)
	{
		case ERRCODE_QUERY_CANCELED:
			return "statement timeout or canceled; nothing was committed, safe to retry";
		case ERRCODE_T_R_DEADLOCK_DETECTED:
			return "deadlock detected; nothing was committed, retry";
		case ERRCODE_T_R_SERIALIZATION_FAILURE:
			return "serialization failure; nothing was committed, retry";
		case ERRCODE_LOCK_NOT_AVAILABLE:
			return "lock not available; nothing was committed, safe to retry";
		case ERRCODE_DATA_CORRUPTED:
			return "corrupt data; see the server log";
		case ERRCODE_READ_ONLY_SQL_TRANSACTION:
			return "the server is read-only";
		case ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE:
			return "the server is not configured for this request; nothing was committed, see the server log";
	}
	if (ERRCODE_TO_CATEGORY(sqlerrcode) == ERRCODE_INSUFFICIENT_RESOURCES)
		return "out of resources; see the server log";
	return "internal error; see the server log";
}

const QsRouteDef *
qs_route_def(QsRouteId id)
{
	if (id == QS_R_NONE)
		return NULL;
	return qs_routes[id].call ? &qs_route_call : qs_routes[id].def;
}


/*
 * Whether queen_streams is installed, asked by every request. A positive
 * answer is kept: DROP EXTENSION drops the extension's schemas and
 * functions, and their invalidations (or a cache reset) clear it. A negative
 * one is not kept, so CREATE EXTENSION is seen by the next request. This
 * saves a catalog index scan per request.
 */
static Oid	extension_oid = InvalidOid;
static bool extension_callbacks = false;

static void
extension_inval(Datum arg, int cacheid, uint32 hashvalue)
{
	extension_oid = InvalidOid;
}

bool
qs_extension_installed(void)
{
	if (!extension_callbacks)
	{
		CacheRegisterSyscacheCallback(NAMESPACEOID, extension_inval, (Datum) 0);
		CacheRegisterSyscacheCallback(PROCOID, extension_inval, (Datum) 0);
		extension_callbacks = true;
	}
	/* see a DROP EXTENSION that committed before this request began */
	AcceptInvalidationMessages();
	if (!OidIsValid(extension_oid))
		extension_oid = qs_cells_extension_oid();
	return OidIsValid(extension_oid);
}

static void
qs_http_extension_missing(QsReq *req)
{
	char	   *msg = psprintf("queen_streams is not installed in database \"%s\"; "
							   "run CREATE EXTENSION queen_streams there",
							   get_database_name(MyDatabaseId));

	req->retry_after = "5";
	qs_http_error(req, 503, msg);
}

/* The whole error to the server log, with the request and its SQLSTATE. */
static void
log_failure(QsReq *req, ErrorData *edata, const char *answered)
{
	ereport(LOG,
			(errcode(edata->sqlerrcode),
			 errmsg("HTTP request %s %s failed: %s (answered %s)",
					req->method, req->url, edata->message, answered),
			 edata->detail ? errdetail_internal("%s", edata->detail) : 0,
			 edata->context ? errcontext("%s", edata->context) : 0));
}

/*
 * A request that raised (or whose group's commit did): invalid input,
 * unknown names and a refusal to retry (a tenant moving between cells)
 * answer their message; a deadlock or a serialization failure 503 with
 * Retry-After (rolled back whole, Queen's clients retry it); objects gone
 * under the request 503; on a router, an error after a cell may have
 * committed 500 "outcome unknown" (cells.c); anything else a 500 whose
 * words say what happened without the error's text, which goes to the
 * server log.
 */
void
qs_http_fail(QsReq *req, const char *failed, ErrorData *edata)
{
	int			status = qs_http_status_for_error(edata->sqlerrcode);

	req->parked = false;
	if (status == 400 || status == 404 || edata->sqlerrcode == ERRCODE_CANNOT_CONNECT_NOW)
	{
		if (status == 503)
			req->retry_after = "1";
		qs_http_error(req, status, qs_cells_remote_message(edata->message));
	}
	else if (qs_cells_outcome_unknown(req, edata))
	{
		log_failure(req, edata, "500, outcome unknown");
		qs_cells_answer_unknown(req, failed);
	}
	else if (status == 503)
	{
		/* a deadlock or a serialization failure: nothing committed */
		log_failure(req, edata, "503, retryable");
		req->retry_after = "1";
		qs_http_error(req, 503, psprintf("%s: %s", failed,
										 qs_http_error_words(edata->sqlerrcode)));
	}
	else if (edata->sqlerrcode == ERRCODE_UNDEFINED_TABLE ||
			 edata->sqlerrcode == ERRCODE_UNDEFINED_FUNCTION ||
			 edata->sqlerrcode == ERRCODE_INVALID_SCHEMA_NAME)
	{
		/* our statements are fixed: their objects went away as they ran (DROP EXTENSION) */
		log_failure(req, edata, "503");
		req->retry_after = "5";
		qs_http_error(req, 503, "queen_streams was dropped or changed while the request ran; retry");
	}
	else
	{
		/* the whole error to the server log, words without its text to the client */
		log_failure(req, edata, "500");
		qs_http_error(req, 500, psprintf("%s: %s", failed,
										 qs_http_error_words(edata->sqlerrcode)));
	}
}

/*
 * The route's body in the open (sub)transaction: under the statement
 * timeout, with a snapshot and a pg_stat_activity line (`note` appended).
 */
void
qs_http_run_body(QsReq *req, const QsRouteDef *def, const char *note)
{
	if (qs_http_statement_timeout_ms > 0)
		enable_timeout_after(STATEMENT_TIMEOUT, qs_http_statement_timeout_ms);
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, psprintf("%s %s%s", req->method,
												   qs_routes[req->route].pattern, note));
	MemoryContextSwitchTo(req->ctx);

	if (def->needs_extension && !qs_extension_installed())
		qs_http_extension_missing(req);
	else
	{
		qs_cells_body_starts(req);
		def->run(req);
	}

	PopActiveSnapshot();
	if (qs_http_statement_timeout_ms > 0)
		disable_timeout(STATEMENT_TIMEOUT, false);
}

/*
 * After a commit, the route's bookkeeping (def->after): committed, it must
 * not turn the answer into a 500, so an error is logged and dropped.
 */
void
qs_http_after_commit(QsReq *req, const QsRouteDef *def)
{
	MemoryContext cxt = req->ctx;

	PG_TRY();
	{
		def->after(req);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		qs_log_dropped_error("bookkeeping after a committed request failed; its answer stands");
		FlushErrorState();
	}
	PG_END_TRY();
}

/*
 * Run the route alone, in a transaction of its own (or none). Every error
 * is caught here and becomes the response.
 */
void
qs_http_execute(QsReq *req, const QsRouteDef *def)
{
	MemoryContext cxt = req->ctx;

	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		if (!def->needs_xact)
			def->run(req);
		else
		{
			SetCurrentStatementStartTimestamp();
			StartTransactionCommand();
			QueryCancelPending = false;
			qs_http_run_body(req, def, "");
			CommitTransactionCommand();
			MemoryContextSwitchTo(cxt);
			if (def->after && req->status < 300)
				qs_http_after_commit(req, def);
			pgstat_report_activity(STATE_IDLE, NULL);
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		HOLD_INTERRUPTS();
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		/* not dropped: it is the answer (qs_http_fail logs all but a 400 or 404) */
		FlushErrorState();
		if (qs_http_statement_timeout_ms > 0)
			disable_timeout(STATEMENT_TIMEOUT, false);
		AbortCurrentTransaction();
		MemoryContextSwitchTo(cxt);
		RESUME_INTERRUPTS();

		qs_http_fail(req, def->failed, edata);
		pgstat_report_activity(STATE_IDLE, NULL);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
}

/* A parked pop retries (parked.c): same request, a new transaction. */
void
qs_http_retry(QsReq *req)
{
	qs_http_execute(req, qs_route_def(req->route));
	qs_role_after(req);
}
