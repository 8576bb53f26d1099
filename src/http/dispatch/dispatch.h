/*
 * dispatch.h: the dispatch half of the listener as transport sees it:
 * route a request whose head is in, serve it once its body is, count its
 * answer; the group commit, the parked pops and the node's role, which the
 * worker's loop drives. Dispatch answers a suspended request by handing it
 * back (http/request.h), never by calling transport.
 */
#ifndef QS_HTTP_DISPATCH_H
#define QS_HTTP_DISPATCH_H

#include "http/request.h"

/* router.c: headers in (refuse what must be refused), then the body */
extern void qs_http_route(QsReq *req);
extern void qs_http_dispatch(QsReq *req);
/* an answer sent (each request once), or a head refused before routing */
extern void qs_http_count(QsReq *req);
extern void qs_http_count_status(QsRouteId route, int status);
extern const char *qs_route_method(QsRouteId id);

/* group.c: the worker's group commit */
extern void qs_group_unawait(QsConn *c);
extern void qs_group_forget(QsReq *req);
extern bool qs_group_due(void);
extern long qs_group_timeout(void);
extern void qs_group_run(void);

/* parked.c: park a suspended request, end one; retry what is due */
extern void qs_park(QsReq *req);
extern void qs_unpark(QsReq *req);
extern int	qs_parked_fd(void);
extern void qs_parked_poll(void);
extern long qs_parked_timeout(void);
/* the worker is about to exit: every parked pop answered 503, handed back */
extern void qs_parked_release(void);

/* role.c: the node's role and going away */
extern bool qs_role_standby(void);
extern bool qs_role_dying(void);

/* samples.c: the first worker samples the counters for the charts */
extern void qs_samples_take(void);

/* gauges_snapshot.c: the first worker starts a refresh of the gauges when due */
extern long qs_gauges_tick(void);

#endif							/* QS_HTTP_DISPATCH_H */
