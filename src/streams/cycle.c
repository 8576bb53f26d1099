/*
 * cycle.c: queen_streams.cycle (POST /streams/v1/cycle).
 *
 * One call, one transaction: state ops, sink pushes and the source ack land
 * together or not at all. The work runs in a subtransaction so that a
 * failure inside it (an unknown op type, a foreign partition, an invalid
 * lease) rolls all of it back and still answers a normal body with
 * success:false, as the protocol wants. The order of work, and so of locks,
 * is Queen's: ownership, the (query, partition) advisory lock, state ops,
 * sink partitions in ascending id, then the source cursor row.
 *
 * Exactly-once rests on the ack: the cursor row is locked and the lease
 * must be the caller's and unexpired, else the whole cycle rolls back. A
 * cycle retried after its commit finds its lease released and pushes nothing.
 *
 * A worker's idle flush and its main loop race on the same windows (issue
 * 42). Under the shard lock a cycle is refused as stale, nothing of it
 * committed, when it deletes a window key (one holding U+001F, as the
 * SDKs' and the declared streams' keys do) and
 *   1. that row is gone: another cycle emitted the window since this one
 *      read it (the SDKs delete only keys their read returned);
 *   2. it has no ack (an idle flush) and the partition is leased to its
 *      consumer group, or the group has not consumed all of it: a fold of
 *      the very windows it emits is, or may be, on its way;
 *   3. it has no ack and the row was written after the shard's last ripe
 *      read (state.c): the flush emits a value that is no longer the row's.
 * The soundness argument is in the README (Streams, stale cycles).
 */
#include "streams/streams.h"
#include "common/ids.h"
#include "common/spi.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type_d.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/storage.h"
#include "utils/builtins.h"
#include "utils/array.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

typedef struct CycleReq
{
	pg_uuid_t	tenant;
	pg_uuid_t	qid;
	pg_uuid_t	pid;
	const char *group;
	JsonbContainer *state_ops;
	JsonbContainer *push_items;
	JsonbContainer *ack;		/* NULL: idle-flush cycle */
	bool		release_lease;
} CycleReq;

typedef struct CycleOut
{
	MemoryContext outer;		/* outlives the subtransaction and SPI */
	char	   *queue_name;
	int64		ops_applied;
	QsJson	   *j;				/* push_results and ack_result go here */
	bool		defer_push;		/* merged: its sink items are pushed with the others' */
	QsPushItem *items;			/* its sink items, read into `outer` */
	int			nitems;
	const char *error;			/* why it failed, or NULL */
	bool		stale;			/* refused as stale: rolled back */
	const char *stale_why;
	bool		flush_checked;	/* rule 2 checked (once per cycle) */
} CycleOut;

/* The source partition's queue when the tenant owns it, and whether the query is its. */
static QsPlan owner_plan = {
	"SELECT q.name, EXISTS (SELECT 1 FROM queen_streams.queries s"
	"                        WHERE s.id = $2 AND s.tenant_id = $3)"
	"  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
	" WHERE p.id = $1 AND q.tenant_id = $3",
	3, {UUIDOID, UUIDOID, UUIDOID}
};

/*
 * Serialises cycles and idle-flush cycles on one state shard (query,
 * partition): a transaction-level advisory lock on the hash of
 * "<query id>:<partition id>", taken without a statement.
 */
void
qs_cycle_shard_lock(const pg_uuid_t *qid, const pg_uuid_t *pid)
{
	char		key[2 * QS_UUID_STRLEN + 2];
	Datum		h;

	qs_uuid_format(qid, key);
	key[QS_UUID_STRLEN] = ':';
	qs_uuid_format(pid, key + QS_UUID_STRLEN + 1);
	h = hash_any_extended((unsigned char *) key, 2 * QS_UUID_STRLEN + 1, 0);
	(void) DirectFunctionCall1(pg_advisory_xact_lock_int8, h);
}

static QsPlan upsert_plan = {
	"INSERT INTO queen_streams.state (query_id, partition_id, key, value, updated_at)"
	" VALUES ($1, $2, $3, $4, now())"
	" ON CONFLICT (query_id, partition_id, key)"
	" DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at",
	4, {UUIDOID, UUIDOID, TEXTOID, JSONBOID}
};

/*
 * The same, stamped with the clock under the shard lock rather than the
 * transaction's start: a write that follows a ripe read (which notes its
 * time under that lock) must carry a later updated_at (rule 3).
 */
static QsPlan upsert_clock_plan = {
	"INSERT INTO queen_streams.state (query_id, partition_id, key, value, updated_at)"
	" VALUES ($1, $2, $3, $4, clock_timestamp())"
	" ON CONFLICT (query_id, partition_id, key)"
	" DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at",
	4, {UUIDOID, UUIDOID, TEXTOID, JSONBOID}
};

static QsPlan delete_plan = {
	"DELETE FROM queen_streams.state WHERE query_id = $1 AND partition_id = $2 AND key = $3"
	" RETURNING updated_at",
	3, {UUIDOID, UUIDOID, TEXTOID}
};

/*
 * Rule 2: the partition leased to the group, or not all of it consumed by
 * the group. FOR SHARE waits for a push in flight into the partition (it
 * holds the row from stamping createdAt to commit): an event stamped
 * inside a window the flush emits is then seen as not yet consumed.
 * Consumed means up to the end of the log, or past retention's log_start
 * (what retention deleted can no longer be folded: a flush waiting for it
 * would wait forever). A group with no cursor on the partition never
 * folded it, so it cannot be racing the flush (nor judged: the request may
 * name no group).
 */
static QsPlan busy_plan = {
	"SELECT COALESCE(c.worker_id IS NOT NULL AND c.lease_expires_at >= clock_timestamp(), false),"
	"       c.partition_id IS NOT NULL AND GREATEST(COALESCE(c.committed, -1), p.log_start - 1) < p.last_offset"
	"  FROM queen.log_partitions p"
	"  LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = $2"
	" WHERE p.id = $1 FOR SHARE OF p",
	2, {UUIDOID, TEXTOID}
};

static QsPlan cursor_plan = {
	"SELECT committed, batch_end, worker_id IS NOT DISTINCT FROM $3"
	"       AND lease_expires_at IS NOT NULL AND lease_expires_at >= clock_timestamp()"
	"  FROM queen.log_consumers WHERE partition_id = $1 AND consumer_group = $2 FOR UPDATE",
	3, {UUIDOID, TEXTOID, TEXTOID}
};

static QsPlan nack_plan = {
	"UPDATE queen.log_consumers"
	"   SET worker_id = NULL, lease_expires_at = NULL, batch_end = NULL"
	" WHERE partition_id = $1 AND consumer_group = $2",
	2, {UUIDOID, TEXTOID}
};

static QsPlan complete_plan = {
	"UPDATE queen.log_consumers"
	"   SET committed = batch_end, worker_id = NULL, lease_expires_at = NULL, batch_end = NULL,"
	"       batch_retry_count = 0, attempt_offset = NULL, attempt_count = 0,"
	"       total_consumed = total_consumed + $3"
	" WHERE partition_id = $1 AND consumer_group = $2",
	3, {UUIDOID, TEXTOID, INT8OID}
};

static QsPlan partial_plan = {
	"UPDATE queen.log_consumers"
	"   SET committed = $3, total_consumed = total_consumed + $4"
	" WHERE partition_id = $1 AND consumer_group = $2",
	4, {UUIDOID, TEXTOID, INT8OID, INT8OID}
};

/* Live segment ranges after an offset (bounds only: blobs stay untouched). */
static QsPlan ranges_plan = {
	"SELECT base_offset, end_offset FROM queen.log_segments"
	" WHERE partition_id = $1 AND base_offset > $2 AND base_offset <= $3 ORDER BY base_offset",
	3, {UUIDOID, INT8OID, INT8OID}
};

/* A refused cycle request: 22023, which the cycle answers as its error. */
#define raise_cycle(...) \
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg(__VA_ARGS__)))

/*
 * A stale cycle on a declared stream's shard counts in its stream_status
 * (declared_stats.stale), in the caller's transaction: nothing of the
 * cycle itself commits. Skipped before ALTER EXTENSION UPDATE to 0.8.0.
 */
static QsPlan stale_stat_plan = {
	"INSERT INTO queen_streams.declared_stats AS s (query_id, partition_id, stale)"
	" SELECT $1, $2, 1 WHERE EXISTS (SELECT 1 FROM queen_streams.declared_streams WHERE query_id = $1)"
	" ON CONFLICT (query_id, partition_id) DO UPDATE SET stale = s.stale + 1",
	2, {UUIDOID, UUIDOID}
};

static void
note_stale(CycleReq *r)
{
	Oid			ns = get_namespace_oid("queen_streams", true);
	Oid			rel = OidIsValid(ns) ? get_relname_relid("declared_stats", ns) : InvalidOid;
	Datum		args[2];

	qs_stream_count(QS_SC_STALE, 1);
	if (!OidIsValid(rel) || get_attnum(rel, "stale") == InvalidAttrNumber)
		return;
	args[0] = qs_uuid_datum(&r->qid);
	args[1] = qs_uuid_datum(&r->pid);
	qs_spi_connect();
	qs_exec(&stale_stat_plan, args, NULL, 0);
	qs_spi_finish();
}

/* Refuse the cycle as stale: the caller stops and rolls its work back. */
static bool
refuse_stale(CycleOut *out, const char *why)
{
	out->stale = true;
	out->stale_why = why;		/* a literal */
	return false;
}

/* A window key: the SDKs' "tag U+001F window U+001F key" (or the legacy two parts). */
static bool
window_key(const char *key, int len)
{
	return memchr(key, 0x1f, len) != NULL;
}

/*
 * The staleness rules for one delete of a window key, its row already
 * deleted (found: a row was there; written: its updated_at). False when
 * the cycle is stale.
 */
static bool
check_delete(CycleReq *r, CycleOut *out, bool found, TimestampTz written)
{
	if (!found)
		return refuse_stale(out, "stale cycle: a window it deletes is gone "
							"(another cycle emitted it since this one read it)");
	if (r->ack != NULL)
		return true;
	if (!out->flush_checked)
	{
		Datum		args[2];

		out->flush_checked = true;
		args[0] = qs_uuid_datum(&r->pid);
		args[1] = CStringGetTextDatum(r->group);
		qs_exec(&busy_plan, args, NULL, 1);
		if (SPI_processed == 1 && qs_col_bool(0, 1, false))
			return refuse_stale(out, "stale cycle: an idle flush while the partition is leased "
								"to its consumer group");
		if (SPI_processed == 1 && qs_col_bool(0, 2, false))
			return refuse_stale(out, "stale cycle: an idle flush while its consumer group has "
								"not consumed the whole partition");
	}
	{
		TimestampTz read_at = qs_ripe_read_at(&r->qid, &r->pid);

		if (read_at != 0 && written > read_at)
			return refuse_stale(out, "stale cycle: an idle flush deletes a window written "
								"after the last ripe read");
	}
	return true;
}

/*
 * Apply the state ops in order; false when the cycle is stale (the rest
 * of its work is then skipped and rolled back).
 */
static bool
apply_state_ops(CycleReq *r, CycleOut *out)
{
	int			n = r->state_ops ? JsonContainerSize(r->state_ops) : 0;
	Datum		args[4];

	args[0] = qs_uuid_datum(&r->qid);
	args[1] = qs_uuid_datum(&r->pid);
	for (int i = 0; i < n; i++)
	{
		JsonbValue *v = getIthJsonbValueFromContainer(r->state_ops, i);
		JsonbContainer *o = qs_json_container(v);
		JsonbValue	tv,
					kv,
					vv;
		char	   *type;

		if (o == NULL || !JsonContainerIsObject(o))
			raise_cycle("state_ops[%d] must be a JSON object", i);
		/* "Unknown state_op type" is Queen's wording, as its clients match it */
		if (!qs_json_get(o, "type", &tv))
			raise_cycle("Unknown state_op type: null");
		type = qs_json_cstring(&tv);
		if (type == NULL)
		{
			int			len;

			raise_cycle("Unknown state_op type: %s", qs_json_text(&tv, &len));
		}
		if (strcmp(type, "upsert") != 0 && strcmp(type, "delete") != 0)
			raise_cycle("Unknown state_op type: %s", type);
		if (!qs_json_get(o, "key", &kv) || kv.type != jbvString)
			raise_cycle("state_ops[%d]: key must be a string", i);
		args[2] = PointerGetDatum(cstring_to_text_with_len(kv.val.string.val, kv.val.string.len));
		if (type[0] == 'u')
		{
			/* an absent value is {}; an explicit null is stored as JSON null */
			if (getKeyJsonValueFromContainer(o, "value", 5, &vv) != NULL)
				args[3] = JsonbPGetDatum(JsonbValueToJsonb(&vv));
			else
				args[3] = DirectFunctionCall1(jsonb_in, CStringGetDatum("{}"));
			qs_exec(window_key(kv.val.string.val, kv.val.string.len) ? &upsert_clock_plan : &upsert_plan,
					args, NULL, 0);
		}
		else
		{
			bool		found;
			TimestampTz written = 0;

			qs_exec(&delete_plan, args, NULL, 0);
			found = SPI_processed > 0;
			if (found)
			{
				bool		isnull;
				Datum		d = qs_col(0, 1, &isnull);

				written = isnull ? 0 : DatumGetTimestampTz(d);
			}
			if (window_key(kv.val.string.val, kv.val.string.len) &&
				!check_delete(r, out, found, written))
				return false;
		}
		out->ops_applied++;
	}
	return true;
}

/*
 * Read the sink items into `outer` by push's item rules (push_text.c, with
 * the sink's differences: an empty partition is Default, no traceId, {}
 * when neither payload nor data is given): a bad item fails this cycle
 * alone, also when its push is merged with other cycles' and runs after
 * every cycle's work. An item whose queue is absent, null or "" is
 * skipped, as the protocol says (spec/streams-routes.md).
 */
static void
read_sinks(CycleReq *r, CycleOut *out)
{
	int			n = r->push_items ? JsonContainerSize(r->push_items) : 0;
	MemoryContext old = MemoryContextSwitchTo(out->outer);
	QsPushItem *items = palloc0(sizeof(QsPushItem) * Max(n, 1));
	int			m = 0;

	for (int i = 0; i < n; i++)
	{
		JsonbValue *v;
		JsonbContainer *o;
		QsPushItem *it = &items[m];
		JsonbValue	qv;
		char		what[32];

		CHECK_FOR_INTERRUPTS();
		v = getIthJsonbValueFromContainer(r->push_items, i);
		o = qs_json_container(v);
		snprintf(what, sizeof(what), "push_items[%d]", i);
		if (o == NULL || !JsonContainerIsObject(o))
			raise_cycle("%s must be a JSON object", what);
		if (!qs_json_get(o, "queue", &qv) ||
			(qv.type == jbvString && qv.val.string.len == 0))
			continue;			/* an item without a queue is skipped */
		it->id_given = qs_json_uuid(o, "messageId", what, false, &it->id);
		qs_push_read_item(o, what, &qs_push_rules_sink, NULL, it);
		/* a frame over a limit fails this cycle alone, with that limit's error */
		(void) qs_frame_check(false, it->txn_len, false, 0, it->payload_len);
		m++;
	}
	MemoryContextSwitchTo(old);
	out->items = items;
	out->nitems = m;
}

/* One push_results entry. */
static void
write_result(QsJson *j, const char *queue, const char *partition, int count, bool stored,
			 int64 base_offset, TimestampTz created_at, int ndups, const int *dup_idx,
			 const int64 *dup_off)
{
	qsj_object(j, NULL);
	qsj_str(j, "queue", queue);
	qsj_str(j, "partition", partition);
	qsj_int(j, "count", count);
	qsj_str(j, "status", stored ? "queued" : "duplicate");
	if (stored)
	{
		qsj_int(j, "baseOffset", base_offset);
		qsj_time(j, "createdAt", created_at);
	}
	if (ndups > 0)
		qs_write_dups(j, ndups, dup_idx, dup_off);
	qsj_end_object(j);
}

/* A lone cycle's sink push: a sink group stores its fresh items and reports its duplicates. */
static void
push_sinks(CycleReq *r, CycleOut *out)
{
	QsJson	   *j = out->j;

	qsj_array(j, "push_results");
	if (out->nitems > 0)
	{
		int			ng;
		QsPushGroup *groups = qs_push_items(&r->tenant, out->items, out->nitems, true, &ng);

		for (int g = 0; g < ng; g++)
		{
			QsPushGroup *pg = &groups[g];

			write_result(j, pg->queue, pg->partition, pg->nitems, pg->stored,
						 pg->base_offset, pg->created_at, pg->ndups, pg->dup_idx, pg->dup_off);
		}
	}
	qsj_end_array(j);
}

/*
 * Walk `count` live offsets forward from committed+1 over the real segment
 * ranges (retention gaps are skipped, never counted), never past the leased
 * batch. Returns the last offset walked; *walked says how many.
 */
static int64
walk_offsets(Datum pid, int64 committed, int64 batch_end, int64 count, int64 *walked)
{
	Datum		args[3];
	int64		pos = committed + 1;
	int64		last = committed;
	int64		cov_base,
				cov_end;

	*walked = 0;
	if (count <= 0 || pos > batch_end)
		return committed;
	if (qs_segment_covering(pid, pos, &cov_base, &cov_end))
	{
		int64		take = Min(Min(cov_end, batch_end) - pos + 1, count);

		last = pos + take - 1;
		*walked = take;
	}
	if (*walked < count)
	{
		args[0] = pid;
		args[1] = Int64GetDatum(pos);
		args[2] = Int64GetDatum(batch_end);
		qs_exec(&ranges_plan, args, NULL, 0);
		for (uint64 i = 0; i < SPI_processed && *walked < count; i++)
		{
			int64		base = qs_col_int64(i, 1, 0);
			int64		end = Min(qs_col_int64(i, 2, 0), batch_end);
			int64		from = Max(base, last + 1);
			int64		take;

			if (from > end)
				continue;
			take = Min(end - from + 1, count - *walked);
			last = from + take - 1;
			*walked += take;
		}
	}
	return last;
}

static void
ack_source(CycleReq *r, CycleOut *out)
{
	Datum		args[4];
	char	   *worker;
	JsonbValue	sv;
	int64		count;
	bool		ok;
	bool		released;
	bool		isnull;
	int64		committed,
				batch_end;
	bool		have_batch;
	QsJson	   *j = out->j;

	worker = qs_json_string(r->ack, "leaseId", "ack", false);
	count = Max(qs_json_int(r->ack, "count", "ack", 0), 0);
	/* any status but the success words, even one that is not a string, is a nack */
	if (qs_json_get(r->ack, "status", &sv))
		ok = sv.type == jbvString &&
			qs_ack_status(sv.val.string.val, sv.val.string.len) == QS_ACK_COMPLETED;
	else
		ok = true;

	args[0] = qs_uuid_datum(&r->pid);
	args[1] = CStringGetTextDatum(r->group);
	args[2] = CStringGetTextDatum(worker ? worker : "");
	qs_exec(&cursor_plan, args, NULL, 1);
	if (SPI_processed != 1 || !qs_col_bool(0, 3, false))
		raise_cycle("invalid or expired lease");
	committed = qs_col_int64(0, 1, -1);
	batch_end = DatumGetInt64(qs_col(0, 2, &isnull));
	have_batch = !isnull;

	if (!ok)
	{
		/* a nack: release, cursor untouched, the whole batch redelivers */
		qs_exec(&nack_plan, args, NULL, 0);
		count = 0;
		released = true;
	}
	else if (r->release_lease)
	{
		if (!have_batch)
			raise_cycle("no leased batch");
		args[2] = Int64GetDatum(count);
		qs_exec(&complete_plan, args, NULL, 0);
		released = true;
	}
	else
	{
		/* the gate's partial ack: advance by exactly `count` frames, keep the lease */
		int64		walked = 0;
		int64		last = have_batch ? walk_offsets(args[0], committed, batch_end, count, &walked)
			: committed;

		if (walked > 0)
		{
			args[2] = Int64GetDatum(last);
			args[3] = Int64GetDatum(walked);
			qs_exec(&partial_plan, args, NULL, 0);
		}
		count = walked;
		released = false;
	}

	qsj_object(j, "ack_result");
	qsj_bool(j, "success", true);
	qsj_int(j, "count", count);
	qsj_bool(j, "lease_released", released);
	qsj_bool(j, "dlq", false);
	qsj_end_object(j);
}

/*
 * The work of one cycle; raises on any failure. A merged cycle's sink
 * items are only read here, and pushed after every cycle's work.
 */
static void
run_cycle(CycleReq *r, CycleOut *out)
{
	Datum		args[3];
	bool		isnull;

	args[0] = qs_uuid_datum(&r->pid);
	args[1] = qs_uuid_datum(&r->qid);
	args[2] = qs_uuid_datum(&r->tenant);
	qs_exec(&owner_plan, args, NULL, 1);
	if (SPI_processed != 1)
		raise_cycle("partition not found");
	out->queue_name = MemoryContextStrdup(out->outer, TextDatumGetCString(qs_col(0, 1, &isnull)));
	if (!qs_col_bool(0, 2, false))
		raise_cycle("query not found");

	qs_cycle_shard_lock(&r->qid, &r->pid);

	if (!apply_state_ops(r, out))
		return;
	read_sinks(r, out);
	if (!out->defer_push)
		push_sinks(r, out);
	if (r->ack)
		ack_source(r, out);
	else
		qsj_null(out->j, "ack_result");
}

static void
parse_request(Jsonb *req, const pg_uuid_t *tenant, CycleReq *r)
{
	JsonbContainer *obj;
	JsonbValue	v;
	char	   *s;

	if (req == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("request body must be a JSON object")));
	obj = qs_json_object_arg(req, "request body");
	r->tenant = *tenant;

	if (!qs_json_get(obj, "query_id", &v) || v.type != jbvString || v.val.string.len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("query_id is required")));
	qs_json_uuid(obj, "query_id", "cycle request", true, &r->qid);
	if (!qs_json_get(obj, "partition_id", &v) || v.type != jbvString || v.val.string.len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("partition_id is required")));
	qs_json_uuid(obj, "partition_id", "cycle request", true, &r->pid);

	s = qs_json_string(obj, "consumer_group", "cycle request", false);
	r->group = (s && s[0] != '\0') ? s : QS_QUEUE_MODE;
	r->state_ops = qs_json_array(obj, "state_ops", "cycle request");
	r->push_items = qs_json_array(obj, "push_items", "cycle request");
	r->release_lease = qs_json_bool(obj, "release_lease", "cycle request", true);
	r->ack = NULL;
	if (qs_json_get(obj, "ack", &v))
	{
		if (v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("cycle request: \"ack\" must be an object or null")));
		r->ack = v.val.binary.data;
	}
}

typedef struct CycleRun
{
	CycleReq   *r;
	CycleOut   *out;
} CycleRun;

/* A stale cycle is rolled back without an error (false: nothing kept). */
static bool
cycle_work(void *arg)
{
	CycleRun   *run = (CycleRun *) arg;

	run_cycle(run->r, run->out);
	return !run->out->stale;
}

/* Run one cycle's work in its subtransaction; its body collects in `body`. */
static void
run_one(CycleReq *r, CycleOut *out, QsJson *body, bool defer_push)
{
	CycleRun	run = {r, out};

	qsj_init(body);
	body->first[0] = false;		/* it continues the envelope object */
	out->j = body;
	out->outer = CurrentMemoryContext;
	out->defer_push = defer_push;
	out->error = qs_subxact_run(cycle_work, &run, "a streams cycle");
	if (out->stale)
	{
		/* refused without an error; the subtransaction rolled back */
		out->error = out->stale_why;
		note_stale(r);
	}
	if (out->error != NULL)
		out->nitems = 0;		/* rolled back: nothing of it is pushed */
}

/* The answer: the envelope, then the work's body (or the error). */
static Jsonb *
cycle_answer(CycleReq *r, CycleOut *out, QsJson *body)
{
	QsJson		j;

	qsj_init(&j);
	qsj_object(&j, NULL);
	qsj_bool(&j, "success", out->error == NULL);
	qsj_uuid(&j, "query_id", &r->qid);
	qsj_uuid(&j, "partition_id", &r->pid);
	qsj_str(&j, "queueName", out->queue_name);
	if (out->error == NULL)
	{
		qsj_int(&j, "state_ops_applied", out->ops_applied);
		appendBinaryStringInfo(&j.buf, body->buf.data, body->buf.len);
	}
	else
	{
		/* nothing of a failed cycle committed: report nothing applied */
		qsj_int(&j, "state_ops_applied", 0);
		qsj_raw(&j, "push_results", "[]", 2);
		qsj_null(&j, "ack_result");
		qsj_str(&j, "error", out->error);
		/* a stale cycle: a conflict, not a fault; SQLSTATE 40001 names it for SQL callers */
		if (out->stale)
		{
			qsj_bool(&j, QS_CYCLE_STALE_FIELD, true);
			qsj_str(&j, "sqlstate", "40001");
		}
	}
	qsj_end_object(&j);
	return qsj_jsonb(&j);
}

PG_FUNCTION_INFO_V1(qs_cycle);
Datum
qs_cycle(PG_FUNCTION_ARGS)
{
	CycleReq	r;
	CycleOut	out;
	QsJson		body;
	pg_uuid_t	tenant;

	memset(&r, 0, sizeof(r));
	memset(&out, 0, sizeof(out));
	qs_tenant_arg(fcinfo, 1, &tenant);
	parse_request(PG_ARGISNULL(0) ? NULL : PG_GETARG_JSONB_P(0), &tenant, &r);
	run_one(&r, &out, &body, false);
	PG_RETURN_JSONB_P(cycle_answer(&r, &out, &body));
}

/*
 * A merged cycle's push_results: its items [from, to) of the shared push,
 * grouped by partition in the order the cycle names them, each group
 * counted and offset as if the cycle had pushed alone. Linear: a counting
 * sort of the items by group; `seen`/`slot` (one per group) are stamped
 * with the cycle, never cleared.
 */
static void
write_merged_results(QsJson *j, int k, QsPushItem *items, int from, int to,
					 QsPushGroup *groups, int *seen, int *slot)
{
	int			n = to - from;
	int		   *order = palloc(sizeof(int) * Max(n, 1));	/* slot -> group */
	int		   *count = palloc0(sizeof(int) * (Max(n, 1) + 1));
	int		   *bucket = palloc(sizeof(int) * Max(n, 1));
	int		   *dup_idx = palloc(sizeof(int) * Max(n, 1));
	int64	   *dup_off = palloc(sizeof(int64) * Max(n, 1));
	int			nslots = 0;

	qsj_array(j, "push_results");
	for (int i = from; i < to; i++)
	{
		int			g = items[i].group;

		CHECK_FOR_INTERRUPTS();
		if (!qs_push_item_grouped(&items[i]))
			continue;
		if (seen[g] != k)
		{
			seen[g] = k;
			slot[g] = nslots;
			order[nslots++] = g;
		}
		count[slot[g] + 1]++;
	}
	for (int s = 0; s < nslots; s++)
		count[s + 1] += count[s];
	{
		int		   *fill = palloc(sizeof(int) * Max(nslots, 1));

		memcpy(fill, count, sizeof(int) * Max(nslots, 1));
		for (int i = from; i < to; i++)
			if (qs_push_item_grouped(&items[i]))
				bucket[fill[slot[items[i].group]]++] = i;
		pfree(fill);
	}
	for (int s = 0; s < nslots; s++)
	{
		QsPushGroup *pg = &groups[order[s]];
		int64		base = -1;
		int			ndups = 0;

		for (int b = count[s]; b < count[s + 1]; b++)
		{
			QsPushItem *it = &items[bucket[b]];

			CHECK_FOR_INTERRUPTS();
			if (it->status == QS_PUSH_QUEUED)
			{
				if (base < 0)
					base = it->offset;
			}
			else
			{
				dup_idx[ndups] = b - count[s];
				dup_off[ndups] = it->offset;
				ndups++;
			}
		}
		write_result(j, pg->queue, pg->partition, count[s + 1] - count[s], base >= 0,
					 base, pg->created_at, ndups, dup_idx, dup_off);
	}
	qsj_end_array(j);
	pfree(order);
	pfree(count);
	pfree(bucket);
	pfree(dup_idx);
	pfree(dup_off);
}

/*
 * queen_streams.cycle_many(requests jsonb[], tenant): several cycles of one
 * tenant in one call, each answered as queen_streams.cycle would answer it
 * had they run one after the other in one transaction. Each cycle's work
 * (ownership, shard lock, state ops, ack) runs in its own subtransaction,
 * and a failed one fails alone; the sink items of those that succeeded are
 * then pushed as one push (one segment per partition), so the sink rows
 * are locked once, last. A request that does not parse, and any failure of
 * that push, fail the whole call: the listener's group commit then runs
 * the cycles one by one.
 */
PG_FUNCTION_INFO_V1(qs_cycle_many);
Datum
qs_cycle_many(PG_FUNCTION_ARGS)
{
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *elem_nulls;
	int			n;
	pg_uuid_t	tenant;
	CycleReq   *rs;
	CycleOut   *outs;
	QsJson	   *bodies;
	int		   *first;
	int			total = 0;
	QsPushItem *items;
	Datum	   *answers;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("requests must be an array of cycle requests")));
	arr = PG_GETARG_ARRAYTYPE_P(0);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("requests must be a one-dimensional array")));
	qs_tenant_arg(fcinfo, 1, &tenant);
	deconstruct_array(arr, JSONBOID, -1, false, TYPALIGN_INT, &elems, &elem_nulls, &n);
	rs = palloc0(sizeof(CycleReq) * Max(n, 1));
	outs = palloc0(sizeof(CycleOut) * Max(n, 1));
	bodies = palloc0(sizeof(QsJson) * Max(n, 1));
	first = palloc(sizeof(int) * (Max(n, 1) + 1));

	for (int k = 0; k < n; k++)
	{
		CHECK_FOR_INTERRUPTS();
		parse_request(elem_nulls[k] ? NULL : DatumGetJsonbP(elems[k]), &tenant, &rs[k]);
		run_one(&rs[k], &outs[k], &bodies[k], true);
		first[k] = total;
		total += outs[k].nitems;
	}
	first[n] = total;

	/* the sink items of every cycle that succeeded, in cycle order, as one push */
	items = palloc0(sizeof(QsPushItem) * Max(total, 1));
	for (int k = 0; k < n; k++)
		for (int i = 0; i < outs[k].nitems; i++)
		{
			items[first[k] + i] = outs[k].items[i];
			items[first[k] + i].req = k;
		}
	qs_spi_connect();
	{
		QsPushGroup *groups = NULL;
		int			ng = 0;
		int		   *seen;
		int		   *slot;

		if (total > 0)
		{
			QsPushBatch *b = qs_push_begin_many();

			for (int i = 0; i < total; i++)
			{
				CHECK_FOR_INTERRUPTS();
				qs_push_add(b, items, i);
			}
			groups = qs_push_finish(b, &tenant, items, total, &ng);
		}
		seen = palloc(sizeof(int) * Max(ng, 1));
		slot = palloc(sizeof(int) * Max(ng, 1));
		for (int g = 0; g < ng; g++)
			seen[g] = -1;
		for (int k = 0; k < n; k++)
			if (outs[k].error == NULL)
				write_merged_results(&bodies[k], k, items, first[k], first[k + 1],
									 groups, seen, slot);
	}
	qs_spi_finish();

	answers = palloc(sizeof(Datum) * Max(n, 1));
	for (int k = 0; k < n; k++)
		answers[k] = JsonbPGetDatum(cycle_answer(&rs[k], &outs[k], &bodies[k]));
	PG_RETURN_ARRAYTYPE_P(construct_array(answers, n, JSONBOID, -1, false, TYPALIGN_INT));
}
