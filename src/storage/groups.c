/*
 * groups.c: consumer groups: the list, the lagging partitions, one
 * group's details, delete and the subscription update (seeks:
 * groups_seek.c).
 *
 * A group's position on a partition is its cursor row in queen.log_consumers
 * (committed = the last consumed offset). Lag is measured with offsets:
 *   offset lag = last_offset - max(committed, log_start - 1)
 *   time lag   = now - created_at of the segment holding the first
 *                unconsumed offset (one primary-key probe; never a blob).
 * Every function sees only the queues of its tenant.
 */
#include "storage/storage.h"
#include "storage/pop_ready.h"
#include "common/args.h"
#include "common/ids.h"
#include "common/spi.h"

#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "utils/builtins.h"

/* One cursor row with its partition, subscription and lag. */
typedef struct CursorRow
{
	char	   *group;
	char	   *queue;
	char	   *partition;
	Datum		pid;
	int64		last_offset;
	int64		log_start;
	int64		committed;
	int64		total_consumed;
	char	   *worker;			/* NULL when none */
	bool		lease_active;
	char	   *sub_mode;		/* NULL when the group has no subscription row */
	bool		has_sub_ts;
	TimestampTz sub_ts;
	bool		has_sub_created;
	TimestampTz sub_created;
	/* computed */
	int64		offset_lag;
	int64		time_lag;		/* seconds */
	bool		has_oldest;
	TimestampTz oldest;			/* created_at of the first unconsumed offset */
	bool		has_last;
	TimestampTz last_consumed;	/* created_at of the message at the cursor */
} CursorRow;

#define CURSOR_COLUMNS \
	"SELECT c.consumer_group, q.name, p.name, p.id, p.last_offset, p.log_start," \
	"       c.committed, c.total_consumed, c.worker_id," \
	"       c.worker_id IS NOT NULL AND c.lease_expires_at > clock_timestamp()," \
	"       m.subscription_mode, m.subscription_timestamp, m.created_at" \
	"  FROM queen.log_consumers c" \
	"  JOIN queen.log_partitions p ON p.id = c.partition_id" \
	"  JOIN queen.queues q ON q.id = p.queue_id" \
	"  LEFT JOIN queen.consumer_groups_metadata m" \
	"         ON m.queue_id = q.id AND m.consumer_group = c.consumer_group"
#define CURSOR_ORDER \
	" ORDER BY c.consumer_group COLLATE \"C\", q.name COLLATE \"C\", p.name COLLATE \"C\""

static QsPlan all_cursors_plan = {
	CURSOR_COLUMNS " WHERE q.tenant_id = $1" CURSOR_ORDER,
	1, {UUIDOID}
};

static QsPlan group_cursors_plan = {
	CURSOR_COLUMNS " WHERE q.tenant_id = $1 AND c.consumer_group = $2" CURSOR_ORDER,
	2, {UUIDOID, TEXTOID}
};

/* $3 NULL: every queue of the tenant. Rows locked in partition id order first. */
static QsPlan delete_cursors_plan = {
	"WITH l AS MATERIALIZED ("
	"  SELECT c.partition_id FROM queen.log_consumers c"
	"    JOIN queen.log_partitions p ON p.id = c.partition_id"
	"    JOIN queen.queues q ON q.id = p.queue_id"
	"   WHERE q.tenant_id = $1 AND c.consumer_group = $2 AND ($3::uuid IS NULL OR q.id = $3)"
	"   ORDER BY c.partition_id FOR UPDATE OF c)"
	"DELETE FROM queen.log_consumers d USING l"
	" WHERE d.partition_id = l.partition_id AND d.consumer_group = $2",
	3, {UUIDOID, TEXTOID, UUIDOID}
};

static QsPlan delete_metadata_plan = {
	"DELETE FROM queen.consumer_groups_metadata"
	" WHERE tenant_id = $1 AND consumer_group = $2 AND ($3::uuid IS NULL OR queue_id = $3)",
	3, {UUIDOID, TEXTOID, UUIDOID}
};

/* Queen stores no row for 'all' groups, so its update never touches them. */
static QsPlan update_subscription_plan = {
	"UPDATE queen.consumer_groups_metadata SET subscription_timestamp = $3"
	" WHERE tenant_id = $1 AND consumer_group = $2 AND subscription_mode <> 'all'",
	3, {UUIDOID, TEXTOID, TIMESTAMPTZOID}
};

/* --------------------------------------------------------- reading cursors */

static char *
col_text(HeapTuple tup, TupleDesc desc, int col)
{
	return SPI_getvalue(tup, desc, col);	/* NULL for SQL NULL */
}

static void
read_cursor_row(HeapTuple tup, TupleDesc desc, CursorRow *r)
{
	bool		isnull;
	Datum		d;

	r->group = col_text(tup, desc, 1);
	r->queue = col_text(tup, desc, 2);
	r->partition = col_text(tup, desc, 3);
	r->pid = qs_uuid_datum(DatumGetUUIDP(SPI_getbinval(tup, desc, 4, &isnull)));
	r->last_offset = DatumGetInt64(SPI_getbinval(tup, desc, 5, &isnull));
	r->log_start = DatumGetInt64(SPI_getbinval(tup, desc, 6, &isnull));
	r->committed = DatumGetInt64(SPI_getbinval(tup, desc, 7, &isnull));
	r->total_consumed = DatumGetInt64(SPI_getbinval(tup, desc, 8, &isnull));
	r->worker = col_text(tup, desc, 9);
	d = SPI_getbinval(tup, desc, 10, &isnull);
	r->lease_active = !isnull && DatumGetBool(d);
	r->sub_mode = col_text(tup, desc, 11);
	d = SPI_getbinval(tup, desc, 12, &isnull);
	r->has_sub_ts = !isnull;
	r->sub_ts = isnull ? 0 : DatumGetTimestampTz(d);
	d = SPI_getbinval(tup, desc, 13, &isnull);
	r->has_sub_created = !isnull;
	r->sub_created = isnull ? 0 : DatumGetTimestampTz(d);
}

/* Offset lag, time lag and (when asked) the last consumed message's time. */
static void
compute_lag(CursorRow *r, TimestampTz now, bool want_last)
{
	int64		pos = Max(r->committed, r->log_start - 1);
	int64		base,
				end;
	TimestampTz created;

	r->offset_lag = Max(r->last_offset - pos, 0);
	r->time_lag = 0;
	r->has_oldest = false;
	r->has_last = false;
	if (r->offset_lag > 0 && qs_segment_at(r->pid, pos + 1, &base, &end, &created))
	{
		r->has_oldest = true;
		r->oldest = created;
		r->time_lag = Max((now - created) / USECS_PER_SEC, 0);
	}
	/* a cursor seeded by a subscription or moved by a seek consumed nothing */
	if (want_last && r->total_consumed > 0 && r->committed >= r->log_start &&
		qs_segment_at(r->pid, r->committed, &base, &end, &created) && end >= r->committed)
	{
		r->has_last = true;
		r->last_consumed = created;
	}
}

/* Every cursor row the plan selects, with its lag (inside SPI). */
static CursorRow *
load_cursors(QsPlan *plan, Datum *args, bool want_last, int *nrows)
{
	SPITupleTable *tt;
	uint64		n;
	CursorRow  *rows;
	TimestampTz now = GetCurrentTimestamp();

	qs_exec(plan, args, NULL, 0);
	tt = SPI_tuptable;
	n = SPI_processed;
	rows = palloc0(sizeof(CursorRow) * Max(n, 1));
	for (uint64 i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		read_cursor_row(tt->vals[i], tt->tupdesc, &rows[i]);
		compute_lag(&rows[i], now, want_last);
	}
	*nrows = (int) n;
	return rows;
}

/* --------------------------------------------------- GET /consumer-groups */

/* One (group, queue) entry over rows[from, to). */
static void
emit_group_entry(QsJson *j, CursorRow *rows, int from, int to)
{
	CursorRow  *first = &rows[from];
	int64		lagging = 0,
				total_lag = 0,
				max_time_lag = 0;
	bool		consumed = false;
	const char *state;

	for (int i = from; i < to; i++)
	{
		lagging += rows[i].offset_lag > 0;
		total_lag += rows[i].offset_lag;
		max_time_lag = Max(max_time_lag, rows[i].time_lag);
		consumed |= rows[i].total_consumed > 0;
	}
	state = max_time_lag > 300 ? "Lagging" : consumed ? "Stable" : "Dead";

	qsj_object(j, NULL);
	qsj_str(j, "name", first->group);
	qsj_array(j, "topics");
	qsj_str(j, NULL, first->queue);
	qsj_end_array(j);
	qsj_str(j, "queueName", first->queue);
	qsj_int(j, "members", to - from);
	qsj_int(j, "partitionsWithLag", lagging);
	qsj_int(j, "totalLag", total_lag);
	qsj_int(j, "maxTimeLag", max_time_lag);
	qsj_str(j, "state", state);
	if (first->sub_mode)
		qsj_str(j, "subscriptionMode", first->sub_mode);
	else
		qsj_null(j, "subscriptionMode");
	qsj_time_ms_or_null(j, "subscriptionTimestamp", first->has_sub_ts, first->sub_ts);
	qsj_time_ms_or_null(j, "subscriptionCreatedAt", first->has_sub_created, first->sub_created);
	qsj_end_object(j);
}

/* SQL: queen.consumer_groups(tenant) */
PG_FUNCTION_INFO_V1(qs_consumer_groups);
Datum
qs_consumer_groups(PG_FUNCTION_ARGS)
{
	pg_uuid_t	tenant;
	Datum		args[1];
	CursorRow  *rows;
	int			n,
				from = 0;
	QsJson		j;

	qs_tenant_arg(fcinfo, 0, &tenant);
	qsj_init(&j);
	qs_spi_connect();
	args[0] = qs_uuid_datum(&tenant);
	rows = load_cursors(&all_cursors_plan, args, false, &n);
	qsj_array(&j, NULL);
	for (int i = 1; i <= n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (i < n && strcmp(rows[i].group, rows[from].group) == 0 &&
			strcmp(rows[i].queue, rows[from].queue) == 0)
			continue;
		emit_group_entry(&j, rows, from, i);
		from = i;
	}
	qsj_end_array(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/* ------------------------------------------- GET /consumer-groups/lagging */

/* Largest time lag first; ties in name order so the answer is stable. */
static int
lag_cmp(const void *a, const void *b)
{
	const CursorRow *x = *(CursorRow *const *) a;
	const CursorRow *y = *(CursorRow *const *) b;
	int			r;

	if (x->time_lag != y->time_lag)
		return x->time_lag > y->time_lag ? -1 : 1;
	if ((r = strcmp(x->queue, y->queue)) != 0)
		return r;
	if ((r = strcmp(x->partition, y->partition)) != 0)
		return r;
	return strcmp(x->group, y->group);
}

static void
emit_lagging_row(QsJson *j, const CursorRow *r)
{
	char		hours[32];
	int64		hundredths = (r->time_lag + 18) / 36;	/* seconds / 3600, 2 decimals */

	snprintf(hours, sizeof(hours), INT64_FORMAT ".%02d",
			 hundredths / 100, (int) (hundredths % 100));
	qsj_object(j, NULL);
	qsj_str(j, "consumer_group", r->group);
	qsj_str(j, "queue_name", r->queue);
	qsj_str(j, "partition_name", r->partition);
	qsj_uuid(j, "partition_id", DatumGetUUIDP(r->pid));
	if (r->worker)
		qsj_str(j, "worker_id", r->worker);
	else
		qsj_null(j, "worker_id");
	qsj_int(j, "offset_lag", r->offset_lag);
	qsj_int(j, "time_lag_seconds", r->time_lag);
	qsj_raw(j, "lag_hours", hours, strlen(hours));
	qsj_time_ms_or_null(j, "oldest_unconsumed_at", r->has_oldest, r->oldest);
	qsj_time_ms_or_null(j, "last_consumed_at", r->has_last, r->last_consumed);
	qsj_end_object(j);
}

/* SQL: queen.consumer_groups_lagging(min_lag_seconds, tenant) */
PG_FUNCTION_INFO_V1(qs_consumer_groups_lagging);
Datum
qs_consumer_groups_lagging(PG_FUNCTION_ARGS)
{
	int			min_lag = PG_ARGISNULL(0) ? 3600 : PG_GETARG_INT32(0);
	pg_uuid_t	tenant;
	Datum		args[1];
	CursorRow  *rows;
	CursorRow **keep;
	int			n,
				nkeep = 0;
	QsJson		j;

	qs_tenant_arg(fcinfo, 1, &tenant);
	qsj_init(&j);
	qs_spi_connect();
	args[0] = qs_uuid_datum(&tenant);
	rows = load_cursors(&all_cursors_plan, args, true, &n);
	keep = palloc(sizeof(CursorRow *) * Max(n, 1));
	for (int i = 0; i < n; i++)
		if (rows[i].offset_lag > 0 && rows[i].time_lag > min_lag)
			keep[nkeep++] = &rows[i];
	qsort(keep, nkeep, sizeof(CursorRow *), lag_cmp);
	qsj_array(&j, NULL);
	for (int i = 0; i < nkeep; i++)
	{
		CHECK_FOR_INTERRUPTS();
		emit_lagging_row(&j, keep[i]);
	}
	qsj_end_array(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/* -------------------------------------------- GET /consumer-groups/:group */

static void
emit_detail_partition(QsJson *j, const CursorRow *r)
{
	qsj_object(j, NULL);
	qsj_str(j, "partition", r->partition);
	if (r->worker)
		qsj_str(j, "workerId", r->worker);
	else
		qsj_null(j, "workerId");
	qsj_time_ms_or_null(j, "lastConsumedAt", r->has_last, r->last_consumed);
	qsj_int(j, "totalConsumed", r->total_consumed);
	qsj_int(j, "offsetLag", r->offset_lag);
	qsj_int(j, "timeLagSeconds", r->time_lag);
	qsj_bool(j, "leaseActive", r->lease_active);
	qsj_end_object(j);
}

/* SQL: queen.consumer_group(consumer_group, tenant) */
PG_FUNCTION_INFO_V1(qs_consumer_group);
Datum
qs_consumer_group(PG_FUNCTION_ARGS)
{
	char	   *group = qs_required_text_arg(fcinfo, 0, "consumer group");
	pg_uuid_t	tenant;
	Datum		args[2];
	CursorRow  *rows;
	int			n;
	QsJson		j;

	qs_tenant_arg(fcinfo, 1, &tenant);
	qsj_init(&j);
	qs_spi_connect();
	args[0] = qs_uuid_datum(&tenant);
	args[1] = CStringGetTextDatum(group);
	rows = load_cursors(&group_cursors_plan, args, true, &n);
	qsj_object(&j, NULL);
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (i == 0 || strcmp(rows[i].queue, rows[i - 1].queue) != 0)
		{
			if (i > 0)
			{
				qsj_end_array(&j);
				qsj_end_object(&j);
			}
			qsj_object(&j, rows[i].queue);
			qsj_array(&j, "partitions");
		}
		emit_detail_partition(&j, &rows[i]);
	}
	if (n > 0)
	{
		qsj_end_array(&j);
		qsj_end_object(&j);
	}
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/* ----------------------------------------- DELETE /consumer-groups/:group */

/* SQL: queen.delete_consumer_group(consumer_group, queue, delete_metadata, tenant) */
PG_FUNCTION_INFO_V1(qs_delete_consumer_group);
Datum
qs_delete_consumer_group(PG_FUNCTION_ARGS)
{
	char	   *group = qs_required_text_arg(fcinfo, 0, "consumer group");
	char	   *queue = PG_ARGISNULL(1) ? NULL : qs_required_text_arg(fcinfo, 1, "queue");
	bool		delete_metadata = PG_ARGISNULL(2) ? true : PG_GETARG_BOOL(2);
	pg_uuid_t	tenant;
	Datum		args[3];
	char		nulls[3] = "   ";
	int64		deleted;
	QsJson		j;

	qs_tenant_arg(fcinfo, 3, &tenant);
	qsj_init(&j);
	qs_spi_connect();
	args[0] = qs_uuid_datum(&tenant);
	args[1] = CStringGetTextDatum(group);
	if (queue)
		args[2] = qs_queue_id(&tenant, queue);
	else
	{
		args[2] = (Datum) 0;
		nulls[2] = 'n';
	}
	qs_exec(&delete_cursors_plan, args, nulls, 0);
	deleted = (int64) SPI_processed;
	qs_ready_forget(&tenant, group, args[2], queue == NULL);
	if (delete_metadata)
		qs_exec(&delete_metadata_plan, args, nulls, 0);
	qs_spi_finish();

	qsj_object(&j, NULL);
	qsj_bool(&j, "success", true);
	qsj_str(&j, "consumerGroup", group);
	if (queue)
		qsj_str(&j, "queueName", queue);
	qsj_int(&j, "deletedPartitions", deleted);
	qsj_bool(&j, "metadataDeleted", delete_metadata);
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/* ------------------------------- POST /consumer-groups/:group/subscription */

/* SQL: queen.update_subscription(consumer_group, request, tenant) */
PG_FUNCTION_INFO_V1(qs_update_subscription);
Datum
qs_update_subscription(PG_FUNCTION_ARGS)
{
	char	   *group = qs_required_text_arg(fcinfo, 0, "consumer group");
	JsonbContainer *obj;
	JsonbValue	v;
	char	   *stamp;
	TimestampTz ts;
	pg_uuid_t	tenant;
	Datum		args[3];
	int64		updated;
	QsJson		j;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("request body must be a JSON object")));
	obj = qs_json_object_arg(PG_GETARG_JSONB_P(1), "request body");
	if (!qs_json_get(obj, "subscriptionTimestamp", &v))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("missing subscriptionTimestamp in request body")));
	stamp = qs_json_string(obj, "subscriptionTimestamp", "subscription request", true);
	ts = qs_parse_timestamp(stamp, "subscriptionTimestamp");
	qs_tenant_arg(fcinfo, 2, &tenant);

	qsj_init(&j);
	qs_spi_connect();
	args[0] = qs_uuid_datum(&tenant);
	args[1] = CStringGetTextDatum(group);
	args[2] = TimestampTzGetDatum(ts);
	qs_exec(&update_subscription_plan, args, NULL, 0);
	updated = (int64) SPI_processed;
	qs_ready_forget(&tenant, group, (Datum) 0, true);	/* unmet partitions start elsewhere */
	qs_spi_finish();

	qsj_object(&j, NULL);
	qsj_bool(&j, "success", true);
	qsj_str(&j, "consumerGroup", group);
	qsj_str(&j, "newTimestamp", stamp);
	qsj_int(&j, "rowsUpdated", updated);
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
