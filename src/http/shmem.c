/*
 * shmem.c: the listener's shared memory: the wake board (per queue hash
 * slot, a generation counter and the set of workers with pops parked on
 * it; parked.c reads and moves it), the HTTP workers' latches and status,
 * and per-queue counters.
 */
#include "http/http_int.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/memutils.h"

QsHttpShared *qs_http_shared = NULL;

const char *const qs_stat_names[QS_STAT_COUNT] = {
	"pushed", "popped", "acked", "nacked", "cycles", "cycles_failed"
};

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
qs_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(QsHttpShared)));
}

static void
qs_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	qs_http_shared = ShmemInitStruct("queen_streams http", sizeof(QsHttpShared), &found);
	if (!found)
	{
		QsHttpShared *s = qs_http_shared;

		memset(s, 0, sizeof(QsHttpShared));
		SpinLockInit(&s->mutex);
		pg_atomic_init_u64(&s->wakes, 0);
		pg_atomic_init_u64(&s->group_commits, 0);
		pg_atomic_init_u64(&s->group_requests, 0);
		pg_atomic_init_u64(&s->group_deferrals, 0);
		pg_atomic_init_u64(&s->sample_seq, 0);
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
		for (int i = 0; i < QS_STAT_QUEUES; i++)
		{
			pg_atomic_init_u32(&s->stats[i].ready, 0);
			for (int k = 0; k < QS_STAT_COUNT; k++)
				pg_atomic_init_u64(&s->stats[i].c[k], 0);
		}
		/* the overflow bucket */
		strlcpy(s->stats[0].name, "(other)", QS_STAT_NAME);
		pg_atomic_write_u32(&s->stats[0].ready, 1);
	}
	LWLockRelease(AddinShmemInitLock);
}

void
qs_http_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = qs_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = qs_shmem_startup;
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

/*
 * The counters of (tenant, queue), created on first use. Lookups take no
 * lock; inserts are serialised by a spinlock held for a bounded probe. It
 * never raises (it runs at commit): a full table answers the overflow row.
 */
QsQueueStat *
qs_stat_entry(const pg_uuid_t *tenant, const char *queue, uint64 key)
{
	QsHttpShared *s = qs_http_shared;
	uint32		start = (uint32) (key % (QS_STAT_QUEUES - 1)) + 1;
	QsQueueStat *found = NULL;

	for (int p = 0; p < QS_STAT_PROBES; p++)
	{
		QsQueueStat *e = &s->stats[1 + (start - 1 + p) % (QS_STAT_QUEUES - 1)];

		if (pg_atomic_read_u32(&e->ready) == 0)
			break;
		pg_read_barrier();
		if (stat_matches(e, key, tenant, queue))
			return e;
	}

	SpinLockAcquire(&s->mutex);
	for (int p = 0; p < QS_STAT_PROBES; p++)
	{
		QsQueueStat *e = &s->stats[1 + (start - 1 + p) % (QS_STAT_QUEUES - 1)];

		if (pg_atomic_read_u32(&e->ready) == 0)
		{
			e->key = key;
			e->tenant = *tenant;
			strlcpy(e->name, queue, QS_STAT_NAME);
			pg_write_barrier();
			pg_atomic_write_u32(&e->ready, 1);
			found = e;
			break;
		}
		if (stat_matches(e, key, tenant, queue))
		{
			found = e;
			break;
		}
	}
	SpinLockRelease(&s->mutex);
	return found ? found : &s->stats[0];
}

void
qs_stat_add(const pg_uuid_t *tenant, const char *queue, QsStat which, int64 n)
{
	if (qs_http_shared == NULL || n <= 0 || queue == NULL)
		return;
	pg_atomic_fetch_add_u64(&qs_stat_entry(tenant, queue, qs_queue_key(tenant, queue))->c[which], n);
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
