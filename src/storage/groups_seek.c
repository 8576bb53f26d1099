/*
 * groups_seek.c: moving a consumer group's cursors: to the end of a queue
 * or of one partition, or to a point in time.
 *
 * A seek releases the moved cursor's lease and retry state, so the next pop
 * starts right after the new position. Cursor rows are locked in partition
 * id order, as ack locks them.
 */
#include "storage/storage.h"
#include "storage/pop_ready.h"
#include "common/args.h"
#include "common/ids.h"
#include "common/spi.h"

#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "utils/builtins.h"

/* The group's cursor rows on a queue, locked in partition id order as ack does. */
static QsPlan lock_cursors_plan = {
	"SELECT c.partition_id, p.last_offset, p.log_start"
	"  FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id"
	" WHERE p.queue_id = $1 AND c.consumer_group = $2"
	" ORDER BY c.partition_id FOR UPDATE OF c",
	2, {UUIDOID, TEXTOID}
};

static QsPlan lock_cursor_plan = {
	"SELECT 1 FROM queen.log_consumers WHERE partition_id = $1 AND consumer_group = $2 FOR UPDATE",
	2, {UUIDOID, TEXTOID}
};

static QsPlan move_release_plan = {
	"UPDATE queen.log_consumers"
	"   SET committed = $3, worker_id = NULL, batch_end = NULL, lease_expires_at = NULL,"
	"       batch_retry_count = 0, attempt_offset = NULL, attempt_count = 0"
	" WHERE partition_id = $1 AND consumer_group = $2",
	3, {UUIDOID, TEXTOID, INT8OID}
};

static QsPlan partition_plan = {
	"SELECT p.id, p.last_offset FROM queen.log_partitions p"
	"  JOIN queen.queues q ON q.id = p.queue_id"
	" WHERE q.tenant_id = $1 AND q.name = $2 AND p.name = $3",
	3, {UUIDOID, TEXTOID, TEXTOID}
};

/*
 * The cursor that makes the next pop start right after the last message
 * created at or before ts: the end of the newest such segment, else
 * log_start - 1. created_at grows with base_offset, so a binary search over
 * offsets finds it in O(log n) primary-key probes.
 */
static int64
cursor_for_timestamp(Datum pid, int64 log_start, int64 last_offset, TimestampTz ts)
{
	int64		answer = log_start - 1;
	int64		lo = log_start,
				hi = last_offset;

	while (lo <= hi)
	{
		int64		mid = lo + (hi - lo) / 2;
		int64		base,
					end;
		TimestampTz created;

		CHECK_FOR_INTERRUPTS();
		if (!qs_segment_at(pid, mid, &base, &end, &created))
			lo = mid + 1;		/* nothing at or before mid */
		else if (created <= ts)
		{
			answer = Max(answer, end);
			lo = Max(end, mid) + 1;
		}
		else
			hi = base - 1;
	}
	return answer;
}

static void
move_cursor(Datum pid, Datum grp, int64 committed)
{
	Datum		args[3];

	args[0] = pid;
	args[1] = grp;
	args[2] = Int64GetDatum(committed);
	qs_exec(&move_release_plan, args, NULL, 0);
}

/* Seek every cursor row the group has on the queue; returns how many moved. */
static int64
seek_queue(Datum queue_id, const char *group, bool to_end, TimestampTz ts)
{
	Datum		args[2];
	Datum		grp = CStringGetTextDatum(group);
	SPITupleTable *tt;
	uint64		n;
	int64		moved = 0;

	args[0] = queue_id;
	args[1] = grp;
	qs_exec(&lock_cursors_plan, args, NULL, 0);
	tt = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;
		Datum		pid = qs_uuid_datum(DatumGetUUIDP(SPI_getbinval(tt->vals[i], tt->tupdesc, 1, &isnull)));
		int64		last_offset = DatumGetInt64(SPI_getbinval(tt->vals[i], tt->tupdesc, 2, &isnull));
		int64		log_start = DatumGetInt64(SPI_getbinval(tt->vals[i], tt->tupdesc, 3, &isnull));

		CHECK_FOR_INTERRUPTS();
		if (to_end && last_offset < 0)
			continue;			/* never written: nothing to skip (Queen has no lookup row) */
		move_cursor(pid, grp,
					to_end ? last_offset : cursor_for_timestamp(pid, log_start, last_offset, ts));
		moved++;
	}
	return moved;
}

/* SQL: queen.seek(consumer_group, queue, request, tenant) */
PG_FUNCTION_INFO_V1(qs_seek);
Datum
qs_seek(PG_FUNCTION_ARGS)
{
	char	   *group = qs_required_text_arg(fcinfo, 0, "consumer group");
	char	   *queue = qs_required_text_arg(fcinfo, 1, "queue");
	JsonbContainer *obj;
	bool		to_end;
	char	   *stamp;
	TimestampTz ts = 0;
	pg_uuid_t	tenant;
	int64		moved;
	QsJson		j;

	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("request body must be a JSON object")));
	obj = qs_json_object_arg(PG_GETARG_JSONB_P(2), "request body");
	to_end = qs_json_bool(obj, "toEnd", "seek request", false);
	stamp = qs_json_string(obj, "timestamp", "seek request", false);
	if (stamp && stamp[0] == '\0')
		stamp = NULL;
	if (!to_end && stamp == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("must specify either 'toEnd': true or 'timestamp'")));
	if (!to_end)
		ts = qs_parse_timestamp(stamp, "timestamp");
	qs_tenant_arg(fcinfo, 3, &tenant);

	qsj_init(&j);
	qs_spi_connect();
	{
		Datum		queue_id = qs_queue_id(&tenant, queue);

		moved = seek_queue(queue_id, group, to_end, ts);
		qs_ready_forget(&tenant, group, queue_id, false);	/* cursors may have moved back */
	}
	qs_spi_finish();

	qsj_object(&j, NULL);
	qsj_bool(&j, "success", true);
	qsj_str(&j, "consumerGroup", group);
	qsj_str(&j, "queueName", queue);
	qsj_bool(&j, "seekToEnd", to_end);
	qsj_time_ms_or_null(&j, "targetTimestamp", !to_end, ts);
	qsj_int(&j, "partitionsUpdated", moved);
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/* SQL: queen.seek_partition(consumer_group, queue, partition, tenant) */
PG_FUNCTION_INFO_V1(qs_seek_partition);
Datum
qs_seek_partition(PG_FUNCTION_ARGS)
{
	char	   *group = qs_required_text_arg(fcinfo, 0, "consumer group");
	char	   *queue = qs_required_text_arg(fcinfo, 1, "queue");
	char	   *partition = qs_required_text_arg(fcinfo, 2, "partition");
	pg_uuid_t	tenant;
	Datum		args[3];
	Datum		pid;
	int64		last_offset;
	bool		updated,
				isnull;
	QsJson		j;

	qs_tenant_arg(fcinfo, 3, &tenant);
	qsj_init(&j);
	qs_spi_connect();
	args[0] = qs_uuid_datum(&tenant);
	args[1] = CStringGetTextDatum(queue);
	args[2] = CStringGetTextDatum(partition);
	qs_exec(&partition_plan, args, NULL, 1);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("partition not found"),
				 errdetail("No partition \"%s\" of queue \"%s\" exists for this tenant.",
						   partition, queue)));
	pid = qs_uuid_datum(DatumGetUUIDP(qs_col(0, 1, &isnull)));
	last_offset = qs_col_int64(0, 2, -1);

	args[0] = pid;
	args[1] = CStringGetTextDatum(group);
	qs_exec(&lock_cursor_plan, args, NULL, 1);
	updated = SPI_processed == 1;
	if (updated)
	{
		move_cursor(pid, args[1], last_offset);
		qs_ready_consumed(pid, args[1]);
	}
	qs_spi_finish();

	qsj_object(&j, NULL);
	qsj_bool(&j, "success", true);
	qsj_str(&j, "consumerGroup", group);
	qsj_str(&j, "queueName", queue);
	qsj_str(&j, "partitionName", partition);
	qsj_bool(&j, "updated", updated);
	if (updated)
		qsj_int(&j, "cursorMovedTo", last_offset);
	else
		qsj_null(&j, "cursorMovedTo");
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
