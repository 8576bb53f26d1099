/*
 * retention.c: queen.retention_sweep. Deletes whole segments older than a
 * queue's retention (or its maxWaitTimeSeconds), moves log_start past them, and purges hash sidecar rows
 * nobody can still need. Partitions are visited in
 * ascending id, the lock order pushes and cycles use. created_at is monotone
 * in offsets, so the new watermark stamps come from one index probe each.
 */
#include "storage/storage.h"
#include "common/ids.h"
#include "common/spi.h"

#include "catalog/pg_type_d.h"

/*
 * A partition's age limit: retentionSeconds when retention is enabled, and
 * maxWaitTimeSeconds (Queen's eviction: messages waiting longer are
 * deleted, not dead-lettered, whatever retentionEnabled says); the shorter.
 */
static QsPlan expired_plan = {
	"SELECT id, secs FROM ("
	"  SELECT p.id, p.oldest_live_at,"
	"         LEAST(CASE WHEN q.retention_enabled AND q.retention_seconds > 0"
	"                    THEN q.retention_seconds END,"
	"               NULLIF(q.max_wait_time_seconds, 0)) AS secs"
	"    FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
	"   WHERE (q.retention_enabled AND q.retention_seconds > 0) OR q.max_wait_time_seconds > 0) a"
	" WHERE oldest_live_at < now() - make_interval(secs => secs)"
	" ORDER BY id",
	0, {}
};

static QsPlan delete_segments_plan = {
	"WITH gone AS (DELETE FROM queen.log_segments"
	"               WHERE partition_id = $1 AND created_at < now() - make_interval(secs => $2)"
	"              RETURNING end_offset)"
	"UPDATE queen.log_partitions p"
	"   SET log_start = GREATEST(p.log_start, g.top + 1),"
	"       oldest_live_at = (SELECT s.created_at FROM queen.log_segments s"
	"                          WHERE s.partition_id = $1 AND s.base_offset > g.top"
	"                          ORDER BY s.base_offset LIMIT 1)"
	"  FROM (SELECT max(end_offset) AS top, count(*) AS n FROM gone) g"
	" WHERE p.id = $1 AND g.n > 0"
	" RETURNING g.n",
	2, {UUIDOID, INT4OID}
};

/*
 * Hashes stay while an ack may still resolve through them: they go once
 * older than the dedup window (at least 15 minutes) and below every
 * consumer's cursor, or once retention has removed their segment. One
 * partition at a time, so no sweep holds more than one partition row lock.
 */
static QsPlan purge_candidates_plan = {
	"SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
	" WHERE p.oldest_txn_at IS NOT NULL"
	"   AND (p.txns_start < p.log_start"
	"        OR p.oldest_txn_at < now() - make_interval(secs => GREATEST(q.dedup_window_seconds,"
	"                                  q.completed_retention_seconds, 900)))"
	" ORDER BY p.id",
	0, {}
};

static QsPlan purge_txns_plan = {
	"WITH part AS ("
	"  SELECT p.id, p.log_start,"
	"         now() - make_interval(secs => GREATEST(q.dedup_window_seconds,"
	"                                  q.completed_retention_seconds, 900)) AS horizon,"
	"         (SELECT min(c.committed) FROM queen.log_consumers c"
	"           WHERE c.partition_id = p.id) AS floor"
	"    FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
	"   WHERE p.id = $1 AND p.oldest_txn_at IS NOT NULL),"
	" gone AS (DELETE FROM queen.log_txns t USING part"
	"           WHERE t.partition_id = part.id"
	"             AND (t.end_offset < part.log_start"
	"                  OR (t.created_at < part.horizon AND t.end_offset <= part.floor))"
	"          RETURNING t.end_offset),"
	" keys AS (DELETE FROM queen.log_txn_keys k USING part"
	"           WHERE (SELECT max(end_offset) FROM gone) IS NOT NULL"
	"             AND k.partition_id = part.id"
	"             AND k.msg_offset <= (SELECT max(end_offset) FROM gone)),"
	" moved AS (UPDATE queen.log_partitions p"
	"              SET txns_start = GREATEST(p.txns_start, g.top + 1),"
	"                  oldest_txn_at = (SELECT t.created_at FROM queen.log_txns t"
	"                                    WHERE t.partition_id = p.id AND t.base_offset > g.top"
	"                                    ORDER BY t.base_offset LIMIT 1)"
	"             FROM (SELECT max(end_offset) AS top, count(*) AS n FROM gone) g"
	"            WHERE p.id = $1 AND g.n > 0 RETURNING 1)"
	"SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM moved)",
	1, {UUIDOID}
};

/*
 * The partitions a sweep visits, in ascending id, with what to do to each:
 * secs > 0, delete segments older than that; purge, look at its hashes.
 * The caller is connected to SPI; the list is allocated in `into`.
 */
QsSweepItem *
qs_retention_plan(MemoryContext into, int *n)
{
	SPITupleTable *exp;
	SPITupleTable *pur;
	uint64		nexp,
				npur,
				i = 0,
				k = 0;
	QsSweepItem *items;
	int			m = 0;

	qs_exec(&expired_plan, NULL, NULL, 0);
	exp = SPI_tuptable;
	nexp = SPI_processed;
	qs_exec(&purge_candidates_plan, NULL, NULL, 0);
	pur = SPI_tuptable;
	npur = SPI_processed;
	items = MemoryContextAllocZero(into, sizeof(QsSweepItem) * (nexp + npur + 1));

	/* merge the two id-ordered lists */
	while (i < nexp || k < npur)
	{
		bool		isnull;
		pg_uuid_t	a,
					b;
		int			c;

		if (i < nexp)
			a = *DatumGetUUIDP(SPI_getbinval(exp->vals[i], exp->tupdesc, 1, &isnull));
		if (k < npur)
			b = *DatumGetUUIDP(SPI_getbinval(pur->vals[k], pur->tupdesc, 1, &isnull));
		c = i >= nexp ? 1 : k >= npur ? -1 : memcmp(a.data, b.data, UUID_LEN);
		if (c <= 0)
		{
			items[m].pid = a;
			items[m].secs = DatumGetInt32(SPI_getbinval(exp->vals[i], exp->tupdesc, 2, &isnull));
			i++;
		}
		else
			items[m].pid = b;
		if (c >= 0)
		{
			items[m].purge = true;
			k++;
		}
		m++;
	}
	SPI_freetuptable(pur);
	SPI_freetuptable(exp);
	*n = m;
	return items;
}

/*
 * Sweep one partition: delete its expired segments, move log_start, purge
 * the hashes nobody needs. The caller is connected to SPI.
 */
void
qs_retention_sweep_one(const QsSweepItem *item, QsSweepResult *res)
{
	Datum		args[2];

	args[0] = qs_uuid_datum(&item->pid);
	if (item->secs > 0)
	{
		args[1] = Int32GetDatum(item->secs);
		qs_exec(&delete_segments_plan, args, NULL, 0);
		if (SPI_processed == 1)
		{
			res->segments += qs_col_int64(0, 1, 0);
			res->partitions++;
		}
	}
	/* a segment just deleted may free hashes: look whatever the plan said */
	if (item->purge || item->secs > 0)
	{
		qs_exec(&purge_txns_plan, args, NULL, 0);
		res->txns += qs_col_int64(0, 1, 0);
	}
}

/*
 * SQL: queen.retention_sweep(), every partition in the caller's
 * transaction. The listener's first worker runs the same steps with one
 * short transaction per partition instead (worker.c).
 */
PG_FUNCTION_INFO_V1(qs_retention_sweep);
Datum
qs_retention_sweep(PG_FUNCTION_ARGS)
{
	QsSweepResult res = {0};
	QsSweepItem *items;
	int			n;
	QsJson		j;

	qsj_init(&j);
	qs_spi_connect();
	items = qs_retention_plan(CurrentMemoryContext, &n);
	for (int i = 0; i < n; i++)
		qs_retention_sweep_one(&items[i], &res);
	qs_spi_finish();

	qsj_object(&j, NULL);
	qsj_int(&j, "segmentsDeleted", res.segments);
	qsj_int(&j, "partitions", res.partitions);
	qsj_int(&j, "txnsPurged", res.txns);
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
