/*
 * dedup.c: the push dedup probe, answered from a cache in
 * shared memory so that a push costs what it brings, not what the window
 * holds, on every connection, with one copy of the hashes per server.
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
#include "storage/storage.h"

#include "access/transam.h"
#include "access/xlog.h"
#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#define QS_DEDUP_PENDING 16
#define QS_DEDUP_ABORTED 16

/*
 * An entry's xid once its (sub)transaction rolled back: never a real
 * transaction's, so the entry no longer counts whatever the lists say.
 */
#define QS_XID_ROLLED_BACK BootstrapTransactionId

typedef struct HashKey
{
	pg_uuid_t	pid;
	uint8		hash[QS_HASH_LEN];
} HashKey;

/* A cached hash: one cache line. */
typedef struct HashEntry
{
	HashKey		key;
	int64		offset;			/* lowest offset holding this hash; free: the next free entry */
	TimestampTz created_at;
	TimestampTz older_at;		/* newest occurrence before `offset` that had
								 * expired when replaced, or DT_NOBEGIN */
	TransactionId xid;			/* that stored it; Invalid once known committed */
	bool		more;			/* another occurrence exists beyond `offset` */
} HashEntry;

StaticAssertDecl(sizeof(HashEntry) == 64, "a dedup entry is one cache line");

/* A slot of the index: the key's tag (32 bits of its hash) and its entry + 1, 0 when empty. */
typedef struct IndexSlot
{
	uint32		tag;
	uint32		entry;
} IndexSlot;

typedef struct PartEntry
{
	pg_uuid_t	pid;
	int64		verified;		/* every committed frame at offsets <= this is cached */
	TimestampTz covered_since;	/* ... when created at or after this */
	int			window;			/* seconds, as last probed */
	int64		entries;		/* hashes cached for it */
	uint32		gen;			/* new whenever it is added or its entries are dropped */
	bool		uncached;		/* its window outgrew the cache: probed by key */
	int64		held;			/* uncached: hashes its window held when last counted */
	TimestampTz counted_at;		/* uncached: when `held` was last counted */
	TransactionId uncached_in;	/* uncached: the top transaction that made it so */
	TimestampTz probed_at;		/* last probed */
	int			npending;
	TransactionId pending[QS_DEDUP_PENDING];	/* recorded, not yet settled */
	int			naborted;
	TransactionId aborted[QS_DEDUP_ABORTED];	/* settled as aborted */
} PartEntry;

typedef struct DedupShared
{
	LWLock	   *lock;
	int64		max_entries;
	int64		nentries;		/* entries in use */
	int64		unused;			/* entries from here on were never used */
	int64		free;			/* a freed entry, its `offset` the next one; -1: none */
	uint64		seed;			/* of key_tag: ids cannot be chosen to crowd one run */
	uint32		gen;			/* the last PartEntry.gen given */
	TimeLineID	tli;			/* the timeline the entries were cached on */
	TimestampTz no_place_at;	/* when room for a partition was last sought in vain */
	pg_atomic_uint64 window_reads;	/* probes answered by reading the window */
	pg_atomic_uint64 key_probes;	/* probes answered from queen.log_txn_keys */
	pg_atomic_uint64 evictions; /* partitions that stopped being cached */
	pg_atomic_uint64 scans[QS_DEDUP_SCAN_REASONS];	/* passes over the whole index */
} DedupShared;

static DedupShared *shared = NULL;
static IndexSlot *index_slots = NULL;	/* cache-line aligned */
static uint64 nslots = 0;		/* 1.5 x max_entries: runs stay short */
static HashEntry *entries = NULL;	/* max_entries of them, cache-line aligned */
static uint64 tag_seed = 0;		/* shared->seed */
static HTAB *parts = NULL;
static int64 max_entries = 0;
static int64 max_parts = 0;
static PartEntry **victims = NULL;	/* make_room's, max_parts of them, allocated once */

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void own_xact_callback(XactEvent event, void *arg);
static void own_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
								 SubTransactionId parentSubid, void *arg);

static QsPlan newer_plan = {
	"SELECT base_offset, created_at, hashes, xmin FROM queen.log_txns"
	" WHERE partition_id = $1 AND end_offset > $2 AND created_at >= $3",
	3, {UUIDOID, INT8OID, TIMESTAMPTZOID}
};

static Size
dedup_shmem_size(void)
{
	return add_size(add_size(MAXALIGN(sizeof(DedupShared)),
							 add_size(mul_size(nslots, sizeof(IndexSlot)), PG_CACHE_LINE_SIZE)),
					add_size(add_size(mul_size(max_entries, sizeof(HashEntry)), PG_CACHE_LINE_SIZE),
							 hash_estimate_size(max_parts, sizeof(PartEntry))));
}

static void
dedup_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(dedup_shmem_size());
	RequestNamedLWLockTranche("queen_streams dedup", 1);
}

static void
dedup_shmem_startup(void)
{
	bool		found;
	HASHCTL		ctl;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("queen_streams dedup", sizeof(DedupShared), &found);
	if (!found)
	{
		shared->lock = &(GetNamedLWLockTranche("queen_streams dedup"))->lock;
		shared->max_entries = max_entries;
		shared->nentries = 0;
		shared->unused = 0;
		shared->free = -1;
		shared->tli = 0;
		shared->gen = 0;
		shared->no_place_at = 0;	/* not DT_NOBEGIN: `now - no_place_at` must not wrap */
		pg_atomic_init_u64(&shared->window_reads, 0);
		pg_atomic_init_u64(&shared->key_probes, 0);
		pg_atomic_init_u64(&shared->evictions, 0);
		for (int r = 0; r < QS_DEDUP_SCAN_REASONS; r++)
			pg_atomic_init_u64(&shared->scans[r], 0);
		if (!pg_strong_random(&shared->seed, sizeof(shared->seed)))
			ereport(FATAL,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate a random seed for the dedup cache")));
	}
	tag_seed = shared->seed;
	index_slots = ShmemInitStruct("queen_streams dedup index",
								  mul_size(nslots, sizeof(IndexSlot)) + PG_CACHE_LINE_SIZE, &found);
	if (!found)
		memset(index_slots, 0, mul_size(nslots, sizeof(IndexSlot)) + PG_CACHE_LINE_SIZE);
	index_slots = (IndexSlot *) CACHELINEALIGN(index_slots);
	/*
	 * Entries are written before they are read, but touched now: the first
	 * fill would otherwise pay for every page it allocates, under the lock.
	 */
	entries = ShmemInitStruct("queen_streams dedup hashes",
							  mul_size(max_entries, sizeof(HashEntry)) + PG_CACHE_LINE_SIZE, &found);
	if (!found)
		memset(entries, 0, mul_size(max_entries, sizeof(HashEntry)) + PG_CACHE_LINE_SIZE);
	entries = (HashEntry *) CACHELINEALIGN(entries);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(pg_uuid_t);
	ctl.entrysize = sizeof(PartEntry);
	parts = ShmemInitHash("queen_streams dedup partitions", max_parts, max_parts, &ctl,
						  HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Called by _PG_init: reserve the cache when the library is preloaded
 * (queen_streams.dedup_cache_entries sizes it). Without preload there is no
 * cache and every probe goes by key.
 */
void
qs_dedup_shmem_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	max_entries = Max(qs_dedup_cache_entries, 1024);
	max_parts = Max(256, max_entries / 16);
	nslots = max_entries + max_entries / 2;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = dedup_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = dedup_shmem_startup;
	RegisterXactCallback(own_xact_callback, NULL);
	RegisterSubXactCallback(own_subxact_callback, NULL);
}

/* make_room's list of victims, allocated before any lock is taken. */
static void
reserve_victims(void)
{
	if (victims == NULL)
		victims = MemoryContextAlloc(TopMemoryContext, sizeof(PartEntry *) * max_parts);
}

static bool
xid_in(const TransactionId *list, int n, TransactionId xid)
{
	for (int i = 0; i < n; i++)
		if (TransactionIdEquals(list[i], xid))
			return true;
	return false;
}

/*
 * A key's tag: its txn hash and pid mixed with the server's random seed
 * (murmur3's finalizer), so that no client can choose ids that crowd one
 * run of the index. It places the key too (home_of), so the index alone
 * can move its slots.
 */
static inline uint32
key_tag(const pg_uuid_t *pid, const uint8 *hash)
{
	uint64		h,
				a,
				b;

	memcpy(&h, hash, sizeof(h));
	memcpy(&a, pid->data, sizeof(a));
	memcpy(&b, pid->data + 8, sizeof(b));
	h ^= tag_seed ^ ((a ^ b) * UINT64CONST(0x9E3779B97F4A7C15));
	h ^= h >> 33;
	h *= UINT64CONST(0xff51afd7ed558ccd);
	h ^= h >> 33;
	h *= UINT64CONST(0xc4ceb9fe1a85ec53);
	h ^= h >> 33;
	return (uint32) (h >> 32);
}

/* A tag's home slot, by a multiply (nslots < 2^32). */
static inline uint64
home_of(uint32 tag)
{
	return ((uint64) tag * nslots) >> 32;
}

static inline uint64
next_slot(uint64 i)
{
	return i + 1 == nslots ? 0 : i + 1;
}

/* The tags of n hashes of one partition into tags[], their home lines prefetched. */
static void
prefetch_tags(const pg_uuid_t *pid, const uint8 *in, int n, uint32 *tags)
{
	for (int i = 0; i < n; i++)
	{
		tags[i] = key_tag(pid, in + i * QS_HASH_LEN);
		__builtin_prefetch(&index_slots[home_of(tags[i])], 1);
	}
}

/*
 * The index slot of the key, or else the empty slot that ends its run
 * (where it would go): linear probing from its home. An entry is read only
 * when its tag matches.
 */
static uint64
find_slot(const HashKey *key, uint32 tag, bool *found)
{
	for (uint64 i = home_of(tag);; i = next_slot(i))
	{
		IndexSlot  *s = &index_slots[i];

		if (s->entry == 0)
		{
			*found = false;
			return i;
		}
		if (s->tag == tag && memcmp(&entries[s->entry - 1].key, key, sizeof(HashKey)) == 0)
		{
			*found = true;
			return i;
		}
	}
}

static HashEntry *
lookup(const HashKey *key, uint32 tag)
{
	bool		found;
	uint64		i = find_slot(key, tag, &found);

	return found ? &entries[index_slots[i].entry - 1] : NULL;
}

/* Put a new key at empty index slot i (lock held; an entry is free). */
static HashEntry *
insert_at(uint64 i, const HashKey *key, uint32 tag)
{
	int64		k;

	if (shared->free >= 0)
	{
		k = shared->free;
		shared->free = entries[k].offset;
	}
	else
		k = shared->unused++;
	index_slots[i].tag = tag;
	index_slots[i].entry = (uint32) (k + 1);
	shared->nentries++;
	entries[k].key = *key;
	return &entries[k];
}

/* Remove index slot i and free its entry (lock held): later slots of its run shift back. */
static void
remove_slot(uint64 i)
{
	int64		k = index_slots[i].entry - 1;
	uint64		j = i;

	entries[k].offset = shared->free;
	shared->free = k;
	shared->nentries--;
	for (;;)
	{
		uint64		h;

		j = next_slot(j);
		if (index_slots[j].entry == 0)
			break;
		h = home_of(index_slots[j].tag);
		/* j's slot stays where it is when its home lies cyclically in (i, j] */
		if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
			continue;
		index_slots[i] = index_slots[j];
		i = j;
	}
	index_slots[i].entry = 0;
}

/*
 * Remove every entry `drop` selects (lock held), in one pass over the
 * index: a removal shifts later slots back into the one just read, which
 * is read again.
 */
static void
remove_where(bool (*drop) (HashEntry *e, void *arg), void *arg, QsDedupScan reason)
{
	pg_atomic_fetch_add_u64(&shared->scans[reason], 1);
	for (uint64 i = 0; i < nslots; i++)
		while (index_slots[i].entry != 0 && drop(&entries[index_slots[i].entry - 1], arg))
			remove_slot(i);
}

/* An entry's frame is stored (committed, or this transaction's own). */
static bool
entry_valid(PartEntry *p, HashEntry *e)
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
	p->gen = ++shared->gen;
}

/* Forget every cached hash of one partition (a scan of the whole cache). */
static void
drop_partition(PartEntry *p)
{
	if (p->entries > 0 || p->naborted > 0 || p->npending > 0)
		remove_where(of_partition, p, QS_SCAN_DROP);
	forget_partition(p);
}

/*
 * Stop caching a partition whose window holds `held` hashes or more (its
 * entries are dropped with it, or by the caller's next pass).
 */
static void
uncache(PartEntry *p, int64 held)
{
	p->uncached = true;
	p->held = held;
	p->counted_at = 0;	/* never */
	p->uncached_in = GetTopTransactionIdIfAny();
	pg_atomic_fetch_add_u64(&shared->evictions, 1);
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

	if (!of_partition(e, s->p) || entry_valid(s->p, e))
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

	remove_where(aborted_of_partition, &scan, QS_SCAN_PURGE);
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
			drop_partition(p);
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

static bool
add_pending(PartEntry *p, TransactionId x)
{
	if (xid_in(p->pending, p->npending, x))
		return true;
	if (p->npending == QS_DEDUP_PENDING)
		return false;
	p->pending[p->npending++] = x;
	return true;
}

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
static void
own_reserve(int64 n)
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
	if (n_own_tags == QS_DEDUP_PENDING * max_parts || n_own_entries + n > max_entries)
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
static void
own_tag(PartEntry *p, TransactionId xid)
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
static void
own_entry(HashEntry *e)
{
	OwnEntry   *o;

	if (own_lost)
		return;
	Assert(n_own_tags > 0 && n_own_entries < max_own_entries &&
		   TransactionIdEquals(own_tags[n_own_tags - 1].xid, e->xid) &&
		   own_tags[n_own_tags - 1].end == n_own_entries);
	o = &own_entries[n_own_entries++];
	o->offset = e->offset;
	o->entry = (uint32) (e - entries);
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

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n_own_tags; i++)
	{
		OwnTag	   *t = &own_tags[i];
		PartEntry  *p;

		if (!t->dying)
			continue;
		for (int64 k = t->first; k < t->end; k++)
		{
			HashEntry  *e = &entries[own_entries[k].entry];

			if (TransactionIdEquals(e->xid, t->xid) && e->offset == own_entries[k].offset &&
				memcmp(&e->key.pid, &t->pid, sizeof(pg_uuid_t)) == 0)
				e->xid = QS_XID_ROLLED_BACK;
		}
		p = own_lost ? NULL : hash_search(parts, &t->pid, HASH_FIND, NULL);
		for (int k = 0; p != NULL && k < p->npending; k++)
			if (TransactionIdEquals(p->pending[k], t->xid))
			{
				p->pending[k] = p->pending[--p->npending];
				break;
			}
	}
	LWLockRelease(shared->lock);

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
		p = *m = hash_search(parts, &e->key.pid, HASH_FIND, NULL);
	if (p == NULL || p->uncached)
		return true;
	since = s->now - (TimestampTz) p->window * USECS_PER_SEC;
	if (!entry_valid(p, e))
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
		p->gen = ++shared->gen;
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
	remove_where(prunable, &scan, QS_SCAN_ROOM);
	cached = victims;
	hash_seq_init(&seq, parts);
	while ((p = hash_seq_search(&seq)) != NULL)
	{
		TimestampTz since = now - (TimestampTz) p->window * USECS_PER_SEC;

		p->naborted = 0;
		if (p != keep && (p->uncached ? place && p->probed_at < since :
						  p->entries == 0 && p->npending == 0))
		{
			hash_search(parts, &p->pid, HASH_REMOVE, NULL);
			continue;
		}
		if (p->covered_since < since)
			p->covered_since = since;
		if (!p->uncached && p->entries > 0)
			cached[ncached++] = p;
	}

	/* still three-quarters full: the largest stop being cached, in one more pass */
	left = shared->nentries;
	if (!place && left >= max_entries * 3 / 4)
	{
		qsort(cached, ncached, sizeof(PartEntry *), by_entries_desc);
		for (int i = 0; i < ncached && left >= max_entries * 3 / 4; i++)
		{
			left -= cached[i]->entries;
			uncache(cached[i], cached[i]->entries);
			forget_partition(cached[i]);
		}
		memset(scan.memo, 0, sizeof(scan.memo));
		remove_where(prunable, &scan, QS_SCAN_ROOM);
	}
}

/*
 * Keep the lowest offset of a hash within the window (the original of any
 * later duplicate); an occurrence that no longer counts gives way. False
 * when the cache has no room left.
 */
static bool
remember(PartEntry *p, const uint8 *h, uint32 tag, int64 offset, TimestampTz created_at,
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
	i = find_slot(&key, tag, &found);
	if (!found && shared->nentries >= max_entries)
	{
		make_room(now, p, false);
		if (p->uncached || shared->nentries >= max_entries)
			return false;
		i = find_slot(&key, tag, &found);
	}
	if (!found)
	{
		e = insert_at(i, &key, tag);
		p->entries++;
		e->more = false;
		e->older_at = DT_NOBEGIN;
	}
	else
	{
		e = &entries[index_slots[i].entry - 1];
		if (entry_valid(p, e) && e->created_at >= since)
		{
			if (offset == e->offset)
				return true;
			e->more = true;
			if (offset > e->offset)
				return true;
		}
		else if (entry_valid(p, e) && offset > e->offset && e->created_at > e->older_at)
			e->older_at = e->created_at;	/* a raised window may bring it back */
	}
	e->offset = offset;
	e->created_at = created_at;
	e->xid = xid;
	if (TransactionIdIsValid(xid))
		own_entry(e);
	return true;
}

static void
add_dup(QsAppendResult *res, int count, int i, int64 offset)
{
	if (res->ndups == 0)
	{
		res->dup_idx = palloc(sizeof(int) * count);
		res->dup_off = palloc(sizeof(int64) * count);
	}
	res->dup_idx[res->ndups] = i;
	res->dup_off[res->ndups] = offset;
	res->ndups++;
}

/* Rows of the window read at a time: memory bounded by a chunk, not the window. */
#define QS_DEDUP_CHUNK 1024

typedef bool (*WindowRow) (int64 base, TimestampTz created, const uint8 *hashes, int n,
						   TransactionId xmin, void *arg);

/*
 * Run `plan` (its columns: base_offset, created_at, hashes, xmin), a chunk
 * of rows at a time: each row's values go to `row`, in a context reset after
 * every chunk. `row` may run statements of its own (the chunk is read from
 * its own tuple table). False from `row` stops, and is returned.
 */
static bool
each_row(QsPlan *plan, Datum *args, WindowRow row, void *arg)
{
	Portal		portal = qs_cursor(plan, args, NULL);
	MemoryContext chunk = AllocSetContextCreate(CurrentMemoryContext, "queen_streams dedup window",
												ALLOCSET_DEFAULT_SIZES);
	bool		ok = true;

	while (ok)
	{
		SPITupleTable *tt;
		uint64		nrows;

		SPI_cursor_fetch(portal, true, QS_DEDUP_CHUNK);
		tt = SPI_tuptable;
		nrows = SPI_processed;
		if (nrows == 0)
		{
			SPI_freetuptable(tt);
			break;
		}
		for (uint64 r = 0; ok && r < nrows; r++)
		{
			MemoryContext old = MemoryContextSwitchTo(chunk);
			bool		isnull;
			bytea	   *stored = DatumGetByteaPP(SPI_getbinval(tt->vals[r], tt->tupdesc, 3, &isnull));

			CHECK_FOR_INTERRUPTS();
			ok = row(DatumGetInt64(SPI_getbinval(tt->vals[r], tt->tupdesc, 1, &isnull)),
					 DatumGetTimestampTz(SPI_getbinval(tt->vals[r], tt->tupdesc, 2, &isnull)),
					 (const uint8 *) VARDATA_ANY(stored), VARSIZE_ANY_EXHDR(stored) / QS_HASH_LEN,
					 DatumGetTransactionId(SPI_getbinval(tt->vals[r], tt->tupdesc, 4, &isnull)), arg);
			MemoryContextSwitchTo(old);
		}
		MemoryContextReset(chunk);
		SPI_freetuptable(tt);
	}
	SPI_cursor_close(portal);
	MemoryContextDelete(chunk);
	return ok;
}

/* A partition's hash rows past `floor` created since `since`, as each_row gives them. */
static bool
each_window_row(const pg_uuid_t *pid, int64 floor, TimestampTz since, WindowRow row, void *arg)
{
	Datum		args[3];

	args[0] = qs_uuid_datum(pid);
	args[1] = Int64GetDatum(floor);
	args[2] = TimestampTzGetDatum(since);
	return each_row(&newer_plan, args, row, arg);
}

/* The uncached probe's incoming hashes: an open-addressing set of frame indexes. */
typedef struct WindowProbe
{
	const uint8 *in;
	int64		floor;
	int			size;
	int		   *slot;
	int64	   *first;			/* per incoming hash: the lowest offset holding it, or -1 */
	int64		held;			/* hashes read */
} WindowProbe;

static bool
probe_row(int64 base, TimestampTz created, const uint8 *sh, int n, TransactionId xmin, void *arg)
{
	WindowProbe *w = arg;

	for (int k = 0; k < n; k++)
	{
		uint32		h;

		if (base + k <= w->floor)
			continue;
		w->held++;
		memcpy(&h, sh + k * QS_HASH_LEN + 8, sizeof(h));
		for (h &= w->size - 1; w->slot[h] != 0; h = (h + 1) & (w->size - 1))
		{
			int			i = w->slot[h] - 1;

			if (memcmp(w->in + i * QS_HASH_LEN, sh + k * QS_HASH_LEN, QS_HASH_LEN) == 0 &&
				(w->first[i] < 0 || base + k < w->first[i]))
				w->first[i] = base + k;
		}
	}
	return true;
}

/*
 * An uncached partition's window was found to hold `held` hashes past its
 * floor; only a count of the whole window may find it smaller.
 */
static void
note_held(const pg_uuid_t *pid, int64 held, bool whole)
{
	PartEntry  *p;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	p = hash_search(parts, pid, HASH_FIND, NULL);
	if (p != NULL && p->uncached)
		p->held = whole ? held : Max(p->held, held);
	LWLockRelease(shared->lock);
}

/* The incoming hashes to look for (those flagged in `probe`, or all). */
static void
probe_init(WindowProbe *w, int64 floor, int count, const uint8 *in, const bool *probe)
{
	w->in = in;
	w->floor = floor;
	w->size = 16;
	while (w->size < count * 2)
		w->size <<= 1;
	w->slot = palloc0(sizeof(int) * w->size);
	w->first = palloc(sizeof(int64) * Max(count, 1));
	w->held = 0;
	for (int i = 0; i < count; i++)
	{
		uint32		h;

		w->first[i] = -1;
		if (probe && !probe[i])
			continue;
		memcpy(&h, in + i * QS_HASH_LEN + 8, sizeof(h));	/* xxh3 bits are uniform */
		for (h &= w->size - 1; w->slot[h] != 0; h = (h + 1) & (w->size - 1))
			;
		w->slot[h] = i + 1;
	}
}

/* The duplicates found, in frame order, into *res. */
static void
probe_finish(WindowProbe *w, int count, QsAppendResult *res)
{
	for (int i = 0; i < count; i++)
		if (w->first[i] >= 0)
			add_dup(res, count, i, w->first[i]);
	res->duplicate = res->ndups > 0;
	pfree(w->slot);
	pfree(w->first);
}

/*
 * Read the window's hash rows past `floor` (`whole`: all of them) and look
 * each stored hash up among the incoming ones; an uncached partition learns
 * how many hashes its window holds, to be cached again once they fit. For
 * what the cache cannot tell, on a standby, and in a transaction that reads
 * from one snapshot.
 */
static void
read_window(const pg_uuid_t *pid, int64 floor, bool whole, TimestampTz since, int count,
			const uint8 *in, const bool *probe, QsAppendResult *res)
{
	WindowProbe w;

	res->ndups = 0;
	probe_init(&w, floor, count, in, probe);
	each_window_row(pid, floor, since, probe_row, &w);
	probe_finish(&w, count, res);

	if (shared != NULL && !RecoveryInProgress())
	{
		pg_atomic_fetch_add_u64(&shared->window_reads, 1);
		note_held(pid, w.held, whole);
	}
}

/*
 * The keyed probe, for a partition the cache does not hold: its hashes, one
 * row each in queen.log_txn_keys, complete for every hash row up to
 * log_txn_marks.indexed. The incoming hashes are looked up among the keys
 * up to the mark; the hash rows past the mark are read and probed, and the
 * first queen_streams.dedup_key_budget of their hashes become keys (the mark
 * moves past them). A large backlog so takes a few pushes to key, each of
 * which also reads the window past its keys, as 0.6.0 read the whole
 * window; then a probe costs what the push brings. The caller holds the row
 * lock and the keys and the mark commit or roll back with the push, so they
 * are exactly the committed hash rows: the verdict is read_window's.
 */
#define QS_DEDUP_KEY_BATCH 8192		/* keys per INSERT */

static QsPlan mark_plan = {
	"SELECT indexed FROM queen.log_txn_marks WHERE partition_id = $1",
	1, {UUIDOID}
};

static QsPlan mark_set_plan = {
	"INSERT INTO queen.log_txn_marks (partition_id, indexed) VALUES ($1, $2)"
	" ON CONFLICT (partition_id) DO UPDATE SET indexed = excluded.indexed",
	2, {UUIDOID, INT8OID}
};

/*
 * One index descent per incoming hash, whatever the statistics say: as a
 * join, a partition keyed since the last ANALYZE looked rare, and the plan
 * hashed all of its keys at every push.
 */
static QsPlan keys_plan = {
	"SELECT h.i, (SELECT min(k.msg_offset) FROM queen.log_txn_keys k"
	"              WHERE k.partition_id = $1 AND k.hash = h.hash"
	"                AND k.msg_offset > $3 AND k.msg_offset <= $5 AND k.created_at >= $4)"
	"  FROM unnest($2::uuid[]) WITH ORDINALITY AS h(hash, i)",
	5, {UUIDOID, UUIDARRAYOID, INT8OID, TIMESTAMPTZOID, INT8OID}
};

/* the hash rows past the mark, whatever their age: a raised window needs them */
static QsPlan unkeyed_plan = {
	"SELECT base_offset, created_at, hashes, xmin FROM queen.log_txns"
	" WHERE partition_id = $1 AND base_offset > $2 ORDER BY base_offset",
	2, {UUIDOID, INT8OID}
};

static QsPlan keys_insert_plan = {
	"INSERT INTO queen.log_txn_keys (partition_id, hash, msg_offset, created_at)"
	" SELECT $1, u.h, u.o, u.c FROM unnest($2::uuid[], $3::int8[], $4::timestamptz[]) AS u(h, o, c)",
	4, {UUIDOID, UUIDARRAYOID, INT8ARRAYOID, TIMESTAMPTZARRAYOID}
};

/* what read_window counts: the hashes of the window past `floor` */
static QsPlan held_plan = {
	"SELECT coalesce(sum(end_offset - GREATEST(base_offset, $2 + 1) + 1), 0)::bigint"
	"  FROM queen.log_txns WHERE partition_id = $1 AND end_offset > $2 AND created_at >= $3",
	3, {UUIDOID, INT8OID, TIMESTAMPTZOID}
};

/* An uncached partition's window is counted at most this often (it decides re-caching). */
#define QS_DEDUP_COUNT_EVERY USECS_PER_SEC

/* Keys waiting for their INSERT. */
typedef struct KeyBatch
{
	Datum		pid;
	int			n;
	int			cap;
	uint8	   *hash;			/* cap hashes */
	Datum	   *h;
	Datum	   *off;
	Datum	   *at;
} KeyBatch;

static void
flush_keys(KeyBatch *b)
{
	Datum		args[4];

	if (b->n == 0)
		return;
	for (int i = 0; i < b->n; i++)
		b->h[i] = PointerGetDatum(b->hash + i * QS_HASH_LEN);	/* a uuid is its 16 bytes */
	args[0] = b->pid;
	args[1] = PointerGetDatum(construct_array(b->h, b->n, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR));
	args[2] = PointerGetDatum(construct_array(b->off, b->n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
											  TYPALIGN_DOUBLE));
	args[3] = PointerGetDatum(construct_array(b->at, b->n, TIMESTAMPTZOID, sizeof(int64), FLOAT8PASSBYVAL,
											  TYPALIGN_DOUBLE));
	qs_exec(&keys_insert_plan, args, NULL, 0);
	pfree(DatumGetPointer(args[1]));
	pfree(DatumGetPointer(args[2]));
	pfree(DatumGetPointer(args[3]));
	b->n = 0;
}

/* A keying pass: the probe, the keys waiting, what is left of the budget. */
typedef struct Keying
{
	WindowProbe *w;
	TimestampTz since;
	KeyBatch	b;
	int64		budget;
	int64		keyed;			/* every row up to this offset keyed */
} Keying;

static bool
key_row(int64 base, TimestampTz created, const uint8 *sh, int n, TransactionId xmin, void *arg)
{
	Keying	   *k = arg;
	KeyBatch   *b = &k->b;

	if (created >= k->since)
		probe_row(base, created, sh, n, xmin, k->w);
	for (int i = 0; i < n; i++)
	{
		memcpy(b->hash + b->n * QS_HASH_LEN, sh + i * QS_HASH_LEN, QS_HASH_LEN);
		b->off[b->n] = Int64GetDatum(base + i);
		b->at[b->n] = TimestampTzGetDatum(created);
		if (++b->n == b->cap)
			flush_keys(b);
	}
	k->keyed = base + n - 1;
	k->budget -= n;
	return k->budget > 0;
}

/*
 * Key the hash rows past `mark`, a budget's worth of whole rows, probing
 * those of the window; then read the rest of the window. Returns the new
 * mark.
 */
static int64
key_rows(const pg_uuid_t *pid, int64 mark, int64 last_offset, TimestampTz since, WindowProbe *w)
{
	Datum		args[2];
	Keying		k;
	bool		all;

	k.w = w;
	k.since = since;
	k.budget = qs_dedup_key_budget;
	k.keyed = mark;
	k.b.pid = qs_uuid_datum(pid);
	k.b.n = 0;
	k.b.cap = (int) Min(last_offset - mark, QS_DEDUP_KEY_BATCH);
	k.b.hash = palloc(k.b.cap * QS_HASH_LEN);
	k.b.h = palloc(sizeof(Datum) * k.b.cap);
	k.b.off = palloc(sizeof(Datum) * k.b.cap);
	k.b.at = palloc(sizeof(Datum) * k.b.cap);
	args[0] = k.b.pid;
	args[1] = Int64GetDatum(mark);
	all = each_row(&unkeyed_plan, args, key_row, &k);
	flush_keys(&k.b);
	pfree(k.b.hash);
	pfree(k.b.h);
	pfree(k.b.off);
	pfree(k.b.at);
	if (all)
		return last_offset;		/* every row past the mark keyed, up to the allocator's offset */
	/* the budget spent: the window past the keys is read */
	if (k.keyed < last_offset)
		each_window_row(pid, Max(k.keyed, w->floor), since, probe_row, w);
	return k.keyed;
}

static void
probe_keys(const pg_uuid_t *pid, int64 floor, bool whole, TimestampTz since, int64 last_offset,
		   int count, const uint8 *in, const bool *probe, QsAppendResult *res)
{
	WindowProbe w;
	Datum		args[4];
	Datum	   *keys = palloc(sizeof(Datum) * Max(count, 1));
	int		   *idx = palloc(sizeof(int) * Max(count, 1));
	int			n = 0;
	int64		mark = -1;

	res->ndups = 0;
	probe_init(&w, floor, count, in, probe);
	args[0] = qs_uuid_datum(pid);
	qs_exec(&mark_plan, args, NULL, 1);
	if (SPI_processed == 1)
		mark = qs_col_int64(0, 1, -1);
	SPI_freetuptable(SPI_tuptable);

	/* the keyed part: offsets up to the mark */
	for (int i = 0; i < count; i++)
	{
		if (probe && !probe[i])
			continue;
		CHECK_FOR_INTERRUPTS();
		keys[n] = PointerGetDatum(in + i * QS_HASH_LEN);	/* a uuid is its 16 bytes */
		idx[n++] = i;
	}
	if (mark > floor && n > 0)
	{
		Datum		kargs[5];

		kargs[0] = args[0];
		kargs[1] = PointerGetDatum(construct_array(keys, n, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR));
		kargs[2] = Int64GetDatum(floor);
		kargs[3] = TimestampTzGetDatum(since);
		kargs[4] = Int64GetDatum(mark);
		qs_exec(&keys_plan, kargs, NULL, 0);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			int64		k = qs_col_int64(r, 1, 0) - 1;

			CHECK_FOR_INTERRUPTS();
			if (k < 0 || k >= n)
				elog(ERROR, "dedup key probe returned row %lld of %d", (long long) k, n);
			w.first[idx[k]] = qs_col_int64(r, 2, -1);	/* null: not keyed */
		}
		SPI_freetuptable(SPI_tuptable);
	}
	pfree(keys);
	pfree(idx);

	/* the rest: rows past the mark, read (a later occurrence never replaces a keyed one) */
	if (mark < last_offset)
	{
		int64		to = key_rows(pid, mark, last_offset, since, &w);

		if (to != mark)
		{
			args[1] = Int64GetDatum(to);
			qs_exec(&mark_set_plan, args, NULL, 0);
		}
	}
	probe_finish(&w, count, res);

	if (shared != NULL)
	{
		PartEntry  *p;
		TimestampTz now = GetCurrentTimestamp();
		bool		count_it = false;

		pg_atomic_fetch_add_u64(&shared->key_probes, 1);
		if (!whole)
			return;
		/* only a count of the whole window may find it smaller */
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		p = hash_search(parts, pid, HASH_FIND, NULL);
		if (p != NULL && p->uncached && now - p->counted_at >= QS_DEDUP_COUNT_EVERY)
		{
			p->counted_at = now;
			count_it = true;
		}
		LWLockRelease(shared->lock);
		if (count_it)
		{
			args[1] = Int64GetDatum(floor);
			args[2] = TimestampTzGetDatum(since);
			qs_exec(&held_plan, args, NULL, 1);
			note_held(pid, qs_col_int64(0, 1, 0), true);
			SPI_freetuptable(SPI_tuptable);
		}
	}
}

/*
 * A partition the cache does not answer for: by key, unless this
 * transaction reads from one snapshot (REPEATABLE READ, SERIALIZABLE):
 * keys it wrote from that snapshot could miss rows another push committed
 * since, so it reads the window and writes nothing.
 */
static void
probe_uncached(const pg_uuid_t *pid, int64 floor, bool whole, TimestampTz since, int64 last_offset,
			   int count, const uint8 *in, const bool *probe, QsAppendResult *res)
{
	if (IsolationUsesXactSnapshot())
		read_window(pid, floor, whole, since, count, in, probe, res);
	else
		probe_keys(pid, floor, whole, since, last_offset, count, in, probe, res);
}

/*
 * Drop every cached hash and partition when the node's timeline moved on
 * (a promotion) since they were cached. Lock held.
 */
static void
check_timeline(void)
{
	TimeLineID	tli = GetWALInsertionTimeLine();
	HASH_SEQ_STATUS seq;
	PartEntry  *p;

	if (shared->tli == tli)
		return;
	if (shared->nentries > 0)
		memset(index_slots, 0, mul_size(nslots, sizeof(IndexSlot)));
	shared->nentries = 0;
	shared->unused = 0;
	shared->free = -1;
	hash_seq_init(&seq, parts);
	while ((p = hash_seq_search(&seq)) != NULL)
		hash_search(parts, &p->pid, HASH_REMOVE, NULL);
	shared->tli = tli;
}

/*
 * Find or add the partition, settled; NULL when the cache cannot hold it
 * (no cache, no room, or its window outgrew the cache). Lock held.
 */
static PartEntry *
get_partition(const pg_uuid_t *pid, int window, int64 last_offset, TimestampTz since,
			  TimestampTz now)
{
	PartEntry  *p;
	bool		found;

	p = hash_search(parts, pid, HASH_ENTER_NULL, &found);
	if (p == NULL)
	{
		/* every place taken: seek room (a pass over the cache) at most once a second */
		if (now - shared->no_place_at < USECS_PER_SEC)
			return NULL;
		make_room(now, NULL, true);
		p = hash_search(parts, pid, HASH_ENTER_NULL, &found);
		if (p == NULL)
		{
			shared->no_place_at = now;
			return NULL;
		}
	}
	p->probed_at = now;
	if (!found)
	{
		p->entries = 0;
		p->gen = ++shared->gen;
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
		if (p->held >= max_entries / 2 - shared->nentries ||
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
		drop_partition(p);
		p->covered_since = since;
	}
	return p;
}

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
	PartEntry  *p = hash_search(parts, c->pid, HASH_FIND, NULL);

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

	prefetch_tags(c->pid, sh, n, tags);
	if (TransactionIdIsValid(tag))
		own_reserve(n);
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	p = caught_up(c);
	ok = p != NULL;
	if (ok && TransactionIdIsValid(tag))
	{
		ok = add_pending(p, tag);
		if (ok)
			own_tag(p, tag);
	}
	for (int k = 0; ok && k < n; k++)
		ok = remember(p, sh + k * QS_HASH_LEN, tags[k], base + k, created, c->since, tag, c->now);
	if (!ok && p != NULL && p->gen == c->gen && !p->uncached)
	{
		int64		held = p->entries;

		drop_partition(p);
		uncache(p, held);
	}
	LWLockRelease(shared->lock);
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
			read_window(pid, floor, whole, since, count, in, probe, res);
		return;
	}
	if (shared == NULL)
	{
		if (any)
			probe_uncached(pid, floor, whole, since, last_offset, count, in, probe, res);
		return;
	}

	reserve_victims();
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	check_timeline();
	p = get_partition(pid, window, last_offset, since, now);
	if (p == NULL || !any)
	{
		LWLockRelease(shared->lock);
		if (p == NULL && any)
			probe_uncached(pid, floor, whole, since, last_offset, count, in, probe, res);
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
		LWLockRelease(shared->lock);
		each_window_row(pid, from, since, catch_up_row, &c);
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		p = caught_up(&c);
		if (p == NULL)
		{
			/* it outgrew the cache meanwhile */
			LWLockRelease(shared->lock);
			probe_uncached(pid, floor, whole, since, last_offset, count, in, probe, res);
			return;
		}
		p->verified = last_offset;
		/* the rows read were this window's: older ones may be missing now */
		if (p->covered_since < since)
			p->covered_since = since;
	}

	/* every home line in flight at once, before any is read */
	tags = palloc(sizeof(uint32) * Max(count, 1));
	prefetch_tags(pid, in, count, tags);
	for (int i = 0; i < count; i++)
	{
		HashKey		key;
		HashEntry  *e;

		if (probe && !probe[i])
			continue;
		memset(&key, 0, sizeof(key));
		key.pid = *pid;
		memcpy(key.hash, in + i * QS_HASH_LEN, QS_HASH_LEN);
		e = lookup(&key, tags[i]);
		if (e == NULL)
			continue;
		if (!entry_valid(p, e) || e->created_at < since || e->offset <= floor)
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
		add_dup(res, count, i, e->offset);
	}
	LWLockRelease(shared->lock);
	pfree(tags);
	if (recheck)
	{
		read_window(pid, floor, whole, since, count, in, probe, res);
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

	if (shared == NULL || RecoveryInProgress())
		return;
	reserve_victims();
	xid = dedup_on ? GetCurrentTransactionId() : InvalidTransactionId;
	if (dedup_on)
	{
		/* outside the lock: the tags and their index lines */
		tags = palloc(sizeof(uint32) * Max(count, 1));
		prefetch_tags(pid, in, count, tags);
		own_reserve(count);
	}
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	check_timeline();
	p = hash_search(parts, pid, HASH_FIND, NULL);
	if (p != NULL && !p->uncached && p->verified > base - 1)
		p->verified = base - 1;
	if (p != NULL && !p->uncached && dedup_on && p->verified == base - 1 && add_pending(p, xid))
	{
		own_tag(p, xid);
		since = created_at - (TimestampTz) p->window * USECS_PER_SEC;
		for (int i = 0; ok && i < count; i++)
			ok = remember(p, in + i * QS_HASH_LEN, tags[i], base + i, created_at, since, xid,
						  created_at);
		if (ok)
			p->verified = base + count - 1;
		else if (!p->uncached)
		{
			int64		held = p->entries;

			drop_partition(p);
			uncache(p, held);
		}
	}
	LWLockRelease(shared->lock);
	if (tags)
		pfree(tags);
}

/*
 * The cache's occupancy and counters, for /metrics; false when there is
 * no cache (the library was not preloaded).
 */
bool
qs_dedup_stats(QsDedupStats *st)
{
	HASH_SEQ_STATUS seq;
	PartEntry  *p;

	memset(st, 0, sizeof(*st));
	if (shared == NULL)
		return false;
	LWLockAcquire(shared->lock, LW_SHARED);
	st->capacity = max_entries;
	st->entries = shared->nentries;
	hash_seq_init(&seq, parts);
	while ((p = hash_seq_search(&seq)) != NULL)
	{
		if (p->uncached)
			st->uncached++;
		else
			st->partitions++;
	}
	LWLockRelease(shared->lock);
	st->window_reads = pg_atomic_read_u64(&shared->window_reads);
	st->key_probes = pg_atomic_read_u64(&shared->key_probes);
	st->evictions = pg_atomic_read_u64(&shared->evictions);
	for (int r = 0; r < QS_DEDUP_SCAN_REASONS; r++)
		st->scans[r] = pg_atomic_read_u64(&shared->scans[r]);
	return true;
}
