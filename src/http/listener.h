/*
 * listener.h: what every part of the HTTP listener shares: its settings
 * (settings.c), route ids, and its shared memory (shmem.c): the wake board,
 * the workers' slots and the per-queue counters. Nothing here calls either
 * half of the floor (transport/, dispatch/: CONTRIBUTING.md, The layers).
 */
#ifndef QS_HTTP_LISTENER_H
#define QS_HTTP_LISTENER_H

#include "common/base.h"
#include "common/jwt.h"

#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/spin.h"

/* ---------------------------------------------------------------- settings */
extern int	qs_http_port;
extern char *qs_http_listen_address;
extern int	qs_http_workers;
extern int	qs_http_max_body_bytes;
extern int	qs_http_max_header_bytes;
extern int	qs_http_header_timeout_ms;
extern int	qs_http_body_timeout_ms;
extern int	qs_http_idle_timeout_ms;
extern int	qs_http_max_connections;
extern int	qs_http_statement_timeout_ms;
extern int	qs_http_tenancy;
extern bool qs_http_jwt_trust_tenant_header;
extern int	qs_http_retention_interval_s;
extern int	qs_http_pop_recheck_ms;
extern int	qs_http_pop_max_wait_ms;
extern int	qs_http_sample_interval_s;
extern int	qs_http_group_max_requests;
extern int	qs_http_group_max_wait_ms;
extern int	qs_http_group_await_ms;
extern int	qs_http_metrics_queues;
extern int	qs_http_metrics_queue_idle_s;
extern int	qs_http_metrics_gauges_interval_s;

#define QS_TENANCY_OFF		0
#define QS_TENANCY_HEADER	1

/* ---------------------------------------------------------------- routes */
/* A route is its row in the route table (dispatch/routes.c); row 0 is "none". */
typedef int QsRouteId;

#define QS_R_NONE		0		/* 404, 405, refused before routing */
#define QS_MAX_ROUTES	96		/* rows of the table, for the shared counters */

/* Status codes counted per route in /metrics: each of 100..599 on its own. */
#define QS_CODE_MIN 100
#define QS_CODE_COUNT 500

/* ---------------------------------------------------------------- shared memory */
#define QS_WAKE_SLOTS		4096
#define QS_MAX_WORKERS		64
#define QS_STAT_NAME		256

typedef enum QsStat
{
	QS_STAT_PUSHED,
	QS_STAT_POPPED,
	QS_STAT_ACKED,
	QS_STAT_NACKED,
	QS_STAT_CYCLES,
	QS_STAT_CYCLES_FAILED,
	QS_STAT_COUNT
} QsStat;

extern const char *const qs_stat_names[QS_STAT_COUNT];

/*
 * The dashboard's charts (samples.c): every sample_interval the first worker
 * copies the pushed, popped and acked counters of every queue into a ring of
 * QS_SAMPLES slots; sample n is in slot n % QS_SAMPLES, and sample_seq is
 * the newest complete one (0: none yet).
 */
#define QS_SAMPLES			61	/* 60 intervals: an hour at the default 60 s */
#define QS_SAMPLED			3	/* QS_STAT_PUSHED, QS_STAT_POPPED, QS_STAT_ACKED */

typedef struct QsQueueStat
{
	/*
	 * 0: free. Else the slot's version, new each time it is taken: key
	 * fields are written before it is set, and a reader that sees it
	 * unchanged after reading them read one queue's.
	 */
	pg_atomic_uint32 ready;
	pg_atomic_uint32 used_at;	/* last count, seconds since the epoch (idle reuse) */
	uint64		key;
	pg_uuid_t	tenant;
	char		name[QS_STAT_NAME];
	pg_atomic_uint64 c[QS_STAT_COUNT];
	pg_atomic_uint32 parked;	/* long-poll pops parked on the queue now (a gauge) */
	/* the counters of QS_SAMPLED stats at each of the last QS_SAMPLES samples */
	uint64		sample[QS_SAMPLES][QS_SAMPLED];
} QsQueueStat;

typedef struct QsWorkerSlot
{
	int			pid;			/* 0 when not running */
	bool		listening;
	Latch	   *latch;
	TimestampTz started_at;
	pg_atomic_uint32 connections;
	pg_atomic_uint32 incoming;	/* handed over by other workers, not yet taken */
	bool		handoff;		/* can receive handed-over connections */
	pg_atomic_uint32 parked;
	pg_atomic_uint64 requests;
} QsWorkerSlot;

typedef struct QsHttpShared
{
	slock_t		mutex;			/* takes and frees stats[] */
	uint32		stat_version;	/* the last version given to a slot (under mutex) */
	int			nstats;			/* slots of stats[], queen_streams.metrics_queues */
	pg_atomic_uint64 wakes;		/* commits that moved a generation */
	/* group commit (group.c): commits, the requests they carried, deferrals */
	pg_atomic_uint64 group_commits;
	pg_atomic_uint64 group_requests;
	pg_atomic_uint64 group_deferrals;
	pg_atomic_uint64 group_merged;	/* requests served by one call for several */
	QsWorkerSlot workers[QS_MAX_WORKERS];
	pg_atomic_uint64 requests[QS_MAX_ROUTES][QS_CODE_COUNT];
	/* the wake board: per queue hash slot, a generation and who waits on it */
	pg_atomic_uint64 gen[QS_WAKE_SLOTS];
	pg_atomic_uint64 waiters[QS_WAKE_SLOTS];
	/* samples.c: when each slot of the counters' ring was taken */
	pg_atomic_uint64 sample_seq;
	TimestampTz sample_at[QS_SAMPLES];
	/* gauges_snapshot.c: the newest snapshot of the gauges (a pinned DSM segment) */
	slock_t		gauges_lock;
	uint32		gauges_handle;	/* dsm_handle; 0: none yet */
	TimestampTz gauges_at;		/* the snapshot's time (under gauges_lock) */
	pg_atomic_uint64 gauges_wanted_at;	/* the last scrape that read it (TimestampTz) */
	/* stats[0] collects queues that found the table full; sized at start */
	QsQueueStat stats[FLEXIBLE_ARRAY_MEMBER];
} QsHttpShared;

extern QsHttpShared *qs_http_shared;

extern void qs_http_shmem_init(void);
extern uint64 qs_queue_key(const pg_uuid_t *tenant, const char *queue);
extern uint32 qs_wake_slot(uint64 key);
extern QsQueueStat *qs_stat_entry(const pg_uuid_t *tenant, const char *queue, uint64 key,
								  uint32 *version);
extern void qs_stat_count(QsQueueStat *e, QsStat which, int64 n);
extern void qs_stat_free(const pg_uuid_t *tenant, const char *queue);
extern void qs_stat_add(const pg_uuid_t *tenant, const char *queue, QsStat which, int64 n);
extern int	qs_open_connections(void);

/* wake.c: the push and delete hooks (common/hooks.c), any backend: count and wake at commit */
extern void qs_queue_pushed_at_commit(const pg_uuid_t *tenant, const char *queue, int nmsgs);
extern void qs_queue_deleted_at_commit(const pg_uuid_t *tenant, const char *queue);
/* the stream workers' counts (common/hooks.c's qs_streamed_hook) */
extern void qs_queue_streamed(const pg_uuid_t *tenant, const char *queue, int64 popped,
							  int64 cycled, int64 failed, int64 acked);

/* this process's slot of workers[] (an HTTP worker), else -1 */
extern int	qs_http_worker_index;

#endif							/* QS_HTTP_LISTENER_H */
