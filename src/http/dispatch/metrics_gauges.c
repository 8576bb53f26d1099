/*
 * metrics_gauges.c: the gauges of GET /metrics that storage answers
 * (queen.queue_stats(), queen_streams.stream_stats()): backlog, lag and
 * dead letters per queue and consumer group, partitions and messages per
 * queue, and per declared stream its lag, open windows, late events and
 * errors. The rows come from the newest snapshot (gauges_snapshot.c).
 *
 * Cardinality: per family at most queen_streams.metrics_queues - 1 series
 * (queue and group rows: the largest backlogs first; queues: in the order
 * of their first row; streams: by name), and the rows past the bound are
 * summed (lag: the largest) into one series labelled "(other)", whose count
 * queen_streams_gauges_folded_rows gives per family. A queue keeps its own
 * partitions and messages series when its groups' rows are folded.
 */
#include "http/dispatch/route.h"
#include "http/dispatch/gauges_snapshot.h"
#include "http/dispatch/metrics_gauges.h"
#include "http/dispatch/metrics_text.h"
#include "common/ids.h"
#include "common/spi.h"
#include "storage/storage.h"

#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"
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

static const char *const stream_gauges[][3] = {
	/* name, type, help; QsStreamStatsRow.v[] */
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

/* the rows folded into "(other)", per family (queen_streams_gauges_folded_rows) */
typedef struct Folded
{
	int64		groups;
	int64		queues;
	int64		streams;
} Folded;

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

static void
value(StringInfo out, double v, bool seconds)
{
	if (seconds)
		appendStringInfo(out, " %.3f\n", v);
	else
		appendStringInfo(out, " %.0f\n", v);
}

static bool
visible(const pg_uuid_t *tenant, const pg_uuid_t *only)
{
	return only == NULL || memcmp(tenant, only, sizeof(pg_uuid_t)) == 0;
}

typedef struct QueueKey
{
	pg_uuid_t	tenant;
	char		name[256];		/* queue names are varchar(255) */
} QueueKey;

/* {tenant="…",queue="…"[,consumer_group="…"]} */
static void
row_labels(StringInfo out, const pg_uuid_t *tenant_id, const char *name, const char *key2,
		   const char *group)
{
	char		tenant[QS_UUID_STRLEN + 1];

	qs_uuid_format(tenant_id, tenant);
	appendStringInfo(out, "{tenant=\"%s\",%s=\"", tenant, key2);
	qs_metrics_label(out, name);
	if (group)
	{
		appendStringInfoString(out, "\",consumer_group=\"");
		qs_metrics_label(out, group);
	}
	appendStringInfoString(out, "\"}");
}

/* Per (queue, group), the largest backlogs first (the rows' order). */
static void
group_gauges_text(StringInfo out, const QsGaugeSet *set, const pg_uuid_t *only, int limit,
				  Folded *folded)
{
	QsQueueStatsRow **keep = palloc(sizeof(QsQueueStatsRow *) * Max(set->nqueue, 1));
	int			nkeep = 0;
	double		other[NGROUP_GAUGES];

	memset(other, 0, sizeof(other));
	for (int i = 0; i < set->nqueue; i++)
	{
		QsQueueStatsRow *r = &set->queue[i];

		CHECK_FOR_INTERRUPTS();
		if (!visible(&r->tenant, only))
			continue;
		if (nkeep < limit)
		{
			keep[nkeep++] = r;
			continue;
		}
		folded->groups++;
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
			row_labels(out, &keep[k]->tenant, keep[k]->queue, "queue", keep[k]->group);
			value(out, row_value(keep[k], group_gauges[g].col), group_gauges[g].seconds);
		}
		if (folded->groups > 0)
		{
			appendStringInfoString(out, group_gauges[g].name);
			overflow_labels(out, only, "queue", "consumer_group");
			value(out, other[g], group_gauges[g].seconds);
		}
	}
}

/*
 * Per queue: its first row stands for it (every row of a queue has its
 * partitions and messages). Bounded on its own, not by the group rows kept:
 * a queue whose groups all fall in "(other)" keeps its series while there
 * are fewer queues than the bound.
 */
static void
queue_gauges_text(StringInfo out, const QsGaugeSet *set, const pg_uuid_t *only, int limit,
				  Folded *folded)
{
	QsQueueStatsRow **keep = palloc(sizeof(QsQueueStatsRow *) * Max(set->nqueue, 1));
	int			nkeep = 0;
	double		other[NQUEUE_GAUGES];
	HTAB	   *seen;
	HASHCTL		ctl;

	memset(other, 0, sizeof(other));
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(QueueKey);
	ctl.entrysize = sizeof(QueueKey);
	ctl.hcxt = CurrentMemoryContext;
	seen = hash_create("queen_streams metrics queues", Max(Min(set->nqueue, 4096), 16), &ctl,
					   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (int i = 0; i < set->nqueue; i++)
	{
		QsQueueStatsRow *r = &set->queue[i];
		QueueKey	key;
		bool		found;

		CHECK_FOR_INTERRUPTS();
		if (!visible(&r->tenant, only))
			continue;
		memset(&key, 0, sizeof(key));
		key.tenant = r->tenant;
		strlcpy(key.name, r->queue, sizeof(key.name));
		hash_search(seen, &key, HASH_ENTER, &found);
		if (found)
			continue;
		if (nkeep < limit)
		{
			keep[nkeep++] = r;
			continue;
		}
		folded->queues++;
		for (int q = 0; q < (int) NQUEUE_GAUGES; q++)
			other[q] += row_value(r, queue_gauges[q].col);
	}
	hash_destroy(seen);
	for (int q = 0; q < (int) NQUEUE_GAUGES; q++)
	{
		qs_metrics_header(out, queue_gauges[q].name, "gauge", queue_gauges[q].help);
		for (int k = 0; k < nkeep; k++)
		{
			appendStringInfoString(out, queue_gauges[q].name);
			row_labels(out, &keep[k]->tenant, keep[k]->queue, "queue", NULL);
			value(out, row_value(keep[k], queue_gauges[q].col), false);
		}
		if (folded->queues > 0)
		{
			appendStringInfoString(out, queue_gauges[q].name);
			overflow_labels(out, only, "queue", NULL);
			value(out, other[q], false);
		}
	}
}

/* Per declared stream, in (tenant, name) order. */
static void
stream_gauges_text(StringInfo out, const QsGaugeSet *set, const pg_uuid_t *only, int limit,
				   Folded *folded)
{
	QsStreamStatsRow **keep = palloc(sizeof(QsStreamStatsRow *) * Max(set->nstream, 1));
	int			nkeep = 0;
	double		other[NSTREAM_GAUGES];
	static const pg_uuid_t none;

	memset(other, 0, sizeof(other));
	for (int i = 0; i < set->nstream; i++)
	{
		QsStreamStatsRow *r = &set->stream[i];

		CHECK_FOR_INTERRUPTS();
		if (only && (!r->has_tenant || !visible(&r->tenant, only)))
			continue;
		if (nkeep < limit)
		{
			keep[nkeep++] = r;
			continue;
		}
		folded->streams++;
		for (int g = 0; g < (int) NSTREAM_GAUGES; g++)
			other[g] += (double) r->v[g];
	}
	qs_metrics_header(out, "queen_streams_declared_stream_paused", "gauge", "1 when the declared stream is paused.");
	for (int k = 0; k < nkeep; k++)
	{
		appendStringInfoString(out, "queen_streams_declared_stream_paused");
		row_labels(out, keep[k]->has_tenant ? &keep[k]->tenant : &none, keep[k]->stream, "stream", NULL);
		appendStringInfo(out, " %d\n", keep[k]->paused ? 1 : 0);
	}
	for (int g = 0; g < (int) NSTREAM_GAUGES; g++)
	{
		qs_metrics_header(out, stream_gauges[g][0], stream_gauges[g][1], stream_gauges[g][2]);
		for (int k = 0; k < nkeep; k++)
		{
			appendStringInfoString(out, stream_gauges[g][0]);
			row_labels(out, keep[k]->has_tenant ? &keep[k]->tenant : &none, keep[k]->stream, "stream", NULL);
			value(out, (double) keep[k]->v[g], false);
		}
		if (folded->streams > 0)
		{
			appendStringInfoString(out, stream_gauges[g][0]);
			overflow_labels(out, only, "stream", NULL);
			value(out, other[g], false);
		}
	}
}

/*
 * The storage gauges, inside the scrape's transaction. `only`: that
 * tenant's rows alone (and the overflow rows sum only those).
 */
void
qs_metrics_gauges(StringInfo out, const pg_uuid_t *only)
{
	int			limit = Max(qs_http_metrics_queues - 1, 1);
	QsGaugeSet	set;
	Folded		folded = {0};

	qs_gauges_get(&set);
	group_gauges_text(out, &set, only, limit, &folded);
	queue_gauges_text(out, &set, only, limit, &folded);
	stream_gauges_text(out, &set, only, limit, &folded);
	qs_metrics_header(out, "queen_streams_gauges_folded_rows", "gauge",
					  "Rows past queen_streams.metrics_queues - 1 summed into the family's overflow series, by family.");
	appendStringInfo(out, "queen_streams_gauges_folded_rows{family=\"consumer_group\"} " INT64_FORMAT "\n"
					 "queen_streams_gauges_folded_rows{family=\"queue\"} " INT64_FORMAT "\n"
					 "queen_streams_gauges_folded_rows{family=\"declared_stream\"} " INT64_FORMAT "\n",
					 folded.groups, folded.queues, folded.streams);
	qs_metrics_header(out, "queen_streams_gauges_age_seconds", "gauge",
					  "Age of the snapshot the gauges above were read from (queen_streams.metrics_gauges_interval).");
	appendStringInfo(out, "queen_streams_gauges_age_seconds %.3f\n",
					 Max((double) (GetCurrentTimestamp() - set.at) / USECS_PER_SEC, 0.0));
}
