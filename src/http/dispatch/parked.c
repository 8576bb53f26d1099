/*
 * parked.c: long-poll pops, from parking to resuming, watching the wake
 * board (wake.c moves it) while they wait.
 *
 * A pop with wait=true that finds nothing parks: its connection is
 * suspended, no transaction or backend is held, and it retries when a
 * commit moves its queue's wake generation, every pop_recheck_interval (for
 * leases that expire), or once more at its timeout, then answers 204.
 *
 * The wake board (in shared memory, shmem.c) has per queue hash slot a
 * generation and the set of workers with pops parked on it. Any backend
 * that commits a push bumps the generations of the queues it wrote and sets
 * the latches of the workers that wait on them (wake.c), so a parked pop
 * wakes whether the push came over HTTP or plain SQL.
 *
 * Who calls what: the pop route arms a park before its first attempt and
 * asks whether to wait; the daemon parks a request it suspends and drops a
 * park when its connection ends; the worker polls and asks how long it may
 * sleep. A retry runs the request again through the router; a pop that has
 * its answer is handed back (request.c) for the worker's loop to send.
 * Nothing here calls transport.
 *
 * A parked pop's connection is suspended, so libmicrohttpd does not read
 * it: its socket is watched here for the client's close (EPOLLRDHUP, in an
 * epoll set the worker waits on), and every retry checks it once more. A
 * pop whose client is gone is dropped, never retried: it would lease (with
 * autoAck, consume) messages for no one. Its connection is shut down, which
 * frees its place under max_connections and leaves no socket in CLOSE-WAIT.
 * The wait itself is capped by pop_max_wait.
 */
#include "http/dispatch/route.h"

#include <sys/epoll.h>
#include <unistd.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "utils/memutils.h"

/* Pops parked in this worker. */
static dlist_head waiting = DLIST_STATIC_INIT(waiting);

/* How many of this worker's parked pops watch each wake slot. */
static uint32 watch_count[QS_WAKE_SLOTS];

/* The sockets of the waiting pops, for their clients' close; -1: none (retries still check). */
static int	park_ep = -1;
static bool park_ep_tried = false;

int
qs_parked_fd(void)
{
	if (!park_ep_tried)
	{
		park_ep_tried = true;
		park_ep = epoll_create1(EPOLL_CLOEXEC);
		if (park_ep < 0)
			ereport(LOG,
					(errcode_for_socket_access(),
					 errmsg("could not create the epoll set of the parked pops: %m"),
					 errdetail("A parked pop notices its client's close only when it is retried.")));
	}
	return park_ep;
}

/* ---------------------------------------------------------------- the pop route */

/*
 * Before a pop's first attempt: the slot it would wait on, and the
 * generation read before the attempt's snapshot (a later commit moves it).
 */
void
qs_park_arm(QsReq *req, QsPark *park, const char *queue, int timeout_ms)
{
	park->key = qs_queue_key(&req->tenant, queue);
	park->slot = qs_wake_slot(park->key);
	/* clamped, not refused: Queen's clients send what their users set */
	park->deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												 Min(timeout_ms, qs_http_pop_max_wait_ms));
	park->fd = -1;
	park->queue = queue;
	park->stat = NULL;
	park->gen = pg_atomic_read_u64(&qs_http_shared->gen[park->slot]);
	park->state = QS_PARK_NONE;
	park->req = req;
	req->park = park;
}

/* An attempt found nothing: wait (true) while its time lasts. */
bool
qs_park_wait(QsReq *req)
{
	if (req->park == NULL || GetCurrentTimestamp() >= req->park->deadline)
		return false;
	req->parked = true;
	return true;
}

/*
 * Is the pop's client gone? Then it is answered with nothing (the daemon
 * shuts the connection down instead of sending) and must not run.
 */
bool
qs_park_client_gone(QsReq *req)
{
	if (!req->client_gone && !qs_conn_peer_closed(req->conn))
		return false;
	req->client_gone = true;
	req->parked = false;
	req->status = 204;
	req->resp = MemoryContextStrdup(req->ctx, "");
	req->resp_len = 0;
	return true;
}

/* ---------------------------------------------------------------- the daemon */

/* Watch the suspended connection's socket for its client's close. */
static void
watch_client(QsPark *p)
{
	QsConn	   *c = p->req->conn;
	struct epoll_event ev;

	p->fd = -1;
	if (c == NULL || c->fd < 0 || qs_parked_fd() < 0)
		return;
	memset(&ev, 0, sizeof(ev));
	/* not EPOLLIN: pipelined bytes are no close, and would wake us at every wait */
	ev.events = EPOLLRDHUP | EPOLLET;
	ev.data.ptr = p;
	if (epoll_ctl(park_ep, EPOLL_CTL_ADD, c->fd, &ev) == 0)
		p->fd = c->fd;
}

/* Before the socket can close: a duplicate of it (a lingering close) would keep the watch. */
static void
unwatch_client(QsPark *p)
{
	if (p->fd >= 0)
		(void) epoll_ctl(park_ep, EPOLL_CTL_DEL, p->fd, NULL);
	p->fd = -1;
}

/* The request's connection is suspended with nothing to answer yet. */
void
qs_park(QsReq *req)
{
	QsPark	   *p = req->park;

	Assert(p != NULL && p->state == QS_PARK_NONE);
	if (watch_count[p->slot]++ == 0)
		pg_atomic_fetch_or_u64(&qs_http_shared->waiters[p->slot],
							   UINT64CONST(1) << qs_http_worker_index);
	p->recheck_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), qs_http_pop_recheck_ms);
	dlist_push_tail(&waiting, &p->node);
	p->state = QS_PARK_WAITING;
	pg_atomic_fetch_add_u32(&qs_http_shared->workers[qs_http_worker_index].parked, 1);
	/* per queue too (/metrics): the slot's version tells a later decrement it is still the queue's */
	p->stat = qs_stat_entry(&req->tenant, p->queue, p->key, &p->stat_version);
	pg_atomic_fetch_add_u32(&p->stat->parked, 1);
	watch_client(p);
}

static void
stop_watching(QsPark *p)
{
	unwatch_client(p);
	dlist_delete(&p->node);
	if (--watch_count[p->slot] == 0)
		pg_atomic_fetch_and_u64(&qs_http_shared->waiters[p->slot],
								~(UINT64CONST(1) << qs_http_worker_index));
	pg_atomic_fetch_sub_u32(&qs_http_shared->workers[qs_http_worker_index].parked, 1);
	if (p->stat && pg_atomic_read_u32(&p->stat->ready) == p->stat_version)
		pg_atomic_fetch_sub_u32(&p->stat->parked, 1);
	p->stat = NULL;
}

/* The request ends (its connection closes): forget its park. */
void
qs_unpark(QsReq *req)
{
	QsPark	   *p = req->park;

	if (p == NULL)
		return;
	if (p->state == QS_PARK_WAITING)
		stop_watching(p);
	p->state = QS_PARK_NONE;
	req->parked = false;
}

/* ---------------------------------------------------------------- the worker */

static bool
due(QsPark *p, TimestampTz now)
{
	return pg_atomic_read_u64(&qs_http_shared->gen[p->slot]) != p->gen ||
		now >= p->recheck_at || now >= p->deadline;
}

/* Mark the waiting pops whose clients closed since the last look. */
static void
take_closes(void)
{
	struct epoll_event evs[64];

	if (park_ep < 0)
		return;
	for (int round = 0; round < 64; round++)
	{
		int			n = epoll_wait(park_ep, evs, lengthof(evs), 0);

		CHECK_FOR_INTERRUPTS();
		for (int i = 0; i < n; i++)
			((QsPark *) evs[i].data.ptr)->req->client_gone = true;
		if (n < (int) lengthof(evs))
			break;
	}
}

/*
 * Drop the pops whose clients are gone, before any retry; retry every other
 * parked pop whose queue moved or whose time came.
 */
void
qs_parked_poll(void)
{
	dlist_mutable_iter it;
	TimestampTz now = GetCurrentTimestamp();

	take_closes();
	dlist_foreach_modify(it, &waiting)
	{
		QsPark	   *p = dlist_container(QsPark, node, it.cur);
		QsReq	   *req = p->req;

		CHECK_FOR_INTERRUPTS();
		if (!req->client_gone && !due(p, now))
			continue;
		if (qs_park_client_gone(req))
		{
			/* the daemon shuts its connection down instead of answering */
			stop_watching(p);
			p->state = QS_PARK_NONE;
			qs_handback(req);
			continue;
		}
		p->gen = pg_atomic_read_u64(&qs_http_shared->gen[p->slot]);
		req->parked = false;
		qs_http_retry(req);
		if (req->parked)
		{
			p->recheck_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														qs_http_pop_recheck_ms);
			continue;
		}
		/* answered (messages, 204 or an error): handed back to be sent */
		stop_watching(p);
		p->state = QS_PARK_NONE;
		qs_handback(req);
	}
}

/*
 * The worker is about to exit (shutdown, or the postmaster died): every
 * waiting pop is answered 503 now (role.c), handed back for the worker's
 * loop to send before it goes, instead of waiting for its retry.
 */
void
qs_parked_release(void)
{
	dlist_mutable_iter it;

	dlist_foreach_modify(it, &waiting)
	{
		QsPark	   *p = dlist_container(QsPark, node, it.cur);

		stop_watching(p);
		p->req->parked = false;
		qs_role_going_away(p->req);
		p->state = QS_PARK_NONE;
		qs_handback(p->req);
	}
}

/* Milliseconds until a parked pop is due: 0 now, -1 none parked. */
long
qs_parked_timeout(void)
{
	dlist_iter	it;
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz next = 0;

	dlist_foreach(it, &waiting)
	{
		QsPark	   *p = dlist_container(QsPark, node, it.cur);
		TimestampTz t = Min(p->recheck_at, p->deadline);

		if (due(p, now))
			return 0;
		if (next == 0 || t < next)
			next = t;
	}
	return next == 0 ? -1 : TimestampDifferenceMilliseconds(now, next);
}
