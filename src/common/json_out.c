/*
 * json_out.c: append JSON text to a buffer, then turn it into jsonb once.
 *
 * Responses embed stored payloads verbatim (they are JSON text already), so
 * building text and parsing it once is the simplest path; the answers of the
 * text entries (queen.push_text, queen.pop_text) are this text itself.
 */
#include "common/ids.h"
#include "common/json.h"

#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/json.h"

void
qsj_init(QsJson *j)
{
	initStringInfo(&j->buf);
	j->depth = 0;
	j->first[0] = true;
}

/*
 * A JSON string of `len` bytes. Ids, names and keys rarely need escaping:
 * they are copied whole; the rest goes through escape_json.
 */
static void
put_string(StringInfo buf, const char *s, int len)
{
	if (qs_json_plain_run(s, s + len) != s + len)
	{
		char	   *copy = pnstrdup(s, len);

		escape_json(buf, copy);
		pfree(copy);
		return;
	}
	enlargeStringInfo(buf, len + 2);
	buf->data[buf->len++] = '"';
	memcpy(buf->data + buf->len, s, len);
	buf->len += len;
	buf->data[buf->len++] = '"';
	buf->data[buf->len] = '\0';
}

/* The separator and key before a value, written in place when the key needs no escaping. */
static void
qsj_key(QsJson *j, const char *key)
{
	StringInfo	buf = &j->buf;
	bool		comma = !j->first[j->depth];
	int			len = key ? strlen(key) : 0;

	j->first[j->depth] = false;
	if (key && qs_json_plain_run(key, key + len) != key + len)
	{
		if (comma)
			appendStringInfoChar(buf, ',');
		put_string(buf, key, len);
		appendStringInfoChar(buf, ':');
		return;
	}
	enlargeStringInfo(buf, len + 4);
	if (comma)
		buf->data[buf->len++] = ',';
	if (key)
	{
		buf->data[buf->len++] = '"';
		memcpy(buf->data + buf->len, key, len);
		buf->len += len;
		buf->data[buf->len++] = '"';
		buf->data[buf->len++] = ':';
	}
	buf->data[buf->len] = '\0';
}

static void
qsj_open(QsJson *j, const char *key, char open)
{
	qsj_key(j, key);
	appendStringInfoChar(&j->buf, open);
	if (++j->depth >= QSJ_MAX_DEPTH)
		elog(ERROR, "JSON writer nested too deep");
	j->first[j->depth] = true;
}

void
qsj_object(QsJson *j, const char *key)
{
	qsj_open(j, key, '{');
}

void
qsj_array(QsJson *j, const char *key)
{
	qsj_open(j, key, '[');
}

void
qsj_end(QsJson *j, char close)
{
	Assert(j->depth > 0);
	j->depth--;
	appendStringInfoChar(&j->buf, close);
}

void
qsj_str(QsJson *j, const char *key, const char *val)
{
	qsj_key(j, key);
	if (val)
		put_string(&j->buf, val, strlen(val));
	else
		appendStringInfoString(&j->buf, "null");
}

/* `len` bytes of text, which hold no NUL (a JSON string's value cannot) */
void
qsj_strn(QsJson *j, const char *key, const char *val, int len)
{
	qsj_key(j, key);
	if (val)
		put_string(&j->buf, val, len);
	else
		appendStringInfoString(&j->buf, "null");
}

void
qsj_int(QsJson *j, const char *key, int64 val)
{
	char		digits[MAXINT8LEN + 1];

	qsj_key(j, key);
	appendBinaryStringInfo(&j->buf, digits, pg_lltoa(val, digits));
}

void
qsj_bool(QsJson *j, const char *key, bool val)
{
	qsj_key(j, key);
	appendStringInfoString(&j->buf, val ? "true" : "false");
}

void
qsj_null(QsJson *j, const char *key)
{
	qsj_key(j, key);
	appendStringInfoString(&j->buf, "null");
}

/* Embed JSON text as a value; empty text renders as null. */
void
qsj_raw(QsJson *j, const char *key, const char *json, int len)
{
	qsj_key(j, key);
	if (len > 0)
		appendBinaryStringInfo(&j->buf, json, len);
	else
		appendStringInfoString(&j->buf, "null");
}

void
qsj_uuid(QsJson *j, const char *key, const pg_uuid_t *u)
{
	char		s[QS_UUID_STRLEN + 1];

	qsj_key(j, key);
	if (u == NULL)
	{
		appendStringInfoString(&j->buf, "null");
		return;
	}
	qs_uuid_format(u, s);
	enlargeStringInfo(&j->buf, QS_UUID_STRLEN + 2);
	j->buf.data[j->buf.len++] = '"';
	memcpy(j->buf.data + j->buf.len, s, QS_UUID_STRLEN);
	j->buf.len += QS_UUID_STRLEN;
	j->buf.data[j->buf.len++] = '"';
	j->buf.data[j->buf.len] = '\0';
}

/* A UUID given as its 16 bytes (a frame's trace id), or null when there are none. */
void
qsj_uuid_bytes(QsJson *j, const char *key, const uint8 *bytes)
{
	pg_uuid_t	u;

	if (bytes == NULL)
	{
		qsj_null(j, key);
		return;
	}
	memcpy(u.data, bytes, UUID_LEN);
	qsj_uuid(j, key, &u);
}

/* UTC, microseconds: YYYY-MM-DDTHH:MI:SS.uuuuuuZ */
void
qs_format_time(TimestampTz ts, char *out)
{
	struct pg_tm tm;
	fsec_t		fsec;

	if (timestamp2tm(ts, NULL, &tm, &fsec, NULL, NULL) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	snprintf(out, 32, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ",
			 tm.tm_year, tm.tm_mon, tm.tm_mday,
			 tm.tm_hour, tm.tm_min, tm.tm_sec, (int) fsec);
}

void
qsj_time(QsJson *j, const char *key, TimestampTz ts)
{
	char		s[32];

	qs_format_time(ts, s);
	qsj_str(j, key, s);
}

Jsonb *
qsj_jsonb(QsJson *j)
{
	Assert(j->depth == 0);
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(j->buf.data)));
}

/* The text as a json datum: valid JSON by construction, so nothing is parsed. */
text *
qsj_json(QsJson *j)
{
	Assert(j->depth == 0);
	return cstring_to_text_with_len(j->buf.data, j->buf.len);
}

/* Queen's SP timestamps: UTC with milliseconds, YYYY-MM-DDTHH:MI:SS.mmmZ. */
void
qsj_time_ms(QsJson *j, const char *key, TimestampTz ts)
{
	char		s[32];

	qs_format_time(ts, s);		/* ...SS.uuuuuuZ: keep the milliseconds */
	s[23] = 'Z';
	s[24] = '\0';
	qsj_str(j, key, s);
}

/* The same, or null when there is no time. */
void
qsj_time_ms_or_null(QsJson *j, const char *key, bool has, TimestampTz ts)
{
	if (has)
		qsj_time_ms(j, key, ts);
	else
		qsj_null(j, key);
}
