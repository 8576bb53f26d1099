/*
 * pop_ready.h: the wildcard pop's ready sets (pop_ready.c), kept in step
 * by push, pop, ack, seek and queue deletion.
 */
#ifndef QS_STORAGE_POP_READY_H
#define QS_STORAGE_POP_READY_H

#include "storage/storage.h"

/*
 * pop_ready.c: per (queue, consumer group), the partitions that may have a
 * backlog, least recently served first (the wildcard pop's candidates)
 */
typedef enum QsReadyState
{
	QS_READY_NONE,				/* no set: read every partition */
	QS_READY_OK,
	QS_READY_YOUNG				/* just built: qs_ready_retry when it gives nothing */
} QsReadyState;
extern QsReadyState qs_ready_prepare(Datum queue_id, const char *group, bool seek,
									 TimestampTz seek_ts);
extern bool qs_ready_retry(Datum queue_id, const char *group, bool seek, TimestampTz seek_ts);
extern void qs_ready_served(Datum pid, Datum grp);
extern void qs_ready_consumed(Datum pid, Datum grp);
extern void qs_ready_pushed(const QsAppendMany *a, int n);
extern void qs_ready_drop_queue(Datum queue_id);
extern void qs_ready_forget(const pg_uuid_t *tenant, const char *group, Datum queue_id,
							bool all_queues);

#endif							/* QS_STORAGE_POP_READY_H */
