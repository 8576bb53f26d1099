/*
 * dedup_policy.c: what the dedup cache holds, per partition: settling the
 * transactions that recorded into it, keeping the lowest offset of a hash
 * in the window, pruning expired and aborted entries, purging the entries
 * of aborted transactions, and when a partition stops being cached (it is
 * probed by key, dedup_fallback.c) or is cached again.
 */
#include "storage/dedup_int.h"

#include "access/transam.h"
#include "access/xact.h"
#include "utils/memutils.h"

static PartEntry **victims = NULL;	/* make_room's, dedup_max_parts of them, allocated once */

/* make_room's list of victims, allocated before any lock is taken. */
void
dedup_reserve_victims(void)
{
	if (victims == NULL)
		victims = MemoryContextAlloc(TopMemoryContext, sizeof(PartEntry *) * dedup_max_parts);
}

/* An entry's frame is stored (committed, or this transaction's own). */
bool
dedup_entry_valid(PartEntry *p, HashEntry *e)
{
	return !TransactionIdIsValid(e->xid) ||
		(e->xid != QS_XID_ROLLED_BACK && !xid_in(p->aborted, p->naborted, e->xid));
}

/*
 * An entry that no longer counts (rolled back, or expired) may still be all
 * the cache knows of an occurrence inside the window from `since`: an older
 * one it replaced (older_at), or a later one (`more`) of an entry that was
 * itself in that window. Such an entry is kept, and sends probes to the table.
 */
static bool
speaks_for(HashEntry *e, TimestampTz since)
{
	return e->older_at >= since || (e->more && e->created_at >= since);
}

static bool
of_partition(HashEntry *e, void *arg)
{
	PartEntry  *p = arg;

	return memcmp(&e->key.pid, &p->pid, sizeof(pg_uuid_t)) == 0;
}

/* A partition's state once none of its hashes is cached. */
static void
forget_partition(PartEntry *p)
{
	p->entries = 0;
	p->verified = -1;
	p->covered_since = DT_NOEND;
	p->npending = 0;
	p->naborted = 0;
	p->gen = ++dedup_shared->gen;
}

/* Forget every cached hash of one partition (a scan of the whole cache). */
void
dedup_drop_partition(PartEntry *p)
{
	if (p->entries > 0 || p->naborted > 0 || p->npending > 0)
		dedup_remove_where(of_partition, p, QS_SCAN_DROP);
	forget_partition(p);
}

/*
 * Stop caching a partition whose window holds `held` hashes or more (its
 * entries are dropped with it, or by the caller's next pass).
 */
void
dedup_uncache(PartEntry *p, int64 held)
{
	p->uncached = true;
	p->held = held;
	p->counted_at = 0;	/* never */
	p->uncached_in = GetTopTransactionIdIfAny();
	pg_atomic_fetch_add_u64(&dedup_shared->evictions, 1);
}

typedef struct PurgeScan
{
	PartEntry  *p;
	TimestampTz since;
} PurgeScan;

static bool
aborted_of_partition(HashEntry *e, void *arg)
{
	PurgeScan  *s = arg;

	if (!of_partition(e, s->p) || dedup_entry_valid(s->p, e))
		return false;
	if (speaks_for(e, s->since))
	{
		e->xid = QS_XID_ROLLED_BACK;	/* the list that said so is emptied */
		return false;
	}
	s->p->entries--;
	return true;
}

/*
 * Remove the entries of a partition's aborted transactions (those that
 * speak for the window from `since` stay, marked); empty the list. What
 * the removed ones knew was older than `since`, so the cache stops vouching
 * for anything before it (a window raised past it starts over).
 */
static void
purge_aborted(PartEntry *p, TimestampTz since)
{
	PurgeScan	scan = {p, since};

	dedup_remove_where(aborted_of_partition, &scan, QS_SCAN_PURGE);
	p->naborted = 0;
	if (p->covered_since < since)
		p->covered_since = since;
}

/*
 * Settle the transactions that recorded into a partition: with its row
 * locked, each has committed or aborted, unless it is this transaction.
 */
static void
settle(PartEntry *p, TimestampTz since)
{
	int			keep = 0;

	for (int i = 0; i < p->npending; i++)
	{
		TransactionId x = p->pending[i];

		/*
		 * Status no longer kept (the partition sat untouched that long):
		 * start over from the table, which knows.
		 */
		if (TransactionIdPrecedes(x, ShmemVariableCache->oldestClogXid))
		{
			dedup_drop_partition(p);
			return;
		}
		if (TransactionIdIsCurrentTransactionId(x))
			p->pending[keep++] = x;
		else if (!TransactionIdDidCommit(x))
		{
			if (p->naborted == QS_DEDUP_ABORTED)
				purge_aborted(p, since);
			p->aborted[p->naborted++] = x;
		}
	}
	p->npending = keep;
}

bool
dedup_add_pending(PartEntry *p, TransactionId x)
{
	if (xid_in(p->pending, p->npending, x))
		return true;
	if (p->npending == QS_DEDUP_PENDING)
		return false;
	p->pending[p->npending++] = x;
	return true;
}

/*
 * One pass of pruning over the cache. Entries come in index order, not by
 * partition, so their partitions are looked up through a small memo (by
 * the last byte of the id, which is random) rather than once per entry.
 */
typedef struct PruneScan
{
	TimestampTz now;
	PartEntry  *memo[256];
} PruneScan;

/*
 * An entry outside its partition's window, of an aborted push, of a
 * partition no longer cached (already uncounted) or of none.
 */
static bool
prunable(HashEntry *e, void *arg)
{
	PruneScan  *s = arg;
	PartEntry **m = &s->memo[e->key.pid.data[UUID_LEN - 1]];
	PartEntry  *p = *m;
	TimestampTz since;

	if (p == NULL || memcmp(&p->pid, &e->key.pid, sizeof(pg_uuid_t)) != 0)
		p = *m = hash_search(dedup_parts, &e->key.pid, HASH_FIND, NULL);
	if (p == NULL || p->uncached)
		return true;
	since = s->now - (TimestampTz) p->window * USECS_PER_SEC;
	if (!dedup_entry_valid(p, e))
	{
		/* make_room empties the aborted lists: one that stays is marked */
		if (speaks_for(e, since))
		{
			e->xid = QS_XID_ROLLED_BACK;
			return false;
		}
		p->entries--;
		return true;
	}
	if (e->created_at >= since)
		return false;

	/*
	 * A later occurrence may still be in the window, and the entry was all
	 * the cache held of it: the next probe reads the rows past it again
	 * (and a catch-up under way gives up).
	 */
	if (e->more && p->verified >= e->offset)
	{
		p->verified = e->offset;
		p->gen = ++dedup_shared->gen;
	}
	p->entries--;
	return true;
}

static int
by_entries_desc(const void *a, const void *b)
{
	int64		x = (*(PartEntry *const *) a)->entries;
	int64		y = (*(PartEntry *const *) b)->entries;

	return x > y ? -1 : x < y ? 1 : 0;
}

/*
 * Make room: drop expired and aborted entries, and the partitions left
 * with none and nothing to settle (but `keep`, which the caller holds; a
 * dropped one is read from the table when next probed). Seeking a place
 * for a partition, drop too the uncached ones not probed for a window's
 * length; seeking room for hashes, if the cache is still three-quarters
 * full, stop caching the partitions that hold the most until it is not.
 */
static void
make_room(TimestampTz now, PartEntry *keep, bool place)
{
	HASH_SEQ_STATUS seq;
	PartEntry  *p;
	PruneScan	scan;
	PartEntry **cached;
	int			ncached = 0;
	int64		left;

	scan.now = now;
	memset(scan.memo, 0, sizeof(scan.memo));
	dedup_remove_where(prunable, &scan, QS_SCAN_ROOM);
	cached = victims;
	hash_seq_init(&seq, dedup_parts);
	while ((p = hash_seq_search(&seq)) != NULL)
	{
		TimestampTz since = now - (TimestampTz) p->window * USECS_PER_SEC;

		p->naborted = 0;
		if (p != keep && (p->uncached ? place && p->probed_at < since :
						  p->entries == 0 && p->npending == 0))
		{
			hash_search(dedup_parts, &p->pid, HASH_REMOVE, NULL);
			continue;
		}
		if (p->covered_since < since)
			p->covered_since = since;
		if (!p->uncached && p->entries > 0)
			cached[ncached++] = p;
	}

	/* still three-quarters full: the largest stop being cached, in one more pass */
	left = dedup_shared->nentries;
	if (!place && left >= dedup_max_entries * 3 / 4)
	{
		qsort(cached, ncached, sizeof(PartEntry *), by_entries_desc);
		for (int i = 0; i < ncached && left >= dedup_max_entries * 3 / 4; i++)
		{
			left -= cached[i]->entries;
			dedup_uncache(cached[i], cached[i]->entries);
			forget_partition(cached[i]);
		}
		memset(scan.memo, 0, sizeof(scan.memo));
		dedup_remove_where(prunable, &scan, QS_SCAN_ROOM);
	}
}

/*
 * Keep the lowest offset of a hash within the window (the original of any
 * later duplicate); an occurrence that no longer counts gives way. False
 * when the cache has no room left.
 */
bool
dedup_remember(PartEntry *p, const uint8 *h, uint32 tag, int64 offset, TimestampTz created_at,
		 TimestampTz since, TransactionId xid, TimestampTz now)
{
	HashKey		key;
	HashEntry  *e;
	uint64		i;
	bool		found;

	if (qs_dedup_partition_entries > 0 && p->entries >= qs_dedup_partition_entries)
		return false;
	memset(&key, 0, sizeof(key));
	key.pid = p->pid;
	memcpy(key.hash, h, QS_HASH_LEN);
	i = dedup_find_slot(&key, tag, &found);
	if (!found && dedup_shared->nentries >= dedup_max_entries)
	{
		make_room(now, p, false);
		if (p->uncached || dedup_shared->nentries >= dedup_max_entries)
			return false;
		i = dedup_find_slot(&key, tag, &found);
	}
	if (!found)
	{
		e = dedup_insert_at(i, &key, tag);
		p->entries++;
		e->more = false;
		e->older_at = DT_NOBEGIN;
	}
	else
	{
		e = dedup_slot_entry(i);
		if (dedup_entry_valid(p, e) && e->created_at >= since)
		{
			if (offset == e->offset)
				return true;
			e->more = true;
			if (offset > e->offset)
				return true;
		}
		else if (dedup_entry_valid(p, e) && offset > e->offset && e->created_at > e->older_at)
			e->older_at = e->created_at;	/* a raised window may bring it back */
	}
	e->offset = offset;
	e->created_at = created_at;
	e->xid = xid;
	if (TransactionIdIsValid(xid))
		dedup_own_entry(e);
	return true;
}

/*
 * Find or add the partition, settled; NULL when the cache cannot hold it
 * (no cache, no room, or its window outgrew the cache). Lock held.
 */
PartEntry *
dedup_get_partition(const pg_uuid_t *pid, int window, int64 last_offset, TimestampTz since,
			  TimestampTz now)
{
	PartEntry  *p;
	bool		found;

	p = hash_search(dedup_parts, pid, HASH_ENTER_NULL, &found);
	if (p == NULL)
	{
		/* every place taken: seek room (a pass over the cache) at most once a second */
		if (now - dedup_shared->no_place_at < USECS_PER_SEC)
			return NULL;
		make_room(now, NULL, true);
		p = hash_search(dedup_parts, pid, HASH_ENTER_NULL, &found);
		if (p == NULL)
		{
			dedup_shared->no_place_at = now;
			return NULL;
		}
	}
	p->probed_at = now;
	if (!found)
	{
		p->entries = 0;
		p->gen = ++dedup_shared->gen;
		p->uncached = false;
		p->held = 0;
		p->counted_at = 0;	/* never */
		p->uncached_in = InvalidTransactionId;
		p->npending = 0;
		p->naborted = 0;
		p->verified = -1;
		p->covered_since = DT_NOEND;
	}
	p->window = window;
	if (p->uncached)
	{
		/*
		 * Its window and the rest fit in half the cache again: cache it (the
		 * catch-up reads it). Not in the transaction that overflowed it (too
		 * many of its subtransactions recorded), nor past the partition cap.
		 */
		if (p->held >= dedup_max_entries / 2 - dedup_shared->nentries ||
			(qs_dedup_partition_entries > 0 && p->held >= qs_dedup_partition_entries) ||
			(TransactionIdIsValid(p->uncached_in) &&
			 TransactionIdEquals(p->uncached_in, GetTopTransactionIdIfAny())))
			return NULL;
		p->uncached = false;
		forget_partition(p);
	}
	settle(p, since);
	/* a recorder rolled back: its offsets were never stored */
	if (p->verified > last_offset)
		p->verified = last_offset;
	/* a window raised past what is covered (or a new partition): start over */
	if (since < p->covered_since)
	{
		dedup_drop_partition(p);
		p->covered_since = since;
	}
	return p;
}
