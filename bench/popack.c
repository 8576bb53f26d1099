/*
 * popack: pop+ack load against queen_streams or the row-per-message baseline,
 * one libpq connection per client, closed loop. Each round is two
 * transactions, as bench/queen_pop_ack.sql and bench/base_pop_ack.sql:
 *
 *   text   SELECT queen.pop_text(queue, batch => B), then queen.ack of the
 *          batch's last transactionId (which completes the batch)
 *   jsonb  the same with queen.pop
 *   base   pgmq's read (SKIP LOCKED, vt and read_ct bumped, the rows
 *          returned), then DELETE of exactly those msg_ids
 *
 * The client reads the answer as any client does: the whole body arrives,
 * the ids the ack needs are taken from it (by text search: the bench's
 * payloads hold no such keys). Prints "rounds R msgs M seconds S".
 *
 *   popack CONNINFO MODE CLIENTS SECONDS [QUEUE] [BATCH]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

static const char *conninfo;
static const char *mode;
static const char *queue = "bench_pop";
static int	batch = 100;
static double seconds;

typedef struct Client
{
	pthread_t	th;
	long		rounds;
	long		msgs;
	int			failed;
} Client;

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The string value after the last (or first) `key` in s, copied into out. */
static int
value_after(const char *s, size_t len, const char *key, int last, char *out, size_t cap)
{
	size_t		klen = strlen(key);
	const char *hit = NULL;
	const char *p = s;
	const char *end = s + len;

	while (p + klen <= end && (p = memmem(p, end - p, key, klen)) != NULL)
	{
		hit = p;
		if (!last)
			break;
		p += klen;
	}
	if (hit == NULL)
		return 0;
	hit += klen;
	while (hit < end && (*hit == ' ' || *hit == ':'))
		hit++;
	if (hit >= end || *hit != '"')
		return 0;
	hit++;
	for (size_t n = 0; hit < end && *hit != '"'; n++, hit++)
	{
		if (n + 1 >= cap)
			return 0;
		out[n] = *hit;
		out[n + 1] = '\0';
	}
	return 1;
}

static int
queen_round(PGconn *c, long *msgs)
{
	const char *pv[3] = {queue};
	char		lease[64] = "",
				pid[64] = "",
				txn[256] = "";
	PGresult   *r = PQexecPrepared(c, "pop", 1, pv, NULL, NULL, 0);
	const char *body;
	size_t		len;
	int			n = 0;

	if (PQresultStatus(r) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "pop: %s", PQerrorMessage(c));
		PQclear(r);
		return 0;
	}
	body = PQgetvalue(r, 0, 0);
	len = PQgetlength(r, 0, 0);
	/* one transactionId per message */
	for (const char *p = body; (p = memmem(p, len - (p - body), "\"transactionId\"", 15)) != NULL; p += 15)
		n++;
	if (n > 0 &&
		value_after(body, len, "\"leaseId\"", 0, lease, sizeof(lease)) &&
		value_after(body, len, "\"partitionId\"", 0, pid, sizeof(pid)) &&
		value_after(body, len, "\"transactionId\"", 1, txn, sizeof(txn)))
	{
		PGresult   *a;

		pv[0] = txn;
		pv[1] = pid;
		pv[2] = lease;
		a = PQexecPrepared(c, "ack", 3, pv, NULL, NULL, 0);
		if (PQresultStatus(a) != PGRES_TUPLES_OK || strstr(PQgetvalue(a, 0, 0), "true") == NULL)
		{
			fprintf(stderr, "ack: %s %s", PQerrorMessage(c), PQgetvalue(a, 0, 0));
			n = -1;
		}
		PQclear(a);
	}
	PQclear(r);
	if (n < 0)
		return 0;
	*msgs += n;
	return 1;
}

static int
base_round(PGconn *c, long *msgs)
{
	PGresult   *r = PQexecPrepared(c, "pop", 0, NULL, NULL, NULL, 0);
	int			n;
	char	   *ids;
	size_t		used = 0;

	if (PQresultStatus(r) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "read: %s", PQerrorMessage(c));
		PQclear(r);
		return 0;
	}
	n = PQntuples(r);
	ids = malloc(24 * (n + 1) + 2);
	ids[used++] = '{';
	for (int i = 0; i < n; i++)
		used += sprintf(ids + used, "%s%s", i ? "," : "", PQgetvalue(r, i, 0));
	ids[used++] = '}';
	ids[used] = '\0';
	PQclear(r);
	if (n > 0)
	{
		const char *pv[1] = {ids};
		PGresult   *d = PQexecPrepared(c, "ack", 1, pv, NULL, NULL, 0);

		if (PQresultStatus(d) != PGRES_TUPLES_OK || PQntuples(d) != n)
		{
			fprintf(stderr, "delete: %s", PQerrorMessage(c));
			n = -1;
		}
		PQclear(d);
	}
	free(ids);
	if (n < 0)
		return 0;
	*msgs += n;
	return 1;
}

static int
prepare(PGconn *c, const char *name, const char *sql)
{
	PGresult   *r = PQprepare(c, name, sql, 0, NULL);
	int			ok = PQresultStatus(r) == PGRES_COMMAND_OK;

	if (!ok)
		fprintf(stderr, "prepare %s: %s", name, PQerrorMessage(c));
	PQclear(r);
	return ok;
}

static void *
run(void *arg)
{
	Client	   *cl = arg;
	PGconn	   *c = PQconnectdb(conninfo);
	int			base = strcmp(mode, "base") == 0;
	int			text = strcmp(mode, "text") == 0;
	char		sql[512];
	double		stop;

	if (PQstatus(c) != CONNECTION_OK)
	{
		fprintf(stderr, "connect: %s", PQerrorMessage(c));
		cl->failed = 1;
		return NULL;
	}
	if (base)
	{
		snprintf(sql, sizeof(sql),
				 "WITH c AS (SELECT msg_id FROM bench.q_pop WHERE vt <= clock_timestamp()"
				 "            ORDER BY msg_id LIMIT %d FOR UPDATE SKIP LOCKED)"
				 " UPDATE bench.q_pop m SET vt = clock_timestamp() + interval '60 seconds',"
				 "        read_ct = m.read_ct + 1 FROM c WHERE m.msg_id = c.msg_id"
				 " RETURNING m.msg_id, m.read_ct, m.enqueued_at, m.vt, m.message", batch);
		cl->failed = !prepare(c, "pop", sql) ||
			!prepare(c, "ack", "DELETE FROM bench.q_pop WHERE msg_id = ANY($1::bigint[]) RETURNING msg_id");
	}
	else
	{
		snprintf(sql, sizeof(sql), "SELECT queen.%s($1, batch => %d)", text ? "pop_text" : "pop", batch);
		cl->failed = !prepare(c, "pop", sql) ||
			!prepare(c, "ack", "SELECT queen.ack(jsonb_build_object('transactionId', $1::text,"
					 " 'partitionId', $2::text, 'leaseId', $3::text))");
	}
	stop = now() + seconds;
	while (!cl->failed && now() < stop)
	{
		if (!(base ? base_round(c, &cl->msgs) : queen_round(c, &cl->msgs)))
			cl->failed = 1;
		cl->rounds++;
	}
	PQfinish(c);
	return NULL;
}

int
main(int argc, char **argv)
{
	int			n;
	Client	   *cl;
	long		rounds = 0,
				msgs = 0;
	int			failed = 0;
	double		t0;

	if (argc < 5)
	{
		fprintf(stderr, "usage: popack CONNINFO text|jsonb|base CLIENTS SECONDS [QUEUE] [BATCH]\n");
		return 2;
	}
	conninfo = argv[1];
	mode = argv[2];
	n = atoi(argv[3]);
	seconds = atof(argv[4]);
	if (argc > 5)
		queue = argv[5];
	if (argc > 6)
		batch = atoi(argv[6]);
	cl = calloc(n, sizeof(Client));
	t0 = now();
	for (int i = 0; i < n; i++)
		pthread_create(&cl[i].th, NULL, run, &cl[i]);
	for (int i = 0; i < n; i++)
	{
		pthread_join(cl[i].th, NULL);
		rounds += cl[i].rounds;
		msgs += cl[i].msgs;
		failed |= cl[i].failed;
	}
	printf("rounds %ld msgs %ld seconds %.3f\n", rounds, msgs, now() - t0);
	return failed ? 1 : 0;
}
