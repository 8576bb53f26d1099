/*
 * subxact.c: run a piece of work in its own internal subtransaction, so
 * that a failure rolls back exactly that work and becomes an answer
 * (success:false) instead of aborting the caller's transaction. Used by
 * the cycle, the transaction route and the maintenance replay.
 *
 * Only errors raised by our own frames are caught here. Cancellation,
 * statement timeouts and lock timeouts are the caller's limits, not a
 * verdict on the work: they are raised again (a group commit gives way on a
 * lock that way, src/http/group.c).
 */
#include "common/common.h"

#include "access/xact.h"
#include "utils/resowner.h"

const char *
qs_subxact_run(QsSubxactWork work, void *arg)
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

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
		/* raised again with this subtransaction closed, for the caller's own */
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED ||
			edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
			ReThrowError(edata);
		error = edata->message;
	}
	PG_END_TRY();
	return error;
}
