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
 */
#include "streams/streams.h"

#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "common/hashfn.h"
#include "storage/storage.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
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
} CycleOut;

static QsPlan query_owner_plan = {
	"SELECT 1 FROM queen_streams.queries WHERE id = $1 AND tenant_id = $2",
	2, {UUIDOID, UUIDOID}
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

static QsPlan delete_plan = {
	"DELETE FROM queen_streams.state WHERE query_id = $1 AND partition_id = $2 AND key = $3",
	3, {UUIDOID, UUIDOID, TEXTOID}
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

/* status counts as success for completed|success|acked|ok and when absent */
static void
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
			qs_exec(&upsert_plan, args, NULL, 0);
		}
		else
			qs_exec(&delete_plan, args, NULL, 0);
		out->ops_applied++;
	}
}

static void
push_sinks(CycleReq *r, CycleOut *out)
{
	int			n = r->push_items ? JsonContainerSize(r->push_items) : 0;
	QsPushItem *items = palloc0(sizeof(QsPushItem) * Max(n, 1));
	int			m = 0;
	QsPushGroup *groups;
	int			ng;
	QsJson	   *j = out->j;

	for (int i = 0; i < n; i++)
	{
		JsonbValue *v = getIthJsonbValueFromContainer(r->push_items, i);
		JsonbContainer *o = qs_json_container(v);
		QsPushItem *it = &items[m];
		JsonbValue	pv;
		char		what[32];
		char	   *queue;

		snprintf(what, sizeof(what), "push_items[%d]", i);
		if (o == NULL || !JsonContainerIsObject(o))
			raise_cycle("%s must be a JSON object", what);
		queue = qs_json_string(o, "queue", what, false);
		if (queue == NULL || queue[0] == '\0')
			continue;			/* an item without a queue is skipped */
		it->queue = queue;
		it->partition = qs_json_string(o, "partition", what, false);
		if (it->partition == NULL || it->partition[0] == '\0')
			it->partition = "Default";
		if (!qs_json_uuid(o, "messageId", what, false, &it->id))
			qs_uuid7(&it->id);
		qs_push_item_txn(it, o, what);
		if (qs_json_get(o, "payload", &pv) || qs_json_get(o, "data", &pv))
			it->payload = qs_json_text(&pv, &it->payload_len);
		else
		{
			it->payload = "{}";
			it->payload_len = 2;
		}
		m++;
	}

	qsj_array(j, "push_results");
	if (m > 0)
	{
		/* a sink group stores its fresh items and reports its duplicates */
		groups = qs_push_items(&r->tenant, items, m, true, &ng);
		for (int g = 0; g < ng; g++)
		{
			QsPushGroup *pg = &groups[g];

			qsj_object(j, NULL);
			qsj_str(j, "queue", pg->queue);
			qsj_str(j, "partition", pg->partition);
			qsj_int(j, "count", pg->nitems);
			qsj_str(j, "status", pg->stored ? "queued" : "duplicate");
			if (pg->stored)
			{
				qsj_int(j, "baseOffset", pg->base_offset);
				qsj_time(j, "createdAt", pg->created_at);
			}
			if (pg->ndups > 0)
				qs_write_dups(j, pg->ndups, pg->dup_idx, pg->dup_off);
			qsj_end_object(j);
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

/* The work of one cycle; raises on any failure. */
static void
run_cycle(CycleReq *r, CycleOut *out)
{
	Datum		args[2];
	char	   *queue;

	queue = qs_partition_owned(&r->tenant, &r->pid, false);
	if (queue == NULL)
		raise_cycle("partition not found");
	out->queue_name = MemoryContextStrdup(out->outer, queue);
	args[0] = qs_uuid_datum(&r->qid);
	args[1] = qs_uuid_datum(&r->tenant);
	qs_exec(&query_owner_plan, args, NULL, 1);
	if (SPI_processed != 1)
		raise_cycle("query not found");

	qs_cycle_shard_lock(&r->qid, &r->pid);

	apply_state_ops(r, out);
	push_sinks(r, out);
	if (r->ack)
		ack_source(r, out);
	else
		qsj_null(out->j, "ack_result");
}

static void
parse_request(FunctionCallInfo fcinfo, CycleReq *r)
{
	JsonbContainer *obj;
	JsonbValue	v;
	char	   *s;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("request body must be a JSON object")));
	obj = qs_json_object_arg(PG_GETARG_JSONB_P(0), "request body");
	qs_tenant_arg(fcinfo, 1, &r->tenant);

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

static bool
cycle_work(void *arg)
{
	CycleRun   *run = (CycleRun *) arg;

	run_cycle(run->r, run->out);
	return true;
}

PG_FUNCTION_INFO_V1(qs_cycle);
Datum
qs_cycle(PG_FUNCTION_ARGS)
{
	CycleReq	r;
	CycleOut	out;
	QsJson		body;			/* push_results and ack_result, filled by the work */
	QsJson		j;
	const char *error;
	CycleRun	run = {&r, &out};

	memset(&r, 0, sizeof(r));
	memset(&out, 0, sizeof(out));
	parse_request(fcinfo, &r);

	qsj_init(&body);
	body.first[0] = false;		/* it continues the envelope object below */
	out.j = &body;
	out.outer = CurrentMemoryContext;

	error = qs_subxact_run(cycle_work, &run);

	qsj_init(&j);
	qsj_object(&j, NULL);
	qsj_bool(&j, "success", error == NULL);
	qsj_uuid(&j, "query_id", &r.qid);
	qsj_uuid(&j, "partition_id", &r.pid);
	qsj_str(&j, "queueName", out.queue_name);
	if (error == NULL)
	{
		qsj_int(&j, "state_ops_applied", out.ops_applied);
		appendBinaryStringInfo(&j.buf, body.buf.data, body.buf.len);
	}
	else
	{
		/* nothing of a failed cycle committed: report nothing applied */
		qsj_int(&j, "state_ops_applied", 0);
		qsj_raw(&j, "push_results", "[]", 2);
		qsj_null(&j, "ack_result");
		qsj_str(&j, "error", error);
	}
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
