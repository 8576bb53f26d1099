/*
 * message_get.c: queen.message, one message by partition and transaction id
 * (GET /api/v1/messages/:partitionId/:transactionId), with its
 * payload decrypted when its frame is flagged ENCRYPTED, its status from the
 * __QUEUE_MODE__ cursor, and every consumer group's view of it.
 *
 * The offset comes from the hash sidecar (newest match first). Below
 * txns_start the hashes are purged, so there the segments themselves are
 * read, newest first, until the transaction id turns up.
 */
#include "storage/resources.h"
#include "common/args.h"
#include "common/ids.h"
#include "common/spi.h"

#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "utils/builtins.h"

typedef struct Found
{
	int64		offset;
	TimestampTz created_at;
	QsFrame		frame;
} Found;

static QsPlan owner_plan = {
	"SELECT p.name, q.name, q.namespace, q.task, q.priority, p.log_start, p.last_offset,"
	"       p.txns_start, q.lease_time, q.retry_limit, q.retry_delay, q.ttl, q.max_queue_size,"
	"       q.dead_letter_queue, q.encryption_enabled"
	"  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
	" WHERE p.id = $1 AND q.tenant_id = $2",
	2, {UUIDOID, UUIDOID}
};

static QsPlan hash_plan = {
	"SELECT t.base_offset + h.idx FROM queen.log_txns t"
	"  CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) h"
	" WHERE t.partition_id = $1 AND h.h = $2 AND t.base_offset + h.idx >= $3"
	" ORDER BY 1 DESC",
	3, {UUIDOID, BYTEAOID, INT8OID}
};

static QsPlan covering_plan = {
	"SELECT base_offset, end_offset, created_at, blob FROM queen.log_segments"
	" WHERE partition_id = $1 AND base_offset <= $2 ORDER BY base_offset DESC LIMIT 1",
	2, {UUIDOID, INT8OID}
};

/* Segments below a bound, newest first, a few at a time. */
static QsPlan older_plan = {
	"SELECT base_offset, end_offset, created_at, blob FROM queen.log_segments"
	" WHERE partition_id = $1 AND base_offset < $2 AND end_offset >= $3"
	" ORDER BY base_offset DESC LIMIT 8",
	3, {UUIDOID, INT8OID, INT8OID}
};

static QsPlan consumers_plan = {
	"SELECT consumer_group, committed, batch_end,"
	"       worker_id IS NOT NULL AND lease_expires_at > now(), lease_expires_at"
	"  FROM queen.log_consumers WHERE partition_id = $1 ORDER BY consumer_group",
	1, {UUIDOID}
};

/* The queue-mode group's row first: it decides the status. */
static QsPlan dlq_row_plan = {
	"SELECT consumer_group = '" QS_QUEUE_MODE "', error, retry_count FROM queen.log_dlq"
	" WHERE partition_id = $1 AND \"offset\" = $2"
	" ORDER BY consumer_group = '" QS_QUEUE_MODE "' DESC, failed_at DESC LIMIT 1",
	2, {UUIDOID, INT8OID}
};

static bool
frame_is(const QsFrame *f, const char *txn, int len)
{
	return f->txn_len == len && memcmp(f->txn, txn, len) == 0;
}

/* Row r of a (base, end, created_at, blob) result: the newest frame carrying txn. */
static bool
search_segment(int r, const pg_uuid_t *pid, const char *txn, int len, int64 upto, Found *out)
{
	bool		isnull;
	int64		base = qs_col_int64(r, 1, 0);
	int64		end = qs_col_int64(r, 2, 0);
	QsFrame    *frames = qs_segment_decode(DatumGetByteaPP(qs_col(r, 4, &isnull)),
										   end - base + 1, pid, base);

	for (int64 off = Min(end, upto); off >= base; off--)
		if (frame_is(&frames[off - base], txn, len))
		{
			out->offset = off;
			out->created_at = DatumGetTimestampTz(qs_col(r, 3, &isnull));
			out->frame = frames[off - base];
			return true;
		}
	return false;
}

static bool
find_by_hash(const pg_uuid_t *pid, const char *txn, int len, int64 log_start, Found *out)
{
	Datum		args[3];
	bytea	   *h = palloc(VARHDRSZ + QS_HASH_LEN);
	SPITupleTable *hits;
	uint64		nhits;

	SET_VARSIZE(h, VARHDRSZ + QS_HASH_LEN);
	qs_txn_hash(txn, len, (uint8 *) VARDATA(h));
	args[0] = qs_uuid_datum(pid);
	args[1] = PointerGetDatum(h);
	args[2] = Int64GetDatum(log_start);
	qs_exec(&hash_plan, args, NULL, 0);
	hits = SPI_tuptable;
	nhits = SPI_processed;
	for (uint64 i = 0; i < nhits; i++)
	{
		bool		isnull;
		int64		off = DatumGetInt64(SPI_getbinval(hits->vals[i], hits->tupdesc, 1, &isnull));

		CHECK_FOR_INTERRUPTS();
		args[1] = Int64GetDatum(off);
		qs_exec(&covering_plan, args, NULL, 1);
		/* a hash collision is not a match: the frame must carry the id */
		if (SPI_processed == 1 && qs_col_int64(0, 2, -1) >= off &&
			search_segment(0, pid, txn, len, off, out) && out->offset == off)
			return true;
	}
	return false;
}

/* Below txns_start no hashes are kept: read the segments there, newest first. */
static bool
find_by_scan(const pg_uuid_t *pid, const char *txn, int len, int64 log_start,
			 int64 txns_start, Found *out)
{
	Datum		args[3];
	int64		bound = txns_start;

	args[0] = qs_uuid_datum(pid);
	args[2] = Int64GetDatum(log_start);
	while (bound > log_start)
	{
		uint64		n;

		args[1] = Int64GetDatum(bound);
		qs_exec(&older_plan, args, NULL, 0);
		n = SPI_processed;
		if (n == 0)
			return false;
		for (uint64 r = 0; r < n; r++)
		{
			CHECK_FOR_INTERRUPTS();
			if (search_segment((int) r, pid, txn, len, txns_start - 1, out))
				return true;
		}
		bound = qs_col_int64((int) n - 1, 1, 0);
		SPI_freetuptable(SPI_tuptable);
	}
	return false;
}

static void
message_not_found(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("message not found")));
}

/* status, consumerGroups and mode from the cursors; leaseExpiresAt for a leased message */
static void
write_consumers(QsJson *j, const pg_uuid_t *pid, int64 off, int64 log_start,
				bool qm_dead, const char **status)
{
	Datum		args[1];
	bool		qm = false;
	int			bus = 0;
	bool		lease_null = true;
	TimestampTz lease = 0;

	*status = "pending";
	args[0] = qs_uuid_datum(pid);
	qs_exec(&consumers_plan, args, NULL, 0);
	qsj_array(j, "consumerGroups");
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		char	   *name = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1);
		int64		committed = Max(qs_col_int64(r, 2, -1), log_start - 1);
		bool		live = qs_col_bool(r, 4, false) && off > committed &&
			off <= qs_col_int64(r, 3, -1);
		bool		isnull;
		TimestampTz exp = live ? DatumGetTimestampTz(qs_col(r, 5, &isnull)) : 0;

		CHECK_FOR_INTERRUPTS();
		qsj_object(j, NULL);
		qsj_str(j, "name", name);
		qsj_bool(j, "consumed", committed >= off);
		qsj_time_ms_or_null(j, "leaseExpiresAt", live, exp);
		qsj_end_object(j);
		if (strcmp(name, QS_QUEUE_MODE) == 0)
		{
			qm = true;
			*status = committed >= off ? (qm_dead ? "dead_letter" : "completed")
				: live ? "processing" : "pending";
			lease_null = !live;
			lease = exp;
		}
		else
			bus++;
	}
	qsj_end_array(j);
	qsj_time_ms_or_null(j, "leaseExpiresAt", !lease_null, lease);
	qsj_object(j, "mode");
	qsj_bool(j, "hasQueueMode", qm);
	qsj_int(j, "busGroupsCount", bus);
	qsj_str(j, "type", bus == 0 ? "queue" : qm ? "hybrid" : "bus");
	qsj_end_object(j);
}

static void
write_payload(QsJson *j, const pg_uuid_t *pid, const QsFrame *f)
{
	bool		enc = (f->flags & QS_FLAG_ENCRYPTED) != 0;
	char	   *plain;
	int			plen;
	QsSeal		seal = {pid, f->txn, f->txn_len};

	if (enc && qs_decrypt_payload(&seal, f->payload, f->payload_len, &plain, &plen))
		qsj_raw(j, "payload", plain, plen);
	else
		qsj_raw(j, "payload", f->payload, f->payload_len);
	qsj_bool(j, "isEncrypted", enc);
}

static int64
owner_int(SPITupleTable *owner, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(owner->vals[0], owner->tupdesc, col, &isnull);

	if (isnull)
		return 0;
	return TupleDescAttr(owner->tupdesc, col - 1)->atttypid == INT8OID ?
		DatumGetInt64(d) : DatumGetInt32(d);
}

static bool
owner_bool(SPITupleTable *owner, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(owner->vals[0], owner->tupdesc, col, &isnull);

	return !isnull && DatumGetBool(d);
}

static void
write_queue_config(QsJson *j, SPITupleTable *owner)
{
	qsj_object(j, "queueConfig");
	qsj_int(j, "leaseTime", owner_int(owner, 9));
	qsj_int(j, "retryLimit", owner_int(owner, 10));
	qsj_int(j, "retryDelay", owner_int(owner, 11));
	qsj_int(j, "ttl", owner_int(owner, 12));
	qsj_int(j, "maxQueueSize", owner_int(owner, 13));
	qsj_bool(j, "deadLetterQueue", owner_bool(owner, 14));
	qsj_bool(j, "encryptionEnabled", owner_bool(owner, 15));
	qsj_end_object(j);
}

/* The message's own fields, then the queue's config, its DLQ row and the cursors'. */
static void
write_found(QsJson *j, const pg_uuid_t *pid, SPITupleTable *owner, const Found *m)
{
	TupleDesc	td = owner->tupdesc;
	HeapTuple	row = owner->vals[0];
	char	   *pname = SPI_getvalue(row, td, 1);
	char	   *queue = SPI_getvalue(row, td, 2);
	int64		log_start = owner_int(owner, 6);
	pg_uuid_t	id;
	Datum		args[2];
	bool		qm_dead = false;
	bool		isnull;
	const char *status;

	memcpy(id.data, m->frame.id, UUID_LEN);
	qsj_uuid(j, "id", &id);
	qsj_strn(j, "transactionId", m->frame.txn, m->frame.txn_len);
	qsj_uuid(j, "partitionId", pid);
	qsj_str(j, "queuePath", psprintf("%s/%s", queue, pname));
	qsj_str(j, "queue", queue);
	qsj_str(j, "partition", pname);
	qsj_str(j, "namespace", SPI_getvalue(row, td, 3));
	qsj_str(j, "task", SPI_getvalue(row, td, 4));
	qsj_int(j, "queuePriority", owner_int(owner, 5));
	qsj_uuid_bytes(j, "traceId", m->frame.trace);
	if (m->frame.psub)
		qsj_strn(j, "producerSub", m->frame.psub, m->frame.psub_len);
	else
		qsj_null(j, "producerSub");
	qsj_time_ms(j, "createdAt", m->created_at);
	write_payload(j, pid, &m->frame);
	write_queue_config(j, owner);

	args[0] = qs_uuid_datum(pid);
	args[1] = Int64GetDatum(m->offset);
	qs_exec(&dlq_row_plan, args, NULL, 1);
	if (SPI_processed == 1)
	{
		qm_dead = qs_col_bool(0, 1, false);
		qsj_str(j, "errorMessage", SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2));
		qsj_int(j, "retryCount", DatumGetInt32(qs_col(0, 3, &isnull)));
	}
	else
	{
		qsj_null(j, "errorMessage");
		qsj_int(j, "retryCount", 0);
	}
	write_consumers(j, pid, m->offset, log_start, qm_dead, &status);
	qsj_str(j, "status", status);
}

/* SQL: queen.message(partition_id, transaction_id, tenant) -> GET /api/v1/messages/:p/:t */
PG_FUNCTION_INFO_V1(qs_message);
Datum
qs_message(PG_FUNCTION_ARGS)
{
	pg_uuid_t	pid,
				tenant;
	char	   *txn;
	int			len;
	Datum		args[2];
	SPITupleTable *owner;
	int64		log_start,
				txns_start;
	Found		m;
	QsJson		j;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("partitionId is required")));
	pid = *PG_GETARG_UUID_P(0);
	txn = qs_text_arg(fcinfo, 1);
	if (txn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("transactionId is required")));
	len = strlen(txn);
	qs_tenant_arg(fcinfo, 2, &tenant);

	qsj_init(&j);
	qs_spi_connect();
	args[0] = qs_uuid_datum(&pid);
	args[1] = qs_uuid_datum(&tenant);
	qs_exec(&owner_plan, args, NULL, 1);
	if (SPI_processed == 0)
		message_not_found();
	owner = SPI_tuptable;
	log_start = owner_int(owner, 6);
	txns_start = owner_int(owner, 8);
	if (!find_by_hash(&pid, txn, len, log_start, &m) &&
		!find_by_scan(&pid, txn, len, log_start, txns_start, &m))
		message_not_found();

	qsj_object(&j, NULL);
	write_found(&j, &pid, owner, &m);
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
