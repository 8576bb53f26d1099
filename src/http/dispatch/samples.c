/*
 * samples.c: the counters behind the dashboard's charts. Every
 * queen_streams.sample_interval (60 s) the first HTTP worker copies the
 * pushed, popped and acked counters of every queue (shmem.c) into a ring of
 * QS_SAMPLES slots in shared memory; queen_streams.dashboard_throughput()
 * answers the differences between consecutive samples, so the charts need
 * no table and no time-series store. The ring lives as long as the server.
 *
 * One writer (worker 0), lock-free readers: the writer fills slot
 * n % QS_SAMPLES, then publishes n in sample_seq; a reader that sees
 * sample_seq move while it read starts again.
 */
#include "http/dispatch/route.h"
#include "common/args.h"
#include "common/ids.h"
#include "common/json.h"

#include "miscadmin.h"
#include "utils/builtins.h"

static const QsStat sampled[QS_SAMPLED] = {QS_STAT_PUSHED, QS_STAT_POPPED, QS_STAT_ACKED};
static const char *const sampled_key[QS_SAMPLED] = {"pushed", "popped", "acked"};

void
qs_samples_take(void)
{
	QsHttpShared *s = qs_http_shared;
	uint64		n = pg_atomic_read_u64(&s->sample_seq) + 1;
	int			slot = (int) (n % QS_SAMPLES);

	for (int i = 0; i < s->nstats; i++)
	{
		QsQueueStat *e = &s->stats[i];

		if (pg_atomic_read_u32(&e->ready) == 0)
			continue;
		for (int k = 0; k < QS_SAMPLED; k++)
			e->sample[slot][k] = pg_atomic_read_u64(&e->c[sampled[k]]);
	}
	s->sample_at[slot] = GetCurrentTimestamp();
	pg_write_barrier();
	pg_atomic_write_u64(&s->sample_seq, n);
}

/*
 * The messages each sampled counter moved, summed over the tenant's queues
 * (or one queue), from ring slot `prev` to slot `cur`, or to the counters
 * now when cur < 0 (the interval still open).
 */
static void
interval_sum(QsHttpShared *s, const pg_uuid_t *tenant, const char *queue, int prev, int cur,
			 int64 *sum)
{
	memset(sum, 0, sizeof(int64) * QS_SAMPLED);
	for (int i = 1; i < s->nstats; i++)
	{
		QsQueueStat *e = &s->stats[i];

		if (pg_atomic_read_u32(&e->ready) == 0)
			continue;
		pg_read_barrier();
		if (memcmp(&e->tenant, tenant, sizeof(pg_uuid_t)) != 0 ||
			(queue && strncmp(e->name, queue, QS_STAT_NAME - 1) != 0))
			continue;
		for (int k = 0; k < QS_SAMPLED; k++)
		{
			uint64		to = cur < 0 ? pg_atomic_read_u64(&e->c[sampled[k]]) : e->sample[cur][k];

			if (to > e->sample[prev][k])
				sum[k] += (int64) (to - e->sample[prev][k]);
		}
	}
}

/* One entry of the answer's samples: the interval (from, at]. */
static void
put_interval(QsJson *j, TimestampTz from, TimestampTz at, const int64 *sum, bool partial)
{
	qsj_object(j, NULL);
	qsj_time_ms(j, "at", at);
	qsj_int(j, "seconds", (at - from + USECS_PER_SEC / 2) / USECS_PER_SEC);
	for (int k = 0; k < QS_SAMPLED; k++)
		qsj_int(j, sampled_key[k], sum[k]);
	if (partial)
		qsj_bool(j, "partial", true);
	qsj_end_object(j);
}

/*
 * SQL: queen_streams.dashboard_throughput(queue text, tenant uuid) —
 * {intervalSeconds, queue, samples:[{at, seconds, pushed, popped, acked}]}:
 * per interval between two consecutive samples (oldest first), the messages
 * pushed (every commit), popped and acked (over HTTP) to the tenant's queues,
 * or to one queue; the last entry (partial: true) is the interval still
 * open, from the newest sample to now. Empty until the listener has taken
 * its first sample.
 */
PG_FUNCTION_INFO_V1(qs_dashboard_throughput);
Datum
qs_dashboard_throughput(PG_FUNCTION_ARGS)
{
	QsHttpShared *s = qs_http_shared;
	char	   *queue = qs_text_arg(fcinfo, 0);
	pg_uuid_t	tenant;
	QsJson		j;

	qs_tenant_arg(fcinfo, 1, &tenant);
	for (int attempt = 0;; attempt++)
	{
		uint64		seq = s ? pg_atomic_read_u64(&s->sample_seq) : 0;
		uint64		first;

		qsj_init(&j);
		qsj_object(&j, NULL);
		qsj_int(&j, "intervalSeconds", qs_http_sample_interval_s);
		if (queue)
			qsj_str(&j, "queue", queue);
		else
			qsj_null(&j, "queue");
		qsj_array(&j, "samples");
		pg_read_barrier();
		/* intervals end at samples first..seq; each needs the one before */
		first = seq >= QS_SAMPLES ? seq - QS_SAMPLES + 2 : 2;
		for (uint64 n = first; s && n <= seq; n++)
		{
			int			cur = (int) (n % QS_SAMPLES);
			int			prev = (int) ((n - 1) % QS_SAMPLES);
			int64		sum[QS_SAMPLED];

			interval_sum(s, &tenant, queue, prev, cur, sum);
			put_interval(&j, s->sample_at[prev], s->sample_at[cur], sum, false);
		}
		/*
		 * The interval still open, from the newest sample to now: the chart
		 * starts with the first sample (taken when the listener starts)
		 * instead of a sample_interval later, and always ends now.
		 */
		if (s && seq >= 1)
		{
			int			cur = (int) (seq % QS_SAMPLES);
			int64		sum[QS_SAMPLED];

			interval_sum(s, &tenant, queue, cur, -1, sum);
			put_interval(&j, s->sample_at[cur], GetCurrentTimestamp(), sum, true);
		}
		qsj_end_array(&j);
		qsj_end_object(&j);
		pg_read_barrier();
		/* the writer moved on while we read: the oldest slot may be torn */
		if (s == NULL || pg_atomic_read_u64(&s->sample_seq) == seq || attempt >= 3)
			break;
		CHECK_FOR_INTERRUPTS();
	}
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
