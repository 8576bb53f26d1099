/*
 * pop_ready.c: the ready sets of the wildcard pop.
 *
 * A wildcard pop must find, among every partition of a queue, one that has
 * a backlog for its consumer group and no live lease, least recently served
 * first. Instead of reading them all, it reads the head of the group's ready
 * set: queen.log_ready rows of (queue, group), in (served_at NULLS FIRST,
 * partition_id) order, each joined with its partition and cursor to apply
 * the claim's gates. Leased rows were served last, so they sit at the tail;
 * the read stops at the first claimable rows, and its cost is O(log P) plus
 * the rows it passes over: those leased before the head, those still held
 * by the delay gates (retryDelay, delayedProcessing, windowBuffer), and
 * extra rows (below) until the next rebuild prunes them.
 *
 * The invariant, for every (queue, group) with a log_ready_groups row:
 *
 *   a partition with a backlog for the group (its last_offset past the
 *   cursor, or no cursor yet and messages since the group's subscription)
 *   has at least one log_ready row.
 *
 * Extra rows are allowed: a second row of a partition, or a row of one with
 * no backlog; the pop's join skips them. log_ready has no unique key, so
 * that no one waits on a ready row a push holds and a push waits on none:
 *  - push (qs_ready_pushed), in the transaction that moves last_offset: for
 *    each registered group, it locks the partition's rows FOR KEY SHARE SKIP
 *    LOCKED and inserts one if it locked none. It never updates a row;
 *  - a pop that claimed the partition moves served_at (qs_ready_served) of
 *    the rows it can lock FOR NO KEY UPDATE SKIP LOCKED, which goes along
 *    with a push's KEY SHARE (the table has no key, so every UPDATE is a
 *    no-key one);
 *  - deleters (ack, auto-ack, the pop's seal, a seek to a partition's end,
 *    the rebuild's prune; qs_ready_consumed, delete_locked) lock rows FOR
 *    UPDATE SKIP LOCKED, only where the partition shows no backlog, then
 *    delete them in a later statement that tests it again.
 * Why no backlog is hidden: a row goes only under a deleter's FOR UPDATE.
 * If a push P that adds a backlog locked the row first, the deleter skips
 * it. If P had locked it and ended before the deleter's lock, P's commit
 * was visible before its lock went, so the deleter's second statement sees
 * the backlog and keeps the row. If P comes after the deleter's lock, P's
 * KEY SHARE skips the row (TM_WouldBlock from heap_lock_tuple for a row
 * being deleted; gone once the delete commits) and P inserts a fresh one.
 * Under a transaction snapshot (REPEATABLE READ) the second test cannot see
 * a later commit: deleters then delete nothing, and the rebuild prunes; a
 * push there inserts a row without looking (locking a row deleted since its
 * snapshot would be a serialization failure), which is safe because no
 * deleter sees the row before the push commits, and then sees its backlog.
 *
 * The one wait left: a push whose snapshot saw a row before a pop moved it
 * follows the update chain (heap_lock_updated_tuple), and that waits, SKIP
 * LOCKED or not, for a transaction deleting the newest version. So a
 * transaction never deletes a row it moved itself (own_moved; a pop and its
 * ack in one open transaction), and the auto-ack pop deletes before it
 * moves; what is left is a pop that committed inside the push statement's
 * few microseconds, then an ack of the same partition, which the push
 * waits for (an ack commits at once; an ack in a user's open transaction
 * would make the push wait until that commit).
 *
 * Other paths: lease expiry and nack need nothing (the row stays while the
 * cursor is behind; the pop's join applies the lease and the retryDelay
 * hold); a seek of a queue, a deleted group and a changed subscription
 * forget the group's set (qs_ready_forget; rows someone holds stay as extra
 * rows), a deleted queue its sets: the next wildcard pop rebuilds it.
 *
 * Building (qs_ready_prepare): the first wildcard pop of a group on a queue
 * registers it and, in the same transaction, inserts a row for every
 * partition with a backlog that has none (for a group that starts at a
 * time and has not met a partition, only if its newest segment is that
 * recent). Other pops of the group meanwhile read every partition, as
 * before (an advisory lock, tried, not waited for). A push in flight while
 * the set is built may have read the registry before the group was in it
 * and commit after the build's snapshot: the one case where the invariant
 * can be missed. So for YOUNG_SECONDS after the build, a pop that finds
 * nothing adds the partitions written since RECENT_SECONDS before the build
 * (an index range, not every partition), and every
 * queen_streams.pop_ready_recheck seconds one pop of the group rebuilds the
 * set anyway (prunes rows with no backlog, a partition's extra rows, and
 * adds missing ones; the others skip it), which also covers a push whose
 * transaction was open longer: a missed update never hides a partition with
 * a backlog for longer than that setting while the group pops. Both tables
 * are unlogged: after a crash, a failover or a restore they are empty,
 * every group is unregistered and is rebuilt from the tables by its next
 * pop.
 */
#include "storage/storage.h"
#include "storage/pop_ready.h"
#include "common/ids.h"
#include "common/spi.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

/*
 * A set this young gets the partitions written since RECENT_SECONDS before
 * it was built from a pop that finds nothing in it.
 */
#define YOUNG_SECONDS 2
#define RECENT_SECONDS 5
/* advisory lock class (the two-int form) of a group's registration */
#define READY_LOCK_CLASS 1365599572

static QsPlan group_get_plan = {
	"SELECT checked_at < clock_timestamp() - make_interval(secs => $3),"
	"       built_at > clock_timestamp() - make_interval(secs => " CppAsString2(YOUNG_SECONDS) ")"
	"  FROM queen.log_ready_groups WHERE queue_id = $1 AND consumer_group = $2",
	3, {UUIDOID, TEXTOID, INT4OID}
};

/* One pop registers a group at a time; the others read every partition meanwhile. */
static QsPlan group_try_plan = {
	"SELECT pg_try_advisory_xact_lock(" CppAsString2(READY_LOCK_CLASS) ","
	"                                 hashtext($1::text || '/' || $2))",
	2, {UUIDOID, TEXTOID}
};

/* Has the queue fewer than $2 partitions? (reads at most $2 index entries) */
static QsPlan small_plan = {
	"SELECT count(*) < $2 FROM (SELECT 1 FROM queen.log_partitions WHERE queue_id = $1 LIMIT $2) s",
	2, {UUIDOID, INT4OID}
};

static QsPlan group_put_plan = {
	"INSERT INTO queen.log_ready_groups (queue_id, consumer_group, built_at, checked_at)"
	" VALUES ($1, $2, clock_timestamp(), clock_timestamp())"
	" ON CONFLICT DO NOTHING RETURNING 1",
	2, {UUIDOID, TEXTOID}
};

static QsPlan group_claim_plan = {
	"SELECT 1 FROM queen.log_ready_groups WHERE queue_id = $1 AND consumer_group = $2"
	" FOR UPDATE SKIP LOCKED",
	2, {UUIDOID, TEXTOID}
};

static QsPlan group_checked_plan = {
	"UPDATE queen.log_ready_groups SET checked_at = clock_timestamp()"
	" WHERE queue_id = $1 AND consumer_group = $2",
	2, {UUIDOID, TEXTOID}
};

/*
 * A partition has no backlog for the row's group: it is gone, its messages
 * all went past retention, or the group's cursor is at its end. Rows are
 * deleted only under this test, read by a statement that began after the
 * rows were locked (see the opening comment).
 */
#define NO_BACKLOG \
	" NOT EXISTS (SELECT 1 FROM queen.log_partitions p" \
	"              WHERE p.id = r.partition_id AND p.last_offset >= p.log_start" \
	"                AND NOT EXISTS (SELECT 1 FROM queen.log_consumers c" \
	"                                 WHERE c.partition_id = p.id" \
	"                                   AND c.consumer_group = r.consumer_group" \
	"                                   AND c.committed >= p.last_offset))"

/*
 * Partitions with a cursor of the group that is behind, and those it has
 * not met that hold messages ($3 NULL), or a segment created since $3
 * (segments are in created_at order: the newest tells). Only those with no
 * row: a push meanwhile may add one too (an extra row, harmless).
 */
static QsPlan build_plan = {
	"INSERT INTO queen.log_ready (partition_id, consumer_group, queue_id, served_at)"
	" SELECT b.id, $2, $1, b.served_at FROM ("
	"   SELECT p.id, c.lease_acquired_at AS served_at"
	"     FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id"
	"    WHERE c.consumer_group = $2 AND p.queue_id = $1 AND c.committed < p.last_offset"
	"      AND p.last_offset >= p.log_start"
	"   UNION ALL"
	"   SELECT p.id, NULL FROM queen.log_partitions p"
	"    WHERE p.queue_id = $1 AND p.last_offset >= p.log_start"
	"      AND ($3::timestamptz IS NULL"
	"           OR (SELECT s.created_at FROM queen.log_segments s WHERE s.partition_id = p.id"
	"                ORDER BY s.base_offset DESC LIMIT 1) >= $3)"
	"      AND NOT EXISTS (SELECT 1 FROM queen.log_consumers c"
	"                       WHERE c.partition_id = p.id AND c.consumer_group = $2)) b"
	" WHERE NOT EXISTS (SELECT 1 FROM queen.log_ready r"
	"                    WHERE r.partition_id = b.id AND r.consumer_group = $2)",
	3, {UUIDOID, TEXTOID, TIMESTAMPTZOID}
};

/*
 * The same, for the partitions written since shortly before the set was
 * built (through the (queue_id, last_write_at) index): a push in flight
 * while it was built, unless its transaction had begun more than
 * RECENT_SECONDS - 1 before (push moves last_write_at to its transaction's
 * start, and only when a second stale).
 */
static QsPlan build_recent_plan = {
	"INSERT INTO queen.log_ready (partition_id, consumer_group, queue_id, served_at)"
	" SELECT p.id, $2, $1, c.lease_acquired_at FROM queen.log_partitions p"
	"   LEFT JOIN LATERAL (SELECT c.committed, c.lease_acquired_at FROM queen.log_consumers c"
	"                       WHERE c.partition_id = p.id AND c.consumer_group = $2 LIMIT 1) c ON true"
	"  WHERE p.queue_id = $1 AND p.last_offset >= p.log_start"
	"    AND p.last_write_at >= (SELECT g.built_at FROM queen.log_ready_groups g"
	"                             WHERE g.queue_id = $1 AND g.consumer_group = $2)"
	"                           - make_interval(secs => " CppAsString2(RECENT_SECONDS) ")"
	"    AND (c.committed < p.last_offset"
	"         OR (c.committed IS NULL"
	"             AND ($3::timestamptz IS NULL"
	"                  OR (SELECT s.created_at FROM queen.log_segments s WHERE s.partition_id = p.id"
	"                       ORDER BY s.base_offset DESC LIMIT 1) >= $3)))"
	"    AND NOT EXISTS (SELECT 1 FROM queen.log_ready r"
	"                     WHERE r.partition_id = p.id AND r.consumer_group = $2)",
	3, {UUIDOID, TEXTOID, TIMESTAMPTZOID}
};

/*
 * A rebuild's prune: the group's rows with no backlog (caught up by a path
 * that does not delete, e.g. a stream cycle's ack, or gone past retention)
 * and the extra rows of a partition (all but its first), not those this
 * transaction moved (own_moved). Locked without waiting, then deleted by
 * delete_plan.
 */
static QsPlan prune_lock_plan = {
	"SELECT r.ctid FROM queen.log_ready r"
	" WHERE r.queue_id = $1 AND r.consumer_group = $2 AND r.ctid <> ALL ($3::tid[])"
	"   AND (" NO_BACKLOG
	"        OR EXISTS (SELECT 1 FROM queen.log_ready d"
	"                    WHERE d.partition_id = r.partition_id"
	"                      AND d.consumer_group = r.consumer_group AND d.ctid < r.ctid))"
	" FOR UPDATE OF r SKIP LOCKED",
	3, {UUIDOID, TEXTOID, TIDARRAYOID}
};

/* Rows $1 (locked by this transaction), if the test still holds now. */
static QsPlan delete_plan = {
	"DELETE FROM queen.log_ready r WHERE r.ctid = ANY ($1::tid[])"
	"   AND (" NO_BACKLOG
	"        OR EXISTS (SELECT 1 FROM queen.log_ready d"
	"                    WHERE d.partition_id = r.partition_id"
	"                      AND d.consumer_group = r.consumer_group AND d.ctid < r.ctid"
	"                      AND $2))",
	2, {TIDARRAYOID, BOOLOID}
};

/*
 * A partition's rows an ack or a pop may delete: not those this
 * transaction moved (see own_moved), not those a push or a pop holds.
 */
static QsPlan consumed_lock_plan = {
	"SELECT r.ctid FROM queen.log_ready r"
	" WHERE r.partition_id = $1 AND r.consumer_group = $2 AND r.ctid <> ALL ($3::tid[])"
	"   AND " NO_BACKLOG
	" FOR UPDATE OF r SKIP LOCKED",
	3, {UUIDOID, TEXTOID, TIDARRAYOID}
};

/* FOR NO KEY UPDATE: a push's FOR KEY SHARE goes along with it. */
static QsPlan served_plan = {
	"UPDATE queen.log_ready SET served_at = clock_timestamp()"
	" WHERE ctid = ANY (ARRAY(SELECT ctid FROM queen.log_ready"
	"                          WHERE partition_id = $1 AND consumer_group = $2"
	"                          FOR NO KEY UPDATE SKIP LOCKED))"
	" RETURNING ctid",
	2, {UUIDOID, TEXTOID}
};

/*
 * Push: for each appended partition and registered group, a row unless
 * one exists that it can lock FOR KEY SHARE without waiting. A row being
 * deleted is skipped (a new one goes in); a row a pop holds or has moved
 * is locked along with it. The lock keeps deleters off the row until the
 * push ends; push never updates a row and never waits on one. A new row
 * starts where the cursor was last served, so a partition that was
 * drained and filled again keeps its place in the order.
 */
static QsPlan pushed_plan = {
	"WITH w AS MATERIALIZED ("
	"  SELECT DISTINCT u.pid, g.consumer_group, g.queue_id"
	"    FROM unnest($1::uuid[]) AS u(pid)"
	"    JOIN queen.log_partitions p ON p.id = u.pid"
	"    JOIN queen.log_ready_groups g ON g.queue_id = p.queue_id),"
	" h AS MATERIALIZED ("
	"  SELECT r.partition_id, r.consumer_group FROM queen.log_ready r, w"
	"   WHERE r.partition_id = w.pid AND r.consumer_group = w.consumer_group"
	"   FOR KEY SHARE OF r SKIP LOCKED)"
	" INSERT INTO queen.log_ready (partition_id, consumer_group, queue_id, served_at)"
	" SELECT w.pid, w.consumer_group, w.queue_id,"
	"        (SELECT c.lease_acquired_at FROM queen.log_consumers c"
	"          WHERE c.partition_id = w.pid AND c.consumer_group = w.consumer_group)"
	"   FROM w"
	"  WHERE NOT EXISTS (SELECT 1 FROM h"
	"                     WHERE h.partition_id = w.pid AND h.consumer_group = w.consumer_group)",
	1, {UUIDARRAYOID}
};

/*
 * The same under a transaction snapshot, where locking a row deleted since
 * the snapshot would fail the push with a serialization error: always a new
 * row (safe, since no deleter sees it before the push commits; the rebuild
 * drops the extra rows).
 */
static QsPlan pushed_always_plan = {
	"INSERT INTO queen.log_ready (partition_id, consumer_group, queue_id, served_at)"
	" SELECT DISTINCT u.pid, g.consumer_group, g.queue_id, NULL::timestamptz"
	"   FROM unnest($1::uuid[]) AS u(pid)"
	"   JOIN queen.log_partitions p ON p.id = u.pid"
	"   JOIN queen.log_ready_groups g ON g.queue_id = p.queue_id",
	1, {UUIDARRAYOID}
};

/* A deleted queue's sets (its id, since the queue row is gone already). */
static QsPlan drop_rows_plan = {
	"DELETE FROM queen.log_ready WHERE queue_id = $1",
	1, {UUIDOID}
};

static QsPlan drop_groups_plan = {
	"DELETE FROM queen.log_ready_groups WHERE queue_id = $1",
	1, {UUIDOID}
};

/*
 * Rows that a push or a pop holds, and those this transaction moved
 * (own_moved), stay (extra rows the next build keeps or the rebuild after
 * it prunes): forgetting never waits on them nor makes a push wait.
 */
static QsPlan forget_rows_plan = {
	"DELETE FROM queen.log_ready WHERE ctid = ANY (ARRAY("
	"  SELECT r.ctid FROM queen.log_ready r JOIN queen.queues q ON q.id = r.queue_id"
	"   WHERE q.tenant_id = $1 AND r.consumer_group = $2"
	"     AND ($3::uuid IS NULL OR r.queue_id = $3) AND r.ctid <> ALL ($4::tid[])"
	"   FOR UPDATE OF r SKIP LOCKED))",
	4, {UUIDOID, TEXTOID, UUIDOID, TIDARRAYOID}
};

static QsPlan forget_group_plan = {
	"DELETE FROM queen.log_ready_groups g USING queen.queues q"
	" WHERE q.id = g.queue_id AND q.tenant_id = $1 AND g.consumer_group = $2"
	"   AND ($3::uuid IS NULL OR g.queue_id = $3)",
	3, {UUIDOID, TEXTOID, UUIDOID}
};

/*
 * A 0.7.0 schema served by this library (before ALTER EXTENSION UPDATE) has
 * no ready sets: the pop then reads every partition, as 0.7.0 did, and
 * nothing else keeps them.
 */
static bool
ready_available(void)
{
	Oid			nsp = get_namespace_oid("queen", true);

	return OidIsValid(nsp) && OidIsValid(get_relname_relid("log_ready_groups", nsp));
}

/*
 * The ctids this transaction's pops gave a new served_at (rows they moved
 * to the tail). A delete by this same transaction leaves them: a push whose
 * snapshot still saw the row's older version follows its update chain, and
 * would wait for a delete at its end (heap_lock_updated_tuple waits
 * whatever the SKIP LOCKED). Such a row stays as an extra row until an ack
 * in a later transaction or the next rebuild.
 */
static ItemPointerData *own_moved;
static int	own_n,
			own_cap;
static LocalTransactionId own_lxid = InvalidLocalTransactionId;

static void
own_reset_if_stale(void)
{
	if (own_lxid != MyProc->lxid)
	{
		own_moved = NULL;		/* was in the ended transaction's context */
		own_n = own_cap = 0;
		own_lxid = MyProc->lxid;
	}
}

static void
own_add(ItemPointer tid)
{
	own_reset_if_stale();
	if (own_n == own_cap)
	{
		own_cap = own_cap ? own_cap * 2 : 16;
		own_moved = own_moved
			? repalloc(own_moved, sizeof(ItemPointerData) * own_cap)
			: MemoryContextAlloc(TopTransactionContext, sizeof(ItemPointerData) * own_cap);
	}
	own_moved[own_n++] = *tid;
}

static Datum
tid_array(ItemPointerData *tids, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = PointerGetDatum(&tids[i]);
	return PointerGetDatum(construct_array(d, n, TIDOID, sizeof(ItemPointerData), false,
										   TYPALIGN_SHORT));
}

/*
 * Delete the rows the last statement locked (ctid in column 1), re-testing
 * them in a statement that starts now: a push that held one of them and
 * committed before our lock is seen by this snapshot (its lock ended after
 * its commit became visible). `dups`: extra rows of a partition go too.
 */
static void
delete_locked(bool dups)
{
	uint64		n = SPI_processed;
	SPITupleTable *t = SPI_tuptable;
	ItemPointerData *tids;
	Datum		args[2];
	bool		isnull;

	if (n == 0)
		return;
	tids = palloc(sizeof(ItemPointerData) * n);
	for (uint64 i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		tids[i] = *(ItemPointer) DatumGetPointer(SPI_getbinval(t->vals[i], t->tupdesc, 1, &isnull));
	}
	args[0] = tid_array(tids, (int) n);
	args[1] = BoolGetDatum(dups);
	qs_exec(&delete_plan, args, NULL, 0);
}

static void
rebuild(Datum queue_id, Datum grp, bool seek, TimestampTz seek_ts)
{
	Datum		args[3];
	char		nulls[3] = "  n";

	args[0] = queue_id;
	args[1] = grp;
	/* under a transaction snapshot the re-test cannot see a later push: keep the rows */
	if (!IsolationUsesXactSnapshot())
	{
		own_reset_if_stale();
		args[2] = tid_array(own_moved, own_n);
		qs_exec(&prune_lock_plan, args, NULL, 0);
		delete_locked(true);
	}
	args[2] = TimestampTzGetDatum(seek_ts);
	if (seek)
		nulls[2] = ' ';
	qs_exec(&build_plan, args, nulls, 0);
}

/* Rebuild unless another pop of the group is at it; false if it is. */
static bool
recheck(Datum queue_id, Datum grp, bool seek, TimestampTz seek_ts)
{
	Datum		args[2] = {queue_id, grp};

	qs_exec(&group_claim_plan, args, NULL, 1);
	if (SPI_processed == 0)
		return false;
	rebuild(queue_id, grp, seek, seek_ts);
	qs_exec(&group_checked_plan, args, NULL, 0);
	return true;
}

/*
 * Before a wildcard pop reads the set: build it if the group has none, or
 * rebuild it if the last rebuild is older than pop_ready_recheck.
 * QS_READY_NONE: read every partition instead (this schema has no ready
 * sets, or another pop is building this one); QS_READY_YOUNG: built in the
 * last seconds, so a pop that finds nothing calls qs_ready_retry.
 */
QsReadyState
qs_ready_prepare(Datum queue_id, const char *group, bool seek, TimestampTz seek_ts)
{
	Datum		args[3];
	Datum		grp = CStringGetTextDatum(group);

	if (!ready_available())
		return QS_READY_NONE;
	args[0] = queue_id;
	args[1] = grp;
	args[2] = Int32GetDatum(qs_pop_ready_recheck_s);
	qs_exec(&group_get_plan, args, NULL, 1);
	if (SPI_processed == 0)
	{
		/* a small queue is read whole: cheaper than keeping a set in step */
		if (qs_pop_ready_min_partitions > 0)
		{
			Datum		small[2] = {queue_id, Int32GetDatum(qs_pop_ready_min_partitions)};

			qs_exec(&small_plan, small, NULL, 1);
			if (qs_col_bool(0, 1, false))
				return QS_READY_NONE;
		}
		qs_exec(&group_try_plan, args, NULL, 1);
		if (!qs_col_bool(0, 1, false))
			return QS_READY_NONE;
		qs_exec(&group_put_plan, args, NULL, 1);
		if (SPI_processed == 1)
			rebuild(queue_id, grp, seek, seek_ts);
		return QS_READY_YOUNG;
	}
	{
		bool		due = qs_col_bool(0, 1, false);
		bool		young = qs_col_bool(0, 2, false);

		if (due)
			recheck(queue_id, grp, seek, seek_ts);
		return young ? QS_READY_YOUNG : QS_READY_OK;
	}
}

/*
 * A pop of a young set found nothing: a push that was in flight while the
 * set was built may have committed since, unseen by the build and before
 * the group was registered for it to see. Add the partitions written since
 * shortly before the build, and say whether to read the set again.
 */
bool
qs_ready_retry(Datum queue_id, const char *group, bool seek, TimestampTz seek_ts)
{
	Datum		args[3];
	char		nulls[3] = "  n";

	args[0] = queue_id;
	args[1] = CStringGetTextDatum(group);
	qs_exec(&group_claim_plan, args, NULL, 1);
	if (SPI_processed == 0)
		return false;			/* another pop is at it */
	args[2] = TimestampTzGetDatum(seek_ts);
	if (seek)
		nulls[2] = ' ';
	qs_exec(&build_recent_plan, args, nulls, 0);
	return SPI_processed > 0;
}

/* The partition was served now: to the tail of the order. */
void
qs_ready_served(Datum pid, Datum grp)
{
	Datum		args[2] = {pid, grp};
	bool		isnull;

	if (!ready_available())
		return;

	qs_exec(&served_plan, args, NULL, 0);
	for (uint64 i = 0; i < SPI_processed; i++)
		own_add((ItemPointer) DatumGetPointer(SPI_getbinval(SPI_tuptable->vals[i],
												  SPI_tuptable->tupdesc, 1, &isnull)));
}

/*
 * The group's cursor on the partition moved forward: delete its rows if
 * the partition has no backlog left, but none that a push holds (that push
 * adds a backlog), a pop holds, or this transaction moved.
 */
void
qs_ready_consumed(Datum pid, Datum grp)
{
	Datum		args[3];

	if (!ready_available() || IsolationUsesXactSnapshot())
		return;
	own_reset_if_stale();
	args[0] = pid;
	args[1] = grp;
	args[2] = tid_array(own_moved, own_n);
	qs_exec(&consumed_lock_plan, args, NULL, 0);
	delete_locked(false);
}

/* The appended partitions of `a` (blob set), under their row locks. */
void
qs_ready_pushed(const QsAppendMany *a, int n)
{
	Datum	   *pids = palloc(sizeof(Datum) * n);
	Datum		arg;
	int			m = 0;

	if (!ready_available())
		return;
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (a[i].blob == NULL)
			continue;
		pids[m++] = UUIDPGetDatum((pg_uuid_t *) &a[i].pid);
	}
	if (m > 0)
	{
		arg = PointerGetDatum(construct_array(pids, m, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR));
		qs_exec(IsolationUsesXactSnapshot() ? &pushed_always_plan : &pushed_plan, &arg, NULL, 0);
	}
	pfree(pids);
}

/*
 * A group's cursors moved other than forward, went away, or will start
 * elsewhere: drop its sets (all_queues: on every queue of the tenant).
 */
void
qs_ready_forget(const pg_uuid_t *tenant, const char *group, Datum queue_id, bool all_queues)
{
	Datum		args[4];
	char		nulls[4] = "    ";

	if (!ready_available())
		return;
	own_reset_if_stale();
	args[0] = qs_uuid_datum(tenant);
	args[1] = CStringGetTextDatum(group);
	args[2] = queue_id;
	args[3] = tid_array(own_moved, own_n);
	if (all_queues)
		nulls[2] = 'n';
	qs_exec(&forget_group_plan, args, nulls, 0);
	qs_exec(&forget_rows_plan, args, nulls, 0);
}

/* The queue was deleted (after its partition rows were locked and deleted). */
void
qs_ready_drop_queue(Datum queue_id)
{
	if (!ready_available())
		return;
	qs_exec(&drop_groups_plan, &queue_id, NULL, 0);
	qs_exec(&drop_rows_plan, &queue_id, NULL, 0);
}
