/*
 * limits.c: connection accounting and deadlines of the HTTP listener.
 *
 * libmicrohttpd's own timeout is an inactivity timer: a client that trickles
 * one byte at a time never trips it. We keep an absolute deadline per phase
 * instead (headers, body, response, keep-alive idle) and shut a late
 * connection's socket down; libmicrohttpd then sees the end of stream and
 * closes it. Over max_connections (counted across workers in shared
 * memory), a connection's request is answered 503 with Retry-After.
 */
#include "http/transport/transport.h"

#include <microhttpd.h>
#include <sys/socket.h>

#include "utils/timestamp.h"

static dlist_head conns = DLIST_STATIC_INIT(conns);
static TimestampTz next_sweep = 0;	/* 0: no deadline pending */

void
qs_conn_opened(QsConn *c)
{
	QsWorkerSlot *slot = &qs_http_shared->workers[qs_http_worker_index];

	dlist_push_tail(&conns, &c->node);
	pg_atomic_fetch_add_u32(&slot->connections, 1);
	c->over_limit = qs_open_connections() > qs_http_max_connections;
	qs_conn_phase(c, QS_PHASE_HEADERS);
}

void
qs_conn_closed(QsConn *c)
{
	QsWorkerSlot *slot = &qs_http_shared->workers[qs_http_worker_index];

	dlist_delete(&c->node);
	pg_atomic_fetch_sub_u32(&slot->connections, 1);
}

void
qs_conn_phase(QsConn *c, QsPhase phase)
{
	int			ms = 0;

	if (c->phase == QS_PHASE_CLOSING)
		return;
	c->phase = phase;
	switch (phase)
	{
		case QS_PHASE_HEADERS:
			ms = qs_http_header_timeout_ms;
			break;
		case QS_PHASE_BODY:
		case QS_PHASE_SENDING:
			ms = qs_http_body_timeout_ms;
			break;
		case QS_PHASE_IDLE:
			ms = qs_http_idle_timeout_ms;
			break;
		default:
			break;
	}
	c->deadline = ms > 0 ? TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ms) : 0;
	if (c->deadline != 0 && (next_sweep == 0 || c->deadline < next_sweep))
		next_sweep = c->deadline;
}

/* Cut off every connection past its deadline. */
void
qs_limits_sweep(void)
{
	TimestampTz now;
	TimestampTz next = 0;
	dlist_iter	it;

	if (next_sweep == 0)
		return;
	now = GetCurrentTimestamp();
	if (now < next_sweep)
		return;
	dlist_foreach(it, &conns)
	{
		QsConn	   *c = dlist_container(QsConn, node, it.cur);

		if (c->deadline == 0)
			continue;
		if (c->deadline <= now)
		{
			if (c->fd >= 0)
				shutdown(c->fd, SHUT_RDWR);
			c->phase = QS_PHASE_CLOSING;
			c->deadline = 0;
		}
		else if (next == 0 || c->deadline < next)
			next = c->deadline;
	}
	next_sweep = next;
}

long
qs_limits_timeout(void)
{
	if (next_sweep == 0)
		return -1;
	return TimestampDifferenceMilliseconds(GetCurrentTimestamp(), next_sweep);
}

static enum MHD_Result
count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	Size	   *total = (Size *) cls;

	*total += strlen(key) + (value ? strlen(value) : 0) + 4;
	return MHD_YES;
}

/* Approximate bytes of the request line and headers, for the 431 check. */
int
qs_request_header_bytes(struct MHD_Connection *mhd, const char *url)
{
	Size		total = strlen(url) + 16;

	MHD_get_connection_values(mhd, MHD_HEADER_KIND, count_header, &total);
	MHD_get_connection_values(mhd, MHD_GET_ARGUMENT_KIND, count_header, &total);
	return (int) Min(total, (Size) INT_MAX);
}

/*
 * libmicrohttpd's memory pool per connection: the head, and a node per field
 * and argument (the screen refuses heads that would not fit). No larger:
 * libmicrohttpd zeroes the whole pool between two requests of a keep-alive
 * connection, so its size is paid for by every request.
 */
size_t
qs_http_pool_size(void)
{
	return Max((size_t) 64 * 1024, 4 * (size_t) qs_http_max_header_bytes);
}
