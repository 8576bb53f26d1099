/*
 * configure.c: queen.configure (POST /api/v1/configure) and
 * queen.delete_queue (DELETE /api/v1/resources/queues/:queue).
 *
 * configure creates or replaces a queue's settings under the tenant, as
 * Queen's route does: an option left out takes its default (leaseTime 300).
 * Unknown option names and wrong types are refused before anything is written.
 */
#include "storage/storage.h"

#include "catalog/pg_type_d.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

typedef enum OptType
{
	OPT_INT,
	OPT_BOOL
} OptType;

typedef struct QueueOption
{
	const char *name;			/* wire name */
	const char *column;
	OptType		type;
	int			dflt;
	int			min;
} QueueOption;

/* Every option here has an effect somewhere in src/storage. */
static const QueueOption options[] = {
	{"leaseTime", "lease_time", OPT_INT, 300, 1},
	{"retryLimit", "retry_limit", OPT_INT, 3, 0},
	{"retryDelay", "retry_delay", OPT_INT, 1000, 0},
	{"deadLetterQueue", "dead_letter_queue", OPT_BOOL, true, 0},
	{"dlqAfterMaxRetries", "dlq_after_max_retries", OPT_BOOL, true, 0},
	{"delayedProcessing", "delayed_processing", OPT_INT, 0, 0},
	{"windowBuffer", "window_buffer", OPT_INT, 0, 0},
	{"retentionSeconds", "retention_seconds", OPT_INT, 0, 0},
	{"completedRetentionSeconds", "completed_retention_seconds", OPT_INT, 0, 0},
	{"retentionEnabled", "retention_enabled", OPT_BOOL, false, 0},
	{"encryptionEnabled", "encryption_enabled", OPT_BOOL, false, 0},
	{"dedupWindowSeconds", "dedup_window_seconds", OPT_INT, 3600, 0},
};

#define NOPTIONS lengthof(options)

static QsPlan upsert_plan = {NULL};

static QsPlan *
configure_plan(void)
{
	if (upsert_plan.sql == NULL)
	{
		StringInfoData cols,
					vals,
					sets,
					sql;

		initStringInfo(&cols);
		initStringInfo(&vals);
		initStringInfo(&sets);
		for (int i = 0; i < (int) NOPTIONS; i++)
		{
			appendStringInfo(&cols, ", %s", options[i].column);
			appendStringInfo(&vals, ", $%d", i + 5);
			appendStringInfo(&sets, ", %s = EXCLUDED.%s", options[i].column, options[i].column);
			upsert_plan.argtypes[i + 4] = options[i].type == OPT_INT ? INT4OID : BOOLOID;
		}
		initStringInfo(&sql);
		appendStringInfo(&sql,
						 "INSERT INTO queen.queues (tenant_id, name, namespace, task%s)"
						 " VALUES ($1, $2, COALESCE($3, split_part($2, '.', 1)),"
						 "         COALESCE($4, split_part($2, '.', 2))%s)"
						 " ON CONFLICT (tenant_id, name) DO UPDATE"
						 "   SET namespace = EXCLUDED.namespace, task = EXCLUDED.task%s"
						 " RETURNING (xmax = 0), namespace, task",
						 cols.data, vals.data, sets.data);
		upsert_plan.nargs = 4 + NOPTIONS;
		upsert_plan.argtypes[0] = UUIDOID;
		upsert_plan.argtypes[1] = TEXTOID;
		upsert_plan.argtypes[2] = TEXTOID;
		upsert_plan.argtypes[3] = TEXTOID;
		upsert_plan.sql = MemoryContextStrdup(TopMemoryContext, sql.data);
	}
	return &upsert_plan;
}

PG_FUNCTION_INFO_V1(qs_configure);
Datum
qs_configure(PG_FUNCTION_ARGS)
{
	JsonbContainer *obj;
	JsonbContainer *opts = NULL;
	pg_uuid_t	tenant;
	char	   *queue,
			   *ns,
			   *task;
	int			values[NOPTIONS];
	Datum		args[4 + NOPTIONS];
	char		nulls[4 + NOPTIONS];
	JsonbValue	v;
	bool		created,
				isnull;
	QsJson		j;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("request body must be a JSON object")));
	obj = qs_json_object_arg(PG_GETARG_JSONB_P(0), "request body");
	qs_tenant_arg(fcinfo, 1, &tenant);
	queue = qs_json_string(obj, "queue", "configure request", false);
	if (queue == NULL || queue[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queue is required")));
	if (strlen(queue) > 255)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queue name is too long"),
				 errdetail("Names are at most 255 bytes.")));
	ns = qs_json_string(obj, "namespace", "configure request", false);
	task = qs_json_string(obj, "task", "configure request", false);

	if (qs_json_get(obj, "options", &v))
	{
		JsonbIterator *it;
		JsonbValue	k;
		JsonbIteratorToken tok;

		if (v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("configure request: \"options\" must be an object")));
		opts = v.val.binary.data;
		/* refuse unknown names before anything is written */
		it = JsonbIteratorInit(opts);
		while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
		{
			bool		known = false;

			if (tok != WJB_KEY)
				continue;
			for (int i = 0; i < (int) NOPTIONS && !known; i++)
				known = strlen(options[i].name) == (size_t) k.val.string.len &&
					memcmp(options[i].name, k.val.string.val, k.val.string.len) == 0;
			if (!known)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("unknown queue option \"%.*s\"", k.val.string.len, k.val.string.val),
						 errhint("Known options: leaseTime, retryLimit, retryDelay, deadLetterQueue, "
								 "dlqAfterMaxRetries, delayedProcessing, windowBuffer, retentionSeconds, "
								 "completedRetentionSeconds, retentionEnabled, encryptionEnabled, "
								 "dedupWindowSeconds.")));
		}
	}

	memset(nulls, ' ', sizeof(nulls));
	args[0] = qs_uuid_datum(&tenant);
	args[1] = CStringGetTextDatum(queue);
	args[2] = ns ? CStringGetTextDatum(ns) : (Datum) 0;
	nulls[2] = ns ? ' ' : 'n';
	args[3] = task ? CStringGetTextDatum(task) : (Datum) 0;
	nulls[3] = task ? ' ' : 'n';
	for (int i = 0; i < (int) NOPTIONS; i++)
	{
		const QueueOption *o = &options[i];

		if (o->type == OPT_BOOL)
			values[i] = opts ? qs_json_bool(opts, o->name, "options", o->dflt) : o->dflt;
		else
		{
			int64		n = opts ? qs_json_int(opts, o->name, "options", o->dflt) : o->dflt;

			if (n < o->min || n > PG_INT32_MAX)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("options: \"%s\" must be an integer from %d to %d", o->name, o->min, PG_INT32_MAX),
						 errdetail("Got " INT64_FORMAT ".", n)));
			values[i] = (int) n;
		}
		args[4 + i] = o->type == OPT_BOOL ? BoolGetDatum(values[i]) : Int32GetDatum(values[i]);
	}

	qsj_init(&j);
	qs_spi_connect();
	qs_exec(configure_plan(), args, nulls, 1);
	created = qs_col_bool(0, 1, false);
	ns = TextDatumGetCString(qs_col(0, 2, &isnull));
	task = TextDatumGetCString(qs_col(0, 3, &isnull));
	qsj_object(&j, NULL);
	qsj_bool(&j, "success", true);
	qsj_str(&j, "queue", queue);
	qsj_str(&j, "namespace", ns);
	qsj_str(&j, "task", task);
	qsj_bool(&j, "created", created);
	qsj_object(&j, "options");
	for (int i = 0; i < (int) NOPTIONS; i++)
	{
		if (options[i].type == OPT_BOOL)
			qsj_bool(&j, options[i].name, values[i]);
		else
			qsj_int(&j, options[i].name, values[i]);
	}
	qsj_end_object(&j);
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/* Segments, cursors and subscriptions go by foreign key; these do not. */
static QsPlan delete_plan = {
	"WITH q AS (SELECT id FROM queen.queues WHERE tenant_id = $1 AND name = $2 FOR UPDATE),"
	" p AS (SELECT id FROM queen.log_partitions WHERE queue_id IN (SELECT id FROM q)),"
	" t AS (DELETE FROM queen.log_txns WHERE partition_id IN (SELECT id FROM p)),"
	" d AS (DELETE FROM queen.log_dlq WHERE partition_id IN (SELECT id FROM p)),"
	" tr AS (DELETE FROM queen.message_traces WHERE partition_id IN (SELECT id FROM p)),"
	" s AS (DELETE FROM queen_streams.state WHERE partition_id IN (SELECT id FROM p))"
	"DELETE FROM queen.queues WHERE id IN (SELECT id FROM q) RETURNING 1",
	2, {UUIDOID, TEXTOID}
};

PG_FUNCTION_INFO_V1(qs_delete_queue);
Datum
qs_delete_queue(PG_FUNCTION_ARGS)
{
	pg_uuid_t	tenant;
	char	   *queue;
	Datum		args[2];
	bool		deleted;
	QsJson		j;

	if (PG_ARGISNULL(0) || VARSIZE_ANY_EXHDR(PG_GETARG_TEXT_PP(0)) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queue is required")));
	queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
	qs_tenant_arg(fcinfo, 1, &tenant);

	qsj_init(&j);
	qs_spi_connect();
	args[0] = qs_uuid_datum(&tenant);
	args[1] = CStringGetTextDatum(queue);
	qs_exec(&delete_plan, args, NULL, 0);
	deleted = SPI_processed > 0;
	qs_spi_finish();

	qsj_object(&j, NULL);
	qsj_bool(&j, "success", true);
	qsj_str(&j, "queue", queue);
	qsj_bool(&j, "deleted", deleted);
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
