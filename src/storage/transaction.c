/*
 * transaction.c: queen.transaction (POST /api/v1/transaction): pushes and
 * acks of several queues in one database transaction, all or nothing
 * (Queen's POST /api/v1/transaction).
 *
 * The body is read and checked whole before anything is written: a
 * malformed op (not an object, a push without a queue, an ack without a
 * transaction id or with a partitionId that is not a UUID, a field of the
 * wrong type) raises 22023, as a malformed /push or /ack body does, so the
 * route answers 400 and nothing runs. Push items are flattened as Queen's
 * route does: every item of a {type:"push", items:[...]} op is one op of
 * its own, and result indexes count those. Each is read by push's item
 * rules (qs_push_read_item), with Queen's {} for a payload not given.
 *
 * The work then runs in one internal subtransaction, in the global lock
 * order (cycle.c): every push of the call goes through the push core in one
 * call (encryption, dedup, producer_sub stamping and the wake at commit as
 * queen.push; partition rows locked in ascending id), then every ack goes
 * through queen.ack in one call (cursor rows locked in (partition, group)
 * order). Pushes and acks touch different rows and an ack can only settle
 * a batch leased before this call, so this order answers exactly what op
 * order would, without lock-order deadlocks between concurrent calls.
 *
 * Verdicts: the lowest-index op that fails decides. An ack that queen.ack
 * does not accept, or that it accepts as a no-op because the message was
 * consumed before this call, fails with "ack_rejected: <its error>": so a
 * replayed transaction, or one from a worker whose batch was redelivered
 * and consumed elsewhere, commits nothing; an op of unknown
 * type fails with "unknown operation type: <type>" (ops after it are not
 * run). Any failure rolls the subtransaction back, and the function still
 * returns normally with success:false and the results up to and including
 * the failing op. An error raised while running (a lock timeout, a
 * deadlock) is no op's verdict: it answers success:false, that error, and
 * no results. A cancel is re-raised.
 *
 * `requiredLeases` is not read, as in Queen: only an ack op's own leaseId
 * is checked.
 */
#include "storage/storage.h"
#include "common/ids.h"
#include "common/spi.h"

#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

typedef enum TxnOpKind
{
	TXN_PUSH,
	TXN_ACK,
	TXN_UNKNOWN
} TxnOpKind;

typedef struct TxnOp
{
	TxnOpKind	kind;
	int			push;			/* TXN_PUSH: index into the push items */
	JsonbContainer *ack;		/* TXN_ACK: the op object, as an acknowledgment */
	int			ack_len;
	char	   *ack_txn;
	char	   *type_json;		/* TXN_UNKNOWN: the type as JSON text, or NULL */
	char	   *type_name;		/* TXN_UNKNOWN: as the error names it */
	/* TXN_ACK results */
	bool		success;
	char	   *error;
	bool		dlq;
} TxnOp;

typedef struct TxnReq
{
	pg_uuid_t	tenant;
	TxnOp	   *ops;
	int			nops;
	int			nrun;			/* ops run: those before the first unknown type */
	QsPushItem *items;
	int			nitems;
	pg_uuid_t  *item_pid;		/* partition of each push item, set by the run */
	int			nacks;
	int			failed;			/* index of the op that failed the run, or -1 */
	MemoryContext outer;		/* outlives the subtransaction and SPI */
} TxnReq;

/* The ack core: queen.ack under the same tenant, all acks in one call. */
static QsPlan ack_plan = {
	"SELECT queen.ack($1, $2)",
	2, {JSONBOID, UUIDOID}
};

/* A refused transaction request: 22023. */
#define raise_bad(...) \
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg(__VA_ARGS__)))

/*
 * One pushed message, from an item of a push op or from a flat push op:
 * push's item rules (push_text.c) with Queen's route's payload reading
 * ({} when neither payload nor data is there). Message ids are always the
 * server's.
 */
static void
parse_push(JsonbContainer *o, const char *what, const char *psub, QsPushItem *it)
{
	qs_push_read_item(o, what, &qs_push_rules_transaction, psub, it);
}

/* An ack op: checked here as queen.ack would, so that it never raises there. */
static void
parse_ack(JsonbValue *ov, const char *what, TxnOp *op)
{
	JsonbContainer *o = ov->val.binary.data;
	pg_uuid_t	pid;

	op->ack = o;
	op->ack_len = ov->val.binary.len;
	op->ack_txn = qs_json_string(o, "transactionId", what, true);
	qs_json_uuid(o, "partitionId", what, true, &pid);
	(void) qs_json_string(o, "status", what, false);
	(void) qs_json_string(o, "consumerGroup", what, false);
	(void) qs_json_string(o, "leaseId", what, false);
	(void) qs_json_string(o, "error", what, false);
}

static void
parse_request(FunctionCallInfo fcinfo, TxnReq *r)
{
	Jsonb	   *req;
	JsonbValue	v;
	JsonbContainer *arr;
	char	   *psub = NULL;
	int			n;
	int			maxops;

	if (PG_ARGISNULL(0))
		raise_bad("operations array required");
	req = PG_GETARG_JSONB_P(0);
	qs_tenant_arg(fcinfo, 1, &r->tenant);
	/* the pusher's identity comes from the caller (the token), never the body */
	if (PG_NARGS() > 2 && !PG_ARGISNULL(2))
		psub = text_to_cstring(PG_GETARG_TEXT_PP(2));

	if (!JB_ROOT_IS_OBJECT(req) ||
		getKeyJsonValueFromContainer(&req->root, "operations", 10, &v) == NULL ||
		v.type != jbvBinary || !JsonContainerIsArray(v.val.binary.data))
		raise_bad("operations array required");
	arr = v.val.binary.data;
	n = JsonContainerSize(arr);
	if (n == 0)
		raise_bad("operations array cannot be empty");

	/* the flattened ops: one per ack or unknown op, one per pushed item */
	maxops = n;
	for (int i = 0; i < n; i++)
	{
		JsonbValue *ov = getIthJsonbValueFromContainer(arr, i);
		JsonbContainer *o = qs_json_container(ov);
		JsonbValue	iv;

		CHECK_FOR_INTERRUPTS();
		if (o == NULL || !JsonContainerIsObject(o))
			raise_bad("operations[%d] must be a JSON object", i);
		if (getKeyJsonValueFromContainer(o, "items", 5, &iv) != NULL &&
			iv.type == jbvBinary && JsonContainerIsArray(iv.val.binary.data))
			maxops += JsonContainerSize(iv.val.binary.data);
	}
	r->ops = palloc0(sizeof(TxnOp) * maxops);
	r->items = palloc0(sizeof(QsPushItem) * maxops);
	r->nops = 0;
	r->nitems = 0;
	r->nacks = 0;
	r->nrun = -1;

	for (int i = 0; i < n; i++)
	{
		JsonbValue *ov = getIthJsonbValueFromContainer(arr, i);
		JsonbContainer *o = qs_json_container(ov);
		JsonbValue	tv;
		char	   *type = NULL;
		char		what[48];

		CHECK_FOR_INTERRUPTS();
		snprintf(what, sizeof(what), "operations[%d]", i);
		if (qs_json_get(o, "type", &tv))
			type = qs_json_cstring(&tv);

		if (type != NULL && strcmp(type, "push") == 0)
		{
			JsonbContainer *items = qs_json_array(o, "items", what);

			if (items == NULL)
			{
				/* a flat push op: the op is the item */
				TxnOp	   *op = &r->ops[r->nops++];

				op->kind = TXN_PUSH;
				op->push = r->nitems;
				parse_push(o, what, psub, &r->items[r->nitems++]);
				continue;
			}
			for (int k = 0; k < (int) JsonContainerSize(items); k++)
			{
				JsonbContainer *io = qs_json_container(getIthJsonbValueFromContainer(items, k));
				char		iwhat[64];
				TxnOp	   *op;

				CHECK_FOR_INTERRUPTS();
				snprintf(iwhat, sizeof(iwhat), "operations[%d].items[%d]", i, k);
				if (io == NULL || !JsonContainerIsObject(io))
					raise_bad("%s must be a JSON object", iwhat);
				op = &r->ops[r->nops++];
				op->kind = TXN_PUSH;
				op->push = r->nitems;
				parse_push(io, iwhat, psub, &r->items[r->nitems++]);
			}
		}
		else if (type != NULL && strcmp(type, "ack") == 0)
		{
			TxnOp	   *op = &r->ops[r->nops++];

			op->kind = TXN_ACK;
			parse_ack(ov, what, op);
		}
		else
		{
			TxnOp	   *op = &r->ops[r->nops++];
			int			len;

			op->kind = TXN_UNKNOWN;
			if (getKeyJsonValueFromContainer(o, "type", 4, &tv) != NULL && tv.type != jbvNull)
			{
				op->type_json = qs_json_text(&tv, &len);
				op->type_name = type ? type : op->type_json;
			}
			else
				op->type_name = "null";
			if (r->nrun < 0)
				r->nrun = r->nops - 1;
		}
	}
	if (r->nrun < 0)
		r->nrun = r->nops;
	for (int i = 0; i < r->nrun; i++)
		if (r->ops[i].kind == TXN_ACK)
			r->nacks++;
}

/* All pushes of the ops that run, in one call of the push core. */
static void
run_pushes(TxnReq *r)
{
	int			npush = 0;
	int			ng;
	QsPushGroup *groups;

	/* push items are numbered in op order: those that run are a prefix */
	for (int i = 0; i < r->nrun; i++)
		if (r->ops[i].kind == TXN_PUSH)
			npush = r->ops[i].push + 1;
	if (npush == 0)
		return;
	groups = qs_push_items(&r->tenant, r->items, npush, true, &ng);
	for (int i = 0; i < npush; i++)
		r->item_pid[i] = groups[r->items[i].group].part.pid;
}

/* All acks of the ops that run, in one call of queen.ack. */
static void
run_acks(TxnReq *r)
{
	StringInfoData body;
	Datum		args[2];
	bool		isnull;
	Jsonb	   *res;
	int			k = 0;
	bool		first = true;

	if (r->nacks == 0)
		return;
	initStringInfo(&body);
	appendStringInfoString(&body, "{\"acknowledgments\":[");
	for (int i = 0; i < r->nrun; i++)
	{
		TxnOp	   *op = &r->ops[i];

		CHECK_FOR_INTERRUPTS();
		if (op->kind != TXN_ACK)
			continue;
		if (!first)
			appendStringInfoChar(&body, ',');
		first = false;
		(void) JsonbToCString(&body, op->ack, op->ack_len);
	}
	appendStringInfoString(&body, "]}");

	args[0] = DirectFunctionCall1(jsonb_in, CStringGetDatum(body.data));
	args[1] = qs_uuid_datum(&r->tenant);
	qs_exec(&ack_plan, args, NULL, 1);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("queen.ack returned no row")));
	res = DatumGetJsonbP(qs_col(0, 1, &isnull));
	if (isnull || !JB_ROOT_IS_ARRAY(res) || (int) JsonContainerSize(&res->root) != r->nacks)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("queen.ack returned an unexpected result"),
				 errdetail("One result per acknowledgment was expected, %d acknowledgments were sent.",
						   r->nacks)));

	/* one result per acknowledgment, in request order */
	for (int i = 0; i < r->nrun; i++)
	{
		TxnOp	   *op = &r->ops[i];
		JsonbContainer *o;
		JsonbValue	v;
		char	   *err;

		if (op->kind != TXN_ACK)
			continue;
		o = qs_json_container(getIthJsonbValueFromContainer(&res->root, k++));
		op->success = qs_json_bool(o, "success", "ack result", false);
		op->dlq = qs_json_bool(o, "dlq", "ack result", false);
		err = qs_json_get(o, "error", &v) ? qs_json_cstring(&v) : NULL;
		/*
		 * A completed ack below the cursor is a no-op for queen.ack. Here it
		 * means the input was consumed before this transaction (a replay, or
		 * a stale worker whose batch was redelivered): its pushes are stale,
		 * so it fails like any ack that moves nothing.
		 */
		if (op->success && qs_json_bool(o, "noop", "ack result", false))
		{
			op->success = false;
			err = "already committed: the cursor moved past this message before this ack";
		}
		op->error = err ? MemoryContextStrdup(r->outer, err) : NULL;
	}
}

/*
 * Run the ops; returns the index of the failing op, or -1. Raises only on
 * errors that are no op's verdict.
 */
static int
run_transaction(TxnReq *r)
{
	run_pushes(r);
	run_acks(r);
	for (int i = 0; i < r->nrun; i++)
		if (r->ops[i].kind == TXN_ACK && !r->ops[i].success)
			return i;
	return r->nrun < r->nops ? r->nrun : -1;
}

/* The run, as a subtransaction's work: kept only when no op failed. */
static bool
run_work(void *arg)
{
	TxnReq	   *r = (TxnReq *) arg;

	r->failed = run_transaction(r);
	return r->failed < 0;
}

static void
write_results(QsJson *j, TxnReq *r, int upto)
{
	qsj_array(j, "results");
	for (int i = 0; i <= upto; i++)
	{
		TxnOp	   *op = &r->ops[i];

		qsj_object(j, NULL);
		qsj_int(j, "index", i);
		if (op->kind == TXN_PUSH)
		{
			QsPushItem *it = &r->items[op->push];

			qsj_str(j, "type", "push");
			qsj_bool(j, "success", true);
			qsj_strn(j, "transactionId", it->txn, it->txn_len);
			qsj_uuid(j, "messageId", &it->result_id);
			qsj_uuid(j, "partitionId", &r->item_pid[op->push]);
			qsj_str(j, "queueName", it->queue);
			qsj_str(j, "status", it->status == QS_PUSH_QUEUED ? "queued" : "duplicate");
		}
		else if (op->kind == TXN_ACK)
		{
			qsj_str(j, "type", "ack");
			qsj_bool(j, "success", op->success);
			qsj_str(j, "transactionId", op->ack_txn);
			qsj_str(j, "error", op->error);
			qsj_bool(j, "dlq", op->dlq);
		}
		else
		{
			if (op->type_json)
				qsj_raw(j, "type", op->type_json, strlen(op->type_json));
			else
				qsj_null(j, "type");
			qsj_bool(j, "success", false);
			qsj_str(j, "error", psprintf("unknown operation type: %s", op->type_name));
		}
		qsj_end_object(j);
	}
	qsj_end_array(j);
}

/* SQL: queen.transaction(request jsonb, tenant uuid, producer_sub text) */
PG_FUNCTION_INFO_V1(qs_transaction);
Datum
qs_transaction(PG_FUNCTION_ARGS)
{
	TxnReq		r;
	pg_uuid_t	txid;
	QsJson		j;
	int			failed;
	const char *error;
	bool		raised;

	memset(&r, 0, sizeof(r));
	parse_request(fcinfo, &r);
	r.outer = CurrentMemoryContext;
	r.failed = -1;
	r.item_pid = palloc0(sizeof(pg_uuid_t) * Max(r.nitems, 1));
	qs_uuid7(&txid);

	error = qs_subxact_run(run_work, &r, "queen.transaction");
	raised = error != NULL;
	failed = r.failed;

	if (!raised && failed >= 0)
	{
		TxnOp	   *op = &r.ops[failed];

		if (op->kind == TXN_ACK)
			error = psprintf("ack_rejected: %s", op->error ? op->error : "ack not applied");
		else
			error = psprintf("unknown operation type: %s", op->type_name);
	}

	qsj_init(&j);
	qsj_object(&j, NULL);
	qsj_uuid(&j, "transactionId", &txid);
	qsj_bool(&j, "success", error == NULL);
	if (error != NULL)
		qsj_str(&j, "error", error);
	if (raised)
		qsj_raw(&j, "results", "[]", 2);
	else
		write_results(&j, &r, failed >= 0 ? failed : r.nops - 1);
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
