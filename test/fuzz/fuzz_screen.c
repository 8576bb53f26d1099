/*
 * fuzz_screen: the connection screen in front of libmicrohttpd
 * (src/http/transport/screen.c), driven over a real socket pair with a fake clock.
 *
 * Input: byte 0 chooses the limits (bit 0: max_header_bytes 1 kB, else
 * 16 kB; bit 1: max_body_bytes 1 kB, else 16 MB) and how the client ends
 * (bit 2: it shuts its side down after the last byte); bytes 1-2 seed the
 * splits; the rest is what the client sends, written in random splits (1 to
 * 1 kB) with the screen run after each.
 * Checked after every run: the screen's epoll set has nothing ready (a
 * partial head must not keep it readable, or the worker spins); a
 * connection is handed to libmicrohttpd at most once, only with a complete
 * head, with nothing consumed; it is handed on or answered, never both; at
 * most one answer is written, with a status the screen gives. At the end
 * the clock passes every deadline: nothing is left held or counted.
 */
#include "shim.h"

#include "http/transport/transport.h"
#include "storage/fd.h"
#include "utils/timestamp.h"

#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* the screen's clock is ours: deadlines pass when the harness says so */
static TimestampTz fuzz_now = 0;
static TimestampTz
fuzz_clock(void)
{
	return fuzz_now;
}
#define GetCurrentTimestamp fuzz_clock

#include "http/transport/screen.c"

/* ---------------------------------------------------------------- what screen.c calls */
int			qs_http_max_body_bytes = 16 * 1024 * 1024;
int			qs_http_max_header_bytes = 16 * 1024;
int			qs_http_header_timeout_ms = 10000;
int			qs_http_body_timeout_ms = 30000;
int			qs_http_max_connections = 1000;
int			qs_http_worker_index = 0;
int			max_safe_fds = 32;
QsHttpShared *qs_http_shared = NULL;

static int	handed_fd = -1;
static int	handed_count = 0;
static int	answered_count = 0;
static const char *sent = NULL;	/* what the client wrote so far */
static size_t nsent = 0;

long
TimestampDifferenceMilliseconds(TimestampTz start_time, TimestampTz stop_time)
{
	return stop_time <= start_time ? 0 : (long) ((stop_time - start_time + 999) / 1000);
}

int
errcode_for_socket_access(void)
{
	return 0;
}

size_t
qs_http_pool_size(void)
{
	return Max((size_t) 64 * 1024, 4 * (size_t) qs_http_max_header_bytes);
}

int
qs_open_connections(void)
{
	return (int) pg_atomic_read_u32(&qs_http_shared->workers[0].connections);
}

void
qs_http_count_status(QsRouteId route, int status)
{
	if (status != 400 && status != 413 && status != 414 && status != 431 &&
		status != 501 && status != 503)
	{
		fprintf(stderr, "the screen answered %d\n", status);
		abort();
	}
	answered_count++;
}

/* libmicrohttpd's side (the screen's QsScreenPass): the head must be complete and still unread */
static void
handed_on(int fd, const struct sockaddr *addr, socklen_t len)
{
	static char buf[64 * 1024 + 2048];
	ssize_t		n = recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);

	if (++handed_count > 1 || answered_count > 0)
		abort();
	if (n < 0 || (size_t) n != Min(nsent, sizeof(buf)) || memcmp(buf, sent, n) != 0)
	{
		fprintf(stderr, "handed on with %zd of %zu bytes unread\n", n, nsent);
		abort();
	}
	if (head_end(buf, n) == 0)
	{
		fprintf(stderr, "handed on without a complete head\n");
		abort();
	}
	handed_fd = fd;
}

/* ---------------------------------------------------------------- the checks */

static uint32
rng_next(uint32 *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

/* Nothing in the screen's epoll set may still be ready after a run. */
static void
check_quiet(void)
{
	struct epoll_event ev;

	if (epoll_wait(qs_screen_fd(), &ev, 1, 0) != 0)
	{
		fprintf(stderr, "the screen is still readable after its run (it would spin)\n");
		abort();
	}
}

/* What came back to the client: at most one status line, from the screen's set. */
static void
check_answers(int cli, int *nlines)
{
	char		buf[4096];
	ssize_t		n;

	while ((n = recv(cli, buf, sizeof(buf) - 1, MSG_DONTWAIT)) > 0)
	{
		buf[n] = '\0';
		for (char *p = buf; (p = strstr(p, "HTTP/1.1 ")) != NULL; p += 9)
		{
			int			status = atoi(p + 9);

			if (++*nlines > 1 || status < 400 || status > 503)
			{
				fprintf(stderr, "answer %d (status %d)\n", *nlines, status);
				abort();
			}
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int			sv[2];
	uint32		seed;
	size_t		off;
	int			nlines = 0;
	struct sockaddr_storage addr;

	if (size < 3 || size > 40 * 1024)
		return 0;
	if (qs_http_shared == NULL)
	{
		qs_http_shared = calloc(1, sizeof(QsHttpShared));
		qs_screen_init(handed_on);
		if (qs_screen_fd() < 0)
			abort();
	}
	qs_http_max_header_bytes = (data[0] & 1) ? 1024 : 16 * 1024;
	qs_http_max_body_bytes = (data[0] & 2) ? 1024 : 16 * 1024 * 1024;
	seed = data[1] | (data[2] << 8);
	data += 3;
	size -= 3;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
		abort();
	handed_fd = -1;
	handed_count = answered_count = 0;
	sent = (const char *) data;
	nsent = 0;
	memset(&addr, 0, sizeof(addr));
	addr.ss_family = AF_UNIX;
	fuzz_now += USECS_PER_SEC;

	qs_screen_add(sv[0], (struct sockaddr *) &addr, sizeof(sa_family_t));
	check_quiet();
	for (off = 0; off < size;)
	{
		static const size_t caps[] = {1, 3, 16, 64, 1024};
		size_t		cap = caps[rng_next(&seed) % lengthof(caps)];
		size_t		n = 1 + rng_next(&seed) % cap;	/* Min() would draw twice */
		ssize_t		w;

		n = Min(size - off, n);
		w = send(sv[1], data + off, n, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w <= 0)
			break;				/* closed by the screen, or its buffer is full */
		off += w;
		if (handed_fd < 0)
			nsent = off;		/* what libmicrohttpd should find unread */
		qs_screen_run();
		check_quiet();
		check_answers(sv[1], &nlines);
	}
	if (*(data - 3) & 4)
	{
		shutdown(sv[1], SHUT_WR);
		qs_screen_run();
		check_quiet();
		check_answers(sv[1], &nlines);
	}

	/* every deadline passes: the head's (408), then a lingering close's */
	fuzz_now += 3600 * USECS_PER_SEC;
	qs_screen_run();
	fuzz_now += 3600 * USECS_PER_SEC;
	qs_screen_run();
	check_quiet();
	check_answers(sv[1], &nlines);
	if (!dlist_is_empty(&held) || nscreening != 0 || nlingering != 0 ||
		pg_atomic_read_u32(&qs_http_shared->workers[0].connections) != 0)
	{
		fprintf(stderr, "left held: screening %d, lingering %d\n", nscreening, nlingering);
		abort();
	}
	if (handed_fd >= 0 && nlines > 0)
		abort();				/* handed on and answered */
	if (handed_fd >= 0)
		close(handed_fd);
	close(sv[1]);
	return 0;
}
