/*
 * dedup.c: the push dedup probe (facts §2.5), backed by a per-backend cache
 * so that a push costs what it brings, not what the window holds.
 *
 * Per partition the cache holds the hashes of every stored frame at offsets
 * up to `verified`, with their offset and segment time. The probe runs with
 * the partition row locked, when every offset up to last_offset is
 * committed and visible: it reads only the hash rows past `verified`
 * (written by other backends since this one last looked), then answers from
 * memory. A backend that has never seen the partition reads the whole
 * window once, which is exactly the uncached probe.
 *
 * The cache holds only what this backend has seen committed or written
 * itself: any abort after it changed the cache drops the whole cache (its
 * own rolled-back frames must not turn into false duplicates). It is capped
 * by queen_streams.dedup_cache_entries: past that, expired entries are
 * pruned, and if that is not enough the partition holding the most is
 * dropped from the cache and probed by reading its window on every push
 * (the uncached probe), so a window larger than the cache costs what it
 * did without one, never a rebuild per push.
 */
#include "storage/storage.h"

#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

typedef struct HashKey
{
	pg_uuid_t	pid;
	uint8		hash[QS_HASH_LEN];
} HashKey;

typedef struct HashEntry
{
	HashKey		key;
	int64		offset;			/* lowest offset holding this hash */
	TimestampTz created_at;
} HashEntry;

typedef struct PartEntry
{
	pg_uuid_t	pid;
	int64		verified;		/* every frame at offsets <= this is cached */
	int			window;			/* seconds, as last probed */
	int64		entries;		/* hashes cached for it */
	bool		uncached;		/* its window outgrew the cache: read it each time */
} PartEntry;

static HTAB *hashes = NULL;
static HTAB *parts = NULL;
static MemoryContext dedup_cxt = NULL;
static bool dirty = false;		/* changed by the current transaction */
static bool callbacks = false;

static QsPlan newer_plan = {
	"SELECT base_offset, created_at, hashes FROM queen.log_txns"
	" WHERE partition_id = $1 AND end_offset > $2 AND created_at >= $3",
	3, {UUIDOID, INT8OID, TIMESTAMPTZOID}
};

static void
dedup_reset(void)
{
	if (dedup_cxt)
		MemoryContextDelete(dedup_cxt);
	dedup_cxt = NULL;
	hashes = NULL;
	parts = NULL;
}

static void
dedup_xact(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
	{
		if (dirty)
			dedup_reset();
		dirty = false;
	}
	else if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
			 event == XACT_EVENT_PREPARE)
		dirty = false;
}

static void
dedup_subxact(SubXactEvent event, SubTransactionId mySubid,
			  SubTransactionId parentSubid, void *arg)
{
	/* a failed cycle rolls back its subtransaction, and its sink frames */
	if (event == SUBXACT_EVENT_ABORT_SUB && dirty)
		dedup_reset();
}

static void
dedup_init(void)
{
	HASHCTL		ctl;

	if (!callbacks)
	{
		RegisterXactCallback(dedup_xact, NULL);
		RegisterSubXactCallback(dedup_subxact, NULL);
		callbacks = true;
	}
	if (hashes)
		return;
	dedup_cxt = AllocSetContextCreate(TopMemoryContext, "queen_streams dedup cache",
									  ALLOCSET_DEFAULT_SIZES);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(HashKey);
	ctl.entrysize = sizeof(HashEntry);
	ctl.hcxt = dedup_cxt;
	hashes = hash_create("queen_streams dedup hashes", 1024, &ctl,
						 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(pg_uuid_t);
	ctl.entrysize = sizeof(PartEntry);
	ctl.hcxt = dedup_cxt;
	parts = hash_create("queen_streams dedup partitions", 64, &ctl,
						HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/* Forget every cached hash of one partition. */
static void
drop_partition(PartEntry *victim)
{
	HASH_SEQ_STATUS seq;
	HashEntry  *e;

	hash_seq_init(&seq, hashes);
	while ((e = hash_seq_search(&seq)) != NULL)
		if (memcmp(&e->key.pid, &victim->pid, sizeof(pg_uuid_t)) == 0)
			hash_search(hashes, &e->key, HASH_REMOVE, NULL);
	victim->entries = 0;
	victim->verified = -1;
}

/*
 * Make room: drop entries older than their partition's window; if the
 * cache is still three-quarters full, stop caching the partition that
 * holds the most.
 */
static void
dedup_make_room(TimestampTz now)
{
	HASH_SEQ_STATUS seq;
	HashEntry  *e;
	PartEntry  *p;
	PartEntry  *victim = NULL;

	if (hash_get_num_entries(hashes) < qs_dedup_cache_entries)
		return;
	hash_seq_init(&seq, hashes);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		p = hash_search(parts, &e->key.pid, HASH_FIND, NULL);
		if (p == NULL || e->created_at < now - (TimestampTz) p->window * USECS_PER_SEC)
		{
			if (p)
				p->entries--;
			hash_search(hashes, &e->key, HASH_REMOVE, NULL);
		}
	}
	while (hash_get_num_entries(hashes) >= qs_dedup_cache_entries * 3 / 4)
	{
		victim = NULL;
		hash_seq_init(&seq, parts);
		while ((p = hash_seq_search(&seq)) != NULL)
			if (!p->uncached && (victim == NULL || p->entries > victim->entries))
				victim = p;
		if (victim == NULL)
			break;
		drop_partition(victim);
		victim->uncached = true;
	}
}

/*
 * Keep the lowest offset of a hash within the window (the original of any
 * later duplicate); an occurrence older than `since` gives way to a newer one.
 */
static void
remember(PartEntry *p, const uint8 *h, int64 offset, TimestampTz created_at,
		 TimestampTz since)
{
	HashKey		key;
	HashEntry  *e;
	bool		found;

	key.pid = p->pid;
	memcpy(key.hash, h, QS_HASH_LEN);
	e = hash_search(hashes, &key, HASH_ENTER, &found);
	if (!found)
		p->entries++;
	if (!found || e->created_at < since || offset < e->offset)
	{
		e->offset = offset;
		e->created_at = created_at;
	}
}

static void
add_dup(QsAppendResult *res, int count, int i, int64 offset)
{
	if (res->ndups == 0)
	{
		res->dup_idx = palloc(sizeof(int) * count);
		res->dup_off = palloc(sizeof(int64) * count);
	}
	res->dup_idx[res->ndups] = i;
	res->dup_off[res->ndups] = offset;
	res->ndups++;
}

/*
 * The uncached probe: read the window's hash rows and look each stored hash
 * up among the incoming ones (an open-addressing set of frame indexes).
 */
static void
probe_window(const pg_uuid_t *pid, int64 floor, TimestampTz since, int count,
			 const uint8 *in, const bool *probe, QsAppendResult *res)
{
	int			size = 16;
	int		   *slot;
	int64	   *first = palloc(sizeof(int64) * count);
	Datum		args[3];

	while (size < count * 2)
		size <<= 1;
	slot = palloc0(sizeof(int) * size);
	for (int i = 0; i < count; i++)
	{
		uint32		h;

		first[i] = -1;
		if (probe && !probe[i])
			continue;
		memcpy(&h, in + i * QS_HASH_LEN + 8, sizeof(h));	/* xxh3 bits are uniform */
		for (h &= size - 1; slot[h] != 0; h = (h + 1) & (size - 1))
			;
		slot[h] = i + 1;
	}

	args[0] = qs_uuid_datum(pid);
	args[1] = Int64GetDatum(floor);
	args[2] = TimestampTzGetDatum(since);
	qs_exec(&newer_plan, args, NULL, 0);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		int64		base = qs_col_int64(r, 1, 0);
		bool		isnull;
		bytea	   *stored = DatumGetByteaPP(qs_col(r, 3, &isnull));
		const uint8 *sh = (const uint8 *) VARDATA_ANY(stored);
		int			n = VARSIZE_ANY_EXHDR(stored) / QS_HASH_LEN;

		for (int k = 0; k < n; k++)
		{
			uint32		h;

			if (base + k <= floor)
				continue;
			memcpy(&h, sh + k * QS_HASH_LEN + 8, sizeof(h));
			for (h &= size - 1; slot[h] != 0; h = (h + 1) & (size - 1))
			{
				int			i = slot[h] - 1;

				if (memcmp(in + i * QS_HASH_LEN, sh + k * QS_HASH_LEN, QS_HASH_LEN) == 0 &&
					(first[i] < 0 || base + k < first[i]))
					first[i] = base + k;
			}
		}
	}
	for (int i = 0; i < count; i++)
		if (first[i] >= 0)
			add_dup(res, count, i, first[i]);
	res->duplicate = res->ndups > 0;
}

/*
 * Probe `count` incoming hashes (those flagged in `probe`, or all) against
 * the partition's window. Called with the partition row locked; last_offset
 * is its allocator value then. Duplicates go into *res.
 */
void
qs_dedup_probe(const pg_uuid_t *pid, int window, int64 last_offset, int64 txns_start,
			   int64 verified, int count, const uint8 *in, const bool *probe,
			   TimestampTz now, QsAppendResult *res)
{
	TimestampTz since = now - (TimestampTz) window * USECS_PER_SEC;
	PartEntry  *p;
	bool		found;
	int64		floor = Max(verified, txns_start - 1);
	bool		any = (probe == NULL);

	/* nothing that can repeat (fresh ids only): no reading at all */
	for (int i = 0; i < count && !any; i++)
		any = probe[i];
	if (!any)
		return;

	dedup_init();
	dedup_make_room(now);
	p = hash_search(parts, pid, HASH_ENTER, &found);
	if (!found)
	{
		p->verified = -1;
		p->entries = 0;
		p->uncached = false;
	}
	p->window = window;
	if (p->uncached)
	{
		probe_window(pid, floor, since, count, in, probe, res);
		return;
	}

	/* catch up with what others stored since this backend last looked */
	if (p->verified < last_offset)
	{
		Datum		args[3];

		args[0] = qs_uuid_datum(pid);
		args[1] = Int64GetDatum(Max(p->verified, txns_start - 1));
		args[2] = TimestampTzGetDatum(since);
		qs_exec(&newer_plan, args, NULL, 0);
		dirty = true;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			int64		base = qs_col_int64(r, 1, 0);
			bool		isnull;
			TimestampTz created = DatumGetTimestampTz(qs_col(r, 2, &isnull));
			bytea	   *stored = DatumGetByteaPP(qs_col(r, 3, &isnull));
			const uint8 *sh = (const uint8 *) VARDATA_ANY(stored);
			int			n = VARSIZE_ANY_EXHDR(stored) / QS_HASH_LEN;

			for (int k = 0; k < n; k++)
				remember(p, sh + k * QS_HASH_LEN, base + k, created, since);
		}
		p->verified = last_offset;
		if (hash_get_num_entries(hashes) >= qs_dedup_cache_entries)
		{
			/* this window alone outgrows the cache: stop caching it */
			drop_partition(p);
			p->uncached = true;
			probe_window(pid, floor, since, count, in, probe, res);
			return;
		}
	}

	for (int i = 0; i < count; i++)
	{
		HashKey		key;
		HashEntry  *e;

		if (probe && !probe[i])
			continue;
		key.pid = *pid;
		memcpy(key.hash, in + i * QS_HASH_LEN, QS_HASH_LEN);
		e = hash_search(hashes, &key, HASH_FIND, NULL);
		if (e == NULL || e->created_at < since || e->offset <= floor)
			continue;
		add_dup(res, count, i, e->offset);
	}
	res->duplicate = res->ndups > 0;
}

/*
 * A segment was appended at `base` with the row still locked: its hashes
 * join the cache, which stays complete if it was complete up to base - 1.
 */
void
qs_dedup_record(const pg_uuid_t *pid, int64 base, int count, const uint8 *in,
				TimestampTz created_at)
{
	PartEntry  *p;

	if (parts == NULL ||
		(p = hash_search(parts, pid, HASH_FIND, NULL)) == NULL ||
		p->uncached || p->verified != base - 1)
		return;
	dirty = true;
	for (int i = 0; i < count; i++)
		remember(p, in + i * QS_HASH_LEN, base + i, created_at,
				 created_at - (TimestampTz) p->window * USECS_PER_SEC);
	p->verified = base + count - 1;
}
