/*
 * metrics.c: GET /metrics (Prometheus text format), the SQL views over the
 * same shared counters, and the worker-local map from partition to queue
 * that lets acks (which name only a partition) count on their queue.
 */
#include "http/dispatch/route.h"
#include "http/dispatch/cells.h"
#include "http/dispatch/metrics.h"
#include "http/dispatch/metrics_gauges.h"
#include "http/dispatch/metrics_text.h"
#include "common/ids.h"
#include "common/spi.h"
#include "storage/storage.h"
#include "streams/streams.h"

#include "access/xact.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

/* ---------------------------------------------------------------- partition -> queue */

typedef struct PartKey
{
	pg_uuid_t	pid;
	pg_uuid_t	tenant;
} PartKey;

typedef struct PartEntry
{
	PartKey		key;
	QsQueueStat *stat;
	uint32		version;		/* the slot's when it was found: it may since count another queue */
	char	   *overflow_queue; /* counted in the overflow row: the name, to look again */
} PartEntry;

static HTAB *partitions = NULL;
static MemoryContext partition_names = NULL;	/* the overflow_queue names, reset with the map */

#define QS_PARTITION_CACHE_MAX 100000

void
qs_partition_stat_remember(const pg_uuid_t *pid, const pg_uuid_t *tenant, const char *queue)
{
	PartKey		key;
	PartEntry  *e;
	bool		found;

	if (qs_http_shared == NULL)
		return;
	if (partitions == NULL || hash_get_num_entries(partitions) >= QS_PARTITION_CACHE_MAX)
	{
		HASHCTL		ctl;

		if (partitions)
			hash_destroy(partitions);
		if (partition_names == NULL)
			partition_names = AllocSetContextCreate(TopMemoryContext, "queen_streams partition names",
													ALLOCSET_SMALL_SIZES);
		MemoryContextReset(partition_names);
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(PartKey);
		ctl.entrysize = sizeof(PartEntry);
		ctl.hcxt = TopMemoryContext;
		partitions = hash_create("queen_streams partitions", 1024, &ctl,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	memset(&key, 0, sizeof(key));
	key.pid = *pid;
	key.tenant = *tenant;
	e = hash_search(partitions, &key, HASH_ENTER, &found);
	if (!found)
	{
		e->stat = qs_stat_entry(tenant, queue, qs_queue_key(tenant, queue), &e->version);
		e->overflow_queue = e->stat == &qs_http_shared->stats[0]
			? MemoryContextStrdup(partition_names, queue) : NULL;
	}
}

QsQueueStat *
qs_partition_stat(const pg_uuid_t *pid, const pg_uuid_t *tenant)
{
	PartKey		key;
	PartEntry  *e;

	if (partitions == NULL)
		return NULL;
	memset(&key, 0, sizeof(key));
	key.pid = *pid;
	key.tenant = *tenant;
	e = hash_search(partitions, &key, HASH_FIND, NULL);
	if (e == NULL)
		return NULL;
	/* the slot was freed or taken over since: learn the queue's again */
	if (pg_atomic_read_u32(&e->stat->ready) != e->version)
	{
		if (e->overflow_queue)
			pfree(e->overflow_queue);
		hash_search(partitions, &key, HASH_REMOVE, NULL);
		return NULL;
	}
	/* counted in the overflow row: a slot may have been freed since */
	if (e->overflow_queue)
	{
		e->stat = qs_stat_entry(tenant, e->overflow_queue, qs_queue_key(tenant, e->overflow_queue),
								&e->version);
		if (e->stat != &qs_http_shared->stats[0])
		{
			pfree(e->overflow_queue);
			e->overflow_queue = NULL;
		}
	}
	return e->stat;
}

/* A pop's message names its partition: remember the partition's queue. */
void
qs_pop_note_partition(QsReq *req, const pg_uuid_t *pid)
{
	if (qs_partition_stat(pid, &req->tenant) == NULL)
		qs_partition_stat_remember(pid, &req->tenant, req->pop->queue);
}

/* ---------------------------------------------------------------- /metrics */

/* the dedup cache's whole passes, by QsDedupScan */
static const char *const dedup_scan_reason[QS_DEDUP_SCAN_REASONS] = {
	[QS_SCAN_ROOM] = "room",
	[QS_SCAN_DROP] = "drop",
	[QS_SCAN_PURGE] = "purge",
};

static const char *const stream_metric[QS_SC_COUNT] = {
	"queen_streams_stream_cycles_total",
	"queen_streams_stream_cycles_failed_total",
	"queen_streams_stream_events_total",
	"queen_streams_stream_events_filtered_total",
	"queen_streams_stream_events_late_total",
	"queen_streams_stream_windows_total",
	"queen_streams_stream_idle_flushes_total",
	"queen_streams_stream_cycles_stale_total"
};

static const char *const stream_help[QS_SC_COUNT] = {
	"Cycles the stream workers committed for declared streams.",
	"Steps of the stream workers that failed and rolled back (pop, fold, cycle, flush).",
	"Source messages folded by declared streams (each counted once per committed cycle).",
	"Source messages a declared stream's filter left out.",
	"Source messages that arrived too late for their windows (dropped or sent to the late queue).",
	"Closed windows declared streams pushed to their sinks.",
	"Idle-flush cycles of declared streams.",
	"Cycles refused as stale (SDK and declared alike): nothing of them committed."
};

static const char *const stat_help[QS_STAT_COUNT] = {
	"Messages pushed and committed (from HTTP, SQL and cycle sinks).",
	"Messages delivered by HTTP pops.",
	"Messages acknowledged as completed over HTTP (acks and cycle source acks).",
	"Messages acknowledged as failed, retry or dlq over HTTP.",
	"Stream cycles committed over HTTP, by source queue.",
	"Stream cycles over HTTP that answered success:false, by source queue."
};

static const char *const stat_metric[QS_STAT_COUNT] = {
	"queen_streams_queue_pushed_messages_total",
	"queen_streams_queue_popped_messages_total",
	"queen_streams_queue_acked_messages_total",
	"queen_streams_queue_nacked_messages_total",
	"queen_streams_queue_cycles_total",
	"queen_streams_queue_failed_cycles_total"
};

/*
 * A slot's owner and queue name, read without its lock: false when the slot
 * is free, was freed or taken over while read, or (with `only`) belongs to
 * another tenant, whose queues are not the caller's to see.
 */
static bool
read_slot(QsQueueStat *e, const pg_uuid_t *only, pg_uuid_t *owner, char *name)
{
	uint32		v = pg_atomic_read_u32(&e->ready);

	if (v == 0)
		return false;
	pg_read_barrier();
	*owner = e->tenant;
	strlcpy(name, e->name, QS_STAT_NAME);
	pg_read_barrier();
	if (pg_atomic_read_u32(&e->ready) != v)
		return false;
	return only == NULL || memcmp(owner, only, sizeof(pg_uuid_t)) == 0;
}

/*
 * The Prometheus text. `only`: the queues of that tenant alone, never the
 * overflow bucket stats[0] (it mixes tenants). `listener`: also the
 * listener-wide series (requests by route and status, connections, parked
 * pops, workers, wake-ups), which count every tenant's traffic.
 */
void
qs_metrics_text(StringInfo out, const pg_uuid_t *only, bool listener)
{
	QsHttpShared *s = qs_http_shared;

	if (!listener)
		goto queues;
	qs_metrics_header(out, "queen_streams_http_requests_total", "counter",
		   "HTTP requests answered, by route and status code.");
	/* rows that share a label (two pop patterns, say) are counted as one */
	for (int r = 0; r < qs_route_count(); r++)
	{
		int			same[QS_MAX_ROUTES];
		int			nsame = 0;
		bool		seen = false;

		for (int e = 0; e < r && !seen; e++)
			seen = strcmp(qs_route_name(e), qs_route_name(r)) == 0;
		if (seen)
			continue;
		for (int o = r; o < qs_route_count(); o++)
			if (strcmp(qs_route_name(o), qs_route_name(r)) == 0)
				same[nsame++] = o;
		for (int c = 0; c < QS_CODE_COUNT; c++)
		{
			uint64		n = 0;

			for (int o = 0; o < nsame; o++)
				n += pg_atomic_read_u64(&s->requests[same[o]][c]);
			if (n == 0)
				continue;
			appendStringInfo(out, "queen_streams_http_requests_total{route=\"%s\",code=\"%d\"} "
							 UINT64_FORMAT "\n", qs_route_name(r), QS_CODE_MIN + c, n);
		}
	}

	qs_metrics_header(out, "queen_streams_http_connections", "gauge", "Open HTTP connections, by worker.");
	for (int w = 0; w < qs_http_workers; w++)
		appendStringInfo(out, "queen_streams_http_connections{worker=\"%d\"} %u\n", w,
						 pg_atomic_read_u32(&s->workers[w].connections));
	qs_metrics_header(out, "queen_streams_http_parked_pops", "gauge",
		   "Long-poll pops parked until their queue gets messages, by worker.");
	for (int w = 0; w < qs_http_workers; w++)
		appendStringInfo(out, "queen_streams_http_parked_pops{worker=\"%d\"} %u\n", w,
						 pg_atomic_read_u32(&s->workers[w].parked));
	qs_metrics_header(out, "queen_streams_http_worker_up", "gauge", "1 when the HTTP worker is running.");
	for (int w = 0; w < qs_http_workers; w++)
		appendStringInfo(out, "queen_streams_http_worker_up{worker=\"%d\"} %d\n", w,
						 s->workers[w].pid != 0 ? 1 : 0);
	/* the role after a failover: an alert on a node that should be primary */
	qs_metrics_header(out, "queen_streams_standby", "gauge",
		   "1 on a hot standby (it serves reads and refuses writes), 0 on the primary.");
	appendStringInfo(out, "queen_streams_standby %d\n", qs_role_standby() ? 1 : 0);
	qs_metrics_header(out, "queen_streams_wakeups_total", "counter",
		   "Commits that moved the wake generation of a queue.");
	appendStringInfo(out, "queen_streams_wakeups_total " UINT64_FORMAT "\n",
					 pg_atomic_read_u64(&s->wakes));
	qs_metrics_header(out, "queen_streams_http_group_commits_total", "counter",
		   "Group commits: transactions that carried one or more HTTP requests.");
	appendStringInfo(out, "queen_streams_http_group_commits_total " UINT64_FORMAT "\n",
					 pg_atomic_read_u64(&s->group_commits));
	qs_metrics_header(out, "queen_streams_http_group_requests_total", "counter",
		   "HTTP requests committed by group commits.");
	appendStringInfo(out, "queen_streams_http_group_requests_total " UINT64_FORMAT "\n",
					 pg_atomic_read_u64(&s->group_requests));
	qs_metrics_header(out, "queen_streams_http_group_deferrals_total", "counter",
		   "Requests that gave way on a lock held elsewhere and ran in a later group.");
	appendStringInfo(out, "queen_streams_http_group_deferrals_total " UINT64_FORMAT "\n",
					 pg_atomic_read_u64(&s->group_deferrals));
	qs_metrics_header(out, "queen_streams_http_group_merged_total", "counter",
		   "Requests of a group commit served by one call with others (the group's pushes as one push, its cycles in one call).");
	appendStringInfo(out, "queen_streams_http_group_merged_total " UINT64_FORMAT "\n",
					 pg_atomic_read_u64(&s->group_merged));
	/* server-wide, like the wake-ups (storage counts it: fence.c) */
	qs_metrics_header(out, "queen_streams_corrupt_segment_skips_total", "counter",
		   "Wildcard pops that skipped a partition whose next segment does not decode.");
	appendStringInfo(out, "queen_streams_corrupt_segment_skips_total " UINT64_FORMAT "\n",
					 qs_corrupt_skips());
	/* the push dedup cache, server-wide (src/storage/dedup.c) */
	{
		QsDedupStats d;

		if (qs_dedup_stats(&d))
		{
			qs_metrics_header(out, "queen_streams_dedup_cache_capacity", "gauge",
				   "Transaction-id hashes the dedup cache can hold (queen_streams.dedup_cache_entries).");
			appendStringInfo(out, "queen_streams_dedup_cache_capacity " INT64_FORMAT "\n", d.capacity);
			qs_metrics_header(out, "queen_streams_dedup_cache_hashes", "gauge", "Transaction-id hashes the dedup cache holds.");
			appendStringInfo(out, "queen_streams_dedup_cache_hashes " INT64_FORMAT "\n", d.entries);
			qs_metrics_header(out, "queen_streams_dedup_cache_partitions", "gauge",
				   "Partitions the dedup cache answers for, by state (uncached: its window outgrew the cache; probed through queen.log_txn_keys).");
			appendStringInfo(out, "queen_streams_dedup_cache_partitions{state=\"cached\"} " INT64_FORMAT "\n",
							 d.partitions);
			appendStringInfo(out, "queen_streams_dedup_cache_partitions{state=\"uncached\"} " INT64_FORMAT "\n",
							 d.uncached);
			qs_metrics_header(out, "queen_streams_dedup_window_reads_total", "counter",
				   "Dedup probes answered by reading the partition's window (a standby, or a cached entry that cannot say).");
			appendStringInfo(out, "queen_streams_dedup_window_reads_total " UINT64_FORMAT "\n", d.window_reads);
			qs_metrics_header(out, "queen_streams_dedup_key_probes_total", "counter",
				   "Dedup probes of uncached partitions answered from queen.log_txn_keys (one row per hash).");
			appendStringInfo(out, "queen_streams_dedup_key_probes_total " UINT64_FORMAT "\n", d.key_probes);
			qs_metrics_header(out, "queen_streams_dedup_cache_evictions_total", "counter",
				   "Times a partition stopped being cached (the cache full, or the partition past dedup_partition_entries).");
			appendStringInfo(out, "queen_streams_dedup_cache_evictions_total " UINT64_FORMAT "\n", d.evictions);
			qs_metrics_header(out, "queen_streams_dedup_cache_scans_total", "counter",
				   "Passes over the whole dedup cache, which hold its lock, by reason: making room, dropping a partition's hashes (a window raised, or the partition leaving the cache), purging rolled-back transactions another backend did not settle.");
			for (int r = 0; r < QS_DEDUP_SCAN_REASONS; r++)
				appendStringInfo(out, "queen_streams_dedup_cache_scans_total{reason=\"%s\"} " UINT64_FORMAT "\n",
								 dedup_scan_reason[r], d.scans[r]);
		}
	}
	/* declared streams, server-wide (the stream workers count them: src/streams/pool.c) */
	for (int k = 0; k < QS_SC_COUNT; k++)
	{
		qs_metrics_header(out, stream_metric[k], "counter", stream_help[k]);
		appendStringInfo(out, "%s " UINT64_FORMAT "\n", stream_metric[k],
						 qs_stream_counter((QsStreamCounter) k));
	}
	qs_metrics_header(out, "queen_streams_stream_workers_up", "gauge", "Stream workers running.");
	appendStringInfo(out, "queen_streams_stream_workers_up %d\n", qs_stream_workers_up());

queues:
	for (int k = 0; k < QS_STAT_COUNT; k++)
	{
		qs_metrics_header(out, stat_metric[k], "counter", stat_help[k]);
		for (int i = only ? 1 : 0; i < s->nstats; i++)
		{
			QsQueueStat *e = &s->stats[i];
			char		tenant[QS_UUID_STRLEN + 1];
			char		name[QS_STAT_NAME];
			pg_uuid_t	owner;
			uint64		n;

			if ((n = pg_atomic_read_u64(&e->c[k])) == 0 || !read_slot(e, only, &owner, name))
				continue;
			qs_uuid_format(&owner, tenant);
			appendStringInfo(out, "%s{tenant=\"%s\",queue=\"", stat_metric[k], tenant);
			qs_metrics_label(out, name);
			appendStringInfo(out, "\"} " UINT64_FORMAT "\n", n);
		}
	}

	/* a gauge: every queue with a slot, 0 included (a series must not vanish at 0) */
	qs_metrics_header(out, "queen_streams_queue_parked_consumers", "gauge",
		   "Long-poll pops parked on the queue, waiting for messages.");
	for (int i = only ? 1 : 0; i < s->nstats; i++)
	{
		QsQueueStat *e = &s->stats[i];
		char		tenant[QS_UUID_STRLEN + 1];
		char		name[QS_STAT_NAME];
		pg_uuid_t	owner;
		int32		n;

		n = (int32) pg_atomic_read_u32(&e->parked);
		if (!read_slot(e, only, &owner, name))
			continue;
		qs_uuid_format(&owner, tenant);
		appendStringInfo(out, "queen_streams_queue_parked_consumers{tenant=\"%s\",queue=\"", tenant);
		qs_metrics_label(out, name);
		/* a decrement that raced a slot's takeover may leave it below zero */
		appendStringInfo(out, "\"} %d\n", Max(n, 0));
	}
}


/*
 * The gauges, in a subtransaction of their own: one that fails (a statement
 * timeout at scale, say) is logged and leaves the counters answered, with
 * queen_streams_gauges_up 0, instead of turning the scrape into a 500 when
 * the server is busiest.
 */
static void
gauges_or_none(StringInfo out, const pg_uuid_t *only)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	StringInfoData g;
	volatile bool ok = true;

	initStringInfo(&g);
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		qs_metrics_gauges(&g, only);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		qs_log_dropped_error("the /metrics gauges failed; the scrape answers the counters and queen_streams_gauges_up 0");
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		ok = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	if (ok)
		appendBinaryStringInfo(out, g.data, g.len);
	appendStringInfo(out, "# HELP queen_streams_gauges_up Whether the gauges of this scrape could be read (0: see the server log).\n"
					 "# TYPE queen_streams_gauges_up gauge\n"
					 "queen_streams_gauges_up %d\n", ok ? 1 : 0);
}

static void
metrics_run(QsReq *req)
{
	StringInfoData out;

	bool		tenancy = qs_http_tenancy == QS_TENANCY_HEADER;

	/*
	 * Under tenancy a tenant sees its own queues; the listener-wide series
	 * count every tenant's requests, so only a server-wide admin sees them.
	 */
	initStringInfo(&out);
	qs_metrics_text(&out, tenancy ? &req->tenant : NULL,
					!tenancy || req->server_admin);
	/*
	 * A scrape where the extension is missing still gets the counters; a
	 * router keeps no queues (its cells' /metrics have the gauges).
	 */
	if (qs_extension_installed() && !qs_cells_is_router)
		gauges_or_none(&out, tenancy ? &req->tenant : NULL);
	req->status = 200;
	req->content_type = "text/plain; version=0.0.4; charset=utf-8";
	req->resp = out.data;
	req->resp_len = out.len;
}

/* in a transaction: the gauges read the tables */
const QsRouteDef qs_route_metrics = {NULL, metrics_run, NULL, "metrics failed", false, true};

/* ---------------------------------------------------------------- SQL */

/* SQL: queen_streams.queue_metrics() — the per-queue counters */
PG_FUNCTION_INFO_V1(qs_queue_metrics);
Datum
qs_queue_metrics(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	QsHttpShared *s = qs_http_shared;

	InitMaterializedSRF(fcinfo, 0);
	if (s == NULL)
		PG_RETURN_VOID();
	for (int i = 0; i < s->nstats; i++)
	{
		QsQueueStat *e = &s->stats[i];
		Datum		values[2 + QS_STAT_COUNT];
		bool		nulls[2 + QS_STAT_COUNT];
		bool		any = false;
		pg_uuid_t	owner;
		char		name[QS_STAT_NAME];

		if (!read_slot(e, NULL, &owner, name))
			continue;
		memset(nulls, 0, sizeof(nulls));
		values[0] = qs_uuid_datum(&owner);
		nulls[0] = (i == 0);
		values[1] = CStringGetTextDatum(name);
		for (int k = 0; k < QS_STAT_COUNT; k++)
		{
			uint64		n = pg_atomic_read_u64(&e->c[k]);

			values[2 + k] = Int64GetDatum((int64) n);
			any |= n > 0;
		}
		if (any)
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	PG_RETURN_VOID();
}

/* SQL: queen_streams.http_workers() — the listener's workers */
PG_FUNCTION_INFO_V1(qs_http_workers_sql);
Datum
qs_http_workers_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	QsHttpShared *s = qs_http_shared;

	InitMaterializedSRF(fcinfo, 0);
	if (s == NULL || !process_shared_preload_libraries_done)
		PG_RETURN_VOID();
	for (int w = 0; w < QS_MAX_WORKERS; w++)
	{
		QsWorkerSlot *slot = &s->workers[w];
		Datum		values[7];
		bool		nulls[7];
		int			pid = slot->pid;

		if (pid == 0)
			continue;
		memset(nulls, 0, sizeof(nulls));
		values[0] = Int32GetDatum(w);
		values[1] = Int32GetDatum(pid);
		values[2] = TimestampTzGetDatum(slot->started_at);
		values[3] = Int32GetDatum((int32) pg_atomic_read_u32(&slot->connections));
		values[4] = Int32GetDatum((int32) pg_atomic_read_u32(&slot->parked));
		values[5] = Int64GetDatum((int64) pg_atomic_read_u64(&slot->requests));
		values[6] = BoolGetDatum(slot->listening);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	PG_RETURN_VOID();
}
