/*
 * metrics_gauges.h: the gauges of GET /metrics (metrics_gauges.c): backlog,
 * lag, dead letters and streams, from the newest snapshot.
 */
#ifndef QS_HTTP_METRICS_GAUGES_H
#define QS_HTTP_METRICS_GAUGES_H

#include "common/base.h"

extern void qs_metrics_gauges(StringInfo out, const pg_uuid_t *only);

#endif							/* QS_HTTP_METRICS_GAUGES_H */
