/*
 * maintenance.c: Queen's maintenance modes, kept in queen.system_state so
 * they outlive a restart.
 *
 *  - push maintenance: POST /api/v1/push holds each body in queen.push_buffer
 *    (queen.push_buffer) instead of the log; turning the mode off replays the
 *    buffer in arrival order, in that same transaction. A queue's maxSize is
 *    checked at replay, as Queen's buffer drain does: a body that would take
 *    a queue past it stays in the buffer with its error.
 *  - pop maintenance: the pop routes answer empty at once.
 *
 * Acks, transactions, streams and SQL callers are never diverted (as Queen).
 * The listener asks qs_maintenance_on() per request; the answer is cached
 * per backend and dropped by a relcache invalidation of queen.system_state,
 * which every change sends at commit.
 */
#include "storage/storage.h"
#include "common/ids.h"
#include "common/spi.h"
#include "common/text.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#define MODE_PUSH	0x01
#define MODE_POP	0x02

static int	cached_modes = -1;	/* -1: read the table again */
static bool callback_registered = false;

static QsPlan modes_plan = {
	"SELECT coalesce(bool_or(key = 'maintenance_mode' AND (value->>'enabled')::boolean), false),"
	"       coalesce(bool_or(key = 'pop_maintenance_mode' AND (value->>'enabled')::boolean), false)"
	"  FROM queen.system_state",
	0, {}
};

static QsPlan set_plan = {
	"INSERT INTO queen.system_state (key, value) VALUES ($1, jsonb_build_object('enabled', $2))"
	" ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
	2, {TEXTOID, BOOLOID}
};

static QsPlan buffer_stats_plan = {
	"SELECT count(*) FILTER (WHERE failed_at IS NULL),"
	"       coalesce(sum(items) FILTER (WHERE failed_at IS NULL), 0),"
	"       count(*) FILTER (WHERE failed_at IS NOT NULL),"
	"       coalesce(sum(octet_length(request::text)) FILTER (WHERE failed_at IS NOT NULL), 0)"
	"  FROM queen.push_buffer",
	0, {}
};

static QsPlan buffer_put_plan = {
	"INSERT INTO queen.push_buffer (tenant_id, producer_sub, request, items) VALUES ($1, $2, $3, $4)",
	4, {UUIDOID, TEXTOID, JSONBOID, INT4OID}
};

static QsPlan buffer_next_plan = {
	"SELECT id, tenant_id, producer_sub, request FROM queen.push_buffer"
	" WHERE failed_at IS NULL AND id > $1 ORDER BY id LIMIT 100 FOR UPDATE",
	1, {INT8OID}
};

static QsPlan buffer_done_plan = {
	"DELETE FROM queen.push_buffer WHERE id = $1",
	1, {INT8OID}
};

static QsPlan buffer_failed_plan = {
	"UPDATE queen.push_buffer SET failed_at = now(), error = $2 WHERE id = $1",
	2, {INT8OID, TEXTOID}
};

/* Pending queue-mode messages of a queue, and its maxSize. */
static QsPlan capacity_plan = {
	"SELECT q.max_queue_size,"
	"       coalesce(sum(p.last_offset - GREATEST(coalesce(c.committed, -1), p.log_start - 1)), 0)"
	"  FROM queen.queues q"
	"  LEFT JOIN queen.log_partitions p ON p.queue_id = q.id"
	"  LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = '__QUEUE_MODE__'"
	" WHERE q.tenant_id = $1 AND q.name = $2"
	" GROUP BY q.max_queue_size",
	2, {UUIDOID, TEXTOID}
};

static QsPlan replay_plan = {
	"SELECT queen.push($1, $2, $3)", 3, {JSONBOID, UUIDOID, TEXTOID}
};

static void
modes_inval(Datum arg, Oid relid)
{
	cached_modes = -1;
}

static int
current_modes(void)
{
	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(modes_inval, (Datum) 0);
		callback_registered = true;
	}
	if (cached_modes < 0)
	{
		int			modes;

		qs_spi_connect();
		qs_exec(&modes_plan, NULL, NULL, 1);
		modes = (qs_col_bool(0, 1, false) ? MODE_PUSH : 0) |
			(qs_col_bool(0, 2, false) ? MODE_POP : 0);
		qs_spi_finish();
		cached_modes = modes;
	}
	return cached_modes;
}

/* Whether push (pop = false) or pop maintenance is on; inside a transaction. */
bool
qs_maintenance_on(bool pop)
{
	return (current_modes() & (pop ? MODE_POP : MODE_PUSH)) != 0;
}

static bool
parse_mode(const char *mode)
{
	if (strcmp(mode, "push") == 0)
		return false;
	if (strcmp(mode, "pop") == 0)
		return true;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown maintenance mode \"%s\"", mode),
			 errhint("Use \"push\" or \"pop\".")));
	return false;
}

/* Appends pendingCount and the rest of Queen's bufferStats to an object. */
static int64
buffer_stats(QsJson *j, bool queen_shape)
{
	int64		pending_rows,
				pending_items,
				failed,
				failed_bytes;
	char	   *mb;

	qs_spi_connect();
	qs_exec(&buffer_stats_plan, NULL, NULL, 1);
	pending_rows = qs_col_int64(0, 1, 0);
	pending_items = qs_col_int64(0, 2, 0);
	failed = qs_col_int64(0, 3, 0);
	failed_bytes = qs_col_int64(0, 4, 0);
	qs_spi_finish();
	(void) pending_rows;

	if (!queen_shape)
	{
		/* GET /api/v1/status/buffers */
		qsj_int(j, "pending", pending_items);
		qsj_int(j, "failed", failed);
		qsj_bool(j, "dbHealthy", true);
		qsj_str(j, "worker", "postgres");
		return pending_items;
	}
	qsj_object(j, "bufferStats");
	qsj_int(j, "pendingCount", pending_items);
	qsj_int(j, "failedCount", failed);
	qsj_bool(j, "dbHealthy", true);
	qsj_object(j, "failedFiles");
	qsj_int(j, "count", failed);
	qsj_int(j, "totalBytes", failed_bytes);
	mb = psprintf("%.2f", failed_bytes / 1048576.0);
	qsj_raw(j, "totalMB", mb, strlen(mb));
	qsj_int(j, "failoverCount", 0);
	qsj_int(j, "qos0Count", 0);
	qsj_end_object(j);
	qsj_end_object(j);
	return pending_items;
}

/* SQL: queen.maintenance(mode text DEFAULT 'push') */
PG_FUNCTION_INFO_V1(qs_maintenance);
Datum
qs_maintenance(PG_FUNCTION_ARGS)
{
	char	   *mode = PG_ARGISNULL(0) ? "push" : text_to_cstring(PG_GETARG_TEXT_PP(0));
	QsJson		j;

	cached_modes = -1;			/* read fresh, as Queen's route does */
	qsj_init(&j);
	qsj_object(&j, NULL);
	if (strcmp(mode, "buffers") == 0)
		(void) buffer_stats(&j, false);
	else if (parse_mode(mode))
	{
		bool		on = qs_maintenance_on(true);

		qsj_bool(&j, "popMaintenanceMode", on);
		qsj_str(&j, "message", on ? "Pop maintenance is on: pops answer empty."
				: "Pop maintenance is off: normal operation.");
	}
	else
	{
		int64		buffered;

		qsj_bool(&j, "maintenanceMode", qs_maintenance_on(false));
		qsj_bool(&j, "popMaintenanceMode", qs_maintenance_on(true));
		buffered = buffer_stats(&j, true);
		qsj_int(&j, "bufferedMessages", buffered);
		qsj_bool(&j, "bufferHealthy", true);
	}
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Every queue of a buffered body still has room for its items. */
static char *
capacity_error(const pg_uuid_t *tenant, Jsonb *request)
{
	JsonbContainer *items = qs_json_array(&request->root, "items", "buffered push");
	int			n = items ? JsonContainerSize(items) : 0;
	char	  **queues = palloc(sizeof(char *) * Max(n, 1));

	for (int i = 0; i < n; i++)
		queues[i] = qs_json_string(qs_json_container(getIthJsonbValueFromContainer(items, i)),
								   "queue", "buffered push", true);
	qsort(queues, n, sizeof(char *), cmp_str);
	for (int i = 0; i < n;)
	{
		int			k = i + 1;
		Datum		args[2];

		CHECK_FOR_INTERRUPTS();
		while (k < n && strcmp(queues[k], queues[i]) == 0)
			k++;
		args[0] = qs_uuid_datum(tenant);
		args[1] = CStringGetTextDatum(queues[i]);
		qs_exec(&capacity_plan, args, NULL, 1);
		if (SPI_processed == 1)
		{
			int64		max = qs_col_int64(0, 1, 0);
			int64		pending = qs_col_int64(0, 2, 0);

			if (max > 0 && pending + (k - i) > max)
				return psprintf("queue \"%s\" would exceed max capacity (%lld)",
								queues[i], (long long) max);
		}
		i = k;
	}
	return NULL;
}

typedef struct Replay
{
	Datum	   *args;
	const char *nulls;
} Replay;

static bool
replay_work(void *arg)
{
	Replay	   *r = (Replay *) arg;

	qs_exec(&replay_plan, r->args, r->nulls, 1);
	return true;
}

/* Replay one buffered body in its own subtransaction; NULL or its error. */
static const char *
replay_one(Datum *args, const char *nulls)
{
	Replay		r = {args, nulls};

	return qs_subxact_run(replay_work, &r, "a buffered body's replay");
}

typedef struct Buffered
{
	int64		id;
	pg_uuid_t	tenant;
	char	   *sub;
	Jsonb	   *request;
} Buffered;

/* Replay the buffer in id order, a chunk of rows at a time. */
static void
drain(int64 *replayed, int64 *failed)
{
	int64		last = 0;

	for (;;)
	{
		Buffered   *rows;
		int			n;
		Datum		arg = Int64GetDatum(last);
		MemoryContext outer = CurrentMemoryContext;

		qs_spi_connect();
		qs_exec(&buffer_next_plan, &arg, NULL, 0);
		n = SPI_processed;
		rows = MemoryContextAlloc(outer, sizeof(Buffered) * Max(n, 1));
		for (int i = 0; i < n; i++)
		{
			bool		isnull;
			Datum		d;
			MemoryContext old;

			rows[i].id = DatumGetInt64(qs_col(i, 1, &isnull));
			rows[i].tenant = *DatumGetUUIDP(qs_col(i, 2, &isnull));
			d = qs_col(i, 3, &isnull);
			old = MemoryContextSwitchTo(outer);
			rows[i].sub = isnull ? NULL : TextDatumGetCString(d);
			rows[i].request = DatumGetJsonbPCopy(qs_col(i, 4, &isnull));
			MemoryContextSwitchTo(old);
		}
		qs_spi_finish();
		if (n == 0)
			return;

		for (int i = 0; i < n; i++)
		{
			Datum		args[3];
			char		nulls[3] = "   ";
			const char *error;
			Datum		id = Int64GetDatum(rows[i].id);

			CHECK_FOR_INTERRUPTS();
			last = rows[i].id;
			qs_spi_connect();
			error = capacity_error(&rows[i].tenant, rows[i].request);
			qs_spi_finish();
			if (error == NULL)
			{
				args[0] = JsonbPGetDatum(rows[i].request);
				args[1] = qs_uuid_datum(&rows[i].tenant);
				args[2] = rows[i].sub ? CStringGetTextDatum(rows[i].sub) : (Datum) 0;
				nulls[2] = rows[i].sub ? ' ' : 'n';
				error = replay_one(args, nulls);
			}
			qs_spi_connect();
			if (error == NULL)
			{
				qs_exec(&buffer_done_plan, &id, NULL, 0);
				(*replayed)++;
			}
			else
			{
				Datum		fargs[2] = {id, CStringGetTextDatum(error)};

				ereport(WARNING,
						(errmsg("buffered push %lld was not replayed: %s",
								(long long) rows[i].id, error),
						 errdetail("It stays in queen.push_buffer with its error.")));
				qs_exec(&buffer_failed_plan, fargs, NULL, 0);
				(*failed)++;
			}
			qs_spi_finish();
		}
	}
}

static void
invalidate_modes(void)
{
	Oid			relid = get_relname_relid("system_state", get_namespace_oid("queen", false));

	CacheInvalidateRelcacheByRelid(relid);
}

/* SQL: queen.set_maintenance(mode text, request jsonb) */
PG_FUNCTION_INFO_V1(qs_set_maintenance);
Datum
qs_set_maintenance(PG_FUNCTION_ARGS)
{
	bool		pop;
	bool		enabled;
	JsonbValue	v;
	Datum		args[2];
	int64		replayed = 0,
				failed = 0;
	QsJson		j;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("maintenance mode is required")));
	pop = parse_mode(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	if (PG_ARGISNULL(1) || !JB_ROOT_IS_OBJECT(PG_GETARG_JSONB_P(1)) ||
		!qs_json_get(&PG_GETARG_JSONB_P(1)->root, "enabled", &v) || v.type != jbvBool)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("enabled (boolean) is required")));
	enabled = v.val.boolean;

	args[0] = CStringGetTextDatum(pop ? "pop_maintenance_mode" : "maintenance_mode");
	args[1] = BoolGetDatum(enabled);
	qs_spi_connect();
	qs_exec(&set_plan, args, NULL, 0);
	qs_spi_finish();
	invalidate_modes();
	cached_modes = -1;
	if (!pop && !enabled)
		drain(&replayed, &failed);

	qsj_init(&j);
	qsj_object(&j, NULL);
	if (pop)
	{
		qsj_bool(&j, "popMaintenanceMode", enabled);
		qsj_str(&j, "message", enabled ? "Pop maintenance is on: pops answer empty."
				: "Pop maintenance is off: normal operation.");
	}
	else
	{
		int64		buffered;

		qsj_bool(&j, "maintenanceMode", enabled);
		buffered = buffer_stats(&j, true);
		qsj_int(&j, "bufferedMessages", buffered);
		qsj_bool(&j, "bufferHealthy", true);
		if (!enabled)
		{
			qsj_int(&j, "replayed", replayed);
			qsj_int(&j, "replayFailed", failed);
		}
		qsj_str(&j, "message", enabled ?
				"Maintenance mode is on: pushes are buffered and replayed when it is turned off."
				: "Maintenance mode is off: buffered pushes were replayed.");
	}
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/* SQL: queen.push_buffer(request jsonb, tenant uuid, producer_sub text) */
PG_FUNCTION_INFO_V1(qs_push_buffer);
Datum
qs_push_buffer(PG_FUNCTION_ARGS)
{
	Jsonb	   *req;
	JsonbContainer *items;
	pg_uuid_t	tenant;
	int			n;
	Datum		args[4];
	char		nulls[4] = "    ";
	QsJson		j;

	if (PG_ARGISNULL(0) || !JB_ROOT_IS_OBJECT(PG_GETARG_JSONB_P(0)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("push request must be a JSON object")));
	req = PG_GETARG_JSONB_P(0);
	qs_tenant_arg(fcinfo, 1, &tenant);
	items = qs_json_array(&req->root, "items", "push request");
	if (items == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("items array is required")));
	n = JsonContainerSize(items);

	qsj_init(&j);
	qsj_array(&j, NULL);
	for (int i = 0; i < n; i++)
	{
		JsonbContainer *o = qs_json_container(getIthJsonbValueFromContainer(items, i));
		char		what[32];
		char	   *queue,
				   *partition,
				   *txn;

		CHECK_FOR_INTERRUPTS();
		snprintf(what, sizeof(what), "item %d", i);
		if (o == NULL || !JsonContainerIsObject(o))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must be a JSON object", what)));
		queue = qs_json_string(o, "queue", what, true);
		partition = qs_json_string(o, "partition", what, false);
		txn = qs_json_string(o, "transactionId", what, false);
		qs_check_name("queue", NULL, queue);
		if (partition == NULL)
			partition = "Default";
		qs_check_name("partition", NULL, partition);
		qsj_object(&j, NULL);
		qsj_int(&j, "index", i);
		qsj_str(&j, "status", "buffered");
		qsj_str(&j, "queue", queue);
		qsj_str(&j, "partition", partition);
		if (txn)
			qsj_str(&j, "transactionId", txn);
		qsj_end_object(&j);
	}
	qsj_end_array(&j);

	if (n > 0)
	{
		args[0] = qs_uuid_datum(&tenant);
		args[1] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
		nulls[1] = PG_ARGISNULL(2) ? 'n' : ' ';
		args[2] = JsonbPGetDatum(req);
		args[3] = Int32GetDatum(n);
		qs_spi_connect();
		qs_exec(&buffer_put_plan, args, nulls, 0);
		qs_spi_finish();
	}
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
