/*
 * messages.c: the message reads of Queen's admin API: queen.queue_messages
 * (GET /api/v1/status/queues/:queue/messages), queen.messages
 * (GET /api/v1/messages) and queen.message (GET /api/v1/messages/:p/:t).
 *
 * Listings merge the partitions newest segment first (all messages of a
 * segment share its created_at) and stop once limit + offset messages are
 * collected. A message's status comes from the __QUEUE_MODE__ cursor and
 * the dead-letter rows, so a segment wholly inside the offset being skipped
 * is counted from offsets alone and never fetched or decoded.
 */
#include "storage/resources.h"
#include "common/args.h"
#include "common/ids.h"
#include "common/spi.h"

#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

typedef enum MsgStatus
{
	ST_ANY = -1,
	ST_PENDING,
	ST_PROCESSING,
	ST_COMPLETED,
	ST_DEAD
} MsgStatus;

static const char *const status_names[] = {"pending", "processing", "completed", "dead_letter"};

typedef struct MsgPart
{
	pg_uuid_t	pid;
	char	   *pname,
			   *queue,
			   *ns,
			   *task;
	int			priority;
	int64		log_start,
				last,
				floor,			/* cursor clamped to [log_start - 1, last] */
				lease_end;		/* end of the live leased span, or floor */
	bool		has_qm;
	TimestampTz lease_expires;
	int			nbus;
	char	  **bus_names;
	int64	   *bus_committed;
	MemoryContext cxt;			/* where the dead-letter set goes */
	bool		dlq_loaded;
	int			ndlq;
	int64	   *dlq;			/* dead-lettered offsets, descending */
	int64		lo,
				hi;				/* the offsets the status filter can match */
	int64		pos;			/* highest offset not yet visited */
	bool		done;
	int64		h_base,
				h_end;			/* the head segment */
	TimestampTz h_created;
} MsgPart;

typedef struct MsgScan
{
	MsgStatus	status;
	bool		ranged;			/* from/to apply */
	TimestampTz from,
				to;
	int			lim,
				skip;
	bool		rich;			/* queen.messages' fields, else queue_messages' */
	int			nparts;
	MsgPart    *parts;
	int			emitted;
	MemoryContext segcxt;
} MsgScan;

static QsPlan scope_plan = {
	"SELECT p.id, p.name, q.name, q.namespace, q.task, q.priority, p.log_start, p.last_offset,"
	"       c.committed, c.batch_end, c.worker_id IS NOT NULL AND c.lease_expires_at > now(),"
	"       c.lease_expires_at, c.partition_id IS NOT NULL,"
	"       (SELECT array_agg(b.consumer_group ORDER BY b.consumer_group) FROM queen.log_consumers b"
	"         WHERE b.partition_id = p.id AND b.consumer_group <> '" QS_QUEUE_MODE "'),"
	"       (SELECT array_agg(b.committed ORDER BY b.consumer_group) FROM queen.log_consumers b"
	"         WHERE b.partition_id = p.id AND b.consumer_group <> '" QS_QUEUE_MODE "')"
	"  FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id"
	"  LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = '" QS_QUEUE_MODE "'"
	" WHERE q.tenant_id = $1 AND ($2::text IS NULL OR q.name = $2) AND ($3::text IS NULL OR p.name = $3)"
	"   AND ($4::text IS NULL OR q.namespace = $4) AND ($5::text IS NULL OR q.task = $5)"
	"   AND p.last_offset >= p.log_start"
	/* last_write_at lags the newest segment by at most a second (allocator.c) */
	"   AND ($6::timestamptz IS NULL OR p.last_write_at >= $6 - interval '1 second')"
	" ORDER BY p.id",
	6, {UUIDOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID}
};

static QsPlan blob_plan = {
	"SELECT blob FROM queen.log_segments WHERE partition_id = $1 AND base_offset = $2",
	2, {UUIDOID, INT8OID}
};

static QsPlan dlq_offsets_plan = {
	"SELECT DISTINCT \"offset\" FROM queen.log_dlq"
	" WHERE partition_id = $1 AND consumer_group = '" QS_QUEUE_MODE "' AND \"offset\" >= $2"
	" ORDER BY 1 DESC",
	2, {UUIDOID, INT8OID}
};

static MsgStatus
parse_status(const char *s)
{
	if (s == NULL)
		return ST_ANY;
	for (int i = 0; i < (int) lengthof(status_names); i++)
		if (strcmp(s, status_names[i]) == 0)
			return (MsgStatus) i;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid status filter \"%s\"", s),
			 errhint("Use pending, processing, completed or dead_letter.")));
	return ST_ANY;				/* not reached */
}

/* ---- the dead-letter set of a partition ---- */

static void
load_dlq(MsgPart *p)
{
	Datum		args[2];

	if (p->dlq_loaded)
		return;
	args[0] = qs_uuid_datum(&p->pid);
	args[1] = Int64GetDatum(p->log_start);
	qs_exec(&dlq_offsets_plan, args, NULL, 0);
	p->ndlq = (int) SPI_processed;
	p->dlq = MemoryContextAlloc(p->cxt, sizeof(int64) * Max(p->ndlq, 1));
	for (int i = 0; i < p->ndlq; i++)
		p->dlq[i] = qs_col_int64(i, 1, 0);
	SPI_freetuptable(SPI_tuptable);
	p->dlq_loaded = true;
}

static bool
is_dead(MsgPart *p, int64 off)
{
	load_dlq(p);
	for (int i = 0; i < p->ndlq && p->dlq[i] >= off; i++)
		if (p->dlq[i] == off)
			return true;
	return false;
}

static int64
dead_in(MsgPart *p, int64 lo, int64 hi)
{
	int64		n = 0;

	load_dlq(p);
	for (int i = 0; i < p->ndlq && p->dlq[i] >= lo; i++)
		n += p->dlq[i] <= hi;
	return n;
}

static MsgStatus
classify(MsgPart *p, int64 off)
{
	if (off <= p->floor)
		return is_dead(p, off) ? ST_DEAD : ST_COMPLETED;
	return off <= p->lease_end ? ST_PROCESSING : ST_PENDING;
}

/* Highest offset <= pos the filter can match, or -1. */
static int64
next_match(MsgScan *s, MsgPart *p, int64 pos)
{
	int64		top = Min(pos, p->hi);

	if (top < p->lo)
		return -1;
	if (s->status == ST_DEAD)
	{
		load_dlq(p);
		for (int i = 0; i < p->ndlq; i++)
			if (p->dlq[i] <= top)
				return p->dlq[i] >= p->lo ? p->dlq[i] : -1;
		return -1;
	}
	if (s->status == ST_COMPLETED)
		while (top >= p->lo && is_dead(p, top))
			top--;
	return top >= p->lo ? top : -1;
}

/* How many offsets of [lo, hi] match the filter. */
static int64
count_match(MsgScan *s, MsgPart *p, int64 lo, int64 hi)
{
	lo = Max(lo, p->lo);
	hi = Min(hi, p->hi);
	if (hi < lo)
		return 0;
	if (s->status == ST_DEAD)
		return dead_in(p, lo, hi);
	if (s->status == ST_COMPLETED)
		return hi - lo + 1 - dead_in(p, lo, hi);
	return hi - lo + 1;
}

/* ---- the partitions in scope ---- */

static void
read_bus(MsgPart *p, int r)
{
	bool		isnull;
	Datum		names = qs_col(r, 14, &isnull);
	Datum	   *nv,
			   *cv;
	int			n;

	p->nbus = 0;
	if (isnull)
		return;
	deconstruct_array(DatumGetArrayTypeP(names), TEXTOID, -1, false, TYPALIGN_INT,
					  &nv, NULL, &n);
	deconstruct_array(DatumGetArrayTypeP(qs_col(r, 15, &isnull)), INT8OID, 8,
					  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &cv, NULL, &n);
	p->nbus = n;
	p->bus_names = palloc(sizeof(char *) * n);
	p->bus_committed = palloc(sizeof(int64) * n);
	for (int i = 0; i < n; i++)
	{
		p->bus_names[i] = TextDatumGetCString(nv[i]);
		p->bus_committed[i] = DatumGetInt64(cv[i]);
	}
}

/* The filter's offset range in a partition. */
static void
set_range(MsgScan *s, MsgPart *p)
{
	switch (s->status)
	{
		case ST_PENDING:
			p->lo = p->lease_end + 1;
			p->hi = p->last;
			break;
		case ST_PROCESSING:
			p->lo = p->floor + 1;
			p->hi = p->lease_end;
			break;
		case ST_COMPLETED:
		case ST_DEAD:
			p->lo = p->log_start;
			p->hi = p->floor;
			break;
		default:
			p->lo = p->log_start;
			p->hi = p->last;
	}
	p->pos = p->hi;
	p->done = p->hi < p->lo;
}

static void
read_part(MsgScan *s, int r, MsgPart *p)
{
	TupleDesc	td = SPI_tuptable->tupdesc;
	HeapTuple	tup = SPI_tuptable->vals[r];
	bool		isnull;
	int64		committed;
	bool		leased;

	memset(p, 0, sizeof(*p));
	p->cxt = CurrentMemoryContext;
	p->pid = *DatumGetUUIDP(qs_col(r, 1, &isnull));
	p->pname = SPI_getvalue(tup, td, 2);
	p->queue = SPI_getvalue(tup, td, 3);
	p->ns = SPI_getvalue(tup, td, 4);
	p->task = SPI_getvalue(tup, td, 5);
	p->priority = DatumGetInt32(qs_col(r, 6, &isnull));
	p->log_start = qs_col_int64(r, 7, 0);
	p->last = qs_col_int64(r, 8, -1);
	committed = qs_col_int64(r, 9, -1);
	p->floor = Min(Max(committed, p->log_start - 1), p->last);
	leased = qs_col_bool(r, 11, false);
	p->lease_end = leased ? Max(Min(qs_col_int64(r, 10, p->floor), p->last), p->floor) : p->floor;
	p->lease_expires = leased ? DatumGetTimestampTz(qs_col(r, 12, &isnull)) : 0;
	p->has_qm = qs_col_bool(r, 13, false);
	read_bus(p, r);
	set_range(s, p);
}

/* Load the partitions into s->parts (allocated in the caller's context). */
static void
load_scope(MsgScan *s, const pg_uuid_t *tenant, const char *queue, const char *partition,
		   const char *ns, const char *task, MemoryContext outer)
{
	Datum		args[6];
	char		nulls[6];
	const char *v[4] = {queue, partition, ns, task};
	MemoryContext old;

	args[0] = qs_uuid_datum(tenant);
	nulls[0] = ' ';
	for (int i = 0; i < 4; i++)
	{
		args[i + 1] = v[i] ? CStringGetTextDatum(v[i]) : (Datum) 0;
		nulls[i + 1] = v[i] ? ' ' : 'n';
	}
	args[5] = TimestampTzGetDatum(s->from);
	nulls[5] = s->ranged ? ' ' : 'n';
	qs_exec(&scope_plan, args, nulls, 0);

	old = MemoryContextSwitchTo(outer);
	s->nparts = (int) SPI_processed;
	s->parts = palloc0(sizeof(MsgPart) * Max(s->nparts, 1));
	for (int r = 0; r < s->nparts; r++)
	{
		CHECK_FOR_INTERRUPTS();
		read_part(s, r, &s->parts[r]);
	}
	MemoryContextSwitchTo(old);
	SPI_freetuptable(SPI_tuptable);
}

/*
 * Move a partition's head to the segment holding its next matching offset,
 * skipping segments newer than `to`; done once none is left or the segment
 * is older than `from` (segments are appended in time order).
 */
static void
advance_head(MsgScan *s, MsgPart *p)
{
	while (!p->done)
	{
		int64		target = next_match(s, p, p->pos);

		CHECK_FOR_INTERRUPTS();
		if (target < 0)
		{
			p->done = true;
			return;
		}
		if (!qs_segment_at(qs_uuid_datum(&p->pid), target, &p->h_base, &p->h_end, &p->h_created))
		{
			p->done = true;
			return;
		}
		SPI_freetuptable(SPI_tuptable);
		if (p->h_end < target)	/* a hole: go on below it */
			p->pos = p->h_end;
		else if (s->ranged && p->h_created < s->from)
			p->done = true;
		else if (s->ranged && p->h_created > s->to)
			p->pos = p->h_base - 1;
		else
		{
			p->pos = target;
			return;
		}
	}
}

/* The partition whose head is newest (ties: partition id, descending). */
static MsgPart *
pick(MsgScan *s)
{
	MsgPart    *best = NULL;

	for (int i = 0; i < s->nparts; i++)
	{
		MsgPart    *p = &s->parts[i];

		if (p->done)
			continue;
		if (best == NULL || p->h_created > best->h_created ||
			(p->h_created == best->h_created && memcmp(p->pid.data, best->pid.data, UUID_LEN) > 0))
			best = p;
	}
	return best;
}

static void
write_message(MsgScan *s, QsJson *j, MsgPart *p, const QsFrame *f, int64 off, MsgStatus st)
{
	pg_uuid_t	id;

	memcpy(id.data, f->id, UUID_LEN);
	qsj_object(j, NULL);
	qsj_uuid(j, "id", &id);
	qsj_strn(j, "transactionId", f->txn, f->txn_len);
	qsj_uuid(j, "partitionId", &p->pid);
	qsj_str(j, "queuePath", psprintf("%s/%s", p->queue, p->pname));
	qsj_str(j, "queue", p->queue);
	qsj_str(j, "partition", p->pname);
	if (s->rich)
	{
		int			consumed = 0;

		for (int i = 0; i < p->nbus; i++)
			consumed += p->bus_committed[i] >= off;
		qsj_str(j, "namespace", p->ns);
		qsj_str(j, "task", p->task);
		qsj_str(j, "status", status_names[st]);
		qsj_str(j, "queueStatus", status_names[st]);
		qsj_object(j, "busStatus");
		qsj_int(j, "consumedBy", consumed);
		qsj_int(j, "totalGroups", p->nbus);
		qsj_end_object(j);
		qsj_uuid_bytes(j, "traceId", f->trace);
		if (f->psub)
			qsj_strn(j, "producerSub", f->psub, f->psub_len);
		else
			qsj_null(j, "producerSub");
		qsj_int(j, "queuePriority", p->priority);
	}
	else
		qsj_str(j, "status", status_names[st]);
	qsj_time_ms(j, "createdAt", p->h_created);
	if (s->rich)
		qsj_time_ms_or_null(j, "leaseExpiresAt", st == ST_PROCESSING, p->lease_expires);
	qsj_end_object(j);
}

/* Emit the head segment's matching messages, newest first, after the skip. */
static void
emit_head(MsgScan *s, QsJson *j, MsgPart *p)
{
	int64		lo = Max(p->h_base, p->lo);
	int64		top = p->pos;
	int64		n = count_match(s, p, lo, top);

	p->pos = lo - 1;
	if (n <= s->skip)
	{
		s->skip -= n;			/* never fetched */
		return;
	}
	{
		MemoryContext old = MemoryContextSwitchTo(s->segcxt);
		Datum		args[2];
		bool		isnull;
		QsFrame    *frames;
		SPITupleTable *tt;

		load_dlq(p);			/* before the blob's query: classify needs it */
		args[0] = qs_uuid_datum(&p->pid);
		args[1] = Int64GetDatum(p->h_base);
		qs_exec(&blob_plan, args, NULL, 1);
		tt = SPI_tuptable;
		if (SPI_processed == 1)
		{
			frames = qs_segment_decode(DatumGetByteaPP(qs_col(0, 1, &isnull)),
									   p->h_end - p->h_base + 1, &p->pid, p->h_base);
			for (int64 off = top; off >= lo && s->emitted < s->lim; off--)
			{
				MsgStatus	st = classify(p, off);

				CHECK_FOR_INTERRUPTS();
				if (s->status != ST_ANY && st != s->status)
					continue;
				if (s->skip > 0)
				{
					s->skip--;
					continue;
				}
				write_message(s, j, p, &frames[off - p->h_base], off, st);
				s->emitted++;
			}
		}
		SPI_freetuptable(tt);
		MemoryContextSwitchTo(old);
		MemoryContextReset(s->segcxt);
	}
}

/* Merge the partitions newest first into the current JSON array. */
static void
scan(MsgScan *s, QsJson *j)
{
	MsgPart    *p;

	s->segcxt = AllocSetContextCreate(CurrentMemoryContext, "queen message listing",
									  ALLOCSET_DEFAULT_SIZES);
	for (int i = 0; i < s->nparts; i++)
		advance_head(s, &s->parts[i]);
	while (s->emitted < s->lim && (p = pick(s)) != NULL)
	{
		CHECK_FOR_INTERRUPTS();
		emit_head(s, j, p);
		advance_head(s, p);
	}
	MemoryContextDelete(s->segcxt);
}

/* SQL: queen.queue_messages(queue, lim, off, tenant) -> GET /api/v1/status/queues/:queue/messages */
PG_FUNCTION_INFO_V1(qs_queue_messages);
Datum
qs_queue_messages(PG_FUNCTION_ARGS)
{
	char	   *queue = qsr_queue_arg(fcinfo, 0);
	MsgScan		s;
	pg_uuid_t	tenant;
	QsJson		j;
	MemoryContext outer = CurrentMemoryContext;

	memset(&s, 0, sizeof(s));
	s.status = ST_ANY;
	qs_page_args(fcinfo, 1, 2, 50, &s.lim, &s.skip);
	qs_tenant_arg(fcinfo, 3, &tenant);

	qsj_init(&j);
	qs_spi_connect();
	(void) qs_queue_id(&tenant, queue);
	load_scope(&s, &tenant, queue, NULL, NULL, NULL, outer);
	qsj_array(&j, NULL);
	scan(&s, &j);
	qsj_end_array(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

/* mode: whether the queue-mode group and which bus groups read the partitions in scope */
static void
write_mode(QsJson *j, MsgScan *s)
{
	bool		qm = false;
	int			groups = 0;

	for (int i = 0; i < s->nparts; i++)
	{
		MsgPart    *p = &s->parts[i];

		qm |= p->has_qm;
		for (int g = 0; g < p->nbus; g++)
		{
			bool		seen = false;

			for (int k = 0; k <= i && !seen; k++)
				for (int h = 0; h < (k < i ? s->parts[k].nbus : g) && !seen; h++)
					seen = strcmp(s->parts[k].bus_names[h], p->bus_names[g]) == 0;
			groups += !seen;
		}
	}
	qsj_object(j, "mode");
	qsj_bool(j, "hasQueueMode", qm);
	qsj_int(j, "busGroupsCount", groups);
	qsj_str(j, "type", groups == 0 ? "queue" : qm ? "hybrid" : "bus");
	qsj_end_object(j);
}

/*
 * SQL: queen.messages(queue, partition, namespace, task, status, from_time,
 * to_time, lim, off, tenant) -> GET /api/v1/messages
 */
PG_FUNCTION_INFO_V1(qs_messages);
Datum
qs_messages(PG_FUNCTION_ARGS)
{
	MsgScan		s;
	pg_uuid_t	tenant;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	QsJson		j;
	MemoryContext outer = CurrentMemoryContext;

	memset(&s, 0, sizeof(s));
	s.rich = true;
	s.ranged = true;
	s.status = parse_status(qs_text_arg(fcinfo, 4));
	/* Queen: to defaults to now rounded up to the end of the minute */
	s.to = PG_ARGISNULL(6) ? now - now % USECS_PER_MINUTE + USECS_PER_MINUTE : PG_GETARG_TIMESTAMPTZ(6);
	s.from = PG_ARGISNULL(5) ? now - USECS_PER_HOUR : PG_GETARG_TIMESTAMPTZ(5);
	if (TIMESTAMP_NOT_FINITE(s.from) || TIMESTAMP_NOT_FINITE(s.to))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("from and to must be finite timestamps")));
	if (s.from > s.to)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("from must not be later than to")));
	qs_page_args(fcinfo, 7, 8, 200, &s.lim, &s.skip);
	qs_tenant_arg(fcinfo, 9, &tenant);

	qsj_init(&j);
	qs_spi_connect();
	load_scope(&s, &tenant, qs_text_arg(fcinfo, 0), qs_text_arg(fcinfo, 1),
			   qs_text_arg(fcinfo, 2), qs_text_arg(fcinfo, 3), outer);
	qsj_object(&j, NULL);
	qsj_array(&j, "messages");
	scan(&s, &j);
	qsj_end_array(&j);
	write_mode(&j, &s);
	qsj_end_object(&j);
	qs_spi_finish();
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
