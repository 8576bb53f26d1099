/*
 * dedup.c: the push dedup probe (qs_dedup_probe), answered from a cache in
 * shared memory so that a push costs what it brings, not what the window
 * holds, on every connection, with one copy of the hashes per server; the
 * record of a stored segment (qs_dedup_record) and a partition's catch-up
 * with its hash rows. The cache's index is dedup_index.c, this backend's
 * own ids dedup_own.c, what it holds dedup_policy.c, the probes answered
 * from the table dedup_fallback.c; the rules below hold for all of them.
 *
 * The verdict is always the one reading the window of queen.log_txns would
 * give. What makes that hold:
 *
 * - Every probe and every record of a partition runs with its
 *   log_partitions row locked (pushes to a partition serialise on it until
 *   they commit, abort or are resolved after PREPARE), so a probing push
 *   never meets another transaction's unfinished entries: whoever recorded
 *   before it has committed or aborted by the time it holds the lock.
 * - Each entry carries the (sub)transaction id that stored its frame. A
 *   partition keeps the ids recorded since they were last settled; a probe
 *   settles them first (its own open ones stay; committed ones are trusted
 *   from then on; aborted ones go to the partition's aborted list, and
 *   entries tagged with them are garbage). A rolled-back push, savepoint,
 *   cycle or prepared transaction so never turns into a false duplicate.
 *   The backend that rolls back an id of its own settles it at once: its
 *   entries are marked and it leaves the pending lists. Only a prepared
 *   transaction rolled back from elsewhere, a transaction too large to
 *   follow, or an id a probe settles first (between the rollback being
 *   recorded and its backend's callback) reaches a probe as aborted, so
 *   purging aborted entries (a pass over the whole cache) stays rare.
 * - An entry that no longer counts keeps what it knew of other occurrences
 *   that still do (speaks_for): pruning and purging leave it, marked.
 * - Per partition the cache knows `verified` (every committed frame at an
 *   offset up to it is cached, when created at or after `covered_since`).
 *   A probe first reads only the hash rows past `verified` (frames stored
 *   while the partition was not being recorded: dedup off, a restart, an
 *   eviction). A window raised past `covered_since` rebuilds the partition.
 * - When the cache is full, expired and aborted entries are pruned; if that
 *   is not enough, the partitions holding the most stop being cached until
 *   it is three-quarters full, and are probed by key (queen.log_txn_keys,
 *   one row per hash, written by the probe from the hash rows under the
 *   same row lock: exact, and as cheap at any window), as is any partition
 *   when the library was not preloaded. An uncached partition counts the
 *   hashes its window holds at most once a second, and is cached again once
 *   they and the cache's other hashes fit in half of it (never within the
 *   transaction that made it uncached, nor past dedup_partition_entries): a
 *   full cache costs one scan per quarter of it refilled, not one per push. An
 *   uncached partition not probed for a window's length gives up its place
 *   when a place is sought; when the places are all taken, a new partition
 *   is probed by key, and a place is sought at most once a second.
 * - An expired entry that knew of a later occurrence (`more`) was all the
 *   cache held of it: pruning it lowers its partition's `verified`, so the
 *   next probe reads the rows past it again.
 * - A push probes and records about a hundred hashes in a table far
 *   larger than any cache, and every page of it a backend touches first
 *   costs a fault. So the lookups go through a compact index, 8 bytes a
 *   slot (linear probing, deletion by backward shift): a slot holds 32
 *   bits of the key's hash (mixed with a seed drawn at start), which also
 *   place it, and the number of its entry. A probe for a hash the cache does not hold (a fresh id, the
 *   common case) reads one index line and no entry; every home line is
 *   prefetched before any is read. Entries are taken in order from an
 *   array (freed ones are reused first), so the entries of one push share
 *   a few pages.
 * - The cache belongs to the timeline it was filled on. A hot standby
 *   caches nothing (it replays frames it never probed); the first probe or
 *   record after a promotion, on the new timeline, drops whatever an
 *   earlier timeline left, so the promoted node rebuilds from the table.
 */
#include "storage/dedup_int.h"

#include "access/transam.h"
#include "access/xlog.h"
#include "access/xact.h"

/* A partition catching up with its hash rows (its generation when it began). */
typedef struct CatchUp
{
	const pg_uuid_t *pid;
	uint32		gen;
	TimestampTz since;
	TimestampTz now;
} CatchUp;

/*
 * The partition, unless it was dropped or stopped being cached since the
 * catch-up began, or pruned past its start (another backend made room with
 * a later clock): a probe from `since` can no longer trust it.
 */
static PartEntry *
caught_up(const CatchUp *c)
{
	PartEntry  *p = hash_search(dedup_parts, c->pid, HASH_FIND, NULL);

	if (p == NULL || p->gen != c->gen || p->uncached || p->covered_since > c->since)
		return NULL;
	return p;
}

/*
 * Cache one hash row, the lock taken for the row only; false once the
 * partition was dropped meanwhile or cannot be cached (then it is not).
 */
static bool
catch_up_row(int64 base, TimestampTz created, const uint8 *sh, int n, TransactionId xmin, void *arg)
{
	CatchUp    *c = arg;
	uint32	   *tags = palloc(sizeof(uint32) * Max(n, 1));
	/* a row visible here is committed, or this transaction's own */
	TransactionId tag = TransactionIdIsCurrentTransactionId(xmin) ? xmin : InvalidTransactionId;
	PartEntry  *p;
	bool		ok;

	dedup_prefetch_tags(c->pid, sh, n, tags);
	if (TransactionIdIsValid(tag))
		dedup_own_reserve(n);
	LWLockAcquire(dedup_shared->lock, LW_EXCLUSIVE);
	p = caught_up(c);
	ok = p != NULL;
	if (ok && TransactionIdIsValid(tag))
	{
		ok = dedup_add_pending(p, tag);
		if (ok)
			dedup_own_tag(p, tag);
	}
	for (int k = 0; ok && k < n; k++)
		ok = dedup_remember(p, sh + k * QS_HASH_LEN, tags[k], base + k, created, c->since, tag, c->now);
	if (!ok && p != NULL && p->gen == c->gen && !p->uncached)
	{
		int64		held = p->entries;

		dedup_drop_partition(p);
		dedup_uncache(p, held);
	}
	LWLockRelease(dedup_shared->lock);
	pfree(tags);
	return ok;
}

/*
 * Probe `count` incoming hashes (those flagged in `probe`, or all) against
 * the partition's window. Called with the partition row locked; last_offset
 * is its allocator value then. Duplicates go into *res.
 */
void
qs_dedup_probe(const pg_uuid_t *pid, int window, int64 last_offset, int64 txns_start,
			   int64 verified, int count, const uint8 *in, const bool *probe,
			   TimestampTz now, QsAppendResult *res)
{
	TimestampTz since = now - (TimestampTz) window * USECS_PER_SEC;
	PartEntry  *p;
	int64		floor = Max(verified, txns_start - 1);
	bool		whole = verified <= txns_start - 1;
	bool		any = (probe == NULL);
	bool		recheck = false;
	uint32	   *tags;

	/* nothing that can repeat (fresh ids only): no reading at all */
	for (int i = 0; i < count && !any; i++)
		any = probe[i];

	if (RecoveryInProgress())
	{
		if (any)
			dedup_read_window(pid, floor, whole, since, count, in, probe, res);
		return;
	}
	if (dedup_shared == NULL)
	{
		if (any)
			dedup_probe_uncached(pid, floor, whole, since, last_offset, count, in, probe, res);
		return;
	}

	dedup_reserve_victims();
	LWLockAcquire(dedup_shared->lock, LW_EXCLUSIVE);
	dedup_check_timeline();
	p = dedup_get_partition(pid, window, last_offset, since, now);
	if (p == NULL || !any)
	{
		LWLockRelease(dedup_shared->lock);
		if (p == NULL && any)
			dedup_probe_uncached(pid, floor, whole, since, last_offset, count, in, probe, res);
		return;
	}

	/* catch up with what was stored while this partition was not recorded */
	if (p->verified < last_offset)
	{
		CatchUp		c;
		int64		from = Max(p->verified, txns_start - 1);

		c.pid = pid;
		c.gen = p->gen;
		c.since = since;
		c.now = now;
		LWLockRelease(dedup_shared->lock);
		dedup_each_window_row(pid, from, since, catch_up_row, &c);
		LWLockAcquire(dedup_shared->lock, LW_EXCLUSIVE);
		p = caught_up(&c);
		if (p == NULL)
		{
			/* it outgrew the cache meanwhile */
			LWLockRelease(dedup_shared->lock);
			dedup_probe_uncached(pid, floor, whole, since, last_offset, count, in, probe, res);
			return;
		}
		p->verified = last_offset;
		/* the rows read were this window's: older ones may be missing now */
		if (p->covered_since < since)
			p->covered_since = since;
	}

	/* every home line in flight at once, before any is read */
	tags = palloc(sizeof(uint32) * Max(count, 1));
	dedup_prefetch_tags(pid, in, count, tags);
	for (int i = 0; i < count; i++)
	{
		HashKey		key;
		HashEntry  *e;

		if (probe && !probe[i])
			continue;
		memset(&key, 0, sizeof(key));
		key.pid = *pid;
		memcpy(key.hash, in + i * QS_HASH_LEN, QS_HASH_LEN);
		e = dedup_lookup(&key, tags[i]);
		if (e == NULL)
			continue;
		if (!dedup_entry_valid(p, e) || e->created_at < since || e->offset <= floor)
		{
			/* the occurrence cached no longer counts; a later or older one may */
			if (e->more || e->older_at >= since)
				recheck = true;
			continue;
		}
		/* an older occurrence back inside a raised window is the original */
		if (e->older_at >= since)
			recheck = true;
		if (TransactionIdIsValid(e->xid) && !xid_in(p->pending, p->npending, e->xid))
			e->xid = InvalidTransactionId;	/* settled as committed */
		dedup_add_dup(res, count, i, e->offset);
	}
	LWLockRelease(dedup_shared->lock);
	pfree(tags);
	if (recheck)
	{
		dedup_read_window(pid, floor, whole, since, count, in, probe, res);
		return;
	}
	res->duplicate = res->ndups > 0;
}

/*
 * A segment was appended at `base` with the row still locked. With dedup
 * on, its hashes join the cache, which stays complete if it was complete
 * up to base - 1; with dedup off, the cache just stops claiming anything
 * from base on.
 */
void
qs_dedup_record(const pg_uuid_t *pid, int64 base, int count, const uint8 *in,
				TimestampTz created_at, bool dedup_on)
{
	PartEntry  *p;
	TransactionId xid;
	TimestampTz since;
	bool		ok = true;
	uint32	   *tags = NULL;

	if (dedup_shared == NULL || RecoveryInProgress())
		return;
	dedup_reserve_victims();
	xid = dedup_on ? GetCurrentTransactionId() : InvalidTransactionId;
	if (dedup_on)
	{
		/* outside the lock: the tags and their index lines */
		tags = palloc(sizeof(uint32) * Max(count, 1));
		dedup_prefetch_tags(pid, in, count, tags);
		dedup_own_reserve(count);
	}
	LWLockAcquire(dedup_shared->lock, LW_EXCLUSIVE);
	dedup_check_timeline();
	p = hash_search(dedup_parts, pid, HASH_FIND, NULL);
	if (p != NULL && !p->uncached && p->verified > base - 1)
		p->verified = base - 1;
	if (p != NULL && !p->uncached && dedup_on && p->verified == base - 1 && dedup_add_pending(p, xid))
	{
		dedup_own_tag(p, xid);
		since = created_at - (TimestampTz) p->window * USECS_PER_SEC;
		for (int i = 0; ok && i < count; i++)
			ok = dedup_remember(p, in + i * QS_HASH_LEN, tags[i], base + i, created_at, since, xid,
						  created_at);
		if (ok)
			p->verified = base + count - 1;
		else if (!p->uncached)
		{
			int64		held = p->entries;

			dedup_drop_partition(p);
			dedup_uncache(p, held);
		}
	}
	LWLockRelease(dedup_shared->lock);
	if (tags)
		pfree(tags);
}
