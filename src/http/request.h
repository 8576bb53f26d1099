/*
 * request.h: the narrow interface between the two halves of the listener.
 * Transport (transport/) owns connections and the wire; dispatch
 * (dispatch/) routes and runs requests. Transport calls dispatch
 * (dispatch/dispatch.h); dispatch never calls transport: a request it
 * answers outside transport's call is handed back (request.c), and what it
 * needs of a connection is read from QsConn or asked here.
 */
#ifndef QS_HTTP_REQUEST_H
#define QS_HTTP_REQUEST_H

#include "http/listener.h"
#include "http/pattern.h"

#include "lib/ilist.h"

struct MHD_Connection;
struct QsPark;
struct QsPop;

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

typedef struct QsReq
{
	MemoryContext ctx;
	struct MHD_Connection *mhd;
	QsConn	   *conn;
	QsRouteId	route;
	const char *method;
	bool		http11;			/* HTTP/1.1 (else 1.0) */
	char	   *url;
	int			header_bytes;	/* request line and headers, about (the 431) */
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
	struct QsPark *park;			/* set by a route that can wait (parked.c) */
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
	struct QsPop *pop;			/* the pop route's parameters */
	/* answered outside transport's call, waiting to be sent (request.c) */
	bool		handed_back;
	dlist_node	handback_node;
	void	   *state;			/* other routes' parsed body and result */
} QsReq;

/* ---------------------------------------------------------------- request.c */
/* dispatch: req, suspended, has its answer; transport's loop sends it */
extern void qs_handback(QsReq *req);
/* transport: the next handed back (oldest first) or NULL; forget one that ends */
extern QsReq *qs_handback_next(void);
extern void qs_handback_forget(QsReq *req);
extern long qs_handback_timeout(void);
/* has the client of c closed its side (or transport cut c off)? */
extern bool qs_conn_peer_closed(QsConn *c);

#endif							/* QS_HTTP_REQUEST_H */
