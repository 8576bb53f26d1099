/*
 * resources.c: the resource and status reads of Queen's admin API that count:
 * queen.queues_list, queue_detail, overview, namespaces, tasks, status,
 * status_queues and status_queue.
 *
 * Every count comes from offsets and cursors, never from decoding a segment.
 * Per partition, with the __QUEUE_MODE__ cursor clamped to the stored range
 * (floor = min(max(committed, log_start - 1), last_offset)):
 *   total      = last_offset - log_start + 1
 *   pending    = last_offset - floor (the leased span included, as Queen's
 *                stats count it; the list views subtract processing, as
 *                Queen's get_queues_v2 and get_namespaces_v2 do)
 *   processing = the live leased span past the cursor
 *   completed  = floor - log_start + 1, less the dead-lettered offsets in it
 *   failed, deadLetter = rows of queen.log_dlq for the partition
 * so total = pending + completed + the stored dead-lettered offsets.
 */
#include "storage/resources.h"
#include "common/args.h"
#include "common/ids.h"
#include "common/spi.h"

#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"

/* ---- shared with messages.c ---- */

void
qsr_time_s(QsJson *j, const char *key, TimestampTz ts)
{
	char		s[32];

	qs_format_time(ts, s);
	s[19] = 'Z';
	s[20] = '\0';
	qsj_str(j, key, s);
}

char *
qsr_queue_arg(FunctionCallInfo fcinfo, int argno)
{
	return qs_required_text_arg(fcinfo, argno, "queue");
}

/* ---- per-partition counts ---- */

/*
 * One row per partition of the tenant's queues ($2-$4 filter by name,
 * namespace and task; $5/$6 page the queues, newest first), and one row with
 * a NULL partition for a queue that has none.
 */
#define PART_STATS_SQL \
	"SELECT q.id, q.name, q.namespace, q.task, q.created_at, q.priority, q.lease_time," \
	"       q.retry_limit, q.retry_delay, q.ttl, q.max_queue_size, q.dead_letter_queue," \
	"       p.id, p.name, p.created_at," \
	"       (SELECT s.created_at FROM queen.log_segments s WHERE s.partition_id = p.id" \
	"         ORDER BY s.base_offset DESC LIMIT 1)," \
	"       x.total, x.pending, x.processing, x.completed, x.dead, x.oldest," \
	"       a.consumed, a.last_activity" \
	"  FROM (SELECT * FROM queen.queues" \
	"         WHERE tenant_id = $1 AND ($2::text IS NULL OR name = $2)" \
	"           AND ($3::text IS NULL OR namespace = $3) AND ($4::text IS NULL OR task = $4)" \
	"         ORDER BY created_at DESC, name LIMIT $5 OFFSET $6) q" \
	"  LEFT JOIN queen.log_partitions p ON p.queue_id = q.id" \
	"  LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = '" QS_QUEUE_MODE "'" \
	"  LEFT JOIN LATERAL (" \
	"    SELECT GREATEST(p.last_offset - p.log_start + 1, 0) AS total," \
	"           p.last_offset - f.floor AS pending," \
	"           CASE WHEN c.worker_id IS NOT NULL AND c.lease_expires_at > now()" \
	"                THEN GREATEST(LEAST(c.batch_end, p.last_offset) - f.floor, 0) ELSE 0 END AS processing," \
	"           f.floor - p.log_start + 1" \
	"             - (SELECT count(DISTINCT d.\"offset\") FROM queen.log_dlq d" \
	"                 WHERE d.partition_id = p.id AND d.consumer_group = '" QS_QUEUE_MODE "'" \
	"                   AND d.\"offset\" BETWEEN p.log_start AND f.floor) AS completed," \
	"           (SELECT count(*) FROM queen.log_dlq d WHERE d.partition_id = p.id) AS dead," \
	"           CASE WHEN p.last_offset > f.floor THEN" \
	"             (SELECT s.created_at FROM queen.log_segments s" \
	"               WHERE s.partition_id = p.id AND s.base_offset <= f.floor + 1" \
	"               ORDER BY s.base_offset DESC LIMIT 1) END AS oldest" \
	"      FROM (SELECT LEAST(GREATEST(COALESCE(c.committed, -1), p.log_start - 1), p.last_offset) AS floor) f" \
	"  ) x ON p.id IS NOT NULL" \
	"  LEFT JOIN LATERAL (" \
	"    SELECT sum(a.total_consumed) AS consumed, max(a.lease_acquired_at) AS last_activity" \
	"      FROM queen.log_consumers a WHERE a.partition_id = p.id" \
	"  ) a ON p.id IS NOT NULL"

static QsPlan parts_plan = {
	PART_STATS_SQL " ORDER BY q.created_at DESC, q.name, p.name",
	6, {UUIDOID, TEXTOID, TEXTOID, TEXTOID, INT4OID, INT4OID}
};

/* Namespaces and tasks: '' is Queen's NULL (a queue pushed to without one). */
#define GROUP_SQL(col) \
	"SELECT s." col ", count(DISTINCT s.qid), count(s.pid), COALESCE(sum(s.total), 0)," \
	"       COALESCE(sum(s.pending - s.processing), 0)" \
	"  FROM (" PART_STATS_SQL ") AS s (qid, name, namespace, task, q_created, priority," \
	"        lease_time, retry_limit, retry_delay, ttl, max_queue_size, dlq, pid, partition," \
	"        p_created, newest, total, pending, processing, completed, dead, oldest," \
	"        consumed, last_activity)" \
	" WHERE s." col " <> '' GROUP BY s." col " ORDER BY s." col

static QsPlan namespaces_plan = {GROUP_SQL("namespace"), 6,
{UUIDOID, TEXTOID, TEXTOID, TEXTOID, INT4OID, INT4OID}};
static QsPlan tasks_plan = {GROUP_SQL("task"), 6,
{UUIDOID, TEXTOID, TEXTOID, TEXTOID, INT4OID, INT4OID}};

static TimestampTz
col_time(int r, int col, bool *isnull)
{
	Datum		d = qs_col(r, col, isnull);

	return *isnull ? 0 : DatumGetTimestampTz(d);
}

static int
col_int(int r, int col)
{
	bool		isnull;
	Datum		d = qs_col(r, col, &isnull);

	return isnull ? 0 : DatumGetInt32(d);
}

static void
read_row(int r, PartRow *p)
{
	TupleDesc	td = SPI_tuptable->tupdesc;
	HeapTuple	tup = SPI_tuptable->vals[r];
	bool		isnull;

	p->qid = *DatumGetUUIDP(qs_col(r, 1, &isnull));
	p->queue = SPI_getvalue(tup, td, 2);
	p->ns = SPI_getvalue(tup, td, 3);
	p->task = SPI_getvalue(tup, td, 4);
	p->q_created = col_time(r, 5, &isnull);
	p->priority = col_int(r, 6);
	p->lease_time = col_int(r, 7);
	p->retry_limit = col_int(r, 8);
	p->retry_delay = col_int(r, 9);
	p->ttl = col_int(r, 10);
	p->max_queue_size = col_int(r, 11);
	p->dlq = qs_col_bool(r, 12, false);
	qs_col(r, 13, &isnull);
	p->has_part = !isnull;
	if (p->has_part)
		p->pid = *DatumGetUUIDP(qs_col(r, 13, &isnull));
	p->partition = SPI_getvalue(tup, td, 14);
	p->p_created = col_time(r, 15, &isnull);
	p->newest = col_time(r, 16, &isnull);
	p->has_newest = !isnull;
	p->c.total = qs_col_int64(r, 17, 0);
	p->c.pending = qs_col_int64(r, 18, 0);
	p->c.processing = qs_col_int64(r, 19, 0);
	p->c.completed = qs_col_int64(r, 20, 0);
	p->c.dead = qs_col_int64(r, 21, 0);
	p->c.failed = p->c.dead;
	p->oldest = col_time(r, 22, &isnull);
	p->has_oldest = !isnull;
	/* sum(bigint) is numeric */
	qs_col(r, 23, &isnull);
	p->consumed = isnull ? 0 :
		DatumGetInt64(DirectFunctionCall1(numeric_int8, qs_col(r, 23, &isnull)));
	p->activity = col_time(r, 24, &isnull);
	p->has_activity = !isnull;
}

/* Rows of parts_plan, in SPI memory (valid until qs_spi_finish). */
int
qsr_load_parts(const pg_uuid_t *tenant, const char *queue, const char *ns, const char *task,
		   int lim, int off, PartRow **out)
{
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	PartRow    *rows;
	int			n;

	args[0] = qs_uuid_datum(tenant);
	args[1] = queue ? CStringGetTextDatum(queue) : (Datum) 0;
	nulls[1] = queue ? ' ' : 'n';
	args[2] = ns ? CStringGetTextDatum(ns) : (Datum) 0;
	nulls[2] = ns ? ' ' : 'n';
	args[3] = task ? CStringGetTextDatum(task) : (Datum) 0;
	nulls[3] = task ? ' ' : 'n';
	args[4] = Int32GetDatum(lim);
	nulls[4] = lim < 0 ? 'n' : ' ';
	args[5] = Int32GetDatum(off);
	qs_exec(&parts_plan, args, nulls, 0);
	n = (int) SPI_processed;
	rows = palloc0(sizeof(PartRow) * Max(n, 1));
	for (int r = 0; r < n; r++)
	{
		CHECK_FOR_INTERRUPTS();
		read_row(r, &rows[r]);
	}
	*out = rows;
	return n;
}

void
qsr_counts_add(Counts *sum, const Counts *c)
{
	sum->total += c->total;
	sum->pending += c->pending;
	sum->processing += c->processing;
	sum->completed += c->completed;
	sum->failed += c->failed;
	sum->dead += c->dead;
}

/* Rows [from, *to) are one queue's; returns its totals and partition count. */
int
qsr_queue_group(PartRow *rows, int n, int from, int *to, Counts *sum)
{
	int			parts = 0;
	int			i = from;

	memset(sum, 0, sizeof(*sum));
	while (i < n && memcmp(rows[i].qid.data, rows[from].qid.data, UUID_LEN) == 0)
	{
		if (rows[i].has_part)
		{
			parts++;
			qsr_counts_add(sum, &rows[i].c);
		}
		i++;
	}
	*to = i;
	return parts;
}

/* The six counters; `flat` adds them to the current object instead. */
void
qsr_write_counts(QsJson *j, const char *key, const Counts *c, bool flat)
{
	if (!flat)
		qsj_object(j, key);
	qsj_int(j, "total", c->total);
	qsj_int(j, "pending", c->pending);
	qsj_int(j, "processing", c->processing);
	qsj_int(j, "completed", c->completed);
	qsj_int(j, "failed", c->failed);
	qsj_int(j, "deadLetter", c->dead);
	if (!flat)
		qsj_end_object(j);
}

static void
write_queue_head(QsJson *j, const PartRow *q)
{
	qsj_uuid(j, "id", &q->qid);
	qsj_str(j, "name", q->queue);
	qsj_str(j, "namespace", q->ns);
	qsj_str(j, "task", q->task);
	qsj_time_ms(j, "createdAt", q->q_created);
}

/*
 * The entries of resources/queues and status/queues. Queen's list subtracts
 * processing from pending; its status list does not.
 */
static void
write_queue_list(QsJson *j, PartRow *rows, int n, bool pending_less_processing)
{
	qsj_array(j, "queues");
	for (int i = 0; i < n;)
	{
		Counts		sum;
		int			next;
		int			parts = qsr_queue_group(rows, n, i, &next, &sum);

		CHECK_FOR_INTERRUPTS();
		qsj_object(j, NULL);
		write_queue_head(j, &rows[i]);
		qsj_int(j, "partitions", parts);
		qsj_object(j, "messages");
		qsj_int(j, "total", sum.total);
		qsj_int(j, "pending", pending_less_processing ? sum.pending - sum.processing : sum.pending);
		qsj_int(j, "processing", sum.processing);
		qsj_end_object(j);
		qsj_end_object(j);
		i = next;
	}
	qsj_end_array(j);
}

/* SQL: queen.queues_list(tenant) -> GET /api/v1/resources/queues */
PG_FUNCTION_INFO_V1(qs_queues_list);
Datum
qs_queues_list(PG_FUNCTION_ARGS)
{
	pg_uuid_t	tenant;
	PartRow    *rows;
	int			n;
	QsJson		j;

	qs_tenant_arg(fcinfo, 0, &tenant);
	qsj_init(&j);
	qs_spi_connect();
	n = qsr_load_parts(&tenant, NULL, NULL, NULL, -1, 0, &rows);
	qsj_object(&j, NULL);
	write_queue_list(&j, rows, n, true);
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/* SQL: queen.queue_detail(queue, tenant) -> GET /api/v1/resources/queues/:queue */
PG_FUNCTION_INFO_V1(qs_queue_detail);
Datum
qs_queue_detail(PG_FUNCTION_ARGS)
{
	char	   *queue = qsr_queue_arg(fcinfo, 0);
	pg_uuid_t	tenant;
	PartRow    *rows;
	int			n;
	Counts		sum;
	QsJson		j;

	qs_tenant_arg(fcinfo, 1, &tenant);
	qsj_init(&j);
	qs_spi_connect();
	n = qsr_load_parts(&tenant, queue, NULL, NULL, -1, 0, &rows);
	if (n == 0)
		qs_queue_not_found(queue);
	qsj_object(&j, NULL);
	write_queue_head(&j, &rows[0]);
	qsj_array(&j, "partitions");
	memset(&sum, 0, sizeof(sum));
	for (int i = 0; i < n && rows[i].has_part; i++)
	{
		PartRow    *p = &rows[i];

		CHECK_FOR_INTERRUPTS();
		qsr_counts_add(&sum, &p->c);
		qsj_object(&j, NULL);
		qsj_uuid(&j, "id", &p->pid);
		qsj_str(&j, "name", p->partition);
		qsj_time_ms(&j, "createdAt", p->p_created);
		qsr_write_counts(&j, "stats", &p->c, false);
		qsj_time_ms_or_null(&j, "oldestMessage", p->has_oldest, p->oldest);
		qsj_time_ms_or_null(&j, "newestMessage", p->has_newest, p->newest);
		qsj_end_object(&j);
	}
	qsj_end_array(&j);
	qsr_write_counts(&j, "totals", &sum, false);
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

static void
write_status_partition(QsJson *j, const PartRow *p)
{
	qsj_object(j, NULL);
	qsj_uuid(j, "id", &p->pid);
	qsj_str(j, "name", p->partition);
	qsj_time_ms(j, "createdAt", p->p_created);
	qsr_write_counts(j, "messages", &p->c, false);
	qsr_write_counts(j, "stats", &p->c, false);
	qsj_object(j, "cursor");
	qsj_int(j, "totalConsumed", p->consumed);
	qsj_int(j, "batchesConsumed", 0);	/* not tracked */
	qsj_end_object(j);
	qsj_time_ms_or_null(j, "lastActivity", p->has_activity, p->activity);
	qsj_time_ms_or_null(j, "oldestMessage", p->has_oldest, p->oldest);
	qsj_time_ms_or_null(j, "newestMessage", p->has_newest, p->newest);
	qsj_end_object(j);
}

/* SQL: queen.status_queue(queue, tenant) -> GET /api/v1/status/queues/:queue */
PG_FUNCTION_INFO_V1(qs_status_queue);
Datum
qs_status_queue(PG_FUNCTION_ARGS)
{
	char	   *queue = qsr_queue_arg(fcinfo, 0);
	pg_uuid_t	tenant;
	PartRow    *rows,
			   *q;
	int			n;
	Counts		sum;
	QsJson		j;

	qs_tenant_arg(fcinfo, 1, &tenant);
	qsj_init(&j);
	qs_spi_connect();
	n = qsr_load_parts(&tenant, queue, NULL, NULL, -1, 0, &rows);
	if (n == 0)
		qs_queue_not_found(queue);
	q = &rows[0];
	qsj_object(&j, NULL);
	qsj_object(&j, "queue");
	qsj_uuid(&j, "id", &q->qid);
	qsj_str(&j, "name", q->queue);
	qsj_str(&j, "namespace", q->ns);
	qsj_str(&j, "task", q->task);
	qsj_int(&j, "priority", q->priority);
	qsj_time_ms(&j, "createdAt", q->q_created);
	qsj_object(&j, "config");
	qsj_int(&j, "leaseTime", q->lease_time);
	qsj_int(&j, "retryLimit", q->retry_limit);
	qsj_int(&j, "retryDelay", q->retry_delay);
	qsj_int(&j, "ttl", q->ttl);
	qsj_int(&j, "maxQueueSize", q->max_queue_size);
	qsj_bool(&j, "deadLetterQueue", q->dlq);
	qsj_end_object(&j);
	qsj_end_object(&j);
	qsj_array(&j, "partitions");
	memset(&sum, 0, sizeof(sum));
	for (int i = 0; i < n && rows[i].has_part; i++)
	{
		CHECK_FOR_INTERRUPTS();
		qsr_counts_add(&sum, &rows[i].c);
		write_status_partition(&j, &rows[i]);
	}
	qsj_end_array(&j);
	qsj_object(&j, "totals");
	qsr_write_counts(&j, "messages", &sum, false);
	qsr_write_counts(&j, NULL, &sum, true);
	qsj_end_object(&j);
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/* SQL: queen.status_queues(namespace, task, lim, off, tenant) -> GET /api/v1/status/queues */
PG_FUNCTION_INFO_V1(qs_status_queues);
Datum
qs_status_queues(PG_FUNCTION_ARGS)
{
	char	   *ns = qs_text_arg(fcinfo, 0);
	char	   *task = qs_text_arg(fcinfo, 1);
	int			lim;
	int			off;
	pg_uuid_t	tenant;
	PartRow    *rows;
	int			n;
	QsJson		j;

	qs_page_args(fcinfo, 2, 3, 100, &lim, &off);
	qs_tenant_arg(fcinfo, 4, &tenant);
	qsj_init(&j);
	qs_spi_connect();
	n = qsr_load_parts(&tenant, NULL, ns, task, lim, off, &rows);
	qsj_object(&j, NULL);
	write_queue_list(&j, rows, n, false);
	qsj_object(&j, "pagination");
	qsj_int(&j, "limit", lim);
	qsj_int(&j, "offset", off);
	qsj_end_object(&j);
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/* namespaces and tasks share one shape */
static Datum
grouped(FunctionCallInfo fcinfo, QsPlan *plan, const char *list, const char *key)
{
	pg_uuid_t	tenant;
	Datum		args[6] = {0};
	char		nulls[6] = {' ', 'n', 'n', 'n', 'n', ' '};
	QsJson		j;

	qs_tenant_arg(fcinfo, 0, &tenant);
	qsj_init(&j);
	qs_spi_connect();
	args[0] = qs_uuid_datum(&tenant);
	args[5] = Int32GetDatum(0);
	qs_exec(plan, args, nulls, 0);
	qsj_object(&j, NULL);
	qsj_array(&j, list);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;

		CHECK_FOR_INTERRUPTS();
		qsj_object(&j, NULL);
		qsj_str(&j, key, SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1));
		qsj_int(&j, "queues", qs_col_int64(r, 2, 0));
		qsj_int(&j, "partitions", qs_col_int64(r, 3, 0));
		qsj_object(&j, "messages");
		qsj_int(&j, "total", DatumGetInt64(DirectFunctionCall1(numeric_int8, qs_col(r, 4, &isnull))));
		qsj_int(&j, "pending", DatumGetInt64(DirectFunctionCall1(numeric_int8, qs_col(r, 5, &isnull))));
		qsj_end_object(&j);
		qsj_end_object(&j);
	}
	qsj_end_array(&j);
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/* SQL: queen.namespaces(tenant) -> GET /api/v1/resources/namespaces */
PG_FUNCTION_INFO_V1(qs_namespaces);
Datum
qs_namespaces(PG_FUNCTION_ARGS)
{
	return grouped(fcinfo, &namespaces_plan, "namespaces", "namespace");
}

/* SQL: queen.tasks(tenant) -> GET /api/v1/resources/tasks */
PG_FUNCTION_INFO_V1(qs_tasks);
Datum
qs_tasks(PG_FUNCTION_ARGS)
{
	return grouped(fcinfo, &tasks_plan, "tasks", "task");
}

