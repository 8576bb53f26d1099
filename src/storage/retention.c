/*
 * retention.c: queen.retention_sweep. Deletes whole segments older than a
 * queue's retention (or its maxWaitTimeSeconds), moves log_start past them, and purges hash sidecar rows
 * nobody can still need (facts §1.2, §1.4). Partitions are visited in
 * ascending id, the lock order pushes and cycles use. created_at is monotone
 * in offsets, so the new watermark stamps come from one index probe each.
 */
#include "storage/storage.h"

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
 * consumer's cursor, or once retention has removed their segment.
 */
static QsPlan purge_txns_plan = {
	"WITH part AS ("
	"  SELECT p.id, p.log_start,"
	"         now() - make_interval(secs => GREATEST(q.dedup_window_seconds,"
	"                                  q.completed_retention_seconds, 900)) AS horizon,"
	"         (SELECT min(c.committed) FROM queen.log_consumers c"
	"           WHERE c.partition_id = p.id) AS floor"
	"    FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
	"   WHERE p.oldest_txn_at IS NOT NULL),"
	" gone AS (DELETE FROM queen.log_txns t USING part"
	"           WHERE t.partition_id = part.id"
	"             AND (t.end_offset < part.log_start"
	"                  OR (t.created_at < part.horizon AND t.end_offset <= part.floor))"
	"          RETURNING t.partition_id, t.end_offset),"
	" moved AS (UPDATE queen.log_partitions p"
	"              SET txns_start = GREATEST(p.txns_start, g.top + 1),"
	"                  oldest_txn_at = (SELECT t.created_at FROM queen.log_txns t"
	"                                    WHERE t.partition_id = p.id AND t.base_offset > g.top"
	"                                    ORDER BY t.base_offset LIMIT 1)"
	"             FROM (SELECT partition_id, max(end_offset) AS top FROM gone"
	"                    GROUP BY partition_id ORDER BY partition_id) g"
	"            WHERE p.id = g.partition_id RETURNING 1)"
	"SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM moved)",
	0, {}
};

PG_FUNCTION_INFO_V1(qs_retention_sweep);
Datum
qs_retention_sweep(PG_FUNCTION_ARGS)
{
	int64		segments = 0;
	int64		partitions = 0;
	int64		txns = 0;
	QsJson		j;
	SPITupleTable *cand;
	uint64		ncand;

	qsj_init(&j);
	qs_spi_connect();
	qs_exec(&expired_plan, NULL, NULL, 0);
	cand = SPI_tuptable;
	ncand = SPI_processed;
	for (uint64 i = 0; i < ncand; i++)
	{
		Datum		args[2];
		bool		isnull;

		args[0] = SPI_getbinval(cand->vals[i], cand->tupdesc, 1, &isnull);
		args[1] = SPI_getbinval(cand->vals[i], cand->tupdesc, 2, &isnull);
		qs_exec(&delete_segments_plan, args, NULL, 0);
		if (SPI_processed == 1)
		{
			segments += qs_col_int64(0, 1, 0);
			partitions++;
		}
	}
	qs_exec(&purge_txns_plan, NULL, NULL, 0);
	txns = qs_col_int64(0, 1, 0);
	qs_spi_finish();

	qsj_object(&j, NULL);
	qsj_int(&j, "segmentsDeleted", segments);
	qsj_int(&j, "partitions", partitions);
	qsj_int(&j, "txnsPurged", txns);
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
