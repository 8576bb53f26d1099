/*
 * http_int.h: what the files of src/http share among themselves: shared
 * memory layout, connection and request state, and the entry points of the
 * daemon glue, the limits, the router and the routes.
 */
#ifndef QS_HTTP_INT_H
#define QS_HTTP_INT_H

#include "http/http.h"
#include "http/pattern.h"

#include "lib/ilist.h"
#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/spin.h"

struct MHD_Connection;
struct sockaddr;

/* ---------------------------------------------------------------- settings */
extern int	qs_http_port;
extern char *qs_http_listen_address;
extern int	qs_http_workers;
extern char *qs_http_database;
extern int	qs_http_max_body_bytes;
extern int	qs_http_max_header_bytes;
extern int	qs_http_header_timeout_ms;
extern int	qs_http_body_timeout_ms;
extern int	qs_http_idle_timeout_ms;
extern int	qs_http_max_connections;
extern int	qs_http_statement_timeout_ms;
extern int	qs_http_tenancy;
extern bool qs_http_jwt_trust_tenant_header;
extern int	qs_http_retention_interval_s;
extern int	qs_http_pop_recheck_ms;
extern int	qs_http_pop_max_wait_ms;
extern int	qs_http_sample_interval_s;
extern int	qs_http_group_max_requests;
extern int	qs_http_group_max_wait_ms;
extern int	qs_http_group_await_ms;
extern int	qs_http_metrics_queues;
extern int	qs_http_metrics_queue_idle_s;
extern int	qs_http_metrics_gauges_interval_s;

#define QS_TENANCY_OFF		0
#define QS_TENANCY_HEADER	1

/* ---------------------------------------------------------------- routes */
/* A route is its row in the route table (routes.c); row 0 is "none". */
typedef int QsRouteId;

#define QS_R_NONE		0		/* 404, 405, refused before routing */
#define QS_MAX_ROUTES	96		/* rows of the table, for the shared counters */

extern const char *qs_route_name(QsRouteId id);
extern const char *qs_route_method(QsRouteId id);
extern int	qs_route_count(void);

/* Status codes counted per route in /metrics: each of 100..599 on its own. */
#define QS_CODE_MIN 100
#define QS_CODE_COUNT 500
extern int	qs_code_index(int status);

/* ---------------------------------------------------------------- shared memory */
#define QS_WAKE_SLOTS		4096
#define QS_MAX_WORKERS		64
#define QS_STAT_NAME		256

typedef enum QsStat
{
	QS_STAT_PUSHED,
	QS_STAT_POPPED,
	QS_STAT_ACKED,
	QS_STAT_NACKED,
	QS_STAT_CYCLES,
	QS_STAT_CYCLES_FAILED,
	QS_STAT_COUNT
} QsStat;

extern const char *const qs_stat_names[QS_STAT_COUNT];

/*
 * The dashboard's charts (samples.c): every sample_interval the first worker
 * copies the pushed, popped and acked counters of every queue into a ring of
 * QS_SAMPLES slots; sample n is in slot n % QS_SAMPLES, and sample_seq is
 * the newest complete one (0: none yet).
 */
#define QS_SAMPLES			61	/* 60 intervals: an hour at the default 60 s */
#define QS_SAMPLED			3	/* QS_STAT_PUSHED, QS_STAT_POPPED, QS_STAT_ACKED */

typedef struct QsQueueStat
{
	/*
	 * 0: free. Else the slot's version, new each time it is taken: key
	 * fields are written before it is set, and a reader that sees it
	 * unchanged after reading them read one queue's.
	 */
	pg_atomic_uint32 ready;
	pg_atomic_uint32 used_at;	/* last count, seconds since the epoch (idle reuse) */
	uint64		key;
	pg_uuid_t	tenant;
	char		name[QS_STAT_NAME];
	pg_atomic_uint64 c[QS_STAT_COUNT];
	pg_atomic_uint32 parked;	/* long-poll pops parked on the queue now (a gauge) */
	/* the counters of QS_SAMPLED stats at each of the last QS_SAMPLES samples */
	uint64		sample[QS_SAMPLES][QS_SAMPLED];
} QsQueueStat;

typedef struct QsWorkerSlot
{
	int			pid;			/* 0 when not running */
	bool		listening;
	Latch	   *latch;
	TimestampTz started_at;
	pg_atomic_uint32 connections;
	pg_atomic_uint32 incoming;	/* handed over by other workers, not yet taken */
	bool		handoff;		/* can receive handed-over connections */
	pg_atomic_uint32 parked;
	pg_atomic_uint64 requests;
} QsWorkerSlot;

typedef struct QsHttpShared
{
	slock_t		mutex;			/* takes and frees stats[] */
	uint32		stat_version;	/* the last version given to a slot (under mutex) */
	int			nstats;			/* slots of stats[], queen_streams.metrics_queues */
	pg_atomic_uint64 wakes;		/* commits that moved a generation */
	/* group commit (group.c): commits, the requests they carried, deferrals */
	pg_atomic_uint64 group_commits;
	pg_atomic_uint64 group_requests;
	pg_atomic_uint64 group_deferrals;
	pg_atomic_uint64 group_merged;	/* requests served by one call for several */
	QsWorkerSlot workers[QS_MAX_WORKERS];
	pg_atomic_uint64 requests[QS_MAX_ROUTES][QS_CODE_COUNT];
	/* the wake board: per queue hash slot, a generation and who waits on it */
	pg_atomic_uint64 gen[QS_WAKE_SLOTS];
	pg_atomic_uint64 waiters[QS_WAKE_SLOTS];
	/* samples.c: when each slot of the counters' ring was taken */
	pg_atomic_uint64 sample_seq;
	TimestampTz sample_at[QS_SAMPLES];
	/* gauges_snapshot.c: the newest snapshot of the gauges (a pinned DSM segment) */
	slock_t		gauges_lock;
	uint32		gauges_handle;	/* dsm_handle; 0: none yet */
	TimestampTz gauges_at;		/* the snapshot's time (under gauges_lock) */
	pg_atomic_uint64 gauges_wanted_at;	/* the last scrape that read it (TimestampTz) */
	/* stats[0] collects queues that found the table full; sized at start */
	QsQueueStat stats[FLEXIBLE_ARRAY_MEMBER];
} QsHttpShared;

extern QsHttpShared *qs_http_shared;

extern void qs_http_shmem_init(void);
extern uint64 qs_queue_key(const pg_uuid_t *tenant, const char *queue);
extern uint32 qs_wake_slot(uint64 key);
extern QsQueueStat *qs_stat_entry(const pg_uuid_t *tenant, const char *queue, uint64 key,
								  uint32 *version);
extern void qs_stat_count(QsQueueStat *e, QsStat which, int64 n);
extern void qs_stat_free(const pg_uuid_t *tenant, const char *queue);
extern void qs_stat_add(const pg_uuid_t *tenant, const char *queue, QsStat which, int64 n);
extern int	qs_open_connections(void);

/* ---------------------------------------------------------------- connections */
typedef enum QsPhase
{
	QS_PHASE_HEADERS,			/* accepted, headers not complete */
	QS_PHASE_BODY,				/* headers in, body arriving */
	QS_PHASE_BUSY,				/* being served or parked: no deadline */
	QS_PHASE_SENDING,			/* response queued */
	QS_PHASE_IDLE,				/* keep-alive between requests */
	QS_PHASE_CLOSING
} QsPhase;

typedef struct QsConn
{
	dlist_node	node;
	struct MHD_Connection *mhd;
	int			fd;
	QsPhase		phase;
	TimestampTz deadline;		/* 0: none */
	bool		over_limit;		/* accepted beyond max_connections: 503 */
	bool		linger;			/* answered early: drain before closing */
	uint64		awaited_in;		/* the group whose answer it got, while its next
								 * request is awaited (group.c); 0: none */
} QsConn;

/* Where a long-poll pop waits (parked.c). */
typedef enum QsParkState
{
	QS_PARK_NONE,				/* armed, or being served */
	QS_PARK_WAITING,			/* suspended, watching its wake slot */
	QS_PARK_ANSWERED			/* retried with an answer the daemon has to send */
} QsParkState;

typedef struct QsPark
{
	uint64		key;
	uint32		slot;
	uint64		gen;			/* generation read before the last attempt */
	TimestampTz deadline;
	TimestampTz recheck_at;
	QsParkState state;
	int			fd;				/* watched for the client's close, or -1 */
	const char *queue;			/* the request's */
	struct QsQueueStat *stat;	/* counts it parked (NULL: not parked) */
	uint32		stat_version;	/* the slot's when it was counted */
	dlist_node	node;			/* in the waiting or the answered list */
	struct QsReq *req;
} QsPark;

/* Query parameters of a pop. */
typedef struct QsPop
{
	char	   *queue;
	char	   *partition;
	char	   *group;
	int			batch;
	int			partitions;
	int			lease_seconds;	/* 0: the queue's */
	bool		auto_ack;
	bool		wait;
	int			timeout_ms;
	char	   *sub_mode;
	char	   *sub_from;
	QsPark		park;
} QsPop;

typedef struct QsReq
{
	MemoryContext ctx;
	struct MHD_Connection *mhd;
	QsConn	   *conn;
	QsRouteId	route;
	const char *method;
	bool		http11;			/* HTTP/1.1 (else 1.0) */
	char	   *url;
	char	   *arg;			/* the first :param of the path */
	char	   *params[QS_MAX_PARAMS];	/* every :param, in order */
	pg_uuid_t	tenant;
	char	   *sub;			/* the bearer token's subject (auth = jwt) */
	bool		token_checked;	/* a bearer token was verified for this request */
	QsAccess	level;			/* its access level */
	QsToken		token;			/* its claims */
	bool		server_admin;	/* a server-wide admin (router.c): may act across tenants */
	const char *www_authenticate;	/* the challenge of a 401 */
	StringInfoData body;
	bool		body_too_large;
	bool		dispatched;
	bool		responded;
	bool		parked;			/* the attempt found nothing and waits */
	bool		client_gone;	/* its client closed the connection: nothing is
								 * run for it any more, no answer is sent */
	QsPark	   *park;			/* set by a route that can wait (parked.c) */
	/* the response */
	int			status;
	char	   *resp;
	int			resp_len;
	const char *content_type;
	const char *retry_after;
	const char *cache_control;	/* the dashboard's files: Cache-Control, */
	const char *csp;			/* Content-Security-Policy (and nosniff) */
	bool		close;
	bool		cell_may_commit;	/* a router's write reached its body (cells.c) */
	/* group commit (group.c) */
	bool		grouped;		/* queued for, or running in, a group */
	bool		deferred;		/* gave way to a lock held elsewhere: next group */
	bool		handled;		/* ran in this group already (first, or as one of several) */
	dlist_node	group_node;
	TimestampTz queued_at;
	QsPop	   *pop;			/* the pop route's parameters */
	void	   *state;			/* other routes' parsed body and result */
} QsReq;

/* ---------------------------------------------------------------- daemon.c */
extern bool qs_http_daemon_start(void);
extern int	qs_http_daemon_fd(void);
extern int	qs_http_listen_fd(void);
extern int	qs_http_handoff_fd(void);
extern bool qs_http_accept(bool take_new);
extern void qs_http_daemon_run(void);
extern long qs_http_daemon_timeout(void);
extern void qs_http_send_suspended(QsReq *req);

extern size_t qs_http_pool_size(void);
extern void qs_http_add_connection(int fd, const struct sockaddr *addr, socklen_t len);

/* ---------------------------------------------------------------- screen.c */
extern void qs_screen_init(void);
extern int	qs_screen_fd(void);
extern void qs_screen_add(int fd, const struct sockaddr *addr, socklen_t len);
extern void qs_screen_out_of_fds(int listen_fd);
extern void qs_screen_write_answer(int fd, int status, const char *message, bool retry);
extern void qs_screen_linger_dup(int fd);
extern void qs_screen_run(void);
extern long qs_screen_timeout(void);

/* ---------------------------------------------------------------- limits.c */
extern void qs_conn_opened(QsConn *c);
extern void qs_conn_closed(QsConn *c);
extern void qs_conn_phase(QsConn *c, QsPhase phase);
extern void qs_limits_sweep(void);
extern long qs_limits_timeout(void);
extern bool qs_conn_peer_closed(QsConn *c);
extern int	qs_request_header_bytes(struct MHD_Connection *mhd, const char *url);

/* ---------------------------------------------------------------- router.c */
extern int	qs_http_worker_index;
extern void qs_http_route(QsReq *req);
extern void qs_http_dispatch(QsReq *req);
extern void qs_http_retry(QsReq *req);
extern void qs_http_error(QsReq *req, int status, const char *message);
extern void qs_http_json(QsReq *req, int status, const char *json, int len);
extern void qs_http_body_check(QsReq *req);
extern Jsonb *qs_http_body_jsonb(QsReq *req);
extern void qs_http_raise_bad_body(MemoryContext cxt);
extern const char *qs_http_query_value(QsReq *req, const char *key);
extern Datum qs_http_call_value(void *plan, Datum *args, const char *nulls);
extern Jsonb *qs_http_call(void *plan, Datum *args, const char *nulls, MemoryContext into);
extern char *qs_http_text_copy(text *t, MemoryContext into, int *len);
extern bool qs_http_many_available(const char *schema, const char *fn, void *plan);
extern Datum *qs_http_call_many(void *plan, Datum *args, const char *nulls, Oid elemtype, int n);
extern char *qs_http_call_text(void *plan, Datum *args, const char *nulls, MemoryContext into,
							   int *len);
extern char *qs_http_jsonb_text(Jsonb *jb, int *len);
extern void qs_http_count(QsReq *req);
extern void qs_http_count_status(QsRouteId route, int status);
extern bool qs_extension_installed(void);

/* cells.c: the listener on a router database */
extern bool qs_cells_is_router;
extern Oid	qs_cells_extension_oid(void);
extern char *qs_cells_partition_queue(const pg_uuid_t *tenant, const pg_uuid_t *pid);
extern void qs_cells_pushed(QsReq *req, Jsonb *results);
extern const char *qs_cells_remote_message(const char *message);
extern void qs_cells_body_starts(QsReq *req);
extern bool qs_cells_outcome_unknown(QsReq *req, ErrorData *edata);
extern void qs_cells_answer_unknown(QsReq *req, const char *failed);
extern void qs_http_extension_missing(QsReq *req);
extern void qs_http_fail(QsReq *req, const char *failed, ErrorData *edata);
extern int	qs_http_status_for_error(int sqlerrcode);
extern const char *qs_http_error_words(int sqlerrcode);

/* ---------------------------------------------------------------- group.c */
extern bool qs_group_wants(QsReq *req);
extern void qs_group_add(QsReq *req);
extern void qs_group_forget(QsReq *req);
extern void qs_group_unawait(QsConn *c);
extern bool qs_group_due(void);
extern long qs_group_timeout(void);
extern void qs_group_run(void);

/* ---------------------------------------------------------------- routes */
/* Each route has a parse step (no transaction) and a run step (in one). */
typedef struct QsRouteDef
{
	bool		(*parse) (QsReq *req);	/* false: already answered */
	void		(*run) (QsReq *req);	/* inside the transaction */
	void		(*after) (QsReq *req);	/* after commit */
	const char *failed;			/* prefix of a 500's error */
	bool		needs_extension;
	bool		needs_xact;

	/*
	 * Several requests of the route and tenant in one call, in a group
	 * commit; false: it declined and nothing was done. NULL: one at a time.
	 */
	bool		(*run_many) (QsReq **reqs, int n);
} QsRouteDef;

/* the route's body in an open (sub)transaction (router.c) */
extern void qs_http_run_body(QsReq *req, const QsRouteDef *def, const char *note);

/*
 * A route that is one call of a SQL function returning jsonb: the listener
 * binds each argument from the request and answers the result with `ok`.
 * An argument is ":name" (that path segment, text), "?name" (that query
 * parameter, text, NULL when absent or empty), "body" (the JSON body,
 * jsonb), "body?" (the body if there is one, else NULL), "tenant" (uuid) or
 * "sub" (the token's subject, text or NULL). Casts go in the SQL.
 */
#define QS_CALL_MAX_ARGS 10
typedef struct QsCall
{
	const char *sql;
	int			ok;				/* status of a completed call */
	const char *args[QS_CALL_MAX_ARGS];
} QsCall;

/* One row of the route table. */
typedef struct QsRoute
{
	const char *method;
	const char *pattern;		/* "/api/v1/consumer-groups/:group" */
	const char *name;			/* the route label in /metrics */
	QsAccess	access;			/* needed with queen_streams.auth = jwt */
	const QsRouteDef *def;		/* a hand-written route, or */
	const QsCall *call;			/* a SQL call (routes_api.c) */
} QsRoute;

extern const QsRoute qs_routes[];
extern const int qs_nroutes;
extern bool qs_route_needs_primary(QsRouteId id);
extern const QsRouteDef qs_route_call;
extern const QsRouteDef *qs_route_def(QsRouteId id);

extern const QsRouteDef qs_route_push;
extern const QsRouteDef qs_route_pop;
extern const QsRouteDef qs_route_ack;
extern const QsRouteDef qs_route_ack_batch;
extern const QsRouteDef qs_route_lease_extend;
extern const QsRouteDef qs_route_health;
extern const QsRouteDef qs_route_metrics;
extern const QsRouteDef qs_route_queries;
extern const QsRouteDef qs_route_state_get;
extern const QsRouteDef qs_route_cycle;
extern const QsRouteDef qs_route_configure;
extern const QsRouteDef qs_route_delete_queue;
extern const QsRouteDef qs_route_dashboard;

/* ---------------------------------------------------------------- parked.c */
/* the pop route: arm before the first attempt; wait when it found nothing */
extern void qs_park_arm(QsReq *req, QsPark *park, const char *queue, int timeout_ms);
extern bool qs_park_wait(QsReq *req);
/* the daemon: park a suspended request, take back answered ones, end one */
extern void qs_park(QsReq *req);
extern QsReq *qs_parked_answered(void);
extern void qs_unpark(QsReq *req);
/* the worker: retry what is due; how long it may sleep */
extern int	qs_parked_fd(void);
extern void qs_parked_poll(void);
extern bool qs_park_client_gone(QsReq *req);
extern long qs_parked_timeout(void);
extern void qs_parked_answer_all(void (*answer) (QsReq *req));
/* the push hook (common/hooks.c), any backend: count and wake at commit */
extern void qs_queue_pushed_at_commit(const pg_uuid_t *tenant, const char *queue, int nmsgs);
extern void qs_queue_deleted_at_commit(const pg_uuid_t *tenant, const char *queue);
extern void qs_queue_streamed(const pg_uuid_t *tenant, const char *queue, int64 popped,
							  int64 cycled, int64 failed, int64 acked);

/* role.c: the node's role (primary or hot standby) and going away */
extern bool qs_role_standby(void);
extern char *qs_role_primary_address(void);
extern bool qs_role_dying(void);
extern bool qs_role_refuses(QsReq *req);
extern void qs_role_after(QsReq *req);
extern void qs_role_release_parked(void);

/* samples.c: the first worker samples the counters for the charts */
extern void qs_samples_take(void);

/* metrics.c */
extern void qs_metrics_text(StringInfo out, const pg_uuid_t *only, bool listener);
extern void qs_metrics_label(StringInfo out, const char *s);
extern void qs_metrics_header(StringInfo out, const char *name, const char *type, const char *help);
/* metrics_gauges.c: backlog, lag, dead letters and streams, from a snapshot */
extern void qs_metrics_gauges(StringInfo out, const pg_uuid_t *only);

/* gauges_snapshot.c: what the gauges read, taken in the background */
typedef struct QsStreamStatsRow
{
	pg_uuid_t	tenant;
	bool		has_tenant;
	char	   *stream;
	bool		paused;
	int64		v[6];			/* lag, open windows, events, late, errors, windows */
} QsStreamStatsRow;

typedef struct QsGaugeSet
{
	TimestampTz at;				/* the snapshot's transaction start */
	int			nqueue;
	struct QsQueueStatsRow *queue;	/* the largest backlogs first */
	int			nstream;
	QsStreamStatsRow *stream;	/* (tenant, name) order */
} QsGaugeSet;

extern void qs_gauges_get(QsGaugeSet *set);
extern long qs_gauges_tick(void);
extern void qs_partition_stat_remember(const pg_uuid_t *pid, const pg_uuid_t *tenant, const char *queue);
extern QsQueueStat *qs_partition_stat(const pg_uuid_t *pid, const pg_uuid_t *tenant);
extern void qs_pop_note_partition(QsReq *req, const pg_uuid_t *pid);

#endif							/* QS_HTTP_INT_H */
