/*
 * http.h: the embedded HTTP listener's public face: what _PG_init calls and
 * the wake-at-commit hook that the push core calls for every appended group.
 */
#ifndef QS_HTTP_H
#define QS_HTTP_H

#include "common/common.h"

/* worker.c: shared memory and the static workers; only acts when preloaded */
extern void qs_http_init(void);
extern PGDLLEXPORT void qs_http_worker_main(Datum main_arg);

/*
 * shmem.c: at commit of the current transaction, count `nmsgs` pushed
 * messages on (tenant, queue) and wake the long-poll pops parked on it.
 * A no-op when the library was not preloaded; rolled back with the
 * (sub)transaction that called it.
 */
extern void qs_queue_pushed_at_commit(const pg_uuid_t *tenant, const char *queue, int nmsgs);
#define qs_wake_queue_at_commit(tenant, queue) qs_queue_pushed_at_commit((tenant), (queue), 0)

#endif							/* QS_HTTP_H */
