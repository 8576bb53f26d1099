/*
 * routes_queue.c: the queue routes of /api/v1 (push, pop, ack, lease
 * extension) and /health.
 *
 * Each route calls the SQL function of its name (queen.push_text and
 * queen.pop_text, the text entries of queen.push and queen.pop, whose
 * answers are written as they are; queen.ack, queen.renew_lease), so SQL
 * and HTTP answer the same bodies.
 *
 * A pop with wait=true that finds nothing waits (parked.c) and is retried.
 */
#include "http/dispatch/route.h"
#include "http/dispatch/cells.h"
#include "http/dispatch/metrics.h"
#include "common/ids.h"
#include "common/spi.h"
#include "storage/storage.h"

#include <microhttpd.h>

#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"

static QsPlan push_plan = {
	"SELECT queen.push_text($1, $2, $3)", 3, {TEXTOID, UUIDOID, TEXTOID}
};

static QsPlan push_many_plan = {
	"SELECT queen.push_text_many($1, $2, $3)", 3, {TEXTARRAYOID, UUIDOID, TEXTARRAYOID}
};

static QsPlan push_buffer_plan = {
	"SELECT queen.push_buffer($1, $2, $3)", 3, {JSONBOID, UUIDOID, TEXTOID}
};

static QsPlan pop_plan = {
	"SELECT queen.pop_text($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
	10, {TEXTOID, TEXTOID, TEXTOID, INT4OID, INT4OID, BOOLOID, UUIDOID, TEXTOID, TEXTOID, INT4OID}
};

static QsPlan ack_plan = {
	"SELECT queen.ack($1, $2)", 2, {JSONBOID, UUIDOID}
};

static QsPlan renew_plan = {
	"SELECT queen.renew_lease($1, $2, $3)", 3, {TEXTOID, INT4OID, UUIDOID}
};

/* Parsed request bodies kept on the request between steps. */
typedef struct QsBody
{
	Jsonb	   *request;
	Jsonb	   *response;
} QsBody;

static QsBody *
body_of(QsReq *req)
{
	return (QsBody *) req->state;
}

static bool
parse_json_body(QsReq *req)
{
	QsBody	   *b = palloc0(sizeof(QsBody));

	b->request = qs_http_body_jsonb(req);
	req->state = b;
	return true;
}

static void
respond_jsonb(QsReq *req, int status, Jsonb *jb)
{
	int			len;
	char	   *txt = qs_http_jsonb_text(jb, &len);

	req->status = status;
	req->resp = txt;
	req->resp_len = len;
}

/* ---------------------------------------------------------------- push */

/* The body stays text: queen.push_text reads it in one pass. */
static bool
push_parse(QsReq *req)
{
	qs_http_body_check(req);
	req->state = palloc0(sizeof(QsBody));
	return true;
}

static void
push_run(QsReq *req)
{
	QsBody	   *b = body_of(req);
	Datum		args[3];
	char		nulls[3] = "  n";
	MemoryContext cxt = CurrentMemoryContext;
	char	   *volatile txt = NULL;
	int			len = 0;

	args[1] = qs_uuid_datum(&req->tenant);
	if (req->sub)
	{
		args[2] = CStringGetTextDatum(req->sub);
		nulls[2] = ' ';
	}
	qs_spi_connect();
	/* push maintenance: hold the body for replay instead (maintenance.c) */
	if (qs_maintenance_on(false))
	{
		args[0] = JsonbPGetDatum(qs_http_body_jsonb(req));
		b->response = qs_http_call(&push_buffer_plan, args, nulls, req->ctx);
	}
	else
	{
		args[0] = PointerGetDatum(cstring_to_text_with_len(req->body.data, req->body.len));
		PG_TRY();
		{
			txt = qs_http_call_text(&push_plan, args, nulls, req->ctx, &len);
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			MemoryContextSwitchTo(cxt);
			edata = CopyErrorData();
			if (!qs_push_error_in_text(edata))
				PG_RE_THROW();
			/* the body is not JSON: the same answer as every JSON route's */
			qs_http_raise_bad_body(cxt);
		}
		PG_END_TRY();
	}
	qs_spi_finish();
	/* the router counts what it routed (cells.c): its answer read as jsonb */
	if (txt && qs_cells_is_router)
		b->response = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(txt)));
	qs_cells_pushed(req, b->response);
	if (txt)
	{
		req->status = 201;
		req->resp = txt;
		req->resp_len = len;
	}
	else
		respond_jsonb(req, 201, b->response);
}

/*
 * A group's pushes of one tenant as one push (queen.push_text_many): each
 * partition gets one segment and one allocator update for all of them, so
 * its row lock is taken once and late in the group. Declined where the
 * body is held for replay (push maintenance) and on a router, whose
 * counting reads each answer. Any error: the caller runs them one by one,
 * and each gets its own answer.
 */
static bool
push_run_many(QsReq **reqs, int n)
{
	Datum	   *bodies = palloc(sizeof(Datum) * n);
	Datum	   *subs = palloc(sizeof(Datum) * n);
	bool	   *sub_nulls = palloc(sizeof(bool) * n);
	bool		any_sub = false;
	int			dims[1] = {n};
	int			lbs[1] = {1};
	Datum		args[3];
	char		nulls[3] = "   ";
	Datum	   *elems;

	if (!qs_http_many_available("queen", "push_text_many", &push_many_plan))
		return false;
	qs_spi_connect();
	if (qs_maintenance_on(false))
	{
		qs_spi_finish();
		return false;
	}
	for (int k = 0; k < n; k++)
	{
		bodies[k] = PointerGetDatum(cstring_to_text_with_len(reqs[k]->body.data, reqs[k]->body.len));
		sub_nulls[k] = reqs[k]->sub == NULL;
		subs[k] = sub_nulls[k] ? (Datum) 0 : CStringGetTextDatum(reqs[k]->sub);
		any_sub |= !sub_nulls[k];
	}
	args[0] = PointerGetDatum(construct_array(bodies, n, TEXTOID, -1, false, TYPALIGN_INT));
	args[1] = qs_uuid_datum(&reqs[0]->tenant);
	if (any_sub)
		args[2] = PointerGetDatum(construct_md_array(subs, sub_nulls, 1, dims, lbs,
													 TEXTOID, -1, false, TYPALIGN_INT));
	else
		nulls[2] = 'n';
	elems = qs_http_call_many(&push_many_plan, args, nulls, JSONOID, n);
	for (int k = 0; k < n; k++)
	{
		reqs[k]->status = 201;
		reqs[k]->resp = qs_http_text_copy(DatumGetTextPP(elems[k]), reqs[k]->ctx, &reqs[k]->resp_len);
	}
	qs_spi_finish();
	return true;
}

/* Pushed messages are counted and their queues woken at commit (shmem.c). */
const QsRouteDef qs_route_push = {push_parse, push_run, NULL, "push failed", true, true, push_run_many};

/* ---------------------------------------------------------------- pop */

static const char *
arg(QsReq *req, const char *key)
{
	return qs_http_query_value(req, key);
}

static int
int_arg(QsReq *req, const char *key, int dflt, int min)
{
	const char *v = arg(req, key);
	char	   *end;
	long		n;

	if (v == NULL)
		return dflt;
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno != 0 || *end != '\0' || n < min || n > INT_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be an integer of at least %d", key, min),
				 errdetail("Got \"%s\".", v)));
	return (int) n;
}

/*
 * A long-poll's timeout (ms): as int_arg, but a whole number past INT_MAX
 * is taken as INT_MAX, since every wait is clamped to pop_max_wait anyway
 * (parked.c) and clients send large values to mean "as long as you can".
 */
static int
timeout_arg(QsReq *req)
{
	const char *v = arg(req, "timeout");
	const char *d = v;

	if (v == NULL)
		return 30000;
	if (*d == '+')
		d++;
	if (*d >= '0' && *d <= '9' && strspn(d, "0123456789") == strlen(d) &&
		(strlen(d) > 10 || strtoll(d, NULL, 10) > INT_MAX))
		return INT_MAX;
	return int_arg(req, "timeout", 30000, 0);
}

static bool
bool_arg(QsReq *req, const char *key)
{
	const char *v = arg(req, key);

	return v && (pg_strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

static bool
pop_parse(QsReq *req)
{
	QsPop	   *p = palloc0(sizeof(QsPop));
	char	   *rest = req->url + strlen("/api/v1/pop/queue/");
	char	   *slash = strchr(rest, '/');
	const char *v;

	if (slash == NULL)
		p->queue = pstrdup(rest);
	else
	{
		p->queue = pnstrdup(rest, slash - rest);
		if (strncmp(slash, "/partition/", 11) != 0 || slash[11] == '\0' ||
			strchr(slash + 11, '/') != NULL)
		{
			qs_http_error(req, 404, "not found");
			return false;
		}
		p->partition = pstrdup(slash + 11);
	}
	p->batch = int_arg(req, "batch", 200, 1);
	p->partitions = int_arg(req, "partitions", 1, 1);
	p->lease_seconds = int_arg(req, "leaseSeconds", 0, 1);
	p->timeout_ms = timeout_arg(req);
	p->wait = bool_arg(req, "wait");
	p->auto_ack = bool_arg(req, "autoAck");
	v = arg(req, "consumerGroup");
	p->group = v ? pstrdup(v) : NULL;
	v = arg(req, "subscriptionMode");
	p->sub_mode = v ? pstrdup(v) : NULL;
	v = arg(req, "subscriptionFrom");
	p->sub_from = v ? pstrdup(v) : NULL;

	if (p->wait)
		qs_park_arm(req, &p->park, p->queue, p->timeout_ms);
	req->pop = p;
	return true;
}

/* Past the next ',' (true) or the closing character (false) of a container. */
static bool
scan_more(QsScan *s, char close, bool *ok)
{
	bool		more;

	qs_scan_ws(s);
	*ok = s->p < s->end && (*s->p == ',' || *s->p == close);
	if (!*ok)
		return false;
	more = *s->p++ == ',';
	qs_scan_ws(s);
	return more;
}

/*
 * Count the messages of queen.pop_text's answer and note the partition of
 * each (for the acks' metrics), reading the text with json_scan.c's
 * scanner; -1 if it does not read as that answer.
 */
static int
read_pop_answer(QsReq *req, const char *txt, int len)
{
	QsScan		s = {txt, txt + len, true};
	const char *key;
	int			klen;
	bool		escaped;
	bool		ok = true;
	int			n = 0;
	pg_uuid_t	pid,
				last;
	bool		have_last = false;

	qs_scan_ws(&s);
	if (s.p >= s.end || *s.p++ != '{')
		return -1;
	qs_scan_ws(&s);
	do
	{
		if (!qs_scan_key(&s, &key, &klen, &escaped))
			return -1;
		if (klen != 8 || memcmp(key, "messages", 8) != 0)
		{
			if (!qs_scan_skip(&s))
				return -1;
			continue;
		}
		if (s.p >= s.end || *s.p++ != '[')
			return -1;
		qs_scan_ws(&s);
		if (s.p < s.end && *s.p == ']')
		{
			s.p++;
			continue;
		}
		do
		{
			if (s.p >= s.end || *s.p++ != '{')
				return -1;
			qs_scan_ws(&s);
			do
			{
				const char *v;

				if (!qs_scan_key(&s, &key, &klen, &escaped))
					return -1;
				v = s.p;
				if (!qs_scan_skip(&s))
					return -1;
				if (klen == 11 && memcmp(key, "partitionId", 11) == 0 &&
					s.p - v == QS_UUID_STRLEN + 2 && qs_uuid_parse(v + 1, QS_UUID_STRLEN, &pid) &&
					!(have_last && memcmp(&pid, &last, sizeof(pid)) == 0))
				{
					last = pid;
					have_last = true;
					qs_pop_note_partition(req, &pid);
				}
			} while (scan_more(&s, '}', &ok));
			if (!ok)
				return -1;
			n++;
		} while (scan_more(&s, ']', &ok));
		if (!ok)
			return -1;
	} while (scan_more(&s, '}', &ok));
	return ok ? n : -1;
}

/* The same through jsonb, for an answer the scanner gives up on (payloads nested past its depth). */
static int
read_pop_answer_jsonb(QsReq *req, const char *txt)
{
	Jsonb	   *jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(txt)));
	JsonbValue	v;
	JsonbContainer *msgs;
	int			n;

	if (!JB_ROOT_IS_OBJECT(jb) ||
		getKeyJsonValueFromContainer(&jb->root, "messages", 8, &v) == NULL ||
		(msgs = qs_json_container(&v)) == NULL || !JsonContainerIsArray(msgs))
		return 0;
	n = JsonContainerSize(msgs);
	for (int i = 0; i < n; i++)
	{
		JsonbContainer *m = qs_json_container(getIthJsonbValueFromContainer(msgs, i));
		pg_uuid_t	pid;

		if (m != NULL && qs_json_uuid(m, "partitionId", "message", false, &pid))
			qs_pop_note_partition(req, &pid);
	}
	return n;
}

static void
pop_run(QsReq *req)
{
	QsPop	   *p = req->pop;
	Datum		args[10];
	char		nulls[10];
	char	   *txt;
	int			len;
	int			n;

	/* its client is gone: a pop would lease (autoAck: consume) for no one */
	if (qs_park_client_gone(req))
		return;
	if (qs_maintenance_on(true))
	{
		/* pop maintenance: empty at once, parked pops included */
		req->status = 204;
		req->resp = pstrdup("");
		req->resp_len = 0;
		return;
	}
	memset(nulls, ' ', sizeof(nulls));
	args[0] = CStringGetTextDatum(p->queue);
	args[1] = p->partition ? CStringGetTextDatum(p->partition) : (Datum) 0;
	nulls[1] = p->partition ? ' ' : 'n';
	args[2] = p->group ? CStringGetTextDatum(p->group) : (Datum) 0;
	nulls[2] = p->group ? ' ' : 'n';
	args[3] = Int32GetDatum(p->batch);
	args[4] = Int32GetDatum(p->lease_seconds);
	nulls[4] = p->lease_seconds > 0 ? ' ' : 'n';
	args[5] = BoolGetDatum(p->auto_ack);
	args[6] = qs_uuid_datum(&req->tenant);
	args[7] = p->sub_mode ? CStringGetTextDatum(p->sub_mode) : (Datum) 0;
	nulls[7] = p->sub_mode ? ' ' : 'n';
	args[8] = p->sub_from ? CStringGetTextDatum(p->sub_from) : (Datum) 0;
	nulls[8] = p->sub_from ? ' ' : 'n';
	args[9] = Int32GetDatum(p->partitions);

	qs_spi_connect();
	txt = qs_http_call_text(&pop_plan, args, nulls, req->ctx, &len);
	qs_spi_finish();

	n = read_pop_answer(req, txt, len);
	if (n < 0)
		n = read_pop_answer_jsonb(req, txt);
	if (n > 0)
	{
		req->status = 200;
		req->resp = txt;
		req->resp_len = len;
		qs_stat_add(&req->tenant, p->queue, QS_STAT_POPPED, n);
	}
	else if (!qs_park_wait(req))
	{
		req->status = 204;
		req->resp = pstrdup("");
		req->resp_len = 0;
	}
}

const QsRouteDef qs_route_pop = {pop_parse, pop_run, NULL, "pop failed", true, true};

/* ---------------------------------------------------------------- ack */

static bool
ack_batch_parse(QsReq *req)
{
	JsonbValue	v;
	Jsonb	   *jb;

	parse_json_body(req);
	jb = body_of(req)->request;
	if (!JB_ROOT_IS_OBJECT(jb) ||
		getKeyJsonValueFromContainer(&jb->root, "acknowledgments", 15, &v) == NULL ||
		v.type != jbvBinary || !JsonContainerIsArray(v.val.binary.data))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("acknowledgments array is required")));
	return true;
}

/* The acknowledgments of a request: the batch's array, or the body itself. */
static int
ack_items(Jsonb *request, JsonbContainer ***items)
{
	JsonbValue	v;

	if (JB_ROOT_IS_OBJECT(request) &&
		getKeyJsonValueFromContainer(&request->root, "acknowledgments", 15, &v) != NULL &&
		v.type == jbvBinary && JsonContainerIsArray(v.val.binary.data))
	{
		JsonbContainer *arr = v.val.binary.data;
		int			n = JsonContainerSize(arr);

		*items = palloc0(sizeof(JsonbContainer *) * Max(n, 1));
		for (int i = 0; i < n; i++)
			(*items)[i] = qs_json_container(getIthJsonbValueFromContainer(arr, i));
		return n;
	}
	*items = palloc(sizeof(JsonbContainer *));
	(*items)[0] = JB_ROOT_IS_OBJECT(request) ? &request->root : NULL;
	return 1;
}

static void
ack_run(QsReq *req)
{
	QsBody	   *b = body_of(req);
	Datum		args[2];
	JsonbContainer **items;
	int			n;

	args[0] = JsonbPGetDatum(b->request);
	args[1] = qs_uuid_datum(&req->tenant);
	qs_spi_connect();
	b->response = qs_http_call(&ack_plan, args, NULL, req->ctx);

	/* learn the queues of partitions not seen in a pop, for the counters */
	n = ack_items(b->request, &items);
	for (int i = 0; i < n; i++)
	{
		pg_uuid_t	pid;
		char	   *queue;

		CHECK_FOR_INTERRUPTS();
		if (items[i] == NULL ||
			!qs_json_uuid(items[i], "partitionId", "ack", false, &pid) ||
			qs_partition_stat(&pid, &req->tenant) != NULL)
			continue;
		queue = qs_cells_partition_queue(&req->tenant, &pid);
		if (queue)
			qs_partition_stat_remember(&pid, &req->tenant, queue);
	}
	qs_spi_finish();
	respond_jsonb(req, 200, b->response);
}

/* After commit: attribute the acks to their queues' counters. */
static void
ack_after(QsReq *req)
{
	QsBody	   *b = body_of(req);
	JsonbContainer **items;
	int			n = ack_items(b->request, &items);

	if (!JB_ROOT_IS_ARRAY(b->response))
		return;
	for (int i = 0; i < n && i < (int) JsonContainerSize(&b->response->root); i++)
	{
		JsonbContainer *res = qs_json_container(getIthJsonbValueFromContainer(&b->response->root, i));
		JsonbValue	v;
		pg_uuid_t	pid;
		QsQueueStat *st;
		char	   *status;

		if (items[i] == NULL || res == NULL ||
			getKeyJsonValueFromContainer(res, "success", 7, &v) == NULL ||
			v.type != jbvBool || !v.val.boolean)
			continue;
		if (!qs_json_uuid(items[i], "partitionId", "ack", false, &pid) ||
			(st = qs_partition_stat(&pid, &req->tenant)) == NULL)
			continue;
		status = qs_json_string(items[i], "status", "ack", false);
		qs_stat_count(st, qs_ack_status(status, status ? strlen(status) : 0) == QS_ACK_COMPLETED
					  ? QS_STAT_ACKED : QS_STAT_NACKED, 1);
	}
}

const QsRouteDef qs_route_ack = {parse_json_body, ack_run, ack_after, "ack failed", true, true};
const QsRouteDef qs_route_ack_batch = {ack_batch_parse, ack_run, ack_after, "ack failed", true, true};

/* ---------------------------------------------------------------- lease */

static bool
lease_parse(QsReq *req)
{
	QsBody	   *b = palloc0(sizeof(QsBody));

	/* the body is optional: {"seconds": N}, 60 by default */
	if (req->body.len > 0)
		b->request = qs_http_body_jsonb(req);
	req->state = b;
	return true;
}

static void
lease_run(QsReq *req)
{
	QsBody	   *b = body_of(req);
	Datum		args[3];
	int64		seconds = 60;

	if (b->request)
		seconds = qs_json_int(qs_json_object_arg(b->request, "lease request"),
							  "seconds", "lease request", 60);
	if (seconds < 1 || seconds > INT_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("seconds must be a positive integer"),
				 errdetail("Got " INT64_FORMAT ".", seconds)));
	args[0] = CStringGetTextDatum(req->arg);
	args[1] = Int32GetDatum((int32) seconds);
	args[2] = qs_uuid_datum(&req->tenant);
	qs_spi_connect();
	b->response = qs_http_call(&renew_plan, args, NULL, req->ctx);
	qs_spi_finish();
	respond_jsonb(req, 200, b->response);
}

const QsRouteDef qs_route_lease_extend = {lease_parse, lease_run, NULL, "lease extension failed", true, true};

/* ---------------------------------------------------------------- health */

/*
 * "healthy" on the primary, "standby" on a hot standby (200 both: a standby
 * serves reads), with the primary it streams from when it is streaming.
 */
static void
health_run(QsReq *req)
{
	QsJson		j;
	bool		installed = qs_extension_installed();
	bool		standby = qs_role_standby();
	char	   *primary = standby ? qs_role_primary_address() : NULL;

	qsj_init(&j);
	qsj_object(&j, NULL);
	qsj_str(&j, "status", !installed ? "unavailable" : standby ? "standby" : "healthy");
	qsj_str(&j, "role", standby ? "standby" : "primary");
	if (primary)
		qsj_str(&j, "primary", primary);
	qsj_str(&j, "database", get_database_name(MyDatabaseId));
	qsj_bool(&j, "extension", installed);
	qsj_str(&j, "version", QS_VERSION);
	qsj_int(&j, "worker", qs_http_worker_index);
	qsj_int(&j, "connections", qs_open_connections());
	if (!installed)
		qsj_str(&j, "error", "queen_streams is not installed in this database");
	qsj_end_object(&j);
	qs_http_json(req, installed ? 200 : 503, j.buf.data, j.buf.len);
}

const QsRouteDef qs_route_health = {NULL, health_run, NULL, "health check failed", false, true};
