/*
 * workers.h: shmem_parts.c, bgworkers.c and heap.c: what the library's
 * processes set up at start.
 */
#ifndef QS_WORKERS_H
#define QS_WORKERS_H

#include "common/base.h"

#include "postmaster/bgworker.h"

/* shmem_parts.c: the library's parts of shared memory, set up at preload */
extern void qs_shmem_add(void (*request) (void), void (*startup) (void));
extern void qs_shmem_add_struct(const char *name, Size size, void **at, void (*init) (void *mem));
extern void *qs_shmem_struct(const char *name, Size size, bool *found);

/* bgworkers.c */
extern void qs_register_workers(int n, BgWorkerStartTime start, const char *function,
								const char *name_prefix, const char *type);

/* heap.c: freed heap kept between calls (glibc's trim and mmap thresholds) */
extern void qs_heap_keep_fixed(int keep_kb);

#endif							/* QS_WORKERS_H */
