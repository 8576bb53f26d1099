/*
 * daemon.c: the libmicrohttpd glue. One daemon per worker, in external-event
 * mode with its own epoll fd (which the worker waits on), no threads.
 *
 * Callbacks only ever run inside MHD_run(), called from the worker's loop.
 * Every PostgreSQL call made from them sits inside a PG_TRY in our own
 * frame, so no error can unwind through libmicrohttpd's stack.
 */
#include "http/http_int.h"

#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "utils/memutils.h"

static struct MHD_Daemon *daemon_ = NULL;
static bool starting = false;

/* Answered requests whose commit is not flushed yet; their connections are suspended. */
static dlist_head flush_wait = DLIST_STATIC_INIT(flush_wait);

static const char empty_body[] = "";

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	char		buf[512];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = '\0';
	/* client misbehaviour is routine; only start-up problems are worth a LOG */
	ereport(starting ? LOG : DEBUG1,
			(errmsg_internal("queen_streams http: %s", buf)));
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
	if (req->www_authenticate)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, req->www_authenticate);
	if (req->status == 405)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, qs_route_method(req->route));
	if (req->close)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	ok = MHD_queue_response(req->mhd, req->status, r);
	MHD_destroy_response(r);
	req->responded = true;
	if (req->conn)
		qs_conn_phase(req->conn, QS_PHASE_SENDING);
	qs_http_count(req);
	return ok == MHD_YES;
}

static QsReq *
request_new(struct MHD_Connection *mhd, const char *url, const char *method)
{
	MemoryContext cxt = AllocSetContextCreate(TopMemoryContext, "queen_streams request",
											  ALLOCSET_DEFAULT_SIZES);
	QsReq	   *req = MemoryContextAllocZero(cxt, sizeof(QsReq));
	const union MHD_ConnectionInfo *ci;

	req->ctx = cxt;
	req->mhd = mhd;
	req->url = MemoryContextStrdup(cxt, url);
	req->method = MemoryContextStrdup(cxt, method);
	req->route = QS_R_NONE;
	req->status = 500;
	ci = MHD_get_connection_info(mhd, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	req->conn = ci ? (QsConn *) ci->socket_context : NULL;
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
			req = request_new(mhd, url, method);
			*con_cls = req;
			if (req->conn)
				qs_conn_phase(req->conn, QS_PHASE_BODY);
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
				 * response cannot be queued mid-body, so drop the connection.
				 */
				req->status = 413;
				qs_http_count(req);
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
			qs_http_dispatch(req);

		if (rc == MHD_YES && req->resp != NULL && !req->responded && !req->flush_waiting)
		{
			if (req->lsn != InvalidXLogRecPtr && req->lsn > GetFlushRecPtr(NULL))
			{
				/* answered once the commit is flushed, with the others in hand */
				req->flush_waiting = true;
				dlist_push_tail(&flush_wait, &req->flush_node);
				MHD_suspend_connection(mhd);
			}
			else if (!queue_response(req))
				rc = MHD_NO;
		}
		else if (rc == MHD_YES && req->parked && !req->responded)
			MHD_suspend_connection(mhd);
	}
	PG_CATCH();
	{
		/* dispatch catches its own errors; this is out of memory and the like */
		MemoryContextSwitchTo(oldcxt);
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
	if (req->parked)
		qs_pop_unpark(req);
	if (req->flush_waiting)
		dlist_delete(&req->flush_node);
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

		qs_conn_closed(c);
		free(c);
		*socket_context = NULL;
	}
}

bool
qs_http_daemon_start(void)
{
	struct addrinfo hints;
	struct addrinfo *res = NULL;
	char		port[16];
	const char *host = qs_http_listen_address;
	unsigned int flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO |
		MHD_USE_ERROR_LOG;
	size_t		pool = Max(64 * 1024, 2 * (size_t) qs_http_max_header_bytes + 16 * 1024);
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
				 errmsg("queen_streams: could not resolve listen address \"%s\": %s",
						host, gai_strerror(rc))));
		return false;
	}
	if (res->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;

	starting = true;
	daemon_ = MHD_start_daemon(flags, (uint16) qs_http_port, NULL, NULL, access_cb, NULL,
							   MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
							   MHD_OPTION_SOCK_ADDR, res->ai_addr,
							   MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned int) 1,
							   MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned int) 1024,
							   MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool,
							   MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int) 0,
							   MHD_OPTION_NOTIFY_COMPLETED, completed_cb, NULL,
							   MHD_OPTION_NOTIFY_CONNECTION, connection_cb, NULL,
							   MHD_OPTION_END);
	starting = false;
	freeaddrinfo(res);
	if (daemon_ == NULL)
	{
		ereport(WARNING,
				(errmsg("queen_streams: could not start the HTTP listener on %s:%d",
						host, qs_http_port),
				 errhint("Check that the address is local and the port is free, "
						 "or set queen_streams.http_port = 0 to disable the listener.")));
		return false;
	}
	return true;
}

int
qs_http_daemon_fd(void)
{
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_EPOLL_FD);

	if (di == NULL)
		elog(ERROR, "queen_streams: libmicrohttpd has no epoll fd");
	return di->epoll_fd;
}

/* Run until libmicrohttpd has nothing it wants to do right away. */
void
qs_http_daemon_run(void)
{
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

/* A parked pop got its answer outside any callback: send it and resume. */
void
qs_http_send_parked(QsReq *req)
{
	struct MHD_Connection *mhd = req->mhd;

	req->parked = false;
	if (req->lsn != InvalidXLogRecPtr && req->lsn > GetFlushRecPtr(NULL))
	{
		/* still suspended: the flush below answers it */
		req->flush_waiting = true;
		dlist_push_tail(&flush_wait, &req->flush_node);
		return;
	}
	if (!queue_response(req))
		req->close = true;
	MHD_resume_connection(mhd);
}

bool
qs_http_flush_waiting(void)
{
	return !dlist_is_empty(&flush_wait);
}

/* One WAL flush for every answered request, then send their answers. */
bool
qs_http_flush_pending(void)
{
	dlist_mutable_iter it;
	XLogRecPtr	upto = InvalidXLogRecPtr;

	if (dlist_is_empty(&flush_wait))
		return false;
	dlist_foreach_modify(it, &flush_wait)
	{
		QsReq	   *req = dlist_container(QsReq, flush_node, it.cur);

		upto = Max(upto, req->lsn);
	}
	XLogFlush(upto);
	dlist_foreach_modify(it, &flush_wait)
	{
		QsReq	   *req = dlist_container(QsReq, flush_node, it.cur);

		dlist_delete(&req->flush_node);
		req->flush_waiting = false;
		if (!queue_response(req))
			req->close = true;
		MHD_resume_connection(req->mhd);
	}
	return true;
}
