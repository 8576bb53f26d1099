/*
 * daemon.c: the libmicrohttpd glue. One daemon per worker, in external-event
 * mode with its own epoll fd (which the worker waits on), no threads.
 *
 * Callbacks only ever run inside MHD_run(), called from the worker's loop.
 * A writing request whose body is complete is suspended there and queued
 * for the worker's next group commit (group.c), answered after it.
 * Every PostgreSQL call made from them sits inside a PG_TRY in our own
 * frame, so no error can unwind through libmicrohttpd's stack.
 *
 * We accept connections ourselves and hand them to libmicrohttpd. The
 * kernel spreads new connections over the workers' SO_REUSEPORT sockets by
 * a hash, which with a few keep-alive clients often piles several
 * connections on one worker while another has none, and a worker has one
 * transaction (a request, or a group of them) at a time. So a worker that accepts a connection while another
 * worker holds fewer passes it over (SCM_RIGHTS on a unix datagram socket).
 */
#include "http/transport/transport.h"
#include "http/dispatch/dispatch.h"
#include "common/ids.h"

#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "utils/memutils.h"

static struct MHD_Daemon *daemon_ = NULL;
static bool starting = false;
static int	listen_fd = -1;
static int	handoff_fd = -1;		/* receives (and sends) handed-over connections */

static const char empty_body[] = "";

static void add_connection(int fd, const struct sockaddr *addr, socklen_t len);

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	char		buf[512];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = '\0';
	/* client misbehaviour is routine; only start-up problems are worth a LOG */
	ereport(starting ? LOG : DEBUG1,
			(errmsg_internal("libmicrohttpd: %s", buf)));
}

/* Queue req's response on its connection (active or suspended). */
static bool
queue_response(QsReq *req)
{
	struct MHD_Response *r;
	enum MHD_Result ok;
	const char *data = req->resp ? req->resp : empty_body;

	r = MHD_create_response_from_buffer(req->resp_len, (void *) data, MHD_RESPMEM_PERSISTENT);
	if (r == NULL)
		return false;
	if (req->status != 204)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
								req->content_type ? req->content_type : "application/json");
	if (req->retry_after)
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, req->retry_after);
	if (req->cache_control)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, req->cache_control);
	if (req->csp)
	{
		MHD_add_response_header(r, "Content-Security-Policy", req->csp);
		MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
		MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
	}
	if (req->www_authenticate)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, req->www_authenticate);
	if (req->status == 405)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, qs_route_method(req->route));
	if (req->close)
	{
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
		if (req->conn)
			req->conn->linger = true;	/* the body may be unread */
	}
	/*
	 * A pop whose client is gone (parked.c) was not run: shut the socket
	 * down so that libmicrohttpd fails to send and closes the connection,
	 * instead of keeping it in CLOSE-WAIT. Nothing was answered: not counted.
	 */
	if (req->client_gone && req->conn && req->conn->fd >= 0)
		shutdown(req->conn->fd, SHUT_RDWR);
	ok = MHD_queue_response(req->mhd, req->status, r);
	MHD_destroy_response(r);
	req->responded = true;
	if (req->conn)
		qs_conn_phase(req->conn, QS_PHASE_SENDING);
	if (!req->client_gone)
		qs_http_count(req);
	return ok == MHD_YES;
}

/*
 * Percent-decoding of the path and of query keys and values, as
 * libmicrohttpd's own (%HH; a malformed escape is kept as it is), except
 * that %00 decodes to the byte 0xFF: our callbacks see C strings, which a
 * decoded NUL would silently cut short (a queue "a%00b" becoming "a"),
 * while 0xFF is never valid UTF-8, so the one text rule refuses the value
 * with a 400 naming its field.
 */
static size_t
unescape_cb(void *cls, struct MHD_Connection *c, char *s)
{
	char	   *r = s;
	char	   *w = s;

	while (*r)
	{
		if (r[0] == '%' && qs_hexval(r[1]) >= 0 && qs_hexval(r[2]) >= 0)
		{
			int			v = qs_hexval(r[1]) * 16 + qs_hexval(r[2]);

			*w++ = v == 0 ? (char) 0xFF : (char) v;
			r += 3;
		}
		else
			*w++ = *r++;
	}
	*w = '\0';
	return w - s;
}

static QsReq *
request_new(struct MHD_Connection *mhd, const char *url, const char *method, const char *version)
{
	MemoryContext cxt = AllocSetContextCreate(TopMemoryContext, "queen_streams request",
											  ALLOCSET_DEFAULT_SIZES);
	QsReq	   *req = MemoryContextAllocZero(cxt, sizeof(QsReq));
	const union MHD_ConnectionInfo *ci;

	req->ctx = cxt;
	req->mhd = mhd;
	req->url = MemoryContextStrdup(cxt, url);
	req->method = MemoryContextStrdup(cxt, method);
	req->http11 = version != NULL && strcmp(version, MHD_HTTP_VERSION_1_1) == 0;
	req->route = QS_R_NONE;
	req->status = 500;
	ci = MHD_get_connection_info(mhd, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	req->conn = ci ? (QsConn *) ci->socket_context : NULL;
	req->header_bytes = qs_request_header_bytes(mhd, url);
	return req;
}

static enum MHD_Result
access_cb(void *cls, struct MHD_Connection *mhd, const char *url,
		  const char *method, const char *version, const char *upload_data,
		  size_t *upload_data_size, void **con_cls)
{
	QsReq	   *volatile req = (QsReq *) *con_cls;
	volatile enum MHD_Result rc = MHD_YES;
	MemoryContext oldcxt = CurrentMemoryContext;

	PG_TRY();
	{
		if (req == NULL)
		{
			/* headers are complete: route and check limits, body not read yet */
			req = request_new(mhd, url, method, version);
			*con_cls = req;
			if (req->conn)
			{
				qs_conn_phase(req->conn, QS_PHASE_BODY);
				qs_group_unawait(req->conn);	/* it came back, whatever it asks */
			}
			MemoryContextSwitchTo(req->ctx);
			initStringInfo(&req->body);
			qs_http_route(req);
		}
		else if (*upload_data_size > 0)
		{
			if ((Size) req->body.len + *upload_data_size > (Size) qs_http_max_body_bytes)
			{
				/*
				 * A body without Content-Length grew past the limit; a
				 * response cannot be queued mid-body, so the connection is
				 * dropped and completed_cb answers 413 on its socket.
				 */
				req->status = 413;
				req->body_too_large = true;
				rc = MHD_NO;
			}
			else
			{
				MemoryContextSwitchTo(req->ctx);
				appendBinaryStringInfo(&req->body, upload_data, (int) *upload_data_size);
			}
			*upload_data_size = 0;
		}
		else if (!req->dispatched && req->resp == NULL)
		{
			/* being served, grouped or parked: no deadline until it answers */
			if (req->conn)
				qs_conn_phase(req->conn, QS_PHASE_BUSY);
			qs_http_dispatch(req);
		}

		if (rc == MHD_YES && req->resp != NULL && !req->responded && !req->grouped)
		{
			if (!queue_response(req))
				rc = MHD_NO;
		}
		else if (rc == MHD_YES && (req->parked || req->grouped) && !req->responded)
		{
			/* answered after the wake-up (parked.c) or the group's commit (group.c) */
			MHD_suspend_connection(mhd);
			if (!req->grouped)
				qs_park(req);
		}
	}
	PG_CATCH();
	{
		/* dispatch catches its own errors; this is out of memory and the like */
		MemoryContextSwitchTo(oldcxt);
		/* logged whole (its own level and SQLSTATE), then the connection is closed unanswered */
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
		rc = MHD_NO;			/* closes the connection */
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	return rc;
}

static void
completed_cb(void *cls, struct MHD_Connection *mhd, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	QsReq	   *req = (QsReq *) *con_cls;

	if (req == NULL)
		return;
	/*
	 * A body we refused mid-way (it grew past max_body_bytes without a
	 * Content-Length): libmicrohttpd cannot queue a response then and drops
	 * the connection, so answer 413 on the socket ourselves (not closed yet:
	 * MHD_USE_TURBO skips the shutdown), then linger so the client reads it.
	 * (A malformed chunk libmicrohttpd answers itself, 400.)
	 */
	if (toe == MHD_REQUEST_TERMINATED_WITH_ERROR && req->body_too_large && !req->responded &&
		req->conn && req->conn->fd >= 0 && req->conn->phase != QS_PHASE_CLOSING)
	{
		qs_screen_write_answer(req->conn->fd, 413, "request body too large", false);
		qs_http_count(req);
		req->conn->linger = true;
	}
	qs_handback_forget(req);
	qs_unpark(req);
	qs_group_forget(req);
	if (req->conn && req->conn->phase != QS_PHASE_CLOSING)
		qs_conn_phase(req->conn, QS_PHASE_IDLE);
	*con_cls = NULL;
	MemoryContextDelete(req->ctx);
}

static void
connection_cb(void *cls, struct MHD_Connection *mhd, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	if (toe == MHD_CONNECTION_NOTIFY_STARTED)
	{
		/* malloc: nothing here may raise inside libmicrohttpd's frames */
		QsConn	   *c = malloc(sizeof(QsConn));
		const union MHD_ConnectionInfo *ci;

		*socket_context = c;
		if (c == NULL)
			return;
		memset(c, 0, sizeof(QsConn));
		c->mhd = mhd;
		ci = MHD_get_connection_info(mhd, MHD_CONNECTION_INFO_CONNECTION_FD);
		c->fd = ci ? ci->connect_fd : -1;
		qs_conn_opened(c);
	}
	else if (*socket_context != NULL)
	{
		QsConn	   *c = (QsConn *) *socket_context;

		/* answered before the body was read: drain it on a copy of the socket */
		if (c->linger && c->fd >= 0)
			qs_screen_linger_dup(c->fd);
		qs_group_unawait(c);
		qs_conn_closed(c);
		free(c);
		*socket_context = NULL;
	}
}

/* The abstract unix address at which worker `index` receives connections. */
static socklen_t
handoff_addr(int index, struct sockaddr_un *sun)
{
	int			len;

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	len = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1, "queen_streams.http.%d.%d.%d",
				   (int) PostmasterPid, qs_http_port, index);
	return offsetof(struct sockaddr_un, sun_path) + 1 + len;
}

/* This worker's handoff socket; -1 (no balancing, still serving) on failure. */
static int
handoff_socket(void)
{
	struct sockaddr_un sun;
	socklen_t	len = handoff_addr(qs_http_worker_index, &sun);
	int			on = 1;
	int			fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	/* the kernel then tells us who sent each connection */
	if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) < 0 ||
		bind(fd, (struct sockaddr *) &sun, len) < 0)
	{
		ereport(LOG,
				(errmsg("could not create the connection handoff socket: %m")));
		close(fd);
		return -1;
	}
	return fd;
}

/* A non-blocking listening socket in the port's SO_REUSEPORT group, or -1. */
static int
listen_socket(struct addrinfo *ai)
{
	int			on = 1;
	int			save;
	int			fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
							ai->ai_protocol);

	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) == 0 &&
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) == 0 &&
		(ai->ai_family != AF_INET6 ||
		 setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on)) == 0) &&
		bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		listen(fd, 1024) == 0)
		return fd;
	save = errno;
	close(fd);
	errno = save;
	return -1;
}

bool
qs_http_daemon_start(void)
{
	struct addrinfo hints;
	struct addrinfo *res = NULL;
	char		port[16];
	const char *host = qs_http_listen_address;
	unsigned int flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO |
		MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET;
	size_t		pool = qs_http_pool_size();
	int			rc;

	if (host == NULL || host[0] == '\0' || strcmp(host, "*") == 0)
		host = "0.0.0.0";
	snprintf(port, sizeof(port), "%d", qs_http_port);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0 || res == NULL)
	{
		ereport(WARNING,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("could not resolve listen address \"%s\": %s",
						host, gai_strerror(rc))));
		return false;
	}
	if (res->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	listen_fd = listen_socket(res);
	freeaddrinfo(res);
	if (listen_fd < 0)
	{
		ereport(WARNING,
				(errmsg("could not start the HTTP listener on %s:%d: %m",
						host, qs_http_port),
				 errhint("Check that the address is local and the port is free, "
						 "or set queen_streams.http_port = 0 to disable the listener.")));
		return false;
	}

	starting = true;
	daemon_ = MHD_start_daemon(flags, 0, NULL, NULL, access_cb, NULL,
							   MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
							   MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool,
							   MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int) 0,
							   MHD_OPTION_NOTIFY_COMPLETED, completed_cb, NULL,
							   MHD_OPTION_NOTIFY_CONNECTION, connection_cb, NULL,
							   MHD_OPTION_UNESCAPE_CALLBACK, unescape_cb, NULL,
							   MHD_OPTION_END);
	starting = false;
	if (daemon_ == NULL)
	{
		close(listen_fd);
		listen_fd = -1;
		ereport(WARNING,
				(errmsg("could not start the HTTP listener on %s:%d",
						host, qs_http_port)));
		return false;
	}
	handoff_fd = handoff_socket();
	qs_screen_init(add_connection);
	qs_http_shared->workers[qs_http_worker_index].handoff = handoff_fd >= 0;
	return true;
}

int
qs_http_listen_fd(void)
{
	return listen_fd;
}

int
qs_http_handoff_fd(void)
{
	return handoff_fd;
}

/* Connections a worker has, counting those handed to it and not yet taken. */
static uint32
worker_load(QsWorkerSlot *w)
{
	return pg_atomic_read_u32(&w->connections) + pg_atomic_read_u32(&w->incoming);
}

/* incoming - 1, never below zero (a restarted worker starts again at zero) */
static void
incoming_taken(QsWorkerSlot *w)
{
	uint32		old = pg_atomic_read_u32(&w->incoming);

	while (old > 0 && !pg_atomic_compare_exchange_u32(&w->incoming, &old, old - 1))
		;
}

/*
 * Pass fd to the worker with the fewest connections if it has fewer than
 * this one; false when this worker keeps it.
 */
static bool
hand_off(int fd)
{
	QsWorkerSlot *me = &qs_http_shared->workers[qs_http_worker_index];
	QsWorkerSlot *target = NULL;
	uint32		least = worker_load(me);
	struct sockaddr_un sun;
	char		byte = 0;
	struct iovec iov = {&byte, 1};
	union
	{
		struct cmsghdr h;
		char		buf[CMSG_SPACE(sizeof(int))];
	}			cm;
	struct msghdr msg;
	struct cmsghdr *c;
	int			index = -1;

	if (handoff_fd < 0)
		return false;
	for (int i = 0; i < qs_http_workers && i < QS_MAX_WORKERS; i++)
	{
		QsWorkerSlot *w = &qs_http_shared->workers[i];
		uint32		load;

		if (i == qs_http_worker_index || w->pid == 0 || !w->listening || !w->handoff)
			continue;
		load = worker_load(w);
		if (load < least)
		{
			least = load;
			target = w;
			index = i;
		}
	}
	if (target == NULL)
		return false;

	memset(&msg, 0, sizeof(msg));
	memset(&cm, 0, sizeof(cm));
	msg.msg_name = &sun;
	msg.msg_namelen = handoff_addr(index, &sun);
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cm.buf;
	msg.msg_controllen = sizeof(cm.buf);
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));

	/* counted before it is sent, so the next accept already sees it */
	pg_atomic_fetch_add_u32(&target->incoming, 1);
	if (sendmsg(handoff_fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
	{
		incoming_taken(target);
		return false;
	}
	close(fd);
	return true;
}

/* Hand a screened connection to libmicrohttpd (the screen's QsScreenPass). */
static void
add_connection(int fd, const struct sockaddr *addr, socklen_t len)
{
	/* libmicrohttpd closes the socket when it cannot take it */
	if (MHD_add_connection(daemon_, fd, addr, len) != MHD_YES)
		ereport(DEBUG1,
				(errmsg_internal("could not add a connection: %m")));
}

/* Take the connections other workers handed to this one. */
static void
receive_handoffs(void)
{
	QsWorkerSlot *me = &qs_http_shared->workers[qs_http_worker_index];

	for (int n = 0; n < 64; n++)
	{
		char		byte;
		struct iovec iov = {&byte, 1};
		union
		{
			struct cmsghdr h;
			char		buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(4 * sizeof(int))];
		}			cm;
		struct msghdr msg;
		struct cmsghdr *c;
		struct ucred *cred = NULL;
		int			fds[4];
		int			nfds = 0;

		memset(&msg, 0, sizeof(msg));
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = cm.buf;
		msg.msg_controllen = sizeof(cm.buf);
		if (recvmsg(handoff_fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) < 0)
		{
			if (errno == EINTR)
				continue;
			break;
		}
		for (c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c))
		{
			if (c->cmsg_level != SOL_SOCKET)
				continue;
			if (c->cmsg_type == SCM_CREDENTIALS)
				cred = (struct ucred *) CMSG_DATA(c);
			else if (c->cmsg_type == SCM_RIGHTS)
			{
				int			k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

				for (int i = 0; i < k && nfds < (int) lengthof(fds); i++)
					memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			}
		}
		/* the address is abstract, open to any local user: only our own uid counts */
		if (cred == NULL || cred->uid != geteuid() || nfds != 1)
		{
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			continue;
		}
		incoming_taken(me);
		{
			struct sockaddr_storage addr;
			socklen_t	len = sizeof(addr);

			if (getpeername(fds[0], (struct sockaddr *) &addr, &len) < 0)
				close(fds[0]);
			else
				qs_screen_add(fds[0], (struct sockaddr *) &addr, len);
		}
	}
}

/*
 * Accept what is waiting on the listening socket (if take_new), keeping or
 * handing over each connection, and take what other workers handed over.
 * False when out of file descriptors: stop polling the listening socket for
 * a while.
 */
bool
qs_http_accept(bool take_new)
{
	bool		ok = true;

	for (int n = 0; take_new && n < 16; n++)
	{
		struct sockaddr_storage addr;
		socklen_t	len = sizeof(addr);
		int			fd = accept4(listen_fd, (struct sockaddr *) &addr, &len,
								 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
		{
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
			{
				ereport(LOG,
						(errmsg("could not accept a connection: %m")));
				/* tell one waiting client instead of leaving it in the backlog */
				if (errno == EMFILE || errno == ENFILE)
					qs_screen_out_of_fds(listen_fd);
				ok = false;
			}
			break;
		}
		if (!hand_off(fd))
			qs_screen_add(fd, (struct sockaddr *) &addr, len);
	}
	if (handoff_fd >= 0)
		receive_handoffs();
	return ok;
}

int
qs_http_daemon_fd(void)
{
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_EPOLL_FD);

	if (di == NULL)
		elog(ERROR, "libmicrohttpd has no epoll fd");
	return di->epoll_fd;
}

/* A suspended request got its answer outside any callback: send it and resume. */
static void
send_suspended(QsReq *req)
{
	if (!queue_response(req))
		req->close = true;
	MHD_resume_connection(req->mhd);
}

/*
 * Send the answers dispatch handed back (a group's members, retried parked
 * pops), then run until libmicrohttpd has nothing it wants to do right away.
 */
void
qs_http_daemon_run(void)
{
	QsReq	   *req;

	while ((req = qs_handback_next()) != NULL)
		send_suspended(req);
	for (int i = 0; i < 16; i++)
	{
		MHD_UNSIGNED_LONG_LONG t;

		MHD_run(daemon_);
		if (MHD_get_timeout(daemon_, &t) != MHD_YES || t > 0)
			break;
	}
}

long
qs_http_daemon_timeout(void)
{
	MHD_UNSIGNED_LONG_LONG t;

	if (MHD_get_timeout(daemon_, &t) != MHD_YES)
		return -1;
	return (long) Min(t, (MHD_UNSIGNED_LONG_LONG) INT_MAX);
}

