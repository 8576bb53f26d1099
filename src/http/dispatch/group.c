/*
 * group.c: group commit across HTTP requests.
 *
 * A writing request whose body completes inside a pass of libmicrohttpd
 * (daemon.c) is parsed there, then queued here with its connection
 * suspended. After the pass the worker runs what is queued, up to
 * group_commit_max_requests, in ONE transaction, each request in its own
 * subtransaction with its own snapshot, statement timeout and activity
 * line. A request that raises rolls back only its subtransaction and gets
 * its own answer. Then one ordinary COMMIT: with synchronous_commit (local
 * flush, synchronous standbys) the commit is durable before any other
 * session sees it, and only then are the answers handed back for the
 * worker's loop to send (request.c). One WAL flush so serves the whole group.
 *
 * Locks. A group holds the locks of all its requests until its commit, so
 * two workers' groups could deadlock where single requests never meet (one
 * holds partition a and wants b, the other the reverse). The first request
 * of a group waits for locks as a lone request does; the others wait at
 * most QS_GROUP_LOCK_WAIT_MS, then give way: their subtransaction rolls
 * back and they run first in the next group (a lock timeout inside a
 * cycle's or a transaction's own subtransaction is raised up to here,
 * src/common/subxact.c).
 *
 * Merging. A route with run_many serves its requests of one tenant in a
 * group with one call, in one subtransaction run first (the pushes become
 * one push: one segment and one row update per partition, so a hot
 * partition's row is locked once per group and only for that call and the
 * commit; the cycles become one call whose sink items are one push). If
 * that call raises, it rolls back and the requests run one by
 * one as above, each with its own answer.
 *
 * If the shared commit fails, nothing of the group is stored: every
 * request that had succeeded is answered 500 (safe to retry); those that
 * had failed keep their own answer.
 */
#include "http/dispatch/route.h"
#include "http/dispatch/cells.h"
#include "common/spi.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"

/* The wait, in ms, of a request that is not first in its group, for a lock. */
#define QS_GROUP_LOCK_WAIT_MS 1

/* Requests waiting for the next group, oldest first. */
static dlist_head queue = DLIST_STATIC_INIT(queue);
static int	nqueued = 0;

/*
 * The connections the last group answered, whose next request has not come
 * yet. A closed-loop client sends again as soon as it reads its answer, so
 * a group that is not full waits for them (at most group_commit_await):
 * the clients of one group then stay together, and one flush serves them
 * all, instead of the group splitting in two that alternate.
 */
static uint64 group_seq = 0;
static int	nawaited = 0;

/*
 * Routes that may write join groups: those a standby refuses (pop takes
 * leases). Reads and the listener's own routes run alone.
 */
bool
qs_group_wants(QsReq *req)
{
	/* the routes that write are those a standby refuses (routes.c) */
	return qs_http_group_max_requests > 1 && qs_route_def(req->route)->needs_xact &&
		qs_route_needs_primary(req->route);
}

void
qs_group_add(QsReq *req)
{
	req->grouped = true;
	req->queued_at = GetCurrentTimestamp();
	dlist_push_tail(&queue, &req->group_node);
	nqueued++;
}

/* Its connection is gone (completed_cb): not queued any more. */
void
qs_group_forget(QsReq *req)
{
	if (!req->grouped)
		return;
	dlist_delete(&req->group_node);
	nqueued--;
	req->grouped = false;
}

/* A connection sent its next request (of any route), or closed: not awaited any more. */
void
qs_group_unawait(QsConn *c)
{
	if (c->awaited_in == group_seq && group_seq != 0)
		nawaited--;
	c->awaited_in = 0;
}

static TimestampTz
oldest_queued(void)
{
	return dlist_container(QsReq, group_node, dlist_head_node(&queue))->queued_at;
}

/*
 * When the queued requests must run: once the oldest has waited
 * group_commit_max_wait, and, while connections of the last group are
 * still awaited, group_commit_await.
 */
static TimestampTz
due_at(void)
{
	int			ms = qs_http_group_max_wait_ms;

	if (nawaited > 0)
		ms = Max(ms, qs_http_group_await_ms);
	return TimestampTzPlusMilliseconds(oldest_queued(), ms);
}

/* A group should run now: full, or waited for long enough. */
bool
qs_group_due(void)
{
	if (nqueued == 0)
		return false;
	if (nqueued >= qs_http_group_max_requests)
		return true;
	return GetCurrentTimestamp() >= due_at();
}

/* Milliseconds until the queued requests must run, -1 when none are. */
long
qs_group_timeout(void)
{
	if (nqueued == 0)
		return -1;
	if (qs_group_due())
		return 0;
	return Max(0, TimestampDifferenceMilliseconds(GetCurrentTimestamp(), due_at()));
}

/* Not first in its group: wait for a lock at most QS_GROUP_LOCK_WAIT_MS. True if limited. */
static bool
limit_lock_wait(bool first)
{
	if (first || (LockTimeout != 0 && LockTimeout <= QS_GROUP_LOCK_WAIT_MS))
		return false;
	LockTimeout = QS_GROUP_LOCK_WAIT_MS;
	return true;
}

/* Open a member's subtransaction: its nest level, which abort_member rolls back to. */
static int
begin_member(MemoryContext cxt)
{
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	return GetCurrentTransactionNestLevel();
}

/* A member ran to its end: keep (or drop) its subtransaction, restore the rest. */
static void
end_member(bool keep, MemoryContext cxt, ResourceOwner owner, int lock_timeout)
{
	LockTimeout = lock_timeout;
	if (keep)
		ReleaseCurrentSubTransaction();
	else
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
}

/*
 * In a member's PG_CATCH: its error, copied into `cxt`, once its
 * subtransaction (and any it left open inside: nest levels from `level`
 * down) is rolled back and the lock wait, the statement timeout, the
 * memory context and the resource owner are restored. *timed_out, if
 * given: whether the statement timeout had fired.
 */
static ErrorData *
abort_member(MemoryContext cxt, ResourceOwner owner, int level, int lock_timeout,
			 bool *timed_out)
{
	ErrorData  *edata;

	HOLD_INTERRUPTS();
	LockTimeout = lock_timeout;
	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	/* not dropped: the caller answers it (qs_http_fail logs all but a 400 or 404) or defers the request */
	FlushErrorState();
	if (timed_out)
		*timed_out = qs_http_statement_timeout_ms > 0 &&
			get_timeout_indicator(STATEMENT_TIMEOUT, false);
	if (qs_http_statement_timeout_ms > 0)
		disable_timeout(STATEMENT_TIMEOUT, false);
	while (GetCurrentTransactionNestLevel() >= level)
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	RESUME_INTERRUPTS();
	return edata;
}

/* Gave way on a lock: it runs first in the next group. */
static void
defer(QsReq *req)
{
	req->deferred = true;
	req->resp = NULL;
	req->resp_len = 0;
	req->status = 500;
}

/*
 * Run one request of the group in a subtransaction. Its errors become its
 * answer (or, for a lock it gave way on, a deferral), with its
 * subtransaction and any it left open inside rolled back.
 */
static void
run_member(QsReq *req, bool first)
{
	const QsRouteDef *def = qs_route_def(req->route);
	MemoryContext cxt = req->ctx;
	ResourceOwner owner = CurrentResourceOwner;
	int			saved_lock_timeout = LockTimeout;
	volatile bool limited = false;
	int			level;

	level = begin_member(cxt);
	PG_TRY();
	{
		QueryCancelPending = false;
		limited = limit_lock_wait(first);
		qs_http_run_body(req, def, " (group commit)");
		end_member(true, cxt, owner, saved_lock_timeout);
	}
	PG_CATCH();
	{
		ErrorData  *edata = abort_member(cxt, owner, level, saved_lock_timeout, NULL);

		req->parked = false;
		if (limited && edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
			defer(req);
		else
			qs_http_fail(req, def->failed, edata);
		FreeErrorData(edata);
	}
	PG_END_TRY();
}

/*
 * Serve the group's requests of the first route that merges, for its first
 * request's tenant, with one call (run_many) in one subtransaction; each
 * body at most QS_MERGE_MAX_BODY, all of them at most QS_MERGE_MAX_BYTES.
 * Returns true when the requests it took are answered (merged) or given
 * way (deferred, when not `first` and a lock is held elsewhere). On any
 * other error, a statement timeout included, nothing is kept and they run
 * one by one with their own answers and timeouts; a cancel fails them all.
 */
#define QS_MERGE_MAX_BODY (64 * 1024)
#define QS_MERGE_MAX_BYTES (4 * 1024 * 1024)

static bool
mergeable(QsReq *req)
{
	return !req->handled && qs_route_def(req->route)->run_many != NULL &&
		req->body.len <= QS_MERGE_MAX_BODY;
}

static bool
run_merged(QsReq **members, int n, bool first)
{
	QsReq	  **m = palloc(sizeof(QsReq *) * Max(n, 1));
	int			nm = 0;
	Size		bytes = 0;
	const QsRouteDef *def = NULL;
	MemoryContext cxt;
	ResourceOwner owner = CurrentResourceOwner;
	int			saved_lock_timeout = LockTimeout;
	volatile bool done = false;
	volatile bool limited = false;
	int			level;

	for (int i = 0; i < n; i++)
	{
		QsReq	   *req = members[i];

		if (!mergeable(req) || bytes + req->body.len > QS_MERGE_MAX_BYTES)
			continue;
		if (nm > 0 && (req->route != m[0]->route ||
					   memcmp(&req->tenant, &m[0]->tenant, sizeof(pg_uuid_t)) != 0))
			continue;
		def = qs_route_def(req->route);
		m[nm++] = req;
		bytes += req->body.len;
	}
	if (nm < 2 || (def->needs_extension && !qs_extension_installed()))
	{
		pfree(m);
		return false;
	}

	cxt = m[0]->ctx;
	level = begin_member(cxt);
	PG_TRY();
	{
		QueryCancelPending = false;
		limited = limit_lock_wait(first);
		if (qs_http_statement_timeout_ms > 0)
			enable_timeout_after(STATEMENT_TIMEOUT, qs_http_statement_timeout_ms);
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, psprintf("%s %s (group commit, %d as one)",
													   m[0]->method, qs_routes[m[0]->route].pattern, nm));
		for (int k = 0; k < nm; k++)
			qs_cells_body_starts(m[k]);
		done = def->run_many(m, nm);
		PopActiveSnapshot();
		if (qs_http_statement_timeout_ms > 0)
			disable_timeout(STATEMENT_TIMEOUT, false);
		end_member(done, cxt, owner, saved_lock_timeout);
		if (done)
		{
			for (int k = 0; k < nm; k++)
				m[k]->handled = true;
			pg_atomic_fetch_add_u64(&qs_http_shared->group_merged, nm);
		}
	}
	PG_CATCH();
	{
		bool		timed_out;
		ErrorData  *edata = abort_member(cxt, owner, level, saved_lock_timeout, &timed_out);

		done = true;
		if (limited && edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
		{
			/* gave way, all of them: they run first in the next group */
			for (int k = 0; k < nm; k++)
			{
				m[k]->handled = true;
				defer(m[k]);
			}
		}
		else if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED && !timed_out)
		{
			/* canceled: the whole call, as it would each of them */
			for (int k = 0; k < nm; k++)
			{
				m[k]->handled = true;
				qs_http_fail(m[k], def->failed, edata);
			}
		}
		else
		{
			/* each request's own error is its own answer: run them alone */
			ereport(DEBUG1,
					(errmsg_internal("group commit: %d requests as one failed, running them one by one: %s",
									 nm, edata->message)));
			for (int k = 0; k < nm; k++)
			{
				m[k]->resp = NULL;
				m[k]->resp_len = 0;
			}
			done = false;
		}
		FreeErrorData(edata);
	}
	PG_END_TRY();
	pfree(m);
	return done;
}

/* After the commit: bookkeeping, then the answer (or the parking). */
static void
finish_member(QsReq *req)
{
	const QsRouteDef *def = qs_route_def(req->route);

	if (def->after && req->status < 300 && req->resp != NULL)
		qs_http_after_commit(req, def);
	qs_role_after(req);
	if (req->parked)
		qs_park(req);			/* still suspended: a wake-up answers it */
	else
		qs_handback(req);		/* the worker's loop sends it */
}

/* After the commit (or its failure): requeue the deferred, answer the others. */
static void
answer_group(QsReq **members, int n, bool committed)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	int			ran = 0;
	int			deferred = 0;

	/* deferred requests go back to the head of the queue, in their order */
	for (int i = n - 1; i >= 0; i--)
	{
		if (!members[i]->deferred)
			continue;
		dlist_push_head(&queue, &members[i]->group_node);
		nqueued++;
		deferred++;
	}
	for (int i = 0; i < n; i++)
	{
		QsReq	   *req = members[i];

		if (req->deferred)
			continue;
		req->grouped = false;
		ran++;
		finish_member(req);
		MemoryContextSwitchTo(oldcxt);
	}
	pgstat_report_activity(STATE_IDLE, NULL);
	/* what this group answered, its next requests are awaited */
	group_seq++;
	nawaited = 0;
	for (int i = 0; i < n; i++)
	{
		QsConn	   *c = members[i]->conn;

		/* (a parked pop's connection sends nothing until its answer comes) */
		if (members[i]->deferred || members[i]->parked || c == NULL ||
			c->phase == QS_PHASE_CLOSING || members[i]->close || c->awaited_in == group_seq)
			continue;
		c->awaited_in = group_seq;
		nawaited++;
	}
	if (committed && ran > 0)
	{
		pg_atomic_fetch_add_u64(&qs_http_shared->group_commits, 1);
		pg_atomic_fetch_add_u64(&qs_http_shared->group_requests, ran);
	}
	if (deferred > 0)
		pg_atomic_fetch_add_u64(&qs_http_shared->group_deferrals, deferred);
}

/* Run the queued requests (up to group_commit_max_requests) as one group. */
void
qs_group_run(void)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	int			n = 0;
	QsReq	  **members;
	volatile bool committed = false;

	if (nqueued == 0)
		return;
	members = MemoryContextAlloc(TopMemoryContext,
								 sizeof(QsReq *) * Min(nqueued, qs_http_group_max_requests));
	while (nqueued > 0 && n < qs_http_group_max_requests)
	{
		QsReq	   *req = dlist_container(QsReq, group_node, dlist_pop_head_node(&queue));

		nqueued--;
		req->deferred = false;
		req->handled = false;
		members[n++] = req;
	}

	PG_TRY();
	{
		bool		ran = false;

		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();

		/*
		 * The head of the queue runs first, waiting for locks as a lone
		 * request does (it may have given way in the last group): the merged
		 * call when the head is one of its requests, else the head alone.
		 */
		if (!mergeable(members[0]))
		{
			run_member(members[0], true);
			members[0]->handled = true;
			ran = true;
		}
		ran |= run_merged(members, n, !ran);
		for (int i = 0; i < n; i++)
		{
			if (members[i]->handled)
				continue;
			CHECK_FOR_INTERRUPTS();
			run_member(members[i], !ran);
			ran = true;
		}
		/* a subtransaction left open would make the COMMIT below commit nothing */
		if (GetCurrentTransactionNestLevel() != 1)
			elog(ERROR, "group commit: a request left a subtransaction open");
		pgstat_report_activity(STATE_RUNNING, "group commit");
		CommitTransactionCommand();
		committed = true;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		HOLD_INTERRUPTS();
		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		/* not dropped: each member's answer below (qs_http_fail logs all but a 400 or 404) */
		FlushErrorState();
		AbortCurrentTransaction();
		MemoryContextSwitchTo(oldcxt);
		RESUME_INTERRUPTS();
		/* nothing of the group is stored: those that had succeeded fail too */
		for (int i = 0; i < n; i++)
		{
			QsReq	   *req = members[i];

			if (req->deferred || req->resp == NULL || req->status < 300)
			{
				req->deferred = false;
				qs_http_fail(req, qs_route_def(req->route)->failed, edata);
			}
		}
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);

	answer_group(members, n, committed);
	pfree(members);
}
