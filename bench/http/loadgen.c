/*
 * loadgen.c: a small closed-loop HTTP/1.1 load generator for bench/http.
 * One thread, epoll, C keep-alive connections, each sending its request,
 * waiting for the whole response (Content-Length), then sending the next.
 *
 *   loadgen -p PORT -c CONNS -d SECONDS [-w WARMUP] -m METHOD -u PATH [-b BODIES] [-t TENANTS]
 *           [-n TOKEN [-N BASE]]
 *
 * BODIES holds one request body per line; connection i sends line i % n.
 * With -n, every copy of TOKEN in a body becomes, in each request, the
 * next number from BASE (0), zero-padded to TOKEN's length: fresh
 * transaction ids in every push, as a client's are.
 * TENANTS likewise holds one x-queen-tenant value per line (bench/cells.sh).
 * Prints: requests, req/s, p50/p99/max latency (ms) and status counts.
 *
 * A connection waits for EPOLLOUT only while part of its request is unsent:
 * an idle socket is always writable, so asking for it all the time would
 * turn epoll_wait into a busy loop that takes a whole CPU from the server.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct Conn
{
	int			fd;
	char	   *req;
	size_t		reqlen;
	size_t		sent;
	bool		want_out;		/* registered for EPOLLOUT */
	char		buf[1 << 16];
	size_t		have;
	double		started;
	size_t	   *marks;			/* where TOKEN's copies start in req */
	int			nmarks;
} Conn;

static const char *token = NULL;
static unsigned long long next_number = 0;

/* The next number into the places of TOKEN in c's request, as wide as TOKEN. */
static void
renumber(Conn *c)
{
	char		digits[32];
	size_t		toklen,
				n;

	if (c->nmarks == 0)
		return;
	toklen = strlen(token);
	n = snprintf(digits, sizeof(digits), "%0*llu", (int) toklen, next_number++);
	if (n > toklen)
	{
		fprintf(stderr, "loadgen: %llu is wider than TOKEN\n", next_number - 1);
		exit(1);
	}
	for (int i = 0; i < c->nmarks; i++)
		memcpy(c->req + c->marks[i], digits, toklen);
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The lines of a file, without their newlines; -1 if it cannot be read. */
static int
read_lines(const char *file, char ***out)
{
	FILE	   *f = fopen(file, "r");
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		n;
	int			count = 0;

	if (!f)
	{
		perror(file);
		return -1;
	}
	*out = NULL;
	while ((n = getline(&line, &cap, f)) > 0)
	{
		if (line[n - 1] == '\n')
			line[--n] = '\0';
		*out = realloc(*out, sizeof(char *) * (count + 1));
		(*out)[count++] = strdup(line);
	}
	fclose(f);
	return count;
}

static int
cmp(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

static int
dial(int port)
{
	struct sockaddr_in sa;
	int			fd = socket(AF_INET, SOCK_STREAM, 0);
	int			one = 1;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
	{
		perror("connect");
		exit(1);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

/* Write what is unsent of c's request; wait for EPOLLOUT only if some remains. */
static void
send_more(int ep, Conn *c)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
	ssize_t		w = write(c->fd, c->req + c->sent, c->reqlen - c->sent);

	if (w > 0)
		c->sent += w;
	else if (w < 0 && errno != EAGAIN)
	{
		perror("write");
		exit(1);
	}
	if ((c->sent < c->reqlen) != c->want_out)
	{
		c->want_out = c->sent < c->reqlen;
		if (c->want_out)
			ev.events |= EPOLLOUT;
		epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
	}
}

/* Length of a complete response at the start of buf, or 0. */
static size_t
complete(const char *buf, size_t have, int *status)
{
	const char *end = memmem(buf, have, "\r\n\r\n", 4);
	const char *cl;
	size_t		head,
				len = 0;

	if (end == NULL)
		return 0;
	head = end - buf + 4;
	*status = atoi(buf + 9);
	cl = memmem(buf, head, "Content-Length: ", 16);
	if (cl)
		len = strtoul(cl + 16, NULL, 10);
	return have >= head + len ? head + len : 0;
}

int
main(int argc, char **argv)
{
	int			port = 6632,
				conns = 8,
				opt;
	double		duration = 10,
				warmup = 2;
	const char *method = "GET",
			   *path = "/health",
			   *bodies_file = NULL,
			   *tenants_file = NULL;
	char	  **bodies = NULL,
			  **tenants = NULL;
	int			nbodies = 0,
				ntenants = 0;
	Conn	   *cs;
	int			ep;
	double	   *lat;
	size_t		nlat = 0,
				maxlat = 20000000;
	long		statuses[600] = {0};
	double		t0,
				tmeasure,
				tend;
	long		done = 0;

	while ((opt = getopt(argc, argv, "p:c:d:w:m:u:b:t:n:N:")) != -1)
	{
		switch (opt)
		{
			case 'p': port = atoi(optarg); break;
			case 'c': conns = atoi(optarg); break;
			case 'd': duration = atof(optarg); break;
			case 'w': warmup = atof(optarg); break;
			case 'm': method = optarg; break;
			case 'u': path = optarg; break;
			case 'b': bodies_file = optarg; break;
			case 't': tenants_file = optarg; break;
			case 'n': token = optarg; break;
			case 'N':
				{
					char	   *end;

					next_number = strtoull(optarg, &end, 10);
					if (*optarg < '0' || *optarg > '9' || *end != '\0')
					{
						fprintf(stderr, "loadgen: BASE must be a number\n");
						return 2;
					}
					break;
				}
			default:
				fprintf(stderr, "usage: loadgen -p PORT -c CONNS -d SECS [-w SECS] -m METHOD -u PATH [-b FILE] [-t FILE] [-n TOKEN [-N BASE]]\n");
				return 2;
		}
	}
	if (token && (strlen(token) == 0 || strlen(token) > 20))
	{
		fprintf(stderr, "loadgen: TOKEN must be 1 to 20 bytes long\n");
		return 2;
	}
	if (tenants_file && (ntenants = read_lines(tenants_file, &tenants)) < 0)
		return 1;
	if (bodies_file && (nbodies = read_lines(bodies_file, &bodies)) < 0)
		return 1;

	lat = malloc(sizeof(double) * maxlat);
	cs = calloc(conns, sizeof(Conn));
	ep = epoll_create1(0);
	for (int i = 0; i < conns; i++)
	{
		Conn	   *c = &cs[i];
		const char *body = nbodies ? bodies[i % nbodies] : NULL;
		size_t		blen = body ? strlen(body) : 0;
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};

		c->req = malloc(blen + 512);
		c->reqlen = sprintf(c->req, "%s %s HTTP/1.1\r\nHost: bench\r\n%s", method, path,
							body ? "Content-Type: application/json\r\n" : "");
		if (ntenants > 0)
			c->reqlen += sprintf(c->req + c->reqlen, "x-queen-tenant: %.64s\r\n",
								 tenants[i % ntenants]);
		if (body)
			c->reqlen += sprintf(c->req + c->reqlen, "Content-Length: %zu\r\n\r\n%s", blen, body);
		else
			c->reqlen += sprintf(c->req + c->reqlen, "\r\n");
		for (const char *m = c->req + c->reqlen - blen;
			 token && (m = memmem(m, c->req + c->reqlen - m, token, strlen(token)));
			 m += strlen(token))
		{
			c->marks = realloc(c->marks, sizeof(size_t) * (c->nmarks + 1));
			c->marks[c->nmarks++] = m - c->req;
		}
		c->fd = dial(port);
		epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
	}

	t0 = now();
	tmeasure = t0 + warmup;
	tend = tmeasure + duration;
	for (int i = 0; i < conns; i++)
	{
		cs[i].started = t0;
		renumber(&cs[i]);
		send_more(ep, &cs[i]);
	}
	while (now() < tend)
	{
		struct epoll_event evs[256];
		int			n = epoll_wait(ep, evs, 256, 100);

		for (int k = 0; k < n; k++)
		{
			Conn	   *c = evs[k].data.ptr;
			int			status;
			size_t		len;

			if ((evs[k].events & EPOLLOUT) && c->sent < c->reqlen)
				send_more(ep, c);
			if (evs[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
			{
				ssize_t		r = read(c->fd, c->buf + c->have, sizeof(c->buf) - c->have);

				if (r == 0 || (r < 0 && errno != EAGAIN))
				{
					fprintf(stderr, "loadgen: connection closed by the server\n");
					return 1;
				}
				if (r > 0)
					c->have += r;
				if (c->have == sizeof(c->buf))
					c->have = 0;	/* a body we do not keep */
				while ((len = complete(c->buf, c->have, &status)) > 0)
				{
					double		t = now();

					if (t >= tmeasure)
					{
						if (nlat < maxlat)
							lat[nlat++] = t - c->started;
						if (status > 0 && status < 600)
							statuses[status]++;
						done++;
					}
					memmove(c->buf, c->buf + len, c->have - len);
					c->have -= len;
					c->sent = 0;
					c->started = t;
					renumber(c);
					send_more(ep, c);
				}
			}
		}
	}
	qsort(lat, nlat, sizeof(double), cmp);
	printf("requests %ld rps %.0f p50_ms %.2f p99_ms %.2f max_ms %.2f status",
		   done, done / duration,
		   nlat ? 1000 * lat[nlat / 2] : 0, nlat ? 1000 * lat[(size_t) (nlat * 0.99)] : 0,
		   nlat ? 1000 * lat[nlat - 1] : 0);
	for (int s = 0; s < 600; s++)
		if (statuses[s])
			printf(" %d:%ld", s, statuses[s]);
	printf("\n");
	return 0;
}
