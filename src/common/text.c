/*
 * text.c: the one rule for every string that comes from outside, from a
 * URL (path segments, query values) or from a caller-made segment
 * (transaction ids, producer subjects, payloads): valid UTF-8, no NUL byte,
 * and for names (queues, partitions, consumer groups) at most 255 bytes,
 * the limit push applies. Stored text must read back and dump cleanly, and
 * a C string cut short at a NUL would silently name something else.
 */
#include "common/common.h"

#include "mb/pg_wchar.h"

/* Why `s` (len bytes) breaks the rule, or NULL; max_len 0: no limit. */
const char *
qs_text_problem(const char *s, size_t len, size_t max_len)
{
	/* pg_verify_mbstr refuses a NUL byte too */
	if (len > (size_t) PG_INT32_MAX || !pg_verify_mbstr(PG_UTF8, s, (int) len, true))
		return "must be valid UTF-8 without NUL bytes";
	if (max_len > 0 && len > max_len)
		return "is too long";
	return NULL;
}

/* Raise 22023 naming `what` when `s` breaks the rule. */
void
qs_check_text(const char *what, const char *s, size_t len, size_t max_len)
{
	const char *why = qs_text_problem(s, len, max_len);

	if (why == NULL)
		return;
	if (max_len > 0 && len > max_len && strcmp(why, "is too long") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s %s", what, why),
				 max_len == QS_NAME_MAX ? errdetail("Names are at most %zu bytes.", max_len)
				 : errdetail("It is at most %zu bytes.", max_len)));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s %s", what, why)));
}

/* Why a name is refused ("must not be empty", "is too long", ...), or NULL. */
const char *
qs_name_problem(const char *name)
{
	if (name[0] == '\0')
		return "must not be empty";
	return qs_text_problem(name, strlen(name), QS_NAME_MAX);
}

/*
 * A name (`kind` is "queue", "partition", ...): not empty, valid text, at
 * most QS_NAME_MAX bytes, else 22023 naming it: "queue name", or
 * `<item>: "queue"` for a field of a request item.
 */
void
qs_check_name(const char *kind, const char *item, const char *name)
{
	char		what[128];

	if (qs_name_problem(name) == NULL)
		return;
	if (item)
		snprintf(what, sizeof(what), "%s: \"%s\"", item, kind);
	else
		snprintf(what, sizeof(what), "%s name", kind);
	if (name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what)));
	qs_check_text(what, name, strlen(name), QS_NAME_MAX);
}
