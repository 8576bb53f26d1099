/*
 * shmem_parts.c: the library's parts of shared memory (the HTTP counters,
 * the corrupt-segment fence, the dedup cache, the stream workers' slots).
 * Each part gives a request and a startup function at preload; one pair of
 * PostgreSQL hooks, chained once, calls them in the order they were added,
 * the startups under AddinShmemInitLock.
 */
#include "common/workers.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#define QS_SHMEM_PARTS 8

typedef struct ShmemPart
{
	void		(*request) (void);
	void		(*startup) (void);
	/* a plain struct (qs_shmem_add_struct): request and startup are NULL */
	const char *name;
	Size		size;
	void	  **at;
	void		(*init) (void *mem);
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
	{
		if (parts[i].request)
			parts[i].request();
		else
			RequestAddinShmemSpace(MAXALIGN(parts[i].size));
	}
}

static void
parts_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	for (int i = 0; i < nparts; i++)
	{
		bool		found;

		if (parts[i].startup)
		{
			parts[i].startup();
			continue;
		}
		*parts[i].at = qs_shmem_struct(parts[i].name, parts[i].size, &found);
		if (!found && parts[i].init)
			parts[i].init(*parts[i].at);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* The next part, the hooks chained before the first. */
static ShmemPart *
new_part(void)
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
	memset(&parts[nparts], 0, sizeof(ShmemPart));
	return &parts[nparts++];
}

/*
 * From _PG_init (the hooks run only when preloaded): `request` asks for the part's space
 * (RequestAddinShmemSpace, LWLock tranches), `startup` attaches to it.
 */
void
qs_shmem_add(void (*request) (void), void (*startup) (void))
{
	ShmemPart  *p = new_part();

	p->request = request;
	p->startup = startup;
}

/*
 * The same for a struct of `size` bytes named `name`: at startup *at points
 * to it, and `init` (or NULL) sets it up, zeroed, when it is new.
 */
void
qs_shmem_add_struct(const char *name, Size size, void **at, void (*init) (void *mem))
{
	ShmemPart  *p = new_part();

	p->name = name;
	p->size = size;
	p->at = at;
	p->init = init;
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
