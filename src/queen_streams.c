/*
 * queen_streams.c: module magic and _PG_init, which only dispatches.
 */
#include "common/guc.h"
#include "http/http.h"
#include "storage/storage.h"
#include "streams/streams.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	/* each floor its own settings; the prefix reserved once, after them all */
	qs_guc_init();
	qs_storage_guc_init();
	qs_streams_guc_init();
	qs_http_guc_init();
	MarkGUCPrefixReserved("queen_streams");
	qs_storage_init();			/* shared memory: corrupt-segment fence */
	qs_dedup_shmem_init();		/* shared memory: the dedup cache */
	qs_http_init();
	qs_streams_init();			/* the stream workers of declared streams */
}
