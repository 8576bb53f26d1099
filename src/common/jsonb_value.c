/*
 * jsonb_value.c: JSON text to an in-memory JsonbValue, so that an answer
 * embedding stored payloads can be built as a jsonb value directly instead
 * of being written as text and parsed whole (the pop answer: its own keys
 * and ids would otherwise be lexed and sorted again on every call).
 * The value equals what jsonb_in makes of the same text.
 */
#include "common/json.h"

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonfuncs.h"

typedef struct JvState
{
	JsonbParseState *ps;
	JsonbValue *res;
} JvState;

static void
jv_push_scalar(JvState *st, JsonbValue *v)
{
	if (st->ps == NULL)
	{
		/* a scalar document: the value itself */
		st->res = palloc(sizeof(JsonbValue));
		*st->res = *v;
	}
	else if (st->ps->contVal.type == jbvArray)
		st->res = pushJsonbValue(&st->ps, WJB_ELEM, v);
	else
		st->res = pushJsonbValue(&st->ps, WJB_VALUE, v);
}

static void
jv_object_start(void *arg)
{
	JvState    *st = arg;

	CHECK_FOR_INTERRUPTS();
	st->res = pushJsonbValue(&st->ps, WJB_BEGIN_OBJECT, NULL);
}

static void
jv_object_end(void *arg)
{
	JvState    *st = arg;

	st->res = pushJsonbValue(&st->ps, WJB_END_OBJECT, NULL);
}

static void
jv_array_start(void *arg)
{
	JvState    *st = arg;

	CHECK_FOR_INTERRUPTS();
	st->res = pushJsonbValue(&st->ps, WJB_BEGIN_ARRAY, NULL);
}

static void
jv_array_end(void *arg)
{
	JvState    *st = arg;

	st->res = pushJsonbValue(&st->ps, WJB_END_ARRAY, NULL);
}

static void
check_string_len(size_t len)
{
	if (len > JENTRY_OFFLENMASK)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("string too long to represent as jsonb string"),
				 errdetail("Due to an implementation restriction, jsonb strings cannot exceed %d bytes.",
						   JENTRY_OFFLENMASK)));
}

static void
jv_field_start(void *arg, char *fname, bool isnull)
{
	JvState    *st = arg;
	JsonbValue	v;

	check_string_len(strlen(fname));
	v.type = jbvString;
	v.val.string.len = strlen(fname);
	v.val.string.val = fname;
	st->res = pushJsonbValue(&st->ps, WJB_KEY, &v);
}

static void
jv_scalar(void *arg, char *token, JsonTokenType type)
{
	JvState    *st = arg;
	JsonbValue	v;

	switch (type)
	{
		case JSON_TOKEN_STRING:
			check_string_len(strlen(token));
			v.type = jbvString;
			v.val.string.len = strlen(token);
			v.val.string.val = token;
			break;
		case JSON_TOKEN_NUMBER:
			v.type = jbvNumeric;
			v.val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in,
																CStringGetDatum(token),
																ObjectIdGetDatum(InvalidOid),
																Int32GetDatum(-1)));
			break;
		case JSON_TOKEN_TRUE:
			v.type = jbvBool;
			v.val.boolean = true;
			break;
		case JSON_TOKEN_FALSE:
			v.type = jbvBool;
			v.val.boolean = false;
			break;
		default:
			v.type = jbvNull;
			break;
	}
	jv_push_scalar(st, &v);
}

/*
 * The JsonbValue of `len` bytes of JSON text, null when there are none (as
 * qsj_raw writes an empty payload); bad text raises jsonb_in's error.
 */
JsonbValue *
qs_json_to_jsonb_value(const char *json, int len)
{
	JvState		st = {NULL, NULL};
	JsonSemAction sem = {0};
	JsonLexContext *lex;

	if (len <= 0)
	{
		st.res = palloc(sizeof(JsonbValue));
		st.res->type = jbvNull;
		return st.res;
	}
	lex = makeJsonLexContextCstringLen((char *) json, len, GetDatabaseEncoding(), true);
	sem.semstate = &st;
	sem.object_start = jv_object_start;
	sem.object_end = jv_object_end;
	sem.array_start = jv_array_start;
	sem.array_end = jv_array_end;
	sem.object_field_start = jv_field_start;
	sem.scalar = jv_scalar;
	pg_parse_json_or_ereport(lex, &sem);
	return st.res;
}
