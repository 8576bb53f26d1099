/*
 * heap.c: how much freed heap a backend running queen_streams keeps.
 *
 * glibc gives the top of the heap back to the system as soon as 128 kB of
 * it is free, and serves every block of 128 kB or more from a mapping of
 * its own. A pop or a push allocates a few hundred kB and frees it all when
 * its transaction ends, so each call shrank the heap (a TLB shootdown on
 * every CPU), unmapped its large blocks, and faulted the pages in again at
 * the next call. A backend that runs queen_streams code keeps up to
 * queen_streams.backend_heap_keep of freed heap instead (checked whenever
 * it connects to SPI, so a reload takes effect at the next call); the HTTP
 * workers, whose groups grow larger, choose their own amount (worker.c).
 */
#include "common/guc.h"
#include "common/workers.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#define GLIBC_DEFAULT (128 * 1024)
#define MMAP_THRESHOLD_MAX (32 * 1024 * 1024)	/* glibc's ceiling on 64-bit */

static int	applied_kb = 0;		/* what glibc was last given; 0: its defaults */
static bool fixed = false;		/* the process chose its own amount */

static void
apply(int keep_kb)
{
#ifdef __GLIBC__
	size_t		keep = (size_t) keep_kb * 1024;

	/* setting any of them turns glibc's own adjustment off: set all three */
	mallopt(M_TRIM_THRESHOLD, keep_kb > 0 ? keep : GLIBC_DEFAULT);
	mallopt(M_TOP_PAD, keep_kb > 0 ? keep / 8 : 0);
	mallopt(M_MMAP_THRESHOLD, keep_kb > 0 ? Min(keep / 2, MMAP_THRESHOLD_MAX) : GLIBC_DEFAULT);
#endif
	applied_kb = keep_kb;
}

void
qs_heap_keep(void)
{
	if (!fixed && applied_kb != qs_backend_heap_keep_kb)
		apply(qs_backend_heap_keep_kb);
}

void
qs_heap_keep_fixed(int keep_kb)
{
	fixed = true;
	apply(keep_kb);
}
