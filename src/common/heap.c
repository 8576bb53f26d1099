/*
 * heap.c: how much freed heap the processes we own keep.
 *
 * glibc gives the top of the heap back to the system as soon as 128 kB of
 * it is free, and serves every block of 128 kB or more from a mapping of
 * its own. A pop or a push allocates a few hundred kB and frees it all when
 * its transaction ends, so each call could shrink the heap (a TLB shootdown
 * on every CPU), unmap its large blocks, and fault the pages in again at
 * the next call. Our background workers set, once at their start, how much
 * freed heap they keep: the HTTP workers 64 MB (worker.c), the stream
 * workers queen_streams.backend_heap_keep. mallopt is process-wide, so
 * ordinary sessions that call queen functions are left as glibc sets them.
 */
#include "common/workers.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#define GLIBC_DEFAULT (128 * 1024)
#define MMAP_THRESHOLD_MAX (32 * 1024 * 1024)	/* glibc's ceiling on 64-bit */

void
qs_heap_keep_fixed(int keep_kb)
{
#ifdef __GLIBC__
	size_t		keep = (size_t) keep_kb * 1024;

	/* setting any of them turns glibc's own adjustment off: set all three */
	mallopt(M_TRIM_THRESHOLD, keep_kb > 0 ? keep : GLIBC_DEFAULT);
	mallopt(M_TOP_PAD, keep_kb > 0 ? keep / 8 : 0);
	mallopt(M_MMAP_THRESHOLD, keep_kb > 0 ? Min(keep / 2, MMAP_THRESHOLD_MAX) : GLIBC_DEFAULT);
#endif
}
