/*
 * dedup_int.h: what the files of the dedup cache share among themselves:
 * the layout of the cache in shared memory, and each file's entry points
 * for the others. dedup.c (the probe and the record) says why the cache is
 * built as it is; dedup_index.c holds the index and its shared memory,
 * dedup_own.c this backend's own transaction ids, dedup_policy.c what is
 * cached and pruned, dedup_fallback.c the probes answered from the table.
 */
#ifndef QS_DEDUP_INT_H
#define QS_DEDUP_INT_H

#include "storage/storage.h"

#include "access/transam.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "utils/hsearch.h"
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

static inline bool
xid_in(const TransactionId *list, int n, TransactionId xid)
{
	for (int i = 0; i < n; i++)
		if (TransactionIdEquals(list[i], xid))
			return true;
	return false;
}

/* dedup_index.c: the cache in shared memory (NULL: not preloaded) */
extern DedupShared *dedup_shared;
extern HashEntry *dedup_entries;	/* dedup_max_entries of them, cache-line aligned */
extern HTAB *dedup_parts;
extern int64 dedup_max_entries;
extern int64 dedup_max_parts;

extern void dedup_prefetch_tags(const pg_uuid_t *pid, const uint8 *in, int n, uint32 *tags);
extern uint64 dedup_find_slot(const HashKey *key, uint32 tag, bool *found);
extern HashEntry *dedup_slot_entry(uint64 i);
extern HashEntry *dedup_lookup(const HashKey *key, uint32 tag);
extern HashEntry *dedup_insert_at(uint64 i, const HashKey *key, uint32 tag);
extern void dedup_remove_where(bool (*drop) (HashEntry *e, void *arg), void *arg,
							   QsDedupScan reason);
extern void dedup_check_timeline(void);

/* dedup_own.c: this backend's own (sub)transaction ids */
extern void dedup_own_init(void);
extern void dedup_own_reserve(int64 n);
extern void dedup_own_tag(PartEntry *p, TransactionId xid);
extern void dedup_own_entry(HashEntry *e);

/* dedup_policy.c: what is cached, settled, pruned */
extern void dedup_reserve_victims(void);
extern bool dedup_entry_valid(PartEntry *p, HashEntry *e);
extern void dedup_drop_partition(PartEntry *p);
extern void dedup_uncache(PartEntry *p, int64 held);
extern bool dedup_add_pending(PartEntry *p, TransactionId x);
extern bool dedup_remember(PartEntry *p, const uint8 *h, uint32 tag, int64 offset,
						   TimestampTz created_at, TimestampTz since, TransactionId xid,
						   TimestampTz now);
extern PartEntry *dedup_get_partition(const pg_uuid_t *pid, int window, int64 last_offset,
									  TimestampTz since, TimestampTz now);

/* dedup_fallback.c: the probes answered from the table */
typedef bool (*WindowRow) (int64 base, TimestampTz created, const uint8 *hashes, int n,
						   TransactionId xmin, void *arg);

extern void dedup_add_dup(QsAppendResult *res, int count, int i, int64 offset);
extern bool dedup_each_window_row(const pg_uuid_t *pid, int64 floor, TimestampTz since,
								  WindowRow row, void *arg);
extern void dedup_read_window(const pg_uuid_t *pid, int64 floor, bool whole, TimestampTz since,
							  int count, const uint8 *in, const bool *probe, QsAppendResult *res);
extern void dedup_probe_uncached(const pg_uuid_t *pid, int64 floor, bool whole, TimestampTz since,
								 int64 last_offset, int count, const uint8 *in, const bool *probe,
								 QsAppendResult *res);

#endif							/* QS_DEDUP_INT_H */
