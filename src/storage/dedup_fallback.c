/*
 * dedup_fallback.c: the dedup probe answered from the table, for what the
 * cache does not hold: reading the window's hash rows (queen.log_txns), and
 * the keyed probe over queen.log_txn_keys for a partition the cache does
 * not answer for (no preload, no room, its window outgrew the cache).
 */
#include "storage/dedup_int.h"
#include "common/ids.h"
#include "common/spi.h"

#include "access/xlog.h"
#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "utils/memutils.h"

static QsPlan newer_plan = {
	"SELECT base_offset, created_at, hashes, xmin FROM queen.log_txns"
	" WHERE partition_id = $1 AND end_offset > $2 AND created_at >= $3",
	3, {UUIDOID, INT8OID, TIMESTAMPTZOID}
};

void
dedup_add_dup(QsAppendResult *res, int count, int i, int64 offset)
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

/* Rows of the window read at a time: memory bounded by a chunk, not the window. */
#define QS_DEDUP_CHUNK 1024

/*
 * Run `plan` (its columns: base_offset, created_at, hashes, xmin), a chunk
 * of rows at a time: each row's values go to `row`, in a context reset after
 * every chunk. `row` may run statements of its own (the chunk is read from
 * its own tuple table). False from `row` stops, and is returned.
 */
static bool
each_row(QsPlan *plan, Datum *args, WindowRow row, void *arg)
{
	Portal		portal = qs_cursor(plan, args, NULL);
	MemoryContext chunk = AllocSetContextCreate(CurrentMemoryContext, "queen_streams dedup window",
												ALLOCSET_DEFAULT_SIZES);
	bool		ok = true;

	while (ok)
	{
		SPITupleTable *tt;
		uint64		nrows;

		SPI_cursor_fetch(portal, true, QS_DEDUP_CHUNK);
		tt = SPI_tuptable;
		nrows = SPI_processed;
		if (nrows == 0)
		{
			SPI_freetuptable(tt);
			break;
		}
		for (uint64 r = 0; ok && r < nrows; r++)
		{
			MemoryContext old = MemoryContextSwitchTo(chunk);
			bool		isnull;
			bytea	   *stored = DatumGetByteaPP(SPI_getbinval(tt->vals[r], tt->tupdesc, 3, &isnull));

			CHECK_FOR_INTERRUPTS();
			ok = row(DatumGetInt64(SPI_getbinval(tt->vals[r], tt->tupdesc, 1, &isnull)),
					 DatumGetTimestampTz(SPI_getbinval(tt->vals[r], tt->tupdesc, 2, &isnull)),
					 (const uint8 *) VARDATA_ANY(stored), VARSIZE_ANY_EXHDR(stored) / QS_HASH_LEN,
					 DatumGetTransactionId(SPI_getbinval(tt->vals[r], tt->tupdesc, 4, &isnull)), arg);
			MemoryContextSwitchTo(old);
		}
		MemoryContextReset(chunk);
		SPI_freetuptable(tt);
	}
	SPI_cursor_close(portal);
	MemoryContextDelete(chunk);
	return ok;
}

/* A partition's hash rows past `floor` created since `since`, as each_row gives them. */
bool
dedup_each_window_row(const pg_uuid_t *pid, int64 floor, TimestampTz since, WindowRow row, void *arg)
{
	Datum		args[3];

	args[0] = qs_uuid_datum(pid);
	args[1] = Int64GetDatum(floor);
	args[2] = TimestampTzGetDatum(since);
	return each_row(&newer_plan, args, row, arg);
}

/* The uncached probe's incoming hashes: an open-addressing set of frame indexes. */
typedef struct WindowProbe
{
	const uint8 *in;
	int64		floor;
	int			size;
	int		   *slot;
	int64	   *first;			/* per incoming hash: the lowest offset holding it, or -1 */
	int64		held;			/* hashes read */
} WindowProbe;

static bool
probe_row(int64 base, TimestampTz created, const uint8 *sh, int n, TransactionId xmin, void *arg)
{
	WindowProbe *w = arg;

	for (int k = 0; k < n; k++)
	{
		uint32		h;

		if (base + k <= w->floor)
			continue;
		w->held++;
		memcpy(&h, sh + k * QS_HASH_LEN + 8, sizeof(h));
		for (h &= w->size - 1; w->slot[h] != 0; h = (h + 1) & (w->size - 1))
		{
			int			i = w->slot[h] - 1;

			if (memcmp(w->in + i * QS_HASH_LEN, sh + k * QS_HASH_LEN, QS_HASH_LEN) == 0 &&
				(w->first[i] < 0 || base + k < w->first[i]))
				w->first[i] = base + k;
		}
	}
	return true;
}

/*
 * An uncached partition's window was found to hold `held` hashes past its
 * floor; only a count of the whole window may find it smaller.
 */
static void
note_held(const pg_uuid_t *pid, int64 held, bool whole)
{
	PartEntry  *p;

	LWLockAcquire(dedup_shared->lock, LW_EXCLUSIVE);
	p = hash_search(dedup_parts, pid, HASH_FIND, NULL);
	if (p != NULL && p->uncached)
		p->held = whole ? held : Max(p->held, held);
	LWLockRelease(dedup_shared->lock);
}

/* The incoming hashes to look for (those flagged in `probe`, or all). */
static void
probe_init(WindowProbe *w, int64 floor, int count, const uint8 *in, const bool *probe)
{
	w->in = in;
	w->floor = floor;
	w->size = 16;
	while (w->size < count * 2)
		w->size <<= 1;
	w->slot = palloc0(sizeof(int) * w->size);
	w->first = palloc(sizeof(int64) * Max(count, 1));
	w->held = 0;
	for (int i = 0; i < count; i++)
	{
		uint32		h;

		w->first[i] = -1;
		if (probe && !probe[i])
			continue;
		memcpy(&h, in + i * QS_HASH_LEN + 8, sizeof(h));	/* xxh3 bits are uniform */
		for (h &= w->size - 1; w->slot[h] != 0; h = (h + 1) & (w->size - 1))
			;
		w->slot[h] = i + 1;
	}
}

/* The duplicates found, in frame order, into *res. */
static void
probe_finish(WindowProbe *w, int count, QsAppendResult *res)
{
	for (int i = 0; i < count; i++)
		if (w->first[i] >= 0)
			dedup_add_dup(res, count, i, w->first[i]);
	res->duplicate = res->ndups > 0;
	pfree(w->slot);
	pfree(w->first);
}

/*
 * Read the window's hash rows past `floor` (`whole`: all of them) and look
 * each stored hash up among the incoming ones; an uncached partition learns
 * how many hashes its window holds, to be cached again once they fit. For
 * what the cache cannot tell, on a standby, and in a transaction that reads
 * from one snapshot.
 */
void
dedup_read_window(const pg_uuid_t *pid, int64 floor, bool whole, TimestampTz since, int count,
			const uint8 *in, const bool *probe, QsAppendResult *res)
{
	WindowProbe w;

	res->ndups = 0;
	probe_init(&w, floor, count, in, probe);
	dedup_each_window_row(pid, floor, since, probe_row, &w);
	probe_finish(&w, count, res);

	if (dedup_shared != NULL && !RecoveryInProgress())
	{
		pg_atomic_fetch_add_u64(&dedup_shared->window_reads, 1);
		note_held(pid, w.held, whole);
	}
}

/*
 * The keyed probe, for a partition the cache does not hold: its hashes, one
 * row each in queen.log_txn_keys, complete for every hash row up to
 * log_txn_marks.indexed. The incoming hashes are looked up among the keys
 * up to the mark; the hash rows past the mark are read and probed, and the
 * first queen_streams.dedup_key_budget of their hashes become keys (the mark
 * moves past them). A large backlog so takes a few pushes to key, each of
 * which also reads the window past its keys, as 0.6.0 read the whole
 * window; then a probe costs what the push brings. The caller holds the row
 * lock and the keys and the mark commit or roll back with the push, so they
 * are exactly the committed hash rows: the verdict is read_window's.
 */
#define QS_DEDUP_KEY_BATCH 8192		/* keys per INSERT */

static QsPlan mark_plan = {
	"SELECT indexed FROM queen.log_txn_marks WHERE partition_id = $1",
	1, {UUIDOID}
};

static QsPlan mark_set_plan = {
	"INSERT INTO queen.log_txn_marks (partition_id, indexed) VALUES ($1, $2)"
	" ON CONFLICT (partition_id) DO UPDATE SET indexed = excluded.indexed",
	2, {UUIDOID, INT8OID}
};

/*
 * One index descent per incoming hash, whatever the statistics say: as a
 * join, a partition keyed since the last ANALYZE looked rare, and the plan
 * hashed all of its keys at every push.
 */
static QsPlan keys_plan = {
	"SELECT h.i, (SELECT min(k.msg_offset) FROM queen.log_txn_keys k"
	"              WHERE k.partition_id = $1 AND k.hash = h.hash"
	"                AND k.msg_offset > $3 AND k.msg_offset <= $5 AND k.created_at >= $4)"
	"  FROM unnest($2::uuid[]) WITH ORDINALITY AS h(hash, i)",
	5, {UUIDOID, UUIDARRAYOID, INT8OID, TIMESTAMPTZOID, INT8OID}
};

/* the hash rows past the mark, whatever their age: a raised window needs them */
static QsPlan unkeyed_plan = {
	"SELECT base_offset, created_at, hashes, xmin FROM queen.log_txns"
	" WHERE partition_id = $1 AND base_offset > $2 ORDER BY base_offset",
	2, {UUIDOID, INT8OID}
};

static QsPlan keys_insert_plan = {
	"INSERT INTO queen.log_txn_keys (partition_id, hash, msg_offset, created_at)"
	" SELECT $1, u.h, u.o, u.c FROM unnest($2::uuid[], $3::int8[], $4::timestamptz[]) AS u(h, o, c)",
	4, {UUIDOID, UUIDARRAYOID, INT8ARRAYOID, TIMESTAMPTZARRAYOID}
};

/* what read_window counts: the hashes of the window past `floor` */
static QsPlan held_plan = {
	"SELECT coalesce(sum(end_offset - GREATEST(base_offset, $2 + 1) + 1), 0)::bigint"
	"  FROM queen.log_txns WHERE partition_id = $1 AND end_offset > $2 AND created_at >= $3",
	3, {UUIDOID, INT8OID, TIMESTAMPTZOID}
};

/* An uncached partition's window is counted at most this often (it decides re-caching). */
#define QS_DEDUP_COUNT_EVERY USECS_PER_SEC

/* Keys waiting for their INSERT. */
typedef struct KeyBatch
{
	Datum		pid;
	int			n;
	int			cap;
	uint8	   *hash;			/* cap hashes */
	Datum	   *h;
	Datum	   *off;
	Datum	   *at;
} KeyBatch;

static void
flush_keys(KeyBatch *b)
{
	Datum		args[4];

	if (b->n == 0)
		return;
	for (int i = 0; i < b->n; i++)
		b->h[i] = PointerGetDatum(b->hash + i * QS_HASH_LEN);	/* a uuid is its 16 bytes */
	args[0] = b->pid;
	args[1] = PointerGetDatum(construct_array(b->h, b->n, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR));
	args[2] = PointerGetDatum(construct_array(b->off, b->n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
											  TYPALIGN_DOUBLE));
	args[3] = PointerGetDatum(construct_array(b->at, b->n, TIMESTAMPTZOID, sizeof(int64), FLOAT8PASSBYVAL,
											  TYPALIGN_DOUBLE));
	qs_exec(&keys_insert_plan, args, NULL, 0);
	pfree(DatumGetPointer(args[1]));
	pfree(DatumGetPointer(args[2]));
	pfree(DatumGetPointer(args[3]));
	b->n = 0;
}

/* A keying pass: the probe, the keys waiting, what is left of the budget. */
typedef struct Keying
{
	WindowProbe *w;
	TimestampTz since;
	KeyBatch	b;
	int64		budget;
	int64		keyed;			/* every row up to this offset keyed */
} Keying;

static bool
key_row(int64 base, TimestampTz created, const uint8 *sh, int n, TransactionId xmin, void *arg)
{
	Keying	   *k = arg;
	KeyBatch   *b = &k->b;

	if (created >= k->since)
		probe_row(base, created, sh, n, xmin, k->w);
	for (int i = 0; i < n; i++)
	{
		memcpy(b->hash + b->n * QS_HASH_LEN, sh + i * QS_HASH_LEN, QS_HASH_LEN);
		b->off[b->n] = Int64GetDatum(base + i);
		b->at[b->n] = TimestampTzGetDatum(created);
		if (++b->n == b->cap)
			flush_keys(b);
	}
	k->keyed = base + n - 1;
	k->budget -= n;
	return k->budget > 0;
}

/*
 * Key the hash rows past `mark`, a budget's worth of whole rows, probing
 * those of the window; then read the rest of the window. Returns the new
 * mark.
 */
static int64
key_rows(const pg_uuid_t *pid, int64 mark, int64 last_offset, TimestampTz since, WindowProbe *w)
{
	Datum		args[2];
	Keying		k;
	bool		all;

	k.w = w;
	k.since = since;
	k.budget = qs_dedup_key_budget;
	k.keyed = mark;
	k.b.pid = qs_uuid_datum(pid);
	k.b.n = 0;
	k.b.cap = (int) Min(last_offset - mark, QS_DEDUP_KEY_BATCH);
	k.b.hash = palloc(k.b.cap * QS_HASH_LEN);
	k.b.h = palloc(sizeof(Datum) * k.b.cap);
	k.b.off = palloc(sizeof(Datum) * k.b.cap);
	k.b.at = palloc(sizeof(Datum) * k.b.cap);
	args[0] = k.b.pid;
	args[1] = Int64GetDatum(mark);
	all = each_row(&unkeyed_plan, args, key_row, &k);
	flush_keys(&k.b);
	pfree(k.b.hash);
	pfree(k.b.h);
	pfree(k.b.off);
	pfree(k.b.at);
	if (all)
		return last_offset;		/* every row past the mark keyed, up to the allocator's offset */
	/* the budget spent: the window past the keys is read */
	if (k.keyed < last_offset)
		dedup_each_window_row(pid, Max(k.keyed, w->floor), since, probe_row, w);
	return k.keyed;
}

static void
probe_keys(const pg_uuid_t *pid, int64 floor, bool whole, TimestampTz since, int64 last_offset,
		   int count, const uint8 *in, const bool *probe, QsAppendResult *res)
{
	WindowProbe w;
	Datum		args[4];
	Datum	   *keys = palloc(sizeof(Datum) * Max(count, 1));
	int		   *idx = palloc(sizeof(int) * Max(count, 1));
	int			n = 0;
	int64		mark = -1;

	res->ndups = 0;
	probe_init(&w, floor, count, in, probe);
	args[0] = qs_uuid_datum(pid);
	qs_exec(&mark_plan, args, NULL, 1);
	if (SPI_processed == 1)
		mark = qs_col_int64(0, 1, -1);
	SPI_freetuptable(SPI_tuptable);

	/* the keyed part: offsets up to the mark */
	for (int i = 0; i < count; i++)
	{
		if (probe && !probe[i])
			continue;
		CHECK_FOR_INTERRUPTS();
		keys[n] = PointerGetDatum(in + i * QS_HASH_LEN);	/* a uuid is its 16 bytes */
		idx[n++] = i;
	}
	if (mark > floor && n > 0)
	{
		Datum		kargs[5];

		kargs[0] = args[0];
		kargs[1] = PointerGetDatum(construct_array(keys, n, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR));
		kargs[2] = Int64GetDatum(floor);
		kargs[3] = TimestampTzGetDatum(since);
		kargs[4] = Int64GetDatum(mark);
		qs_exec(&keys_plan, kargs, NULL, 0);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			int64		k = qs_col_int64(r, 1, 0) - 1;

			CHECK_FOR_INTERRUPTS();
			if (k < 0 || k >= n)
				elog(ERROR, "dedup key probe returned row %lld of %d", (long long) k, n);
			w.first[idx[k]] = qs_col_int64(r, 2, -1);	/* null: not keyed */
		}
		SPI_freetuptable(SPI_tuptable);
	}
	pfree(keys);
	pfree(idx);

	/* the rest: rows past the mark, read (a later occurrence never replaces a keyed one) */
	if (mark < last_offset)
	{
		int64		to = key_rows(pid, mark, last_offset, since, &w);

		if (to != mark)
		{
			args[1] = Int64GetDatum(to);
			qs_exec(&mark_set_plan, args, NULL, 0);
		}
	}
	probe_finish(&w, count, res);

	if (dedup_shared != NULL)
	{
		PartEntry  *p;
		TimestampTz now = GetCurrentTimestamp();
		bool		count_it = false;

		pg_atomic_fetch_add_u64(&dedup_shared->key_probes, 1);
		if (!whole)
			return;
		/* only a count of the whole window may find it smaller */
		LWLockAcquire(dedup_shared->lock, LW_EXCLUSIVE);
		p = hash_search(dedup_parts, pid, HASH_FIND, NULL);
		if (p != NULL && p->uncached && now - p->counted_at >= QS_DEDUP_COUNT_EVERY)
		{
			p->counted_at = now;
			count_it = true;
		}
		LWLockRelease(dedup_shared->lock);
		if (count_it)
		{
			args[1] = Int64GetDatum(floor);
			args[2] = TimestampTzGetDatum(since);
			qs_exec(&held_plan, args, NULL, 1);
			note_held(pid, qs_col_int64(0, 1, 0), true);
			SPI_freetuptable(SPI_tuptable);
		}
	}
}

/*
 * A partition the cache does not answer for: by key, unless this
 * transaction reads from one snapshot (REPEATABLE READ, SERIALIZABLE):
 * keys it wrote from that snapshot could miss rows another push committed
 * since, so it reads the window and writes nothing.
 */
void
dedup_probe_uncached(const pg_uuid_t *pid, int64 floor, bool whole, TimestampTz since, int64 last_offset,
			   int count, const uint8 *in, const bool *probe, QsAppendResult *res)
{
	if (IsolationUsesXactSnapshot())
		dedup_read_window(pid, floor, whole, since, count, in, probe, res);
	else
		probe_keys(pid, floor, whole, since, last_offset, count, in, probe, res);
}
