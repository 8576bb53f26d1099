/*
 * guc.c: the settings of declared streams' workers. Each floor defines its
 * own (common, storage, streams, the listener); _PG_init calls them, then
 * reserves the prefix once.
 */
#include "streams/streams.h"

#include "utils/guc.h"

int			qs_stream_workers = 1;
int			qs_stream_poll_ms = 1000;

void
qs_streams_guc_init(void)
{
	DefineCustomIntVariable("queen_streams.stream_workers",
							gettext_noop("Background workers that run declared streams (0: none)."),
							gettext_noop("Separate from the HTTP workers; they share the streams' partitions "
										 "through the source leases."),
							&qs_stream_workers,
							1, 0, 64,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen_streams.stream_poll_interval",
							gettext_noop("Longest a stream worker sleeps before it looks for work again."),
							gettext_noop("A push that commits wakes the workers at once; the interval bounds "
										 "how late idle flushes and expired leases are seen."),
							&qs_stream_poll_ms,
							1000, 10, 60000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
}
