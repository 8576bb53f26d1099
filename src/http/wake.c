/*
 * wake.c: the push and delete hooks (common/hooks.c), in any backend: what
 * a transaction pushed to or deleted is noted per (sub)transaction, and at
 * commit the queues' counters move, the wake board's generations move
 * (shmem.c) and the HTTP workers with pops parked on them are woken
 * (dispatch/parked.c). A rolled back (sub)transaction wakes no one.
 */
#include "http/listener.h"
#include "streams/streams.h"

#include "access/xact.h"
#include "utils/memutils.h"

typedef struct PendingPush
{
	pg_uuid_t	tenant;
	char	   *queue;
	uint64		key;
	SubTransactionId subid;
	int64		nmsgs;
	bool		deleted;		/* the queue was deleted: free its counters */
} PendingPush;

static MemoryContext pending_cxt = NULL;
static PendingPush *pending = NULL;
static int	npending = 0;
static int	maxpending = 0;
static bool callbacks_registered = false;

static void
pending_reset(void)
{
	npending = 0;
	maxpending = 0;
	pending = NULL;
	if (pending_cxt)
		MemoryContextReset(pending_cxt);
}

/*
 * After commit: count, free the counters of deleted queues, move the
 * generations, wake who waits. Never raises.
 */
static void
pending_apply(void)
{
	QsHttpShared *s = qs_http_shared;
	uint64		wake = 0;
	bool		moved = false;

	for (int i = 0; i < npending; i++)
	{
		PendingPush *p = &pending[i];
		uint32		slot = qs_wake_slot(p->key);

		if (p->nmsgs > 0)
			pg_atomic_fetch_add_u64(&qs_stat_entry(&p->tenant, p->queue, p->key, NULL)->c[QS_STAT_PUSHED],
									p->nmsgs);
		if (p->deleted)
			qs_stat_free(&p->tenant, p->queue);
		/* a full barrier: a worker that parks after this sees the new value */
		pg_atomic_fetch_add_u64(&s->gen[slot], 1);
		wake |= pg_atomic_read_u64(&s->waiters[slot]);
		moved = true;
	}
	if (moved)
	{
		pg_atomic_fetch_add_u64(&s->wakes, 1);
		qs_streams_wake();		/* declared streams may read these queues */
	}
	for (int w = 0; wake != 0 && w < QS_MAX_WORKERS; w++)
	{
		if ((wake & (UINT64CONST(1) << w)) == 0)
			continue;
		wake &= ~(UINT64CONST(1) << w);
		if (s->workers[w].latch)
			SetLatch(s->workers[w].latch);
	}
}

static void
wake_xact_callback(XactEvent event, void *arg)
{
	if (npending == 0)
		return;
	switch (event)
	{
		case XACT_EVENT_COMMIT:
			pending_apply();
			pending_reset();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:	/* COMMIT PREPARED wakes nobody: pops recheck */
		case XACT_EVENT_PARALLEL_ABORT:
			pending_reset();
			break;
		default:
			break;
	}
}

/* A rolled back subtransaction (a failed cycle) took its pushes with it. */
static void
wake_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	/* entries of this subtransaction and its children have ids >= its own */
	while (npending > 0 && pending[npending - 1].subid >= mySubid)
		npending--;
}

static void pending_add(const pg_uuid_t *tenant, const char *queue, int nmsgs, bool deleted);

/* The push hook (common/hooks.c), in any backend: count and wake at commit. */
void
qs_queue_pushed_at_commit(const pg_uuid_t *tenant, const char *queue, int nmsgs)
{
	pending_add(tenant, queue, nmsgs, false);
}

/* The delete hook (common/hooks.c): free the queue's counters at commit. */
void
qs_queue_deleted_at_commit(const pg_uuid_t *tenant, const char *queue)
{
	pending_add(tenant, queue, 0, true);
}

static void
pending_add(const pg_uuid_t *tenant, const char *queue, int nmsgs, bool deleted)
{
	SubTransactionId subid;
	uint64		key;
	PendingPush *p;

	if (qs_http_shared == NULL || queue == NULL)
		return;

	subid = GetCurrentSubTransactionId();
	key = qs_queue_key(tenant, queue);
	/* consecutive calls for one queue (one per item) fold into one entry */
	if (npending > 0)
	{
		p = &pending[npending - 1];
		if (!deleted && !p->deleted && p->key == key && p->subid == subid &&
			memcmp(&p->tenant, tenant, UUID_LEN) == 0 && strcmp(p->queue, queue) == 0)
		{
			p->nmsgs += nmsgs;
			return;
		}
	}

	if (!callbacks_registered)
	{
		pending_cxt = AllocSetContextCreate(TopMemoryContext, "queen_streams wake",
											ALLOCSET_SMALL_SIZES);
		RegisterXactCallback(wake_xact_callback, NULL);
		RegisterSubXactCallback(wake_subxact_callback, NULL);
		callbacks_registered = true;
	}
	if (npending == maxpending)
	{
		int			newmax = Max(16, maxpending * 2);
		PendingPush *n = MemoryContextAlloc(pending_cxt, sizeof(PendingPush) * newmax);

		if (npending > 0)
			memcpy(n, pending, sizeof(PendingPush) * npending);
		pending = n;
		maxpending = newmax;
	}
	p = &pending[npending];
	p->tenant = *tenant;
	p->queue = MemoryContextStrdup(pending_cxt, queue);
	p->key = key;
	p->subid = subid;
	p->nmsgs = nmsgs;
	p->deleted = deleted;
	npending++;
}
