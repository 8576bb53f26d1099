/*
 * route.h: what the files of dispatch share among themselves: the route
 * table and its routes, the router's helpers for building answers and
 * calling SQL, the pop's parameters and its park, and the node's role.
 */
#ifndef QS_HTTP_ROUTE_H
#define QS_HTTP_ROUTE_H

#include "http/dispatch/dispatch.h"

#include "utils/jsonb.h"

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

/* ---------------------------------------------------------------- router.c */
/* the request */
extern void qs_http_body_check(QsReq *req);
extern Jsonb *qs_http_body_jsonb(QsReq *req);
extern void qs_http_raise_bad_body(MemoryContext cxt);
extern const char *qs_http_query_value(QsReq *req, const char *key);
/* calls of SQL functions */
extern Datum qs_http_call_value(void *plan, Datum *args, const char *nulls);
extern Jsonb *qs_http_call(void *plan, Datum *args, const char *nulls, MemoryContext into);
extern char *qs_http_text_copy(text *t, MemoryContext into, int *len);
extern bool qs_http_many_available(const char *schema, const char *fn, void *plan);
extern Datum *qs_http_call_many(void *plan, Datum *args, const char *nulls, Oid elemtype, int n);
extern char *qs_http_call_text(void *plan, Datum *args, const char *nulls, MemoryContext into,
							   int *len);

/* ---------------------------------------------------------------- execute.c */
extern const QsRouteDef *qs_route_def(QsRouteId id);
extern bool qs_extension_installed(void);
/* the route alone, in a transaction of its own (or none); errors become its answer */
extern void qs_http_execute(QsReq *req, const QsRouteDef *def);
/* a parked pop retries: same request, a new transaction */
extern void qs_http_retry(QsReq *req);
/* the route's body in an open (sub)transaction */
extern void qs_http_run_body(QsReq *req, const QsRouteDef *def, const char *note);
extern void qs_http_fail(QsReq *req, const char *failed, ErrorData *edata);
/* after a commit: the route's bookkeeping, whose error is logged, not answered */
extern void qs_http_after_commit(QsReq *req, const QsRouteDef *def);

/* ---------------------------------------------------------------- answer.c */
extern const char *qs_route_name(QsRouteId id);
extern int	qs_route_count(void);
extern void qs_http_error(QsReq *req, int status, const char *message);
extern void qs_http_json(QsReq *req, int status, const char *json, int len);
extern char *qs_http_jsonb_text(Jsonb *jb, int *len);

/* ---------------------------------------------------------------- group.c */
extern bool qs_group_wants(QsReq *req);
extern void qs_group_add(QsReq *req);

/* ---------------------------------------------------------------- parked.c */
/* Where a long-poll pop waits (parked.c). */
typedef enum QsParkState
{
	QS_PARK_NONE,				/* armed, or being served */
	QS_PARK_WAITING				/* suspended, watching its wake slot */
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

/* the pop route: arm before the first attempt; wait when it found nothing */
extern void qs_park_arm(QsReq *req, QsPark *park, const char *queue, int timeout_ms);
extern bool qs_park_wait(QsReq *req);
extern bool qs_park_client_gone(QsReq *req);

/* ---------------------------------------------------------------- role.c */
extern char *qs_role_primary_address(void);
extern bool qs_role_refuses(QsReq *req);
extern void qs_role_after(QsReq *req);
/* the server is going away: answer req 503 and close its connection */
extern void qs_role_going_away(QsReq *req);

#endif							/* QS_HTTP_ROUTE_H */
