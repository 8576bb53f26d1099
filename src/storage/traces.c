/*
 * traces.c: message traces: queen.trace_add (POST
 * /api/v1/traces), queen.traces (GET /api/v1/traces/:p/:t),
 * queen.traces_by_name (GET /api/v1/traces/by-name/:name) and
 * queen.trace_names (GET /api/v1/traces/names).
 *
 * A trace is keyed by (partition, transaction id) and carries its tenant,
 * the tenant of the partition's queue when it was written; every read is
 * limited to the caller's tenant. Trace names are stored deduplicated and
 * sorted, as Queen lists them.
 */
#include "storage/dlq.h"
#include "common/args.h"
#include "common/ids.h"
#include "common/spi.h"

#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"

static QsPlan dlq_has_plan = {
	"SELECT 1 FROM queen.log_dlq WHERE partition_id = $1 AND transaction_id = $2 LIMIT 1",
	2, {UUIDOID, TEXTOID}
};

static QsPlan insert_plan = {
	"INSERT INTO queen.message_traces (id, tenant_id, partition_id, transaction_id,"
	"                                  consumer_group, event_type, trace_names, data)"
	" VALUES ($1, $2, $3, $4, $5, $6,"
	"         ARRAY(SELECT DISTINCT n FROM unnest($7::text[]) n WHERE n <> '' ORDER BY n), $8)",
	8, {UUIDOID, UUIDOID, UUIDOID, TEXTOID, TEXTOID, TEXTOID, TEXTARRAYOID, JSONBOID}
};

/* The columns every trace read returns, in emit_trace's order. */
#define TRACE_COLS \
	"SELECT t.id, t.transaction_id, t.partition_id, t.consumer_group, t.event_type," \
	"       to_jsonb(t.trace_names)::text, t.data::text, t.created_at"

static QsPlan message_traces_plan = {
	TRACE_COLS
	"  FROM queen.message_traces t"
	" WHERE t.partition_id = $1 AND t.transaction_id = $2 AND t.tenant_id = $3"
	" ORDER BY t.created_at, t.id",
	3, {UUIDOID, TEXTOID, UUIDOID}
};

static QsPlan by_name_count_plan = {
	"SELECT count(*) FROM queen.message_traces t"
	" WHERE t.tenant_id = $1 AND t.trace_names @> ARRAY[$2]",
	2, {UUIDOID, TEXTOID}
};

static QsPlan by_name_plan = {
	TRACE_COLS ", q.name::text, p.name"
	"  FROM queen.message_traces t"
	"  LEFT JOIN queen.log_partitions p ON p.id = t.partition_id"
	"  LEFT JOIN queen.queues q ON q.id = p.queue_id"
	" WHERE t.tenant_id = $1 AND t.trace_names @> ARRAY[$2]"
	" ORDER BY t.created_at, t.id LIMIT $3 OFFSET $4",
	4, {UUIDOID, TEXTOID, INT4OID, INT4OID}
};

static QsPlan names_count_plan = {
	"SELECT count(DISTINCT n) FROM queen.message_traces t, unnest(t.trace_names) n"
	" WHERE t.tenant_id = $1",
	1, {UUIDOID}
};

static QsPlan names_plan = {
	"SELECT n, count(*), count(DISTINCT (t.partition_id, t.transaction_id)), max(t.created_at)"
	"  FROM queen.message_traces t, unnest(t.trace_names) n"
	" WHERE t.tenant_id = $1"
	" GROUP BY n ORDER BY max(t.created_at) DESC, n LIMIT $2 OFFSET $3",
	3, {UUIDOID, INT4OID, INT4OID}
};

static void
bad_names(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("trace request: \"traceNames\" must be a string or an array of strings")));
}

/* traceNames: absent or null, one string, or an array of strings. */
static Datum
trace_names_arg(JsonbContainer *obj)
{
	JsonbValue	v;
	Datum	   *elems = NULL;
	int			n = 0;

	if (qs_json_get(obj, "traceNames", &v))
	{
		if (v.type == jbvString)
		{
			elems = palloc(sizeof(Datum));
			elems[n++] = PointerGetDatum(cstring_to_text_with_len(v.val.string.val, v.val.string.len));
		}
		else if (v.type == jbvBinary && JsonContainerIsArray(v.val.binary.data))
		{
			JsonbContainer *arr = v.val.binary.data;
			int			size = JsonContainerSize(arr);

			elems = palloc(sizeof(Datum) * Max(size, 1));
			for (int i = 0; i < size; i++)
			{
				JsonbValue *e = getIthJsonbValueFromContainer(arr, i);

				if (e->type != jbvString)
					bad_names();
				elems[n++] = PointerGetDatum(cstring_to_text_with_len(e->val.string.val, e->val.string.len));
			}
		}
		else
			bad_names();
	}
	return PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/* An optional string field: the default when absent, null or empty. */
static char *
string_or(JsonbContainer *obj, const char *key, const char *dflt)
{
	char	   *s = qs_json_string(obj, key, "trace request", false);

	return (s == NULL || s[0] == '\0') ? (char *) dflt : s;
}

/* The message must be the tenant's; see qs_txn_presence for what is checked. */
static void
check_message(const pg_uuid_t *tenant, const pg_uuid_t *pid, const char *txn)
{
	QsTxnPresence found = qs_txn_presence(tenant, pid, txn);

	if (found == QS_TXN_ABSENT)
	{
		Datum		args[2];

		/* a dead letter whose segment retention removed is still traceable */
		args[0] = qs_uuid_datum(pid);
		args[1] = CStringGetTextDatum(txn);
		qs_exec(&dlq_has_plan, args, NULL, 1);
		if (SPI_processed == 1)
			found = QS_TXN_FOUND;
	}
	if (found == QS_TXN_NO_PARTITION || found == QS_TXN_ABSENT)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("message not found")));
}

/* SQL: queen.trace_add(request jsonb, tenant uuid) */
PG_FUNCTION_INFO_V1(qs_trace_add);
Datum
qs_trace_add(PG_FUNCTION_ARGS)
{
	JsonbContainer *obj;
	pg_uuid_t	tenant,
				pid,
				id;
	char	   *txn,
			   *pidstr;
	JsonbValue	data;
	Datum		args[8];
	QsJson		j;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("request body must be a JSON object")));
	obj = qs_json_object_arg(PG_GETARG_JSONB_P(0), "trace request");
	qs_tenant_arg(fcinfo, 1, &tenant);
	txn = qs_json_string(obj, "transactionId", "trace request", false);
	pidstr = qs_json_string(obj, "partitionId", "trace request", false);
	if (txn == NULL || txn[0] == '\0' || pidstr == NULL || pidstr[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("transactionId and partitionId are required")));
	if (!qs_uuid_parse(pidstr, strlen(pidstr), &pid))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("trace request: \"partitionId\" must be a UUID"),
				 errdetail("Got \"%s\".", pidstr)));
	if (!qs_json_get(obj, "data", &data))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("data is required")));

	qs_uuid7(&id);
	args[0] = qs_uuid_datum(&id);
	args[1] = qs_uuid_datum(&tenant);
	args[2] = qs_uuid_datum(&pid);
	args[3] = CStringGetTextDatum(txn);
	args[4] = CStringGetTextDatum(string_or(obj, "consumerGroup", QS_QUEUE_MODE));
	args[5] = CStringGetTextDatum(string_or(obj, "eventType", "info"));
	args[6] = trace_names_arg(obj);
	args[7] = JsonbPGetDatum(JsonbValueToJsonb(&data));

	qsj_init(&j);
	qs_spi_connect();
	check_message(&tenant, &pid, txn);
	qs_exec(&insert_plan, args, NULL, 0);
	qsj_object(&j, NULL);
	qsj_bool(&j, "success", true);
	qsj_uuid(&j, "traceId", &id);
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/* One trace row of TRACE_COLS (plus queue and partition names when `names`). */
static void
emit_trace(QsJson *j, int r, bool names)
{
	HeapTuple	tup = SPI_tuptable->vals[r];
	TupleDesc	td = SPI_tuptable->tupdesc;
	bool		isnull;
	char	   *tn = SPI_getvalue(tup, td, 6);
	char	   *data = SPI_getvalue(tup, td, 7);

	qsj_object(j, NULL);
	qsj_uuid(j, "id", DatumGetUUIDP(qs_col(r, 1, &isnull)));
	qsj_str(j, "transactionId", SPI_getvalue(tup, td, 2));
	qsj_uuid(j, "partitionId", DatumGetUUIDP(qs_col(r, 3, &isnull)));
	qsj_str(j, "consumerGroup", SPI_getvalue(tup, td, 4));
	qsj_str(j, "eventType", SPI_getvalue(tup, td, 5));
	qsj_raw(j, "traceNames", tn, strlen(tn));
	qsj_raw(j, "data", data, strlen(data));
	qsj_time(j, "createdAt", DatumGetTimestampTz(qs_col(r, 8, &isnull)));
	if (names)
	{
		qsj_str(j, "queueName", SPI_getvalue(tup, td, 9));
		qsj_str(j, "partitionName", SPI_getvalue(tup, td, 10));
	}
	qsj_end_object(j);
}

static void
emit_pagination(QsJson *j, int64 total, int lim, int off)
{
	qsj_int(j, "total", total);
	qsj_object(j, "pagination");
	qsj_int(j, "limit", lim);
	qsj_int(j, "offset", off);
	qsj_end_object(j);
}

/* SQL: queen.traces(partition_id uuid, transaction_id text, tenant uuid) */
PG_FUNCTION_INFO_V1(qs_traces);
Datum
qs_traces(PG_FUNCTION_ARGS)
{
	pg_uuid_t	tenant,
				pid;
	char	   *txn = qs_message_args(fcinfo, &pid);
	Datum		args[3];
	QsJson		j;

	qs_tenant_arg(fcinfo, 2, &tenant);
	args[0] = qs_uuid_datum(&pid);
	args[1] = CStringGetTextDatum(txn);
	args[2] = qs_uuid_datum(&tenant);
	qsj_init(&j);
	qs_spi_connect();
	qs_exec(&message_traces_plan, args, NULL, 0);
	qsj_object(&j, NULL);
	qsj_array(&j, "traces");
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		CHECK_FOR_INTERRUPTS();
		emit_trace(&j, r, false);
	}
	qsj_end_array(&j);
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/* SQL: queen.traces_by_name(name text, lim int, off int, tenant uuid) */
PG_FUNCTION_INFO_V1(qs_traces_by_name);
Datum
qs_traces_by_name(PG_FUNCTION_ARGS)
{
	pg_uuid_t	tenant;
	char	   *name = qs_text_arg(fcinfo, 0);
	int			lim,
				off;
	int64		total;
	Datum		args[4];
	QsJson		j;

	if (name == NULL || name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("trace name is required")));
	qs_page_args(fcinfo, 1, 2, 100, &lim, &off);
	qs_tenant_arg(fcinfo, 3, &tenant);
	args[0] = qs_uuid_datum(&tenant);
	args[1] = CStringGetTextDatum(name);
	args[2] = Int32GetDatum(lim);
	args[3] = Int32GetDatum(off);

	qsj_init(&j);
	qs_spi_connect();
	qs_exec(&by_name_count_plan, args, NULL, 1);
	total = qs_col_int64(0, 1, 0);
	qsj_object(&j, NULL);
	qsj_array(&j, "traces");
	if (lim > 0 && off < total)
	{
		qs_exec(&by_name_plan, args, NULL, 0);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			CHECK_FOR_INTERRUPTS();
			emit_trace(&j, r, true);
		}
	}
	qsj_end_array(&j);
	emit_pagination(&j, total, lim, off);
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/* SQL: queen.trace_names(lim int, off int, tenant uuid) */
PG_FUNCTION_INFO_V1(qs_trace_names);
Datum
qs_trace_names(PG_FUNCTION_ARGS)
{
	pg_uuid_t	tenant;
	int			lim,
				off;
	int64		total;
	Datum		args[3];
	QsJson		j;

	qs_page_args(fcinfo, 0, 1, 50, &lim, &off);
	qs_tenant_arg(fcinfo, 2, &tenant);
	args[0] = qs_uuid_datum(&tenant);
	args[1] = Int32GetDatum(lim);
	args[2] = Int32GetDatum(off);

	qsj_init(&j);
	qs_spi_connect();
	qs_exec(&names_count_plan, args, NULL, 1);
	total = qs_col_int64(0, 1, 0);
	qsj_object(&j, NULL);
	qsj_array(&j, "trace_names");
	if (lim > 0 && off < total)
	{
		qs_exec(&names_plan, args, NULL, 0);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			bool		isnull;

			CHECK_FOR_INTERRUPTS();
			qsj_object(&j, NULL);
			qsj_str(&j, "trace_name", SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1));
			qsj_int(&j, "trace_count", qs_col_int64(r, 2, 0));
			qsj_int(&j, "message_count", qs_col_int64(r, 3, 0));
			qsj_time(&j, "last_seen", DatumGetTimestampTz(qs_col(r, 4, &isnull)));
			qsj_end_object(&j);
		}
	}
	qsj_end_array(&j);
	emit_pagination(&j, total, lim, off);
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
