/*
 * shmem_parts.c: the library's parts of shared memory (the HTTP counters,
 * the corrupt-segment fence, the dedup cache, the stream workers' slots).
 * Each part gives a request and a startup function at preload; one pair of
 * PostgreSQL hooks, chained once, calls them in the order they were added,
 * the startups under AddinShmemInitLock.
 */
#include "common/common.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#define QS_SHMEM_PARTS 8

typedef struct ShmemPart
{
	void		(*request) (void);
	void		(*startup) (void);
} ShmemPart;

static ShmemPart parts[QS_SHMEM_PARTS];
static int	nparts = 0;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
parts_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	for (int i = 0; i < nparts; i++)
		parts[i].request();
}

static void
parts_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	for (int i = 0; i < nparts; i++)
		parts[i].startup();
	LWLockRelease(AddinShmemInitLock);
}

/*
 * From _PG_init (the hooks run only when preloaded): `request` asks for the part's space
 * (RequestAddinShmemSpace, LWLock tranches), `startup` attaches to it.
 */
void
qs_shmem_add(void (*request) (void), void (*startup) (void))
{
	if (nparts == QS_SHMEM_PARTS)
		elog(ERROR, "too many parts of queen_streams shared memory");
	if (nparts == 0)
	{
		prev_shmem_request_hook = shmem_request_hook;
		shmem_request_hook = parts_request;
		prev_shmem_startup_hook = shmem_startup_hook;
		shmem_startup_hook = parts_startup;
	}
	parts[nparts].request = request;
	parts[nparts].startup = startup;
	nparts++;
}

/*
 * A struct of shared memory by name (from a startup, the lock held),
 * zeroed when this call created it (*found false).
 */
void *
qs_shmem_struct(const char *name, Size size, bool *found)
{
	void	   *p = ShmemInitStruct(name, size, found);

	if (!*found)
		memset(p, 0, size);
	return p;
}
