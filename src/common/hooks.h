/*
 * hooks.h: hooks.c: what a lower floor tells a higher one, set by it at load
 * time.
 */
#ifndef QS_HOOKS_H
#define QS_HOOKS_H

#include "common/base.h"

/*
 * hooks.c: set by a higher layer at load time. qs_pushed_hook: at commit of
 * the current (sub)transaction, `nmsgs` messages were pushed to (tenant,
 * queue); the listener counts them and wakes the pops parked on the queue.
 */
typedef void (*QsPushedHook) (const pg_uuid_t *tenant, const char *queue, int nmsgs);
extern QsPushedHook qs_pushed_hook;

/*
 * qs_streamed_hook: a stream worker (src/streams/runner.c) popped `popped`
 * messages of (tenant, queue), or committed (`cycled` 1) or rolled back
 * (`failed` 1) a cycle on it that acked `acked`; the listener counts them
 * as it counts its own pops and cycles.
 */
typedef void (*QsStreamedHook) (const pg_uuid_t *tenant, const char *queue, int64 popped,
								int64 cycled, int64 failed, int64 acked);
extern QsStreamedHook qs_streamed_hook;

/*
 * qs_deleted_hook: the current (sub)transaction deleted (tenant, queue); at
 * its commit the listener frees the queue's counters for other queues.
 */
typedef void (*QsDeletedHook) (const pg_uuid_t *tenant, const char *queue);
extern QsDeletedHook qs_deleted_hook;

#endif							/* QS_HOOKS_H */
