/*
 * metrics.h: GET /metrics (metrics.c) and the worker-local map from
 * partition to queue. The text format's writers are in metrics_text.h, the
 * gauges in metrics_gauges.h, their snapshot in gauges_snapshot.h.
 */
#ifndef QS_HTTP_METRICS_H
#define QS_HTTP_METRICS_H

#include "http/request.h"

extern void qs_metrics_text(StringInfo out, const pg_uuid_t *only, bool listener);
extern void qs_partition_stat_remember(const pg_uuid_t *pid, const pg_uuid_t *tenant, const char *queue);
extern QsQueueStat *qs_partition_stat(const pg_uuid_t *pid, const pg_uuid_t *tenant);
extern void qs_pop_note_partition(QsReq *req, const pg_uuid_t *pid);

#endif							/* QS_HTTP_METRICS_H */
