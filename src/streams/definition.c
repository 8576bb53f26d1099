/*
 * definition.c: a declared stream's definition (a jsonb object), read into
 * a QsStreamDef with every default filled in, normalized back to jsonb, and
 * hashed.
 *
 * Every problem is 22023 naming the field, and unknown fields are refused
 * (a typo must not silently mean the default). The hash covers only what
 * shapes the accumulators (filter, key, window, time, aggregates): changing
 * it is the registration's 409/reset story; changing the source, sink or a
 * run option (batch, lease, partitions, idle_flush) keeps the open windows.
 */
#include "streams/streams.h"
#include "common/args.h"
#include "common/spi.h"
#include "common/text.h"

#include "common/cryptohash.h"
#include "common/sha2.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonpath.h"

static void
bad(const char *field, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid stream definition field \"%s\"", field),
			 errdetail("%s", detail)));
}

static void
check_keys(JsonbContainer *obj, const char *prefix, const char *const *allowed)
{
	JsonbIterator *it = JsonbIteratorInit(obj);
	JsonbValue	v;
	JsonbIteratorToken t;
	int			depth = 0;

	while ((t = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		CHECK_FOR_INTERRUPTS();
		if (t == WJB_BEGIN_OBJECT)
			depth++;
		else if (t == WJB_END_OBJECT)
			depth--;
		else if (t == WJB_KEY && depth == 1)
		{
			char	   *k = pnstrdup(v.val.string.val, v.val.string.len);
			bool		ok = false;

			for (int i = 0; allowed[i] && !ok; i++)
				ok = strcmp(allowed[i], k) == 0;
			if (!ok)
				bad(psprintf("%s%s", prefix, k), "The field is not part of a stream definition.");
		}
	}
}

static char *
get_string(JsonbContainer *obj, const char *key, const char *field, bool required)
{
	JsonbValue	v;

	if (!qs_json_get(obj, key, &v) || v.type == jbvNull)
	{
		if (required)
			bad(field, "The field is required.");
		return NULL;
	}
	if (v.type != jbvString || v.val.string.len == 0)
		bad(field, "Must be a non-empty string.");
	return pnstrdup(v.val.string.val, v.val.string.len);
}

/*
 * A whole number within [min, max] (of seconds when `seconds`); absent is
 * dflt (-1: required).
 */
static int
get_whole(JsonbContainer *obj, const char *key, const char *field, int dflt, int min, int max,
		  bool seconds)
{
	JsonbValue	v;
	char	   *s;
	char	   *end;
	long		n;

	if (!qs_json_get(obj, key, &v) || v.type == jbvNull)
	{
		if (dflt < 0)
			bad(field, "The field is required.");
		return dflt;
	}
	if (v.type != jbvNumeric)
		bad(field, seconds ? "Must be a whole number of seconds." : "Must be a whole number.");
	s = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
	n = strtol(s, &end, 10);
	if (*end != '\0' || n < min || n > max)
		bad(field, psprintf(seconds ? "Must be a whole number of seconds from %d to %d."
							: "Must be a whole number from %d to %d.", min, max));
	return (int) n;
}

#define get_seconds(obj, key, field, dflt, min, max) \
	get_whole((obj), (key), (field), (dflt), (min), (max), true)

static JsonbContainer *
get_object(JsonbContainer *obj, const char *key, const char *field, bool required)
{
	JsonbValue	v;

	if (!qs_json_get(obj, key, &v) || v.type == jbvNull)
	{
		if (required)
			bad(field, "The field is required.");
		return NULL;
	}
	if (v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
		bad(field, "Must be a JSON object.");
	return v.val.binary.data;
}

/* A queue name as push and pop accept it. */
static void
check_queue(const char *field, const char *name)
{
	const char *why = qs_text_problem(name, strlen(name), QS_NAME_MAX);

	if (why)
		bad(field, psprintf("Not a valid queue name: %s.", why));
}

typedef struct CompileArg
{
	const char *text;
	MemoryContext into;
	Datum		jp;
} CompileArg;

static bool
compile_work(void *arg)
{
	CompileArg *c = (CompileArg *) arg;
	MemoryContext old = MemoryContextSwitchTo(c->into);

	c->jp = DirectFunctionCall1(jsonpath_in, CStringGetDatum(c->text));
	MemoryContextSwitchTo(old);
	return true;
}

/* A jsonpath, compiled; its syntax error becomes 22023 naming the field. */
static Datum
compile_path(const char *field, const char *text)
{
	CompileArg	c = {text, CurrentMemoryContext, (Datum) 0};
	const char *error = qs_subxact_run_also(compile_work, &c, "a jsonpath of a stream definition",
											ERRCODE_FEATURE_NOT_SUPPORTED);

	if (error)
		bad(field, psprintf("Not a valid jsonpath: %s.", error));
	return c.jp;
}

static const char *const top_keys[] = {
	"source", "consumer_group", "subscription", "filter", "key", "window", "time",
	"aggregates", "sink", "batch", "lease", "partitions", "idle_flush", "reset", NULL
};
static const char *const window_keys[] = {"type", "size", "slide", "gap", "grace", NULL};
static const char *const time_keys[] = {"type", "path", "lateness", "late", "late_queue", NULL};
static const char *const agg_keys[] = {"fn", "path", NULL};

static const char *const agg_names[] = {
	"count", "sum", "min", "max", "avg", "first", "last", "count_distinct", NULL
};

static void
parse_window(JsonbContainer *obj, QsStreamDef *d)
{
	JsonbContainer *w = get_object(obj, "window", "window", true);
	char	   *type;

	check_keys(w, "window.", window_keys);
	type = get_string(w, "type", "window.type", true);
	d->grace_s = get_seconds(w, "grace", "window.grace", 0, 0, 86400 * 365);
	d->size_s = d->slide_s = d->gap_s = 0;
	if (strcmp(type, "tumbling") == 0)
	{
		d->wtype = QS_WIN_TUMBLING;
		d->size_s = get_seconds(w, "size", "window.size", -1, 1, 86400 * 365);
		d->slide_s = d->size_s;
		if (qs_json_get(w, "slide", &(JsonbValue) {0}) || qs_json_get(w, "gap", &(JsonbValue) {0}))
			bad("window", "A tumbling window takes size and grace only.");
		snprintf(d->tag, sizeof(d->tag), "tumb:%d", d->size_s);
	}
	else if (strcmp(type, "hopping") == 0 || strcmp(type, "sliding") == 0)
	{
		d->wtype = QS_WIN_HOPPING;
		d->size_s = get_seconds(w, "size", "window.size", -1, 1, 86400 * 365);
		d->slide_s = get_seconds(w, "slide", "window.slide", -1, 1, 86400 * 365);
		if (d->slide_s > d->size_s)
			bad("window.slide", "Must not be larger than window.size.");
		if (d->size_s / d->slide_s > 1000)
			bad("window.slide", "A window may overlap at most 1000 others (size / slide <= 1000).");
		if (qs_json_get(w, "gap", &(JsonbValue) {0}))
			bad("window.gap", "Only a session window has a gap.");
		snprintf(d->tag, sizeof(d->tag), "hop:%d:%d", d->size_s, d->slide_s);
	}
	else if (strcmp(type, "session") == 0)
	{
		d->wtype = QS_WIN_SESSION;
		d->gap_s = get_seconds(w, "gap", "window.gap", -1, 1, 86400 * 365);
		if (qs_json_get(w, "size", &(JsonbValue) {0}) || qs_json_get(w, "slide", &(JsonbValue) {0}))
			bad("window", "A session window takes gap and grace only.");
		snprintf(d->tag, sizeof(d->tag), "sess:%d", d->gap_s);
	}
	else
		bad("window.type", "Must be \"tumbling\", \"hopping\" (or \"sliding\") or \"session\".");
}

static void
parse_time(JsonbContainer *obj, QsStreamDef *d)
{
	JsonbContainer *t = get_object(obj, "time", "time", false);
	char	   *type;
	char	   *late;

	d->event_time = false;
	d->time_path = NULL;
	d->lateness_s = 0;
	d->late_queue = NULL;
	if (t == NULL)
		return;
	check_keys(t, "time.", time_keys);
	type = get_string(t, "type", "time.type", true);
	if (strcmp(type, "processing") == 0)
	{
		JsonbValue	v;

		if (qs_json_get(t, "path", &v) || qs_json_get(t, "lateness", &v) ||
			qs_json_get(t, "late", &v) || qs_json_get(t, "late_queue", &v))
			bad("time", "Processing time takes no path, lateness or late policy.");
		return;
	}
	if (strcmp(type, "event") != 0)
		bad("time.type", "Must be \"processing\" or \"event\".");
	d->event_time = true;
	d->time_path = get_string(t, "path", "time.path", true);
	d->time_jp = compile_path("time.path", d->time_path);
	d->lateness_s = get_seconds(t, "lateness", "time.lateness", 0, 0, 86400 * 365);
	late = get_string(t, "late", "time.late", false);
	if (late == NULL || strcmp(late, "drop") == 0)
	{
		if (qs_json_get(t, "late_queue", &(JsonbValue) {0}))
			bad("time.late_queue", "Only the \"queue\" late policy has a queue.");
	}
	else if (strcmp(late, "queue") == 0)
	{
		d->late_queue = get_string(t, "late_queue", "time.late_queue", true);
		check_queue("time.late_queue", d->late_queue);
	}
	else
		bad("time.late", "Must be \"drop\" or \"queue\".");
}

static void
parse_aggregates(JsonbContainer *obj, QsStreamDef *d)
{
	JsonbContainer *a = get_object(obj, "aggregates", "aggregates", true);
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken t;
	int			n = JsonContainerSize(a);
	int			i = 0;

	if (n == 0)
		bad("aggregates", "Name at least one aggregate.");
	d->aggs = palloc0(sizeof(QsAggDef) * n);
	it = JsonbIteratorInit(a);
	while ((t = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		QsAggDef   *g;
		JsonbValue	val;
		JsonbContainer *o;
		char	   *field;
		char	   *fn;
		int			k;

		if (t != WJB_KEY)
			continue;
		g = &d->aggs[i++];
		g->name = pnstrdup(v.val.string.val, v.val.string.len);
		field = psprintf("aggregates.%s", g->name);
		CHECK_FOR_INTERRUPTS();
		if (g->name[0] == '\0' || strlen(g->name) > 63)
			bad(field, "An aggregate's name is 1 to 63 bytes.");
		if (strcmp(g->name, "key") == 0 || strcmp(g->name, "windowStart") == 0 ||
			strcmp(g->name, "windowEnd") == 0)
			bad(field, "key, windowStart and windowEnd are the window's own fields.");
		t = JsonbIteratorNext(&it, &val, true);
		if (val.type != jbvBinary || !JsonContainerIsObject(val.val.binary.data))
			bad(field, "Must be a JSON object such as {\"fn\": \"sum\", \"path\": \"$.amount\"}.");
		o = val.val.binary.data;
		check_keys(o, psprintf("%s.", field), agg_keys);
		fn = get_string(o, "fn", psprintf("%s.fn", field), true);
		for (k = 0; agg_names[k] && strcmp(agg_names[k], fn) != 0; k++)
			;
		if (agg_names[k] == NULL)
			bad(psprintf("%s.fn", field),
				"Must be count, sum, min, max, avg, first, last or count_distinct.");
		g->fn = (QsAggFn) k;
		g->path = get_string(o, "path", psprintf("%s.path", field), false);
		if (g->fn == QS_AGG_COUNT && g->path)
			bad(psprintf("%s.path", field), "count counts events and takes no path.");
		if (g->fn != QS_AGG_COUNT && g->path == NULL)
			bad(psprintf("%s.path", field), "The field is required.");
		if (g->path)
			g->jp = compile_path(psprintf("%s.path", field), g->path);
	}
	d->naggs = i;
}

void
qs_def_parse(Jsonb *def, const char *name, QsStreamDef *d)
{
	JsonbContainer *obj;
	JsonbValue	v;

	memset(d, 0, sizeof(*d));
	if (def == NULL || !JB_ROOT_IS_OBJECT(def) || JB_ROOT_IS_SCALAR(def))
		bad("definition", "The definition must be a JSON object.");
	obj = &def->root;
	check_keys(obj, "", top_keys);

	d->source = get_string(obj, "source", "source", true);
	check_queue("source", d->source);
	d->sink = get_string(obj, "sink", "sink", true);
	check_queue("sink", d->sink);
	d->group = get_string(obj, "consumer_group", "consumer_group", false);
	if (d->group == NULL)
		d->group = psprintf("streams.%s", name);	/* what an SDK worker of the query uses */
	if (qs_text_problem(d->group, strlen(d->group), QS_NAME_MAX))
		bad("consumer_group", "Not a valid consumer group name (1 to 255 bytes of text).");
	if (strcmp(d->group, QS_QUEUE_MODE) == 0)
		bad("consumer_group", "A stream needs a consumer group of its own.");

	d->subscription = get_string(obj, "subscription", "subscription", false);
	if (d->subscription == NULL)
		d->subscription = "all";
	else if (strcmp(d->subscription, "all") != 0 && strcmp(d->subscription, "new") != 0)
	{
		/* a timestamp: checked as pop will read it */
		(void) qs_parse_timestamp(d->subscription, "subscription");
	}

	d->filter = get_string(obj, "filter", "filter", false);
	if (d->filter)
		d->filter_jp = compile_path("filter", d->filter);
	d->key = get_string(obj, "key", "key", false);
	if (d->key == NULL || strcmp(d->key, "partition") == 0)
	{
		d->key = "partition";
		d->key_partition = true;
	}
	else
		d->key_jp = compile_path("key", d->key);

	parse_window(obj, d);
	parse_time(obj, d);
	parse_aggregates(obj, d);

	d->batch = get_whole(obj, "batch", "batch", 200, 1, 10000, false);
	d->lease_s = get_seconds(obj, "lease", "lease", 30, 1, 3600);
	d->partitions = get_whole(obj, "partitions", "partitions", 4, 1, 1000, false);
	d->idle_flush_s = get_seconds(obj, "idle_flush", "idle_flush", 5, 0, 86400);
	d->reset = false;
	if (qs_json_get(obj, "reset", &v))
	{
		if (v.type != jbvBool)
			bad("reset", "Must be true or false.");
		d->reset = v.val.boolean;
	}
}

static const char *
win_type(QsWinType t)
{
	return t == QS_WIN_TUMBLING ? "tumbling" : t == QS_WIN_HOPPING ? "hopping" : "session";
}

/* The fields that shape the accumulators, as one JSON object. */
static void
fold_fields(QsJson *j, const QsStreamDef *d)
{
	qsj_str(j, "filter", d->filter);
	qsj_str(j, "key", d->key);
	qsj_object(j, "window");
	qsj_str(j, "type", win_type(d->wtype));
	if (d->wtype == QS_WIN_SESSION)
		qsj_int(j, "gap", d->gap_s);
	else
		qsj_int(j, "size", d->size_s);
	if (d->wtype == QS_WIN_HOPPING)
		qsj_int(j, "slide", d->slide_s);
	qsj_int(j, "grace", d->grace_s);
	qsj_end_object(j);
	qsj_object(j, "time");
	qsj_str(j, "type", d->event_time ? "event" : "processing");
	if (d->event_time)
	{
		qsj_str(j, "path", d->time_path);
		qsj_int(j, "lateness", d->lateness_s);
		qsj_str(j, "late", d->late_queue ? "queue" : "drop");
		if (d->late_queue)
			qsj_str(j, "late_queue", d->late_queue);
	}
	qsj_end_object(j);
	qsj_object(j, "aggregates");
	for (int i = 0; i < d->naggs; i++)
	{
		qsj_object(j, d->aggs[i].name);
		qsj_str(j, "fn", agg_names[d->aggs[i].fn]);
		if (d->aggs[i].path)
			qsj_str(j, "path", d->aggs[i].path);
		qsj_end_object(j);
	}
	qsj_end_object(j);
}

Jsonb *
qs_def_normalized(const QsStreamDef *d)
{
	QsJson		j;

	qsj_init(&j);
	qsj_object(&j, NULL);
	qsj_str(&j, "source", d->source);
	qsj_str(&j, "consumer_group", d->group);
	qsj_str(&j, "subscription", d->subscription);
	fold_fields(&j, d);
	qsj_str(&j, "sink", d->sink);
	qsj_int(&j, "batch", d->batch);
	qsj_int(&j, "lease", d->lease_s);
	qsj_int(&j, "partitions", d->partitions);
	qsj_int(&j, "idle_flush", d->idle_flush_s);
	qsj_end_object(&j);
	return qsj_jsonb(&j);
}

/* sha256 over the canonical text (jsonb's key order) of the fold fields. */
char *
qs_def_hash(const QsStreamDef *d)
{
	QsJson		j;
	char	   *text;
	pg_cryptohash_ctx *ctx;
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	char	   *hex = palloc(PG_SHA256_DIGEST_LENGTH * 2 + 1);

	qsj_init(&j);
	qsj_object(&j, NULL);
	fold_fields(&j, d);
	qsj_end_object(&j);
	text = JsonbToCString(NULL, &qsj_jsonb(&j)->root, 0);

	ctx = pg_cryptohash_create(PG_SHA256);
	if (ctx == NULL || pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) text, strlen(text)) < 0 ||
		pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not compute the definition's hash");
	pg_cryptohash_free(ctx);
	for (int i = 0; i < PG_SHA256_DIGEST_LENGTH; i++)
		snprintf(hex + 2 * i, 3, "%02x", digest[i]);
	return hex;
}
