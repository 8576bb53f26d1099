/*
 * http.h: the embedded HTTP listener's public face: what _PG_init calls.
 */
#ifndef QS_HTTP_H
#define QS_HTTP_H

#include "common/base.h"

/* worker.c: shared memory and the static workers; only acts when preloaded */
extern void qs_http_init(void);
extern PGDLLEXPORT void qs_http_worker_main(Datum main_arg);
/* gauges_snapshot.c: the background refresh of the /metrics gauges */
extern PGDLLEXPORT void qs_gauges_worker_main(Datum main_arg);

/* settings.c: the listener's settings */
extern void qs_http_guc_init(void);

#endif							/* QS_HTTP_H */
