/*
 * queue_stats.c: queen.queue_stats(), what an operator watches per queue
 * and consumer group (GET /metrics reads the same rows), from the offsets
 * and cursors the storage keeps, never from decoding a segment.
 *
 * Per queue and group (queue mode is the group __QUEUE_MODE__), with a
 * cursor's floor = max(committed, log_start - 1):
 *   backlog   = offsets past the group's floor, summed over partitions; a
 *               partition the group has no cursor on counts whole, unless
 *               the group subscribed 'new' or from a timestamp (then it
 *               counts nothing until the group's first pop there)
 *   oldest    = created_at of the segment that holds the oldest such
 *               offset: a partition's oldest_live_at when the floor is
 *               below its log, else one probe of the segments' key
 *   dead      = rows of queen.log_dlq of the queue's partitions and group
 * A queue's groups are those with a cursor, a subscription or dead letters
 * on it; a queue with none of them is listed under __QUEUE_MODE__.
 *
 * Cost: one pass over queues, partitions, cursors and dead letters (hash
 * joins, no JIT: compiling it costs more than the pass), then, per group
 * with a backlog, a walk of the queue's partitions in oldest_live_at order
 * (log_partitions_oldest_live_idx) that stops at the first partition whose
 * oldest_live_at is not older than the oldest unacked message found so
 * far (a partition's unacked messages are never older than its log). When
 * the group has a cursor on every nonempty partition (or counts none it
 * has no cursor on), the walk starts at the oldest log among its
 * partitions with a backlog, which the pass finds: the caught-up
 * partitions with older logs are not read. About a second at 100,000
 * partitions: GET /metrics reads a snapshot of these rows that the
 * listener refreshes in the background (src/http/gauges_snapshot.c).
 */
#include "storage/storage.h"
#include "common/ids.h"
#include "common/spi.h"

#include "catalog/pg_type_d.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/uuid.h"

static QsPlan queue_stats_plan = {
	"WITH qt AS ("
	"  SELECT q.id AS qid, q.tenant_id, q.name, count(lp.id) AS parts,"
	"         COALESCE(sum(GREATEST(lp.last_offset - lp.log_start + 1, 0)), 0)::bigint AS messages,"
	"         count(lp.id) FILTER (WHERE lp.last_offset >= lp.log_start) AS nonempty"
	"    FROM queen.queues q LEFT JOIN queen.log_partitions lp ON lp.queue_id = q.id"
	"   GROUP BY q.id),"
	" c AS ("
	"  SELECT lp.queue_id AS qid, c.consumer_group AS grp,"
	"         count(*) FILTER (WHERE lp.last_offset >= lp.log_start) AS cur_nonempty,"
	"         COALESCE(sum(GREATEST(lp.last_offset - lp.log_start + 1, 0)), 0)::bigint AS cur_messages,"
	"         COALESCE(sum(GREATEST(lp.last_offset - GREATEST(c.committed, lp.log_start - 1), 0)), 0)::bigint"
	"           AS cur_backlog,"
	"         count(*) FILTER (WHERE lp.last_offset > GREATEST(c.committed, lp.log_start - 1)) AS cur_backlog_parts,"
	"         count(*) FILTER (WHERE c.worker_id IS NOT NULL AND c.lease_expires_at > now()) AS leased,"
	"         min(lp.oldest_live_at) FILTER (WHERE lp.last_offset > GREATEST(c.committed, lp.log_start - 1))"
	"           AS cur_first"
	"    FROM queen.log_consumers c JOIN queen.log_partitions lp ON lp.id = c.partition_id"
	"   GROUP BY 1, 2),"
	" d AS ("
	"  SELECT lp.queue_id AS qid, d.consumer_group AS grp, count(*) AS n"
	"    FROM queen.log_dlq d JOIN queen.log_partitions lp ON lp.id = d.partition_id"
	"   GROUP BY 1, 2),"
	" m AS ("
	"  SELECT queue_id AS qid, consumer_group AS grp,"
	"         subscription_mode IN ('new', 'timestamp') AS fresh"
	"    FROM queen.consumer_groups_metadata),"
	" g AS ("
	"  SELECT qid, grp FROM c UNION SELECT qid, grp FROM m UNION SELECT qid, grp FROM d"
	"  UNION SELECT qid, '" QS_QUEUE_MODE "' FROM qt"
	"   WHERE NOT EXISTS (SELECT 1 FROM c WHERE c.qid = qt.qid)"
	"     AND NOT EXISTS (SELECT 1 FROM m WHERE m.qid = qt.qid)"
	"     AND NOT EXISTS (SELECT 1 FROM d WHERE d.qid = qt.qid)),"
	" r AS ("
	"  SELECT qt.tenant_id, qt.name, g.grp, qt.parts,"
	"         CASE WHEN COALESCE(m.fresh, false) THEN COALESCE(c.cur_backlog_parts, 0)"
	"              ELSE qt.nonempty - COALESCE(c.cur_nonempty, 0) + COALESCE(c.cur_backlog_parts, 0)"
	"         END AS backlog_parts,"
	"         COALESCE(c.leased, 0) AS leased,"
	"         CASE WHEN COALESCE(m.fresh, false) THEN COALESCE(c.cur_backlog, 0)"
	"              ELSE qt.messages - COALESCE(c.cur_messages, 0) + COALESCE(c.cur_backlog, 0)"
	"         END AS backlog,"
	"         COALESCE(d.n, 0) AS dead, qt.messages, qt.qid, COALESCE(m.fresh, false) AS fresh,"
	"         CASE WHEN COALESCE(m.fresh, false) OR qt.nonempty = c.cur_nonempty THEN c.cur_first END AS walk_from"
	"    FROM g JOIN qt ON qt.qid = g.qid"
	"    LEFT JOIN c ON c.qid = g.qid AND c.grp = g.grp"
	"    LEFT JOIN m ON m.qid = g.qid AND m.grp = g.grp"
	"    LEFT JOIN d ON d.qid = g.qid AND d.grp = g.grp)"
	"SELECT tenant_id, name, grp, parts, backlog_parts, leased, backlog, dead, messages, qid, fresh, walk_from"
	"  FROM r ORDER BY backlog DESC, tenant_id, name COLLATE \"C\", grp COLLATE \"C\"",
	0, {}
};

/*
 * A page of a queue's nonempty partitions, oldest log first, after ($3, $4)
 * (NULL: from the first), with the group's cursor: the index gives the
 * order and the start, so a page reads its rows and probes their cursors only.
 */
static QsPlan walk_plan = {
	"SELECT lp.id, lp.oldest_live_at, lp.last_offset, lp.log_start,"
	"       (SELECT c.committed FROM queen.log_consumers c"
	"         WHERE c.partition_id = lp.id AND c.consumer_group = $2)"
	"  FROM queen.log_partitions lp"
	" WHERE lp.queue_id = $1 AND lp.oldest_live_at IS NOT NULL AND lp.last_offset >= lp.log_start"
	"   AND lp.oldest_live_at >= COALESCE($3::timestamptz, '-infinity')"
	"   AND ($3::timestamptz IS NULL OR (lp.oldest_live_at, lp.id) > ($3, $4))"
	" ORDER BY lp.oldest_live_at, lp.id LIMIT $5",
	5, {UUIDOID, TEXTOID, TIMESTAMPTZOID, UUIDOID, INT4OID}
};

/* the first page is short: the oldest partition usually decides */
#define WALK_FIRST 4
#define WALK_PAGE 64

/*
 * The created_at of the group's oldest unacked message on the queue: the
 * walk stops at the first partition whose log is not older than the best
 * found (its unacked messages cannot be older).
 */
static bool
oldest_unacked(Datum qid, const char *group, bool fresh, Datum from, bool nofrom,
			   TimestampTz *oldest)
{
	Datum		args[5];
	char		nulls[5] = {' ', ' ', 'n', 'n', ' '};
	pg_uuid_t	nil;
	bool		found = false;
	bool		done = false;
	int			page = WALK_FIRST;

	args[0] = qid;
	args[1] = CStringGetTextDatum(group);
	if (!nofrom)
	{
		/* after every partition older than the first with a backlog (all caught up) */
		memset(&nil, 0, sizeof(nil));
		args[2] = from;
		args[3] = UUIDPGetDatum(&nil);
		nulls[2] = nulls[3] = ' ';
	}
	while (!done)
	{
		SPITupleTable *tt;
		uint64		n;

		args[4] = Int32GetDatum(page);
		qs_exec(&walk_plan, args, nulls, 0);
		tt = SPI_tuptable;
		n = SPI_processed;
		for (uint64 i = 0; i < n && !done; i++)
		{
			HeapTuple	tup = tt->vals[i];
			bool		isnull,
						nocursor;
			TimestampTz live = DatumGetTimestampTz(SPI_getbinval(tup, tt->tupdesc, 2, &isnull));
			int64		last = DatumGetInt64(SPI_getbinval(tup, tt->tupdesc, 3, &isnull));
			int64		start = DatumGetInt64(SPI_getbinval(tup, tt->tupdesc, 4, &isnull));
			int64		committed = DatumGetInt64(SPI_getbinval(tup, tt->tupdesc, 5, &nocursor));
			int64		floor = nocursor ? start - 1 : Max(committed, start - 1);
			TimestampTz at = live;

			CHECK_FOR_INTERRUPTS();
			if (found && live >= *oldest)
			{
				done = true;
				break;
			}
			if ((nocursor && fresh) || last <= floor)
				continue;		/* nothing to ack here */
			if (floor >= start)
			{
				int64		base,
							end;
				Datum		pid = SPI_getbinval(tup, tt->tupdesc, 1, &isnull);

				if (!qs_segment_at(pid, floor + 1, &base, &end, &at))
					at = live;	/* cannot be: the floor is inside the log */
				SPI_freetuptable(SPI_tuptable);
			}
			if (!found || at < *oldest)
				*oldest = at;
			found = true;
		}
		if (n < (uint64) page)
			done = true;
		else if (!done)
		{
			/* the next page starts after this one's last row (copied out of it) */
			bool		isnull;

			args[2] = SPI_getbinval(tt->vals[n - 1], tt->tupdesc, 2, &isnull);
			args[3] = qs_uuid_datum(DatumGetUUIDP(SPI_getbinval(tt->vals[n - 1], tt->tupdesc, 1, &isnull)));
			nulls[2] = nulls[3] = ' ';
			page = WALK_PAGE;
		}
		SPI_freetuptable(tt);
	}
	return found;
}

int
qs_queue_stats_load(QsQueueStatsRow **out)
{
	int			save = NewGUCNestLevel();
	SPITupleTable *tt;
	uint64		n;
	QsQueueStatsRow *rows;
	TimestampTz now = GetCurrentTransactionStartTimestamp();

	/* compiling the pass would cost more than the pass itself */
	(void) set_config_option("jit", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	qs_exec(&queue_stats_plan, NULL, NULL, 0);
	tt = SPI_tuptable;
	n = SPI_processed;
	rows = palloc0(sizeof(QsQueueStatsRow) * Max(n, 1));
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	tup = tt->vals[i];
		QsQueueStatsRow *r = &rows[i];
		bool		isnull;

		CHECK_FOR_INTERRUPTS();
		r->tenant = *DatumGetUUIDP(SPI_getbinval(tup, tt->tupdesc, 1, &isnull));
		r->queue = TextDatumGetCString(SPI_getbinval(tup, tt->tupdesc, 2, &isnull));
		r->group = TextDatumGetCString(SPI_getbinval(tup, tt->tupdesc, 3, &isnull));
		r->partitions = DatumGetInt64(SPI_getbinval(tup, tt->tupdesc, 4, &isnull));
		r->backlog_partitions = DatumGetInt64(SPI_getbinval(tup, tt->tupdesc, 5, &isnull));
		r->leased_partitions = DatumGetInt64(SPI_getbinval(tup, tt->tupdesc, 6, &isnull));
		r->backlog = DatumGetInt64(SPI_getbinval(tup, tt->tupdesc, 7, &isnull));
		r->dead_letters = DatumGetInt64(SPI_getbinval(tup, tt->tupdesc, 8, &isnull));
		r->messages = DatumGetInt64(SPI_getbinval(tup, tt->tupdesc, 9, &isnull));
		if (r->backlog > 0)
		{
			bool		nofrom;
			Datum		from = SPI_getbinval(tup, tt->tupdesc, 12, &nofrom);

			r->has_oldest = oldest_unacked(SPI_getbinval(tup, tt->tupdesc, 10, &isnull), r->group,
										   DatumGetBool(SPI_getbinval(tup, tt->tupdesc, 11, &isnull)),
										   from, nofrom, &r->oldest);
		}
		if (r->has_oldest)
			r->lag_seconds = Max((double) (now - r->oldest) / USECS_PER_SEC, 0.0);
	}
	SPI_freetuptable(tt);
	AtEOXact_GUC(true, save);
	*out = rows;
	return (int) n;
}

/* SQL: queen.queue_stats() — every tenant's queues and groups (the view queen_streams.queue_stats) */
PG_FUNCTION_INFO_V1(qs_queue_stats);
Datum
qs_queue_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	QsQueueStatsRow *rows;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	qs_spi_connect();
	n = qs_queue_stats_load(&rows);
	for (int i = 0; i < n; i++)
	{
		QsQueueStatsRow *r = &rows[i];
		Datum		values[11];
		bool		nulls[11];

		CHECK_FOR_INTERRUPTS();
		memset(nulls, 0, sizeof(nulls));
		values[0] = qs_uuid_datum(&r->tenant);
		values[1] = CStringGetTextDatum(r->queue);
		values[2] = CStringGetTextDatum(r->group);
		values[3] = Int64GetDatum(r->partitions);
		values[4] = Int64GetDatum(r->backlog_partitions);
		values[5] = Int64GetDatum(r->leased_partitions);
		values[6] = Int64GetDatum(r->backlog);
		values[7] = TimestampTzGetDatum(r->oldest);
		nulls[7] = !r->has_oldest;
		values[8] = Float8GetDatum(r->lag_seconds);
		values[9] = Int64GetDatum(r->dead_letters);
		values[10] = Int64GetDatum(r->messages);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	qs_spi_finish();
	PG_RETURN_VOID();
}
