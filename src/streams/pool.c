/*
 * pool.c: the pool of stream workers (queen_streams.stream_workers of them,
 * separate from the HTTP workers): their registration, the shared memory
 * that holds their latches and the server-wide stream counters /metrics
 * shows, the wake-up a committed push sends them, and the last ripe read
 * of each state shard (the idle flush's read, which the cycle's staleness
 * rules compare against).
 */
#include "streams/streams.h"
#include "common/workers.h"

#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"

#define QS_MAX_STREAM_WORKERS 64

typedef struct StreamSlot
{
	Latch	   *latch;
	int			pid;
	TimestampTz started_at;
	pg_atomic_uint64 cycles;
} StreamSlot;

/*
 * Ripe reads: a set-associative table of (query, partition) -> the time of
 * the shard's last state read with ripe_at_or_before. A full set evicts
 * its oldest entry; a shard without an entry has no ripe read to compare
 * with (README: Streams, stale cycles).
 */
#define QS_RIPE_SETS	1024
#define QS_RIPE_WAYS	4

typedef struct RipeRead
{
	pg_uuid_t	qid;
	pg_uuid_t	pid;
	TimestampTz at;				/* 0: empty */
} RipeRead;

typedef struct StreamShared
{
	pg_atomic_uint32 active;	/* some worker has a declared stream to run */
	pg_atomic_uint64 counters[QS_SC_COUNT];
	StreamSlot	slots[QS_MAX_STREAM_WORKERS];
	slock_t		ripe_lock;
	RipeRead	ripe[QS_RIPE_SETS][QS_RIPE_WAYS];
} StreamShared;

static StreamShared *shared = NULL;

static void
streams_shmem_init(void *mem)
{
	StreamShared *s = mem;

	pg_atomic_init_u32(&s->active, 0);
	for (int i = 0; i < QS_SC_COUNT; i++)
		pg_atomic_init_u64(&s->counters[i], 0);
	for (int i = 0; i < QS_MAX_STREAM_WORKERS; i++)
		pg_atomic_init_u64(&s->slots[i].cycles, 0);
	SpinLockInit(&s->ripe_lock);
}

void
qs_streams_init(void)
{
	if (!process_shared_preload_libraries_in_progress || IsBinaryUpgrade)
		return;
	qs_shmem_add_struct("queen_streams streams", sizeof(StreamShared), (void **) &shared,
						streams_shmem_init);

	qs_register_workers(qs_stream_workers, BgWorkerStart_RecoveryFinished, "qs_stream_worker_main",
						"queen_streams stream worker", "queen_streams stream");
}

static void
worker_detach(int code, Datum arg)
{
	StreamSlot *slot = &shared->slots[DatumGetInt32(arg)];

	slot->latch = NULL;
	slot->pid = 0;
}

void
qs_stream_worker_started(int index)
{
	StreamSlot *slot = &shared->slots[index];

	slot->started_at = GetCurrentTimestamp();
	slot->pid = MyProcPid;
	slot->latch = MyLatch;
	before_shmem_exit(worker_detach, Int32GetDatum(index));
}

void
qs_stream_worker_cycled(int index)
{
	pg_atomic_fetch_add_u64(&shared->slots[index].cycles, 1);
}

/* Called at the commit of a push (and by the declarations): look for work now. */
void
qs_streams_wake(void)
{
	if (shared == NULL || pg_atomic_read_u32(&shared->active) == 0)
		return;
	for (int i = 0; i < qs_stream_workers && i < QS_MAX_STREAM_WORKERS; i++)
	{
		Latch	   *l = shared->slots[i].latch;

		if (l)
			SetLatch(l);
	}
}

/* Pushes wake the workers only while there are streams to run. */
void
qs_stream_set_active(bool active)
{
	if (shared && (pg_atomic_read_u32(&shared->active) != 0) != active)
		pg_atomic_write_u32(&shared->active, active ? 1 : 0);
}

void
qs_stream_count(QsStreamCounter which, int64 n)
{
	if (shared && n > 0)
		pg_atomic_fetch_add_u64(&shared->counters[which], (uint64) n);
}

uint64
qs_stream_counter(QsStreamCounter which)
{
	return shared ? pg_atomic_read_u64(&shared->counters[which]) : 0;
}

static uint32
ripe_set(const pg_uuid_t *qid, const pg_uuid_t *pid)
{
	uint32		h = hash_bytes(qid->data, UUID_LEN) ^ hash_bytes(pid->data, UUID_LEN);

	return h % QS_RIPE_SETS;
}

/* A ripe read of the shard was answered at `at` (its shard lock held). */
void
qs_ripe_read_note(const pg_uuid_t *qid, const pg_uuid_t *pid, TimestampTz at)
{
	RipeRead   *set;
	RipeRead   *victim;

	if (shared == NULL)
		return;
	set = shared->ripe[ripe_set(qid, pid)];
	SpinLockAcquire(&shared->ripe_lock);
	victim = &set[0];
	for (int w = 0; w < QS_RIPE_WAYS; w++)
	{
		if (set[w].at != 0 && memcmp(&set[w].qid, qid, UUID_LEN) == 0 &&
			memcmp(&set[w].pid, pid, UUID_LEN) == 0)
		{
			victim = &set[w];
			break;
		}
		if (set[w].at < victim->at)
			victim = &set[w];
	}
	victim->qid = *qid;
	victim->pid = *pid;
	victim->at = Max(victim->at, at);
	SpinLockRelease(&shared->ripe_lock);
}

/* The time of the shard's last ripe read, or 0 when none is remembered. */
TimestampTz
qs_ripe_read_at(const pg_uuid_t *qid, const pg_uuid_t *pid)
{
	RipeRead   *set;
	TimestampTz at = 0;

	if (shared == NULL)
		return 0;
	set = shared->ripe[ripe_set(qid, pid)];
	SpinLockAcquire(&shared->ripe_lock);
	for (int w = 0; w < QS_RIPE_WAYS; w++)
		if (set[w].at != 0 && memcmp(&set[w].qid, qid, UUID_LEN) == 0 &&
			memcmp(&set[w].pid, pid, UUID_LEN) == 0)
			at = set[w].at;
	SpinLockRelease(&shared->ripe_lock);
	return at;
}

int
qs_stream_workers_up(void)
{
	int			n = 0;

	for (int i = 0; shared && i < qs_stream_workers && i < QS_MAX_STREAM_WORKERS; i++)
		n += shared->slots[i].pid != 0;
	return n;
}

/* SQL: queen_streams.stream_workers() */
PG_FUNCTION_INFO_V1(qs_stream_workers_sql);
Datum
qs_stream_workers_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; shared && i < qs_stream_workers && i < QS_MAX_STREAM_WORKERS; i++)
	{
		StreamSlot *s = &shared->slots[i];
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		CHECK_FOR_INTERRUPTS();
		if (s->pid == 0)
			continue;
		values[0] = Int32GetDatum(i);
		values[1] = Int32GetDatum(s->pid);
		values[2] = TimestampTzGetDatum(s->started_at);
		values[3] = Int64GetDatum((int64) pg_atomic_read_u64(&s->cycles));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
