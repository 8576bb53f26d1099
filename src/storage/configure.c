/*
 * configure.c: queen.configure (POST /api/v1/configure) and
 * queen.delete_queue (DELETE /api/v1/resources/queues/:queue).
 *
 * configure creates or replaces a queue's settings under the tenant, as
 * Queen's route does: a full replace, so an option left out (or null) takes
 * its default, and a namespace or task that is not a string becomes ''.
 * Queen drops option names it does not know; so do we, for compatibility,
 * but the answer lists them under "ignored" and the server log names them,
 * so a typo is visible. A known option of the wrong type is refused before
 * anything is written.
 */
#include "storage/storage.h"
#include "storage/pop_ready.h"
#include "common/hooks.h"
#include "common/ids.h"
#include "common/spi.h"
#include "common/text.h"

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

/*
 * Queen's fifteen options, then ours. Where each takes effect is in the
 * README ("Queue configuration"); priority and ttl are stored and shown
 * only, as in Queen.
 */
static const QueueOption options[] = {
	{"priority", "priority", OPT_INT, 0, PG_INT32_MIN},
	{"leaseTime", "lease_time", OPT_INT, 300, 0},
	{"retryLimit", "retry_limit", OPT_INT, 3, 0},
	{"retryDelay", "retry_delay", OPT_INT, 1000, 0},
	{"maxSize", "max_queue_size", OPT_INT, 0, 0},
	{"ttl", "ttl", OPT_INT, 3600, 0},
	{"deadLetterQueue", "dead_letter_queue", OPT_BOOL, true, 0},
	{"dlqAfterMaxRetries", "dlq_after_max_retries", OPT_BOOL, true, 0},
	{"delayedProcessing", "delayed_processing", OPT_INT, 0, 0},
	{"windowBuffer", "window_buffer", OPT_INT, 0, 0},
	{"retentionSeconds", "retention_seconds", OPT_INT, 0, 0},
	{"completedRetentionSeconds", "completed_retention_seconds", OPT_INT, 0, 0},
	{"retentionEnabled", "retention_enabled", OPT_BOOL, false, 0},
	{"encryptionEnabled", "encryption_enabled", OPT_BOOL, false, 0},
	{"maxWaitTimeSeconds", "max_wait_time_seconds", OPT_INT, 0, 0},
	{"dedupWindowSeconds", "dedup_window_seconds", OPT_INT, 3600, 0},
};

#define NOPTIONS lengthof(options)
#define NFIXED 4				/* tenant, name, namespace, task */

static QsPlan upsert_plan = {NULL};

static QsPlan default_partition_plan = {
	"INSERT INTO queen.log_partitions (queue_id, name) VALUES ($1, 'Default')"
	" ON CONFLICT (queue_id, name) DO UPDATE SET name = EXCLUDED.name RETURNING id",
	1, {UUIDOID}
};

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
			appendStringInfo(&vals, ", $%d", i + NFIXED + 1);
			appendStringInfo(&sets, ", %s = EXCLUDED.%s", options[i].column, options[i].column);
			upsert_plan.argtypes[i + NFIXED] = options[i].type == OPT_INT ? INT4OID : BOOLOID;
		}
		initStringInfo(&sql);
		appendStringInfo(&sql,
						 "INSERT INTO queen.queues (tenant_id, name, namespace, task%s)"
						 " VALUES ($1, $2, $3, $4%s)"
						 " ON CONFLICT (tenant_id, name) DO UPDATE"
						 "   SET namespace = EXCLUDED.namespace, task = EXCLUDED.task%s"
						 " RETURNING (xmax = 0), id",
						 cols.data, vals.data, sets.data);
		upsert_plan.nargs = NFIXED + NOPTIONS;
		upsert_plan.argtypes[0] = UUIDOID;
		upsert_plan.argtypes[1] = TEXTOID;
		upsert_plan.argtypes[2] = TEXTOID;
		upsert_plan.argtypes[3] = TEXTOID;
		upsert_plan.sql = MemoryContextStrdup(TopMemoryContext, sql.data);
	}
	return &upsert_plan;
}

static void
bad_option(const QueueOption *o, const char *want)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("options: \"%s\" must be %s", o->name, want)));
}

/*
 * An option's value: absent or null is the default. As Queen casts each
 * option from its text, an integer may also come as a string of digits and
 * a boolean as a PostgreSQL boolean literal ("t", "yes", "1", ...).
 */
static int
option_value(JsonbContainer *opts, const QueueOption *o)
{
	JsonbValue	v;

	if (opts == NULL || !qs_json_get(opts, o->name, &v))
		return o->dflt;
	if (o->type == OPT_BOOL)
	{
		bool		b;

		if (v.type == jbvBool)
			return v.val.boolean;
		if (v.type == jbvString &&
			parse_bool_with_len(v.val.string.val, v.val.string.len, &b))
			return b;
		bad_option(o, "a boolean");
	}
	else
	{
		int64		n;

		if (v.type == jbvNumeric)
			n = qs_json_int(opts, o->name, "options", 0);
		else if (v.type == jbvString)
		{
			char	   *s = pnstrdup(v.val.string.val, v.val.string.len);
			char	   *end;

			errno = 0;
			n = strtoll(s, &end, 10);
			if (s[0] == '\0' || *end != '\0' || errno != 0)
				bad_option(o, "an integer");
		}
		else
			bad_option(o, "an integer");
		if (n < o->min || n > PG_INT32_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("options: \"%s\" must be an integer from %d to %d",
							o->name, o->min, PG_INT32_MAX),
					 errdetail("Got " INT64_FORMAT ".", n)));
		return (int) n;
	}
	return o->dflt;				/* not reached */
}

/* Option names we do not know, in the request's order. */
static List *
unknown_options(JsonbContainer *opts)
{
	List	   *ignored = NIL;
	JsonbIterator *it = JsonbIteratorInit(opts);
	JsonbValue	k;
	JsonbIteratorToken tok;

	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		bool		known = false;

		if (tok != WJB_KEY)
			continue;
		for (int i = 0; i < (int) NOPTIONS && !known; i++)
			known = strlen(options[i].name) == (size_t) k.val.string.len &&
				memcmp(options[i].name, k.val.string.val, k.val.string.len) == 0;
		if (!known)
			ignored = lappend(ignored, pnstrdup(k.val.string.val, k.val.string.len));
	}
	return ignored;
}

/* namespace and task: a string, or '' for anything else (null included). */
static char *
label(JsonbContainer *obj, const char *key)
{
	JsonbValue	v;

	if (qs_json_get(obj, key, &v) && v.type == jbvString)
		return pnstrdup(v.val.string.val, v.val.string.len);
	return "";
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
	Datum		args[NFIXED + NOPTIONS];
	Datum		queue_id,
				partition_id;
	List	   *ignored = NIL;
	ListCell   *lc;
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
	if (!qs_json_get(obj, "queue", &v) || v.type != jbvString || v.val.string.len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queue is required")));
	queue = pnstrdup(v.val.string.val, v.val.string.len);
	qs_check_new_name("queue", NULL, queue);
	ns = label(obj, "namespace");
	task = label(obj, "task");
	if (ns[0] != '\0')
		qs_check_name("namespace", NULL, ns);
	if (task[0] != '\0')
		qs_check_name("task", NULL, task);

	if (qs_json_get(obj, "options", &v))
	{
		if (v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("configure request: \"options\" must be an object")));
		opts = v.val.binary.data;
		ignored = unknown_options(opts);
	}
	for (int i = 0; i < (int) NOPTIONS; i++)
	{
		values[i] = option_value(opts, &options[i]);
		args[NFIXED + i] = options[i].type == OPT_BOOL ?
			BoolGetDatum(values[i]) : Int32GetDatum(values[i]);
	}
	foreach(lc, ignored)
		ereport(LOG,
				(errmsg("configure of queue \"%s\" ignored unknown option \"%s\"",
						queue, (char *) lfirst(lc))));

	args[0] = qs_uuid_datum(&tenant);
	args[1] = CStringGetTextDatum(queue);
	args[2] = CStringGetTextDatum(ns);
	args[3] = CStringGetTextDatum(task);

	qsj_init(&j);
	qs_spi_connect();
	qs_exec(configure_plan(), args, NULL, 1);
	created = qs_col_bool(0, 1, false);
	queue_id = qs_col(0, 2, &isnull);
	qs_exec(&default_partition_plan, &queue_id, NULL, 1);
	partition_id = qs_col(0, 1, &isnull);

	qsj_object(&j, NULL);
	qsj_bool(&j, "configured", true);
	qsj_uuid(&j, "queueId", DatumGetUUIDP(queue_id));
	qsj_uuid(&j, "partitionId", DatumGetUUIDP(partition_id));
	qsj_str(&j, "queue", queue);
	qsj_str(&j, "namespace", ns);
	qsj_str(&j, "task", task);
	qsj_str(&j, "storage", "log");
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
	qsj_array(&j, "ignored");
	foreach(lc, ignored)
		qsj_str(&j, NULL, (char *) lfirst(lc));
	qsj_end_array(&j);
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/*
 * Partitions, cursors and subscriptions go by foreign key; these do not (the
 * log tables have none: appends would lock the partition row to check it).
 * The partition rows are locked first, in the appends' order: a push in
 * flight finishes (its keys and mark included) before anything of its
 * partition is deleted.
 */
static QsPlan delete_plan = {
	"WITH q AS (SELECT id FROM queen.queues WHERE tenant_id = $1 AND name = $2 FOR UPDATE),"
	" p AS (SELECT id FROM queen.log_partitions WHERE queue_id IN (SELECT id FROM q)"
	"       ORDER BY id FOR UPDATE),"
	" g AS (DELETE FROM queen.log_segments WHERE partition_id IN (SELECT id FROM p)),"
	" t AS (DELETE FROM queen.log_txns WHERE partition_id IN (SELECT id FROM p)),"
	" tk AS (DELETE FROM queen.log_txn_keys WHERE partition_id IN (SELECT id FROM p)),"
	" tm AS (DELETE FROM queen.log_txn_marks WHERE partition_id IN (SELECT id FROM p)),"
	" d AS (DELETE FROM queen.log_dlq WHERE partition_id IN (SELECT id FROM p)),"
	" tr AS (DELETE FROM queen.message_traces WHERE partition_id IN (SELECT id FROM p)),"
	" s AS (DELETE FROM queen_streams.state WHERE partition_id IN (SELECT id FROM p))"
	"DELETE FROM queen.queues WHERE id IN (SELECT id FROM q) RETURNING id",
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
	if (deleted)
	{
		bool		isnull;

		qs_ready_drop_queue(qs_uuid_datum(DatumGetUUIDP(qs_col(0, 1, &isnull))));
	}
	qs_spi_finish();
	if (deleted && qs_deleted_hook)
		qs_deleted_hook(&tenant, queue);

	/* Queen's answer: deleted is always true, existed says whether it was */
	qsj_object(&j, NULL);
	qsj_bool(&j, "success", true);
	qsj_bool(&j, "deleted", true);
	qsj_str(&j, "queue", queue);
	qsj_bool(&j, "existed", deleted);
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
