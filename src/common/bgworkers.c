/*
 * bgworkers.c: registering a pool of the library's background workers
 * (the HTTP listener's, the declared streams'), all alike but for their
 * entry point, start time and names. Called from _PG_init's dispatch.
 */
#include "common/workers.h"

#include "postmaster/bgworker.h"

/*
 * n workers running `function`(i), restarted a second after they exit,
 * named name_prefix + " i", of type `type`.
 */
void
qs_register_workers(int n, BgWorkerStartTime start, const char *function,
					const char *name_prefix, const char *type)
{
	BackgroundWorker worker;

	for (int i = 0; i < n; i++)
	{
		memset(&worker, 0, sizeof(worker));
		worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		worker.bgw_start_time = start;
		worker.bgw_restart_time = 1;
		strlcpy(worker.bgw_library_name, "queen_streams", BGW_MAXLEN);
		strlcpy(worker.bgw_function_name, function, BGW_MAXLEN);
		snprintf(worker.bgw_name, BGW_MAXLEN, "%s %d", name_prefix, i);
		strlcpy(worker.bgw_type, type, BGW_MAXLEN);
		worker.bgw_main_arg = Int32GetDatum(i);
		RegisterBackgroundWorker(&worker);
	}
}
