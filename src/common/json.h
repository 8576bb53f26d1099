/*
 * json.h: json_scan.c, json_out.c, jsonb_value.c, json_in.c: JSON in and out.
 */
#ifndef QS_JSON_H
#define QS_JSON_H

#include "common/base.h"

#include "utils/jsonb.h"

/* json_scan.c: a strict JSON scanner that gives up where PostgreSQL's parser must decide */
typedef struct QsScan
{
	const char *p;				/* the next byte */
	const char *end;
	bool		trusted;		/* text we wrote: \u escapes skipped, numbers not checked */
} QsScan;

/*
 * Whether none of 8 bytes ends a run of plain string bytes: '"', '\\' or a
 * control character (the scanner skips such runs, json_out.c copies them).
 * Each term is the "has a zero byte" test (exact for "some byte", which is
 * all that is asked), on v with '"' and '\\' xored out and on v less 0x20;
 * bytes from 0x80 up never count.
 */
static inline bool
qs_json_plain8(uint64 v)
{
	const uint64 ones = UINT64CONST(0x0101010101010101);
	uint64		q = v ^ (ones * '"');
	uint64		b = v ^ (ones * '\\');
	uint64		hit = ((q - ones) & ~q) | ((b - ones) & ~b) | ((v - ones * 0x20) & ~v);

	return (hit & (ones * 0x80)) == 0;
}

/* Where the run of plain string bytes starting at p ends (end at most). */
static inline const char *
qs_json_plain_run(const char *p, const char *end)
{
	uint64		v;

	while (end - p >= 8)
	{
		memcpy(&v, p, 8);
		if (!qs_json_plain8(v))
			break;
		p += 8;
	}
	while (p < end && *p != '"' && *p != '\\' && (unsigned char) *p >= 0x20)
		p++;
	return p;
}

/* JSON white space: inline, as the scanner steps over it between every two tokens */
static inline void
qs_scan_ws(QsScan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

extern bool qs_scan_string(QsScan *s, bool *escaped);
extern bool qs_scan_skip(QsScan *s);
extern bool qs_scan_key(QsScan *s, const char **key, int *klen, bool *escaped);
extern void qs_scan_check_number(const char *token, int len);

/* json_out.c: a small writer that appends JSON text to a StringInfo */
#define QSJ_MAX_DEPTH 16
typedef struct QsJson
{
	StringInfoData buf;
	int			depth;
	bool		first[QSJ_MAX_DEPTH];
} QsJson;

extern void qsj_init(QsJson *j);
extern void qsj_object(QsJson *j, const char *key);
extern void qsj_array(QsJson *j, const char *key);
extern void qsj_end(QsJson *j, char close);
#define qsj_end_object(j) qsj_end((j), '}')
#define qsj_end_array(j) qsj_end((j), ']')
extern void qsj_str(QsJson *j, const char *key, const char *val);
extern void qsj_strn(QsJson *j, const char *key, const char *val, int len);
extern void qsj_int(QsJson *j, const char *key, int64 val);
extern void qsj_bool(QsJson *j, const char *key, bool val);
extern void qsj_null(QsJson *j, const char *key);
extern void qsj_raw(QsJson *j, const char *key, const char *json, int len);
extern void qsj_uuid(QsJson *j, const char *key, const pg_uuid_t *u);
extern void qsj_uuid_bytes(QsJson *j, const char *key, const uint8 *bytes);
extern void qsj_time(QsJson *j, const char *key, TimestampTz ts);	/* microseconds, as pop */
extern void qsj_time_ms(QsJson *j, const char *key, TimestampTz ts);	/* milliseconds, as the admin reads */
extern void qsj_time_ms_or_null(QsJson *j, const char *key, bool has, TimestampTz ts);
extern Jsonb *qsj_jsonb(QsJson *j);
extern text *qsj_json(QsJson *j);
extern void qs_format_time(TimestampTz ts, char *out);	/* out: 32 bytes */

/* jsonb_value.c: JSON text to a JsonbValue, to build answers as jsonb directly */
extern JsonbValue *qs_json_to_jsonb_value(const char *json, int len);

/* json_in.c: reading request bodies with precise errors */
extern JsonbContainer *qs_json_object_arg(Jsonb *jb, const char *what);
extern bool qs_json_get(JsonbContainer *obj, const char *key, JsonbValue *out);
extern char *qs_json_string(JsonbContainer *obj, const char *key, const char *what, bool required);
extern bool qs_json_bool(JsonbContainer *obj, const char *key, const char *what, bool dflt);
extern int64 qs_json_int(JsonbContainer *obj, const char *key, const char *what, int64 dflt);
extern bool qs_json_uuid(JsonbContainer *obj, const char *key, const char *what, bool required, pg_uuid_t *out);
extern JsonbContainer *qs_json_array(JsonbContainer *obj, const char *key, const char *what);
extern JsonbContainer *qs_json_container(JsonbValue *v);
extern char *qs_json_text(JsonbValue *v, int *len);
extern char *qs_json_cstring(JsonbValue *v);

#endif							/* QS_JSON_H */
