/*
 * shim.c: the few backend services the fuzzed code uses, without a server.
 * See shim.h. Everything here is deliberately small and strict: memory is
 * malloc'd per allocation (so AddressSanitizer sees every overrun and every
 * use after pfree) and freed at the end of each input.
 */
#include "shim.h"

#include "common/jsonapi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/builtins.h"
#include "funcapi.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/uuid.h"
#include "nodes/pg_list.h"
#include <sys/time.h>

#include <errno.h>
#include <math.h>

sigjmp_buf *PG_exception_stack = NULL;
ErrorContextCallback *error_context_stack = NULL;
int			fuzz_last_sqlstate;
char		fuzz_last_message[512];

MemoryContext CurrentMemoryContext = NULL;
MemoryContext TopMemoryContext = NULL;
MemoryContext ErrorContext = NULL;

/* ------------------------------------------------------------ the arena */

typedef struct Chunk
{
	struct Chunk *prev,
			   *next;
	size_t		size;
	max_align_t data[];
} Chunk;

static Chunk arena = {&arena, &arena, 0};

static void *
arena_alloc(size_t size, bool zero)
{
	Chunk	   *c;

	if (size > MaxAllocHugeSize)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("invalid memory alloc request size %zu", size)));
	c = zero ? calloc(1, sizeof(Chunk) + size) : malloc(sizeof(Chunk) + size);
	if (c == NULL)
		abort();
	c->size = size;
	c->next = arena.next;
	c->prev = &arena;
	arena.next->prev = c;
	arena.next = c;
	return c->data;
}

static Chunk *
chunk_of(void *p)
{
	return (Chunk *) ((char *) p - offsetof(Chunk, data));
}

void
pfree(void *p)
{
	Chunk	   *c = chunk_of(p);

	c->prev->next = c->next;
	c->next->prev = c->prev;
	free(c);
}

void
fuzz_reset(void)
{
	while (arena.next != &arena)
		pfree(arena.next->data);
}

void *
palloc(Size size)
{
	if (size > MaxAllocSize)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("invalid memory alloc request size %zu", size)));
	return arena_alloc(size, false);
}

void *
palloc0(Size size)
{
	if (size > MaxAllocSize)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("invalid memory alloc request size %zu", size)));
	return arena_alloc(size, true);
}

void *
palloc_extended(Size size, int flags)
{
	return arena_alloc(size, (flags & MCXT_ALLOC_ZERO) != 0);
}

void *
repalloc(void *p, Size size)
{
	void	   *n = palloc(size);
	Chunk	   *c = chunk_of(p);

	memcpy(n, p, Min(size, c->size));
	pfree(p);
	return n;
}

void *
MemoryContextAlloc(MemoryContext cxt, Size size)
{
	return palloc(size);
}

void *
MemoryContextAllocZero(MemoryContext cxt, Size size)
{
	return palloc0(size);
}

void *
MemoryContextAllocHuge(MemoryContext cxt, Size size)
{
	return arena_alloc(size, false);
}

char *
pstrdup(const char *s)
{
	size_t		n = strlen(s);
	char	   *d = palloc(n + 1);

	memcpy(d, s, n + 1);
	return d;
}

char *
pnstrdup(const char *s, Size len)
{
	size_t		n = strnlen(s, len);
	char	   *d = palloc(n + 1);

	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

char *
MemoryContextStrdup(MemoryContext cxt, const char *s)
{
	return pstrdup(s);
}

/* frontend names of the same (libpgcommon's objects may ask for them) */
void *
pg_malloc(size_t size)
{
	return palloc(size);
}

void *
pg_malloc0(size_t size)
{
	return palloc0(size);
}

void *
pg_malloc_extended(size_t size, int flags)
{
	return palloc_extended(size, flags);
}

void *
pg_realloc(void *p, size_t size)
{
	return repalloc(p, size);
}

void
pg_free(void *p)
{
	pfree(p);
}

char *
pg_strdup(const char *s)
{
	return pstrdup(s);
}

/* ------------------------------------------------------------ ereport */

static int	cur_elevel;

bool
errstart(int elevel, const char *domain)
{
	cur_elevel = elevel;
	fuzz_last_sqlstate = ERRCODE_INTERNAL_ERROR;
	fuzz_last_message[0] = '\0';
	return elevel >= ERROR;		/* warnings and below: nothing to do */
}

bool
errstart_cold(int elevel, const char *domain)
{
	return errstart(elevel, domain);
}

void
errfinish(const char *filename, int lineno, const char *funcname)
{
	if (cur_elevel >= ERROR)
	{
		if (fuzz_jmp == NULL)
		{
			fprintf(stderr, "ereport(ERROR) outside fuzz_try: %s (%s:%d)\n",
					fuzz_last_message, filename, lineno);
			abort();
		}
		siglongjmp(*fuzz_jmp, 1);
	}
}

int
errcode(int sqlerrcode)
{
	fuzz_last_sqlstate = sqlerrcode;
	return 0;
}

int
errcode_for_file_access(void)
{
	return 0;
}

static void
keep(const char *fmt, va_list ap)
{
	/* formatting every message also checks its arguments under ASan */
	vsnprintf(fuzz_last_message, sizeof(fuzz_last_message), fmt, ap);
}

#define KEEP_FIRST(fmt) do { va_list ap; va_start(ap, fmt); \
	if (fuzz_last_message[0] == '\0') keep(fmt, ap); \
	else { char scratch[512]; vsnprintf(scratch, sizeof(scratch), fmt, ap); } \
	va_end(ap); } while (0)

/* the others are only formatted: ASan checks their arguments too */
#define FORMAT_ONLY(fmt) do { va_list ap; char scratch[512]; va_start(ap, fmt); \
	vsnprintf(scratch, sizeof(scratch), fmt, ap); va_end(ap); } while (0)

int
errmsg(const char *fmt,...)
{
	KEEP_FIRST(fmt);
	return 0;
}

int
errmsg_internal(const char *fmt,...)
{
	KEEP_FIRST(fmt);
	return 0;
}

int
errdetail(const char *fmt,...)
{
	FORMAT_ONLY(fmt);
	return 0;
}

int
errdetail_internal(const char *fmt,...)
{
	FORMAT_ONLY(fmt);
	return 0;
}

int
errhint(const char *fmt,...)
{
	FORMAT_ONLY(fmt);
	return 0;
}

void
FlushErrorState(void)
{
}

/* ------------------------------------------------------------ fmgr */

Datum
DirectFunctionCall1Coll(PGFunction func, Oid collation, Datum arg1)
{
	LOCAL_FCINFO(fcinfo, 1);

	InitFunctionCallInfoData(*fcinfo, NULL, 1, collation, NULL, NULL);
	fcinfo->args[0].value = arg1;
	fcinfo->args[0].isnull = false;
	return func(fcinfo);
}

Datum
DirectFunctionCall2Coll(PGFunction func, Oid collation, Datum arg1, Datum arg2)
{
	LOCAL_FCINFO(fcinfo, 2);

	InitFunctionCallInfoData(*fcinfo, NULL, 2, collation, NULL, NULL);
	fcinfo->args[0].value = arg1;
	fcinfo->args[0].isnull = false;
	fcinfo->args[1].value = arg2;
	fcinfo->args[1].isnull = false;
	return func(fcinfo);
}

struct varlena *
pg_detoast_datum(struct varlena *datum)
{
	return datum;
}

struct varlena *
pg_detoast_datum_packed(struct varlena *datum)
{
	return datum;
}

/* numutils.c's, which is the backend's, not libpgcommon's */
int
pg_lltoa(int64 value, char *a)
{
	return snprintf(a, MAXINT8LEN + 1, INT64_FORMAT, value);
}

/* ------------------------------------------------------------ encoding */

int
GetDatabaseEncoding(void)
{
	return PG_UTF8;
}

const char *
GetDatabaseEncodingName(void)
{
	return "UTF8";
}

bool
pg_verifymbstr(const char *mbstr, int len, bool noError)
{
	if (pg_encoding_verifymbstr(PG_UTF8, mbstr, len) == len)
		return true;
	if (!noError)
		ereport(ERROR, (errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
						errmsg("invalid byte sequence for encoding \"UTF8\"")));
	return false;
}

bool
pg_verify_mbstr(int encoding, const char *mbstr, int len, bool noError)
{
	return pg_verifymbstr(mbstr, len, noError);
}

/* ------------------------------------------------------------ jsonb stand-in */

/*
 * A container is addressed as PostgreSQL's JsonbContainer: its header word
 * (JB_FOBJECT/JB_FARRAY/JB_FSCALAR | count) first, so the header macros work,
 * then a pointer to our node. A Jsonb is a varlena header and a root
 * container, as PostgreSQL's.
 */
typedef struct FCont
{
	uint32		header;
	char		node[sizeof(void *)];	/* unaligned: memcpy */
} FCont;

typedef struct FJsonb
{
	int32		vl_len_;
	FCont		root;
} FJsonb;

typedef struct FNum
{
	const char *text;
	bool		integral;
	bool		truncated;		/* numeric_trunc's result */
} FNum;

typedef struct FNode
{
	enum jbvType type;			/* jbvNull ... jbvBool, jbvArray, jbvObject */
	const char *str;
	int			len;
	bool		b;
	FNum		num;
	int			n,
				cap;
	const char **keys;
	struct FNode **vals;
	FCont		cont;
} FNode;

static FNode *
cont_node(const JsonbContainer *c)
{
	FNode	   *n;

	memcpy(&n, ((const FCont *) c)->node, sizeof(n));
	return n;
}

static void
set_cont(FNode *n, FCont *c, uint32 flags)
{
	c->header = flags | (uint32) n->n;
	memcpy(c->node, &n, sizeof(n));
}

static void
fix_header(FNode *n)
{
	if (n->type == jbvObject)
		set_cont(n, &n->cont, JB_FOBJECT);
	else if (n->type == jbvArray)
		set_cont(n, &n->cont, JB_FARRAY);
}

/* numeric_in's limits: exponent within +-1000, scale and weight that fit */
static void
check_number(const char *t, FNum *num)
{
	const char *p = t;
	int			intd = 0,
				fracd = 0,
				lastnz = -1;	/* index within fraction of the last nonzero digit */
	long		exp = 0;
	bool		nonzero_int = false;

	if (*p == '-')
		p++;
	for (; isdigit((unsigned char) *p); p++)
	{
		if (*p != '0' || nonzero_int)
		{
			nonzero_int = true;
			intd++;
		}
	}
	if (*p == '.')
		for (p++; isdigit((unsigned char) *p); p++, fracd++)
			if (*p != '0')
				lastnz = fracd;
	if (*p == 'e' || *p == 'E')
	{
		char	   *end;

		errno = 0;
		exp = strtol(p + 1, &end, 10);
		if (errno == ERANGE || exp > 1000 || exp < -1000)
			ereport(ERROR, (errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
							errmsg("invalid input syntax for type numeric: \"%s\"", t)));
	}
	if (fracd - exp > 16383 || intd + exp > 131072)
		ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
						errmsg("value overflows numeric format")));
	num->text = t;
	num->integral = lastnz < exp;	/* every nonzero fraction digit moves left of the point */
	num->truncated = false;
}

typedef struct Build
{
	FNode	   *root;
	FNode	   *stack[1100];
	int			depth;
	const char *key;
} Build;

static void
add(Build *b, FNode *n)
{
	FNode	   *p;

	if (b->depth == 0)
	{
		b->root = n;
		return;
	}
	p = b->stack[b->depth - 1];
	if (p->n == p->cap)
	{
		int			cap = p->cap ? p->cap * 2 : 4;
		FNode	  **vals = palloc(sizeof(FNode *) * cap);
		const char **keys = palloc(sizeof(char *) * cap);

		if (p->n)
		{
			memcpy(vals, p->vals, sizeof(FNode *) * p->n);
			memcpy(keys, p->keys, sizeof(char *) * p->n);
			pfree(p->vals);
			pfree(p->keys);
		}
		p->vals = vals;
		p->keys = keys;
		p->cap = cap;
	}
	p->keys[p->n] = p->type == jbvObject ? b->key : NULL;
	p->vals[p->n++] = n;
	fix_header(p);
}

static void
open_container(void *state, enum jbvType t)
{
	Build	   *b = state;
	FNode	   *n = palloc0(sizeof(FNode));

	/* the backend's check_stack_depth() stops deep nesting with an error */
	if (b->depth >= (int) lengthof(b->stack) - 1)
		ereport(ERROR, (errcode(ERRCODE_STATEMENT_TOO_COMPLEX),
						errmsg("stack depth limit exceeded")));
	n->type = t;
	fix_header(n);
	add(b, n);
	b->stack[b->depth++] = n;
}

static void
obj_start(void *state)
{
	open_container(state, jbvObject);
}

static void
arr_start(void *state)
{
	open_container(state, jbvArray);
}

static void
close_container(void *state)
{
	((Build *) state)->depth--;
}

static void
field_start(void *state, char *fname, bool isnull)
{
	((Build *) state)->key = fname;
}

static void
scalar(void *state, char *token, JsonTokenType type)
{
	FNode	   *n = palloc0(sizeof(FNode));

	switch (type)
	{
		case JSON_TOKEN_STRING:
			n->type = jbvString;
			n->str = token;
			n->len = strlen(token);
			break;
		case JSON_TOKEN_NUMBER:
			n->type = jbvNumeric;
			check_number(token, &n->num);
			break;
		case JSON_TOKEN_TRUE:
		case JSON_TOKEN_FALSE:
			n->type = jbvBool;
			n->b = type == JSON_TOKEN_TRUE;
			break;
		default:
			n->type = jbvNull;
			break;
	}
	add(state, n);
}

static FJsonb *
wrap(FNode *n)
{
	FJsonb	   *jb = palloc0(sizeof(FJsonb));

	SET_VARSIZE(jb, sizeof(FJsonb));
	if (n->type == jbvObject)
		set_cont(n, &jb->root, JB_FOBJECT);
	else if (n->type == jbvArray)
		set_cont(n, &jb->root, JB_FARRAY);
	else
	{
		/* a scalar root is a one-element array, as in PostgreSQL */
		FNode	   *a = palloc0(sizeof(FNode));

		a->type = jbvArray;
		a->n = a->cap = 1;
		a->vals = palloc(sizeof(FNode *));
		a->keys = palloc(sizeof(char *));
		a->vals[0] = n;
		a->keys[0] = NULL;
		set_cont(a, &jb->root, JB_FARRAY | JB_FSCALAR);
	}
	return jb;
}

struct Jsonb *
fuzz_jsonb(const char *text)
{
	JsonLexContext *lex = makeJsonLexContextCstringLen((char *) text, strlen(text), PG_UTF8, true);
	JsonSemAction sem = {0};
	Build	   *b = palloc0(sizeof(Build));
	JsonParseErrorType r;

	sem.semstate = b;
	sem.object_start = obj_start;
	sem.object_end = close_container;
	sem.array_start = arr_start;
	sem.array_end = close_container;
	sem.object_field_start = field_start;
	sem.scalar = scalar;
	r = pg_parse_json(lex, &sem);
	if (r != JSON_SUCCESS)
		ereport(ERROR, (errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
						errmsg("invalid input syntax for type json")));
	return (struct Jsonb *) wrap(b->root);
}

Datum
jsonb_in(PG_FUNCTION_ARGS)
{
	return PointerGetDatum(fuzz_jsonb(PG_GETARG_CSTRING(0)));
}

static void
fill(FNode *n, JsonbValue *v)
{
	memset(v, 0, sizeof(*v));
	v->type = n->type == jbvArray || n->type == jbvObject ? jbvBinary : n->type;
	switch (n->type)
	{
		case jbvString:
			v->val.string.val = (char *) n->str;
			v->val.string.len = n->len;
			break;
		case jbvNumeric:
			v->val.numeric = (Numeric) &n->num;
			break;
		case jbvBool:
			v->val.boolean = n->b;
			break;
		case jbvArray:
		case jbvObject:
			v->val.binary.data = (JsonbContainer *) &n->cont;
			v->val.binary.len = sizeof(FCont);
			break;
		default:
			break;
	}
}

JsonbValue *
getKeyJsonValueFromContainer(JsonbContainer *c, const char *key, int keylen, JsonbValue *res)
{
	FNode	   *n;

	if (!JsonContainerIsObject(c))
		return NULL;
	n = cont_node(c);
	/* jsonb keeps the last of duplicate keys */
	for (int i = n->n - 1; i >= 0; i--)
		if ((int) strlen(n->keys[i]) == keylen && memcmp(n->keys[i], key, keylen) == 0)
		{
			if (res == NULL)
				res = palloc(sizeof(JsonbValue));
			fill(n->vals[i], res);
			return res;
		}
	return NULL;
}

JsonbValue *
getIthJsonbValueFromContainer(JsonbContainer *c, uint32 i)
{
	FNode	   *n;
	JsonbValue *v;

	if (!JsonContainerIsArray(c))
		elog(ERROR, "not a jsonb array");
	n = cont_node(c);
	if (i >= (uint32) n->n)
		return NULL;
	v = palloc(sizeof(JsonbValue));
	fill(n->vals[i], v);
	return v;
}

void
escape_json(StringInfo buf, const char *str)
{
	appendStringInfoCharMacro(buf, '"');
	for (const char *p = str; *p; p++)
	{
		switch (*p)
		{
			case '\b': appendStringInfoString(buf, "\\b"); break;
			case '\f': appendStringInfoString(buf, "\\f"); break;
			case '\n': appendStringInfoString(buf, "\\n"); break;
			case '\r': appendStringInfoString(buf, "\\r"); break;
			case '\t': appendStringInfoString(buf, "\\t"); break;
			case '"': appendStringInfoString(buf, "\\\""); break;
			case '\\': appendStringInfoString(buf, "\\\\"); break;
			default:
				if ((unsigned char) *p < ' ')
					appendStringInfo(buf, "\\u%04x", (int) *p);
				else
					appendStringInfoCharMacro(buf, *p);
				break;
		}
	}
	appendStringInfoCharMacro(buf, '"');
}

static void
to_text(StringInfo out, FNode *n)
{
	switch (n->type)
	{
		case jbvNull: appendStringInfoString(out, "null"); break;
		case jbvBool: appendStringInfoString(out, n->b ? "true" : "false"); break;
		case jbvNumeric: appendStringInfoString(out, n->num.text); break;
		case jbvString: escape_json(out, n->str); break;
		case jbvArray:
		case jbvObject:
			appendStringInfoChar(out, n->type == jbvArray ? '[' : '{');
			for (int i = 0; i < n->n; i++)
			{
				if (i)
					appendStringInfoString(out, ", ");
				if (n->type == jbvObject)
				{
					escape_json(out, n->keys[i]);
					appendStringInfoString(out, ": ");
				}
				to_text(out, n->vals[i]);
			}
			appendStringInfoChar(out, n->type == jbvArray ? ']' : '}');
			break;
		default:
			elog(ERROR, "unknown jsonb node");
	}
}

char *
JsonbToCString(StringInfo out, JsonbContainer *in, int estimated_len)
{
	FNode	   *n = cont_node(in);

	if (out == NULL)
		out = makeStringInfo();
	if (in->header & JB_FSCALAR)
		n = n->vals[0];
	to_text(out, n);
	return out->data;
}

/* A JsonbValue tree (an answer built in memory) as our nodes. */
static FNode *
node_of(JsonbValue *v)
{
	FNode	   *n;

	if (v->type == jbvBinary)
		return cont_node(v->val.binary.data);
	n = palloc0(sizeof(FNode));
	n->type = v->type;
	switch (v->type)
	{
		case jbvNumeric:
			n->num = *(FNum *) v->val.numeric;
			break;
		case jbvString:
			n->str = pnstrdup(v->val.string.val, v->val.string.len);
			n->len = v->val.string.len;
			break;
		case jbvBool:
			n->b = v->val.boolean;
			break;
		case jbvArray:
		case jbvObject:
			n->n = n->cap = v->type == jbvArray ? v->val.array.nElems : v->val.object.nPairs;
			n->vals = palloc(sizeof(FNode *) * Max(n->n, 1));
			n->keys = palloc(sizeof(char *) * Max(n->n, 1));
			for (int i = 0; i < n->n; i++)
			{
				JsonbValue *e = v->type == jbvArray ? &v->val.array.elems[i] : &v->val.object.pairs[i].value;

				n->keys[i] = v->type == jbvArray ? NULL :
					pnstrdup(v->val.object.pairs[i].key.val.string.val,
							 v->val.object.pairs[i].key.val.string.len);
				n->vals[i] = node_of(e);
			}
			fix_header(n);
			break;
		default:
			break;
	}
	return n;
}

Jsonb *
JsonbValueToJsonb(JsonbValue *v)
{
	return (Jsonb *) wrap(node_of(v));
}

/* ------------------------------------------------------------ numeric */

static FNum *
fnum(Datum d)
{
	return (FNum *) DatumGetPointer(d);
}

Numeric
int64_to_numeric(int64 val)
{
	FNum	   *n = palloc0(sizeof(FNum));
	char		buf[MAXINT8LEN + 1];

	pg_lltoa(val, buf);
	n->text = pstrdup(buf);
	n->integral = true;
	return (Numeric) n;
}

Datum
numeric_trunc(PG_FUNCTION_ARGS)
{
	FNum	   *t = palloc(sizeof(FNum));

	*t = *fnum(PG_GETARG_DATUM(0));
	t->truncated = true;
	PG_RETURN_POINTER(t);
}

Datum
numeric_eq(PG_FUNCTION_ARGS)
{
	FNum	   *a = fnum(PG_GETARG_DATUM(0));
	FNum	   *b = fnum(PG_GETARG_DATUM(1));

	if (b->truncated && !a->truncated && strcmp(a->text, b->text) == 0)
		PG_RETURN_BOOL(a->integral);
	PG_RETURN_BOOL(strcmp(a->text, b->text) == 0);
}

/* The integer part of a (truncated) number, exactly; 22003 beyond int64. */
Datum
numeric_int8(PG_FUNCTION_ARGS)
{
	FNum	   *a = fnum(PG_GETARG_DATUM(0));
	const char *p = a->text;
	bool		neg = false;
	char		full[64];
	int			nfull = 0,
				nint = 0,
				nsig = 0;
	long		pos;
	__int128	v = 0;

	if (*p == '-')
		neg = true, p++;
	/* significant digits of the mantissa (leading zeros dropped), point position */
	for (; isdigit((unsigned char) *p); p++)
	{
		if (nfull == 0 && *p == '0')
			continue;
		if (nfull < 40)
			full[nfull] = *p;
		nfull++;
		nint++;
	}
	if (*p == '.')
		for (p++; isdigit((unsigned char) *p); p++)
		{
			if (nfull == 0 && *p == '0')
			{
				nint--;			/* 0.00x: the point is further left */
				continue;
			}
			if (nfull < 40)
				full[nfull] = *p;
			nfull++;
		}
	pos = nint + ((*p == 'e' || *p == 'E') ? strtol(p + 1, NULL, 10) : 0);
	/* integer part: the first `pos` significant digits, zero-padded */
	if (pos > 19)
		goto overflow;
	for (long i = 0; i < pos; i++)
	{
		v = v * 10 + (i < nfull && i < 40 ? full[i] - '0' : 0);
		nsig++;
	}
	if (neg)
		v = -v;
	if (v > PG_INT64_MAX || v < PG_INT64_MIN)
		goto overflow;
	PG_RETURN_INT64((int64) v);
overflow:
	ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					errmsg("bigint out of range")));
}

/* float8in's rule: a value that over- or underflows a double is an error */
Datum
numeric_float8(PG_FUNCTION_ARGS)
{
	FNum	   *a = fnum(PG_GETARG_DATUM(0));
	double		d;

	errno = 0;
	d = strtod(a->text, NULL);
	if (errno == ERANGE && (d == 0.0 || isinf(d)))
		ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
						errmsg("\"%s\" is out of range for type double precision", a->text)));
	PG_RETURN_FLOAT8(d);
}

/* ------------------------------------------------------------ odds and ends */

text *
cstring_to_text_with_len(const char *s, int len)
{
	text	   *t = palloc(len + VARHDRSZ);

	SET_VARSIZE(t, len + VARHDRSZ);
	memcpy(VARDATA(t), s, len);
	return t;
}

text *
cstring_to_text(const char *s)
{
	return cstring_to_text_with_len(s, strlen(s));
}

char *
text_to_cstring(const text *t)
{
	return pnstrdup(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

TimestampTz
GetCurrentTimestamp(void)
{
	struct timeval tp;

	gettimeofday(&tp, NULL);
	return (TimestampTz) (tp.tv_sec - ((POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY)) *
		USECS_PER_SEC + tp.tv_usec;
}

char *
unpack_sql_state(int sql_state)
{
	static char buf[12];

	for (int i = 0; i < 5; i++)
	{
		buf[i] = PGUNSIXBIT(sql_state);
		sql_state >>= 6;
	}
	buf[5] = '\0';
	return buf;
}

/* Reached only from SQL entry points the harnesses never call. */
#define NEVER(decl) decl { fprintf(stderr, "shim: %s called\n", __func__); abort(); }
NEVER(void InitMaterializedSRF(FunctionCallInfo fcinfo, bits32 flags))
NEVER(void tuplestore_putvalues(Tuplestorestate *state, TupleDesc tdesc, Datum *values, bool *isnull))
NEVER(Datum qs_uuid_datum(const pg_uuid_t *u))

/* pg_list.h's lappend, for code that collects pointers in a List */
List *
lappend(List *list, void *datum)
{
	if (list == NIL)
	{
		list = palloc(offsetof(List, initial_elements) + 8 * sizeof(ListCell));
		list->type = T_List;
		list->length = 0;
		list->max_length = 8;
		list->elements = list->initial_elements;
	}
	else if (list->length == list->max_length)
	{
		ListCell   *cells = palloc(sizeof(ListCell) * list->max_length * 2);

		memcpy(cells, list->elements, sizeof(ListCell) * list->length);
		if (list->elements != list->initial_elements)
			pfree(list->elements);
		list->elements = cells;
		list->max_length *= 2;
	}
	list->elements[list->length++].ptr_value = datum;
	return list;
}

/* ---------------------------------------------------------------- dynahash */
/*
 * A small chained hash table in place of the backend's dynahash, enough
 * for push.c's in-request tables: HASH_ENTER and HASH_FIND, keys compared
 * with the caller's function or as blobs; entries live in the input arena.
 */
#include <signal.h>

#include "utils/hsearch.h"

struct HTAB
{
	Size		keysize;
	Size		entrysize;
	HashValueFunc hash;
	HashCompareFunc match;
	int			nbuckets;
	void	  **buckets;		/* chains: each entry is [next pointer][entry] */
};

static uint32
blob_hash(const void *key, Size keysize)
{
	const unsigned char *p = key;
	uint32		h = 2166136261u;

	for (Size i = 0; i < keysize; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static int
blob_match(const void *a, const void *b, Size keysize)
{
	return memcmp(a, b, keysize);
}

HTAB *
hash_create(const char *tabname, long nelem, const HASHCTL *info, int flags)
{
	HTAB	   *t = palloc0(sizeof(HTAB));

	t->keysize = info->keysize;
	t->entrysize = info->entrysize;
	t->hash = (flags & HASH_FUNCTION) ? info->hash : blob_hash;
	t->match = (flags & HASH_COMPARE) ? info->match : blob_match;
	t->nbuckets = 1024;
	t->buckets = palloc0(sizeof(void *) * t->nbuckets);
	return t;
}

void *
hash_search(HTAB *t, const void *key, HASHACTION action, bool *foundPtr)
{
	uint32		b = t->hash(key, t->keysize) % t->nbuckets;
	void	  **link = &t->buckets[b];

	for (void *e = *link; e; e = *(void **) e)
	{
		void	   *entry = (char *) e + MAXALIGN(sizeof(void *));

		if (t->match(entry, key, t->keysize) == 0)
		{
			if (foundPtr)
				*foundPtr = true;
			return entry;
		}
	}
	if (foundPtr)
		*foundPtr = false;
	if (action != HASH_ENTER && action != HASH_ENTER_NULL)
		return NULL;
	{
		void	   *e = palloc0(MAXALIGN(sizeof(void *)) + t->entrysize);
		void	   *entry = (char *) e + MAXALIGN(sizeof(void *));

		*(void **) e = *link;
		*link = e;
		memcpy(entry, key, t->keysize);
		return entry;
	}
}

void
hash_destroy(HTAB *t)
{
	/* the arena goes with the input */
}

/* Interrupts never arrive here. */
volatile sig_atomic_t InterruptPending = false;

void
ProcessInterrupts(void)
{
}
