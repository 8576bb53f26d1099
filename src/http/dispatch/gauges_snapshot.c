/*
 * gauges_snapshot.c: the rows the /metrics gauges read, taken in the
 * background. Reading them from the tables is one pass over every partition
 * and cursor, and a walk per group for the lag in seconds: a second and
 * more at 100,000 partitions, too slow for a scrape. So, while /metrics is
 * being scraped, the first HTTP worker starts a short-lived background
 * worker every queen_streams.metrics_gauges_interval; it reads every
 * tenant's rows in one transaction and publishes them in a pinned dynamic
 * shared memory segment. A scrape copies the newest segment: O(queues x
 * groups + declared streams), whatever the partition count.
 *
 * A scrape reads the tables itself (and publishes what it read) when there
 * is no snapshot or the newest is older than QS_GAUGES_IDLE (the first
 * scrape, or the first after scrapes stopped), or when the interval is 0.
 * queen.queue_stats() always reads the tables.
 */
#include "http/dispatch/gauges_snapshot.h"
#include "http/listener.h"
#include "common/spi.h"
#include "common/guc.h"
#include "http/dispatch/dispatch.h"
#include "storage/storage.h"

#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

/* scraped less often than this: no refreshes, and the next scrape reads the tables */
#define QS_GAUGES_IDLE		(5 * 60 * USECS_PER_SEC)
#define QS_GAUGES_MAGIC		0x51534731	/* "QSG1" */

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

/* ---------------------------------------------------------------- the wire form */

typedef struct SnapHeader
{
	uint32		magic;
	int32		nqueue;
	int32		nstream;
	Size		len;			/* the whole payload, this header included */
	TimestampTz at;
} SnapHeader;

typedef struct QueueRec
{
	pg_uuid_t	tenant;
	int64		n[6];			/* partitions, with backlog, leased, backlog, dead, messages */
	double		lag;
	TimestampTz oldest;
	bool		has_oldest;
	uint32		qlen,
				glen;			/* the names follow, each with its NUL */
} QueueRec;

typedef struct StreamRec
{
	pg_uuid_t	tenant;
	bool		has_tenant;
	bool		paused;
	int64		v[6];
	uint32		slen;
} StreamRec;

static void
put_queue(StringInfo buf, const QsQueueStatsRow *r)
{
	QueueRec	q;

	memset(&q, 0, sizeof(q));
	q.tenant = r->tenant;
	q.n[0] = r->partitions;
	q.n[1] = r->backlog_partitions;
	q.n[2] = r->leased_partitions;
	q.n[3] = r->backlog;
	q.n[4] = r->dead_letters;
	q.n[5] = r->messages;
	q.lag = r->lag_seconds;
	q.oldest = r->oldest;
	q.has_oldest = r->has_oldest;
	q.qlen = strlen(r->queue);
	q.glen = strlen(r->group);
	appendBinaryStringInfo(buf, (char *) &q, sizeof(q));
	appendBinaryStringInfo(buf, r->queue, q.qlen + 1);
	appendBinaryStringInfo(buf, r->group, q.glen + 1);
}

/*
 * Every tenant's rows, in the caller's transaction, serialized into `buf`
 * (allocated by the caller: SPI's memory goes at qs_spi_finish).
 */
static void
collect(StringInfo buf)
{
	SnapHeader	h;
	QsQueueStatsRow *rows;
	uint64		n;

	qs_spi_connect();
	memset(&h, 0, sizeof(h));
	h.magic = QS_GAUGES_MAGIC;
	h.at = GetCurrentTransactionStartTimestamp();
	appendBinaryStringInfo(buf, (char *) &h, sizeof(h));
	h.nqueue = qs_queue_stats_load(&rows);
	for (int i = 0; i < h.nqueue; i++)
	{
		CHECK_FOR_INTERRUPTS();
		put_queue(buf, &rows[i]);
	}
	qs_exec(&stream_stats_plan, NULL, NULL, 0);
	n = SPI_processed;
	for (uint64 r = 0; r < n; r++)
	{
		StreamRec	s;
		bool		isnull;
		Datum		t = qs_col((int) r, 1, &isnull);
		char	   *name;

		CHECK_FOR_INTERRUPTS();
		memset(&s, 0, sizeof(s));
		s.has_tenant = !isnull;
		if (!isnull)
			s.tenant = *DatumGetUUIDP(t);
		s.paused = qs_col_bool((int) r, 3, false);
		for (int k = 0; k < 6; k++)
		{
			Datum		d = qs_col((int) r, 4 + k, &isnull);

			s.v[k] = isnull ? 0 : DatumGetInt64(d);
		}
		t = qs_col((int) r, 2, &isnull);
		name = isnull ? "" : TextDatumGetCString(t);
		s.slen = strlen(name);
		appendBinaryStringInfo(buf, (char *) &s, sizeof(s));
		appendBinaryStringInfo(buf, name, s.slen + 1);
	}
	h.nstream = (int32) n;
	h.len = buf->len;
	memcpy(buf->data, &h, sizeof(h));
	qs_spi_finish();
}

/* The rows of a payload, in the current memory context (the strings point into `data`). */
static void
parse(const char *data, QsGaugeSet *set)
{
	SnapHeader	h;
	Size		off = sizeof(h);

	memcpy(&h, data, sizeof(h));
	set->at = h.at;
	set->nqueue = h.nqueue;
	set->nstream = h.nstream;
	set->queue = palloc0(sizeof(QsQueueStatsRow) * Max(h.nqueue, 1));
	set->stream = palloc0(sizeof(QsStreamStatsRow) * Max(h.nstream, 1));
	for (int i = 0; i < h.nqueue; i++)
	{
		QueueRec	q;
		QsQueueStatsRow *r = &set->queue[i];

		CHECK_FOR_INTERRUPTS();
		memcpy(&q, data + off, sizeof(q));
		off += sizeof(q);
		r->tenant = q.tenant;
		r->partitions = q.n[0];
		r->backlog_partitions = q.n[1];
		r->leased_partitions = q.n[2];
		r->backlog = q.n[3];
		r->dead_letters = q.n[4];
		r->messages = q.n[5];
		r->lag_seconds = q.lag;
		r->oldest = q.oldest;
		r->has_oldest = q.has_oldest;
		r->queue = (char *) data + off;
		off += q.qlen + 1;
		r->group = (char *) data + off;
		off += q.glen + 1;
	}
	for (int i = 0; i < h.nstream; i++)
	{
		StreamRec	s;
		QsStreamStatsRow *r = &set->stream[i];

		CHECK_FOR_INTERRUPTS();
		memcpy(&s, data + off, sizeof(s));
		off += sizeof(s);
		r->tenant = s.tenant;
		r->has_tenant = s.has_tenant;
		r->paused = s.paused;
		memcpy(r->v, s.v, sizeof(r->v));
		r->stream = (char *) data + off;
		off += s.slen + 1;
	}
}

/* ---------------------------------------------------------------- the shared segment */

/*
 * Publish a payload, unless a newer one is there already (a scrape and a
 * refresh may finish in either order). The segment stays pinned until the
 * next one replaces it; a reader attached meanwhile keeps it mapped.
 */
static void
publish(const char *data, Size len, TimestampTz at)
{
	QsHttpShared *s = qs_http_shared;
	dsm_segment *seg = dsm_create(len, DSM_CREATE_NULL_IF_MAXSEGMENTS);
	dsm_handle	old;
	bool		newer;

	if (seg == NULL)
		return;					/* no room: the next refresh tries again */
	memcpy(dsm_segment_address(seg), data, len);
	dsm_pin_segment(seg);
	SpinLockAcquire(&s->gauges_lock);
	newer = s->gauges_handle == 0 || at > s->gauges_at;
	old = newer ? s->gauges_handle : dsm_segment_handle(seg);
	if (newer)
	{
		s->gauges_handle = dsm_segment_handle(seg);
		s->gauges_at = at;
	}
	SpinLockRelease(&s->gauges_lock);
	if (old != 0)
		dsm_unpin_segment(old);
	dsm_detach(seg);
}

/* A copy of the newest payload, or NULL; its time in *at. */
static char *
newest(TimestampTz *at)
{
	QsHttpShared *s = qs_http_shared;

	/* a segment replaced between the read and the attach is gone: read again */
	for (int attempt = 0; attempt < 3; attempt++)
	{
		dsm_handle	h;
		dsm_segment *seg;
		SnapHeader	hdr;
		char	   *copy;

		SpinLockAcquire(&s->gauges_lock);
		h = s->gauges_handle;
		SpinLockRelease(&s->gauges_lock);
		if (h == 0)
			return NULL;
		seg = dsm_attach(h);
		if (seg == NULL)
			continue;
		memcpy(&hdr, dsm_segment_address(seg), sizeof(hdr));
		if (hdr.magic != QS_GAUGES_MAGIC || hdr.len > dsm_segment_map_length(seg))
		{
			dsm_detach(seg);
			return NULL;
		}
		copy = palloc(hdr.len);
		memcpy(copy, dsm_segment_address(seg), hdr.len);
		dsm_detach(seg);
		*at = hdr.at;
		return copy;
	}
	return NULL;
}

/*
 * The rows a scrape shows, inside its transaction: the newest snapshot, or
 * the tables themselves when there is none fresh enough (then published).
 */
void
qs_gauges_get(QsGaugeSet *set)
{
	QsHttpShared *s = qs_http_shared;
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz at = 0;
	char	   *data = NULL;
	StringInfoData buf;

	if (qs_http_metrics_gauges_interval_s > 0)
	{
		/* the first worker looks every second (no latch: see qs_gauges_tick) */
		pg_atomic_write_u64(&s->gauges_wanted_at, (uint64) now);
		data = newest(&at);
		if (data && now - at > QS_GAUGES_IDLE)
			data = NULL;
	}
	if (data == NULL)
	{
		initStringInfo(&buf);
		collect(&buf);
		if (qs_http_metrics_gauges_interval_s > 0)
			publish(buf.data, buf.len, GetCurrentTransactionStartTimestamp());
		data = buf.data;
	}
	parse(data, set);
}

/* ---------------------------------------------------------------- the refresh */

/* The first worker's refresh under way, if any (only it starts them). */
static BackgroundWorkerHandle *refresh = NULL;
static TimestampTz refresh_started = 0;
static TimestampTz refresh_rest_until = 0;	/* after one: as long again idle */

/*
 * The first HTTP worker, every turn of its loop: start a refresh when one is
 * due, an interval after the snapshot's time and, when a refresh takes
 * longer than half the interval, as long after its end as it took (at most
 * half of a core on refreshes). Returns the milliseconds until it looks
 * again: at most a second. It polls, rather than have scrapes and the
 * refresh's end set its latch, so that its wake-ups stay its own loop's.
 */
long
qs_gauges_tick(void)
{
	QsHttpShared *s = qs_http_shared;
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz wanted = (TimestampTz) pg_atomic_read_u64(&s->gauges_wanted_at);
	TimestampTz at;
	TimestampTz due;
	BackgroundWorker w;
	pid_t		pid;
	MemoryContext oldcxt;
	bool		registered;

	if (qs_http_metrics_gauges_interval_s <= 0)
		return -1;
	if (refresh != NULL)
	{
		if (GetBackgroundWorkerPid(refresh, &pid) != BGWH_STOPPED)
			return 1000;
		pfree(refresh);
		refresh = NULL;
		refresh_rest_until = now + (now - refresh_started);
	}
	if (wanted == 0 || now - wanted > QS_GAUGES_IDLE)
		return 1000;
	SpinLockAcquire(&s->gauges_lock);
	at = s->gauges_at;
	SpinLockRelease(&s->gauges_lock);
	due = TimestampTzPlusMilliseconds(Max(at, refresh_started), qs_http_metrics_gauges_interval_s * 1000L);
	due = Max(due, refresh_rest_until);
	if (now < due)
		return Min(1000, Max(1, TimestampDifferenceMilliseconds(now, due)));

	memset(&w, 0, sizeof(w));
	w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w.bgw_start_time = BgWorkerStart_ConsistentState;
	w.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(w.bgw_library_name, "queen_streams", BGW_MAXLEN);
	strlcpy(w.bgw_function_name, "qs_gauges_worker_main", BGW_MAXLEN);
	strlcpy(w.bgw_name, "queen_streams gauges refresh", BGW_MAXLEN);
	strlcpy(w.bgw_type, "queen_streams gauges", BGW_MAXLEN);
	w.bgw_notify_pid = 0;
	refresh_started = now;
	/* the handle outlives this turn of the loop, whose context is reset */
	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	registered = RegisterDynamicBackgroundWorker(&w, &refresh);
	MemoryContextSwitchTo(oldcxt);
	if (!registered)
	{
		/* no free worker slot (max_worker_processes): try at the next interval */
		refresh = NULL;
		ereport(LOG,
				(errmsg("could not start the /metrics gauges refresh"),
				 errhint("Raise max_worker_processes; until then a scrape reads the tables once the snapshot is %d minutes old.",
						 (int) (QS_GAUGES_IDLE / USECS_PER_SEC / 60))));
		return 1000;
	}
	return 1000;
}

/* The refresh: read the rows in one transaction, publish them, exit. */
void
qs_gauges_worker_main(Datum main_arg)
{
	StringInfoData buf;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(qs_workers_database(), NULL, 0);
	pgstat_report_appname("queen_streams gauges");

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (OidIsValid(get_extension_oid("queen_streams", true)))
	{
		pgstat_report_activity(STATE_RUNNING, "queen_streams: refreshing the /metrics gauges");
		initStringInfo(&buf);
		collect(&buf);
		publish(buf.data, buf.len, GetCurrentTransactionStartTimestamp());
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	proc_exit(0);
}
