/*
 * storage.h: the log engine's public face: the segment codec, the offset
 * allocator and the push core shared by queen.push and the streams cycle.
 */
#ifndef QS_STORAGE_H
#define QS_STORAGE_H

#include "common/base.h"
#include "common/json.h"
#include "storage/codec.h"

#include "storage/itemptr.h"
#include "utils/relcache.h"

/* guc.c: the storage engine's settings */
extern int	qs_zstd_level;
extern int	qs_max_segment_kb;
extern int	qs_dedup_cache_entries;
extern int	qs_dedup_partition_entries;
extern int	qs_dedup_key_budget;
extern int	qs_max_pop_batch;
extern int	qs_max_pop_partitions;
extern int	qs_pop_ready_recheck_s;
extern int	qs_pop_ready_min_partitions;
extern bool qs_encryption_fail_open;
extern bool qs_encryption_unbound_read;
extern bool qs_ack_requires_lease;
extern void qs_storage_guc_init(void);

/* encryption.c: AES-256-GCM payload envelopes */
/* what an envelope is bound to: its frame's partition and transaction id */
typedef struct QsSeal
{
	const pg_uuid_t *pid;
	const char *txn;
	int			txn_len;
} QsSeal;

extern bool qs_encrypt_payload(const char *queue, const QsSeal *seal, const char *plain, int len,
							   char **env, int *envlen);
extern bool qs_decrypt_payload(const QsSeal *seal, const char *payload, int len,
							   char **plain, int *plainlen);

/* allocator.c: resolve partitions and append one segment (log_push_one_v1) */
typedef struct QsPartition
{
	pg_uuid_t	pid;
	int			window;			/* dedup window, seconds */
	bool		encrypt;
} QsPartition;

extern bool qs_partition_resolve(const pg_uuid_t *tenant, const char *queue,
								 const char *partition, bool create, QsPartition *out);
/* the same for n distinct pairs, creating what is missing */
extern void qs_partitions_resolve(const pg_uuid_t *tenant, const char *const *queues,
								  const char *const *partitions, int n, QsPartition *out);
/* resolve.c: those of n pairs that exist, without a statement (false: use one) */
extern bool qs_resolve_direct(const pg_uuid_t *tenant, const char *const *queues,
							  const char *const *partitions, int n, QsPartition *out,
							  bool *found);
/* the id of the tenant's queue, else 42704 (qs_queue_not_found); inside SPI */
extern void qs_queue_not_found(const char *queue) pg_attribute_noreturn();
extern Datum qs_queue_id(const pg_uuid_t *tenant, const char *queue);
/* the queue of a partition the tenant owns, or NULL; inside SPI */
extern char *qs_partition_owned(const pg_uuid_t *tenant, const pg_uuid_t *pid, bool lock);

typedef struct QsAppendResult
{
	bool		duplicate;
	int64		base_offset;
	TimestampTz created_at;
	int			ndups;
	int		   *dup_idx;		/* incoming frame index */
	int64	   *dup_off;		/* offset of the original */
} QsAppendResult;

extern void qs_append_segment(const pg_uuid_t *pid, int window, int count,
							  const uint8 *hashes, bytea *blob, int64 verified,
							  const bool *probe, QsAppendResult *res);
/* the same, packing the segment only once the probe found no duplicate */
typedef bytea *(*QsBlobBuilder) (void *arg);
extern void qs_append_segment_lazy(const pg_uuid_t *pid, int window, int count,
								   const uint8 *hashes, QsBlobBuilder build, void *arg,
								   int64 verified, const bool *probe, QsAppendResult *res);
/*
 * Appends to several partitions at once: qs_appends_lock locks
 * their rows in pid order (`a` sorted by pid) and reads their allocators;
 * qs_appends_run appends each entry's segment (blob set) and records its
 * hashes in the dedup cache.
 */
typedef struct QsAppendMany
{
	pg_uuid_t	pid;
	int			window;
	/* set by qs_appends_lock */
	bool		locked;
	ItemPointerData ctid;		/* the locked row version */
	int64		last_offset;
	int64		txns_start;
	/* the segment, or blob NULL for none */
	int			count;
	bytea	   *blob;
	const uint8 *hashes;
	/* set by qs_appends_run */
	int64		base_offset;
	TimestampTz created_at;
} QsAppendMany;

/* row_lock.c */
extern void qs_appends_lock(QsAppendMany *a, int n);
/* allocator.c, segment_write.c */
extern void qs_appends_run(QsAppendMany *a, int n);
extern void qs_segments_write(QsAppendMany *a, int n);
extern Oid qs_rel_oid(const char *name);
extern AttrNumber qs_rel_column(Relation rel, const char *name);
/* "dups": [{"i": frame index, "off": the original's offset}, ...] */
extern void qs_write_dups(QsJson *j, int ndups, const int *dup_idx, const int64 *dup_off);
extern bool qs_frame_at(const pg_uuid_t *pid, int64 offset, QsFrame *frame);
extern void qs_frame_ids_at(const pg_uuid_t *pid, const int64 *offsets, int n,
							pg_uuid_t *ids, bool *found);
extern bool qs_segment_at(Datum pid, int64 offset, int64 *base, int64 *end, TimestampTz *created);
extern bool qs_segment_covering(Datum pid, int64 offset, int64 *base, int64 *end);

/* dedup.c: the dedup probe over a shared cache of stored hashes (dedup_*.c) */
extern void qs_dedup_probe(const pg_uuid_t *pid, int window, int64 last_offset,
						   int64 txns_start, int64 verified, int count,
						   const uint8 *hashes, const bool *probe, TimestampTz now,
						   QsAppendResult *res);
extern void qs_dedup_record(const pg_uuid_t *pid, int64 base, int count,
							const uint8 *hashes, TimestampTz created_at, bool dedup_on);
/* dedup_index.c: the cache's shared memory, its occupancy and counters */
extern void qs_dedup_shmem_init(void);

/* why the dedup cache was passed over whole, under its lock */
typedef enum QsDedupScan
{
	QS_SCAN_ROOM,				/* making room: pruning, stopping to cache */
	QS_SCAN_DROP,				/* dropping one partition's hashes */
	QS_SCAN_PURGE,				/* purging a partition's aborted hashes */
	QS_DEDUP_SCAN_REASONS
} QsDedupScan;

typedef struct QsDedupStats
{
	int64		capacity;		/* hashes it can hold */
	int64		entries;		/* hashes held */
	int64		partitions;		/* partitions cached */
	int64		uncached;		/* partitions whose window outgrew it, read instead */
	uint64		window_reads;	/* probes answered by reading the window */
	uint64		key_probes;		/* probes answered from queen.log_txn_keys */
	uint64		evictions;		/* times a partition stopped being cached */
	uint64		scans[QS_DEDUP_SCAN_REASONS];	/* passes over the whole cache */
} QsDedupStats;
extern bool qs_dedup_stats(QsDedupStats *st);

/*
 * ack.c: the one parser of an ack status, used by queen.ack, the cycle's
 * source ack and the listener's counters. Absent, or exactly completed,
 * success, acked or ok: completed; retry; dlq; anything else (empty, other
 * case): failed. The order is the tie-break of signals at one offset.
 */
typedef enum QsAckStatus
{
	QS_ACK_COMPLETED,
	QS_ACK_RETRY,
	QS_ACK_FAILED,
	QS_ACK_DLQ
} QsAckStatus;

extern QsAckStatus qs_ack_status(const char *s, int len);

/* push.c: pack items into one segment per (queue, partition) and append */
typedef enum QsPushStatus
{
	QS_PUSH_PENDING,
	QS_PUSH_QUEUED,
	QS_PUSH_DUPLICATE
} QsPushStatus;

typedef struct QsPushItem
{
	const char *queue;
	const char *partition;
	pg_uuid_t	id;
	bool		id_given;		/* the client chose the message id (a cycle's sink item) */
	const char *txn;
	int			txn_len;
	bool		txn_given;		/* client-chosen ids are the only ones that can repeat */
	const char *payload;
	int			payload_len;
	bool		has_trace;
	pg_uuid_t	trace;
	const char *psub;
	int			psub_len;
	uint8		flags;			/* QS_FLAG_ENCRYPTED once enveloped */
	uint8		hash[QS_HASH_LEN];	/* of txn, set when grouped */
	/* results */
	QsPushStatus status;
	pg_uuid_t	result_id;		/* for a duplicate: the original's id */
	pg_uuid_t	pid;			/* its partition (the groups live in SPI memory) */
	int			group;
	int			leader;			/* intra-request duplicate: index of the first, else -1 */
	int			req;			/* its request, in a merged push (qs_push_begin_many) */
	int			cross;			/* the same id in an earlier request of a merged push, else -1 */
	int			frame_off;		/* its frame in the group's buffer */
	int			frame_len;		/* -1: not written (a follower, or over a limit) */
	int64		offset;			/* queued: its own; duplicate: the original's, or -1 */
} QsPushItem;

/*
 * Whether an item is one of its group's items (QsPushGroup.items): all but
 * the repeats of an id earlier in their own request, which collapse.
 */
static inline bool
qs_push_item_grouped(const QsPushItem *it)
{
	return it->leader < 0 || it->cross >= 0;
}

typedef struct QsPushGroup
{
	const char *queue;
	const char *partition;
	QsPartition part;
	int		   *items;
	int			nitems;
	int			cap;
	StringInfoData raw;			/* the frames of its items, as they were added */
	int			bad;			/* first item whose frame breaks a limit, or -1 */
	/* results */
	bool		stored;			/* a segment of its fresh items was appended */
	bool		duplicate;		/* nothing stored: every item was a duplicate */
	int64		base_offset;	/* of the stored segment */
	TimestampTz created_at;
	int			nqueued;
	int			ndups;
	int		   *dup_idx;		/* position among the group's items */
	int64	   *dup_off;		/* offset of the original */
} QsPushGroup;

extern void qs_push_set_txn(QsPushItem *it, char *txn);
extern QsPushGroup *qs_push_items(const pg_uuid_t *tenant, QsPushItem *items, int nitems,
								  bool repack, int *ngroups);
/*
 * push_text.c: the one reader's item rules, for the entries that read their
 * items from jsonb (queen.transaction, a cycle's sink items). An entry
 * differs from push only where Queen's wire says so (doc/behaviour.md).
 */
typedef struct QsPushRules
{
	const char *payload_default;	/* NULL: push's payload rule; else Queen's, and this
									 * JSON when neither payload nor data is there */
	bool		trace;			/* traceId read (a sink's frames carry none) */
	bool		empty_partition;	/* "" partition is Default (a sink item) */
} QsPushRules;
extern const QsPushRules qs_push_rules_transaction;
extern const QsPushRules qs_push_rules_sink;
extern void qs_push_read_item(JsonbContainer *o, const char *what, const QsPushRules *rules,
							  const char *psub, QsPushItem *it);
/* push_text.c: whether a push's error is about its request's text (bad JSON) */
extern bool qs_push_error_in_text(const ErrorData *edata);
/* the same, one item at a time (queen.push_text adds each as it is parsed) */
typedef struct QsPushBatch QsPushBatch;
extern QsPushBatch *qs_push_begin(bool repack);
extern QsPushBatch *qs_push_begin_many(void);
extern void qs_push_add(QsPushBatch *b, QsPushItem *items, int i);
extern QsPushGroup *qs_push_finish(QsPushBatch *b, const pg_uuid_t *tenant, QsPushItem *items,
								   int nitems, int *ngroups);

/* fence.c: corrupt segments fence their partition only */
extern void qs_storage_init(void);
extern uint64 qs_corrupt_skips(void);
extern void qs_segment_fenced(const pg_uuid_t *tenant, const char *queue, const pg_uuid_t *pid,
							  int64 base, const char *why);

/* retention.c: the sweep, one partition at a time */
typedef struct QsSweepItem
{
	pg_uuid_t	pid;
	int			secs;			/* > 0: delete segments older than this */
	bool		purge;			/* some hash row may be purgeable */
} QsSweepItem;

typedef struct QsSweepResult
{
	int64		segments;
	int64		partitions;
	int64		txns;
} QsSweepResult;

extern QsSweepItem *qs_retention_plan(MemoryContext into, int *n);
extern void qs_retention_sweep_one(const QsSweepItem *item, QsSweepResult *res);

/*
 * queue_stats.c: per queue and consumer group, from offsets and cursors
 * (queen.queue_stats(), GET /metrics); inside SPI, the largest backlog first.
 */
typedef struct QsQueueStatsRow
{
	pg_uuid_t	tenant;
	char	   *queue;
	char	   *group;
	int64		partitions,
				backlog_partitions,
				leased_partitions,
				backlog,
				dead_letters,
				messages;
	bool		has_oldest;		/* oldest: created_at of the oldest unacked message */
	TimestampTz oldest;
	double		lag_seconds;	/* 0 without a backlog */
} QsQueueStatsRow;

extern int	qs_queue_stats_load(QsQueueStatsRow **rows);

/* maintenance.c */
extern bool qs_maintenance_on(bool pop);

#endif							/* QS_STORAGE_H */
