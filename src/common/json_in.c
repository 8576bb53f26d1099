/*
 * json_in.c: read request bodies (jsonb) with precise, SQLSTATE-bearing errors.
 *
 * `what` names the object being read ("item 3", "request") so an error says
 * exactly which field of which element was wrong.
 */
#include "common/ids.h"
#include "common/json.h"

#include "utils/builtins.h"
#include "utils/numeric.h"

static void
bad_field(const char *what, const char *key, const char *want)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s: \"%s\" must be %s", what, key, want)));
}

JsonbContainer *
qs_json_object_arg(Jsonb *jb, const char *what)
{
	if (!JB_ROOT_IS_OBJECT(jb))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a JSON object", what)));
	return &jb->root;
}

bool
qs_json_get(JsonbContainer *obj, const char *key, JsonbValue *out)
{
	JsonbValue *v = getKeyJsonValueFromContainer(obj, key, strlen(key), out);

	return v != NULL && v->type != jbvNull;
}

char *
qs_json_string(JsonbContainer *obj, const char *key, const char *what, bool required)
{
	JsonbValue	v;

	if (!qs_json_get(obj, key, &v))
	{
		if (required)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s: \"%s\" is required", what, key)));
		return NULL;
	}
	if (v.type != jbvString)
		bad_field(what, key, "a string");
	return pnstrdup(v.val.string.val, v.val.string.len);
}

bool
qs_json_bool(JsonbContainer *obj, const char *key, const char *what, bool dflt)
{
	JsonbValue	v;

	if (!qs_json_get(obj, key, &v))
		return dflt;
	if (v.type != jbvBool)
		bad_field(what, key, "a boolean");
	return v.val.boolean;
}

int64
qs_json_int(JsonbContainer *obj, const char *key, const char *what, int64 dflt)
{
	JsonbValue	v;
	Datum		num;
	Datum		whole;

	if (!qs_json_get(obj, key, &v))
		return dflt;
	if (v.type != jbvNumeric)
		bad_field(what, key, "a number");
	num = NumericGetDatum(v.val.numeric);
	whole = DirectFunctionCall2(numeric_trunc, num, Int32GetDatum(0));
	if (!DatumGetBool(DirectFunctionCall2(numeric_eq, num, whole)))
		bad_field(what, key, "an integer");
	/* numeric_int8 raises 22003 when it does not fit */
	return DatumGetInt64(DirectFunctionCall1(numeric_int8, whole));
}

bool
qs_json_uuid(JsonbContainer *obj, const char *key, const char *what, bool required, pg_uuid_t *out)
{
	char	   *s = qs_json_string(obj, key, what, required);

	if (s == NULL)
		return false;
	if (!qs_uuid_parse(s, strlen(s), out))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: \"%s\" must be a UUID", what, key),
				 errdetail("Got \"%s\".", s)));
	return true;
}

/* An array field, or NULL when absent or JSON null. */
JsonbContainer *
qs_json_array(JsonbContainer *obj, const char *key, const char *what)
{
	JsonbValue	v;

	if (!qs_json_get(obj, key, &v))
		return NULL;
	if (v.type != jbvBinary || !JsonContainerIsArray(v.val.binary.data))
		bad_field(what, key, "an array");
	return v.val.binary.data;
}

/* The container of an object/array value, or NULL for a scalar. */
JsonbContainer *
qs_json_container(JsonbValue *v)
{
	return v->type == jbvBinary ? v->val.binary.data : NULL;
}

/* Any JSON value back to JSON text. */
char *
qs_json_text(JsonbValue *v, int *len)
{
	char	   *s;

	if (v->type == jbvBinary)
		s = JsonbToCString(NULL, v->val.binary.data, v->val.binary.len);
	else
	{
		Jsonb	   *jb = JsonbValueToJsonb(v);

		s = JsonbToCString(NULL, &jb->root, VARSIZE(jb));
	}
	*len = strlen(s);
	return s;
}

/* A JSON string value as a C string; NULL for anything else. */
char *
qs_json_cstring(JsonbValue *v)
{
	if (v->type != jbvString)
		return NULL;
	return pnstrdup(v->val.string.val, v->val.string.len);
}
