/*
 * screen.c: the door in front of libmicrohttpd, and the lingering close
 * behind it.
 *
 * libmicrohttpd 0.9.75 answers some malformed requests badly or not at all
 * (an invalid Content-Length gets its error page with the status line and
 * headers twice; a chunk size of FFFFFFFFFFFFFFFF waits for that many
 * bytes; an unknown transfer coding waits for the end of the connection; a
 * head that overflows its memory pool is dropped without an answer). So a
 * new connection is first held here, outside libmicrohttpd: its request head
 * is read with MSG_PEEK (nothing is consumed) until it is complete, checked
 * as RFC 9112 says, and only then handed to libmicrohttpd, which reads the
 * same bytes again. A head we refuse is answered here (400, 413, 414, 431,
 * 501) and the connection closed lingering.
 *
 * Later requests on a keep-alive connection are read by libmicrohttpd
 * directly; the router applies the same header rules to them once their
 * head is parsed (router.c), so only the framing errors that libmicrohttpd
 * itself detects (an invalid Content-Length, a malformed chunk) are
 * answered its way there.
 *
 * A screened socket is watched edge-triggered: a peek consumes nothing, so a
 * level-triggered watch of a partial head would report the socket readable
 * at every wait and spin the worker until header_timeout. Each arrival of
 * new bytes (or the client's close) is one event; a client that closes
 * before its head is complete is closed at once.
 *
 * A lingering close (an answer sent before the request body was read: 413,
 * a refused head, 503) shuts the socket down for writing and reads and
 * discards what the client still sends, bounded in bytes and time, before
 * closing: closing with unread data makes the kernel send a reset, and the
 * client (one that writes its whole body before reading, like Python's
 * urllib) would lose the answer.
 *
 * Everything here runs in the worker's loop, outside libmicrohttpd's frames,
 * and never raises: memory is malloc'd, failures close the socket.
 */
#include "http/transport/transport.h"
#include "http/dispatch/dispatch.h"
#include "common/ids.h"

#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <unistd.h>

#include "storage/fd.h"
#include "utils/timestamp.h"

typedef struct Held
{
	dlist_node	node;
	int			fd;
	bool		linger;			/* draining before close, else screening */
	TimestampTz deadline;
	int64		budget;			/* linger: bytes still to discard */
	struct sockaddr_storage addr;
	socklen_t	addrlen;
} Held;

static int	screen_ep = -1;
static dlist_head held = DLIST_STATIC_INIT(held);
static int	nscreening = 0;
static int	nlingering = 0;
static char *peekbuf = NULL;
static size_t peekcap = 0;
static int	reserve_fd = -1;	/* a spare descriptor, given up to answer EMFILE */
static int	fd_budget = 0;		/* sockets this worker may hold */
static QsScreenPass pass = NULL;	/* where a screened connection goes */

#define QS_MAX_LINGERING 256
#define QS_CHUNK_LINE_MAX 1024

/* ---------------------------------------------------------------- descriptors */

/*
 * Raise the soft descriptor limit to the hard one, keep one descriptor in
 * reserve, and compute how many sockets this worker may hold: the limit
 * less what PostgreSQL's own file access may use. `to` takes each
 * connection whose head passed: the screen calls no one above it.
 */
void
qs_screen_init(QsScreenPass to)
{
	struct rlimit rl;

	pass = to;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
	{
		if (rl.rlim_cur < rl.rlim_max)
		{
			rlim_t		was = rl.rlim_cur;

			rl.rlim_cur = rl.rlim_max;
			if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			{
				ereport(LOG,
						(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
						 errmsg("could not raise the descriptor limit of the HTTP worker from %lu to %lu: %m",
								(unsigned long) was, (unsigned long) rl.rlim_max)));
				rl.rlim_cur = was;
			}
		}
		if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > INT_MAX / 2)
			rl.rlim_cur = INT_MAX / 2;
		fd_budget = (int) rl.rlim_cur - Min(max_safe_fds, (int) rl.rlim_cur / 2) - 32;
	}
	else
		fd_budget = 512;
	fd_budget = Max(fd_budget, 16);
	reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	screen_ep = epoll_create1(EPOLL_CLOEXEC);
	if (screen_ep < 0)
		ereport(LOG,
				(errcode_for_socket_access(),
				 errmsg("could not create the epoll set of the HTTP connection screen: %m"),
				 errdetail("Connections go to libmicrohttpd unscreened.")));
}

int
qs_screen_fd(void)
{
	return screen_ep;
}

/*
 * Sockets this worker holds: libmicrohttpd's and screened ones (both in the
 * shared count that max_connections is checked against), and lingering ones.
 */
static int
held_sockets(void)
{
	QsWorkerSlot *me = &qs_http_shared->workers[qs_http_worker_index];

	return (int) pg_atomic_read_u32(&me->connections) + nlingering;
}

static void
screening_started(void)
{
	nscreening++;
	pg_atomic_fetch_add_u32(&qs_http_shared->workers[qs_http_worker_index].connections, 1);
}

static void
screening_done(void)
{
	nscreening--;
	pg_atomic_fetch_sub_u32(&qs_http_shared->workers[qs_http_worker_index].connections, 1);
}

/* ---------------------------------------------------------------- answers */

static const char *
reason(int status)
{
	switch (status)
	{
		case 400:
			return "Bad Request";
		case 408:
			return "Request Timeout";
		case 413:
			return "Content Too Large";
		case 414:
			return "URI Too Long";
		case 431:
			return "Request Header Fields Too Large";
		case 501:
			return "Not Implemented";
		case 503:
			return "Service Unavailable";
		default:
			return "Error";
	}
}

/*
 * Write a whole small answer on a socket libmicrohttpd does not (or no
 * longer) drives. The message is ours, plain ASCII without quotes.
 */
void
qs_screen_write_answer(int fd, int status, const char *message, bool retry)
{
	char		body[256];
	char		head[512];
	int			blen,
				hlen;

	blen = snprintf(body, sizeof(body), "{\"error\":\"%s\"}", message);
	hlen = snprintf(head, sizeof(head),
					"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n%s"
					"Content-Length: %d\r\nConnection: close\r\n\r\n",
					status, reason(status), retry ? "Retry-After: 1\r\n" : "", blen);
	if (send(fd, head, hlen, MSG_NOSIGNAL | MSG_DONTWAIT | MSG_MORE) == hlen)
		(void) send(fd, body, blen, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void
held_free(Held *h)
{
	if (screen_ep >= 0)
		(void) epoll_ctl(screen_ep, EPOLL_CTL_DEL, h->fd, NULL);
	dlist_delete(&h->node);
	if (h->linger)
		nlingering--;
	else
		screening_done();
	free(h);
}

static void
held_close(Held *h)
{
	close(h->fd);
	held_free(h);
}

static void drain(Held *h);

/*
 * Read and discard what fd still sends, bounded in bytes and time; then
 * close. What is already there is drained at once.
 */
static void
linger_start(Held *h, int fd, int64 bytes, int ms)
{
	struct epoll_event ev;

	shutdown(fd, SHUT_WR);
	if (h == NULL)
	{
		if (nlingering >= QS_MAX_LINGERING || screen_ep < 0 ||
			(h = malloc(sizeof(Held))) == NULL)
		{
			close(fd);
			return;
		}
		memset(h, 0, sizeof(Held));
		h->fd = fd;
		h->linger = true;		/* counted as lingering, also if the add fails */
		dlist_push_tail(&held, &h->node);
		nlingering++;
		memset(&ev, 0, sizeof(ev));
		ev.events = EPOLLIN | EPOLLRDHUP;
		ev.data.ptr = h;
		if (epoll_ctl(screen_ep, EPOLL_CTL_ADD, fd, &ev) != 0)
		{
			held_close(h);
			return;
		}
	}
	else if (!h->linger)
	{
		screening_done();
		nlingering++;
		h->linger = true;
		/* drained until EAGAIN from now on: level-triggered, and what is already here counts */
		memset(&ev, 0, sizeof(ev));
		ev.events = EPOLLIN | EPOLLRDHUP;
		ev.data.ptr = h;
		if (screen_ep >= 0 && epoll_ctl(screen_ep, EPOLL_CTL_MOD, fd, &ev) != 0)
		{
			held_close(h);
			return;
		}
	}
	h->linger = true;
	h->budget = bytes;
	h->deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ms);
	drain(h);
}

/* The bounds of a lingering close after an early answer. */
static int64
linger_bytes(void)
{
	return Max((int64) 64 * 1024 * 1024 + 65536, 4 * (int64) qs_http_max_body_bytes);
}

static int
linger_ms(void)
{
	return qs_http_body_timeout_ms > 0 ? Min(qs_http_body_timeout_ms, 10000) : 10000;
}

/* libmicrohttpd is done with a connection we answered early: linger on a copy. */
void
qs_screen_linger_dup(int fd)
{
	int			copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);

	if (copy >= 0)
		linger_start(NULL, copy, linger_bytes(), linger_ms());
}

static void
refuse(Held *h, int status, const char *message)
{
	qs_screen_write_answer(h->fd, status, message, false);
	qs_http_count_status(QS_R_NONE, status);
	linger_start(h, h->fd, linger_bytes(), linger_ms());
}

/* ---------------------------------------------------------------- the head */

static bool
is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* [s, e) trimmed of optional whitespace */
static void
trim(const char **s, const char **e)
{
	while (*s < *e && is_ows(**s))
		(*s)++;
	while (*e > *s && (is_ows((*e)[-1]) || (*e)[-1] == '\r'))
		(*e)--;
}

static bool
name_is(const char *s, const char *e, const char *name)
{
	size_t		n = strlen(name);

	return (size_t) (e - s) == n && pg_strncasecmp(s, name, n) == 0;
}

/* Length of the head (through its blank line) in buf, or 0 if incomplete. */
static size_t
head_end(const char *buf, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++)
	{
		if (buf[i] != '\n')
			continue;
		if (buf[i + 1] == '\n')
			return i + 2;
		if (i + 2 < n && buf[i + 1] == '\r' && buf[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

/*
 * Check a complete head; returns 0 when it may go to libmicrohttpd, -1 when
 * more bytes are needed (the first chunk-size line), else the status to
 * answer with *msg.
 */
static int
check_head(const char *buf, size_t n, size_t hlen, const char **msg)
{
	const char *p = buf;
	const char *end = buf + hlen;
	const char *eol = memchr(p, '\n', hlen);
	const char *sp1,
			   *sp2;
	bool		http11;
	int			nargs = 0,
				nfields = 0,
				nhost = 0,
				nte = 0,
				ncl = 0;
	bool		te_chunked = false;
	int64		cl = -1;
	size_t		target_len;

	/* the request line: method SP target SP version */
	sp1 = memchr(p, ' ', eol - p);
	sp2 = sp1 ? memchr(sp1 + 1, ' ', eol - sp1 - 1) : NULL;
	if (sp1 == NULL || sp2 == NULL)
	{
		*msg = "malformed request line";
		return 400;
	}
	target_len = sp2 - sp1 - 1;
	http11 = (eol - sp2 - 1 >= 8) && strncmp(sp2 + 1, "HTTP/1.1", 8) == 0;
	for (const char *c = sp1 + 1; c < sp2; c++)
		if (*c == '&' || *c == '?')
			nargs++;
	if (target_len > (size_t) qs_http_max_header_bytes)
	{
		*msg = "request target too long";
		return 414;
	}

	for (p = eol + 1; p < end; p = eol + 1)
	{
		const char *colon,
				   *vs,
				   *ve;

		eol = memchr(p, '\n', end - p);
		if (eol == NULL || eol == p || (eol == p + 1 && *p == '\r'))
			break;				/* the blank line */
		nfields++;
		colon = memchr(p, ':', eol - p);
		if (colon == NULL)
			continue;			/* libmicrohttpd decides about those */
		vs = colon + 1;
		ve = eol;
		trim(&vs, &ve);
		if (name_is(p, colon, "Host"))
			nhost++;
		else if (name_is(p, colon, "Transfer-Encoding"))
		{
			nte++;
			te_chunked = (ve - vs == 7 && pg_strncasecmp(vs, "chunked", 7) == 0);
		}
		else if (name_is(p, colon, "Content-Length"))
		{
			int64		v = 0;

			if (vs == ve)
			{
				*msg = "invalid Content-Length header";
				return 400;
			}
			for (const char *c = vs; c < ve; c++)
			{
				if (*c < '0' || *c > '9' || v > (PG_INT64_MAX - 9) / 10)
				{
					*msg = "invalid Content-Length header";
					return 400;
				}
				v = v * 10 + (*c - '0');
			}
			if (ncl++ > 0 && v != cl)
			{
				*msg = "conflicting Content-Length headers";
				return 400;
			}
			cl = v;
		}
	}

	/* every field and argument costs libmicrohttpd a node of its pool */
	if (hlen + 64 * (size_t) (nargs + nfields + 4) > qs_http_pool_size() / 2)
	{
		if (nargs > nfields)
		{
			*msg = "too many query parameters";
			return 414;
		}
		*msg = "too many header fields";
		return 431;
	}
	if (http11 && nhost == 0)
	{
		*msg = "a Host header is required";
		return 400;
	}
	if (nhost > 1)
	{
		*msg = "more than one Host header";
		return 400;
	}
	if (nte > 0 && ncl > 0)
	{
		*msg = "Content-Length together with Transfer-Encoding";
		return 400;
	}
	if (nte > 1 || (nte == 1 && !te_chunked))
	{
		*msg = "unsupported transfer coding (only chunked is)";
		return 501;
	}
	if (te_chunked)
	{
		/* the first chunk-size line: hex digits, optional extensions */
		const char *c = buf + hlen;
		const char *lend = memchr(c, '\n', n - hlen);
		uint64		size = 0;
		int			digits = 0;

		if (lend == NULL)
		{
			if (n - hlen > QS_CHUNK_LINE_MAX)
			{
				*msg = "invalid chunk size";
				return 400;
			}
			return -1;
		}
		for (; c < lend && qs_hexval(*c) >= 0; c++)
		{
			if (++digits > 15)
			{
				*msg = "chunk size too large";
				return 413;
			}
			size = (size << 4) | qs_hexval(*c);
		}
		if (digits == 0 || (c < lend && *c != ';' && *c != '\r' && !is_ows(*c)))
		{
			*msg = "invalid chunk size";
			return 400;
		}
		if (size > (uint64) qs_http_max_body_bytes)
		{
			*msg = "request body too large";
			return 413;
		}
	}
	return 0;
}

/*
 * Peek at a held connection's head; hand it on, refuse it, or keep waiting.
 * `closed`: the client shut its side down (EPOLLRDHUP), so no more bytes come.
 */
static void
screen(Held *h, bool closed)
{
	size_t		want = (size_t) qs_http_max_header_bytes + QS_CHUNK_LINE_MAX + 2;
	ssize_t		n;
	size_t		hlen;
	const char *msg = NULL;
	int			status;

	if (peekcap < want)
	{
		char	   *b = realloc(peekbuf, want);

		if (b == NULL)
		{
			held_close(h);
			return;
		}
		peekbuf = b;
		peekcap = want;
	}
	n = recv(h->fd, peekbuf, want, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0)
	{
		held_close(h);
		return;
	}
	hlen = head_end(peekbuf, n);
	if (hlen == 0 || hlen > (size_t) qs_http_max_header_bytes)
	{
		const char *eol = memchr(peekbuf, '\n', Min((size_t) n, (size_t) qs_http_max_header_bytes));

		if (hlen == 0 && (size_t) n < (size_t) qs_http_max_header_bytes)
		{
			if (closed)
				held_close(h);	/* the rest will never come */
			return;				/* not all here yet: the next bytes are an event */
		}
		if (eol == NULL)
			refuse(h, 414, "request target too long");
		else
			refuse(h, 431, "request headers too large");
		return;
	}
	status = check_head(peekbuf, n, hlen, &msg);
	if (status < 0)
	{
		if ((size_t) n >= want)
			refuse(h, 400, "invalid chunk size");
		else if (closed)
			held_close(h);
		return;					/* the chunk-size line is on its way */
	}
	if (status > 0)
	{
		refuse(h, status, msg);
		return;
	}
	{
		int			fd = h->fd;
		struct sockaddr_storage addr = h->addr;
		socklen_t	len = h->addrlen;

		held_free(h);
		pass(fd, (struct sockaddr *) &addr, len);
	}
}

/*
 * A new connection (accepted here or handed over): answer 503 at once when
 * this worker is at max_connections or its descriptor budget, else hold it
 * until its head is in.
 */
void
qs_screen_add(int fd, const struct sockaddr *addr, socklen_t len)
{
	Held	   *h;
	struct epoll_event ev;
	int			mine = held_sockets();

	if (qs_open_connections() >= qs_http_max_connections || mine >= fd_budget)
	{
		qs_screen_write_answer(fd, 503, "too many connections", true);
		qs_http_count_status(QS_R_NONE, 503);
		linger_start(NULL, fd, 65536, 1000);
		return;
	}
	if (screen_ep < 0 || (h = malloc(sizeof(Held))) == NULL)
	{
		pass(fd, addr, len);
		return;
	}
	memset(h, 0, sizeof(Held));
	h->fd = fd;
	memcpy(&h->addr, addr, Min(len, sizeof(h->addr)));
	h->addrlen = len;
	h->deadline = qs_http_header_timeout_ms > 0 ?
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), qs_http_header_timeout_ms) : 0;
	dlist_push_tail(&held, &h->node);
	screening_started();
	memset(&ev, 0, sizeof(ev));
	/* edge-triggered: see the head of this file */
	ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
	ev.data.ptr = h;
	if (epoll_ctl(screen_ep, EPOLL_CTL_ADD, fd, &ev) != 0)
	{
		held_free(h);
		pass(fd, addr, len);
		return;
	}
	screen(h, false);			/* the head may be here already */
}

/*
 * accept() failed for want of descriptors: give up the reserve to take one
 * connection, answer it 503, close it and take the reserve back, so a
 * client is told instead of left waiting in the backlog.
 */
void
qs_screen_out_of_fds(int listener)
{
	int			fd;

	if (reserve_fd < 0)
		return;
	close(reserve_fd);
	reserve_fd = -1;
	fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd >= 0)
	{
		qs_screen_write_answer(fd, 503, "too many connections", true);
		shutdown(fd, SHUT_WR);
		close(fd);
	}
	reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* Drain lingering sockets. */
static void
drain(Held *h)
{
	char		buf[65536];

	for (;;)
	{
		ssize_t		n = recv(h->fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (h->budget -= n) <= 0)
		{
			held_close(h);
			return;
		}
	}
}

/* Serve what is ready, and cut off what is past its deadline. */
void
qs_screen_run(void)
{
	struct epoll_event evs[64];
	dlist_mutable_iter it;
	TimestampTz now;

	if (screen_ep < 0)
		return;
	for (int round = 0; round < 16; round++)
	{
		int			n = epoll_wait(screen_ep, evs, lengthof(evs), 0);

		if (n <= 0)
			break;
		for (int i = 0; i < n; i++)
		{
			Held	   *h = evs[i].data.ptr;

			if (h->linger)
				drain(h);
			else
				screen(h, (evs[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0);
		}
		if (n < (int) lengthof(evs))
			break;
	}
	if (dlist_is_empty(&held))
		return;
	now = GetCurrentTimestamp();
	dlist_foreach_modify(it, &held)
	{
		Held	   *h = dlist_container(Held, node, it.cur);

		if (h->deadline == 0 || h->deadline > now)
			continue;
		if (h->linger)
			held_close(h);
		else
		{
			/* the head did not come in time: say so, then close */
			qs_screen_write_answer(h->fd, 408, "request head not received in time", false);
			shutdown(h->fd, SHUT_WR);
			held_close(h);
		}
	}
}

long
qs_screen_timeout(void)
{
	dlist_iter	it;
	TimestampTz next = 0;

	dlist_foreach(it, &held)
	{
		Held	   *h = dlist_container(Held, node, it.cur);

		if (h->deadline != 0 && (next == 0 || h->deadline < next))
			next = h->deadline;
	}
	if (next == 0)
		return -1;
	return Max(0, TimestampDifferenceMilliseconds(GetCurrentTimestamp(), next));
}
