/*
 * dashboard.c: queen.overview (GET /api/v1/resources/overview) and
 * queen.status (GET /api/v1/status), the dashboard's summaries,
 * over the per-partition counts of resources.c.
 *
 * What our tables cannot answer is answered with zeros or empty lists, never
 * invented: we keep no consumption times (processed rates), no request
 * counts, no worker health and no stats cache (statsAge is 0: counted live).
 * Pushed messages per bucket come from the segments' (created_at, size).
 */
#include "storage/resources.h"
#include "common/args.h"
#include "common/ids.h"
#include "common/spi.h"

#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"


/*
 * Pushed messages per time bucket, without an index on created_at (the
 * segments keep only their primary key, the pop path): each partition
 * written since `from` is read newest segment first through the key and
 * left at its first segment older than `from` (segments are appended in
 * time order), so the work is the segments in the range plus one chunk.
 */
static QsPlan active_plan = {
	"SELECT p.id FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id"
	" WHERE q.tenant_id = $1 AND ($2::text IS NULL OR q.name = $2)"
	"   AND ($3::text IS NULL OR q.namespace = $3) AND ($4::text IS NULL OR q.task = $4)"
	"   AND p.last_offset >= p.log_start"
	/* last_write_at lags the newest segment by at most a second (allocator.c) */
	"   AND p.last_write_at >= $5 - interval '1 second'",
	5, {UUIDOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID}
};

static QsPlan newer_segments_plan = {
	"SELECT base_offset, end_offset, created_at FROM queen.log_segments"
	" WHERE partition_id = $1 AND base_offset < $2 ORDER BY base_offset DESC LIMIT 256",
	2, {UUIDOID, INT8OID}
};

#define MAX_BUCKETS 100000

typedef struct Buckets
{
	TimestampTz first;			/* start of bucket 0 (aligned to 2000-01-01 UTC) */
	int64		width;			/* microseconds */
	int			n;
	int64	   *count;
} Buckets;

static TimestampTz
bucket_start(TimestampTz t, int64 width)
{
	int64		r = t % width;

	return t - (r < 0 ? r + width : r);
}

/* One partition's segments in [from, to] into the buckets. */
static void
walk_partition(Datum pid, TimestampTz from, TimestampTz to, Buckets *b)
{
	Datum		args[2];
	int64		bound = PG_INT64_MAX;

	args[0] = pid;
	for (;;)
	{
		uint64		n;
		bool		older = false;

		args[1] = Int64GetDatum(bound);
		qs_exec(&newer_segments_plan, args, NULL, 0);
		n = SPI_processed;
		for (uint64 r = 0; r < n && !older; r++)
		{
			bool		isnull;
			TimestampTz t = DatumGetTimestampTz(qs_col((int) r, 3, &isnull));

			CHECK_FOR_INTERRUPTS();
			older = t < from;
			if (!older && t <= to)
				b->count[(bucket_start(t, b->width) - b->first) / b->width] +=
					qs_col_int64((int) r, 2, 0) - qs_col_int64((int) r, 1, 0) + 1;
		}
		if (n > 0)
			bound = qs_col_int64((int) n - 1, 1, 0);
		SPI_freetuptable(SPI_tuptable);
		if (older || n < 256)
			return;
	}
}

static void
count_pushed(const pg_uuid_t *tenant, const char *queue, const char *ns, const char *task,
			 TimestampTz from, TimestampTz to, int64 width, Buckets *b)
{
	Datum		args[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	const char *v[3] = {queue, ns, task};
	SPITupleTable *parts;
	uint64		nparts;
	int64		n;

	b->width = width;
	b->first = bucket_start(from, width);
	n = (bucket_start(to, width) - b->first) / width + 1;
	if (n > MAX_BUCKETS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("time range is too long"),
				 errdetail("The range spans " INT64_FORMAT " buckets; at most %d are served.", n, MAX_BUCKETS)));
	b->n = (int) n;
	b->count = palloc0(sizeof(int64) * b->n);

	args[0] = qs_uuid_datum(tenant);
	for (int i = 0; i < 3; i++)
	{
		args[i + 1] = v[i] ? CStringGetTextDatum(v[i]) : (Datum) 0;
		nulls[i + 1] = v[i] ? ' ' : 'n';
	}
	args[4] = TimestampTzGetDatum(from);
	qs_exec(&active_plan, args, nulls, 0);
	parts = SPI_tuptable;
	nparts = SPI_processed;
	for (uint64 i = 0; i < nparts; i++)
	{
		bool		isnull;

		walk_partition(SPI_getbinval(parts->vals[i], parts->tupdesc, 1, &isnull), from, to, b);
	}
	SPI_freetuptable(parts);
}

static int
cmp_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a,
				y = *(const int64 *) b;

	return x < y ? -1 : x > y;
}

/* {avg, median, min, max} of n values (all 0 when n = 0); sorts v. */
static void
write_spread(QsJson *j, const char *key, int64 *v, int n)
{
	int64		sum = 0;

	qsort(v, n, sizeof(int64), cmp_int64);
	for (int i = 0; i < n; i++)
		sum += v[i];
	qsj_object(j, key);
	qsj_int(j, "avg", n ? sum / n : 0);
	qsj_int(j, "median", n ? v[(n - 1) / 2] : 0);
	qsj_int(j, "min", n ? v[0] : 0);
	qsj_int(j, "max", n ? v[n - 1] : 0);
	qsj_end_object(j);
}

/* A per-second rate with two decimals, as Queen's ROUND(x::numeric, 2). */
static void
write_rate(QsJson *j, const char *key, int64 count, int seconds)
{
	char		s[64];

	snprintf(s, sizeof(s), "%.2f", (double) count / seconds);
	qsj_raw(j, key, s, strlen(s));
}

/* Lag over the partitions with a backlog: seconds since the oldest pending message, and pending. */
static void
write_lag(QsJson *j, PartRow *rows, int n, TimestampTz now)
{
	int64	   *tl = palloc(sizeof(int64) * Max(n, 1));
	int64	   *ol = palloc(sizeof(int64) * Max(n, 1));
	int			k = 0;

	for (int i = 0; i < n; i++)
	{
		if (!rows[i].has_part || rows[i].c.pending <= 0)
			continue;
		tl[k] = rows[i].has_oldest ? Max(now - rows[i].oldest, 0) / USECS_PER_SEC : 0;
		ol[k] = rows[i].c.pending;
		k++;
	}
	qsj_object(j, "lag");
	write_spread(j, "time", tl, k);
	write_spread(j, "offset", ol, k);
	qsj_end_object(j);
}

static int
count_distinct(PartRow *rows, int n, bool task)
{
	int			k = 0;

	/* rows come grouped by queue, not by namespace: compare with all earlier */
	for (int i = 0; i < n; i++)
	{
		const char *v = task ? rows[i].task : rows[i].ns;
		bool		seen = v[0] == '\0';

		for (int m = 0; m < i && !seen; m++)
			seen = strcmp(v, task ? rows[m].task : rows[m].ns) == 0;
		k += !seen;
	}
	return k;
}

/* SQL: queen.overview(tenant) -> GET /api/v1/resources/overview */
PG_FUNCTION_INFO_V1(qs_overview);
Datum
qs_overview(PG_FUNCTION_ARGS)
{
	pg_uuid_t	tenant;
	PartRow    *rows;
	int			n,
				queues = 0,
				parts = 0;
	Counts		sum;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	int64		ingested;
	QsJson		j;

	qs_tenant_arg(fcinfo, 0, &tenant);
	qsj_init(&j);
	qs_spi_connect();
	n = qsr_load_parts(&tenant, NULL, NULL, NULL, -1, 0, &rows);
	memset(&sum, 0, sizeof(sum));
	for (int i = 0; i < n;)
	{
		Counts		qsum;
		int			next;

		CHECK_FOR_INTERRUPTS();
		parts += qsr_queue_group(rows, n, i, &next, &qsum);
		qsr_counts_add(&sum, &qsum);
		queues++;
		i = next;
	}
	qsj_object(&j, NULL);
	qsj_int(&j, "queues", queues);
	qsj_int(&j, "partitions", parts);
	qsj_int(&j, "namespaces", count_distinct(rows, n, false));
	qsj_int(&j, "tasks", count_distinct(rows, n, true));
	sum.pending -= sum.processing;	/* Queen: pending less processing */
	qsr_write_counts(&j, "messages", &sum, false);
	write_lag(&j, rows, n, now);

	{
		Buckets		b;

		/* one bucket wide enough for the last five minutes */
		count_pushed(&tenant, NULL, NULL, NULL, now - 300 * USECS_PER_SEC, now,
					 (int64) 1000000 * USECS_PER_DAY, &b);
		ingested = 0;
		for (int i = 0; i < b.n; i++)
			ingested += b.count[i];
	}
	qsj_object(&j, "throughput");
	write_rate(&j, "ingestedPerSecond", ingested, 300);
	write_rate(&j, "processedPerSecond", 0, 300);	/* consumption times are not kept */
	qsj_end_object(&j);
	qsj_time_ms(&j, "timestamp", now);
	qsj_int(&j, "statsAge", 0);	/* counted live */
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

static QsPlan leases_plan = {
	"SELECT count(*), count(DISTINCT c.partition_id),"
	"       COALESCE(sum(GREATEST(c.batch_end - c.committed, 0)), 0)::bigint"
	"  FROM queen.log_consumers c"
	"  JOIN queen.log_partitions p ON p.id = c.partition_id"
	"  JOIN queen.queues q ON q.id = p.queue_id"
	" WHERE q.tenant_id = $1 AND c.worker_id IS NOT NULL AND c.lease_expires_at > now()"
	"   AND ($2::text IS NULL OR q.name = $2) AND ($3::text IS NULL OR q.namespace = $3)"
	"   AND ($4::text IS NULL OR q.task = $4)",
	4, {UUIDOID, TEXTOID, TEXTOID, TEXTOID}
};

static QsPlan dlq_plan = {
	"SELECT count(*), count(DISTINCT d.partition_id)"
	"  FROM queen.log_dlq d"
	"  JOIN queen.log_partitions p ON p.id = d.partition_id"
	"  JOIN queen.queues q ON q.id = p.queue_id"
	" WHERE q.tenant_id = $1"
	"   AND ($2::text IS NULL OR q.name = $2) AND ($3::text IS NULL OR q.namespace = $3)"
	"   AND ($4::text IS NULL OR q.task = $4)",
	4, {UUIDOID, TEXTOID, TEXTOID, TEXTOID}
};

typedef struct StatusArgs
{
	pg_uuid_t	tenant;
	TimestampTz from,
				to;
	int			bucket;			/* minutes */
	char	   *queue,
			   *ns,
			   *task;
} StatusArgs;

/* Queen's bucket widths for a range: 1, 5, 15, 60 or 360 minutes. */
static int
bucket_minutes(TimestampTz from, TimestampTz to)
{
	int64		minutes = (to - from) / USECS_PER_MINUTE;

	if (minutes <= 60)
		return 1;
	if (minutes <= 360)
		return 5;
	if (minutes <= 1440)
		return 15;
	if (minutes <= 10080)
		return 60;
	return 360;
}

static void
filter_args(const StatusArgs *a, Datum *args, char *nulls)
{
	const char *v[3] = {a->queue, a->ns, a->task};

	args[0] = qs_uuid_datum(&a->tenant);
	nulls[0] = ' ';
	for (int i = 0; i < 3; i++)
	{
		args[i + 1] = v[i] ? CStringGetTextDatum(v[i]) : (Datum) 0;
		nulls[i + 1] = v[i] ? ' ' : 'n';
	}
}

static void
write_throughput(QsJson *j, const StatusArgs *a)
{
	Buckets		b;
	int			secs = a->bucket * 60;
	int			points = 0;

	count_pushed(&a->tenant, a->queue, a->ns, a->task, a->from, a->to,
				 (int64) a->bucket * USECS_PER_MINUTE, &b);
	for (int i = 0; i < b.n; i++)
		points += b.count[i] > 0;
	/* Queen lists the buckets that have data, newest first */
	qsj_int(j, "pointCount", points);
	qsj_array(j, "throughput");
	for (int i = b.n - 1; i >= 0; i--)
	{
		if (b.count[i] == 0)
			continue;
		CHECK_FOR_INTERRUPTS();
		qsj_object(j, NULL);
		qsr_time_s(j, "timestamp", b.first + (int64) i * b.width);
		qsj_int(j, "ingested", b.count[i]);
		qsj_int(j, "processed", 0);
		write_rate(j, "ingestedPerSecond", b.count[i], secs);
		write_rate(j, "processedPerSecond", 0, secs);
		qsj_int(j, "avgLagMs", 0);
		qsj_int(j, "maxLagMs", 0);
		qsj_int(j, "avgEventLoopLagMs", 0);
		qsj_int(j, "maxEventLoopLagMs", 0);
		qsj_int(j, "minFreeSlots", 0);
		qsj_int(j, "dbErrors", 0);
		qsj_end_object(j);
	}
	qsj_end_array(j);
}

/* Queues with messages, and the live counts over them. */
static void
write_status_queues(QsJson *j, const StatusArgs *a)
{
	PartRow    *rows;
	int			n = qsr_load_parts(&a->tenant, a->queue, a->ns, a->task, -1, 0, &rows);
	Counts		sum;

	memset(&sum, 0, sizeof(sum));
	qsj_array(j, "queues");
	for (int i = 0; i < n;)
	{
		Counts		qsum;
		int			next;
		int			parts = qsr_queue_group(rows, n, i, &next, &qsum);

		CHECK_FOR_INTERRUPTS();
		qsr_counts_add(&sum, &qsum);
		if (qsum.total > 0)
		{
			qsj_object(j, NULL);
			qsj_uuid(j, "id", &rows[i].qid);
			qsj_str(j, "name", rows[i].queue);
			qsj_str(j, "namespace", rows[i].ns);
			qsj_str(j, "task", rows[i].task);
			qsj_int(j, "partitions", parts);
			qsj_int(j, "totalConsumed", qsum.completed);
			qsj_end_object(j);
		}
		i = next;
	}
	qsj_end_array(j);

	qsj_object(j, "messages");
	sum.pending -= sum.processing;
	qsr_write_counts(j, NULL, &sum, true);
	qsj_object(j, "requests");	/* request counts are not kept */
	qsj_int(j, "push", 0);
	qsj_int(j, "pop", 0);
	qsj_int(j, "ack", 0);
	qsj_end_object(j);
	qsj_object(j, "batchEfficiency");
	qsj_int(j, "push", 0);
	qsj_int(j, "pop", 0);
	qsj_int(j, "ack", 0);
	qsj_end_object(j);
	qsj_end_object(j);
}

static void
write_status_leases_dlq(QsJson *j, const StatusArgs *a)
{
	Datum		args[4];
	char		nulls[4];
	int64		dlq,
				dlq_parts;

	filter_args(a, args, nulls);
	qs_exec(&leases_plan, args, nulls, 1);
	qsj_object(j, "leases");
	qsj_int(j, "active", qs_col_int64(0, 1, 0));
	qsj_int(j, "partitionsWithLeases", qs_col_int64(0, 2, 0));
	qsj_int(j, "totalBatchSize", qs_col_int64(0, 3, 0));
	qsj_int(j, "totalAcked", 0);	/* a partial ack moves the cursor: the span shrinks */
	qsj_end_object(j);

	qs_exec(&dlq_plan, args, nulls, 1);
	dlq = qs_col_int64(0, 1, 0);
	dlq_parts = qs_col_int64(0, 2, 0);
	qsj_object(j, "deadLetterQueue");
	qsj_int(j, "totalMessages", dlq);
	qsj_int(j, "affectedPartitions", dlq_parts);
	qsj_array(j, "topErrors");	/* Queen always sends [] */
	qsj_end_array(j);
	qsj_end_object(j);

	qsj_array(j, "workers");	/* no worker health is recorded */
	qsj_end_array(j);
	qsj_object(j, "errors");
	qsj_int(j, "dbErrors", 0);
	qsj_int(j, "ackFailed", 0);
	qsj_int(j, "dlqMessages", dlq);
	qsj_end_object(j);
}

/* SQL: queen.status(from_time, to_time, queue, namespace, task, tenant) -> GET /api/v1/status */
PG_FUNCTION_INFO_V1(qs_status);
Datum
qs_status(PG_FUNCTION_ARGS)
{
	StatusArgs	a;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	QsJson		j;

	a.to = PG_ARGISNULL(1) ? now : PG_GETARG_TIMESTAMPTZ(1);
	a.from = PG_ARGISNULL(0) ? a.to - USECS_PER_HOUR : PG_GETARG_TIMESTAMPTZ(0);
	if (TIMESTAMP_NOT_FINITE(a.from) || TIMESTAMP_NOT_FINITE(a.to))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("from and to must be finite timestamps")));
	if (a.from > a.to)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("from must not be later than to")));
	a.queue = qs_text_arg(fcinfo, 2);
	a.ns = qs_text_arg(fcinfo, 3);
	a.task = qs_text_arg(fcinfo, 4);
	qs_tenant_arg(fcinfo, 5, &a.tenant);
	a.bucket = bucket_minutes(a.from, a.to);

	qsj_init(&j);
	qs_spi_connect();
	qsj_object(&j, NULL);
	qsj_object(&j, "timeRange");
	qsj_time_ms(&j, "from", a.from);
	qsj_time_ms(&j, "to", a.to);
	qsj_end_object(&j);
	qsj_int(&j, "bucketMinutes", a.bucket);
	write_throughput(&j, &a);
	write_status_queues(&j, &a);
	write_status_leases_dlq(&j, &a);
	qsj_int(&j, "statsAge", 0);
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
