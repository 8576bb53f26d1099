/*
 * ack.c: queen.ack, single and batch acks by transaction id.
 *
 * Acks are grouped by (partition, consumer group, lease); each group locks
 * its cursor row (the only lock an ack takes), resolves each transaction id
 * to the lowest matching offset of the leased span through the hash sidecar,
 * then moves the cursor once:
 *  - completed acks implicitly complete everything before the highest one;
 *  - the lowest failed/dlq/retry position clamps the cursor below it and
 *    decides the batch's fate (retry budget, dead letter, or drop).
 */
#include "storage/storage.h"
#include "storage/pop_ready.h"
#include "common/ids.h"
#include "common/spi.h"

#include "catalog/pg_type_d.h"
#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"

typedef struct AckItem
{
	int			index;
	char	   *txn;
	pg_uuid_t	pid;
	char	   *group;
	char	   *worker;
	char	   *error_reason;
	QsAckStatus status;
	uint8		hash[QS_HASH_LEN];
	int64		offset;			/* resolved, or -1 */
	/* result */
	bool		success;
	const char *error;
	bool		lease_released;
	bool		dlq;
	bool		noop;
} AckItem;

static QsPlan owner_plan = {
	"SELECT 1 FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
	" WHERE p.id = $1 AND q.tenant_id = $2",
	2, {UUIDOID, UUIDOID}
};

/*
 * The partition's settings and its cursor row locked, in one statement (the
 * common case); owner_plan alone tells "not owned" from "no cursor".
 */
static QsPlan owner_lock_plan = {
	"SELECT q.retry_limit, q.dead_letter_queue OR q.dlq_after_max_retries, p.txns_start,"
	"       q.retry_delay, c.committed, c.batch_end, c.worker_id,"
	"       c.lease_expires_at IS NULL OR c.lease_expires_at < clock_timestamp(),"
	"       c.batch_retry_count"
	"  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
	"  JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = $3"
	" WHERE p.id = $1 AND q.tenant_id = $2"
	" FOR UPDATE OF c",
	3, {UUIDOID, UUIDOID, TEXTOID}
};

/*
 * The hash rows of the leased span. The lower bound on base_offset (the row
 * covering the span's start) keeps it an index range instead of a read of
 * the partition's whole history.
 */
static QsPlan span_txns_plan = {
	"SELECT base_offset, hashes FROM queen.log_txns"
	" WHERE partition_id = $1 AND end_offset >= $2 AND base_offset <= $3"
	"   AND base_offset >= COALESCE((SELECT max(c.base_offset) FROM queen.log_txns c"
	"                                 WHERE c.partition_id = $1 AND c.base_offset <= $2), $2)",
	3, {UUIDOID, INT8OID, INT8OID}
};

/* Below the cursor: newest first, bounded, only to tell no-ops from errors. */
static QsPlan below_txns_plan = {
	"SELECT base_offset, hashes FROM queen.log_txns"
	" WHERE partition_id = $1 AND base_offset <= $2 AND end_offset >= $3"
	" ORDER BY base_offset DESC LIMIT 1000",
	3, {UUIDOID, INT8OID, INT8OID}
};

static QsPlan span_segments_plan = {
	"SELECT base_offset, end_offset, blob FROM queen.log_segments"
	" WHERE partition_id = $1 AND end_offset >= $2 AND base_offset <= $3",
	3, {UUIDOID, INT8OID, INT8OID}
};

static QsPlan move_plan = {
	"UPDATE queen.log_consumers"
	"   SET committed = $3, total_consumed = total_consumed + $4,"
	"       worker_id = CASE WHEN $5 THEN NULL ELSE worker_id END,"
	"       lease_expires_at = CASE WHEN NOT $5 THEN lease_expires_at"
	"                               WHEN $8 > 0 THEN clock_timestamp() + make_interval(secs => $8 / 1000.0)"
	"                               END,"
	"       batch_end = CASE WHEN $5 THEN NULL ELSE batch_end END,"
	"       batch_retry_count = $6,"
	"       attempt_offset = CASE WHEN $7 THEN NULL ELSE attempt_offset END,"
	"       attempt_count = CASE WHEN $7 THEN 0 ELSE attempt_count END"
	" WHERE partition_id = $1 AND consumer_group = $2",
	8, {UUIDOID, TEXTOID, INT8OID, INT8OID, BOOLOID, INT4OID, BOOLOID, INT4OID}
};

static QsPlan dlq_plan = {
	"INSERT INTO queen.log_dlq (partition_id, consumer_group, \"offset\", message_id,"
	"                           transaction_id, payload, error, retry_count, encrypted)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
	9, {UUIDOID, TEXTOID, INT8OID, UUIDOID, TEXTOID, JSONBOID, TEXTOID, INT4OID, BOOLOID}
};

/*
 * Before ALTER EXTENSION UPDATE (a 0.1.0 schema served by this library)
 * log_dlq has no encrypted column: dead letters are stored as 0.1.0 did,
 * decrypted.
 */
static QsPlan dlq_v1_plan = {
	"INSERT INTO queen.log_dlq (partition_id, consumer_group, \"offset\", message_id,"
	"                           transaction_id, payload, error, retry_count)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
	8, {UUIDOID, TEXTOID, INT8OID, UUIDOID, TEXTOID, JSONBOID, TEXTOID, INT4OID}
};

static QsPlan dlq_has_flag_plan = {
	"SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'queen.log_dlq'::regclass"
	"                  AND attname = 'encrypted' AND NOT attisdropped)",
	0, {InvalidOid}
};

static bool
word(const char *s, int len, const char *w)
{
	return len == (int) strlen(w) && memcmp(s, w, len) == 0;
}

/*
 * Queen's rule (generation C): absent, or exactly completed, success, acked
 * or ok: completed; retry; dlq; anything else (an empty string, another
 * case) failed.
 */
QsAckStatus
qs_ack_status(const char *s, int len)
{
	if (s == NULL || word(s, len, "completed") || word(s, len, "success") ||
		word(s, len, "acked") || word(s, len, "ok"))
		return QS_ACK_COMPLETED;
	if (word(s, len, "retry"))
		return QS_ACK_RETRY;
	if (word(s, len, "dlq"))
		return QS_ACK_DLQ;
	return QS_ACK_FAILED;
}

static void
parse_item(JsonbContainer *o, const char *what, const char *dflt_group, AckItem *it)
{
	char	   *status;

	it->txn = qs_json_string(o, "transactionId", what, true);
	qs_json_uuid(o, "partitionId", what, true, &it->pid);
	status = qs_json_string(o, "status", what, false);
	it->status = qs_ack_status(status, status ? strlen(status) : 0);
	it->group = qs_json_string(o, "consumerGroup", what, false);
	if (it->group == NULL || it->group[0] == '\0')
		it->group = (char *) dflt_group;
	it->worker = qs_json_string(o, "leaseId", what, false);
	if (it->worker == NULL)
		it->worker = "";
	it->error_reason = qs_json_string(o, "error", what, false);
	qs_txn_hash(it->txn, strlen(it->txn), it->hash);
	it->offset = -1;
}

static int
item_cmp(const void *a, const void *b)
{
	const AckItem *x = *(AckItem *const *) a;
	const AckItem *y = *(AckItem *const *) b;
	int			r = memcmp(x->pid.data, y->pid.data, UUID_LEN);

	if (r == 0)
		r = strcmp(x->group, y->group);
	if (r == 0)
		r = strcmp(x->worker, y->worker);
	if (r == 0)
		r = x->index - y->index;
	return r;
}

static bool
same_group(const AckItem *x, const AckItem *y)
{
	return memcmp(x->pid.data, y->pid.data, UUID_LEN) == 0 &&
		strcmp(x->group, y->group) == 0 && strcmp(x->worker, y->worker) == 0;
}

/*
 * The acks of one group by transaction-id hash: each stored hash or frame
 * is looked up once, so matching is linear in frames plus acks. Acks that
 * share a hash are chained through `next`.
 */
typedef struct AckHashEnt
{
	uint8		hash[QS_HASH_LEN];
	int			first;			/* index into the group's items */
} AckHashEnt;

typedef struct AckMap
{
	HTAB	   *tab;
	int		   *next;
} AckMap;

static void
ackmap_build(AckMap *m, AckItem **items, int n)
{
	HASHCTL		ctl;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = QS_HASH_LEN;
	ctl.entrysize = sizeof(AckHashEnt);
	ctl.hcxt = CurrentMemoryContext;
	m->tab = hash_create("queen_streams ack hashes", Max(n, 16), &ctl,
						 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	m->next = palloc(sizeof(int) * Max(n, 1));
	/* in reverse, so each chain runs in item order */
	for (int i = n - 1; i >= 0; i--)
	{
		bool		found;
		AckHashEnt *e;

		CHECK_FOR_INTERRUPTS();
		e = hash_search(m->tab, items[i]->hash, HASH_ENTER, &found);
		m->next[i] = found ? e->first : -1;
		e->first = i;
	}
}

static int
ackmap_first(AckMap *m, const uint8 *hash)
{
	AckHashEnt *e = hash_search(m->tab, hash, HASH_FIND, NULL);

	return e ? e->first : -1;
}

/* Lowest offset in [lo, hi] whose stored hash equals each item's hash. */
static void
match_hashes(AckMap *m, AckItem **items, int64 lo, int64 hi, int64 *found)
{
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		int64		base = qs_col_int64(r, 1, 0);
		bool		isnull;
		bytea	   *hb = DatumGetByteaPP(qs_col(r, 2, &isnull));
		const uint8 *h = (const uint8 *) VARDATA_ANY(hb);
		int			count = VARSIZE_ANY_EXHDR(hb) / QS_HASH_LEN;

		CHECK_FOR_INTERRUPTS();
		for (int k = Max(0, lo - base); k < count && base + k <= hi; k++)
		{
			int64		off = base + k;

			for (int i = ackmap_first(m, h + k * QS_HASH_LEN); i >= 0; i = m->next[i])
				if (found[i] == -1 || off < found[i])
					found[i] = off;
		}
	}
}

/*
 * Lowest offset in [lo, hi] whose frame carries each item's transaction id.
 * For a leased span below txns_start: its hash rows are gone (a group that
 * met the partition after the purge), but its segments are still there.
 */
static void
match_frames(AckMap *m, AckItem **items, const pg_uuid_t *pid, int64 lo, int64 hi, int64 *found)
{
	Datum		args[3];
	SPITupleTable *tt;
	uint64		nrows;

	args[0] = qs_uuid_datum(pid);
	args[1] = Int64GetDatum(lo);
	args[2] = Int64GetDatum(hi);
	qs_exec(&span_segments_plan, args, NULL, 0);
	tt = SPI_tuptable;
	nrows = SPI_processed;
	for (uint64 r = 0; r < nrows; r++)
	{
		bool		isnull;
		int64		base = DatumGetInt64(SPI_getbinval(tt->vals[r], tt->tupdesc, 1, &isnull));
		int64		end = DatumGetInt64(SPI_getbinval(tt->vals[r], tt->tupdesc, 2, &isnull));
		bytea	   *blob = DatumGetByteaPP(SPI_getbinval(tt->vals[r], tt->tupdesc, 3, &isnull));
		QsFrame    *frames = qs_segment_decode(blob, end - base + 1, pid, base);

		for (int64 off = Max(lo, base); off <= Min(hi, end); off++)
		{
			const QsFrame *f = &frames[off - base];
			uint8		h[QS_HASH_LEN];

			CHECK_FOR_INTERRUPTS();
			qs_txn_hash(f->txn, f->txn_len, h);
			for (int i = ackmap_first(m, h); i >= 0; i = m->next[i])
				if ((found[i] == -1 || off < found[i]) &&
					strlen(items[i]->txn) == (size_t) f->txn_len &&
					memcmp(items[i]->txn, f->txn, f->txn_len) == 0)
					found[i] = off;
		}
		pfree(frames);
	}
}

static Datum
payload_jsonb(const char *payload, int len, bool *isnull)
{
	JsonLexContext *lex;
	char	   *s;

	*isnull = (len == 0);
	if (len == 0)
		return (Datum) 0;
	s = pnstrdup(payload, len);
	lex = makeJsonLexContextCstringLen(s, len, GetDatabaseEncoding(), false);
	if (pg_parse_json(lex, &nullSemAction) == JSON_SUCCESS)
		return DirectFunctionCall1(jsonb_in, CStringGetDatum(s));
	/* Not JSON (a raw segment written by hand): keep it as a JSON string. */
	return DirectFunctionCall1(to_jsonb, CStringGetTextDatum(s));
}

static void
dead_letter(AckItem *it, int64 offset, int retry_count)
{
	QsFrame		f;
	Datum		args[9];
	char		nulls[9] = "         ";
	pg_uuid_t	mid;
	bool		isnull;
	bool		has_flag;
	char	   *plain;
	int			plen;

	qs_exec(&dlq_has_flag_plan, NULL, NULL, 1);
	has_flag = qs_col_bool(0, 1, false);
	args[0] = qs_uuid_datum(&it->pid);
	args[1] = CStringGetTextDatum(it->group);
	args[2] = Int64GetDatum(offset);
	if (qs_frame_at(&it->pid, offset, &f))
	{
		memcpy(mid.data, f.id, UUID_LEN);
		args[3] = qs_uuid_datum(&mid);
		args[4] = PointerGetDatum(cstring_to_text_with_len(f.txn, f.txn_len));
		/* an encrypted frame's envelope, as stored: no plaintext in the table */
		if (!has_flag && (f.flags & QS_FLAG_ENCRYPTED) &&
			qs_decrypt_payload(&(QsSeal) {&it->pid, f.txn, f.txn_len}, f.payload, f.payload_len, &plain, &plen))
			args[5] = payload_jsonb(plain, plen, &isnull);
		else
			args[5] = payload_jsonb(f.payload, f.payload_len, &isnull);
		if (isnull)
			nulls[5] = 'n';
		args[8] = BoolGetDatum((f.flags & QS_FLAG_ENCRYPTED) != 0);
	}
	else
	{
		nulls[3] = 'n';
		args[4] = CStringGetTextDatum(it->txn);
		nulls[5] = 'n';
		args[8] = BoolGetDatum(false);
	}
	args[6] = CStringGetTextDatum(it->error_reason ? it->error_reason : "Retries exhausted");
	args[7] = Int32GetDatum(retry_count);
	qs_exec(has_flag ? &dlq_plan : &dlq_v1_plan, args, nulls, 0);
}

static void
fail_all(AckItem **items, int n, const char *error)
{
	for (int i = 0; i < n; i++)
	{
		items[i]->success = false;
		items[i]->error = error;
	}
}

/* What an ack group reads of its partition and its cursor row (locked). */
typedef struct AckGroup
{
	AckItem   **items;			/* all share (partition, group, lease) */
	int			n;
	int64	   *found;			/* the offset each item resolved to, or -1 */
	Datum		args[8];		/* $1 is the partition throughout */
	int			retry_limit;
	int			retry_delay;
	bool		dlq_enabled;
	int64		txns_start;
	int64		committed;
	bool		have_batch;
	int64		batch_end;
	char	   *holder;			/* the lease's worker id, or NULL */
	bool		expired;
	int			retry_count;
} AckGroup;

/* How the cursor moves. */
typedef struct AckMove
{
	int64		target;
	int64		consumed;		/* -1: target - committed */
	bool		release;
	bool		reset_attempt;
	int			retry_count;
	int			hold_ms;		/* a released batch stays unclaimable this long */
} AckMove;

/*
 * The partition's settings and the locked cursor; false (every item failed)
 * when the tenant does not own the partition, the consumer does not exist,
 * or the named lease is not the live one.
 */
static bool
load_group(const pg_uuid_t *tenant, AckGroup *g)
{
	AckItem   **items = g->items;
	const char *worker = items[0]->worker;
	bool		isnull;

	g->args[0] = qs_uuid_datum(&items[0]->pid);
	g->args[1] = qs_uuid_datum(tenant);
	g->args[2] = CStringGetTextDatum(items[0]->group);
	qs_exec(&owner_lock_plan, g->args, NULL, 1);
	if (SPI_processed != 1)
	{
		qs_exec(&owner_plan, g->args, NULL, 1);
		fail_all(items, g->n, SPI_processed != 1 ? "partition not owned by tenant"
				 : "consumer not found");
		return false;
	}
	g->retry_limit = DatumGetInt32(qs_col(0, 1, &isnull));
	g->dlq_enabled = qs_col_bool(0, 2, true);
	g->txns_start = qs_col_int64(0, 3, 0);
	g->retry_delay = DatumGetInt32(qs_col(0, 4, &isnull));
	g->committed = qs_col_int64(0, 5, -1);
	g->batch_end = DatumGetInt64(qs_col(0, 6, &isnull));
	g->have_batch = !isnull;
	g->holder = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 7);
	g->expired = qs_col_bool(0, 8, true);
	g->retry_count = DatumGetInt32(qs_col(0, 9, &isnull));
	g->args[1] = g->args[2];	/* later statements take (partition, group, ...) */

	/*
	 * The lease is checked only when the client names one (Queen's rule);
	 * with queen_streams.ack_requires_lease a lease-less ack of a message
	 * that a live lease covers is refused later (refuse_leaseless).
	 */
	if (worker[0] != '\0' &&
		(g->holder == NULL || strcmp(g->holder, worker) != 0 || g->expired))
	{
		fail_all(items, g->n, "invalid or expired lease");
		return false;
	}
	return true;
}

/* Each item's offset in the leased span: frames below txns_start, hashes above. */
static void
resolve_in_span(AckGroup *g, AckMap *map)
{
	int64		lo = g->committed + 1;

	for (int i = 0; i < g->n; i++)
		g->found[i] = -1;
	if (g->have_batch && g->batch_end >= lo && lo < g->txns_start)
		match_frames(map, g->items, &g->items[0]->pid, lo,
					 Min(g->batch_end, g->txns_start - 1), g->found);
	lo = Max(lo, g->txns_start);
	if (g->have_batch && g->batch_end >= lo)
	{
		g->args[1] = Int64GetDatum(lo);
		g->args[2] = Int64GetDatum(g->batch_end);
		qs_exec(&span_txns_plan, g->args, NULL, 0);
		match_hashes(map, g->items, lo, g->batch_end, g->found);
	}
}

/*
 * Items not in the span: below the cursor, a completed ack is a no-op and
 * any other a stale signal; elsewhere, not found. One look below the cursor
 * serves every item.
 */
static void
judge_unresolved(AckGroup *g, AckMap *map)
{
	int64	   *below;
	int			unresolved = 0;

	for (int i = 0; i < g->n; i++)
		if (g->found[i] < 0)
			unresolved++;
	if (unresolved == 0)
		return;
	/* resolved items start "found" at -2 < any offset, so never match */
	below = palloc(sizeof(int64) * g->n);
	for (int k = 0; k < g->n; k++)
		below[k] = g->found[k] >= 0 ? -2 : -1;
	g->args[1] = Int64GetDatum(g->committed);
	g->args[2] = Int64GetDatum(g->txns_start);
	qs_exec(&below_txns_plan, g->args, NULL, 0);
	match_hashes(map, g->items, g->txns_start, g->committed, below);
	for (int k = 0; k < g->n; k++)
	{
		AckItem    *it = g->items[k];

		CHECK_FOR_INTERRUPTS();
		if (g->found[k] >= 0)
			continue;
		it->success = false;
		if (below[k] < 0)
			it->error = "transaction not found in the leased batch";
		else if (it->status != QS_ACK_COMPLETED)
			it->error = "already committed: the cursor moved past this message before this ack";
		else
		{
			it->success = true;
			it->noop = true;
		}
	}
	pfree(below);
}

/* With ack_requires_lease, a lease-less ack of a leased message is refused. */
static void
refuse_leaseless(AckGroup *g)
{
	/* every resolved offset lies in the leased span: a live lease covers it */
	if (!qs_ack_requires_lease || g->items[0]->worker[0] != '\0' || !g->have_batch ||
		g->holder == NULL || g->expired)
		return;
	for (int i = 0; i < g->n; i++)
		if (g->found[i] >= 0)
		{
			g->found[i] = -1;
			g->items[i]->success = false;
			g->items[i]->error = "leaseId required: the message is leased";
		}
}

/*
 * The resolved items succeed. The signal is the lowest non-completed one
 * (on a tie dlq > failed > retry); *ok_max the highest completed offset
 * below it, or -1.
 */
static AckItem *
pick_signal(AckGroup *g, int64 *ok_max)
{
	AckItem    *signal = NULL;

	for (int i = 0; i < g->n; i++)
	{
		AckItem    *it = g->items[i];

		CHECK_FOR_INTERRUPTS();
		if (g->found[i] < 0)
			continue;
		it->offset = g->found[i];
		it->success = true;
		if (it->status == QS_ACK_COMPLETED)
			continue;
		if (signal == NULL || it->offset < signal->offset ||
			(it->offset == signal->offset && it->status > signal->status))
			signal = it;
	}
	*ok_max = -1;
	for (int i = 0; i < g->n; i++)
		if (g->found[i] >= 0 && g->items[i]->status == QS_ACK_COMPLETED &&
			(signal == NULL || g->found[i] < signal->offset))
			*ok_max = Max(*ok_max, g->found[i]);
	return signal;
}

/*
 * Where the cursor goes: past the completed prefix; a retry or a failure
 * within the budget releases the batch after retryDelay; a dlq, or a
 * failure with the budget spent, retires the poison message (dead-lettered
 * when the queue keeps dead letters).
 */
static void
decide_move(AckGroup *g, AckItem *signal, int64 ok_max, AckMove *m)
{
	memset(m, 0, sizeof(*m));
	m->target = Max(g->committed, ok_max);
	m->consumed = -1;
	m->retry_count = g->retry_count;
	if (signal == NULL)
	{
		if (!g->have_batch || m->target >= g->batch_end)
		{
			m->release = true;
			m->reset_attempt = true;
			m->retry_count = 0;
		}
	}
	else if (signal->status == QS_ACK_RETRY)
	{
		m->release = true;
		m->hold_ms = g->retry_delay;	/* the queue's retryDelay before redelivery */
	}
	else if (signal->status == QS_ACK_FAILED && g->retry_count < g->retry_limit)
	{
		m->release = true;
		m->hold_ms = g->retry_delay;
		m->retry_count++;
	}
	else
	{
		if (signal->status == QS_ACK_DLQ || g->dlq_enabled)
		{
			dead_letter(signal, signal->offset, g->retry_count);
			signal->dlq = true;
		}
		/* the completed prefix plus the one frame disposed of (Queen's count) */
		m->consumed = m->target - g->committed + 1;
		m->target = signal->offset;
		m->release = true;
		m->reset_attempt = true;
		m->retry_count = 0;
	}
}

static void
move_cursor(AckGroup *g, const AckMove *m)
{
	g->args[1] = CStringGetTextDatum(g->items[0]->group);
	g->args[2] = Int64GetDatum(m->target);
	g->args[3] = Int64GetDatum(m->consumed >= 0 ? m->consumed : m->target - g->committed);
	g->args[4] = BoolGetDatum(m->release);
	g->args[5] = Int32GetDatum(m->retry_count);
	g->args[6] = BoolGetDatum(m->reset_attempt);
	g->args[7] = Int32GetDatum(m->hold_ms);
	qs_exec(&move_plan, g->args, NULL, 0);
	if (m->target > g->committed)
		qs_ready_consumed(g->args[0], g->args[1]);
	for (int i = 0; i < g->n; i++)
		if (g->items[i]->success && !g->items[i]->noop)
			g->items[i]->lease_released = m->release;
}

/* One (partition, group, lease) group of acks: resolve, judge, move the cursor once. */
static void
ack_group(const pg_uuid_t *tenant, AckItem **items, int n)
{
	AckGroup	g;
	AckMap		map;
	AckMove		move;
	AckItem    *signal;
	int64		ok_max;

	memset(&g, 0, sizeof(g));
	g.items = items;
	g.n = n;
	g.found = palloc(sizeof(int64) * n);
	if (!load_group(tenant, &g))
		return;
	ackmap_build(&map, items, n);
	resolve_in_span(&g, &map);
	judge_unresolved(&g, &map);
	refuse_leaseless(&g);
	signal = pick_signal(&g, &ok_max);
	if (signal == NULL && ok_max < 0)
		return;					/* nothing resolved in the span: cursor untouched */
	decide_move(&g, signal, ok_max, &move);
	move_cursor(&g, &move);
}

/* SQL: queen.ack(request jsonb, tenant uuid) */
PG_FUNCTION_INFO_V1(qs_ack);
Datum
qs_ack(PG_FUNCTION_ARGS)
{
	Jsonb	   *req;
	JsonbContainer *obj;
	JsonbContainer *arr;
	pg_uuid_t	tenant;
	AckItem    *items;
	AckItem   **sorted;
	int			n;
	QsJson		j;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ack request must be a JSON object")));
	req = PG_GETARG_JSONB_P(0);
	qs_tenant_arg(fcinfo, 1, &tenant);
	obj = qs_json_object_arg(req, "ack request");
	arr = qs_json_array(obj, "acknowledgments", "ack request");

	if (arr)
	{
		char	   *group = qs_json_string(obj, "consumerGroup", "ack request", false);

		if (group == NULL || group[0] == '\0')
			group = QS_QUEUE_MODE;
		n = JsonContainerSize(arr);
		items = palloc0(sizeof(AckItem) * Max(n, 1));
		for (int i = 0; i < n; i++)
		{
			JsonbValue *v = getIthJsonbValueFromContainer(arr, i);
			JsonbContainer *o = qs_json_container(v);
			char		what[40];

			CHECK_FOR_INTERRUPTS();
			snprintf(what, sizeof(what), "acknowledgment %d", i);
			if (o == NULL || !JsonContainerIsObject(o))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("%s must be a JSON object", what)));
			items[i].index = i;
			parse_item(o, what, group, &items[i]);
		}
	}
	else
	{
		n = 1;
		items = palloc0(sizeof(AckItem));
		parse_item(obj, "ack request", QS_QUEUE_MODE, &items[0]);
	}

	/* Cursor rows are locked in (partition, group) order: no ack deadlocks. */
	sorted = palloc(sizeof(AckItem *) * Max(n, 1));
	for (int i = 0; i < n; i++)
		sorted[i] = &items[i];
	qsort(sorted, n, sizeof(AckItem *), item_cmp);

	qsj_init(&j);
	qs_spi_connect();
	for (int i = 0; i < n;)
	{
		int			k = i + 1;

		while (k < n && same_group(sorted[i], sorted[k]))
			k++;
		ack_group(&tenant, sorted + i, k - i);
		i = k;
	}
	qs_spi_finish();

	qsj_array(&j, NULL);
	for (int i = 0; i < n; i++)
	{
		AckItem    *it = &items[i];

		qsj_object(&j, NULL);
		qsj_int(&j, "index", i);
		qsj_str(&j, "transactionId", it->txn);
		qsj_bool(&j, "success", it->success);
		qsj_str(&j, "error", it->error);
		qsj_bool(&j, "leaseReleased", it->lease_released);
		qsj_bool(&j, "dlq", it->dlq);
		qsj_bool(&j, "noop", it->noop);
		qsj_end_object(&j);
	}
	qsj_end_array(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
