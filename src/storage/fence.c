/*
 * fence.c: a corrupt segment fences its partition only.
 *
 * A wildcard pop that meets a segment that does not decode takes nothing
 * from that partition and goes on (pop.c); here it is logged, once per
 * (partition, base offset) among the last 256 logged, and counted, in
 * shared memory when the library is preloaded (per process otherwise);
 * /metrics reads the count. queen.corrupt_segments() lists the
 * damaged segments with the count; queen.skip_segment() moves one aside
 * into queen.log_quarantine, after which every group reads past it as
 * past a retention gap.
 */
#include "storage/storage.h"
#include "common/ids.h"
#include "common/spi.h"
#include "common/workers.h"

#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

typedef struct FenceKey
{
	pg_uuid_t	pid;
	int64		base;
} FenceKey;

/* The segments already logged: the last FENCE_SLOTS, server-wide. */
#define FENCE_SLOTS 256

typedef struct QsFenceShared
{
	pg_atomic_uint64 skips;
	slock_t		lock;
	int			used;
	int			next;
	FenceKey	logged[FENCE_SLOTS];
} QsFenceShared;

static QsFenceShared *fence_shared = NULL;
static QsFenceShared *fence_local = NULL;	/* not preloaded: per process */

static void
fence_shmem_init(void *mem)
{
	QsFenceShared *f = mem;

	pg_atomic_init_u64(&f->skips, 0);
	SpinLockInit(&f->lock);
}

/* From _PG_init: the shared counter, when preloaded. */
void
qs_storage_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	qs_shmem_add_struct("queen_streams fence", sizeof(QsFenceShared), (void **) &fence_shared,
						fence_shmem_init);
}

/* Wildcard pops that stepped over a damaged partition, since server start. */
uint64
qs_corrupt_skips(void)
{
	QsFenceShared *f = fence_shared ? fence_shared : fence_local;

	return f ? pg_atomic_read_u64(&f->skips) : 0;
}

void
qs_segment_fenced(const pg_uuid_t *tenant, const char *queue, const pg_uuid_t *pid,
				  int64 base, const char *why)
{
	QsFenceShared *f = fence_shared;
	FenceKey	key;
	bool		found = false;
	char		ps[QS_UUID_STRLEN + 1];

	if (f == NULL)
	{
		if (fence_local == NULL)
		{
			fence_local = MemoryContextAllocZero(TopMemoryContext, sizeof(QsFenceShared));
			pg_atomic_init_u64(&fence_local->skips, 0);
			SpinLockInit(&fence_local->lock);
		}
		f = fence_local;
	}
	pg_atomic_fetch_add_u64(&f->skips, 1);

	memset(&key, 0, sizeof(key));
	key.pid = *pid;
	key.base = base;
	SpinLockAcquire(&f->lock);
	for (int i = 0; i < f->used && !found; i++)
		found = memcmp(&f->logged[i], &key, sizeof(key)) == 0;
	if (!found)
	{
		f->logged[f->next] = key;
		f->next = (f->next + 1) % FENCE_SLOTS;
		f->used = Max(f->used, f->next == 0 ? FENCE_SLOTS : f->next);
	}
	SpinLockRelease(&f->lock);
	if (found)
		return;
	qs_uuid_format(pid, ps);
	ereport(LOG,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("wildcard pops of queue \"%s\" skip partition %s: corrupt log segment at base offset " INT64_FORMAT,
					queue, ps, base),
			 errdetail("%s", why),
			 errhint("SELECT queen.corrupt_segments('%s') lists the damaged segments; queen.skip_segment('%s', " INT64_FORMAT ") moves this one aside.",
					 queue, ps, base)));
}

/* ---------------------------------------------------------------- SQL */

static QsPlan partitions_plan = {
	"SELECT q.name, p.name, p.id FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id"
	" WHERE q.tenant_id = $1 AND ($2::text IS NULL OR q.name = $2) ORDER BY q.name, p.name",
	2, {UUIDOID, TEXTOID}
};

#define SCAN_CHUNK 16
static QsPlan scan_plan = {
	"SELECT base_offset, end_offset, created_at, blob FROM queen.log_segments"
	" WHERE partition_id = $1 AND base_offset > $2 ORDER BY base_offset LIMIT $3",
	3, {UUIDOID, INT8OID, INT4OID}
};

/*
 * SQL: queen.corrupt_segments(queue text DEFAULT NULL, tenant uuid DEFAULT NULL)
 * Decodes every live segment of the queue (or of every queue of the tenant):
 * a full read, for operators.
 */
PG_FUNCTION_INFO_V1(qs_corrupt_segments);
Datum
qs_corrupt_segments(PG_FUNCTION_ARGS)
{
	pg_uuid_t	tenant;
	Datum		args[3];
	char		nulls[3] = "   ";
	SPITupleTable *parts;
	uint64		nparts;
	QsJson		j;
	MemoryContext scan_cxt;

	qs_tenant_arg(fcinfo, 1, &tenant);
	qsj_init(&j);
	qsj_object(&j, NULL);
	qsj_int(&j, "skipped", (int64) qs_corrupt_skips());
	qsj_array(&j, "segments");

	scan_cxt = AllocSetContextCreate(CurrentMemoryContext, "queen_streams segment scan",
									 ALLOCSET_DEFAULT_SIZES);
	qs_spi_connect();
	args[0] = qs_uuid_datum(&tenant);
	if (PG_ARGISNULL(0))
		nulls[1] = 'n';
	else
		args[1] = PointerGetDatum(PG_GETARG_TEXT_PP(0));
	qs_exec(&partitions_plan, args, nulls, 0);
	parts = SPI_tuptable;
	nparts = SPI_processed;
	for (uint64 i = 0; i < nparts; i++)
	{
		bool		isnull;
		char	   *qname = SPI_getvalue(parts->vals[i], parts->tupdesc, 1);
		char	   *pname = SPI_getvalue(parts->vals[i], parts->tupdesc, 2);
		Datum		pid = SPI_getbinval(parts->vals[i], parts->tupdesc, 3, &isnull);
		int64		after = PG_INT64_MIN;

		for (;;)
		{
			uint64		n;

			args[0] = pid;
			args[1] = Int64GetDatum(after);
			args[2] = Int32GetDatum(SCAN_CHUNK);
			qs_exec(&scan_plan, args, NULL, 0);
			n = SPI_processed;
			for (uint64 r = 0; r < n; r++)
			{
				int64		base = qs_col_int64(r, 1, 0);
				int64		end = qs_col_int64(r, 2, 0);
				TimestampTz created = DatumGetTimestampTz(qs_col(r, 3, &isnull));
				char	   *why = NULL;
				MemoryContext old = MemoryContextSwitchTo(scan_cxt);
				QsFrame    *frames = qs_segment_try_decode(DatumGetByteaPP(qs_col(r, 4, &isnull)),
														   end - base + 1, &why);

				MemoryContextSwitchTo(old);
				after = base;
				if (frames == NULL)
				{
					qsj_object(&j, NULL);
					qsj_str(&j, "queue", qname);
					qsj_str(&j, "partition", pname);
					qsj_uuid(&j, "partitionId", DatumGetUUIDP(pid));
					qsj_int(&j, "baseOffset", base);
					qsj_int(&j, "endOffset", end);
					qsj_time(&j, "createdAt", created);
					qsj_str(&j, "error", why);
					qsj_end_object(&j);
				}
				MemoryContextReset(scan_cxt);
			}
			SPI_freetuptable(SPI_tuptable);
			if (n < SCAN_CHUNK)
				break;
		}
	}
	qs_spi_finish();
	qsj_end_array(&j);
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

static QsPlan segment_plan = {
	"SELECT end_offset, blob FROM queen.log_segments WHERE partition_id = $1 AND base_offset = $2",
	2, {UUIDOID, INT8OID}
};

static QsPlan quarantine_plan = {
	"WITH gone AS (DELETE FROM queen.log_segments WHERE partition_id = $1 AND base_offset = $2"
	"              RETURNING partition_id, base_offset, end_offset, created_at, blob)"
	"INSERT INTO queen.log_quarantine"
	"       (partition_id, base_offset, end_offset, created_at, blob, error)"
	"SELECT partition_id, base_offset, end_offset, created_at, blob, $3 FROM gone",
	3, {UUIDOID, INT8OID, TEXTOID}
};

/*
 * SQL: queen.skip_segment(partition_id uuid, base_offset bigint, tenant uuid DEFAULT NULL)
 * Moves a segment that does not decode into queen.log_quarantine. Its
 * offsets become a gap every group reads past, as past retention; its
 * messages are lost to consumers but kept there, blob and all.
 */
PG_FUNCTION_INFO_V1(qs_skip_segment);
Datum
qs_skip_segment(PG_FUNCTION_ARGS)
{
	pg_uuid_t	tenant;
	Datum		args[3];
	int64		base,
				end;
	char	   *why = NULL;
	bool		isnull;
	QsJson		j;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("partition_id and base_offset are required")));
	qs_tenant_arg(fcinfo, 2, &tenant);
	base = PG_GETARG_INT64(1);

	qs_spi_connect();
	args[0] = UUIDPGetDatum(PG_GETARG_UUID_P(0));
	if (qs_partition_owned(&tenant, PG_GETARG_UUID_P(0), true) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("partition not owned by tenant")));
	args[1] = Int64GetDatum(base);
	qs_exec(&segment_plan, args, NULL, 1);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no segment at base offset " INT64_FORMAT " in this partition", base)));
	end = qs_col_int64(0, 1, 0);
	if (qs_segment_try_decode(DatumGetByteaPP(qs_col(0, 2, &isnull)), end - base + 1, &why) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the segment at base offset " INT64_FORMAT " is not corrupt", base),
				 errhint("Only a segment that does not decode can be skipped.")));
	args[2] = CStringGetTextDatum(why);
	qs_exec(&quarantine_plan, args, NULL, 0);
	qs_spi_finish();

	qsj_init(&j);
	qsj_object(&j, NULL);
	qsj_bool(&j, "skipped", true);
	qsj_uuid(&j, "partitionId", PG_GETARG_UUID_P(0));
	qsj_int(&j, "baseOffset", base);
	qsj_int(&j, "endOffset", end);
	qsj_int(&j, "messages", end - base + 1);
	qsj_str(&j, "error", why);
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
