/*
 * runner.c: the stream worker's loop, which runs every declared stream the
 * way examples/window_counter.pl runs one, through the same functions:
 *
 *   pop a leased batch      queen.pop(source, group => <consumer_group>, ...)
 *   per source partition    lock the state shard, queen_streams.state_get,
 *                           fold (window.c), queen_streams.cycle: state ops,
 *                           closed windows to the sink and the source ack in
 *                           one transaction, with the pop's lease as the fence
 *   idle flush              partitions caught up and quiet for idle_flush
 *                           seconds: the ripe windows (windowEnd + grace at or
 *                           before the wall clock) go out in a cycle with
 *                           "ack": null
 *
 * Each step is its own transaction (worker_spi's pattern). The pop commits
 * its lease first, so a worker that dies mid-fold leaves a lease that
 * expires and a batch that another worker (or this one, restarted) pops and
 * folds again from the last committed state; a cycle whose lease has
 * expired rolls back whole. Workers share the streams' partitions through
 * those leases (pop skips leased partitions), and the shard lock that the
 * cycle also takes is held from the state read to the commit, so an idle
 * flush and a fold of one partition never interleave: their cycles delete
 * only rows read under that lock and are never refused as stale, but for
 * a flush that meets a lease another worker took after the idle check
 * (the cycle's rule 2), which is skipped until the next pass.
 *
 * Workers sleep on their latch, which a committed push sets (pool.c), and
 * at most queen_streams.stream_poll_interval.
 */
#include "streams/streams.h"
#include "common/guc.h"
#include "common/hooks.h"
#include "common/ids.h"
#include "common/spi.h"
#include "common/workers.h"
#include "storage/storage.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type_d.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

typedef struct Stream
{
	pg_uuid_t	qid;
	pg_uuid_t	tenant;
	char		qid_str[QS_UUID_STRLEN + 1];
	char	   *name;
	Jsonb	   *definition;
	bool		registered;		/* the query still has the definition's hash */
	bool		ok;
	QsStreamDef def;
} Stream;

static const pg_uuid_t zero_uuid = {{0}};
static int	my_index = -1;

static QsPlan list_plan = {
	"SELECT d.query_id, d.tenant_id, d.name, d.definition, q.config_hash = d.config_hash"
	"  FROM queen_streams.declared_streams d JOIN queen_streams.queries q ON q.id = d.query_id"
	" WHERE NOT d.paused ORDER BY d.query_id",
	0, {InvalidOid}
};

static QsPlan pop_plan = {
	"SELECT queen.pop($1, NULL, $2, $3, $4, false, $5, $6, $7, $8)",
	8, {TEXTOID, TEXTOID, INT4OID, INT4OID, UUIDOID, TEXTOID, TEXTOID, INT4OID}
};

static QsPlan state_plan = {
	"SELECT queen_streams.state_get($1, $2)", 2, {JSONBOID, UUIDOID}
};

static QsPlan cycle_plan = {
	"SELECT queen_streams.cycle($1, $2)", 2, {JSONBOID, UUIDOID}
};

static QsPlan stats_plan = {
	"INSERT INTO queen_streams.declared_stats AS s"
	"   (query_id, partition_id, cycles, events, filtered, late, windows, last_cycle_at,"
	"    rate_since, rate_events)"
	" VALUES ($1, $2, 1, $3, $4, $5, $6, now(), now(), $3)"
	" ON CONFLICT (query_id, partition_id) DO UPDATE"
	"   SET cycles = s.cycles + 1, events = s.events + $3, filtered = s.filtered + $4,"
	"       late = s.late + $5, windows = s.windows + $6, last_cycle_at = now(),"
	"       rate_since = CASE WHEN s.rate_since IS NULL OR s.rate_since < now() - interval '1 minute'"
	"                         THEN now() ELSE s.rate_since END,"
	"       rate_events = CASE WHEN s.rate_since IS NULL OR s.rate_since < now() - interval '1 minute'"
	"                          THEN $3 ELSE s.rate_events + $3 END",
	6, {UUIDOID, UUIDOID, INT8OID, INT8OID, INT8OID, INT8OID}
};

static QsPlan error_plan = {
	"INSERT INTO queen_streams.declared_stats AS s (query_id, partition_id, errors, last_error, last_error_at)"
	" SELECT $1, $2, 1, $3, now()"
	"  WHERE EXISTS (SELECT 1 FROM queen_streams.declared_streams WHERE query_id = $1)"
	" ON CONFLICT (query_id, partition_id) DO UPDATE"
	"   SET errors = s.errors + 1, last_error = $3, last_error_at = now()",
	3, {UUIDOID, UUIDOID, TEXTOID}
};

/*
 * Partitions to idle-flush: caught up (nothing past the cursor, or what is
 * past it deleted by retention), no live lease, no cycle for idle_flush
 * seconds (the watermark row is written by every fold), and some open
 * window.
 */
static QsPlan idle_plan = {
	"SELECT w.partition_id, p.name FROM queen_streams.state w"
	"  JOIN queen.log_partitions p ON p.id = w.partition_id"
	"  LEFT JOIN queen.log_consumers c ON c.partition_id = w.partition_id AND c.consumer_group = $2"
	" WHERE w.query_id = $1 AND w.key = '__wm__'"
	"   AND w.updated_at <= now() - make_interval(secs => $3)"
	"   AND (c.partition_id IS NULL OR (GREATEST(c.committed, p.log_start - 1) >= p.last_offset"
	"        AND (c.lease_expires_at IS NULL OR c.lease_expires_at < clock_timestamp())))"
	"   AND EXISTS (SELECT 1 FROM queen_streams.state r"
	"                WHERE r.query_id = $1 AND r.partition_id = w.partition_id AND r.key <> '__wm__')"
	" ORDER BY w.partition_id",
	3, {UUIDOID, TEXTOID, FLOAT8OID}
};

/* The same conditions for one partition, checked again under the shard lock. */
static QsPlan still_idle_plan = {
	"SELECT 1 FROM queen_streams.state w"
	"  JOIN queen.log_partitions p ON p.id = w.partition_id"
	"  LEFT JOIN queen.log_consumers c ON c.partition_id = w.partition_id AND c.consumer_group = $2"
	" WHERE w.query_id = $1 AND w.partition_id = $4 AND w.key = '__wm__'"
	"   AND w.updated_at <= now() - make_interval(secs => $3)"
	"   AND (c.partition_id IS NULL OR (GREATEST(c.committed, p.log_start - 1) >= p.last_offset"
	"        AND (c.lease_expires_at IS NULL OR c.lease_expires_at < clock_timestamp())))",
	4, {UUIDOID, TEXTOID, FLOAT8OID, UUIDOID}
};

static bool
tables_ready(void)
{
	Oid			ns;

	if (!OidIsValid(get_extension_oid("queen_streams", true)))
		return false;
	ns = get_namespace_oid("queen_streams", true);
	/* an extension not yet updated to 0.2.0 has no declared streams */
	return OidIsValid(ns) && OidIsValid(get_relname_relid("declared_stats", ns));
}

static MemoryContext step_caller = NULL;

/* A transaction of its own; the caller's memory context is current again after it. */
static void
begin_step(const char *what)
{
	step_caller = CurrentMemoryContext;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, what);
	qs_spi_connect();
}

static void
end_step(void)
{
	qs_spi_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	MemoryContextSwitchTo(step_caller);
}

/* An error of a step: rolled back, logged, and kept in declared_stats. */
static void
step_failed(MemoryContext cxt, const pg_uuid_t *qid, const pg_uuid_t *pid)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	ereport(LOG,
			(errcode(edata->sqlerrcode),
			 errmsg("stream worker %d: %s", my_index, edata->message)));
	FlushErrorState();
	AbortCurrentTransaction();
	qs_stream_count(QS_SC_CYCLES_FAILED, 1);
	PG_TRY();
	{
		Datum		args[3];

		begin_step("queen_streams stream: recording an error");
		args[0] = qs_uuid_datum(qid);
		args[1] = qs_uuid_datum(pid ? pid : &zero_uuid);
		args[2] = CStringGetTextDatum(edata->message);
		qs_exec(&error_plan, args, NULL, 0);
		end_step();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		qs_log_dropped_error("stream worker: the error above was not recorded in declared_stats");
		FlushErrorState();
		AbortCurrentTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	FreeErrorData(edata);
}

typedef struct ParseArg
{
	Stream	   *s;
	MemoryContext into;
} ParseArg;

static bool
parse_work(void *arg)
{
	ParseArg   *p = (ParseArg *) arg;
	MemoryContext old = MemoryContextSwitchTo(p->into);

	qs_def_parse(p->s->definition, p->s->name, &p->s->def);
	MemoryContextSwitchTo(old);
	return true;
}

static Stream *
load_streams(MemoryContext cxt, int *n)
{
	Stream	   *volatile streams = NULL;
	volatile int count = 0;

	*n = 0;
	PG_TRY();
	{
		begin_step("queen_streams stream: loading declared streams");
		if (tables_ready())
		{
			qs_exec(&list_plan, NULL, NULL, 0);
			count = (int) SPI_processed;
			streams = MemoryContextAllocZero(cxt, sizeof(Stream) * Max(count, 1));
			for (int i = 0; i < count; i++)
			{
				Stream	   *s = &streams[i];
				bool		isnull;
				MemoryContext old = MemoryContextSwitchTo(cxt);

				s->qid = *DatumGetUUIDP(qs_col(i, 1, &isnull));
				s->tenant = *DatumGetUUIDP(qs_col(i, 2, &isnull));
				qs_uuid_format(&s->qid, s->qid_str);
				s->name = TextDatumGetCString(qs_col(i, 3, &isnull));
				s->definition = DatumGetJsonbPCopy(qs_col(i, 4, &isnull));
				s->registered = qs_col_bool(i, 5, false);
				MemoryContextSwitchTo(old);
			}
			SPI_freetuptable(SPI_tuptable);
			for (int i = 0; i < count; i++)
			{
				ParseArg	p = {&streams[i], cxt};
				const char *error;

				CHECK_FOR_INTERRUPTS();
				error = qs_subxact_run(parse_work, &p, "a declared stream's definition");
				streams[i].ok = error == NULL && streams[i].registered;
				if (error)
					ereport(LOG,
							(errmsg("stream worker %d: stream \"%s\" has an invalid definition: %s",
									my_index, streams[i].name, error)));
			}
		}
		end_step();
	}
	PG_CATCH();
	{
		step_failed(cxt, &zero_uuid, NULL);
		return NULL;
	}
	PG_END_TRY();
	*n = count;
	return streams;
}

/* The pop's answer, copied out of the transaction; NULL when it failed. */
static Jsonb *
pop_batch(MemoryContext cxt, Stream *s)
{
	Jsonb	   *volatile res = NULL;

	PG_TRY();
	{
		QsStreamDef *d = &s->def;
		Datum		args[8];
		char		nulls[8] = "        ";
		bool		isnull;
		bool		is_new = strcmp(d->subscription, "new") == 0;
		bool		is_all = strcmp(d->subscription, "all") == 0;
		MemoryContext old;

		begin_step("queen_streams stream: pop");
		args[0] = CStringGetTextDatum(d->source);
		args[1] = CStringGetTextDatum(d->group);
		/* a declared stream pops within the operator's caps, never past them */
		args[2] = Int32GetDatum(Min(d->batch, qs_max_pop_batch));
		args[3] = Int32GetDatum(d->lease_s);
		args[4] = qs_uuid_datum(&s->tenant);
		args[5] = is_new ? CStringGetTextDatum("new") : (Datum) 0;
		nulls[5] = is_new ? ' ' : 'n';
		args[6] = (is_new || is_all) ? (Datum) 0 : CStringGetTextDatum(d->subscription);
		nulls[6] = (is_new || is_all) ? 'n' : ' ';
		args[7] = Int32GetDatum(Min(d->partitions, qs_max_pop_partitions));
		qs_exec(&pop_plan, args, nulls, 1);
		old = MemoryContextSwitchTo(cxt);
		res = DatumGetJsonbPCopy(qs_col(0, 1, &isnull));
		MemoryContextSwitchTo(old);
		end_step();
	}
	PG_CATCH();
	{
		step_failed(cxt, &s->qid, NULL);
		res = NULL;
	}
	PG_END_TRY();
	return res;
}

static Jsonb *
call_json(QsPlan *plan, Jsonb *request, const pg_uuid_t *tenant)
{
	Datum		args[2];
	bool		isnull;

	args[0] = JsonbPGetDatum(request);
	args[1] = qs_uuid_datum(tenant);
	qs_exec(plan, args, NULL, 1);
	return DatumGetJsonbP(qs_col(0, 1, &isnull));
}

static Jsonb *
state_request(Stream *s, const char *pid, const char *prefix, bool ripe, bool wm_only)
{
	QsJson		j;

	qsj_init(&j);
	qsj_object(&j, NULL);
	qsj_str(&j, "query_id", s->qid_str);
	qsj_str(&j, "partition_id", pid);
	if (prefix)
		qsj_str(&j, "key_prefix", prefix);
	if (ripe)
	{
		int64		now_ms = (GetCurrentTimestamp() / 1000) + 946684800000LL;	/* PG epoch to Unix */

		qsj_int(&j, "ripe_at_or_before", now_ms - (int64) s->def.grace_s * 1000);
	}
	if (wm_only)
	{
		qsj_array(&j, "keys");
		qsj_str(&j, NULL, "__wm__");
		qsj_end_array(&j);
	}
	qsj_end_object(&j);
	return qsj_jsonb(&j);
}

static JsonbContainer *
rows_of(Jsonb *state)
{
	JsonbValue	v;

	if (!qs_json_get(&state->root, "rows", &v))
		return NULL;
	return qs_json_container(&v);
}

/*
 * Commit the fold as one cycle; raises when the cycle reports a failure,
 * but for an idle flush refused as stale (another worker of the group took
 * the partition since the flush checked it was idle): false, nothing done.
 */
static bool
commit_cycle(Stream *s, const char *pid_str, const pg_uuid_t *pid, QsFoldOut *out,
			 JsonbValue *last, int count)
{
	QsJson		j;
	Jsonb	   *res;
	Datum		args[6];

	qsj_init(&j);
	qsj_object(&j, NULL);
	qsj_str(&j, "query_id", s->qid_str);
	qsj_str(&j, "partition_id", pid_str);
	qsj_str(&j, "consumer_group", s->def.group);
	qsj_raw(&j, "state_ops", out->ops.buf.data, out->ops.buf.len);
	qsj_raw(&j, "push_items", out->items.buf.data, out->items.buf.len);
	if (last)
	{
		JsonbContainer *m = qs_json_container(last);

		qsj_object(&j, "ack");
		qsj_str(&j, "transactionId", qs_json_string(m, "transactionId", "message", false));
		qsj_str(&j, "leaseId", qs_json_string(m, "leaseId", "message", false));
		qsj_str(&j, "status", "completed");
		qsj_int(&j, "count", count);
		qsj_end_object(&j);
	}
	else
		qsj_null(&j, "ack");
	qsj_end_object(&j);

	res = call_json(&cycle_plan, qsj_jsonb(&j), &s->tenant);
	if (last == NULL && !qs_json_bool(&res->root, "success", "cycle", false) &&
		qs_json_bool(&res->root, QS_CYCLE_STALE_FIELD, "cycle", false))
		return false;
	if (!qs_json_bool(&res->root, "success", "cycle", false))
	{
		char	   *error = qs_json_string(&res->root, "error", "cycle", false);

		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("stream \"%s\": cycle on partition %s failed: %s", s->name, pid_str,
						error ? error : "unknown error")));
	}
	args[0] = qs_uuid_datum(&s->qid);
	args[1] = qs_uuid_datum(pid);
	args[2] = Int64GetDatum(out->events);
	args[3] = Int64GetDatum(out->filtered);
	args[4] = Int64GetDatum(out->late);
	args[5] = Int64GetDatum(out->windows);
	qs_exec(&stats_plan, args, NULL, 0);
	return true;
}

static void
streamed(Stream *s, int64 popped, int64 cycled, int64 failed, int64 acked)
{
	if (qs_streamed_hook)
		qs_streamed_hook(&s->tenant, s->def.source, popped, cycled, failed, acked);
}

static void
count_cycle(QsFoldOut *out)
{
	qs_stream_count(QS_SC_CYCLES, 1);
	qs_stream_count(QS_SC_EVENTS, out->events);
	qs_stream_count(QS_SC_FILTERED, out->filtered);
	qs_stream_count(QS_SC_LATE, out->late);
	qs_stream_count(QS_SC_WINDOWS, out->windows);
	qs_stream_worker_cycled(my_index);
}

/* One partition's batch: one transaction, one cycle. */
static void
fold_partition(MemoryContext cxt, Stream *s, const char *pid_str, const char *pname,
			   JsonbValue **msgs, int n)
{
	pg_uuid_t	pid;

	if (!qs_uuid_parse(pid_str, strlen(pid_str), &pid))
		return;
	PG_TRY();
	{
		Jsonb	   *state;
		QsFoldOut	out;

		begin_step("queen_streams stream: fold and cycle");
		/* the lock queen_streams.cycle takes on the shard, taken first */
		qs_cycle_shard_lock(&s->qid, &pid);
		state = call_json(&state_plan, state_request(s, pid_str, NULL, false, false), &s->tenant);
		qs_fold_batch(&s->def, pid_str, pname, rows_of(state), msgs, n, &out);
		(void) commit_cycle(s, pid_str, &pid, &out, msgs[n - 1], n);
		end_step();
		count_cycle(&out);
		streamed(s, 0, 1, 0, n);
	}
	PG_CATCH();
	{
		step_failed(cxt, &s->qid, &pid);
		streamed(s, 0, 0, 1, 0);
	}
	PG_END_TRY();
}

/* Pop once and fold what came, partition by partition; true if it got messages. */
static bool
run_stream(MemoryContext cxt, Stream *s)
{
	Jsonb	   *batch = pop_batch(cxt, s);
	JsonbValue	v;
	JsonbContainer *arr;
	int			n;
	JsonbValue **msgs;
	bool	   *done;

	if (batch == NULL || !qs_json_get(&batch->root, "messages", &v) ||
		(arr = qs_json_container(&v)) == NULL || (n = JsonContainerSize(arr)) == 0)
		return false;
	streamed(s, n, 0, 0, 0);
	msgs = palloc(sizeof(JsonbValue *) * n);
	done = palloc0(sizeof(bool) * n);
	for (int i = 0; i < n; i++)
		msgs[i] = getIthJsonbValueFromContainer(arr, i);

	/* a pop claims a few partitions: group its messages by partition, in order */
	for (int i = 0; i < n; i++)
	{
		JsonbValue **mine;
		int			k = 0;
		char	   *pid;
		char	   *pname;

		if (done[i])
			continue;
		pid = qs_json_string(qs_json_container(msgs[i]), "partitionId", "message", true);
		pname = qs_json_string(qs_json_container(msgs[i]), "partition", "message", true);
		mine = palloc(sizeof(JsonbValue *) * (n - i));
		for (int m = i; m < n; m++)
		{
			char	   *other;

			CHECK_FOR_INTERRUPTS();
			if (done[m])
				continue;
			other = qs_json_string(qs_json_container(msgs[m]), "partitionId", "message", true);
			if (strcmp(other, pid) == 0)
			{
				mine[k++] = msgs[m];
				done[m] = true;
			}
		}
		fold_partition(cxt, s, pid, pname, mine, k);
	}
	return true;
}

/* One partition's idle flush: the ripe windows out, with no ack. */
static void
flush_partition(MemoryContext cxt, Stream *s, const pg_uuid_t *pid, const char *pname)
{
	PG_TRY();
	{
		char		pid_str[QS_UUID_STRLEN + 1];
		Datum		args[4];
		QsFoldOut	out;
		bool		flushed = false;
		char	   *prefix = psprintf("%s\x1f", s->def.tag);

		memset(&out, 0, sizeof(out));
		qs_uuid_format(pid, pid_str);
		begin_step("queen_streams stream: idle flush");
		qs_cycle_shard_lock(&s->qid, pid);
		args[0] = qs_uuid_datum(&s->qid);
		/* a fold may have committed since the partition was listed */
		args[1] = CStringGetTextDatum(s->def.group);
		args[2] = Float8GetDatum((double) s->def.idle_flush_s);
		args[3] = qs_uuid_datum(pid);
		qs_exec(&still_idle_plan, args, NULL, 1);
		if (SPI_processed == 1)
		{
			Jsonb	   *ripe = call_json(&state_plan, state_request(s, pid_str, prefix, true, false),
										 &s->tenant);
			Jsonb	   *wm = call_json(&state_plan, state_request(s, pid_str, NULL, false, true),
									   &s->tenant);

			qs_fold_flush(&s->def, pname, rows_of(ripe), rows_of(wm), &out);
			if (out.windows > 0)
				flushed = commit_cycle(s, pid_str, pid, &out, NULL, 0);
		}
		end_step();
		if (flushed)
		{
			count_cycle(&out);
			qs_stream_count(QS_SC_FLUSHES, 1);
			streamed(s, 0, 1, 0, 0);
		}
	}
	PG_CATCH();
	{
		step_failed(cxt, &s->qid, pid);
		streamed(s, 0, 0, 1, 0);
	}
	PG_END_TRY();
}

static void
idle_flush(MemoryContext cxt, Stream *s)
{
	pg_uuid_t  *volatile pids = NULL;
	char	  **volatile names = NULL;
	volatile int n = 0;

	if (s->def.idle_flush_s == 0)
		return;
	PG_TRY();
	{
		Datum		args[3];

		begin_step("queen_streams stream: idle partitions");
		args[0] = qs_uuid_datum(&s->qid);
		args[1] = CStringGetTextDatum(s->def.group);
		args[2] = Float8GetDatum((double) s->def.idle_flush_s);
		qs_exec(&idle_plan, args, NULL, 0);
		n = (int) SPI_processed;
		pids = MemoryContextAlloc(cxt, sizeof(pg_uuid_t) * Max(n, 1));
		names = MemoryContextAlloc(cxt, sizeof(char *) * Max(n, 1));
		for (int i = 0; i < n; i++)
		{
			bool		isnull;

			pids[i] = *DatumGetUUIDP(qs_col(i, 1, &isnull));
			names[i] = MemoryContextStrdup(cxt, TextDatumGetCString(qs_col(i, 2, &isnull)));
		}
		end_step();
	}
	PG_CATCH();
	{
		step_failed(cxt, &s->qid, NULL);
		n = 0;
	}
	PG_END_TRY();
	for (int i = 0; i < n && !ShutdownRequestPending; i++)
	{
		CHECK_FOR_INTERRUPTS();
		flush_partition(cxt, s, &pids[i], names[i]);
	}
}

static void
record_unregistered(MemoryContext cxt, Stream *s)
{
	PG_TRY();
	{
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("stream \"%s\" is not run: its query was registered again with another "
						"config_hash; alter_stream with reset => true takes it back", s->name)));
	}
	PG_CATCH();
	{
		step_failed(cxt, &s->qid, NULL);
	}
	PG_END_TRY();
}

void
qs_stream_worker_main(Datum main_arg)
{
	MemoryContext pass_cxt;
	TimestampTz next_flush = 0;
	TimestampTz next_unregistered = 0;

	my_index = DatumGetInt32(main_arg);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	qs_heap_keep_fixed(qs_backend_heap_keep_kb);	/* heap.c says why */
	BackgroundWorkerInitializeConnection(qs_workers_database(), NULL, 0);
	pgstat_report_appname("queen_streams stream");
	qs_stream_worker_started(my_index);

	pass_cxt = AllocSetContextCreate(TopMemoryContext, "queen_streams stream pass",
									 ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		bool		busy = false;
		int			n;
		Stream	   *streams;
		TimestampTz now;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		MemoryContextSwitchTo(pass_cxt);
		streams = load_streams(pass_cxt, &n);
		qs_stream_set_active(n > 0);
		now = GetCurrentTimestamp();
		for (int i = 0; i < n; i++)
		{
			CHECK_FOR_INTERRUPTS();
			if (streams[i].ok)
				busy |= run_stream(pass_cxt, &streams[i]);
			else if (!streams[i].registered && now >= next_unregistered)
				record_unregistered(pass_cxt, &streams[i]);
		}
		if (now >= next_unregistered)
			next_unregistered = TimestampTzPlusMilliseconds(now, 60000);
		if (now >= next_flush)
		{
			for (int i = 0; i < n; i++)
				if (streams[i].ok)
					idle_flush(pass_cxt, &streams[i]);
			next_flush = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), Min(qs_stream_poll_ms, 1000));
		}
		MemoryContextSwitchTo(TopMemoryContext);
		MemoryContextReset(pass_cxt);
		pgstat_report_stat(false);

		if (!busy)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 qs_stream_poll_ms, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
	}
}
