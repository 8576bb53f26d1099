/*
 * metrics_gauges.c: the gauges of GET /metrics that storage answers at
 * scrape time (queen.queue_stats(), queen_streams.stream_stats()): backlog,
 * lag and dead letters per queue and consumer group, and per declared
 * stream its lag, open windows, late events and errors.
 *
 * Cardinality: at most queen_streams.metrics_queues series per metric
 * family, the largest backlogs first; the rows past the bound are summed
 * (lag: the largest) into one series labelled "(other)".
 */
#include "http/dispatch/route.h"
#include "http/dispatch/metrics.h"
#include "common/ids.h"
#include "common/spi.h"
#include "storage/storage.h"

#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/uuid.h"

#define OTHER "(other)"

typedef enum
{
	G_BACKLOG, G_LAG, G_BACKLOG_PARTS, G_LEASED, G_DEAD, G_PARTS, G_MESSAGES
} GaugeCol;

typedef struct GaugeDef
{
	const char *name;
	const char *help;
	GaugeCol	col;
	bool		seconds;		/* float, and the overflow row keeps the largest */
} GaugeDef;

static const GaugeDef group_gauges[] = {
	{"queen_streams_consumer_group_backlog_messages",
	 "Messages the consumer group has not acknowledged (queue mode: consumer_group=\"__QUEUE_MODE__\").",
	 G_BACKLOG, false},
	{"queen_streams_consumer_group_lag_seconds",
	 "Age of the oldest message the consumer group has not acknowledged (0 without a backlog).",
	 G_LAG, true},
	{"queen_streams_consumer_group_partitions_with_backlog",
	 "Partitions of the queue where the consumer group has messages to acknowledge.",
	 G_BACKLOG_PARTS, false},
	{"queen_streams_consumer_group_leased_partitions",
	 "Partitions of the queue the consumer group holds a live lease on.",
	 G_LEASED, false},
	{"queen_streams_consumer_group_dead_letters",
	 "Dead letters of the consumer group on the queue (rows of queen.log_dlq).",
	 G_DEAD, false},
};

#define NGROUP_GAUGES lengthof(group_gauges)

static const GaugeDef queue_gauges[] = {
	{"queen_streams_queue_partitions", "Partitions of the queue.", G_PARTS, false},
	{"queen_streams_queue_messages",
	 "Messages the queue stores (from its partitions' log start to their last offset).",
	 G_MESSAGES, false},
};

#define NQUEUE_GAUGES lengthof(queue_gauges)

static double
row_value(const QsQueueStatsRow *r, GaugeCol c)
{
	switch (c)
	{
		case G_BACKLOG:
			return (double) r->backlog;
		case G_LAG:
			return r->lag_seconds;
		case G_BACKLOG_PARTS:
			return (double) r->backlog_partitions;
		case G_LEASED:
			return (double) r->leased_partitions;
		case G_DEAD:
			return (double) r->dead_letters;
		case G_PARTS:
			return (double) r->partitions;
		case G_MESSAGES:
			return (double) r->messages;
	}
	return 0;
}

/* the tenant column of queen_streams.stream_stats() */
#define SC_TENANT 1

static const char *const stream_gauges[][3] = {
	/* name, type, help; columns 4.. of queen_streams.stream_stats() */
	{"queen_streams_declared_stream_lag_messages", "gauge",
	"Source messages past the declared stream's cursor."},
	{"queen_streams_declared_stream_open_windows", "gauge",
	"Windows the declared stream holds open (state rows but the watermarks)."},
	{"queen_streams_declared_stream_events_total", "counter",
	"Source messages the declared stream folded."},
	{"queen_streams_declared_stream_late_events_total", "counter",
	"Source messages that arrived too late for the declared stream's windows."},
	{"queen_streams_declared_stream_errors_total", "counter",
	"Steps of the declared stream that failed and rolled back."},
	{"queen_streams_declared_stream_windows_total", "counter",
	"Closed windows the declared stream pushed to its sink."},
};

#define NSTREAM_GAUGES lengthof(stream_gauges)

/*
 * The body of queen_streams.stream_stats() (sql/0.8.0/50-queue-stats.sql),
 * here too so that a library newer than the installed schema (before ALTER
 * EXTENSION UPDATE) still serves /metrics: it reads only 0.3.0's tables.
 */
static QsPlan stream_stats_plan = {
	"SELECT d.tenant_id, d.name, d.paused,"
	"       (SELECT COALESCE(sum(GREATEST(p.last_offset - GREATEST(COALESCE(c.committed, -1), p.log_start - 1), 0)), 0)"
	"          FROM queen.queues sq"
	"          JOIN queen.log_partitions p ON p.queue_id = sq.id"
	"          LEFT JOIN queen.log_consumers c"
	"            ON c.partition_id = p.id AND c.consumer_group = d.definition ->> 'consumer_group'"
	"         WHERE sq.tenant_id = d.tenant_id AND sq.name = q.source_queue)::bigint,"
	"       (SELECT count(*) FROM queen_streams.state s WHERE s.query_id = d.query_id AND s.key <> '__wm__'),"
	"       COALESCE(st.events, 0)::bigint, COALESCE(st.late, 0)::bigint, COALESCE(st.errors, 0)::bigint,"
	"       COALESCE(st.windows, 0)::bigint"
	"  FROM queen_streams.declared_streams d"
	"  JOIN queen_streams.queries q ON q.id = d.query_id"
	"  LEFT JOIN (SELECT query_id, sum(events) AS events, sum(late) AS late, sum(errors) AS errors,"
	"                    sum(windows) AS windows"
	"               FROM queen_streams.declared_stats GROUP BY query_id) st ON st.query_id = d.query_id"
	" ORDER BY d.tenant_id, d.name",
	0, {}
};

static bool
row_visible(int r, const pg_uuid_t *only)
{
	bool		isnull;
	Datum		t = qs_col(r, SC_TENANT, &isnull);

	return only == NULL || (!isnull && memcmp(DatumGetUUIDP(t)->data, only->data, UUID_LEN) == 0);
}

static char *
col_text(int r, int c)
{
	bool		isnull;
	Datum		d = qs_col(r, c, &isnull);

	return isnull ? pstrdup("") : TextDatumGetCString(d);
}

/* tenant, and the other labels: {tenant="…",queue="…"[,group="…"]} */
static void
labels(StringInfo out, int r, const char *key2, int col2, const char *key3, int col3)
{
	bool		isnull;
	Datum		t = qs_col(r, SC_TENANT, &isnull);
	char		tenant[QS_UUID_STRLEN + 1];

	if (isnull)
		tenant[0] = '\0';
	else
		qs_uuid_format(DatumGetUUIDP(t), tenant);
	appendStringInfo(out, "{tenant=\"%s\",%s=\"", tenant, key2);
	qs_metrics_label(out, col_text(r, col2));
	if (key3)
	{
		appendStringInfo(out, "\",%s=\"", key3);
		qs_metrics_label(out, col_text(r, col3));
	}
	appendStringInfoString(out, "\"}");
}

static void
overflow_labels(StringInfo out, const pg_uuid_t *only, const char *key2, const char *key3)
{
	char		tenant[QS_UUID_STRLEN + 1];

	if (only)
		qs_uuid_format(only, tenant);
	else
		strlcpy(tenant, OTHER, sizeof(tenant));
	appendStringInfo(out, "{tenant=\"%s\",%s=\"" OTHER "\"", tenant, key2);
	if (key3)
		appendStringInfo(out, ",%s=\"" OTHER "\"", key3);
	appendStringInfoChar(out, '}');
}

static double
col_number(int r, int c, bool seconds)
{
	bool		isnull;
	Datum		d = qs_col(r, c, &isnull);

	if (isnull)
		return 0;
	return seconds ? DatumGetFloat8(d) : (double) DatumGetInt64(d);
}

static void
value(StringInfo out, double v, bool seconds)
{
	if (seconds)
		appendStringInfo(out, " %.3f\n", v);
	else
		appendStringInfo(out, " %.0f\n", v);
}

typedef struct QueueKey
{
	pg_uuid_t	tenant;
	char		name[256];		/* queue names are varchar(255) */
} QueueKey;

static void
row_labels(StringInfo out, const QsQueueStatsRow *r, bool group)
{
	char		tenant[QS_UUID_STRLEN + 1];

	qs_uuid_format(&r->tenant, tenant);
	appendStringInfo(out, "{tenant=\"%s\",queue=\"", tenant);
	qs_metrics_label(out, r->queue);
	if (group)
	{
		appendStringInfoString(out, "\",consumer_group=\"");
		qs_metrics_label(out, r->group);
	}
	appendStringInfoString(out, "\"}");
}

/* Per (queue, group), the largest backlogs first (the load's order). */
static void
queue_gauges_text(StringInfo out, const pg_uuid_t *only, int limit)
{
	QsQueueStatsRow *rows;
	int			n = qs_queue_stats_load(&rows);
	QsQueueStatsRow **keep = palloc(sizeof(QsQueueStatsRow *) * Max(n, 1));
	int			nkeep = 0;
	bool		spill = false;
	double		other[NGROUP_GAUGES];
	HTAB	   *seen;
	HASHCTL		ctl;

	memset(other, 0, sizeof(other));
	for (int i = 0; i < n; i++)
	{
		QsQueueStatsRow *r = &rows[i];

		CHECK_FOR_INTERRUPTS();
		if (only && memcmp(&r->tenant, only, sizeof(pg_uuid_t)) != 0)
			continue;
		if (nkeep < limit)
		{
			keep[nkeep++] = r;
			continue;
		}
		spill = true;
		for (int g = 0; g < (int) NGROUP_GAUGES; g++)
		{
			double		v = row_value(r, group_gauges[g].col);

			other[g] = group_gauges[g].seconds ? Max(other[g], v) : other[g] + v;
		}
	}

	for (int g = 0; g < (int) NGROUP_GAUGES; g++)
	{
		qs_metrics_header(out, group_gauges[g].name, "gauge", group_gauges[g].help);
		for (int k = 0; k < nkeep; k++)
		{
			appendStringInfoString(out, group_gauges[g].name);
			row_labels(out, keep[k], true);
			value(out, row_value(keep[k], group_gauges[g].col), group_gauges[g].seconds);
		}
		if (spill)
		{
			appendStringInfoString(out, group_gauges[g].name);
			overflow_labels(out, only, "queue", "consumer_group");
			value(out, other[g], group_gauges[g].seconds);
		}
	}

	/* per queue: at its first kept row */
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(QueueKey);
	ctl.entrysize = sizeof(QueueKey);
	ctl.hcxt = CurrentMemoryContext;
	seen = hash_create("queen_streams metrics queues", Max(nkeep, 16), &ctl,
					   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (int k = 0; k < nkeep; k++)
	{
		QueueKey	key;
		bool		found;

		memset(&key, 0, sizeof(key));
		key.tenant = keep[k]->tenant;
		strlcpy(key.name, keep[k]->queue, sizeof(key.name));
		hash_search(seen, &key, HASH_ENTER, &found);
		if (found)
			keep[k] = NULL;
	}
	hash_destroy(seen);
	for (int q = 0; q < (int) NQUEUE_GAUGES; q++)
	{
		qs_metrics_header(out, queue_gauges[q].name, "gauge", queue_gauges[q].help);
		for (int k = 0; k < nkeep; k++)
		{
			if (keep[k] == NULL)
				continue;
			appendStringInfoString(out, queue_gauges[q].name);
			row_labels(out, keep[k], false);
			value(out, row_value(keep[k], queue_gauges[q].col), false);
		}
	}
}

/* Per declared stream, in (tenant, name) order. */
static void
stream_gauges_text(StringInfo out, const pg_uuid_t *only, int limit)
{
	int			n;
	int		   *keep;
	int			nkeep = 0;
	bool		spill = false;
	double		other[NSTREAM_GAUGES];

	qs_exec(&stream_stats_plan, NULL, NULL, 0);
	n = (int) SPI_processed;
	keep = palloc(sizeof(int) * Max(n, 1));
	memset(other, 0, sizeof(other));
	for (int r = 0; r < n; r++)
	{
		CHECK_FOR_INTERRUPTS();
		if (!row_visible(r, only))
			continue;
		if (nkeep < limit)
		{
			keep[nkeep++] = r;
			continue;
		}
		spill = true;
		for (int g = 0; g < (int) NSTREAM_GAUGES; g++)
			other[g] += col_number(r, 4 + g, false);
	}
	qs_metrics_header(out, "queen_streams_declared_stream_paused", "gauge", "1 when the declared stream is paused.");
	for (int k = 0; k < nkeep; k++)
	{
		appendStringInfoString(out, "queen_streams_declared_stream_paused");
		labels(out, keep[k], "stream", 2, NULL, 0);
		appendStringInfo(out, " %d\n", qs_col_bool(keep[k], 3, false) ? 1 : 0);
	}
	for (int g = 0; g < (int) NSTREAM_GAUGES; g++)
	{
		qs_metrics_header(out, stream_gauges[g][0], stream_gauges[g][1], stream_gauges[g][2]);
		for (int k = 0; k < nkeep; k++)
		{
			appendStringInfoString(out, stream_gauges[g][0]);
			labels(out, keep[k], "stream", 2, NULL, 0);
			value(out, col_number(keep[k], 4 + g, false), false);
		}
		if (spill)
		{
			appendStringInfoString(out, stream_gauges[g][0]);
			overflow_labels(out, only, "stream", NULL);
			value(out, other[g], false);
		}
	}
	SPI_freetuptable(SPI_tuptable);
}

/*
 * The storage gauges, inside the scrape's transaction. `only`: that
 * tenant's rows alone (and the overflow rows sum only those).
 */
void
qs_metrics_gauges(StringInfo out, const pg_uuid_t *only)
{
	int			limit = Max(qs_http_metrics_queues - 1, 1);

	qs_spi_connect();
	queue_gauges_text(out, only, limit);
	stream_gauges_text(out, only, limit);
	qs_spi_finish();
}
