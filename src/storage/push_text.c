/*
 * push_text.c: the push reader. A push request is read here, once, into
 * push.c's items, whichever entry brings it: queen.push_text (the
 * listener's push route, on the raw body), queen.push_text_many (its group
 * commit) and queen.push(jsonb), whose jsonb is walked into the same
 * fields and checked by the same finish_item and check_request (faster
 * than writing it out as text to read it again: bench/README.md's push
 * section). So the request's rules exist here only. The item rules
 * (item_rules) also read queen.transaction's push items and a streams
 * cycle's sink items (qs_push_read_item), which differ from push only where
 * Queen's wire does (QsPushRules).
 *
 * The text is walked once. Each item is checked, grouped and its frame
 * written into its segment buffer (push.c) as soon as its object closes; a
 * payload is copied as the JSON text it is, never turned into jsonb. The
 * common request is read by a strict scanner (json_scan.c, the fast pass);
 * whatever it gives up on is read again by PostgreSQL's JSON parser, which
 * validates the whole text as jsonb input does (the same lexer with escapes
 * on, numbers checked as numeric). So a text that text::jsonb would refuse
 * is refused with the same error, and the answer is the same, item for
 * item, whether the request came as text or as jsonb.
 *
 * A request is validated only once it is parsed, keeping the last of
 * repeated keys (jsonb's rule): an item's fields are kept until its object
 * closes, and a field error is held back until the whole text has parsed,
 * so a syntax error anywhere is still reported first.
 */
#include "storage/storage.h"
#include "common/ids.h"
#include "common/spi.h"
#include "common/text.h"

#include "catalog/pg_type.h"
#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/jsonfuncs.h"
#include "utils/numeric.h"

/* The fields of an item push reads; the rest are parsed and ignored. */
enum
{
	F_QUEUE,
	F_PARTITION,
	F_TXN,
	F_TRACE,
	F_PAYLOAD,
	F_DATA,
	F_COUNT
};

/* the names, with their lengths for the fast path's key match (strlen there was 1% of a push) */
#define FIELD_NAME(s) {s, sizeof(s) - 1}
static const struct
{
	const char *name;
	int			len;
}			field_names[F_COUNT] = {
	FIELD_NAME("queue"), FIELD_NAME("partition"), FIELD_NAME("transactionId"),
	FIELD_NAME("traceId"), FIELD_NAME("payload"), FIELD_NAME("data")
};

typedef struct Field
{
	bool		seen;			/* the key is there, even as null */
	bool		present;		/* present and not null */
	JsonTokenType tok;			/* the value's first token */
	char	   *str;			/* a string value, unescaped */
	const char *start;			/* the value's text */
	const char *end;
} Field;

/* An error held back until the text has parsed. */
typedef struct Held
{
	bool		set;
	int			code;
	char	   *msg;
	char	   *detail;
} Held;

typedef enum
{
	TOP_UNSEEN,
	TOP_OBJECT,
	TOP_OTHER
} TopKind;

typedef enum
{
	ITEMS_ABSENT,
	ITEMS_NULL,
	ITEMS_ARRAY,
	ITEMS_OTHER
} ItemsKind;

typedef struct PtState
{
	JsonLexContext *lex;
	JsonSemAction *sem;			/* the live actions, switched while skipping */
	JsonSemAction full;
	int			depth;			/* containers open */
	bool		skipping;		/* inside a value nobody reads */
	TopKind		top;
	bool		field_items;	/* the top-level field being parsed is "items" */
	ItemsKind	items_kind;
	bool		in_items;
	/* items of the last "items" array */
	QsPushItem *items;
	int			nitems;
	int			cap;
	QsPushBatch *batch;			/* NULL: items only collected (a merged push) */
	bool		collect;
	Held		item_err;		/* the first item error, in item order */
	/* the item being read */
	bool		in_item;
	int			field;			/* F_*, or -1 */
	Field		f[F_COUNT];
	const char *psub;
	int			psub_len;
} PtState;

static void
hold(Held *h, int code, char *msg, char *detail)
{
	if (h->set)
		return;
	h->set = true;
	h->code = code;
	h->msg = msg;
	h->detail = detail;
}

static void
raise_held(Held *h)
{
	if (h->detail)
		ereport(ERROR, (errcode(h->code), errmsg("%s", h->msg), errdetail("%s", h->detail)));
	ereport(ERROR, (errcode(h->code), errmsg("%s", h->msg)));
}

/* Skip a value: no callbacks below it but the number check. */
static void pt_skip_scalar(void *state, char *token, JsonTokenType type);

static void
skip_value(PtState *st)
{
	JsonTokenType tok = st->lex->token_type;

	if (tok != JSON_TOKEN_OBJECT_START && tok != JSON_TOKEN_ARRAY_START)
		return;
	memset(st->sem, 0, sizeof(JsonSemAction));
	st->sem->semstate = st;
	st->sem->scalar = pt_skip_scalar;
	st->skipping = true;
}

static void
unskip(PtState *st)
{
	if (st->skipping)
	{
		*st->sem = st->full;
		st->skipping = false;
	}
}

/* jsonb input's number check (json_scan.c), so both passes refuse the same numbers. */
static void
check_number(const char *token)
{
	qs_scan_check_number(token, strlen(token));
}

static void
pt_skip_scalar(void *state, char *token, JsonTokenType type)
{
	if (type == JSON_TOKEN_NUMBER)
		check_number(token);
	if (token)
		pfree(token);
}

/* Start over on each "items" key: the last one is the request's. */
static void
reset_items(PtState *st)
{
	st->nitems = 0;
	st->batch = st->collect ? NULL : qs_push_begin(true);
	memset(&st->item_err, 0, sizeof(Held));
}

/* The item an error names: "item 3" in a push, the caller's `what` elsewhere. */
static char *
item_what(int i, const char *what)
{
	return what ? pstrdup(what) : psprintf("item %d", i);
}

/* A string field of an item, as qs_json_string reads it. */
static bool
item_string(Field *fs, Held *err, int i, const char *what, int f, bool required, char **out)
{
	Field	   *fd = &fs[f];

	*out = NULL;
	if (!fd->present)
	{
		if (required)
			hold(err, ERRCODE_INVALID_PARAMETER_VALUE,
				 psprintf("%s: \"%s\" is required", item_what(i, what), field_names[f].name), NULL);
		return !required;
	}
	if (fd->tok != JSON_TOKEN_STRING)
	{
		hold(err, ERRCODE_INVALID_PARAMETER_VALUE,
			 psprintf("%s: \"%s\" must be a string", item_what(i, what), field_names[f].name), NULL);
		return false;
	}
	*out = fd->str;
	return true;
}

/* qs_check_new_name's rule, its error held back to be raised in queen.push's order. */
static bool
item_name_ok(Held *err, int i, const char *what, int f, const char *name)
{
	const char *why = qs_new_name_problem(name);

	if (why == NULL)
		return true;
	hold(err, ERRCODE_INVALID_PARAMETER_VALUE,
		 psprintf("%s: \"%s\" %s", item_what(i, what), field_names[f].name, why),
		 strcmp(why, "is too long") == 0 ? psprintf("Names are at most %d bytes.", QS_NAME_MAX)
		 : (char *) qs_new_name_detail(why));
	return false;
}

/* push's own: no default payload (null), traceId read, "" names no partition */
static const QsPushRules push_rules = {NULL, true, false};

/* Where Queen's wire says otherwise (doc/behaviour.md, "One push reader") */
const QsPushRules qs_push_rules_transaction = {"{}", true, false};
const QsPushRules qs_push_rules_sink = {"{}", false, true};

/*
 * The item rules, one function for every entry: an item's fields (as a
 * reader kept them) checked in queen.push's order into `it`, whose id the
 * caller may have set (id_given); false with the first error held in
 * `err`. The entries differ only by `rules`, where Queen's wire does.
 */
static bool
item_rules(Field *fs, Held *err, int i, const char *what, const QsPushRules *rules,
		   const char *psub, int psub_len, QsPushItem *it)
{
	char	   *queue;
	char	   *partition;
	char	   *txn;
	char	   *trace = NULL;
	Field	   *pf;

	if (!item_string(fs, err, i, what, F_QUEUE, true, &queue) ||
		!item_string(fs, err, i, what, F_PARTITION, false, &partition))
		return false;
	if (partition == NULL || (rules->empty_partition && partition[0] == '\0'))
		partition = "Default";
	if (!item_name_ok(err, i, what, F_QUEUE, queue) ||
		!item_name_ok(err, i, what, F_PARTITION, partition))
		return false;
	if (!item_string(fs, err, i, what, F_TXN, false, &txn) ||
		(rules->trace && !item_string(fs, err, i, what, F_TRACE, false, &trace)))
		return false;

	it->queue = queue;
	it->partition = partition;
	if (!it->id_given)
		qs_uuid7(&it->id);
	qs_push_set_txn(it, txn);
	if (trace != NULL)
	{
		if (!qs_uuid_parse(trace, strlen(trace), &it->trace))
		{
			hold(err, ERRCODE_INVALID_PARAMETER_VALUE,
				 psprintf("%s: \"traceId\" must be a UUID", item_what(i, what)),
				 psprintf("Got \"%s\".", trace));
			return false;
		}
		it->has_trace = true;
	}
	/*
	 * push: payload, else data, a null one as absent, else null. Queen's
	 * other entries: the first of payload and data that is there, even as
	 * null, else their default. A null payload is stored empty (read as
	 * null) whichever entry sends it.
	 */
	if (rules->payload_default == NULL)
		pf = fs[F_PAYLOAD].present ? &fs[F_PAYLOAD] :
			fs[F_DATA].present ? &fs[F_DATA] : NULL;
	else
		pf = fs[F_PAYLOAD].seen ? &fs[F_PAYLOAD] :
			fs[F_DATA].seen ? &fs[F_DATA] : NULL;
	if (pf && pf->present)
	{
		it->payload = pf->start;
		it->payload_len = pf->end - pf->start;
	}
	else if (pf == NULL && rules->payload_default)
	{
		it->payload = rules->payload_default;
		it->payload_len = strlen(rules->payload_default);
	}
	else
		it->payload = "";
	if (psub)
	{
		it->psub = psub;
		it->psub_len = psub_len;
	}
	return true;
}

/* An item's object closed: check it, then add it. */
static void
finish_item(PtState *st)
{
	int			i = st->nitems;
	QsPushItem *it;

	if (st->nitems == st->cap)
	{
		st->cap *= 2;
		st->items = repalloc_huge(st->items, sizeof(QsPushItem) * st->cap);
	}
	it = &st->items[i];
	memset(it, 0, sizeof(QsPushItem));
	if (!item_rules(st->f, &st->item_err, i, NULL, &push_rules, st->psub, st->psub_len, it))
		return;
	st->nitems++;
	if (st->batch)
		qs_push_add(st->batch, st->items, i);
}

static void
pt_object_start(void *state)
{
	PtState    *st = state;

	if (st->depth == 0)
		st->top = TOP_OBJECT;
	else if (st->depth == 2 && st->in_items)
	{
		st->in_item = true;
		st->field = -1;
		memset(st->f, 0, sizeof(st->f));
	}
	st->depth++;
}

static void
pt_object_end(void *state)
{
	PtState    *st = state;

	st->depth--;
	if (st->depth == 2 && st->in_item)
	{
		st->in_item = false;
		CHECK_FOR_INTERRUPTS();
		/* after the first bad item nothing is added: the request fails */
		if (!st->item_err.set)
			finish_item(st);
	}
}

static void
pt_array_start(void *state)
{
	PtState    *st = state;

	if (st->depth == 0)
	{
		st->top = TOP_OTHER;
		skip_value(st);			/* never undone: nothing in it is read */
		return;
	}
	if (st->depth == 1 && st->field_items)
	{
		st->items_kind = ITEMS_ARRAY;
		st->in_items = true;
	}
	st->depth++;
}

static void
pt_array_end(void *state)
{
	PtState    *st = state;

	st->depth--;
	if (st->depth == 1 && st->in_items)
		st->in_items = false;
}

static void
pt_field_start(void *state, char *fname, bool isnull)
{
	PtState    *st = state;
	JsonTokenType tok = st->lex->token_type;

	if (st->depth == 1)
	{
		st->field_items = strcmp(fname, "items") == 0;
		if (st->field_items)
		{
			reset_items(st);
			st->items_kind = isnull ? ITEMS_NULL :
				tok == JSON_TOKEN_ARRAY_START ? ITEMS_ARRAY : ITEMS_OTHER;
			if (st->items_kind == ITEMS_OTHER)
				skip_value(st);
		}
		else
			skip_value(st);
		return;
	}
	if (st->depth == 3 && st->in_item)
	{
		st->field = -1;
		for (int f = 0; f < F_COUNT; f++)
			if (strcmp(fname, field_names[f].name) == 0)
			{
				Field	   *fd = &st->f[f];

				st->field = f;
				fd->seen = true;
				fd->present = !isnull;
				fd->tok = tok;
				fd->str = NULL;
				fd->start = st->lex->token_start;
				break;
			}
		skip_value(st);
	}
}

static void
pt_field_end(void *state, char *fname, bool isnull)
{
	PtState    *st = state;

	unskip(st);
	if (st->depth == 1)
		st->field_items = false;
	else if (st->depth == 3 && st->in_item && st->field >= 0)
	{
		st->f[st->field].end = st->lex->prev_token_terminator;
		st->field = -1;
	}
	pfree(fname);
}

static void
pt_elem_start(void *state, bool isnull)
{
	PtState    *st = state;

	if (st->depth == 2 && st->in_items && st->lex->token_type != JSON_TOKEN_OBJECT_START)
	{
		if (!st->item_err.set)
			hold(&st->item_err, ERRCODE_INVALID_PARAMETER_VALUE,
				 psprintf("%s must be a JSON object", item_what(st->nitems, NULL)), NULL);
		skip_value(st);
	}
}

static void
pt_elem_end(void *state, bool isnull)
{
	unskip((PtState *) state);
}

static void
pt_scalar(void *state, char *token, JsonTokenType type)
{
	PtState    *st = state;

	if (type == JSON_TOKEN_NUMBER)
		check_number(token);
	if (st->depth == 0)
		st->top = TOP_OTHER;
	else if (st->depth == 3 && st->in_item && st->field >= 0 && type == JSON_TOKEN_STRING)
	{
		st->f[st->field].str = token;
		return;
	}
	if (token)
		pfree(token);
}

/*
 * One result per item (its members in jsonb's key order), written once as
 * JSON text: push_text's answer.
 */
static void
write_answer(QsJson *j, QsPushItem *items, int n)
{
	qsj_init(j);
	enlargeStringInfo(&j->buf, n * 200);
	qsj_array(j, NULL);
	for (int i = 0; i < n; i++)
	{
		QsPushItem *it = &items[i];

		CHECK_FOR_INTERRUPTS();
		qsj_object(j, NULL);
		qsj_int(j, "index", i);
		qsj_str(j, "status", it->status == QS_PUSH_QUEUED ? "queued" : "duplicate");
		qsj_uuid(j, "trace_id", it->has_trace ? &it->trace : NULL);
		qsj_str(j, "queueName", it->queue);
		qsj_uuid(j, "message_id", &it->result_id);
		qsj_uuid(j, "partition_id", &it->pid);
		qsj_strn(j, "transaction_id", it->txn, it->txn_len);
		qsj_end_object(j);
	}
	qsj_end_array(j);
}

static text *
answer(QsPushItem *items, int n)
{
	QsJson		j;

	write_answer(&j, items, n);
	return qsj_json(&j);
}

/* A jsonb string (its bytes unescaped, as jsonb holds them). */
static void
jstr(JsonbValue *v, const char *s, int len)
{
	v->type = jbvString;
	v->val.string.val = (char *) s;
	v->val.string.len = len;
}

static void
jkey(JsonbPair *p, const char *key, int len)
{
	jstr(&p->key, key, len);
	p->order = 0;
}

#define JKEY(p, k) jkey((p), (k), sizeof(k) - 1)

/*
 * The same answer for queen.push, built as a jsonb tree and converted once
 * (no text parsed again). Its members are given in jsonb's key order
 * (shorter keys first), as convertToJsonb expects of an object it did not
 * sort; the answers of both entries are compared in push_text.sql.
 */
#define ANSWER_KEYS 7

static Jsonb *
answer_jsonb(QsPushItem *items, int n)
{
	JsonbValue	arr;
	JsonbValue *elems = palloc(sizeof(JsonbValue) * Max(n, 1));
	JsonbPair  *pairs = palloc(sizeof(JsonbPair) * ANSWER_KEYS * Max(n, 1));
	char	   *ids = palloc((Size) (QS_UUID_STRLEN + 1) * 3 * Max(n, 1));

	for (int i = 0; i < n; i++)
	{
		QsPushItem *it = &items[i];
		JsonbPair  *p = pairs + i * ANSWER_KEYS;
		char	   *id = ids + (Size) i * 3 * (QS_UUID_STRLEN + 1);

		CHECK_FOR_INTERRUPTS();
		JKEY(&p[0], "index");
		p[0].value.type = jbvNumeric;
		p[0].value.val.numeric = int64_to_numeric(i);
		JKEY(&p[1], "status");
		if (it->status == QS_PUSH_QUEUED)
			jstr(&p[1].value, "queued", 6);
		else
			jstr(&p[1].value, "duplicate", 9);
		JKEY(&p[2], "trace_id");
		if (it->has_trace)
		{
			qs_uuid_format(&it->trace, id);
			jstr(&p[2].value, id, QS_UUID_STRLEN);
		}
		else
			p[2].value.type = jbvNull;
		JKEY(&p[3], "queueName");
		jstr(&p[3].value, it->queue, strlen(it->queue));
		JKEY(&p[4], "message_id");
		qs_uuid_format(&it->result_id, id + QS_UUID_STRLEN + 1);
		jstr(&p[4].value, id + QS_UUID_STRLEN + 1, QS_UUID_STRLEN);
		JKEY(&p[5], "partition_id");
		qs_uuid_format(&it->pid, id + 2 * (QS_UUID_STRLEN + 1));
		jstr(&p[5].value, id + 2 * (QS_UUID_STRLEN + 1), QS_UUID_STRLEN);
		JKEY(&p[6], "transaction_id");
		jstr(&p[6].value, it->txn, it->txn_len);
		elems[i].type = jbvObject;
		elems[i].val.object.nPairs = ANSWER_KEYS;
		elems[i].val.object.pairs = p;
	}
	arr.type = jbvArray;
	arr.val.array.nElems = n;
	arr.val.array.elems = elems;
	arr.val.array.rawScalar = false;
	return JsonbValueToJsonb(&arr);
}

/*
 * An error about the text itself (not JSON, bad encoding, a number numeric
 * refuses, nesting too deep) says so in its context: the listener answers
 * those as every JSON route answers a bad body, and everything else (an
 * item's error, a cancel while parsing) as itself.
 */
#define TEXT_CONTEXT "reading the push request's JSON text"

static void
text_context(void *arg)
{
	int			code = geterrcode();

	if (ERRCODE_TO_CATEGORY(code) == ERRCODE_DATA_EXCEPTION ||
		code == ERRCODE_STATEMENT_TOO_COMPLEX)
		errcontext(TEXT_CONTEXT);
}

bool
qs_push_error_in_text(const ErrorData *edata)
{
	return edata->context != NULL && strstr(edata->context, TEXT_CONTEXT) != NULL;
}

/* ---------------------------------------------------------------- fast pass */

/*
 * The common request read with json_scan.c's scanner instead: no \u
 * escapes, no escaped key or name, one "items" key, no item error. It
 * fills the same state through the same finish_item. Anything else makes
 * it return false, and the caller reads the text again with PostgreSQL's
 * parser from a fresh state, which gives the answer or the error.
 */
static JsonTokenType
token_of(char c)
{
	switch (c)
	{
		case '"':
			return JSON_TOKEN_STRING;
		case '{':
			return JSON_TOKEN_OBJECT_START;
		case '[':
			return JSON_TOKEN_ARRAY_START;
		case 't':
			return JSON_TOKEN_TRUE;
		case 'f':
			return JSON_TOKEN_FALSE;
		case 'n':
			return JSON_TOKEN_NULL;
		default:
			return JSON_TOKEN_NUMBER;
	}
}

/* A key and its colon, unescaped (false on an escaped one). */
static bool
fast_key(QsScan *s, const char **key, int *klen)
{
	bool		escaped;

	return qs_scan_key(s, key, klen, &escaped) && !escaped;
}

/* After a member or an element: true with *more set, or false on bad text. */
static bool
fast_next(QsScan *s, char close, bool *more)
{
	qs_scan_ws(s);
	if (s->p >= s->end)
		return false;
	*more = *s->p == ',';
	if (!*more && *s->p != close)
		return false;
	s->p++;
	qs_scan_ws(s);
	return true;
}

static bool
fast_item(PtState *st, QsScan *s)
{
	bool		more = true;

	memset(st->f, 0, sizeof(st->f));
	s->p++;						/* '{' */
	qs_scan_ws(s);
	if (s->p < s->end && *s->p == '}')
	{
		s->p++;
		more = false;
	}
	while (more)
	{
		const char *key;
		const char *v;
		int			klen;
		int			f = -1;

		if (!fast_key(s, &key, &klen))
			return false;
		for (int i = 0; i < F_COUNT; i++)
			if (field_names[i].len == klen && memcmp(key, field_names[i].name, klen) == 0)
			{
				f = i;
				break;
			}
		v = s->p;
		if (!qs_scan_skip(s))
			return false;
		if (f >= 0)
		{
			Field	   *fd = &st->f[f];

			fd->tok = token_of(*v);
			fd->seen = true;
			fd->present = fd->tok != JSON_TOKEN_NULL;
			fd->start = v;
			fd->end = s->p;
			fd->str = NULL;
			if (fd->tok == JSON_TOKEN_STRING && f != F_PAYLOAD && f != F_DATA)
			{
				if (memchr(v, '\\', s->p - v) != NULL)
					return false;	/* an escaped name or id: the parser unescapes it */
				fd->str = pnstrdup(v + 1, s->p - v - 2);
			}
		}
		if (!fast_next(s, '}', &more))
			return false;
	}
	CHECK_FOR_INTERRUPTS();
	finish_item(st);
	return !st->item_err.set;
}

static bool
fast_items(PtState *st, QsScan *s)
{
	bool		more = true;

	if (s->p >= s->end || *s->p != '[')
		return false;
	s->p++;
	qs_scan_ws(s);
	if (s->p < s->end && *s->p == ']')
	{
		s->p++;
		return true;
	}
	while (more)
	{
		if (s->p >= s->end || *s->p != '{' || !fast_item(st, s) || !fast_next(s, ']', &more))
			return false;
	}
	return true;
}

static bool
fast_read(PtState *st, const char *json, int len)
{
	QsScan		s = {json, json + len};
	bool		more = true;
	bool		seen_items = false;

	qs_scan_ws(&s);
	if (s.p >= s.end || *s.p != '{')
		return false;
	s.p++;
	qs_scan_ws(&s);
	while (more)
	{
		const char *key;
		int			klen;

		if (!fast_key(&s, &key, &klen))
			return false;
		if (klen == 5 && memcmp(key, "items", 5) == 0)
		{
			if (seen_items || !fast_items(st, &s))
				return false;
			seen_items = true;
		}
		else if (!qs_scan_skip(&s))
			return false;
		if (!fast_next(&s, '}', &more))
			return false;
	}
	if (s.p != s.end || !seen_items)
		return false;
	st->top = TOP_OBJECT;
	st->items_kind = ITEMS_ARRAY;
	return true;
}

static void
init_state(PtState *st, const char *psub, bool collect)
{
	memset(st, 0, sizeof(*st));
	if (psub)
	{
		st->psub = psub;
		st->psub_len = strlen(psub);
	}
	st->collect = collect;
	st->cap = 64;
	st->items = palloc(sizeof(QsPushItem) * st->cap);
	st->field = -1;
	reset_items(st);
}

static void check_request(PtState *st);

/*
 * Read one request's text into `st`, raising its errors in the order
 * jsonb input and then the item checks would. Without `collect` each item
 * is grouped and framed as it is read.
 */
static void
read_request(PtState *st, const char *json, int len, const char *psub, bool collect)
{
	JsonSemAction sem;
	JsonParseErrorType rc;
	ErrorContextCallback errcb;

	errcb.callback = text_context;
	errcb.arg = NULL;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	/* a C caller's text is not checked yet: NUL and bad bytes as text input refuses them */
	(void) pg_verify_mbstr(GetDatabaseEncoding(), json, len, false);
	init_state(st, psub, collect);
	if (!fast_read(st, json, len))
	{
		/* PostgreSQL's parser on the same text, from a fresh state */
		init_state(st, psub, collect);
		memset(&sem, 0, sizeof(sem));
		sem.semstate = st;
		sem.object_start = pt_object_start;
		sem.object_end = pt_object_end;
		sem.array_start = pt_array_start;
		sem.array_end = pt_array_end;
		sem.object_field_start = pt_field_start;
		sem.object_field_end = pt_field_end;
		sem.array_element_start = pt_elem_start;
		sem.array_element_end = pt_elem_end;
		sem.scalar = pt_scalar;
		st->full = sem;
		st->sem = &sem;
		st->lex = makeJsonLexContextCstringLen((char *) json, len, GetDatabaseEncoding(), true);
		rc = pg_parse_json(st->lex, &sem);
		if (rc != JSON_SUCCESS)
			json_ereport_error(rc, st->lex);
	}
	error_context_stack = errcb.previous;
	check_request(st);
}

/* The request's checks once it is read, in their order. */
static void
check_request(PtState *st)
{
	if (st->top != TOP_OBJECT)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("push request must be a JSON object")));
	if (st->items_kind == ITEMS_OTHER)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("push request: \"items\" must be an array")));
	if (st->items_kind != ITEMS_ARRAY)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("items array is required")));
	if (st->item_err.set)
		raise_held(&st->item_err);
}

/* A field of an item as the text reader keeps it, from its jsonb value. */
static void
walk_field(Field *fd, JsonbValue *v, bool payload)
{
	fd->seen = true;
	fd->present = v->type != jbvNull;
	fd->str = NULL;
	switch (v->type)
	{
		case jbvString:
			fd->tok = JSON_TOKEN_STRING;
			if (!payload)
				fd->str = pnstrdup(v->val.string.val, v->val.string.len);
			break;
		case jbvNumeric:
			fd->tok = JSON_TOKEN_NUMBER;
			break;
		case jbvBool:
			fd->tok = v->val.boolean ? JSON_TOKEN_TRUE : JSON_TOKEN_FALSE;
			break;
		case jbvBinary:
			fd->tok = JsonContainerIsObject(v->val.binary.data) ?
				JSON_TOKEN_OBJECT_START : JSON_TOKEN_ARRAY_START;
			break;
		default:
			fd->tok = JSON_TOKEN_NULL;
			break;
	}
	if (payload && fd->present)
	{
		int			len;

		fd->start = qs_json_text(v, &len);
		fd->end = fd->start + len;
	}
}

/* An item's object walked into its fields; traceId only when `trace`. */
static void
walk_item(Field *fs, JsonbContainer *o, bool trace)
{
	JsonbValue	v;
	bool		have_payload = false;

	memset(fs, 0, sizeof(Field) * F_COUNT);
	for (int f = 0; f < F_COUNT; f++)
	{
		bool		payload = f == F_PAYLOAD || f == F_DATA;

		/* "data" is read only when "payload" is absent or null */
		if ((f == F_DATA && have_payload) || (f == F_TRACE && !trace))
			continue;
		if (getKeyJsonValueFromContainer(o, field_names[f].name, field_names[f].len, &v))
		{
			walk_field(&fs[f], &v, payload);
			if (f == F_PAYLOAD)
				have_payload = fs[f].present;
		}
	}
}

/*
 * One item of another entry (a transaction's push, a cycle's sink item),
 * read by the same rules as a pushed item; its errors name it as `what`.
 * The caller zeroes `it` and may set its id (id_given).
 */
void
qs_push_read_item(JsonbContainer *o, const char *what, const QsPushRules *rules,
				  const char *psub, QsPushItem *it)
{
	Field		fs[F_COUNT];
	Held		err;

	memset(&err, 0, sizeof(err));
	walk_item(fs, o, rules->trace);
	if (!item_rules(fs, &err, 0, what, rules, psub, psub ? strlen(psub) : 0, it))
		raise_held(&err);
}

/*
 * The jsonb's request walked into `st`: the same fields, the same
 * finish_item; no text, so no syntax error can come first and the first
 * item error ends the walk.
 */
static void
walk_request(PtState *st, Jsonb *jb, const char *psub)
{
	JsonbValue	v;
	JsonbContainer *arr;
	int			n;

	init_state(st, psub, false);
	if (!JB_ROOT_IS_OBJECT(jb))
	{
		st->top = TOP_OTHER;
		return;
	}
	st->top = TOP_OBJECT;
	if (getKeyJsonValueFromContainer(&jb->root, "items", 5, &v) == NULL)
		return;
	if (v.type == jbvNull)
	{
		st->items_kind = ITEMS_NULL;
		return;
	}
	if (v.type != jbvBinary || !JsonContainerIsArray(v.val.binary.data))
	{
		st->items_kind = ITEMS_OTHER;
		return;
	}
	st->items_kind = ITEMS_ARRAY;
	arr = v.val.binary.data;
	n = JsonContainerSize(arr);
	for (int i = 0; i < n && !st->item_err.set; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(arr, i);

		CHECK_FOR_INTERRUPTS();
		if (e->type != jbvBinary || !JsonContainerIsObject(e->val.binary.data))
		{
			hold(&st->item_err, ERRCODE_INVALID_PARAMETER_VALUE,
				 psprintf("%s must be a JSON object", item_what(st->nitems, NULL)), NULL);
			break;
		}
		walk_item(st->f, e->val.binary.data, true);
		finish_item(st);
	}
}

/*
 * SQL: queen.push(request jsonb, tenant uuid, producer_sub text)
 *
 * The jsonb walked into the same items through the same checks
 * (finish_item, check_request): push_text's rules, errors and answer.
 * Walking was faster than writing the jsonb out as text for the text
 * reader (bench/README.md).
 */
/*
 * The arguments both SQL entries share: (request, tenant, producer_sub).
 * Returns the producer subject: the caller's (the token's), never the body's.
 */
static char *
entry_args(FunctionCallInfo fcinfo, pg_uuid_t *tenant)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("items array is required")));
	qs_tenant_arg(fcinfo, 1, tenant);
	return PG_NARGS() > 2 && !PG_ARGISNULL(2) ? text_to_cstring(PG_GETARG_TEXT_PP(2)) : NULL;
}

PG_FUNCTION_INFO_V1(qs_push);
Datum
qs_push(PG_FUNCTION_ARGS)
{
	pg_uuid_t	tenant;
	char	   *psub = entry_args(fcinfo, &tenant);
	Jsonb	   *req = PG_GETARG_JSONB_P(0);
	PtState		st;
	int			ng;

	walk_request(&st, req, psub);
	check_request(&st);

	qs_spi_connect();
	/* the groups live in SPI memory: the answer reads only the items */
	(void) qs_push_finish(st.batch, &tenant, st.items, st.nitems, &ng);
	qs_spi_finish();
	PG_RETURN_JSONB_P(answer_jsonb(st.items, st.nitems));
}

/* SQL: queen.push_text(request text, tenant uuid, producer_sub text) */
PG_FUNCTION_INFO_V1(qs_push_text);
Datum
qs_push_text(PG_FUNCTION_ARGS)
{
	pg_uuid_t	tenant;
	char	   *psub = entry_args(fcinfo, &tenant);
	text	   *req = PG_GETARG_TEXT_PP(0);
	PtState		st;
	int			ng;

	read_request(&st, VARDATA_ANY(req), VARSIZE_ANY_EXHDR(req), psub, false);

	qs_spi_connect();
	/* the groups live in SPI memory: the answer reads only the items */
	(void) qs_push_finish(st.batch, &tenant, st.items, st.nitems, &ng);
	qs_spi_finish();
	PG_RETURN_TEXT_P(answer(st.items, st.nitems));
}

/* Which request of a merged push an error is about. */
static void
many_context(void *arg)
{
	int		   *k = arg;

	errcontext("push request %d", *k + 1);
}

/*
 * SQL: queen.push_text_many(requests text[], tenant uuid, producer_subs text[])
 *
 * Several push requests of one tenant pushed as one: each answer is
 * push_text's for its request, as if the requests had been pushed one
 * after the other in one transaction (qs_push_begin_many), while each
 * partition gets one segment and one allocator update for all of them.
 * The listener's group commit calls it on the pushes of a group. Any error
 * fails the whole call (its context names the request).
 */
PG_FUNCTION_INFO_V1(qs_push_text_many);
Datum
qs_push_text_many(PG_FUNCTION_ARGS)
{
	Datum	   *reqs;
	bool	   *req_nulls;
	int			n;
	Datum	   *subs = NULL;
	bool	   *sub_nulls = NULL;
	int			nsubs = 0;
	pg_uuid_t	tenant;
	PtState    *st;
	int		   *first;
	int			total = 0;
	QsPushItem *items;
	QsPushBatch *b;
	Datum	   *answers;
	int			ng;
	int			k = 0;
	ErrorContextCallback errcb;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("requests must not be null")));
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(0), TEXTOID, -1, false, TYPALIGN_INT,
					  &reqs, &req_nulls, &n);
	qs_tenant_arg(fcinfo, 1, &tenant);
	if (PG_NARGS() > 2 && !PG_ARGISNULL(2))
	{
		deconstruct_array(PG_GETARG_ARRAYTYPE_P(2), TEXTOID, -1, false, TYPALIGN_INT,
						  &subs, &sub_nulls, &nsubs);
		if (nsubs != n)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("producer_subs must have one element per request"),
					 errdetail("There are %d requests and %d producer subjects.", n, nsubs)));
	}

	st = palloc(sizeof(PtState) * Max(n, 1));
	first = palloc(sizeof(int) * (n + 1));
	errcb.callback = many_context;
	errcb.arg = &k;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	for (k = 0; k < n; k++)
	{
		text	   *t;

		CHECK_FOR_INTERRUPTS();
		if (req_nulls[k])
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("items array is required")));
		t = DatumGetTextPP(reqs[k]);
		read_request(&st[k], VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t),
					 subs && !sub_nulls[k] ? TextDatumGetCString(subs[k]) : NULL, true);
		first[k] = total;
		total += st[k].nitems;
	}
	error_context_stack = errcb.previous;
	first[n] = total;

	/* one array of every item, in request order, grouped as one push */
	items = palloc_extended(sizeof(QsPushItem) * Max(total, 1), MCXT_ALLOC_HUGE);
	b = qs_push_begin_many();
	for (k = 0; k < n; k++)
	{
		memcpy(items + first[k], st[k].items, sizeof(QsPushItem) * st[k].nitems);
		pfree(st[k].items);
		for (int i = first[k]; i < first[k + 1]; i++)
		{
			CHECK_FOR_INTERRUPTS();
			items[i].req = k;
			qs_push_add(b, items, i);
		}
	}

	qs_spi_connect();
	(void) qs_push_finish(b, &tenant, items, total, &ng);
	qs_spi_finish();

	answers = palloc(sizeof(Datum) * Max(n, 1));
	for (k = 0; k < n; k++)
		answers[k] = PointerGetDatum(answer(items + first[k], first[k + 1] - first[k]));
	PG_RETURN_ARRAYTYPE_P(construct_array(answers, n, JSONOID, -1, false, TYPALIGN_INT));
}
