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
 *
 * The workers start once the server is consistent, so a hot standby has
 * its listener too (reads served, writes refused: role.c) and keeps it
 * through a promotion. Worker 0's retention sweeps write, so they wait
 * until the node is the primary.
 */
#include "http/http.h"
#include "http/transport/transport.h"
#include "http/dispatch/dispatch.h"
#include "common/guc.h"
#include "common/hooks.h"
#include "common/spi.h"
#include "common/workers.h"
#include "storage/storage.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/pmsignal.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"

void
qs_http_init(void)
{
	if (!process_shared_preload_libraries_in_progress || IsBinaryUpgrade)
		return;

	qs_http_shmem_init();
	/* every backend's pushes wake the listener's parked pops */
	qs_pushed_hook = qs_queue_pushed_at_commit;
	/* the stream workers' pops, cycles and acks count like the listener's */
	qs_streamed_hook = qs_queue_streamed;
	/* a deleted queue's counters make room for new queues */
	qs_deleted_hook = qs_queue_deleted_at_commit;
	if (qs_http_port == 0)
		return;

	qs_register_workers(qs_http_workers, BgWorkerStart_ConsistentState, "qs_http_worker_main",
						"queen_streams http worker", "queen_streams http");
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
		ereport(LOG,
				(errcode(edata->sqlerrcode),
				 errmsg("retention sweep failed: %s", edata->message)));
		FlushErrorState();
		AbortCurrentTransaction();
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

/* Milliseconds until `at`, never below 0. */
static long
until(TimestampTz at)
{
	return Max(0, TimestampDifferenceMilliseconds(GetCurrentTimestamp(), at));
}

/* What the worker's loop keeps between its steps. */
typedef struct Loop
{
	int			index;
	QsWorkerSlot *slot;
	WaitEventSet *wes;
	bool		listening;
	int			listen_pos;
	int			handoff_pos;
	int			bind_failures;
	TimestampTz next_bind;
	TimestampTz accept_resume;	/* out of descriptors: accept again then */
	TimestampTz next_sample;
	TimestampTz next_retention;
	long		stats_wait;
	long		gauges_wait;	/* worker 0: until the next gauges refresh (-1: none due) */
	MemoryContext cxt;			/* reset every turn */
} Loop;

/* Bind, retrying with backoff when the port is taken. */
static void
step_bind(Loop *l)
{
	if (l->listening || GetCurrentTimestamp() < l->next_bind)
		return;
	if (!qs_http_daemon_start())
	{
		l->bind_failures++;
		l->next_bind = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												   Min(60000, 1000 * l->bind_failures));
		return;
	}
	AddWaitEventToSet(l->wes, WL_SOCKET_READABLE, qs_http_daemon_fd(), NULL, NULL);
	l->listen_pos = AddWaitEventToSet(l->wes, WL_SOCKET_READABLE, qs_http_listen_fd(), NULL, NULL);
	if (qs_http_handoff_fd() >= 0)
		l->handoff_pos = AddWaitEventToSet(l->wes, WL_SOCKET_READABLE, qs_http_handoff_fd(),
										   NULL, NULL);
	if (qs_screen_fd() >= 0)
		AddWaitEventToSet(l->wes, WL_SOCKET_READABLE, qs_screen_fd(), NULL, NULL);
	/* parked pops' clients that close */
	if (qs_parked_fd() >= 0)
		AddWaitEventToSet(l->wes, WL_SOCKET_READABLE, qs_parked_fd(), NULL, NULL);
	l->listening = true;
	l->slot->listening = true;
	ereport(LOG,
			(errmsg("queen_streams http worker %d listening on %s:%d",
					l->index, qs_http_listen_address, qs_http_port)));
}

/* How long the next wait may sleep: the nearest of every deadline. */
static long
step_timeout(Loop *l)
{
	long		timeout;

	if (!l->listening)
		timeout = until(l->next_bind);
	else
	{
		timeout = qs_http_daemon_timeout();
		timeout = min_timeout(timeout, qs_limits_timeout());
		timeout = min_timeout(timeout, qs_parked_timeout());
		timeout = min_timeout(timeout, qs_handback_timeout());
		timeout = min_timeout(timeout, qs_screen_timeout());
		timeout = min_timeout(timeout, qs_group_timeout());
		if (l->accept_resume != 0)
			timeout = min_timeout(timeout, until(l->accept_resume));
	}
	if (l->stats_wait > 0)
		timeout = min_timeout(timeout, l->stats_wait);
	if (l->index == 0 && l->next_sample != 0)
		timeout = min_timeout(timeout, until(l->next_sample));
	if (l->index == 0)
		timeout = min_timeout(timeout, l->gauges_wait);
	if (l->index == 0 && qs_http_retention_interval_s > 0 && l->next_retention != 0)
		timeout = min_timeout(timeout, until(l->next_retention));
	return timeout;
}

/* Wait, then take signals and settings; true when a connection waits to be accepted. */
static bool
step_wait(Loop *l, long timeout)
{
	WaitEvent	events[8];
	bool		accept_now = false;
	int			nevents;

	nevents = WaitEventSetWait(l->wes, timeout, events, lengthof(events), PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	for (int i = 0; i < nevents; i++)
		if (events[i].pos == l->listen_pos || events[i].pos == l->handoff_pos)
			accept_now = true;

	/* going away (shutdown, or the postmaster died): no parked pop hangs */
	if (qs_role_dying())
	{
		if (l->listening)
		{
			qs_parked_release();
			/* a moment for libmicrohttpd to write those answers */
			for (int i = 0; i < 4; i++)
				qs_http_daemon_run();
		}
		if (!PostmasterIsAlive())
			proc_exit(1);
	}

	/* Nothing runs between requests: a stray cancel has nothing to cancel. */
	QueryCancelPending = false;
	CHECK_FOR_INTERRUPTS();
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
	return accept_now;
}

/* Accept what waits, unless out of descriptors (then pause the listening socket). */
static void
step_accept(Loop *l, bool accept_now)
{
	if (l->accept_resume != 0 && GetCurrentTimestamp() >= l->accept_resume)
	{
		ModifyWaitEvent(l->wes, l->listen_pos, WL_SOCKET_READABLE, NULL);
		l->accept_resume = 0;
		accept_now = true;
	}
	if (accept_now && !qs_http_accept(l->accept_resume == 0))
	{
		/* the socket stays readable: stop waiting on it for a while */
		ModifyWaitEvent(l->wes, l->listen_pos, 0, NULL);
		l->accept_resume = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 100);
	}
}

/*
 * Serve: screen new connections, retry parked pops, let libmicrohttpd read
 * and answer, then run the group of writing requests that pass queued,
 * and again for what arrived meanwhile.
 */
static void
step_serve(Loop *l, bool accept_now)
{
	step_accept(l, accept_now);
	qs_screen_run();
	qs_parked_poll();
	/* a request's context may be current, and go with its connection */
	MemoryContextSwitchTo(l->cxt);
	qs_http_daemon_run();
	for (int i = 0; i < 64 && qs_group_due(); i++)
	{
		CHECK_FOR_INTERRUPTS();
		MemoryContextSwitchTo(l->cxt);
		qs_group_run();
		MemoryContextSwitchTo(l->cxt);
		qs_http_daemon_run();
	}
	MemoryContextSwitchTo(l->cxt);
	qs_limits_sweep();
}

/* The first worker's samples, retention sweeps and gauge refreshes; every worker's statistics. */
static void
step_periodic(Loop *l)
{
	TimestampTz now = GetCurrentTimestamp();

	/* the dashboard's samples: one at start, then every sample_interval */
	if (l->index == 0 && now >= l->next_sample)
	{
		qs_samples_take();
		l->next_sample = TimestampTzPlusMilliseconds(now, qs_http_sample_interval_s * 1000L);
	}
	if (l->index == 0 && qs_http_retention_interval_s > 0)
	{
		if (l->next_retention == 0)
			l->next_retention = TimestampTzPlusMilliseconds(now, qs_http_retention_interval_s * 1000L);
		else if (now >= l->next_retention)
		{
			if (!qs_role_standby())
				run_retention();
			l->next_retention = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															qs_http_retention_interval_s * 1000L);
		}
	}
	/* the /metrics gauges' snapshot, refreshed in a worker of its own */
	if (l->index == 0)
		l->gauges_wait = qs_gauges_tick();
	/* bgworkers flush their own statistics */
	l->stats_wait = pgstat_report_stat(false);
}

/* Connect, take the worker's slot and set up the wait. */
static void
worker_start(Loop *l, int index)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/*
	 * Keep the heap a group grows (64 MB, more than backend_heap_keep: a
	 * group holds many requests), rather than give it back after every
	 * group and fault it in again at the next.
	 */
	qs_heap_keep_fixed(64 * 1024);

	BackgroundWorkerInitializeConnection(qs_workers_database(), NULL, 0);
	pgstat_report_appname("queen_streams http");

	memset(l, 0, sizeof(Loop));
	l->index = index;
	l->listen_pos = -1;
	l->handoff_pos = -1;
	qs_http_worker_index = index;
	l->slot = &qs_http_shared->workers[index];
	pg_atomic_write_u32(&l->slot->connections, 0);
	pg_atomic_write_u32(&l->slot->incoming, 0);
	l->slot->handoff = false;
	pg_atomic_write_u32(&l->slot->parked, 0);
	l->slot->started_at = GetCurrentTimestamp();
	l->slot->pid = MyProcPid;
	l->slot->latch = MyLatch;
	before_shmem_exit(worker_detach, Int32GetDatum(index));

	l->wes = CreateWaitEventSet(TopMemoryContext, 8);
	AddWaitEventToSet(l->wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	/* not WL_EXIT_ON_PM_DEATH: parked pops are answered before exiting */
	AddWaitEventToSet(l->wes, WL_POSTMASTER_DEATH, PGINVALID_SOCKET, NULL, NULL);
}

void
qs_http_worker_main(Datum main_arg)
{
	Loop		l;

	worker_start(&l, DatumGetInt32(main_arg));
	l.cxt = AllocSetContextCreate(TopMemoryContext, "queen_streams http loop",
								  ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		bool		accept_now;

		MemoryContextSwitchTo(l.cxt);
		step_bind(&l);
		accept_now = step_wait(&l, step_timeout(&l));
		if (l.listening)
			step_serve(&l, accept_now);
		MemoryContextSwitchTo(l.cxt);
		step_periodic(&l);
		MemoryContextSwitchTo(l.cxt);
		MemoryContextReset(l.cxt);
	}
}
