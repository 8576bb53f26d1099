/*
 * streams.h: the three streams routes (register a query, read its state,
 * commit a cycle), the one mapping from a response body to HTTP status, and
 * declared streams (definition, fold, the stream workers).
 */
#ifndef QS_STREAMS_H
#define QS_STREAMS_H

#include "common/base.h"
#include "common/json.h"

/* guc.c: the stream workers' settings */
extern int	qs_stream_workers;
extern int	qs_stream_poll_ms;
extern void qs_streams_guc_init(void);

/* Route names as the listener and queen_streams.http_status() spell them. */
#define QS_ROUTE_QUERIES	"queries"
#define QS_ROUTE_STATE_GET	"state/get"
#define QS_ROUTE_CYCLE		"cycle"

/* HTTP status for a completed call of a streams route (status.c). */
extern int	qs_http_status(const char *route, Jsonb *response);

/*
 * definition.c: a declared stream's definition, validated (22023 naming the
 * field), normalized and hashed. window.c folds with it.
 */
typedef enum QsWinType
{
	QS_WIN_TUMBLING,
	QS_WIN_HOPPING,
	QS_WIN_SESSION
} QsWinType;

typedef enum QsAggFn
{
	QS_AGG_COUNT,
	QS_AGG_SUM,
	QS_AGG_MIN,
	QS_AGG_MAX,
	QS_AGG_AVG,
	QS_AGG_FIRST,
	QS_AGG_LAST,
	QS_AGG_COUNT_DISTINCT
} QsAggFn;

typedef struct QsAggDef
{
	char	   *name;			/* the field of the sink message */
	QsAggFn		fn;
	char	   *path;			/* NULL for count */
	Datum		jp;				/* compiled jsonpath */
} QsAggDef;

typedef struct QsStreamDef
{
	char	   *source;
	char	   *group;
	char	   *subscription;	/* "all", "new" or a timestamp */
	char	   *sink;
	char	   *filter;			/* NULL: every event */
	Datum		filter_jp;
	char	   *key;			/* a jsonpath, or "partition" */
	bool		key_partition;
	Datum		key_jp;
	QsWinType	wtype;
	int			size_s,
				slide_s,
				gap_s,
				grace_s;
	bool		event_time;
	char	   *time_path;
	Datum		time_jp;
	int			lateness_s;
	char	   *late_queue;		/* NULL: late events are dropped */
	int			naggs;
	QsAggDef   *aggs;
	int			batch,
				lease_s,
				partitions,
				idle_flush_s;
	bool		reset;			/* create_stream only: register with reset */
	char		tag[64];		/* state key prefix, the SDKs' operator tag */
} QsStreamDef;

extern void qs_def_parse(Jsonb *def, const char *name, QsStreamDef *out);
extern Jsonb *qs_def_normalized(const QsStreamDef *d);
extern char *qs_def_hash(const QsStreamDef *d);

/* window.c: one partition's batch folded into state ops and sink items */
typedef struct QsFoldOut
{
	QsJson		ops;			/* a JSON array of state ops */
	QsJson		items;			/* a JSON array of push items */
	int64		events,
				filtered,
				late,
				windows;
} QsFoldOut;

extern void qs_fold_batch(const QsStreamDef *d, const char *pid, const char *pname,
						  JsonbContainer *rows, JsonbValue **msgs, int nmsgs, QsFoldOut *out);
extern void qs_fold_flush(const QsStreamDef *d, const char *pname, JsonbContainer *ripe,
						  JsonbContainer *wmrows, QsFoldOut *out);

/* pool.c: the stream workers, their shared memory and counters */
extern void qs_streams_init(void);
extern void qs_streams_wake(void);
extern void qs_stream_set_active(bool active);
extern PGDLLEXPORT void qs_stream_worker_main(Datum main_arg);

typedef enum QsStreamCounter
{
	QS_SC_CYCLES,
	QS_SC_CYCLES_FAILED,
	QS_SC_EVENTS,
	QS_SC_FILTERED,
	QS_SC_LATE,
	QS_SC_WINDOWS,
	QS_SC_FLUSHES,
	QS_SC_STALE,				/* cycles refused as stale (any caller's) */
	QS_SC_COUNT
} QsStreamCounter;

extern void qs_stream_count(QsStreamCounter which, int64 n);
extern uint64 qs_stream_counter(QsStreamCounter which);
extern int	qs_stream_workers_up(void);
extern void qs_stream_worker_started(int index);
extern void qs_stream_worker_cycled(int index);
extern void qs_cycle_shard_lock(const pg_uuid_t *qid, const pg_uuid_t *pid);
extern void qs_ripe_read_note(const pg_uuid_t *qid, const pg_uuid_t *pid, TimestampTz at);
extern TimestampTz qs_ripe_read_at(const pg_uuid_t *qid, const pg_uuid_t *pid);

/* cycle.c: the body field that marks a cycle refused as stale */
#define QS_CYCLE_STALE_FIELD	"stale"

#endif							/* QS_STREAMS_H */
