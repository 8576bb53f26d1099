/*
 * metrics_text.h: the Prometheus text format's writers (metrics_text.c),
 * shared by the counters of GET /metrics (metrics.c) and its gauges
 * (metrics_gauges.c).
 */
#ifndef QS_HTTP_METRICS_TEXT_H
#define QS_HTTP_METRICS_TEXT_H

#include "common/base.h"

#include "lib/stringinfo.h"

extern void qs_metrics_label(StringInfo out, const char *s);
extern void qs_metrics_header(StringInfo out, const char *name, const char *type, const char *help);

#endif							/* QS_HTTP_METRICS_TEXT_H */
