/*
 * common.h: helpers shared by every part of queen_streams: settings, UUIDs,
 * tenants, JSON in and out, SPI plans.
 */
#ifndef QS_COMMON_H
#define QS_COMMON_H

#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#define QS_QUEUE_MODE "__QUEUE_MODE__"
#define QS_DEFAULT_TENANT_STR "00000000-0000-0000-0000-000000000001"
#define QS_UUID_STRLEN 36

/* guc.c: every setting lives there */
extern int	qs_zstd_level;
extern int	qs_max_segment_kb;
extern int	qs_dedup_cache_entries;
extern int	qs_dedup_partition_entries;
extern int	qs_dedup_key_budget;
extern int	qs_backend_heap_keep_kb;
extern int	qs_max_pop_batch;
extern int	qs_max_pop_partitions;
extern int	qs_pop_ready_recheck_s;
extern char *qs_encryption_key;
extern char *qs_encryption_key_file;
extern bool qs_encryption_fail_open;
extern bool qs_encryption_unbound_read;
extern bool qs_ack_requires_lease;
extern int	qs_stream_workers;
extern int	qs_stream_poll_ms;
extern void qs_guc_init(void);

/* secret_file.c: secrets read from files, at start and on SIGHUP */
#include "utils/guc.h"
extern bool qs_check_jwt_secret_file(char **newval, void **extra, GucSource source);
extern void qs_assign_jwt_secret_file(const char *newval, void *extra);
extern bool qs_check_encryption_key_file(char **newval, void **extra, GucSource source);
extern void qs_assign_encryption_key_file(const char *newval, void *extra);
extern const char *qs_jwt_hmac_secret(void);
extern const char *qs_encryption_key_text(void);

/* jwt.c: bearer tokens and the access levels their `role` claim grants */
typedef enum QsAccess
{
	QS_ACCESS_NONE = 0,
	QS_ACCESS_READ,				/* read-only */
	QS_ACCESS_WRITE,			/* read-write */
	QS_ACCESS_ADMIN,			/* admin */
	QS_ACCESS_PUSH_ONLY			/* write-only: push and nothing else */
} QsAccess;

typedef struct QsToken
{
	QsAccess	level;
	char	   *sub;			/* NULL when absent */
	char	   *tenant;			/* the jwt_tenant_claim claim; NULL when absent or unset */
	bool		tenant_present; /* that claim is in the token, a string or not */
} QsToken;

#define QS_AUTH_OFF 0
#define QS_AUTH_JWT 1
extern int	qs_auth_mode;
extern char *qs_jwt_secret;
extern char *qs_jwt_secret_file;
extern char *qs_jwt_public_key_file;
extern char *qs_jwt_tenant_claim;
extern bool qs_jwt_require_exp;
extern char *qs_jwt_issuer;
extern char *qs_jwt_audience;
extern const char *qs_jwt_verify(const char *token, int len, QsToken *out);
extern bool qs_access_allows(QsAccess have, QsAccess need);

/*
 * hooks.c: set by a higher layer at load time. qs_pushed_hook: at commit of
 * the current (sub)transaction, `nmsgs` messages were pushed to (tenant,
 * queue); the listener counts them and wakes the pops parked on the queue.
 */
typedef void (*QsPushedHook) (const pg_uuid_t *tenant, const char *queue, int nmsgs);
extern QsPushedHook qs_pushed_hook;

/*
 * qs_streamed_hook: a stream worker (src/streams/runner.c) popped `popped`
 * messages of (tenant, queue), or committed (`cycled` 1) or rolled back
 * (`failed` 1) a cycle on it that acked `acked`; the listener counts them
 * as it counts its own pops and cycles.
 */
typedef void (*QsStreamedHook) (const pg_uuid_t *tenant, const char *queue, int64 popped,
								int64 cycled, int64 failed, int64 acked);
extern QsStreamedHook qs_streamed_hook;

/*
 * qs_deleted_hook: the current (sub)transaction deleted (tenant, queue); at
 * its commit the listener frees the queue's counters for other queues.
 */
typedef void (*QsDeletedHook) (const pg_uuid_t *tenant, const char *queue);
extern QsDeletedHook qs_deleted_hook;

/* text.c: the one rule for strings from URLs and segments */
#define QS_NAME_MAX 255			/* queue, partition and consumer group names, in bytes */
extern const char *qs_text_problem(const char *s, size_t len, size_t max_len);
extern void qs_check_text(const char *what, const char *s, size_t len, size_t max_len);
/* a name (queue, partition, namespace...): not empty, and the text rule within QS_NAME_MAX */
extern const char *qs_name_problem(const char *name);
extern void qs_check_name(const char *kind, const char *item, const char *name);
extern const char *qs_new_name_problem(const char *name);
extern const char *qs_new_name_detail(const char *why);
extern void qs_check_new_name(const char *kind, const char *item, const char *name);

/* uuid7.c */
extern void qs_uuid7(pg_uuid_t *out);
extern void qs_uuid_format(const pg_uuid_t *u, char *out);	/* out: 37 bytes */
extern bool qs_uuid_parse(const char *s, int len, pg_uuid_t *out);
extern void qs_random_bytes(void *buf, int len);

/* A hex digit's value, 0-15, or -1 (inline: the fuzz harnesses use it alone). */
static inline int
qs_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* tenant.c */
extern const pg_uuid_t qs_default_tenant;
extern void qs_tenant_arg(FunctionCallInfo fcinfo, int argno, pg_uuid_t *out);
extern Datum qs_uuid_datum(const pg_uuid_t *u);

/* bgworkers.c */
#include "postmaster/bgworker.h"
extern void qs_register_workers(int n, BgWorkerStartTime start, const char *function,
								const char *name_prefix, const char *type);

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

/* args.c: reading a SQL function's arguments with precise errors */
extern char *qs_text_arg(FunctionCallInfo fcinfo, int argno);	/* NULL for NULL or '' */
extern char *qs_required_text_arg(FunctionCallInfo fcinfo, int argno, const char *what);
extern TimestampTz qs_parse_timestamp(const char *s, const char *what);
/* limit and offset of a paged read: NULL takes the default; limit 0 to QS_PAGE_MAX, offset >= 0 */
#define QS_PAGE_MAX 10000
extern void qs_page_args(FunctionCallInfo fcinfo, int limno, int offno, int dflt,
						 int *lim, int *off);

/* spi_plan.c: statements prepared once per backend and kept */
#define QS_MAX_PLAN_ARGS 20
typedef struct QsPlan
{
	const char *sql;
	int			nargs;
	Oid			argtypes[QS_MAX_PLAN_ARGS];
	SPIPlanPtr	plan;
	bool		generic;		/* always the generic plan (.generic = true) */
} QsPlan;

extern int	qs_exec(QsPlan *p, Datum *values, const char *nulls, long tcount);
/* heap.c: freed heap kept between calls (glibc's trim and mmap thresholds) */
extern void qs_heap_keep(void);
extern void qs_heap_keep_fixed(int keep_kb);
extern Portal qs_cursor(QsPlan *p, Datum *values, const char *nulls);
extern Datum qs_col(int row, int col, bool *isnull);
extern int64 qs_col_int64(int row, int col, int64 ifnull);
extern bool qs_col_bool(int row, int col, bool ifnull);
extern void qs_spi_connect(void);
extern void qs_spi_finish(void);

/*
 * subxact.c: run work (connected to SPI) in an internal subtransaction; it
 * returns true to keep what it did, false to roll it back. The answer is
 * NULL, or the words of the error that rolled it back, logged under `what`
 * (e.g. "queen.transaction"); an error that is not a verdict on the work
 * (a deadlock, a timeout, an internal error) is raised again.
 */
typedef bool (*QsSubxactWork) (void *arg);
extern const char *qs_subxact_run(QsSubxactWork work, void *arg, const char *what);
extern const char *qs_subxact_run_also(QsSubxactWork work, void *arg, const char *what,
									   int also_verdict);
/* in a PG_CATCH that drops its error: log it (LOG, its SQLSTATE) after `why` */
extern void qs_log_dropped_error(const char *why);
extern void qs_log_dropped_error_at(int elevel, const char *why);

#endif							/* QS_COMMON_H */
