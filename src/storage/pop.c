/*
 * pop.c: queen.pop, Queen's claim algorithm.
 *
 * Per partition: lock the cursor row if its lease is free (SKIP LOCKED, so
 * concurrent pops never wait on each other and never share offsets), read
 * from committed+1 (a batch may start mid-segment and span segments), then
 * either lease the batch or, with auto-ack, move the cursor past it.
 */
#include "storage/storage.h"
#include "storage/pop_ready.h"
#include "common/args.h"
#include "common/ids.h"
#include "common/spi.h"
#include "common/text.h"

#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/numeric.h"

typedef struct PopCtx
{
	pg_uuid_t	tenant;
	const char *queue;
	const char *group;
	bool		queue_mode;
	bool		named;			/* the pop names its partition */
	bool		keep_set;		/* it keeps the ready rows in step (not while another builds them) */
	int			budget;
	int			lease_seconds;
	bool		auto_ack;
	Datum		queue_id;
	int			delayed;
	int			window_buffer;
	bool		seek;			/* group starts at the first segment >= seek_ts */
	TimestampTz seek_ts;
	char		worker[QS_UUID_STRLEN + 1];
	QsJson	   *text;			/* queen.pop_text: the messages as JSON text, in `outer` */
	JsonbValue *msgs;			/* queen.pop: the answer's messages, in `outer` */
	int			nmsgs;
	int			msgs_cap;
	char	   *cur_pid;		/* copies in `outer` of the partition being read */
	pg_uuid_t	read_pid;		/* the partition read_frames reads (envelopes are sealed to it) */
	char	   *cur_pname;
	int			claimed;
	char	   *first_name;		/* allocated in `outer`: outlives SPI */
	pg_uuid_t	first_pid;
	MemoryContext outer;
} PopCtx;

static QsPlan queue_plan = {
	"SELECT id, lease_time, delayed_processing, window_buffer"
	"  FROM queen.queues WHERE tenant_id = $1 AND name = $2",
	2, {UUIDOID, TEXTOID}
};

static QsPlan sub_get_plan = {
	"SELECT subscription_mode, subscription_timestamp FROM queen.consumer_groups_metadata"
	" WHERE queue_id = $1 AND consumer_group = $2",
	2, {UUIDOID, TEXTOID}
};

static QsPlan sub_put_plan = {
	"INSERT INTO queen.consumer_groups_metadata"
	"   (tenant_id, consumer_group, queue_id, subscription_mode, subscription_timestamp)"
	" VALUES ($1, $2, $3, $4, $5) ON CONFLICT (queue_id, consumer_group) DO NOTHING",
	5, {UUIDOID, TEXTOID, UUIDOID, TEXTOID, TIMESTAMPTZOID}
};

static QsPlan one_partition_plan = {
	"SELECT id, name FROM queen.log_partitions WHERE queue_id = $1 AND name = $2",
	2, {UUIDOID, TEXTOID}
};

/*
 * The head of the group's ready set (pop_ready.c): partitions with something
 * past this group's cursor and no live lease, least recently served first
 * so one busy partition cannot starve others. lease_expires_at is the only
 * lease gate: a lease, or the retryDelay hold a nack leaves on a released
 * batch (worker_id NULL), keeps the cursor unclaimable. The order is the
 * index's, so the scan stops after $3 claimable rows; the cursor is looked
 * up per row (LATERAL ... LIMIT 1), never read for the whole group.
 */
static QsPlan candidates_plan = {
	"SELECT r.partition_id, p.name FROM queen.log_ready r"
	"  JOIN queen.log_partitions p ON p.id = r.partition_id"
	"  LEFT JOIN LATERAL (SELECT * FROM queen.log_consumers c"
	"                      WHERE c.partition_id = r.partition_id AND c.consumer_group = $2"
	"                      LIMIT 1) c ON true"
	" WHERE r.queue_id = $1 AND r.consumer_group = $2 AND p.last_offset >= p.log_start"
	"   AND (c.partition_id IS NULL"
	"        OR (c.committed < p.last_offset"
	"            AND (c.lease_expires_at IS NULL OR c.lease_expires_at < clock_timestamp())))"
	" ORDER BY r.served_at NULLS FIRST, r.partition_id LIMIT $3",
	3, {UUIDOID, TEXTOID, INT4OID}
};

/* The same over every partition of the queue: a schema without ready sets. */
static QsPlan all_candidates_plan = {
	"SELECT p.id, p.name FROM queen.log_partitions p"
	"  LEFT JOIN queen.log_consumers c"
	"         ON c.partition_id = p.id AND c.consumer_group = $2"
	" WHERE p.queue_id = $1 AND p.last_offset >= p.log_start"
	"   AND (c.partition_id IS NULL"
	"        OR (c.committed < p.last_offset"
	"            AND (c.lease_expires_at IS NULL OR c.lease_expires_at < clock_timestamp())))"
	" ORDER BY c.lease_acquired_at NULLS FIRST, p.id LIMIT $3",
	3, {UUIDOID, TEXTOID, INT4OID}
};

static QsPlan partition_state_plan = {
	"SELECT last_offset, log_start FROM queen.log_partitions WHERE id = $1",
	1, {UUIDOID}
};

static QsPlan newest_plan = {
	"SELECT created_at FROM queen.log_segments WHERE partition_id = $1"
	" ORDER BY base_offset DESC LIMIT 1",
	1, {UUIDOID}
};

/* The claim and the partition's state in one statement (the common case). */
static QsPlan claim_state_plan = {
	"SELECT c.committed, p.last_offset, p.log_start"
	"  FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id"
	" WHERE c.partition_id = $1 AND c.consumer_group = $2"
	"   AND (c.lease_expires_at IS NULL OR c.lease_expires_at < clock_timestamp())"
	" FOR UPDATE OF c SKIP LOCKED",
	2, {UUIDOID, TEXTOID}
};

static QsPlan exists_plan = {
	"SELECT 1 FROM queen.log_consumers WHERE partition_id = $1 AND consumer_group = $2",
	2, {UUIDOID, TEXTOID}
};

static QsPlan first_contact_lock_plan = {
	"SELECT pg_try_advisory_xact_lock(hashtextextended($1::text || '/' || $2, 42))",
	2, {UUIDOID, TEXTOID}
};

static QsPlan seek_plan = {
	"SELECT base_offset FROM queen.log_segments"
	" WHERE partition_id = $1 AND created_at >= $2 ORDER BY base_offset LIMIT 1",
	2, {UUIDOID, TIMESTAMPTZOID}
};

static QsPlan consumer_insert_plan = {
	"INSERT INTO queen.log_consumers (partition_id, consumer_group, committed)"
	" VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
	3, {UUIDOID, TEXTOID, INT8OID}
};

/*
 * Segments in chunks: the LIMIT keeps this an index range scan whatever the
 * statistics say (an unbounded cursor may be planned as a sort of the
 * partition's rows, blobs and all).
 */
#define SEGMENT_CHUNK 8
static QsPlan segments_from_plan = {
	"SELECT base_offset, end_offset, created_at, blob FROM queen.log_segments"
	" WHERE partition_id = $1 AND base_offset >= $2 ORDER BY base_offset LIMIT $3",
	3, {UUIDOID, INT8OID, INT4OID}, .generic = true
};

/*
 * The first chunk starts at the segment holding $2 (a batch may start
 * mid-segment) and is short: segments are read whole, and a batch of
 * large segments needs one or two.
 */
#define FIRST_CHUNK 2
static QsPlan segments_covering_plan = {
	"SELECT base_offset, end_offset, created_at, blob FROM queen.log_segments"
	" WHERE partition_id = $1 AND base_offset >= COALESCE("
	"       (SELECT max(s.base_offset) FROM queen.log_segments s"
	"         WHERE s.partition_id = $1 AND s.base_offset <= $2), $2)"
	" ORDER BY base_offset LIMIT $3",
	3, {UUIDOID, INT8OID, INT4OID}, .generic = true
};

static QsPlan seal_plan = {
	"UPDATE queen.log_consumers SET committed = $3"
	" WHERE partition_id = $1 AND consumer_group = $2",
	3, {UUIDOID, TEXTOID, INT8OID}
};

static QsPlan autoack_plan = {
	"UPDATE queen.log_consumers"
	"   SET committed = $3, worker_id = NULL, lease_expires_at = NULL, batch_end = NULL,"
	"       lease_acquired_at = clock_timestamp(), total_consumed = total_consumed + $4,"
	"       batch_retry_count = 0, attempt_offset = NULL, attempt_count = 0"
	" WHERE partition_id = $1 AND consumer_group = $2",
	4, {UUIDOID, TEXTOID, INT8OID, INT8OID}
};

static QsPlan fence_plan = {
	"UPDATE queen.log_consumers SET lease_acquired_at = clock_timestamp()"
	" WHERE partition_id = $1 AND consumer_group = $2",
	2, {UUIDOID, TEXTOID}
};

static QsPlan lease_plan = {
	"UPDATE queen.log_consumers"
	"   SET worker_id = $3, lease_expires_at = clock_timestamp() + make_interval(secs => $4),"
	"       lease_acquired_at = clock_timestamp(), batch_end = $5,"
	"       attempt_count = CASE WHEN attempt_offset = $6 THEN attempt_count + 1 ELSE 1 END,"
	"       attempt_offset = $6"
	" WHERE partition_id = $1 AND consumer_group = $2",
	6, {UUIDOID, TEXTOID, TEXTOID, INT4OID, INT8OID, INT8OID}
};

/* Where a group that first meets a partition starts (its durable subscription). */
static void
load_subscription(PopCtx *c, const char *mode, const char *from, TimestampTz from_ts)
{
	Datum		args[5];
	char		nulls[5] = "     ";
	bool		isnull;

	c->seek = false;
	if (c->queue_mode)
		return;				/* queue mode always starts from the backlog */

	args[0] = c->queue_id;
	args[1] = CStringGetTextDatum(c->group);
	qs_exec(&sub_get_plan, args, NULL, 1);
	if (SPI_processed == 0)
	{
		const char *m = "all";
		TimestampTz ts = 0;

		if ((from && pg_strcasecmp(from, "now") == 0) || (mode && strcmp(mode, "new") == 0))
		{
			m = "new";
			ts = GetCurrentTimestamp();
		}
		else if (from && from[0] != '\0')
		{
			m = "timestamp";
			ts = from_ts;
		}
		args[0] = qs_uuid_datum(&c->tenant);
		args[1] = CStringGetTextDatum(c->group);
		args[2] = c->queue_id;
		args[3] = CStringGetTextDatum(m);
		args[4] = TimestampTzGetDatum(ts);
		if (strcmp(m, "all") == 0)
			nulls[4] = 'n';
		qs_exec(&sub_put_plan, args, nulls, 0);

		args[0] = c->queue_id;
		args[1] = CStringGetTextDatum(c->group);
		qs_exec(&sub_get_plan, args, NULL, 1);
		if (SPI_processed == 0)
			elog(ERROR, "subscription row vanished");
	}
	c->seek_ts = DatumGetTimestampTz(qs_col(0, 2, &isnull));
	c->seek = !isnull;
}

/* First contact of (partition, group): create the cursor row at its seed. */
static bool
create_cursor(PopCtx *c, Datum pid, Datum grp, int64 last_offset, int64 log_start)
{
	Datum		args[3];
	int64		seed = log_start - 1;

	args[0] = pid;
	args[1] = grp;
	qs_exec(&first_contact_lock_plan, args, NULL, 1);
	if (!qs_col_bool(0, 1, false))
		return false;			/* another pop is creating it right now */

	if (c->seek)
	{
		args[1] = TimestampTzGetDatum(c->seek_ts);
		qs_exec(&seek_plan, args, NULL, 1);
		seed = SPI_processed == 1 ? qs_col_int64(0, 1, 0) - 1 : last_offset;
		args[1] = grp;
	}
	args[2] = Int64GetDatum(seed);
	qs_exec(&consumer_insert_plan, args, NULL, 0);
	return true;
}

/*
 * The answer is built as a jsonb value directly (as push_text's is): each
 * object's pairs are listed in jsonb's key order (shorter first, then
 * bytewise), so nothing is sorted, and only the payloads are parsed. Every
 * string is copied into `outer`: frames and SPI rows do not outlive SPI.
 */
static void
str_value(JsonbValue *v, const char *s, int len)
{
	if (s == NULL)
	{
		v->type = jbvNull;
		return;
	}
	v->type = jbvString;
	v->val.string.val = (char *) s;
	v->val.string.len = len;
}

static void
set_pairs(JsonbPair *p, const char *const *keys, int n)
{
	for (int k = 0; k < n; k++)
	{
		str_value(&p[k].key, keys[k], strlen(keys[k]));
		p[k].order = k;
	}
}

/* queen.pop_text's message: the same members, as text, the payload as stored. */
static void
emit_message_text(PopCtx *c, const QsFrame *f, TimestampTz created_at,
				  const char *pid_str, const char *pname)
{
	QsJson	   *j = c->text;
	pg_uuid_t	id;
	char	   *plain = NULL;
	int			plen = 0;

	memcpy(id.data, f->id, UUID_LEN);
	qsj_object(j, NULL);
	qsj_uuid(j, "id", &id);
	qsj_strn(j, "transactionId", f->txn, f->txn_len);
	qsj_strn(j, "partitionId", pid_str, QS_UUID_STRLEN);
	qsj_str(j, "partition", pname);
	qsj_str(j, "consumerGroup", c->group);
	qsj_str(j, "leaseId", c->auto_ack ? "" : c->worker);
	qsj_time(j, "createdAt", created_at);
	qsj_uuid_bytes(j, "traceId", f->trace);
	qsj_strn(j, "producerSub", f->psub, f->psub_len);
	if ((f->flags & QS_FLAG_ENCRYPTED) &&
		qs_decrypt_payload(&(QsSeal) {&c->read_pid, f->txn, f->txn_len},
						   f->payload, f->payload_len, &plain, &plen))
		qsj_raw(j, "data", plain, plen);
	else
		qsj_raw(j, "data", f->payload, f->payload_len);
	qsj_end_object(j);
	c->nmsgs++;
}

static void
emit_message_jsonb(PopCtx *c, const QsFrame *f, TimestampTz created_at,
				   const char *pid_str, const char *pname)
{
	static const char *const keys[10] = {
		"id", "data", "leaseId", "traceId", "createdAt", "partition",
		"partitionId", "producerSub", "consumerGroup", "transactionId"
	};
	MemoryContext old = MemoryContextSwitchTo(c->outer);
	JsonbPair  *p = palloc(sizeof(JsonbPair) * 10);
	char	   *s = palloc(2 * (QS_UUID_STRLEN + 1) + 32);
	pg_uuid_t	id;
	JsonbValue *m;

	if (c->nmsgs == c->msgs_cap)
	{
		c->msgs_cap = c->msgs_cap ? c->msgs_cap * 2 : 64;
		c->msgs = c->msgs ? repalloc(c->msgs, sizeof(JsonbValue) * c->msgs_cap)
			: palloc(sizeof(JsonbValue) * c->msgs_cap);
	}
	if (c->cur_pid == NULL || strcmp(c->cur_pid, pid_str) != 0)
		c->cur_pid = pstrdup(pid_str);
	if (c->cur_pname == NULL || strcmp(c->cur_pname, pname) != 0)
		c->cur_pname = pstrdup(pname);

	set_pairs(p, keys, 10);
	memcpy(id.data, f->id, UUID_LEN);
	qs_uuid_format(&id, s);
	str_value(&p[0].value, s, QS_UUID_STRLEN);
	{
		char	   *plain;
		int			plen;

		if ((f->flags & QS_FLAG_ENCRYPTED) &&
			qs_decrypt_payload(&(QsSeal) {&c->read_pid, f->txn, f->txn_len},
							   f->payload, f->payload_len, &plain, &plen))
			p[1].value = *qs_json_to_jsonb_value(plain, plen);
		else
			p[1].value = *qs_json_to_jsonb_value(f->payload, f->payload_len);
	}
	str_value(&p[2].value, c->auto_ack ? "" : c->worker, c->auto_ack ? 0 : strlen(c->worker));
	if (f->trace)
	{
		pg_uuid_t	t;

		memcpy(t.data, f->trace, UUID_LEN);
		qs_uuid_format(&t, s + QS_UUID_STRLEN + 1);
		str_value(&p[3].value, s + QS_UUID_STRLEN + 1, QS_UUID_STRLEN);
	}
	else
		str_value(&p[3].value, NULL, 0);
	qs_format_time(created_at, s + 2 * (QS_UUID_STRLEN + 1));
	str_value(&p[4].value, s + 2 * (QS_UUID_STRLEN + 1), strlen(s + 2 * (QS_UUID_STRLEN + 1)));
	str_value(&p[5].value, c->cur_pname, strlen(c->cur_pname));
	str_value(&p[6].value, c->cur_pid, strlen(c->cur_pid));
	if (f->psub)
		str_value(&p[7].value, pnstrdup(f->psub, f->psub_len), f->psub_len);
	else
		str_value(&p[7].value, NULL, 0);
	str_value(&p[8].value, c->group, strlen(c->group));
	str_value(&p[9].value, pnstrdup(f->txn, f->txn_len), f->txn_len);

	m = &c->msgs[c->nmsgs++];
	m->type = jbvObject;
	m->val.object.nPairs = 10;
	m->val.object.pairs = p;
	MemoryContextSwitchTo(old);
}

static void
emit_message(PopCtx *c, const QsFrame *f, TimestampTz created_at,
			 const char *pid_str, const char *pname)
{
	if (c->text)
		emit_message_text(c, f, created_at, pid_str, pname);
	else
		emit_message_jsonb(c, f, created_at, pid_str, pname);
}

/*
 * Read up to `budget` frames from `wanted` on, emitting them. Returns the
 * number taken and sets *first and *last to the first and last offsets
 * delivered (a retention gap may lie between them, so the span can be wider
 * than the count). *any_segment says whether the partition has any live
 * segment at or after the cursor.
 *
 * A segment that does not decode ends the batch before it: frames already
 * taken are delivered, and the next pop starts at the damaged segment. When
 * it is the first segment of the batch, a pop that names the partition
 * raises the corruption error; a wildcard pop fences the partition (logs
 * and counts it, sets *fenced) and takes nothing from it, having written
 * nothing, so that it can go on to healthy partitions.
 */
static int
read_frames(PopCtx *c, Datum pid, const char *pid_str, const char *pname,
			int64 wanted, int64 *first, int64 *last, bool *any_segment, bool *fenced)
{
	Datum		args[3];
	int64		start = wanted;
	int			taken = 0;
	bool		first_chunk = true;
	TimestampTz hide_after = 0;

	*any_segment = false;
	*fenced = false;
	args[0] = pid;
	c->read_pid = *DatumGetUUIDP(pid);

	if (c->delayed > 0)
		hide_after = GetCurrentTimestamp() - (TimestampTz) c->delayed * USECS_PER_SEC;

	while (taken < c->budget)
	{
		uint64		nrows;
		bool		stop = false;
		int			chunk = first_chunk ? FIRST_CHUNK : SEGMENT_CHUNK;

		args[1] = Int64GetDatum(start);
		args[2] = Int32GetDatum(chunk);
		qs_exec(first_chunk ? &segments_covering_plan : &segments_from_plan, args, NULL, 0);
		first_chunk = false;
		nrows = SPI_processed;
		for (uint64 r = 0; r < nrows && taken < c->budget; r++)
		{
			int64		base = qs_col_int64(r, 1, 0);
			int64		end = qs_col_int64(r, 2, 0);
			bool		isnull;
			TimestampTz created = DatumGetTimestampTz(qs_col(r, 3, &isnull));
			QsFrame    *frames;
			pg_uuid_t	puuid;
			char	   *why = NULL;

			*any_segment = true;
			start = base + 1;
			if (c->delayed > 0 && created > hide_after)
			{
				stop = true;	/* segments are in created_at order: the rest is younger */
				break;
			}
			if (end < wanted)
				continue;
			if (base > wanted)
				wanted = base;	/* retention gap: resume at the next live segment */

			memcpy(puuid.data, DatumGetUUIDP(pid)->data, UUID_LEN);
			frames = qs_segment_try_decode(DatumGetByteaPP(qs_col(r, 4, &isnull)),
										   end - base + 1, &why);
			if (frames == NULL)
			{
				if (taken == 0 && c->named)
					qs_segment_corrupt_error(&puuid, base, why);
				if (taken == 0)
				{
					qs_segment_fenced(&c->tenant, c->queue, &puuid, base, why);
					*fenced = true;
				}
				stop = true;
				break;
			}
			for (int64 off = wanted; off <= end && taken < c->budget; off++)
			{
				emit_message(c, &frames[off - base], created, pid_str, pname);
				if (taken == 0)
					*first = off;
				*last = off;
				taken++;
			}
			wanted = *last + 1;
		}
		SPI_freetuptable(SPI_tuptable);
		if (stop || nrows < (uint64) chunk)
			break;
	}
	return taken;
}

/* Try to claim one partition; returns frames delivered from it. */
static int
claim_partition(PopCtx *c, Datum pid, const char *pname)
{
	Datum		args[6];
	Datum		grp = CStringGetTextDatum(c->group);
	int64		last_offset,
				log_start,
				committed,
				first = -1,
				last = -1;
	bool		any_segment;
	bool		fenced = false;
	int			taken;
	char		pid_str[QS_UUID_STRLEN + 1];
	bool		isnull;

	/*
	 * No lock on the ready rows first: the cursor's FOR UPDATE SKIP LOCKED
	 * below keeps two pops off one partition, and qs_ready_served locks the
	 * rows it moves without waiting.
	 */
	args[0] = pid;
	args[1] = grp;
	qs_exec(&claim_state_plan, args, NULL, 1);
	if (SPI_processed == 0)
	{
		qs_exec(&exists_plan, args, NULL, 1);
		if (SPI_processed > 0)
			return 0;			/* leased, or locked by a concurrent pop */
		qs_exec(&partition_state_plan, args, NULL, 1);
		if (SPI_processed != 1)
			return 0;
		if (!create_cursor(c, pid, grp, qs_col_int64(0, 1, -1), qs_col_int64(0, 2, 0)))
			return 0;
		qs_exec(&claim_state_plan, args, NULL, 1);
		if (SPI_processed == 0)
			return 0;
	}
	committed = qs_col_int64(0, 1, -1);
	last_offset = qs_col_int64(0, 2, -1);
	log_start = qs_col_int64(0, 3, 0);

	if (c->window_buffer > 0)
	{
		qs_exec(&newest_plan, args, NULL, 1);
		if (SPI_processed == 1 &&
			DatumGetTimestampTz(qs_col(0, 1, &isnull)) >
			GetCurrentTimestamp() - (TimestampTz) c->window_buffer * USECS_PER_SEC)
			return 0;			/* still being written: debounce */
	}

	qs_uuid_format(DatumGetUUIDP(pid), pid_str);
	taken = 0;
	any_segment = false;
	if (committed < last_offset)
		taken = read_frames(c, pid, pid_str, pname, Max(committed + 1, log_start),
							&first, &last, &any_segment, &fenced);

	if (fenced)
	{
		/* nothing taken or leased; to the back of the line, so healthy partitions come first */
		qs_exec(&fence_plan, args, NULL, 0);
		if (c->keep_set)
			qs_ready_served(pid, grp);
		return 0;
	}
	if (taken == 0)
	{
		/* Everything past the cursor was removed: seal it (no phantom backlog). */
		if (!any_segment && last_offset > committed)
		{
			args[2] = Int64GetDatum(last_offset);
			qs_exec(&seal_plan, args, NULL, 0);
			committed = last_offset;
		}
		if (committed >= last_offset && c->keep_set)
			qs_ready_consumed(pid, grp);
		return 0;
	}

	if (c->auto_ack)
	{
		args[2] = Int64GetDatum(last);
		args[3] = Int64GetDatum(taken);
		qs_exec(&autoack_plan, args, NULL, 0);
		if (c->keep_set)
		{
			/* deleted first: a row moved then deleted by one transaction could hold up a push */
			qs_ready_consumed(pid, grp);
			qs_ready_served(pid, grp);
		}
	}
	else
	{
		args[2] = CStringGetTextDatum(c->worker);
		args[3] = Int32GetDatum(c->lease_seconds);
		args[4] = Int64GetDatum(last);
		args[5] = Int64GetDatum(first);
		qs_exec(&lease_plan, args, NULL, 0);
		if (c->keep_set)
			qs_ready_served(pid, grp);
	}

	if (c->claimed++ == 0)
	{
		c->first_name = MemoryContextStrdup(c->outer, pname);
		c->first_pid = *DatumGetUUIDP(pid);
	}
	c->budget -= taken;
	return taken;
}

/*
 * A wildcard pop: the head of the group's ready set (or, without one, of
 * every partition of the queue), claimed in order until max_partitions are.
 */
static void
claim_candidates(PopCtx *c, bool ready, int max_partitions)
{
	Datum		args[3];
	SPITupleTable *cand;
	uint64		ncand;
	bool		isnull;

	/*
	 * Without the set, its rows are left alone: they may be another pop's,
	 * not yet committed, and rows taken outside their order could wait on
	 * a push in a cycle.
	 */
	c->keep_set = ready;

	args[0] = c->queue_id;
	args[1] = CStringGetTextDatum(c->group);
	/* checked: partitions may be anything up to INT_MAX */
	args[2] = Int32GetDatum(max_partitions > PG_INT32_MAX / 4 ? PG_INT32_MAX
							: Max(max_partitions * 4, 16));
	qs_exec(ready ? &candidates_plan : &all_candidates_plan, args, NULL, 0);
	cand = SPI_tuptable;
	ncand = SPI_processed;
	for (uint64 i = 0; i < ncand && c->claimed < max_partitions && c->budget > 0; i++)
	{
		Datum		pid = SPI_getbinval(cand->vals[i], cand->tupdesc, 1, &isnull);
		char	   *pname = SPI_getvalue(cand->vals[i], cand->tupdesc, 2);

		CHECK_FOR_INTERRUPTS();
		claim_partition(c, pid, pname);
	}
}

static Datum answer_jsonb(PopCtx *c);
static Datum answer_text(PopCtx *c);

/*
 * queen.pop and queen.pop_text: (queue, partition, consumer_group, batch,
 * lease_seconds, auto_ack, tenant, subscription_mode, subscription_from,
 * partitions); the answer as jsonb, or as JSON text.
 */
static Datum
pop_common(FunctionCallInfo fcinfo, bool as_text)
{
	PopCtx		c;
	char	   *partition = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *mode = PG_ARGISNULL(7) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(7));
	char	   *from = PG_ARGISNULL(8) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(8));
	int			max_partitions = PG_ARGISNULL(9) ? 1 : PG_GETARG_INT32(9);
	Datum		args[3];
	bool		isnull;
	TimestampTz from_ts = 0;

	memset(&c, 0, sizeof(c));
	if (PG_ARGISNULL(0) || VARSIZE_ANY_EXHDR(PG_GETARG_TEXT_PP(0)) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queue is required")));
	c.queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
	c.group = PG_ARGISNULL(2) ? "" : text_to_cstring(PG_GETARG_TEXT_PP(2));
	if (c.group[0] == '\0')
		c.group = QS_QUEUE_MODE;
	c.queue_mode = strcmp(c.group, QS_QUEUE_MODE) == 0;
	c.budget = PG_ARGISNULL(3) ? 200 : PG_GETARG_INT32(3);
	c.lease_seconds = PG_ARGISNULL(4) ? 0 : PG_GETARG_INT32(4);
	c.auto_ack = PG_ARGISNULL(5) ? false : PG_GETARG_BOOL(5);
	qs_tenant_arg(fcinfo, 6, &c.tenant);

	if (c.budget < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch must be a positive integer"),
				 errdetail("Got %d.", c.budget)));
	if (!PG_ARGISNULL(4) && c.lease_seconds < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease_seconds must be a positive integer"),
				 errdetail("Got %d.", c.lease_seconds)));
	if (max_partitions < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("partitions must be a positive integer"),
				 errdetail("Got %d.", max_partitions)));
	/* one pop decodes and answers at most this much (the answer is built in memory) */
	if (c.budget > qs_max_pop_batch)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch must be at most %d (queen_streams.max_pop_batch)", qs_max_pop_batch),
				 errdetail("Got %d.", c.budget),
				 errhint("Pop in several calls, or raise queen_streams.max_pop_batch.")));
	if (max_partitions > qs_max_pop_partitions)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("partitions must be at most %d (queen_streams.max_pop_partitions)",
						qs_max_pop_partitions),
				 errdetail("Got %d.", max_partitions),
				 errhint("Pop in several calls, or raise queen_streams.max_pop_partitions.")));
	/*
	 * As Queen: only "new" means new; any other mode ("all",
	 * "from_beginning", "new-only", "") reads from the start.
	 */
	if (partition && partition[0] == '\0')
		partition = NULL;
	qs_check_name("queue", NULL, c.queue);
	if (partition)
		qs_check_name("partition", NULL, partition);
	qs_check_text("consumer group name", c.group, strlen(c.group), QS_NAME_MAX);
	if (mode)
		qs_check_text("subscriptionMode", mode, strlen(mode), QS_NAME_MAX);
	if (from && from[0] != '\0' && pg_strcasecmp(from, "now") != 0)
		from_ts = qs_parse_timestamp(from, "subscriptionFrom");

	c.outer = CurrentMemoryContext;
	if (as_text)
	{
		c.text = palloc(sizeof(QsJson));
		qsj_init(c.text);
		qsj_array(c.text, NULL);
	}

	qs_spi_connect();
	args[0] = qs_uuid_datum(&c.tenant);
	args[1] = CStringGetTextDatum(c.queue);
	qs_exec(&queue_plan, args, NULL, 1);
	if (SPI_processed == 1)
	{
		int			lease_time;

		c.queue_id = datumCopy(qs_col(0, 1, &isnull), false, UUID_LEN);
		lease_time = DatumGetInt32(qs_col(0, 2, &isnull));
		c.delayed = DatumGetInt32(qs_col(0, 3, &isnull));
		c.window_buffer = DatumGetInt32(qs_col(0, 4, &isnull));
		if (c.lease_seconds <= 0)
			c.lease_seconds = lease_time > 0 ? lease_time : 60;
		{
			pg_uuid_t	w;

			qs_uuid7(&w);
			qs_uuid_format(&w, c.worker);
		}
		load_subscription(&c, mode, from, from_ts);

		args[0] = c.queue_id;
		if (partition)
		{
			args[1] = CStringGetTextDatum(partition);
			qs_exec(&one_partition_plan, args, NULL, 1);
			if (SPI_processed == 1)
			{
				Datum		pid = datumCopy(qs_col(0, 1, &isnull), false, UUID_LEN);

				c.named = true;
				c.keep_set = true;
				claim_partition(&c, pid, partition);
			}
		}
		else
		{
			QsReadyState ready = qs_ready_prepare(c.queue_id, c.group, c.seek, c.seek_ts);

			claim_candidates(&c, ready != QS_READY_NONE, max_partitions);
			if (c.claimed == 0 && ready == QS_READY_YOUNG &&
				qs_ready_retry(c.queue_id, c.group, c.seek, c.seek_ts))
				claim_candidates(&c, true, max_partitions);
		}
	}
	qs_spi_finish();
	return as_text ? answer_text(&c) : answer_jsonb(&c);
}

PG_FUNCTION_INFO_V1(qs_pop);
Datum
qs_pop(PG_FUNCTION_ARGS)
{
	return pop_common(fcinfo, false);
}

PG_FUNCTION_INFO_V1(qs_pop_text);
Datum
qs_pop_text(PG_FUNCTION_ARGS)
{
	return pop_common(fcinfo, true);
}

static Datum
answer_jsonb(PopCtx *c)
{
	static const char *const keys[8] = {
		"queue", "leaseId", "success", "messages", "partition",
		"partitionId", "consumerGroup", "partitionsClaimed"
	};
	JsonbPair	p[8];
	JsonbValue	top;
	char		pid_str[QS_UUID_STRLEN + 1];

	set_pairs(p, keys, 8);
	str_value(&p[0].value, c->queue, strlen(c->queue));
	p[2].value.type = jbvBool;
	p[2].value.val.boolean = true;
	p[3].value.type = jbvArray;
	p[3].value.val.array.nElems = c->nmsgs;
	p[3].value.val.array.elems = c->msgs;
	p[3].value.val.array.rawScalar = false;
	if (c->claimed > 0)
	{
		str_value(&p[1].value, c->auto_ack ? "" : c->worker, c->auto_ack ? 0 : strlen(c->worker));
		str_value(&p[4].value, c->first_name, strlen(c->first_name));
		qs_uuid_format(&c->first_pid, pid_str);
		str_value(&p[5].value, pid_str, QS_UUID_STRLEN);
	}
	else
	{
		str_value(&p[1].value, NULL, 0);
		str_value(&p[4].value, NULL, 0);
		str_value(&p[5].value, NULL, 0);
	}
	str_value(&p[6].value, c->group, strlen(c->group));
	p[7].value.type = jbvNumeric;
	p[7].value.val.numeric = int64_to_numeric(c->claimed);
	top.type = jbvObject;
	top.val.object.nPairs = 8;
	top.val.object.pairs = p;
	PG_RETURN_JSONB_P(JsonbValueToJsonb(&top));
}

/* The same members; the messages last, so a reader finds the lease first. */
static Datum
answer_text(PopCtx *c)
{
	QsJson		j;

	qsj_end_array(c->text);
	qsj_init(&j);
	enlargeStringInfo(&j.buf, c->text->buf.len + 512);
	qsj_object(&j, NULL);
	qsj_bool(&j, "success", true);
	qsj_str(&j, "queue", c->queue);
	qsj_str(&j, "consumerGroup", c->group);
	if (c->claimed > 0)
	{
		qsj_str(&j, "leaseId", c->auto_ack ? "" : c->worker);
		qsj_str(&j, "partition", c->first_name);
		qsj_uuid(&j, "partitionId", &c->first_pid);
	}
	else
	{
		qsj_null(&j, "leaseId");
		qsj_null(&j, "partition");
		qsj_null(&j, "partitionId");
	}
	qsj_int(&j, "partitionsClaimed", c->claimed);
	qsj_raw(&j, "messages", c->text->buf.data, c->text->buf.len);
	qsj_end_object(&j);
	PG_RETURN_TEXT_P(qsj_json(&j));
}
