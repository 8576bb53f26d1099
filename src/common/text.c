/*
 * text.c: the one rule for every string that comes from outside, from a
 * URL (path segments, query values) or from a caller-made segment
 * (transaction ids, producer subjects, payloads): valid UTF-8, no NUL byte,
 * and for names (queues, partitions, consumer groups) at most 255 bytes,
 * the limit push applies. Stored text must read back and dump cleanly, and
 * a C string cut short at a NUL would silently name something else.
 */
#include "common/text.h"

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
 * Why a name cannot be given to a new queue, partition or consumer group,
 * or NULL: besides the rule above, every HTTP route carries a name as one
 * URL path segment, where "/" separates segments and clients resolve "."
 * and ".." before sending (Queen itself takes any string, and such a name
 * is then unreachable over HTTP).
 */
const char *
qs_new_name_problem(const char *name)
{
	const char *why = qs_name_problem(name);

	if (why != NULL)
		return why;
	if (strchr(name, '/') != NULL)
		return "must not contain \"/\"";
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return "must not be \".\" or \"..\"";
	return NULL;
}

/* The detail that goes with qs_new_name_problem's own reasons, or NULL. */
const char *
qs_new_name_detail(const char *why)
{
	if (strncmp(why, "must not contain", 16) == 0 || strncmp(why, "must not be \"", 13) == 0)
		return "HTTP routes carry a name as one URL path segment.";
	return NULL;
}

static void
check_name(const char *kind, const char *item, const char *name, const char *why)
{
	char		what[128];
	const char *detail;

	if (why == NULL)
		return;
	if (item)
		snprintf(what, sizeof(what), "%s: \"%s\"", item, kind);
	else
		snprintf(what, sizeof(what), "%s name", kind);
	if (name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what)));
	detail = qs_new_name_detail(why);
	if (detail != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s %s", what, why),
				 errdetail("%s", detail)));
	qs_check_text(what, name, strlen(name), QS_NAME_MAX);
}

/*
 * A name (`kind` is "queue", "partition", ...): not empty, valid text, at
 * most QS_NAME_MAX bytes, else 22023 naming it: "queue name", or
 * `<item>: "queue"` for a field of a request item.
 */
void
qs_check_name(const char *kind, const char *item, const char *name)
{
	check_name(kind, item, name, qs_name_problem(name));
}

/* The same for a name that a push, configure or pop may create. */
void
qs_check_new_name(const char *kind, const char *item, const char *name)
{
	check_name(kind, item, name, qs_new_name_problem(name));
}
