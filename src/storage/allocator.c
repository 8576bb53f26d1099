/*
 * allocator.c: resolve (or auto-create) a partition under a tenant and append
 * one packed segment to it: dedup probe, offset allocation under the
 * partition row lock, segment and hash rows.
 */
#include "storage/storage.h"
#include "storage/pop_ready.h"
#include "common/ids.h"
#include "common/spi.h"
#include "common/text.h"

#include "catalog/pg_type.h"
#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/memutils.h"
#include "utils/builtins.h"

static QsPlan resolve_plan = {
	"SELECT p.id, q.dedup_window_seconds, q.encryption_enabled"
	"  FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id"
	" WHERE q.tenant_id = $1 AND q.name = $2 AND p.name = $3",
	3, {UUIDOID, TEXTOID, TEXTOID}
};

static QsPlan queue_id_plan = {
	"SELECT id FROM queen.queues WHERE tenant_id = $1 AND name = $2",
	2, {UUIDOID, TEXTOID}
};

/* Whether a tenant owns a partition (qs_partition_owned), plain and locking. */
#define OWNED_SQL \
	"SELECT q.name FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id" \
	" WHERE p.id = $1 AND q.tenant_id = $2"

static QsPlan owned_plan = {OWNED_SQL, 2, {UUIDOID, UUIDOID}};
static QsPlan owned_lock_plan = {OWNED_SQL " FOR NO KEY UPDATE OF p", 2, {UUIDOID, UUIDOID}};

/* Auto-create only on the missing branch: an ON CONFLICT per push convoys. */
static QsPlan create_queue_plan = {
	"INSERT INTO queen.queues (tenant_id, name, namespace, task)"
	" VALUES ($1, $2, split_part($2, '.', 1), split_part($2, '.', 2))"
	" ON CONFLICT (tenant_id, name) DO NOTHING",
	2, {UUIDOID, TEXTOID}
};

static QsPlan create_partition_plan = {
	"INSERT INTO queen.log_partitions (queue_id, name)"
	" SELECT id, $3 FROM queen.queues WHERE tenant_id = $1 AND name = $2"
	" ON CONFLICT (queue_id, name) DO NOTHING",
	3, {UUIDOID, TEXTOID, TEXTOID}
};

bool
qs_partition_resolve(const pg_uuid_t *tenant, const char *queue,
					 const char *partition, bool create, QsPartition *out)
{
	Datum		args[3];

	qs_check_name("queue", NULL, queue);
	qs_check_name("partition", NULL, partition);
	args[0] = qs_uuid_datum(tenant);
	args[1] = CStringGetTextDatum(queue);
	args[2] = CStringGetTextDatum(partition);

	for (int attempt = 0; attempt < 2; attempt++)
	{
		bool		found;

		if (qs_resolve_direct(tenant, &queue, &partition, 1, out, &found))
		{
			if (found)
				return true;
		}
		else
		{
			qs_exec(&resolve_plan, args, NULL, 1);
			if (SPI_processed == 1)
			{
				bool		isnull;

				out->pid = *DatumGetUUIDP(qs_col(0, 1, &isnull));
				out->window = DatumGetInt32(qs_col(0, 2, &isnull));
				out->encrypt = qs_col_bool(0, 3, false);
				return true;
			}
		}
		if (!create || attempt == 1)
			break;
		qs_exec(&create_queue_plan, args, NULL, 0);
		qs_exec(&create_partition_plan, args, NULL, 0);
	}
	if (create)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("unknown queue or partition \"%s/%s\"", queue, partition)));
	return false;
}

/* Several (queue, partition) names of one tenant in one statement. */
static QsPlan resolve_many_plan = {
	"SELECT r.i, p.id, q.dedup_window_seconds, q.encryption_enabled"
	"  FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS r(queue, part, i)"
	"  JOIN queen.queues q ON q.tenant_id = $1 AND q.name = r.queue"
	"  JOIN queen.log_partitions p ON p.queue_id = q.id AND p.name = r.part",
	3, {UUIDOID, TEXTARRAYOID, TEXTARRAYOID}
};

/* resolve_many_plan's rows into out[], found[] */
static void
resolve_many_statement(const pg_uuid_t *tenant, const char *const *queues,
					   const char *const *partitions, int n, QsPartition *out, bool *found)
{
	Datum	   *q = palloc(sizeof(Datum) * n);
	Datum	   *p = palloc(sizeof(Datum) * n);
	Datum		args[3];

	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		q[i] = CStringGetTextDatum(queues[i]);
		p[i] = CStringGetTextDatum(partitions[i]);
	}
	args[0] = qs_uuid_datum(tenant);
	args[1] = PointerGetDatum(construct_array(q, n, TEXTOID, -1, false, TYPALIGN_INT));
	args[2] = PointerGetDatum(construct_array(p, n, TEXTOID, -1, false, TYPALIGN_INT));
	qs_exec(&resolve_many_plan, args, NULL, 0);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		int64		i = qs_col_int64(r, 1, 0) - 1;

		if (i < 0 || i >= n)
			elog(ERROR, "partition resolve returned row %lld of %d", (long long) i, n);
		out[i].pid = *DatumGetUUIDP(qs_col(r, 2, &isnull));
		out[i].window = DatumGetInt32(qs_col(r, 3, &isnull));
		out[i].encrypt = qs_col_bool(r, 4, false);
		found[i] = true;
	}
	SPI_freetuptable(SPI_tuptable);
	pfree(q);
	pfree(p);
}

/*
 * qs_partition_resolve for n names at once (distinct pairs): those that
 * exist are found at once (resolve.c, or one statement), the others are
 * created one by one.
 */
void
qs_partitions_resolve(const pg_uuid_t *tenant, const char *const *queues,
					  const char *const *partitions, int n, QsPartition *out)
{
	bool	   *found;

	if (n <= 1)
	{
		if (n == 1)
			qs_partition_resolve(tenant, queues[0], partitions[0], true, &out[0]);
		return;
	}
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		qs_check_name("queue", NULL, queues[i]);
		qs_check_name("partition", NULL, partitions[i]);
	}
	found = palloc0(sizeof(bool) * n);
	if (!qs_resolve_direct(tenant, queues, partitions, n, out, found))
		resolve_many_statement(tenant, queues, partitions, n, out, found);
	for (int i = 0; i < n; i++)
		if (!found[i])
			qs_partition_resolve(tenant, queues[i], partitions[i], true, &out[i]);
	pfree(found);
}

/*
 * Append the segment of each entry that has one (blob set): with more than
 * one, every row must be locked already (qs_appends_lock); a lone one is
 * locked here. Then, still under the row locks, the shared dedup cache
 * learns each segment.
 */
void
qs_appends_run(QsAppendMany *a, int n)
{
	int			m = 0;
	int			last = -1;

	for (int i = 0; i < n; i++)
		if (a[i].blob != NULL)
		{
			m++;
			last = i;
		}
	if (m == 0)
		return;
	if (m == 1 && !a[last].locked)
		qs_appends_lock(&a[last], 1);
	qs_segments_write(a, n);
	qs_ready_pushed(a, n);
	for (int i = 0; i < n; i++)
		if (a[i].blob != NULL)
			qs_dedup_record(&a[i].pid, a[i].base_offset, a[i].count, a[i].hashes,
							a[i].created_at, a[i].window > 0);
}

/*
 * Append one segment of `count` frames. With a dedup window, the
 * partition row is locked first and the window probed (the cache's
 * bookkeeping runs even when no frame can repeat); any hit writes nothing.
 */
static bytea *
given_blob(void *arg)
{
	return (bytea *) arg;
}

void
qs_append_segment(const pg_uuid_t *pid, int window, int count,
				  const uint8 *hashes, bytea *blob, int64 verified,
				  const bool *probe, QsAppendResult *res)
{
	qs_append_segment_lazy(pid, window, count, hashes, given_blob, blob, verified, probe, res);
}

void
qs_append_segment_lazy(const pg_uuid_t *pid, int window, int count,
					   const uint8 *hashes, QsBlobBuilder build, void *arg,
					   int64 verified, const bool *probe, QsAppendResult *res)
{
	QsAppendMany a;

	memset(res, 0, sizeof(*res));
	memset(&a, 0, sizeof(a));
	a.pid = *pid;
	a.window = window;
	if (window > 0)
	{
		qs_appends_lock(&a, 1);
		qs_dedup_probe(pid, window, a.last_offset, a.txns_start, verified, count, hashes,
					   probe, GetCurrentTimestamp(), res);
		if (res->duplicate)
			return;
	}
	a.count = count;
	a.hashes = hashes;
	a.blob = build(arg);
	qs_appends_run(&a, 1);
	res->base_offset = a.base_offset;
	res->created_at = a.created_at;
}

static QsPlan covering_plan = {
	"SELECT base_offset, end_offset, blob FROM queen.log_segments"
	" WHERE partition_id = $1 AND base_offset <= $2"
	" ORDER BY base_offset DESC LIMIT 1",
	2, {UUIDOID, INT8OID}
};

static QsPlan at_or_before_plan = {
	"SELECT base_offset, end_offset, created_at FROM queen.log_segments"
	" WHERE partition_id = $1 AND base_offset <= $2 ORDER BY base_offset DESC LIMIT 1",
	2, {UUIDOID, INT8OID}
};

/*
 * The newest segment starting at or before `offset` (pid is a uuid Datum):
 * its bounds and time, from one primary-key probe; false when there is none.
 * It may end before `offset` (a retention gap or the end of the log).
 */
bool
qs_segment_at(Datum pid, int64 offset, int64 *base, int64 *end, TimestampTz *created)
{
	Datum		args[2];
	bool		isnull;

	args[0] = pid;
	args[1] = Int64GetDatum(offset);
	qs_exec(&at_or_before_plan, args, NULL, 1);
	if (SPI_processed != 1)
		return false;
	*base = qs_col_int64(0, 1, 0);
	*end = qs_col_int64(0, 2, 0);
	*created = DatumGetTimestampTz(qs_col(0, 3, &isnull));
	return true;
}

/*
 * The bounds of the live segment holding `offset` (pid is a uuid Datum);
 * false when none does (beyond the log, or in a retention gap).
 */
bool
qs_segment_covering(Datum pid, int64 offset, int64 *base, int64 *end)
{
	TimestampTz created;

	return qs_segment_at(pid, offset, base, end, &created) && *end >= offset;
}

/* The frame stored at an offset; false when retention removed it. */
bool
qs_frame_at(const pg_uuid_t *pid, int64 offset, QsFrame *frame)
{
	Datum		args[2];
	int64		base,
				end;
	bool		isnull;
	QsFrame    *frames;

	args[0] = qs_uuid_datum(pid);
	args[1] = Int64GetDatum(offset);
	qs_exec(&covering_plan, args, NULL, 1);
	if (SPI_processed != 1)
		return false;
	base = qs_col_int64(0, 1, 0);
	end = qs_col_int64(0, 2, 0);
	if (end < offset)
		return false;
	frames = qs_segment_decode(DatumGetByteaPP(qs_col(0, 3, &isnull)), end - base + 1, pid, base);
	*frame = frames[offset - base];
	return true;
}

/*
 * The message ids at `n` offsets sorted ascending, each covering segment
 * decoded once and freed before the next: found[i] is false where
 * retention removed the frame.
 */
void
qs_frame_ids_at(const pg_uuid_t *pid, const int64 *offsets, int n,
				pg_uuid_t *ids, bool *found)
{
	MemoryContext seg_cxt = AllocSetContextCreate(CurrentMemoryContext,
												  "queen_streams duplicate originals",
												  ALLOCSET_DEFAULT_SIZES);
	Datum		args[2];

	args[0] = qs_uuid_datum(pid);
	for (int i = 0; i < n;)
	{
		MemoryContext old;
		int64		base,
					end;
		bool		isnull;
		QsFrame    *frames;

		CHECK_FOR_INTERRUPTS();
		args[1] = Int64GetDatum(offsets[i]);
		qs_exec(&covering_plan, args, NULL, 1);
		if (SPI_processed != 1 || qs_col_int64(0, 2, -1) < offsets[i])
		{
			found[i++] = false;
			continue;
		}
		base = qs_col_int64(0, 1, 0);
		end = qs_col_int64(0, 2, 0);
		old = MemoryContextSwitchTo(seg_cxt);
		frames = qs_segment_decode(DatumGetByteaPP(qs_col(0, 3, &isnull)), end - base + 1, pid, base);
		MemoryContextSwitchTo(old);
		SPI_freetuptable(SPI_tuptable);
		for (; i < n && offsets[i] <= end; i++)
		{
			memcpy(ids[i].data, frames[offsets[i] - base].id, UUID_LEN);
			found[i] = true;
		}
		MemoryContextReset(seg_cxt);
	}
	MemoryContextDelete(seg_cxt);
}

/*
 * A caller-made segment is checked before it is stored: it must decode into
 * exactly `count` frames, each hash must be the one of its frame's
 * transaction id, and each payload must be JSON text. A segment that fails
 * any of these would otherwise be accepted and then stop every pop of the
 * partition (or make its messages unackable) for good.
 */
static void
check_segment(bytea *blob, int count, const uint8 *hashes)
{
	QsFrame    *frames = qs_segment_decode(blob, count, NULL, 0);

	for (int i = 0; i < count; i++)
	{
		QsFrame    *f = &frames[i];
		uint8		h[QS_HASH_LEN];
		const char *why;

		/* the one rule of outside strings: what a pop serves must read back */
		if ((why = qs_text_problem(f->txn, f->txn_len, 0)) != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("bad segment: the transaction id of frame %d %s", i, why)));
		if (f->psub && (why = qs_text_problem(f->psub, f->psub_len, 0)) != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("bad segment: the producer subject of frame %d %s", i, why)));
		qs_txn_hash(f->txn, f->txn_len, h);
		if (memcmp(h, hashes + i * QS_HASH_LEN, QS_HASH_LEN) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("bad segment: hash %d is not the hash of frame %d's transaction id", i, i)));
		/* an empty payload is served as null, as push stores an absent one */
		if (f->payload_len > 0)
		{
			JsonLexContext *lex;

			if ((why = qs_text_problem(f->payload, f->payload_len, 0)) != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("bad segment: the payload of frame %d %s", i, why)));
			lex = makeJsonLexContextCstringLen((char *) f->payload, f->payload_len,
											   GetDatabaseEncoding(), false);
			if (pg_parse_json(lex, &nullSemAction) != JSON_SUCCESS)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("bad segment: the payload of frame %d is not JSON", i)));
			pfree(lex);
		}
	}
}

/* SQL: queen.log_push_one_v1(...) */
PG_FUNCTION_INFO_V1(qs_log_push_one_v1);
Datum
qs_log_push_one_v1(PG_FUNCTION_ARGS)
{
	char	   *queue;
	char	   *partition;
	int32		count;
	bytea	   *hashes;
	int64		verified;
	bytea	   *blob;
	pg_uuid_t	tenant;
	QsPartition part;
	QsAppendResult res;
	QsJson		j;

	for (int i = 0; i < 6; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("argument %d must not be null", i + 1)));
	queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
	partition = text_to_cstring(PG_GETARG_TEXT_PP(1));
	count = PG_GETARG_INT32(2);
	hashes = PG_GETARG_BYTEA_PP(3);
	verified = PG_GETARG_INT64(4);
	blob = PG_GETARG_BYTEA_PP(5);
	qs_tenant_arg(fcinfo, 8, &tenant);

	if (count < 1 || VARSIZE_ANY_EXHDR(hashes) != (Size) count * QS_HASH_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bad segment: the hashes do not match the message count"),
				 errdetail("p_msg_count is %d and p_hashes holds %d bytes; each message needs 16.",
						   count, (int) VARSIZE_ANY_EXHDR(hashes))));

	check_segment(blob, count, (const uint8 *) VARDATA_ANY(hashes));

	qsj_init(&j);
	qs_spi_connect();
	if (PG_ARGISNULL(6) || PG_ARGISNULL(7))
	{
		qs_partition_resolve(&tenant, queue, partition, true, &part);
		if (!PG_ARGISNULL(6))
			part.pid = *PG_GETARG_UUID_P(6);
		if (!PG_ARGISNULL(7))
			part.window = PG_GETARG_INT32(7);
	}
	else
	{
		part.pid = *PG_GETARG_UUID_P(6);
		part.window = PG_GETARG_INT32(7);
	}

	qs_append_segment(&part.pid, part.window, count, (const uint8 *) VARDATA_ANY(hashes),
					  blob, verified, NULL, &res);

	qsj_object(&j, NULL);
	if (res.duplicate)
	{
		qsj_str(&j, "status", "duplicate");
		qs_write_dups(&j, res.ndups, res.dup_idx, res.dup_off);
	}
	else
	{
		qsj_str(&j, "status", "queued");
		qsj_int(&j, "baseOffset", res.base_offset);
		qsj_time(&j, "createdAt", res.created_at);
	}
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/* 42704: the tenant has no queue of that name. */
void
qs_queue_not_found(const char *queue)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("queue not found"),
			 errdetail("No queue \"%s\" exists for this tenant.", queue)));
}

/* The id of the tenant's queue (a uuid Datum); 42704 when it has none of that name. */
Datum
qs_queue_id(const pg_uuid_t *tenant, const char *queue)
{
	Datum		args[2];
	bool		isnull;

	args[0] = qs_uuid_datum(tenant);
	args[1] = CStringGetTextDatum(queue);
	qs_exec(&queue_id_plan, args, NULL, 1);
	if (SPI_processed != 1)
		qs_queue_not_found(queue);
	return qs_uuid_datum(DatumGetUUIDP(qs_col(0, 1, &isnull)));
}

/* The duplicates of an append: which frames, and where their originals are. */
void
qs_write_dups(QsJson *j, int ndups, const int *dup_idx, const int64 *dup_off)
{
	qsj_array(j, "dups");
	for (int i = 0; i < ndups; i++)
	{
		CHECK_FOR_INTERRUPTS();
		qsj_object(j, NULL);
		qsj_int(j, "i", dup_idx[i]);
		qsj_int(j, "off", dup_off[i]);
		qsj_end_object(j);
	}
	qsj_end_array(j);
}

/*
 * Whether `tenant` owns partition `pid`: the name of its queue (in the
 * current memory context), or NULL. With `lock`, the partition row is
 * locked FOR NO KEY UPDATE. Inside SPI.
 */
char *
qs_partition_owned(const pg_uuid_t *tenant, const pg_uuid_t *pid, bool lock)
{
	Datum		args[2];
	bool		isnull;

	args[0] = qs_uuid_datum(pid);
	args[1] = qs_uuid_datum(tenant);
	qs_exec(lock ? &owned_lock_plan : &owned_plan, args, NULL, 1);
	if (SPI_processed != 1)
		return NULL;
	return TextDatumGetCString(qs_col(0, 1, &isnull));
}
