/*
 * metrics.h: GET /metrics (metrics.c) and the gauges read at scrape time
 * (metrics_gauges.c), from the snapshot gauges_snapshot.c takes.
 */
#ifndef QS_HTTP_METRICS_H
#define QS_HTTP_METRICS_H

#include "http/request.h"

extern void qs_metrics_text(StringInfo out, const pg_uuid_t *only, bool listener);
extern void qs_metrics_label(StringInfo out, const char *s);
extern void qs_metrics_header(StringInfo out, const char *name, const char *type, const char *help);
/* metrics_gauges.c: backlog, lag, dead letters and streams, from a snapshot */
extern void qs_metrics_gauges(StringInfo out, const pg_uuid_t *only);

/* gauges_snapshot.c: what the gauges read, taken in the background */
typedef struct QsStreamStatsRow
{
	pg_uuid_t	tenant;
	bool		has_tenant;
	char	   *stream;
	bool		paused;
	int64		v[6];			/* lag, open windows, events, late, errors, windows */
} QsStreamStatsRow;

typedef struct QsGaugeSet
{
	TimestampTz at;				/* the snapshot's transaction start */
	int			nqueue;
	struct QsQueueStatsRow *queue;	/* the largest backlogs first */
	int			nstream;
	QsStreamStatsRow *stream;	/* (tenant, name) order */
} QsGaugeSet;

extern void qs_gauges_get(QsGaugeSet *set);
extern PGDLLEXPORT void qs_gauges_worker_main(Datum main_arg);
extern void qs_partition_stat_remember(const pg_uuid_t *pid, const pg_uuid_t *tenant, const char *queue);
extern QsQueueStat *qs_partition_stat(const pg_uuid_t *pid, const pg_uuid_t *tenant);
extern void qs_pop_note_partition(QsReq *req, const pg_uuid_t *pid);

#endif							/* QS_HTTP_METRICS_H */
