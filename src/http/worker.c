/*
 * worker.c: the static background workers of the HTTP listener and their
 * event loop.
 *
 * Each worker owns a libmicrohttpd daemon in external-event mode bound to
 * the shared port (SO_REUSEPORT: the kernel spreads accepts), and waits in
 * one WaitEventSet on its latch, the daemon's epoll fd and postmaster death.
 * Every wait is that one call, so SIGTERM, SIGHUP, pushes that commit and
 * ProcSignalBarriers (DROP DATABASE) are all seen at once. No transaction
 * is open between requests.
 */
#include "http/http_int.h"
#include "storage/storage.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"

int			qs_http_worker_index = -1;

void
qs_http_init(void)
{
	BackgroundWorker worker;

	if (!process_shared_preload_libraries_in_progress || IsBinaryUpgrade)
		return;

	qs_http_shmem_init();
	/* every backend's pushes wake the listener's parked pops */
	qs_pushed_hook = qs_queue_pushed_at_commit;
	if (qs_http_port == 0)
		return;

	for (int i = 0; i < qs_http_workers; i++)
	{
		memset(&worker, 0, sizeof(worker));
		worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
		worker.bgw_restart_time = 1;
		strlcpy(worker.bgw_library_name, "queen_streams", BGW_MAXLEN);
		strlcpy(worker.bgw_function_name, "qs_http_worker_main", BGW_MAXLEN);
		snprintf(worker.bgw_name, BGW_MAXLEN, "queen_streams http worker %d", i);
		strlcpy(worker.bgw_type, "queen_streams http", BGW_MAXLEN);
		worker.bgw_main_arg = Int32GetDatum(i);
		RegisterBackgroundWorker(&worker);
	}
}

static void
worker_detach(int code, Datum arg)
{
	QsWorkerSlot *slot = &qs_http_shared->workers[DatumGetInt32(arg)];

	slot->latch = NULL;
	slot->listening = false;
	slot->handoff = false;
	slot->pid = 0;
	pg_atomic_write_u32(&slot->connections, 0);
	pg_atomic_write_u32(&slot->incoming, 0);
	pg_atomic_write_u32(&slot->parked, 0);
}

/*
 * One retention sweep: the list of partitions to visit in one transaction,
 * then one short transaction per partition, so the sweep never holds more
 * than one partition's row lock (pushes to the others go on meanwhile). A
 * failure is logged only; the next partition is still swept.
 */
static bool
retention_step(MemoryContext cxt, QsSweepItem **items, int *n, int i, QsSweepResult *res)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	volatile bool ok = true;

	PG_TRY();
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		if (OidIsValid(get_extension_oid("queen_streams", true)))
		{
			pgstat_report_activity(STATE_RUNNING, i < 0 ? "queen_streams retention sweep: planning"
								   : "queen_streams retention sweep: one partition");
			qs_spi_connect();
			if (i < 0)
				*items = qs_retention_plan(cxt, n);
			else
				qs_retention_sweep_one(&(*items)[i], res);
			qs_spi_finish();
		}
		else
			ok = false;
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		ereport(LOG,
				(errcode(edata->sqlerrcode),
				 errmsg("retention sweep failed: %s", edata->message)));
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	return ok;
}

static void
run_retention(void)
{
	MemoryContext cxt = AllocSetContextCreate(TopMemoryContext, "queen_streams retention",
											  ALLOCSET_DEFAULT_SIZES);
	QsSweepItem *items = NULL;
	int			n = 0;
	QsSweepResult res = {0};

	if (retention_step(cxt, &items, &n, -1, &res))
		for (int i = 0; i < n && !ShutdownRequestPending; i++)
		{
			CHECK_FOR_INTERRUPTS();
			(void) retention_step(cxt, &items, &n, i, &res);
		}
	if (res.segments > 0 || res.txns > 0)
		elog(DEBUG1, "retention sweep deleted " INT64_FORMAT " segments of "
			 INT64_FORMAT " partitions and purged " INT64_FORMAT " hash rows",
			 res.segments, res.partitions, res.txns);
	MemoryContextDelete(cxt);
	pgstat_report_activity(STATE_IDLE, NULL);
}

static long
min_timeout(long a, long b)
{
	if (a < 0)
		return b;
	if (b < 0)
		return a;
	return Min(a, b);
}

void
qs_http_worker_main(Datum main_arg)
{
	int			index = DatumGetInt32(main_arg);
	QsWorkerSlot *slot;
	WaitEventSet *wes;
	MemoryContext loop_cxt;
	TimestampTz next_retention = 0;
	TimestampTz next_sample = 0;
	TimestampTz next_bind = 0;
	TimestampTz accept_resume = 0;	/* out of descriptors: accept again then */
	long		stats_wait = 0;
	int			bind_failures = 0;
	int			listen_pos = -1;
	int			handoff_pos = -1;
	bool		listening = false;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnection(qs_http_database, NULL, 0);
	pgstat_report_appname("queen_streams http");

	qs_http_worker_index = index;
	slot = &qs_http_shared->workers[index];
	pg_atomic_write_u32(&slot->connections, 0);
	pg_atomic_write_u32(&slot->incoming, 0);
	slot->handoff = false;
	pg_atomic_write_u32(&slot->parked, 0);
	slot->started_at = GetCurrentTimestamp();
	slot->pid = MyProcPid;
	slot->latch = MyLatch;
	before_shmem_exit(worker_detach, Int32GetDatum(index));

	loop_cxt = AllocSetContextCreate(TopMemoryContext, "queen_streams http loop",
									 ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(loop_cxt);

	wes = CreateWaitEventSet(TopMemoryContext, 6);
	AddWaitEventToSet(wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);

	for (;;)
	{
		WaitEvent	events[6];
		long		timeout = -1;
		TimestampTz now;
		bool		accept_now = false;
		int			nevents;

		/* Bind, retrying with backoff when the port is taken. */
		if (!listening && GetCurrentTimestamp() >= next_bind)
		{
			if (qs_http_daemon_start())
			{
				AddWaitEventToSet(wes, WL_SOCKET_READABLE, qs_http_daemon_fd(), NULL, NULL);
				listen_pos = AddWaitEventToSet(wes, WL_SOCKET_READABLE, qs_http_listen_fd(),
											   NULL, NULL);
				if (qs_http_handoff_fd() >= 0)
					handoff_pos = AddWaitEventToSet(wes, WL_SOCKET_READABLE, qs_http_handoff_fd(),
													NULL, NULL);
				if (qs_screen_fd() >= 0)
					AddWaitEventToSet(wes, WL_SOCKET_READABLE, qs_screen_fd(), NULL, NULL);
				listening = true;
				slot->listening = true;
				ereport(LOG,
						(errmsg("queen_streams http worker %d listening on %s:%d",
								index, qs_http_listen_address, qs_http_port)));
			}
			else
			{
				bind_failures++;
				next_bind = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														Min(60000, 1000 * bind_failures));
			}
		}

		if (listening)
		{
			timeout = qs_http_daemon_timeout();
			timeout = min_timeout(timeout, qs_limits_timeout());
			timeout = min_timeout(timeout, qs_parked_timeout());
			timeout = min_timeout(timeout, qs_screen_timeout());
			if (qs_http_flush_waiting())
				timeout = 0;
			if (accept_resume != 0)
				timeout = min_timeout(timeout,
									  Max(0, TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
																			 accept_resume)));
		}
		else
			timeout = Max(0, TimestampDifferenceMilliseconds(GetCurrentTimestamp(), next_bind));
		if (stats_wait > 0)
			timeout = min_timeout(timeout, stats_wait);
		if (index == 0 && next_sample != 0)
			timeout = min_timeout(timeout,
								  Max(0, TimestampDifferenceMilliseconds(GetCurrentTimestamp(), next_sample)));
		if (index == 0 && qs_http_retention_interval_s > 0 && next_retention != 0)
			timeout = min_timeout(timeout,
								  TimestampDifferenceMilliseconds(GetCurrentTimestamp(), next_retention));

		nevents = WaitEventSetWait(wes, timeout, events, lengthof(events), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		for (int i = 0; i < nevents; i++)
			if (events[i].pos == listen_pos || events[i].pos == handoff_pos)
				accept_now = true;

		/* Nothing runs between requests: a stray cancel has nothing to cancel. */
		QueryCancelPending = false;
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		if (listening)
		{
			if (accept_resume != 0 && GetCurrentTimestamp() >= accept_resume)
			{
				ModifyWaitEvent(wes, listen_pos, WL_SOCKET_READABLE, NULL);
				accept_resume = 0;
				accept_now = true;
			}
			if (accept_now && !qs_http_accept(accept_resume == 0))
			{
				/* the socket stays readable: stop waiting on it for a while */
				ModifyWaitEvent(wes, listen_pos, 0, NULL);
				accept_resume = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 100);
			}
			qs_screen_run();
			qs_parked_poll();
			qs_http_daemon_run();
			/* answer what is flushed; serve what arrived meanwhile; repeat */
			for (int i = 0; i < 64 && qs_http_flush_pending(); i++)
			{
				CHECK_FOR_INTERRUPTS();
				qs_http_daemon_run();
			}
			qs_limits_sweep();
		}

		now = GetCurrentTimestamp();
		/* the dashboard's samples: one at start, then every sample_interval */
		if (index == 0 && now >= next_sample)
		{
			qs_samples_take();
			next_sample = TimestampTzPlusMilliseconds(now, qs_http_sample_interval_s * 1000L);
		}
		if (index == 0 && qs_http_retention_interval_s > 0)
		{
			if (next_retention == 0)
				next_retention = TimestampTzPlusMilliseconds(now, qs_http_retention_interval_s * 1000L);
			else if (now >= next_retention)
			{
				run_retention();
				next_retention = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															 qs_http_retention_interval_s * 1000L);
			}
		}

		/* bgworkers flush their own statistics */
		stats_wait = pgstat_report_stat(false);
		/*
		 * A request answered in this round (a parked pop retried, say) may
		 * have left its own context current, and it is gone now: the next
		 * round (ProcessConfigFile on SIGHUP above all) must not allocate in it.
		 */
		MemoryContextSwitchTo(loop_cxt);
		MemoryContextReset(loop_cxt);
	}
}
