/*
 * subxact.c: run a piece of work in its own internal subtransaction, so
 * that a failure rolls back exactly that work and becomes an answer
 * (success:false) instead of aborting the caller's transaction. Used by
 * the cycle, the transaction route, the maintenance replay and the
 * parsing of stream definitions.
 *
 * Only errors that are a verdict on the work itself are caught, as a
 * PL/pgSQL EXCEPTION block names the conditions it handles: bad data
 * (class 22), a constraint (23), a syntax error in the request's own text
 * (42601: a jsonpath), an unknown named thing (42704), a state that does
 * not allow the work (55000: a lease gone, a partition vanished), a value
 * over our limits (54000) and a trigger's RAISE (P0001). Everything else
 * is raised again once the subtransaction is closed: a deadlock or a
 * serialization failure (class 40) so that the client retries on its
 * SQLSTATE, cancellation and timeouts (the caller's limits; a group commit
 * gives way on a lock that way, src/http/group.c), lack of resources (53),
 * an operator's intervention (57P), system errors (58) and internal errors
 * and corruption (XX), none of which the work's author can act on.
 *
 * Also here: the log line of an error that a PG_CATCH elsewhere drops.
 */
#include "common/spi.h"

#include "access/xact.h"
#include "utils/resowner.h"

/* Is the error a verdict on the work (answered), or the server's (raised)? */
static bool
is_verdict(int sqlerrcode)
{
	switch (ERRCODE_TO_CATEGORY(sqlerrcode))
	{
		case ERRCODE_DATA_EXCEPTION:
		case ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION:
			return true;
	}
	switch (sqlerrcode)
	{
		case ERRCODE_SYNTAX_ERROR:
		case ERRCODE_UNDEFINED_OBJECT:
		case ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE:
		case ERRCODE_PROGRAM_LIMIT_EXCEEDED:
		case ERRCODE_RAISE_EXCEPTION:
			return true;
	}
	return false;
}

/*
 * The answer's words for a caught error: its message, which is ours or
 * names the bad input; a constraint's or a trigger's message names
 * tables, columns and values, so only what happened and the SQLSTATE are
 * given (the log has the rest).
 */
static const char *
verdict_words(ErrorData *edata)
{
	if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION)
		return psprintf("rejected by a constraint of the stored data (SQLSTATE %s)",
						unpack_sql_state(edata->sqlerrcode));
	if (edata->sqlerrcode == ERRCODE_RAISE_EXCEPTION)
		return "rejected by a trigger (SQLSTATE P0001); see the server log";
	return edata->message;
}

const char *
qs_subxact_run(QsSubxactWork work, void *arg, const char *what)
{
	return qs_subxact_run_also(work, arg, what, 0);
}

/*
 * The same, with one more SQLSTATE answered as a verdict: a caller whose
 * work only parses the user's text knows that even an error code that is
 * not a verdict elsewhere (jsonpath_in's 0A000 for an unsupported regex
 * flag) judges that text.
 */
const char *
qs_subxact_run_also(QsSubxactWork work, void *arg, const char *what, int also_verdict)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	const char *volatile error = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcontext);
	PG_TRY();
	{
		bool		keep;

		qs_spi_connect();
		keep = work(arg);
		qs_spi_finish();
		if (keep)
			ReleaseCurrentSubTransaction();
		else
			RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		bool		verdict;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		verdict = is_verdict(edata->sqlerrcode) ||
			(also_verdict != 0 && edata->sqlerrcode == also_verdict);

		/*
		 * A verdict becomes the answer: logged, at LOG and not WARNING, as
		 * the client has its answer and a WARNING would reach a SQL caller
		 * as a notice too; LOG reaches the server log under the default
		 * log_min_messages. Any other error is not dropped: it is kept in
		 * edata and raised again below.
		 */
		if (verdict)
			ereport(LOG,
					(errcode(edata->sqlerrcode),
					 errmsg("%s rolled back and answered success:false: %s",
							what, edata->message),
					 edata->detail ? errdetail_internal("%s", edata->detail) : 0,
					 edata->context ? errcontext("%s", edata->context) : 0));
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
		/* raised again with this subtransaction closed, for the caller's own */
		if (!verdict)
			ReThrowError(edata);
		error = verdict_words(edata);
	}
	PG_END_TRY();
	return error;
}

/*
 * In a PG_CATCH that drops its error, before FlushErrorState: the error's
 * message and SQLSTATE to the server log, after `why` (what is dropped and
 * why). Called outside ErrorContext.
 */
void
qs_log_dropped_error(const char *why)
{
	qs_log_dropped_error_at(LOG, why);
}

/* The same at another level: DEBUG1 where a client chooses how often. */
void
qs_log_dropped_error_at(int elevel, const char *why)
{
	ErrorData  *edata = CopyErrorData();

	ereport(elevel,
			(errcode(edata->sqlerrcode),
			 errmsg("%s: %s", why, edata->message),
			 edata->detail ? errdetail_internal("%s", edata->detail) : 0));
	FreeErrorData(edata);
}
