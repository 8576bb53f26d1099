/*
 * dedup_index.c: the dedup cache's shared memory: its reservation at
 * preload, the index of hashes (tags, linear probing, deletion by backward
 * shift) and its entries, the drop of everything cached on an earlier
 * timeline, and the occupancy and counters for /metrics. What is cached
 * and when is dedup_policy.c's; why the design is what it is, dedup.c's.
 */
#include "storage/dedup_int.h"
#include "common/workers.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"

DedupShared *dedup_shared = NULL;
static IndexSlot *index_slots = NULL;	/* cache-line aligned */
static uint64 nslots = 0;		/* 1.5 x dedup_max_entries: runs stay short */
HashEntry *dedup_entries = NULL;	/* dedup_max_entries of them, cache-line aligned */
static uint64 tag_seed = 0;		/* dedup_shared->seed */
HTAB *dedup_parts = NULL;
int64 dedup_max_entries = 0;
int64 dedup_max_parts = 0;

static Size
dedup_shmem_size(void)
{
	return add_size(add_size(MAXALIGN(sizeof(DedupShared)),
							 add_size(mul_size(nslots, sizeof(IndexSlot)), PG_CACHE_LINE_SIZE)),
					add_size(add_size(mul_size(dedup_max_entries, sizeof(HashEntry)), PG_CACHE_LINE_SIZE),
							 hash_estimate_size(dedup_max_parts, sizeof(PartEntry))));
}

static void
dedup_shmem_request(void)
{
	RequestAddinShmemSpace(dedup_shmem_size());
	RequestNamedLWLockTranche("queen_streams dedup", 1);
}

static void
dedup_shmem_startup(void)
{
	bool		found;
	HASHCTL		ctl;

	dedup_shared = ShmemInitStruct("queen_streams dedup", sizeof(DedupShared), &found);
	if (!found)
	{
		dedup_shared->lock = &(GetNamedLWLockTranche("queen_streams dedup"))->lock;
		dedup_shared->max_entries = dedup_max_entries;
		dedup_shared->nentries = 0;
		dedup_shared->unused = 0;
		dedup_shared->free = -1;
		dedup_shared->tli = 0;
		dedup_shared->gen = 0;
		dedup_shared->no_place_at = 0;	/* not DT_NOBEGIN: `now - no_place_at` must not wrap */
		pg_atomic_init_u64(&dedup_shared->window_reads, 0);
		pg_atomic_init_u64(&dedup_shared->key_probes, 0);
		pg_atomic_init_u64(&dedup_shared->evictions, 0);
		for (int r = 0; r < QS_DEDUP_SCAN_REASONS; r++)
			pg_atomic_init_u64(&dedup_shared->scans[r], 0);
		if (!pg_strong_random(&dedup_shared->seed, sizeof(dedup_shared->seed)))
			ereport(FATAL,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate a random seed for the dedup cache")));
	}
	tag_seed = dedup_shared->seed;
	index_slots = qs_shmem_struct("queen_streams dedup index",
								  mul_size(nslots, sizeof(IndexSlot)) + PG_CACHE_LINE_SIZE, &found);
	index_slots = (IndexSlot *) CACHELINEALIGN(index_slots);
	/*
	 * Entries are written before they are read, but touched now: the first
	 * fill would otherwise pay for every page it allocates, under the lock.
	 */
	dedup_entries = qs_shmem_struct("queen_streams dedup hashes",
									mul_size(dedup_max_entries, sizeof(HashEntry)) + PG_CACHE_LINE_SIZE,
									&found);
	dedup_entries = (HashEntry *) CACHELINEALIGN(dedup_entries);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(pg_uuid_t);
	ctl.entrysize = sizeof(PartEntry);
	dedup_parts = ShmemInitHash("queen_streams dedup partitions", dedup_max_parts, dedup_max_parts, &ctl,
						  HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
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
	dedup_max_entries = Max(qs_dedup_cache_entries, 1024);
	dedup_max_parts = Max(256, dedup_max_entries / 16);
	nslots = dedup_max_entries + dedup_max_entries / 2;
	qs_shmem_add(dedup_shmem_request, dedup_shmem_startup);
	dedup_own_init();
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
void
dedup_prefetch_tags(const pg_uuid_t *pid, const uint8 *in, int n, uint32 *tags)
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
uint64
dedup_find_slot(const HashKey *key, uint32 tag, bool *found)
{
	for (uint64 i = home_of(tag);; i = next_slot(i))
	{
		IndexSlot  *s = &index_slots[i];

		if (s->entry == 0)
		{
			*found = false;
			return i;
		}
		if (s->tag == tag && memcmp(&dedup_entries[s->entry - 1].key, key, sizeof(HashKey)) == 0)
		{
			*found = true;
			return i;
		}
	}
}

/* The entry of a taken index slot. */
HashEntry *
dedup_slot_entry(uint64 i)
{
	return &dedup_entries[index_slots[i].entry - 1];
}

HashEntry *
dedup_lookup(const HashKey *key, uint32 tag)
{
	bool		found;
	uint64		i = dedup_find_slot(key, tag, &found);

	return found ? dedup_slot_entry(i) : NULL;
}

/* Put a new key at empty index slot i (lock held; an entry is free). */
HashEntry *
dedup_insert_at(uint64 i, const HashKey *key, uint32 tag)
{
	int64		k;

	if (dedup_shared->free >= 0)
	{
		k = dedup_shared->free;
		dedup_shared->free = dedup_entries[k].offset;
	}
	else
		k = dedup_shared->unused++;
	index_slots[i].tag = tag;
	index_slots[i].entry = (uint32) (k + 1);
	dedup_shared->nentries++;
	dedup_entries[k].key = *key;
	return &dedup_entries[k];
}

/* Remove index slot i and free its entry (lock held): later slots of its run shift back. */
static void
remove_slot(uint64 i)
{
	int64		k = index_slots[i].entry - 1;
	uint64		j = i;

	dedup_entries[k].offset = dedup_shared->free;
	dedup_shared->free = k;
	dedup_shared->nentries--;
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
void
dedup_remove_where(bool (*drop) (HashEntry *e, void *arg), void *arg, QsDedupScan reason)
{
	pg_atomic_fetch_add_u64(&dedup_shared->scans[reason], 1);
	for (uint64 i = 0; i < nslots; i++)
		while (index_slots[i].entry != 0 && drop(dedup_slot_entry(i), arg))
			remove_slot(i);
}

/*
 * Drop every cached hash and partition when the node's timeline moved on
 * (a promotion) since they were cached. Lock held.
 */
void
dedup_check_timeline(void)
{
	TimeLineID	tli = GetWALInsertionTimeLine();
	HASH_SEQ_STATUS seq;
	PartEntry  *p;

	if (dedup_shared->tli == tli)
		return;
	if (dedup_shared->nentries > 0)
		memset(index_slots, 0, mul_size(nslots, sizeof(IndexSlot)));
	dedup_shared->nentries = 0;
	dedup_shared->unused = 0;
	dedup_shared->free = -1;
	hash_seq_init(&seq, dedup_parts);
	while ((p = hash_seq_search(&seq)) != NULL)
		hash_search(dedup_parts, &p->pid, HASH_REMOVE, NULL);
	dedup_shared->tli = tli;
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
	if (dedup_shared == NULL)
		return false;
	LWLockAcquire(dedup_shared->lock, LW_SHARED);
	st->capacity = dedup_max_entries;
	st->entries = dedup_shared->nentries;
	hash_seq_init(&seq, dedup_parts);
	while ((p = hash_seq_search(&seq)) != NULL)
	{
		if (p->uncached)
			st->uncached++;
		else
			st->partitions++;
	}
	LWLockRelease(dedup_shared->lock);
	st->window_reads = pg_atomic_read_u64(&dedup_shared->window_reads);
	st->key_probes = pg_atomic_read_u64(&dedup_shared->key_probes);
	st->evictions = pg_atomic_read_u64(&dedup_shared->evictions);
	for (int r = 0; r < QS_DEDUP_SCAN_REASONS; r++)
		st->scans[r] = pg_atomic_read_u64(&dedup_shared->scans[r]);
	return true;
}
