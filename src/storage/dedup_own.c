/*
 * dedup_own.c: the transaction tracking of the dedup cache: what this
 * backend's transaction tagged with its own (sub)transaction ids, and the
 * transaction callbacks that settle those ids itself when they roll back.
 */
#include "storage/dedup_int.h"

#include "access/xact.h"
#include "utils/memutils.h"

/*
 * What this backend's transaction tagged with its own (sub)transaction ids:
 * each id with a partition whose pending list holds it, and the entries it
 * wrote under that id (a run of own_entries: an id is noted just before its
 * entries). When one of those ids rolls back, the backend settles it itself
 * (own_rolled_back): its entries are marked and it leaves the pending
 * lists. Otherwise the next probe would list it as aborted, and every
 * sixteenth such id of a partition would cost a pass over the whole cache,
 * under the lock, to purge them. Memory in TopTransactionContext, reserved
 * before the lock is taken. A settled id is forgotten; a transaction that
 * notes more entries than the cache holds, or more ids than the cache has
 * pending places (QS_DEDUP_PENDING a partition; an id noted again after
 * another partition's counts again), stops being followed (own_lost): its
 * rolled-back ids are left to the probes, as a prepared transaction's are.
 */
typedef struct OwnTag
{
	pg_uuid_t	pid;
	TransactionId xid;
	bool		dying;			/* rolled back, being settled */
	int64		first;			/* its entries: own_entries[first .. end) */
	int64		end;
} OwnTag;

typedef struct OwnEntry
{
	int64		offset;			/* the entry's when written */
	uint32		entry;
} OwnEntry;

static OwnTag *own_tags = NULL;
static int	n_own_tags = 0;
static int	max_own_tags = 0;
static OwnEntry *own_entries = NULL;
static int64 n_own_entries = 0;
static int64 max_own_entries = 0;
static bool own_lost = false;
static bool own_watched = false;	/* own_forget is registered for this transaction */

/* At the end of the transaction, with its memory (a reset callback of it). */
static void
own_forget(void *arg)
{
	own_tags = NULL;
	own_entries = NULL;
	n_own_tags = max_own_tags = 0;
	n_own_entries = max_own_entries = 0;
	own_lost = false;
	own_watched = false;
}

/* Room for one more id and `n` more entries, unless that is past the bounds. */
void
dedup_own_reserve(int64 n)
{
	/* first, so that even a transaction not followed forgets at its end */
	if (!own_watched)
	{
		MemoryContextCallback *cb = MemoryContextAlloc(TopTransactionContext, sizeof(*cb));

		cb->func = own_forget;
		cb->arg = NULL;
		MemoryContextRegisterResetCallback(TopTransactionContext, cb);
		own_watched = true;
	}
	if (n_own_tags == QS_DEDUP_PENDING * dedup_max_parts || n_own_entries + n > dedup_max_entries)
		own_lost = true;
	if (own_lost)
		return;
	/* sizes set once the memory is had: an error here must leave them true */
	if (n_own_tags == max_own_tags)
	{
		int			m = Max(16, max_own_tags * 2);

		own_tags = own_tags == NULL ?
			MemoryContextAlloc(TopTransactionContext, sizeof(OwnTag) * m) :
			repalloc(own_tags, sizeof(OwnTag) * m);
		max_own_tags = m;
	}
	if (n_own_entries + n > max_own_entries)
	{
		int64		m = Max(n_own_entries + n, Max(256, max_own_entries * 2));

		own_entries = own_entries == NULL ?
			MemoryContextAllocHuge(TopTransactionContext, sizeof(OwnEntry) * m) :
			repalloc_huge(own_entries, sizeof(OwnEntry) * m);
		max_own_entries = m;
	}
}

/* The id about to tag entries of p (lock held, room reserved). */
void
dedup_own_tag(PartEntry *p, TransactionId xid)
{
	OwnTag	   *t = n_own_tags > 0 ? &own_tags[n_own_tags - 1] : NULL;

	if (own_lost)
		return;
	if (t != NULL && TransactionIdEquals(t->xid, xid) &&
		memcmp(&t->pid, &p->pid, sizeof(pg_uuid_t)) == 0)
		return;
	Assert(n_own_tags < max_own_tags);
	t = &own_tags[n_own_tags++];
	t->pid = p->pid;
	t->xid = xid;
	t->dying = false;
	t->first = t->end = n_own_entries;
}

/* An entry just tagged with the last noted id (lock held, room reserved). */
void
dedup_own_entry(HashEntry *e)
{
	OwnEntry   *o;

	if (own_lost)
		return;
	Assert(n_own_tags > 0 && n_own_entries < max_own_entries &&
		   TransactionIdEquals(own_tags[n_own_tags - 1].xid, e->xid) &&
		   own_tags[n_own_tags - 1].end == n_own_entries);
	o = &own_entries[n_own_entries++];
	o->offset = e->offset;
	o->entry = (uint32) (e - dedup_entries);
	own_tags[n_own_tags - 1].end = n_own_entries;
}

/*
 * Settle the ids of this transaction that rolled back: all of them when
 * the transaction did, else those no longer current (the subtransaction
 * being rolled back and the ones it had committed). Their entries are
 * marked, where an entry still holds the id, offset and partition it was
 * written with (one since freed may too: marking it is harmless, reuse
 * rewrites it). They leave the pending lists, unless the transaction was
 * not followed to the end (own_lost: some entries were not noted, so the
 * probes must find the ids aborted). Another backend may have settled an
 * id first (a row is free once the rollback is recorded, before these
 * callbacks run): then the id is on its partition's aborted list, and its
 * entries were rewritten or are garbage either way.
 */
static void
own_rolled_back(bool all)
{
	int			ndying = 0;
	int			kt = 0;
	int64		ke = 0;

	for (int i = 0; i < n_own_tags; i++)
	{
		own_tags[i].dying = all || !TransactionIdIsCurrentTransactionId(own_tags[i].xid);
		ndying += own_tags[i].dying;
	}
	if (ndying == 0)
		return;

	LWLockAcquire(dedup_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n_own_tags; i++)
	{
		OwnTag	   *t = &own_tags[i];
		PartEntry  *p;

		if (!t->dying)
			continue;
		for (int64 k = t->first; k < t->end; k++)
		{
			HashEntry  *e = &dedup_entries[own_entries[k].entry];

			if (TransactionIdEquals(e->xid, t->xid) && e->offset == own_entries[k].offset &&
				memcmp(&e->key.pid, &t->pid, sizeof(pg_uuid_t)) == 0)
				e->xid = QS_XID_ROLLED_BACK;
		}
		p = own_lost ? NULL : hash_search(dedup_parts, &t->pid, HASH_FIND, NULL);
		for (int k = 0; p != NULL && k < p->npending; k++)
			if (TransactionIdEquals(p->pending[k], t->xid))
			{
				p->pending[k] = p->pending[--p->npending];
				break;
			}
	}
	LWLockRelease(dedup_shared->lock);

	/* the settled ids and their entries go, the others close up */
	for (int i = 0; i < n_own_tags; i++)
	{
		OwnTag		t = own_tags[i];

		if (t.dying)
			continue;
		memmove(&own_entries[ke], &own_entries[t.first], sizeof(OwnEntry) * (t.end - t.first));
		t.end = ke + (t.end - t.first);
		t.first = ke;
		ke = t.end;
		own_tags[kt++] = t;
	}
	n_own_tags = kt;
	n_own_entries = ke;
}

/*
 * A rollback, of the transaction or of a subtransaction, that noted ids.
 * (The notes go with the transaction's memory, whatever its end.)
 */
static void
own_xact_callback(XactEvent event, void *arg)
{
	if ((event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT) && n_own_tags > 0)
		own_rolled_back(true);
}

static void
own_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					 SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB && n_own_tags > 0)
		own_rolled_back(false);
}

/* Called at preload: follow this backend's rollbacks. */
void
dedup_own_init(void)
{
	RegisterXactCallback(own_xact_callback, NULL);
	RegisterSubXactCallback(own_subxact_callback, NULL);
}
