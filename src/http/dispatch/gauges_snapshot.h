/*
 * gauges_snapshot.h: the rows the /metrics gauges read, taken in the
 * background (gauges_snapshot.c) and written out by metrics_gauges.c.
 */
#ifndef QS_HTTP_GAUGES_SNAPSHOT_H
#define QS_HTTP_GAUGES_SNAPSHOT_H

#include "common/base.h"

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

#endif							/* QS_HTTP_GAUGES_SNAPSHOT_H */
