/*
 * request.c: the narrow interface between the two halves of the listener
 * (CONTRIBUTING.md, The layers). Transport (transport/) reads requests
 * off the wire and sends their answers; dispatch (dispatch/) routes and
 * runs them and never calls transport. A request that dispatch answers
 * outside transport's call (a group's member after the commit, a parked
 * pop after its retry) is handed back on this queue, which the worker's
 * loop drains before it lets libmicrohttpd run.
 */
#include "http/request.h"

#include <poll.h>

static dlist_head handed_back = DLIST_STATIC_INIT(handed_back);

/* Dispatch: req (suspended) has its answer; transport sends it. */
void
qs_handback(QsReq *req)
{
	Assert(!req->handed_back);
	dlist_push_tail(&handed_back, &req->handback_node);
	req->handed_back = true;
}

/* Transport: the next request handed back, oldest first, or NULL. */
QsReq *
qs_handback_next(void)
{
	QsReq	   *req;

	if (dlist_is_empty(&handed_back))
		return NULL;
	req = dlist_container(QsReq, handback_node, dlist_pop_head_node(&handed_back));
	req->handed_back = false;
	return req;
}

/* Transport: req ends (its connection closes) before it was sent. */
void
qs_handback_forget(QsReq *req)
{
	if (!req->handed_back)
		return;
	dlist_delete(&req->handback_node);
	req->handed_back = false;
}

/* 0 when an answer waits to be sent, else -1 (no deadline): for the loop's wait. */
long
qs_handback_timeout(void)
{
	return dlist_is_empty(&handed_back) ? -1 : 0;
}

/*
 * Has the client closed (or reset) its side of c? A peek would miss a FIN
 * behind pipelined bytes; POLLRDHUP does not. A client that half-closes
 * after its request counts as gone, as in nginx. (A connection transport
 * cut off at its deadline is closing: gone too.)
 */
bool
qs_conn_peer_closed(QsConn *c)
{
	struct pollfd pfd;

	if (c == NULL || c->fd < 0 || c->phase == QS_PHASE_CLOSING)
		return c != NULL && c->phase == QS_PHASE_CLOSING;
	pfd.fd = c->fd;
	pfd.events = POLLRDHUP;
	pfd.revents = 0;
	if (poll(&pfd, 1, 0) <= 0)
		return false;
	return (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}
