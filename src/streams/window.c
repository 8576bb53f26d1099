/*
 * window.c: the fold of a declared stream. One partition's leased batch and
 * its state rows in; state ops, sink items and late items out, which the
 * runner commits as one cycle. The state and the sink messages have the
 * shape examples/window_counter.pl (an SDK-style worker) gives them, so the
 * two are interchangeable:
 *
 *   state key   <tag> U+001F <windowStart ISO> U+001F <key>   (tag: tumb:60, ...)
 *   state value {"acc": {<aggregate>: ...}, "windowStart": ms, "windowEnd": ms}
 *   "__wm__"    {"eventTimeMs": the highest event time accepted}
 *   sink        {"key", "windowStart", "windowEnd" (ISO, ms), <aggregate>: value}
 *
 * Windows are half-open, [windowStart, windowEnd): a session ends gap after
 * its last event, and an event exactly there starts the next session.
 *
 * A window closes once windowEnd + grace <= the watermark (at the end of a
 * batch), or by an idle flush. An event is late when its time is more than
 * `lateness` behind the watermark, or when every window it falls in has
 * already closed; late events are dropped or sent to the late queue, in the
 * same cycle.
 */
#include "streams/streams.h"

#include <math.h>
#include <time.h>

#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonpath.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#define US "\x1f"

typedef struct Acc
{
	int64		n;
	Numeric		num;			/* sum, min, max; avg's sum */
	bool		has_num;
	Jsonb	   *val;			/* first, last */
	int64		val_ts;
	List	   *distinct;		/* JSON texts, duplicates until written */
} Acc;

typedef struct Win
{
	char	   *skey;
	char	   *key;
	int64		start;
	int64		last;			/* session: the latest event time */
	bool		persisted;
	bool		touched;
	Acc		   *accs;
	struct Win *next;			/* hash chain */
	struct Win *next_key;		/* session: the key's other sessions */
} Win;

typedef struct Map
{
	Win		  **b;
	uint32		mask;
	Win		  **all;
	int			n,
				cap;
	Win		  **kb;				/* sessions by user key */
} Map;

static Jsonb *empty_vars = NULL;

static int64
floor_div(int64 a, int64 b)
{
	int64		q = a / b;

	if ((a % b != 0) && ((a < 0) != (b < 0)))
		q--;
	return q;
}

static void
iso(int64 ms, char *out)
{
	int64		secs = floor_div(ms, 1000);
	time_t		t = (time_t) secs;
	struct tm	tm;

	gmtime_r(&t, &tm);
	snprintf(out, 32, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
			 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int) (ms - secs * 1000));
}

/* days since 1970-01-01 of a proleptic Gregorian date */
static int64
days_from_civil(int y, int m, int d)
{
	int			era;
	unsigned	yoe,
				doy,
				doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = (unsigned) (y - era * 400);
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return (int64) era * 146097 + (int64) doe - 719468;
}

/*
 * YYYY-MM-DDTHH:MM:SS[.fff...][Z|+HH:MM|-HH:MM] to epoch ms (fractions
 * truncated to the millisecond, as the example worker reads createdAt).
 */
static bool
parse_iso_ms(const char *s, int len, int64 *out)
{
	int			y,
				mo,
				d,
				h,
				mi,
				se,
				ms = 0,
				digits = 0,
				pos = 19;
	char		buf[64];

	if (len < 19 || len >= (int) sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (sscanf(buf, "%4d-%2d-%2d%*1[T ]%2d:%2d:%2d", &y, &mo, &d, &h, &mi, &se) != 6 ||
		buf[4] != '-' || buf[7] != '-' || buf[13] != ':' || buf[16] != ':')
		return false;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
		return false;
	if (buf[pos] == '.')
	{
		pos++;
		while (buf[pos] >= '0' && buf[pos] <= '9')
		{
			if (digits < 3)
				ms = ms * 10 + (buf[pos] - '0');
			digits++;
			pos++;
		}
		if (digits == 0)
			return false;
		for (; digits < 3; digits++)
			ms *= 10;
	}
	*out = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60000 + (int64) se * 1000 + ms;
	if (buf[pos] == 'Z' && buf[pos + 1] == '\0')
		return true;
	if (buf[pos] == '\0')
		return true;
	if ((buf[pos] == '+' || buf[pos] == '-') && isdigit((unsigned char) buf[pos + 1]) &&
		isdigit((unsigned char) buf[pos + 2]) && buf[pos + 3] == ':' &&
		isdigit((unsigned char) buf[pos + 4]) && isdigit((unsigned char) buf[pos + 5]) &&
		buf[pos + 6] == '\0')
	{
		int64		off = ((buf[pos + 1] - '0') * 10 + (buf[pos + 2] - '0')) * 60 +
			(buf[pos + 4] - '0') * 10 + (buf[pos + 5] - '0');

		*out -= (buf[pos] == '+' ? 1 : -1) * off * 60000;
		return true;
	}
	return false;
}

/* The first item of a jsonpath over a document (lax, errors silenced). */
static bool
path_first(Datum jp, Jsonb *doc, JsonbValue *out)
{
	LOCAL_FCINFO(fcinfo, 4);
	Datum		r;
	Jsonb	   *res;

	if (empty_vars == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		empty_vars = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum("{}")));
		MemoryContextSwitchTo(old);
	}
	InitFunctionCallInfoData(*fcinfo, NULL, 4, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = JsonbPGetDatum(doc);
	fcinfo->args[0].isnull = false;
	fcinfo->args[1].value = jp;
	fcinfo->args[1].isnull = false;
	fcinfo->args[2].value = JsonbPGetDatum(empty_vars);
	fcinfo->args[2].isnull = false;
	fcinfo->args[3].value = BoolGetDatum(true);
	fcinfo->args[3].isnull = false;
	r = jsonb_path_query_first(fcinfo);
	if (fcinfo->isnull)
		return false;
	res = DatumGetJsonbP(r);
	if (JB_ROOT_IS_SCALAR(res))
		return JsonbExtractScalar(&res->root, out);
	out->type = jbvBinary;
	out->val.binary.data = &res->root;
	out->val.binary.len = VARSIZE(res) - VARHDRSZ;
	return true;
}

static Jsonb *
value_jsonb(JsonbValue *v)
{
	return JsonbValueToJsonb(v);
}

static char *
value_text(JsonbValue *v)
{
	Jsonb	   *jb = value_jsonb(v);

	return JsonbToCString(NULL, &jb->root, VARSIZE(jb));
}

/* the filter passes on true, or on any item that is not a boolean or null */
static bool
passes(const QsStreamDef *d, Jsonb *doc)
{
	JsonbValue	v;

	if (!d->filter)
		return true;
	if (doc == NULL || !path_first(d->filter_jp, doc, &v))
		return false;
	if (v.type == jbvBool)
		return v.val.boolean;
	return v.type != jbvNull;
}

static char *
event_key(const QsStreamDef *d, Jsonb *doc, const char *pid, const char *pname)
{
	JsonbValue	v;

	if (d->key_partition)
		return pstrdup(pname);
	/* a key the path does not find is the partition id, as the example worker has it */
	if (doc == NULL || !path_first(d->key_jp, doc, &v) || v.type == jbvNull)
		return pstrdup(pid);
	if (v.type == jbvString)
		return pnstrdup(v.val.string.val, v.val.string.len);
	return value_text(&v);
}

static int64
event_time(const QsStreamDef *d, Jsonb *doc, int64 created)
{
	JsonbValue	v;

	if (!d->event_time || doc == NULL || !path_first(d->time_jp, doc, &v))
		return created;
	if (v.type == jbvNumeric)
	{
		double		f = DatumGetFloat8(DirectFunctionCall1(numeric_float8,
														   NumericGetDatum(v.val.numeric)));

		if (isfinite(f) && fabs(f) < 1e15)
			return (int64) floor(f);
	}
	else if (v.type == jbvString)
	{
		int64		ms;

		if (parse_iso_ms(v.val.string.val, v.val.string.len, &ms))
			return ms;
	}
	return created;				/* not a time: the message's createdAt */
}

/* ---- windows by state key ---- */

static uint32
str_hash(const char *s)
{
	return hash_bytes((const unsigned char *) s, strlen(s));
}

static void
map_init(Map *m, int expect)
{
	uint32		size = 64;

	while (size < (uint32) expect * 2)
		size <<= 1;
	m->b = palloc0(sizeof(Win *) * size);
	m->kb = palloc0(sizeof(Win *) * size);
	m->mask = size - 1;
	m->cap = Max(expect, 16);
	m->all = palloc(sizeof(Win *) * m->cap);
	m->n = 0;
}

static Win *
map_get(Map *m, const char *skey)
{
	for (Win *w = m->b[str_hash(skey) & m->mask]; w; w = w->next)
		if (strcmp(w->skey, skey) == 0)
			return w;
	return NULL;
}

static Win *
map_add(Map *m, const QsStreamDef *d, const char *skey, const char *key, int64 start)
{
	Win		   *w = palloc0(sizeof(Win));
	uint32		h = str_hash(skey) & m->mask;
	uint32		kh = str_hash(key) & m->mask;

	w->skey = pstrdup(skey);
	w->key = pstrdup(key);
	w->start = w->last = start;
	w->accs = palloc0(sizeof(Acc) * d->naggs);
	w->next = m->b[h];
	m->b[h] = w;
	w->next_key = m->kb[kh];
	m->kb[kh] = w;
	if (m->n == m->cap)
	{
		m->cap *= 2;
		m->all = repalloc(m->all, sizeof(Win *) * m->cap);
	}
	m->all[m->n++] = w;
	return w;
}

static char *
state_key(const QsStreamDef *d, int64 start, const char *key)
{
	char		s[32];

	iso(start, s);
	return psprintf("%s" US "%s" US "%s", d->tag, s, key);
}

static int64
win_end(const QsStreamDef *d, Win *w)
{
	return d->wtype == QS_WIN_SESSION ? w->last + (int64) d->gap_s * 1000
		: w->start + (int64) d->size_s * 1000;
}

/* ---- accumulators ---- */

static Numeric
num_of(JsonbValue *v)
{
	return v->type == jbvNumeric ? v->val.numeric : NULL;
}

static int
num_cmp(Numeric a, Numeric b)
{
	return DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(a), NumericGetDatum(b)));
}

static void
acc_add(const QsAggDef *g, Acc *a, Jsonb *doc, int64 ts)
{
	JsonbValue	v;
	bool		found;
	Numeric		x;

	if (g->fn == QS_AGG_COUNT)
	{
		a->n++;
		return;
	}
	found = doc != NULL && path_first(g->jp, doc, &v) && v.type != jbvNull;
	if (!found)
		return;
	switch (g->fn)
	{
		case QS_AGG_SUM:
		case QS_AGG_AVG:
			if ((x = num_of(&v)) == NULL)
				return;
			a->num = a->has_num ? numeric_add_opt_error(a->num, x, NULL) : x;
			a->has_num = true;
			a->n++;
			break;
		case QS_AGG_MIN:
		case QS_AGG_MAX:
			if ((x = num_of(&v)) == NULL)
				return;
			if (!a->has_num ||
				(g->fn == QS_AGG_MIN ? num_cmp(x, a->num) < 0 : num_cmp(x, a->num) > 0))
				a->num = x;
			a->has_num = true;
			break;
		case QS_AGG_FIRST:
			/* the earliest time; of equal times the first folded */
			if (a->val == NULL || ts < a->val_ts)
			{
				a->val = value_jsonb(&v);
				a->val_ts = ts;
			}
			break;
		case QS_AGG_LAST:
			if (a->val == NULL || ts >= a->val_ts)
			{
				a->val = value_jsonb(&v);
				a->val_ts = ts;
			}
			break;
		case QS_AGG_COUNT_DISTINCT:
			a->distinct = lappend(a->distinct, value_text(&v));
			break;
		case QS_AGG_COUNT:
			break;
	}
}

static int
cmp_cstr(const ListCell *a, const ListCell *b)
{
	return strcmp((const char *) lfirst(a), (const char *) lfirst(b));
}

/* sorted, duplicates removed */
static List *
distinct_set(List *l)
{
	List	   *out = NIL;
	const char *prev = NULL;
	ListCell   *lc;

	list_sort(l, cmp_cstr);
	foreach(lc, l)
	{
		const char *s = lfirst(lc);

		CHECK_FOR_INTERRUPTS();
		if (prev == NULL || strcmp(prev, s) != 0)
			out = lappend(out, (void *) s);
		prev = s;
	}
	return out;
}

static void
num_out(QsJson *j, const char *key, bool has, Numeric n)
{
	if (!has)
	{
		qsj_null(j, key);
		return;
	}
	{
		char	   *s = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(n)));

		qsj_raw(j, key, s, strlen(s));
	}
}

static void
json_value_out(QsJson *j, const char *key, Jsonb *jb)
{
	char	   *s;

	if (jb == NULL)
	{
		qsj_null(j, key);
		return;
	}
	s = JsonbToCString(NULL, &jb->root, VARSIZE(jb));
	qsj_raw(j, key, s, strlen(s));
}

/*
 * The accumulator out, as state keeps it or (`result`) as the sink message
 * shows it: count, sum, min and max the same either way; avg as its sum and
 * count, or their quotient; first and last with their time, or the value
 * alone; count distinct as its values, or how many.
 */
static void
acc_out(QsJson *j, const QsAggDef *g, Acc *a, bool result)
{
	switch (g->fn)
	{
		case QS_AGG_COUNT:
			qsj_int(j, g->name, a->n);
			break;
		case QS_AGG_SUM:
		case QS_AGG_MIN:
		case QS_AGG_MAX:
			num_out(j, g->name, a->has_num, a->num);
			break;
		case QS_AGG_AVG:
			if (!result)
			{
				qsj_object(j, g->name);
				num_out(j, "sum", a->has_num, a->num);
				qsj_int(j, "n", a->n);
				qsj_end_object(j);
			}
			else if (a->n == 0)
				qsj_null(j, g->name);
			else
				num_out(j, g->name, true,
						DatumGetNumeric(DirectFunctionCall2(numeric_div, NumericGetDatum(a->num),
															NumericGetDatum(int64_to_numeric(a->n)))));
			break;
		case QS_AGG_FIRST:
		case QS_AGG_LAST:
			if (result)
				json_value_out(j, g->name, a->val);
			else if (a->val == NULL)
				qsj_null(j, g->name);
			else
			{
				qsj_object(j, g->name);
				qsj_int(j, "t", a->val_ts);
				json_value_out(j, "v", a->val);
				qsj_end_object(j);
			}
			break;
		case QS_AGG_COUNT_DISTINCT:
			if (result)
				qsj_int(j, g->name, list_length(distinct_set(a->distinct)));
			else
			{
				ListCell   *lc;

				a->distinct = distinct_set(a->distinct);
				qsj_array(j, g->name);
				foreach(lc, a->distinct)
				{
					CHECK_FOR_INTERRUPTS();
					qsj_str(j, NULL, lfirst(lc));
				}
				qsj_end_array(j);
			}
			break;
	}
}

static bool
get_num(JsonbContainer *o, const char *key, Numeric *out)
{
	JsonbValue	v;

	if (o == NULL || !qs_json_get(o, key, &v) || v.type != jbvNumeric)
		return false;
	*out = v.val.numeric;
	return true;
}

static int64
get_int(JsonbContainer *o, const char *key, int64 dflt)
{
	Numeric		n;

	if (!get_num(o, key, &n))
		return dflt;
	return DatumGetInt64(DirectFunctionCall1(numeric_int8, NumericGetDatum(n)));
}

/* An accumulator back from state (acc_out's inverse). */
static void
acc_load(const QsAggDef *g, Acc *a, JsonbContainer *acc)
{
	JsonbValue	v;

	if (acc == NULL || !qs_json_get(acc, g->name, &v))
		return;
	switch (g->fn)
	{
		case QS_AGG_COUNT:
			a->n = get_int(acc, g->name, 0);
			break;
		case QS_AGG_SUM:
		case QS_AGG_MIN:
		case QS_AGG_MAX:
			a->has_num = get_num(acc, g->name, &a->num);
			break;
		case QS_AGG_AVG:
			{
				JsonbContainer *o = qs_json_container(&v);

				a->has_num = get_num(o, "sum", &a->num);
				a->n = get_int(o, "n", 0);
			}
			break;
		case QS_AGG_FIRST:
		case QS_AGG_LAST:
			{
				JsonbContainer *o = qs_json_container(&v);
				JsonbValue	vv;

				if (o && JsonContainerIsObject(o) && qs_json_get(o, "v", &vv))
				{
					a->val = value_jsonb(&vv);
					a->val_ts = get_int(o, "t", 0);
				}
			}
			break;
		case QS_AGG_COUNT_DISTINCT:
			{
				JsonbContainer *arr = qs_json_container(&v);
				int			n = arr && JsonContainerIsArray(arr) ? JsonContainerSize(arr) : 0;

				for (int i = 0; i < n; i++)
				{
					JsonbValue *e = getIthJsonbValueFromContainer(arr, i);

					CHECK_FOR_INTERRUPTS();
					if (e->type == jbvString)
						a->distinct = lappend(a->distinct,
											  pnstrdup(e->val.string.val, e->val.string.len));
				}
			}
			break;
	}
}

/* A state row of this stream's windows; NULL for any other row. */
static Win *
load_row(const QsStreamDef *d, Map *m, JsonbContainer *row, int64 *wm, bool *has_wm)
{
	char	   *key = qs_json_string(row, "key", "state row", false);
	JsonbValue	v;
	JsonbContainer *val;
	JsonbContainer *acc = NULL;
	const char *p;
	Win		   *w;
	size_t		taglen = strlen(d->tag);

	if (key == NULL || !qs_json_get(row, "value", &v) || (val = qs_json_container(&v)) == NULL ||
		!JsonContainerIsObject(val))
		return NULL;
	if (strcmp(key, "__wm__") == 0)
	{
		Numeric		n;

		if (get_num(val, "eventTimeMs", &n))
		{
			*wm = DatumGetInt64(DirectFunctionCall1(numeric_int8, NumericGetDatum(n)));
			*has_wm = true;
		}
		return NULL;
	}
	if (strncmp(key, d->tag, taglen) != 0 || key[taglen] != '\x1f' ||
		(p = strchr(key + taglen + 1, '\x1f')) == NULL)
		return NULL;
	w = map_add(m, d, key, p + 1, get_int(val, "windowStart", 0));
	w->last = get_int(val, "last", w->start);
	w->persisted = true;
	if (qs_json_get(val, "acc", &v))
		acc = qs_json_container(&v);
	for (int i = 0; i < d->naggs; i++)
		acc_load(&d->aggs[i], &w->accs[i], acc);
	return w;
}

static void
fold_into(const QsStreamDef *d, Win *w, Jsonb *doc, int64 ts)
{
	for (int i = 0; i < d->naggs; i++)
		acc_add(&d->aggs[i], &w->accs[i], doc, ts);
	if (ts > w->last)
		w->last = ts;
	w->touched = true;
}

static bool
closed(const QsStreamDef *d, int64 end, bool has_wm, int64 wm)
{
	return has_wm && end + (int64) d->grace_s * 1000 <= wm;
}

/* Fold one event into its windows; false if every one of them has closed. */
static bool
assign(const QsStreamDef *d, Map *m, const char *key, Jsonb *doc, int64 ts, bool has_wm, int64 wm)
{
	bool		folded = false;

	if (d->wtype != QS_WIN_SESSION)
	{
		int64		size = (int64) d->size_s * 1000;
		int64		slide = (int64) d->slide_s * 1000;

		for (int64 s = floor_div(ts, slide) * slide; s > ts - size; s -= slide)
		{
			char	   *skey;
			Win		   *w;

			if (closed(d, s + size, has_wm, wm))
				continue;
			skey = state_key(d, s, key);
			w = map_get(m, skey);
			if (w == NULL)
				w = map_add(m, d, skey, key, s);
			fold_into(d, w, doc, ts);
			folded = true;
		}
		return folded;
	}
	else
	{
		/* the latest open session of the key that starts at or before ts and reaches it */
		int64		gap = (int64) d->gap_s * 1000;
		Win		   *best = NULL;

		for (Win *w = m->kb[str_hash(key) & m->mask]; w; w = w->next_key)
			if (strcmp(w->key, key) == 0 && w->start <= ts && ts < w->last + gap &&
				!closed(d, w->last + gap, has_wm, wm) && (best == NULL || w->start > best->start))
				best = w;
		if (best == NULL)
		{
			char	   *skey;

			if (closed(d, ts + gap, has_wm, wm))
				return false;
			skey = state_key(d, ts, key);
			best = map_get(m, skey);
			if (best == NULL)
				best = map_add(m, d, skey, key, ts);
		}
		fold_into(d, best, doc, ts);
		return true;
	}
}

static void
closed_item(const QsStreamDef *d, QsJson *items, const char *pname, Win *w)
{
	char		s[32];

	qsj_object(items, NULL);
	qsj_str(items, "queue", d->sink);
	qsj_str(items, "partition", pname);
	qsj_object(items, "payload");
	qsj_str(items, "key", w->key);
	iso(w->start, s);
	qsj_str(items, "windowStart", s);
	iso(win_end(d, w), s);
	qsj_str(items, "windowEnd", s);
	for (int i = 0; i < d->naggs; i++)
		acc_out(items, &d->aggs[i], &w->accs[i], true);
	qsj_end_object(items);
	qsj_end_object(items);
}

static void
op_delete(QsJson *ops, const char *skey)
{
	qsj_object(ops, NULL);
	qsj_str(ops, "type", "delete");
	qsj_str(ops, "key", skey);
	qsj_end_object(ops);
}

static void
op_upsert(const QsStreamDef *d, QsJson *ops, Win *w)
{
	qsj_object(ops, NULL);
	qsj_str(ops, "type", "upsert");
	qsj_str(ops, "key", w->skey);
	qsj_object(ops, "value");
	qsj_object(ops, "acc");
	for (int i = 0; i < d->naggs; i++)
		acc_out(ops, &d->aggs[i], &w->accs[i], false);
	qsj_end_object(ops);
	qsj_int(ops, "windowStart", w->start);
	qsj_int(ops, "windowEnd", win_end(d, w));
	if (d->wtype == QS_WIN_SESSION)
		qsj_int(ops, "last", w->last);
	qsj_end_object(ops);
	qsj_end_object(ops);
}

static void
op_wm(QsJson *ops, int64 wm)
{
	qsj_object(ops, NULL);
	qsj_str(ops, "type", "upsert");
	qsj_str(ops, "key", "__wm__");
	qsj_object(ops, "value");
	qsj_int(ops, "eventTimeMs", wm);
	qsj_end_object(ops);
	qsj_end_object(ops);
}

static int
cmp_win(const void *a, const void *b)
{
	return strcmp((*(Win *const *) a)->skey, (*(Win *const *) b)->skey);
}

typedef struct Ev
{
	JsonbContainer *m;
	char	   *created;
	char	   *id;
} Ev;

static int
cmp_ev(const void *a, const void *b)
{
	const Ev   *x = a;
	const Ev   *y = b;
	int			c = strcmp(x->created, y->created);

	return c != 0 ? c : strcmp(x->id, y->id);
}

static void
out_init(QsFoldOut *out)
{
	memset(out, 0, sizeof(*out));
	qsj_init(&out->ops);
	qsj_array(&out->ops, NULL);
	qsj_init(&out->items);
	qsj_array(&out->items, NULL);
}

static void
out_end(QsFoldOut *out)
{
	qsj_end_array(&out->ops);
	qsj_end_array(&out->items);
}

void
qs_fold_batch(const QsStreamDef *d, const char *pid, const char *pname,
			  JsonbContainer *rows, JsonbValue **msgs, int nmsgs, QsFoldOut *out)
{
	int			nrows = rows ? JsonContainerSize(rows) : 0;
	Map			m;
	int64		wm = 0;
	bool		has_wm = false;
	Ev		   *evs = palloc(sizeof(Ev) * Max(nmsgs, 1));

	out_init(out);
	map_init(&m, nrows + nmsgs * (d->size_s / Max(d->slide_s, 1) + 1));
	for (int i = 0; i < nrows; i++)
	{
		JsonbContainer *row = qs_json_container(getIthJsonbValueFromContainer(rows, i));

		CHECK_FOR_INTERRUPTS();
		if (row && JsonContainerIsObject(row))
			(void) load_row(d, &m, row, &wm, &has_wm);
	}

	/* in the example worker's order: createdAt, then id */
	for (int i = 0; i < nmsgs; i++)
	{
		JsonbContainer *o = qs_json_container(msgs[i]);

		evs[i].m = o;
		evs[i].created = qs_json_string(o, "createdAt", "message", false);
		evs[i].id = qs_json_string(o, "id", "message", false);
		if (evs[i].created == NULL)
			evs[i].created = "";
		if (evs[i].id == NULL)
			evs[i].id = "";
	}
	qsort(evs, nmsgs, sizeof(Ev), cmp_ev);

	for (int i = 0; i < nmsgs; i++)
	{
		JsonbValue	dv;
		Jsonb	   *doc = NULL;
		int64		created = 0;
		int64		ts;
		char	   *key;

		CHECK_FOR_INTERRUPTS();
		out->events++;
		if (qs_json_get(evs[i].m, "data", &dv))
			doc = value_jsonb(&dv);
		if (!passes(d, doc))
		{
			out->filtered++;
			continue;
		}
		(void) parse_iso_ms(evs[i].created, strlen(evs[i].created), &created);
		ts = event_time(d, doc, created);
		key = event_key(d, doc, pid, pname);
		if ((has_wm && ts < wm - (int64) d->lateness_s * 1000) ||
			!assign(d, &m, key, doc, ts, has_wm, wm))
		{
			out->late++;
			if (d->late_queue)
			{
				qsj_object(&out->items, NULL);
				qsj_str(&out->items, "queue", d->late_queue);
				qsj_str(&out->items, "partition", pname);
				json_value_out(&out->items, "payload", doc);
				qsj_end_object(&out->items);
			}
			continue;
		}
		if (!has_wm || ts > wm)
			wm = ts;
		has_wm = true;
	}

	qsort(m.all, m.n, sizeof(Win *), cmp_win);
	for (int i = 0; i < m.n; i++)
	{
		Win		   *w = m.all[i];

		CHECK_FOR_INTERRUPTS();
		if (closed(d, win_end(d, w), has_wm, wm))
		{
			closed_item(d, &out->items, pname, w);
			out->windows++;
			if (w->persisted)
				op_delete(&out->ops, w->skey);
		}
		else if (w->touched)
			op_upsert(d, &out->ops, w);
	}
	if (has_wm)
		op_wm(&out->ops, wm);
	out_end(out);
}

/*
 * An idle flush: emit and delete the ripe windows, and move the watermark
 * past them, so that an event for a flushed window is late rather than a
 * second emission of it.
 */
void
qs_fold_flush(const QsStreamDef *d, const char *pname, JsonbContainer *ripe,
			  JsonbContainer *wmrows, QsFoldOut *out)
{
	int			n = ripe ? JsonContainerSize(ripe) : 0;
	int			nw = wmrows ? JsonContainerSize(wmrows) : 0;
	Map			m;
	int64		wm = 0;
	bool		has_wm = false;
	int64		top = 0;
	bool		any = false;

	out_init(out);
	map_init(&m, n + 1);
	for (int i = 0; i < nw; i++)
	{
		JsonbContainer *row = qs_json_container(getIthJsonbValueFromContainer(wmrows, i));

		if (row && JsonContainerIsObject(row))
			(void) load_row(d, &m, row, &wm, &has_wm);
	}
	for (int i = 0; i < n; i++)
	{
		JsonbContainer *row = qs_json_container(getIthJsonbValueFromContainer(ripe, i));
		Win		   *w;

		CHECK_FOR_INTERRUPTS();
		if (row == NULL || !JsonContainerIsObject(row) ||
			(w = load_row(d, &m, row, &wm, &has_wm)) == NULL)
			continue;
		closed_item(d, &out->items, pname, w);
		op_delete(&out->ops, w->skey);
		out->windows++;
		if (!any || win_end(d, w) > top)
			top = win_end(d, w);
		any = true;
	}
	if (any)
	{
		top += (int64) d->grace_s * 1000;
		if (!has_wm || top > wm)
			op_wm(&out->ops, top);
	}
	out_end(out);
}
