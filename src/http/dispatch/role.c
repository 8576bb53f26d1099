/*
 * role.c: what the listener does as its node's role in a replicated
 * formation changes (doc/deploying.md, "High availability").
 *
 * The role is RecoveryInProgress(), asked again for every request: true on
 * a hot standby, false once a promotion finished (the same workers go on,
 * so a promoted node serves writes with no restart). On a standby every
 * route that needs the primary (qs_route_needs_primary) is answered 503
 * with Retry-After before any transaction starts; reads are served from the
 * standby's copy.
 *
 * A node stops being the primary by shutting down (PostgreSQL has no
 * demotion in place) or by losing its postmaster. Either way the worker
 * answers its parked pops 503 before it exits, and an answer computed while
 * it is dying is not sent: a commit's wait for the synchronous standby ends
 * early on shutdown or postmaster death with the commit local only, so
 * that success is turned into a 503 the client retries.
 */
#include "http/dispatch/route.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "replication/walreceiver.h"
#include "storage/pmsignal.h"
#include "storage/spin.h"

static bool was_standby = false;
static bool role_known = false;

bool
qs_role_standby(void)
{
	bool		standby = RecoveryInProgress();

	if (role_known && was_standby && !standby)
		ereport(LOG,
				(errmsg("queen_streams http worker %d: this node was promoted, serving writes",
						qs_http_worker_index)));
	was_standby = standby;
	role_known = true;
	return standby;
}

/* The primary this standby streams from, "host:port", or NULL when not streaming. */
char *
qs_role_primary_address(void)
{
	char		host[NI_MAXHOST];
	int			port;
	WalRcvState state;

	if (WalRcv == NULL)
		return NULL;
	SpinLockAcquire(&WalRcv->mutex);
	state = WalRcv->walRcvState;
	strlcpy(host, WalRcv->sender_host, sizeof(host));
	port = WalRcv->sender_port;
	SpinLockRelease(&WalRcv->mutex);
	if (state != WALRCV_STREAMING || host[0] == '\0')
		return NULL;
	return psprintf("%s:%d", host, port);
}

/* The server is going away: what is answered now may not be durable. */
bool
qs_role_dying(void)
{
	return ProcDiePending || !PostmasterIsAlive();
}

static void
refuse(QsReq *req, const char *message)
{
	req->parked = false;
	req->retry_after = "1";
	qs_http_error(req, 503, message);
}

/* The server is going away: 503, and the connection closes after it. */
void
qs_role_going_away(QsReq *req)
{
	refuse(req, "this node is shutting down; retry on another node");
	req->close = true;
}

/*
 * Before a request runs (no transaction open): true when it was answered
 * 503 because this node is a standby and the route needs the primary, or
 * because the server is going away.
 */
bool
qs_role_refuses(QsReq *req)
{
	if (qs_role_dying())
	{
		qs_role_going_away(req);
		return true;
	}
	if (!qs_route_needs_primary(req->route) || !qs_role_standby())
		return false;
	refuse(req, "this node is a standby; send writes to the primary");
	return true;
}

/*
 * After a request ran, before its answer is queued: a server that is
 * shutting down or lost its postmaster answers 503 instead (see above).
 */
void
qs_role_after(QsReq *req)
{
	if (qs_role_dying() && (req->status < 300 || req->parked))
		qs_role_going_away(req);
}
