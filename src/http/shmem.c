/*
 * shmem.c: the listener's shared memory: the wake board (per queue hash
 * slot, a generation counter and the set of workers with pops parked on
 * it; parked.c reads and moves it), the HTTP workers' latches and status,
 * and per-queue counters.
 *
 * The counters' table has queen_streams.metrics_queues slots; slot 0 counts
 * the queues that found no slot. A slot is freed when its queue is deleted
 * (at commit) and taken over by a new queue once its own has not counted
 * for queen_streams.metrics_queue_idle, so one tenant's many or deleted
 * queues do not keep another's new queues out of /metrics for good.
 */
#include "http/listener.h"
#include "common/workers.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/memutils.h"

#include <time.h>

QsHttpShared *qs_http_shared = NULL;

/* this process's slot of workers[] (an HTTP worker), else -1 */
int			qs_http_worker_index = -1;

const char *const qs_stat_names[QS_STAT_COUNT] = {
	"pushed", "popped", "acked", "nacked", "cycles", "cycles_failed"
};

static void
qs_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(offsetof(QsHttpShared, stats) +
									sizeof(QsQueueStat) * (Size) qs_http_metrics_queues));
}

static void
qs_shmem_startup(void)
{
	bool		found;

	qs_http_shared = qs_shmem_struct("queen_streams http",
									 offsetof(QsHttpShared, stats) +
									 sizeof(QsQueueStat) * (Size) qs_http_metrics_queues, &found);
	if (!found)
	{
		QsHttpShared *s = qs_http_shared;

		SpinLockInit(&s->mutex);
		s->nstats = qs_http_metrics_queues;
		pg_atomic_init_u64(&s->wakes, 0);
		pg_atomic_init_u64(&s->group_commits, 0);
		pg_atomic_init_u64(&s->group_requests, 0);
		pg_atomic_init_u64(&s->group_deferrals, 0);
		pg_atomic_init_u64(&s->sample_seq, 0);
		SpinLockInit(&s->gauges_lock);
		pg_atomic_init_u64(&s->gauges_wanted_at, 0);
		for (int i = 0; i < QS_MAX_WORKERS; i++)
		{
			pg_atomic_init_u32(&s->workers[i].connections, 0);
			pg_atomic_init_u32(&s->workers[i].incoming, 0);
			pg_atomic_init_u32(&s->workers[i].parked, 0);
			pg_atomic_init_u64(&s->workers[i].requests, 0);
		}
		for (int r = 0; r < QS_MAX_ROUTES; r++)
			for (int c = 0; c < QS_CODE_COUNT; c++)
				pg_atomic_init_u64(&s->requests[r][c], 0);
		for (int i = 0; i < QS_WAKE_SLOTS; i++)
		{
			pg_atomic_init_u64(&s->gen[i], 0);
			pg_atomic_init_u64(&s->waiters[i], 0);
		}
		for (int i = 0; i < s->nstats; i++)
		{
			pg_atomic_init_u32(&s->stats[i].ready, 0);
			pg_atomic_init_u32(&s->stats[i].used_at, 0);
			pg_atomic_init_u32(&s->stats[i].parked, 0);
			for (int k = 0; k < QS_STAT_COUNT; k++)
				pg_atomic_init_u64(&s->stats[i].c[k], 0);
		}
		/* the overflow bucket */
		strlcpy(s->stats[0].name, "(other)", QS_STAT_NAME);
		s->stat_version = 1;
		pg_atomic_write_u32(&s->stats[0].ready, 1);
	}
}

void
qs_http_shmem_init(void)
{
	qs_shmem_add(qs_shmem_request, qs_shmem_startup);
}

uint64
qs_queue_key(const pg_uuid_t *tenant, const char *queue)
{
	uint64		h = hash_bytes_extended(tenant->data, UUID_LEN, 0);

	return hash_bytes_extended((const unsigned char *) queue, strlen(queue), h);
}

uint32
qs_wake_slot(uint64 key)
{
	return (uint32) (key % QS_WAKE_SLOTS);
}

static bool
stat_matches(QsQueueStat *s, uint64 key, const pg_uuid_t *tenant, const char *queue)
{
	return s->key == key && memcmp(&s->tenant, tenant, UUID_LEN) == 0 &&
		strncmp(s->name, queue, QS_STAT_NAME - 1) == 0;
}

#define QS_STAT_PROBES 64

/* The p-th slot (of the bounded probe) where key may live; never slot 0. */
static QsQueueStat *
stat_probe(QsHttpShared *s, uint64 key, int p)
{
	return &s->stats[1 + (uint32) ((key % (uint64) (s->nstats - 1) + p) % (uint64) (s->nstats - 1))];
}

static int
stat_probes(QsHttpShared *s)
{
	return Min(QS_STAT_PROBES, s->nstats - 1);
}

static void
stat_touch(QsQueueStat *e)
{
	uint32		now = (uint32) time(NULL);

	/* one write a second at most: the line is shared by every counting backend */
	if (pg_atomic_read_u32(&e->used_at) != now)
		pg_atomic_write_u32(&e->used_at, now);
}

/* Give slot e to (tenant, queue), its counters and samples zero; under mutex. */
static void
stat_take(QsHttpShared *s, QsQueueStat *e, uint64 key, const pg_uuid_t *tenant, const char *queue)
{
	pg_atomic_write_u32(&e->ready, 0);
	pg_write_barrier();
	e->key = key;
	e->tenant = *tenant;
	strlcpy(e->name, queue, QS_STAT_NAME);
	for (int k = 0; k < QS_STAT_COUNT; k++)
		pg_atomic_write_u64(&e->c[k], 0);
	pg_atomic_write_u32(&e->parked, 0);
	memset(e->sample, 0, sizeof(e->sample));
	pg_atomic_write_u32(&e->used_at, (uint32) time(NULL));
	if (++s->stat_version == 0)
		s->stat_version = 1;
	pg_write_barrier();
	pg_atomic_write_u32(&e->ready, s->stat_version);
}

/*
 * The counters of (tenant, queue), created on first use; *version (if
 * given) the slot's version, which changes when the slot is freed or taken
 * over. Lookups take no lock; takes are serialised by a spinlock held for
 * a bounded probe. A queue finds a free slot, else the one idle longest
 * past queen_streams.metrics_queue_idle, else the overflow row. It never
 * raises (it runs at commit).
 */
QsQueueStat *
qs_stat_entry(const pg_uuid_t *tenant, const char *queue, uint64 key, uint32 *version)
{
	QsHttpShared *s = qs_http_shared;
	int			probes = stat_probes(s);
	QsQueueStat *found = NULL,
			   *free_slot = NULL,
			   *idle = NULL;
	uint32		cutoff = 0;

	/* freed slots leave holes: a lookup reads the whole probe */
	for (int p = 0; p < probes; p++)
	{
		QsQueueStat *e = stat_probe(s, key, p);
		uint32		v = pg_atomic_read_u32(&e->ready);
		bool		match;

		if (v == 0)
			continue;
		pg_read_barrier();
		match = stat_matches(e, key, tenant, queue);
		pg_read_barrier();
		if (match && pg_atomic_read_u32(&e->ready) == v)
		{
			if (version)
				*version = v;
			stat_touch(e);
			return e;
		}
	}

	if (qs_http_metrics_queue_idle_s > 0)
		cutoff = (uint32) time(NULL) - (uint32) qs_http_metrics_queue_idle_s;
	SpinLockAcquire(&s->mutex);
	for (int p = 0; p < probes; p++)
	{
		QsQueueStat *e = stat_probe(s, key, p);
		uint32		used;

		if (pg_atomic_read_u32(&e->ready) == 0)
		{
			if (free_slot == NULL)
				free_slot = e;
			continue;
		}
		if (stat_matches(e, key, tenant, queue))
		{
			found = e;
			break;
		}
		used = pg_atomic_read_u32(&e->used_at);
		if (cutoff > 0 && used < cutoff &&
			(idle == NULL || used < pg_atomic_read_u32(&idle->used_at)))
			idle = e;
	}
	if (found == NULL && (free_slot || idle))
	{
		found = free_slot ? free_slot : idle;
		stat_take(s, found, key, tenant, queue);
	}
	if (found == NULL)
		found = &s->stats[0];
	if (version)
		*version = pg_atomic_read_u32(&found->ready);
	SpinLockRelease(&s->mutex);
	stat_touch(found);
	return found;
}

/* Count n on a slot found before (its version checked by the caller). */
void
qs_stat_count(QsQueueStat *e, QsStat which, int64 n)
{
	stat_touch(e);
	pg_atomic_fetch_add_u64(&e->c[which], n);
}

void
qs_stat_add(const pg_uuid_t *tenant, const char *queue, QsStat which, int64 n)
{
	if (qs_http_shared == NULL || n <= 0 || queue == NULL)
		return;
	pg_atomic_fetch_add_u64(&qs_stat_entry(tenant, queue, qs_queue_key(tenant, queue), NULL)->c[which], n);
}

/* A deleted queue's slot, free for the next new queue (at commit; never raises). */
void
qs_stat_free(const pg_uuid_t *tenant, const char *queue)
{
	QsHttpShared *s = qs_http_shared;
	uint64		key;

	if (s == NULL || queue == NULL)
		return;
	key = qs_queue_key(tenant, queue);
	SpinLockAcquire(&s->mutex);
	for (int p = 0; p < stat_probes(s); p++)
	{
		QsQueueStat *e = stat_probe(s, key, p);

		if (pg_atomic_read_u32(&e->ready) != 0 && stat_matches(e, key, tenant, queue))
		{
			pg_atomic_write_u32(&e->ready, 0);
			break;
		}
	}
	SpinLockRelease(&s->mutex);
}

/* qs_streamed_hook: the stream workers' pops, cycles and acks, on the source queue */
void
qs_queue_streamed(const pg_uuid_t *tenant, const char *queue, int64 popped, int64 cycled,
				  int64 failed, int64 acked)
{
	qs_stat_add(tenant, queue, QS_STAT_POPPED, popped);
	qs_stat_add(tenant, queue, QS_STAT_CYCLES, cycled);
	qs_stat_add(tenant, queue, QS_STAT_CYCLES_FAILED, failed);
	qs_stat_add(tenant, queue, QS_STAT_ACKED, acked);
}

int
qs_open_connections(void)
{
	int			n = 0;

	for (int i = 0; i < qs_http_workers && i < QS_MAX_WORKERS; i++)
		n += pg_atomic_read_u32(&qs_http_shared->workers[i].connections);
	return n;
}
