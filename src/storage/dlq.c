/*
 * dlq.c: the dead-letter reads and writes of Queen's HTTP API:
 *  - queen.dlq (GET /api/v1/dlq): filtered, newest failure first, paged for
 *    real and with the total count of matches (Queen pages nothing, ignores
 *    partition/from/to and has no total);
 *  - queen.delete_message (DELETE /api/v1/messages/:p/:t): segments are
 *    immutable, so only a message's dead-letter rows can be deleted;
 *  - queen.retry_message (POST /api/v1/messages/:p/:t/retry): the dead
 *    letter's payload goes back onto its partition as a new message with the
 *    same transaction id, and its dead-letter rows go.
 * Dead letters belong to the tenant of their partition's queue.
 */
#include "storage/dlq.h"
#include "common/args.h"
#include "common/ids.h"
#include "common/spi.h"

#include "catalog/pg_type_d.h"
#include "datatype/timestamp.h"
#include "miscadmin.h"
#include "utils/builtins.h"

/* Hash rows read, newest first, to tell whether a transaction id is in the log. */
#define QS_TXN_SCAN_ROWS 256

static QsPlan owned_plan = {
	"SELECT p.log_start, p.txns_start"
	"  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
	" WHERE p.id = $1 AND q.tenant_id = $2",
	2, {UUIDOID, UUIDOID}
};

static QsPlan recent_hashes_plan = {
	"SELECT base_offset, hashes FROM queen.log_txns"
	" WHERE partition_id = $1 AND end_offset >= $2"
	" ORDER BY base_offset DESC LIMIT $3",
	3, {UUIDOID, INT8OID, INT4OID}
};

/*
 * The hash sidecar covers [txns_start, last_offset]; only the newest
 * QS_TXN_SCAN_ROWS rows are read, so a miss is certain only when they were
 * all of them and nothing live lies below txns_start.
 */
QsTxnPresence
qs_txn_presence(const pg_uuid_t *tenant, const pg_uuid_t *pid, const char *txn)
{
	Datum		args[3];
	uint8		hash[QS_HASH_LEN];
	int64		log_start,
				txns_start;

	args[0] = qs_uuid_datum(pid);
	args[1] = qs_uuid_datum(tenant);
	qs_exec(&owned_plan, args, NULL, 1);
	if (SPI_processed != 1)
		return QS_TXN_NO_PARTITION;
	log_start = qs_col_int64(0, 1, 0);
	txns_start = qs_col_int64(0, 2, 0);

	qs_txn_hash(txn, strlen(txn), hash);
	args[1] = Int64GetDatum(log_start);
	args[2] = Int32GetDatum(QS_TXN_SCAN_ROWS);
	qs_exec(&recent_hashes_plan, args, NULL, 0);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		int64		base = qs_col_int64(r, 1, 0);
		bool		isnull;
		bytea	   *hb = DatumGetByteaPP(qs_col(r, 2, &isnull));
		const uint8 *h = (const uint8 *) VARDATA_ANY(hb);
		int			count = VARSIZE_ANY_EXHDR(hb) / QS_HASH_LEN;

		CHECK_FOR_INTERRUPTS();
		for (int k = 0; k < count; k++)
			if (base + k >= log_start && memcmp(hash, h + k * QS_HASH_LEN, QS_HASH_LEN) == 0)
				return QS_TXN_FOUND;
	}
	if (SPI_processed < QS_TXN_SCAN_ROWS && txns_start <= log_start)
		return QS_TXN_ABSENT;
	return QS_TXN_UNKNOWN;
}

char *
qs_message_args(FunctionCallInfo fcinfo, pg_uuid_t *pid)
{
	char	   *txn = qs_text_arg(fcinfo, 1);

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("partitionId is required")));
	*pid = *PG_GETARG_UUID_P(0);
	if (txn == NULL || txn[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("transactionId is required")));
	return txn;
}

/* A filter argument: SQL NULL and the empty string both mean "any". */
static Datum
filter_arg(FunctionCallInfo fcinfo, int argno, char *null)
{
	char	   *s = qs_text_arg(fcinfo, argno);

	*null = (s == NULL || s[0] == '\0') ? 'n' : ' ';
	return *null == 'n' ? (Datum) 0 : CStringGetTextDatum(s);
}

/* ------------------------------------------------------------------------
 * queen.dlq
 * ------------------------------------------------------------------------ */

#define DLQ_MATCH \
	"  FROM queen.queues q" \
	"  JOIN queen.log_partitions p ON p.queue_id = q.id" \
	"  JOIN queen.log_dlq d ON d.partition_id = p.id" \
	" WHERE q.tenant_id = $1" \
	"   AND ($2::text IS NULL OR q.name = $2)" \
	"   AND ($3::text IS NULL OR d.consumer_group = $3)" \
	"   AND ($4::text IS NULL OR p.name = $4)" \
	"   AND ($5::timestamptz IS NULL OR d.failed_at >= $5)" \
	"   AND ($6::timestamptz IS NULL OR d.failed_at <= $6)"

static QsPlan dlq_count_plan = {
	"SELECT count(*)" DLQ_MATCH,
	6, {UUIDOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
};

/*
 * One page, each row with the bounds and time of the live segment still
 * holding its message, if any; blobs are read once per segment (below).
 */
static QsPlan dlq_page_plan = {
	"SELECT m.message_id, m.transaction_id, m.partition_id, m.qname, m.pname,"
	"       m.consumer_group, m.error, m.retry_count, m.payload::text, m.failed_at,"
	"       m.\"offset\", s.base_offset, s.end_offset, s.created_at, m.encrypted"
	"  FROM (SELECT d.id, d.message_id, d.transaction_id, d.partition_id,"
	"               q.name::text AS qname, p.name AS pname, d.consumer_group, d.error,"
	"               d.retry_count, d.payload, d.failed_at, d.\"offset\", d.encrypted"
	DLQ_MATCH
	"         ORDER BY d.failed_at DESC, d.id DESC LIMIT $7 OFFSET $8) m"
	"  LEFT JOIN LATERAL (SELECT s.base_offset, s.end_offset, s.created_at"
	"                       FROM queen.log_segments s"
	"                      WHERE s.partition_id = m.partition_id AND s.base_offset <= m.\"offset\""
	"                      ORDER BY s.base_offset DESC LIMIT 1) s ON s.end_offset >= m.\"offset\""
	" ORDER BY m.failed_at DESC, m.id DESC",
	8, {UUIDOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID, INT4OID}
};

static QsPlan segment_blob_plan = {
	"SELECT blob FROM queen.log_segments WHERE partition_id = $1 AND base_offset = $2",
	2, {UUIDOID, INT8OID}
};

/* The segment decoded last: neighbouring dead letters often share one. */
typedef struct SegCache
{
	bool		valid;
	pg_uuid_t	pid;
	int64		base;
	QsFrame    *frames;			/* NULL: the segment went meanwhile */
} SegCache;

/* A UUIDv7's millisecond stamp, the message's push time to the millisecond. */
static bool
uuid7_time(const pg_uuid_t *u, TimestampTz *out)
{
	uint64		ms = 0;

	if ((u->data[6] >> 4) != 7)
		return false;
	for (int i = 0; i < 6; i++)
		ms = (ms << 8) | u->data[i];
	*out = (TimestampTz) ms * 1000 -
		(TimestampTz) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * USECS_PER_SEC;
	return true;
}

/* A column of the page row: the page's tuple table outlives the blob reads. */
static Datum
page_col(SPITupleTable *tt, int r, int col, bool *isnull)
{
	return SPI_getbinval(tt->vals[r], tt->tupdesc, col, isnull);
}

static char *
page_str(SPITupleTable *tt, int r, int col)
{
	return SPI_getvalue(tt->vals[r], tt->tupdesc, col);
}

static const QsFrame *
row_frame(SPITupleTable *tt, int r, const pg_uuid_t *pid, int64 offset, SegCache *cache)
{
	bool		isnull;
	Datum		based = page_col(tt, r, 12, &isnull);
	int64		base,
				end;

	if (isnull)
		return NULL;			/* the segment is gone (retention) */
	base = DatumGetInt64(based);
	end = DatumGetInt64(page_col(tt, r, 13, &isnull));
	if (!cache->valid || cache->base != base || memcmp(cache->pid.data, pid->data, UUID_LEN) != 0)
	{
		Datum		args[2];

		args[0] = qs_uuid_datum(pid);
		args[1] = Int64GetDatum(base);
		qs_exec(&segment_blob_plan, args, NULL, 1);
		cache->frames = SPI_processed != 1 ? NULL :
			qs_segment_decode(DatumGetByteaPP(qs_col(0, 1, &isnull)), end - base + 1, pid, base);
		cache->pid = *pid;
		cache->base = base;
		cache->valid = true;
	}
	return cache->frames ? &cache->frames[offset - base] : NULL;
}

static void
emit_dead_letter(QsJson *j, SPITupleTable *tt, int r, SegCache *cache)
{
	bool		isnull,
				mid_null;
	Datum		mid = page_col(tt, r, 1, &mid_null);
	pg_uuid_t	pid = *DatumGetUUIDP(page_col(tt, r, 3, &isnull));
	int64		offset = DatumGetInt64(page_col(tt, r, 11, &isnull));
	const QsFrame *f = row_frame(tt, r, &pid, offset, cache);
	Datum		created = page_col(tt, r, 14, &isnull);
	TimestampTz created_at = isnull ? 0 : DatumGetTimestampTz(created);
	bool		have_created = !isnull;
	char	   *payload = page_str(tt, r, 9);
	bool		encrypted = DatumGetBool(page_col(tt, r, 15, &isnull));
	char	   *txn = page_str(tt, r, 2);
	/* the frame's envelope, sealed to its partition and transaction id */
	QsSeal		seal = {&pid, txn, txn ? (int) strlen(txn) : 0};
	char	   *plain;
	int			plen;

	if (!have_created && !mid_null)
		have_created = uuid7_time(DatumGetUUIDP(mid), &created_at);

	qsj_object(j, NULL);
	qsj_uuid(j, "id", mid_null ? NULL : DatumGetUUIDP(mid));
	qsj_str(j, "transactionId", page_str(tt, r, 2));
	qsj_uuid(j, "partitionId", &pid);
	qsj_str(j, "queue", page_str(tt, r, 4));
	qsj_str(j, "partition", page_str(tt, r, 5));
	qsj_str(j, "consumerGroup", page_str(tt, r, 6));
	qsj_str(j, "errorMessage", page_str(tt, r, 7));
	qsj_int(j, "retryCount", DatumGetInt32(page_col(tt, r, 8, &isnull)));
	/* stored as the frame's envelope: opened here, for the reader */
	if (payload && encrypted && qs_decrypt_payload(&seal, payload, strlen(payload), &plain, &plen))
		qsj_raw(j, "data", plain, plen);
	else
		qsj_raw(j, "data", payload, payload ? strlen(payload) : 0);
	if (f && f->psub)
		qsj_strn(j, "producerSub", f->psub, f->psub_len);
	else
		qsj_null(j, "producerSub");
	if (have_created)
		qsj_time(j, "createdAt", created_at);
	else
		qsj_null(j, "createdAt");
	qsj_time(j, "failedAt", DatumGetTimestampTz(page_col(tt, r, 10, &isnull)));
	qsj_end_object(j);
}

/* SQL: queen.dlq(queue, consumer_group, partition, from_time, to_time, lim, off, tenant) */
PG_FUNCTION_INFO_V1(qs_dlq);
Datum
qs_dlq(PG_FUNCTION_ARGS)
{
	pg_uuid_t	tenant;
	Datum		args[8];
	char		nulls[8] = "        ";
	int			lim,
				off;
	int64		total;
	SegCache	cache = {false};
	QsJson		j;

	qs_tenant_arg(fcinfo, 7, &tenant);
	qs_page_args(fcinfo, 5, 6, 100, &lim, &off);
	args[0] = qs_uuid_datum(&tenant);
	args[1] = filter_arg(fcinfo, 0, &nulls[1]);
	args[2] = filter_arg(fcinfo, 1, &nulls[2]);
	args[3] = filter_arg(fcinfo, 2, &nulls[3]);
	for (int i = 3; i <= 4; i++)
	{
		nulls[i + 1] = PG_ARGISNULL(i) ? 'n' : ' ';
		args[i + 1] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
	}
	args[6] = Int32GetDatum(lim);
	args[7] = Int32GetDatum(off);

	qsj_init(&j);
	qs_spi_connect();
	qs_exec(&dlq_count_plan, args, nulls, 1);
	total = qs_col_int64(0, 1, 0);

	qsj_object(&j, NULL);
	qsj_array(&j, "messages");
	if (lim > 0 && off < total)
	{
		SPITupleTable *page;
		uint64		nrows;

		qs_exec(&dlq_page_plan, args, nulls, 0);
		page = SPI_tuptable;
		nrows = SPI_processed;
		for (uint64 r = 0; r < nrows; r++)
		{
			CHECK_FOR_INTERRUPTS();
			emit_dead_letter(&j, page, r, &cache);
		}
	}
	qsj_end_array(&j);
	qsj_object(&j, "pagination");
	qsj_int(&j, "limit", lim);
	qsj_int(&j, "offset", off);
	qsj_end_object(&j);
	qsj_int(&j, "total", total);
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/* ------------------------------------------------------------------------
 * queen.delete_message and queen.retry_message
 * ------------------------------------------------------------------------ */

/* Every dead-letter row of the message (one per group that gave up on it). */
static QsPlan take_dlq_plan = {
	"DELETE FROM queen.log_dlq d USING queen.log_partitions p, queen.queues q"
	" WHERE d.partition_id = $1 AND d.transaction_id = $2"
	"   AND p.id = d.partition_id AND q.id = p.queue_id AND q.tenant_id = $3"
	" RETURNING d.payload::text, d.\"offset\", d.failed_at, q.name::text, p.name, d.encrypted",
	3, {UUIDOID, TEXTOID, UUIDOID}
};

static uint64
take_dead_letters(const pg_uuid_t *tenant, const pg_uuid_t *pid, const char *txn)
{
	Datum		args[3];

	args[0] = qs_uuid_datum(pid);
	args[1] = CStringGetTextDatum(txn);
	args[2] = qs_uuid_datum(tenant);
	qs_exec(&take_dlq_plan, args, NULL, 0);
	return SPI_processed;
}

/* SQL: queen.delete_message(partition_id uuid, transaction_id text, tenant uuid) */
PG_FUNCTION_INFO_V1(qs_delete_message);
Datum
qs_delete_message(PG_FUNCTION_ARGS)
{
	pg_uuid_t	tenant,
				pid;
	char	   *txn = qs_message_args(fcinfo, &pid);
	uint64		n;
	const char *message;
	QsJson		j;

	qs_tenant_arg(fcinfo, 2, &tenant);
	qsj_init(&j);
	qs_spi_connect();
	n = take_dead_letters(&tenant, &pid, txn);
	if (n == 1)
		message = "dead letter deleted";
	else if (n > 1)
		message = psprintf(UINT64_FORMAT " dead letters deleted", n);
	else
	{
		switch (qs_txn_presence(&tenant, &pid, txn))
		{
			case QS_TXN_FOUND:
				message = "message is not dead-lettered: messages in the log cannot be deleted one by one";
				break;
			case QS_TXN_UNKNOWN:
				message = "no dead letter for this message: messages in the log cannot be deleted one by one";
				break;
			default:
				message = "message not found";
				break;
		}
	}
	qsj_object(&j, NULL);
	qsj_bool(&j, "success", n > 0);
	qsj_uuid(&j, "partitionId", &pid);
	qsj_str(&j, "transactionId", txn);
	qsj_str(&j, "message", message);
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/*
 * The item that requeues a dead letter: the newest row's payload (an
 * encrypted frame's dead letter holds its envelope, opened here, so the push
 * core wraps it exactly once for an encrypted queue; without the key the
 * requeue is refused rather than storing an envelope inside an envelope),
 * and the original frame's trace id and producer while its segment is
 * still live.
 */
static void
requeue_item(const pg_uuid_t *pid, const char *txn, QsPushItem *it)
{
	int			newest = 0;
	bool		isnull;
	char	   *payload;
	int64		offset;
	QsFrame		f;
	char	   *plain;
	int			plen;

	for (uint64 r = 1; r < SPI_processed; r++)
		if (DatumGetTimestampTz(qs_col(r, 3, &isnull)) > DatumGetTimestampTz(qs_col(newest, 3, &isnull)))
			newest = r;
	payload = SPI_getvalue(SPI_tuptable->vals[newest], SPI_tuptable->tupdesc, 1);
	offset = qs_col_int64(newest, 2, -1);
	it->queue = SPI_getvalue(SPI_tuptable->vals[newest], SPI_tuptable->tupdesc, 4);
	it->partition = SPI_getvalue(SPI_tuptable->vals[newest], SPI_tuptable->tupdesc, 5);

	qs_uuid7(&it->id);
	it->txn = txn;
	it->txn_len = strlen(txn);
	it->txn_given = false;		/* a requeue, not a client retry: never a duplicate */
	it->payload = payload ? payload : "";
	it->payload_len = payload ? strlen(payload) : 0;
	if (it->payload_len > 0 && DatumGetBool(qs_col(newest, 6, &isnull)))
	{
		/* sealed to the frame it came from: this partition, this transaction id */
		QsSeal		seal = {pid, txn, (int) strlen(txn)};

		if (!qs_decrypt_payload(&seal, it->payload, it->payload_len, &plain, &plen))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot requeue an encrypted dead letter that does not decrypt"),
					 errdetail("Nothing was requeued."),
					 errhint("Configure the encryption key the message was stored with.")));
		it->payload = plain;
		it->payload_len = plen;
	}
	if (qs_frame_at(pid, offset, &f) && f.txn_len == it->txn_len &&
		memcmp(f.txn, txn, f.txn_len) == 0)
	{
		if (f.trace)
		{
			it->has_trace = true;
			memcpy(it->trace.data, f.trace, UUID_LEN);
		}
		it->psub = f.psub;
		it->psub_len = f.psub_len;
	}
}

/* SQL: queen.retry_message(partition_id uuid, transaction_id text, tenant uuid) */
PG_FUNCTION_INFO_V1(qs_retry_message);
Datum
qs_retry_message(PG_FUNCTION_ARGS)
{
	pg_uuid_t	tenant,
				pid;
	char	   *txn = qs_message_args(fcinfo, &pid);
	QsPushItem	it;
	int			ng;
	QsJson		j;

	qs_tenant_arg(fcinfo, 2, &tenant);
	memset(&it, 0, sizeof(it));
	qsj_init(&j);
	qs_spi_connect();
	/* deleting first claims the rows: a concurrent retry finds none */
	if (take_dead_letters(&tenant, &pid, txn) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("dead letter not found"),
				 errdetail("Partition %s has no dead letter with transaction id \"%s\".",
						   DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(&pid))), txn)));
	requeue_item(&pid, txn, &it);
	qs_push_items(&tenant, &it, 1, true, &ng);
	if (it.status != QS_PUSH_QUEUED)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("requeued dead letter was not appended")));

	qsj_object(&j, NULL);
	qsj_bool(&j, "success", true);
	qsj_uuid(&j, "partitionId", &pid);
	qsj_str(&j, "transactionId", txn);
	qsj_uuid(&j, "messageId", &it.result_id);
	qsj_str(&j, "queue", it.queue);
	qsj_str(&j, "partition", it.partition);
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
