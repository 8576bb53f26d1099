/*
 * row_lock.c: the partition rows' locks without a statement. A push locks
 * the allocator row of each partition it appends to, in id order, as
 * SELECT ... FOR NO KEY UPDATE would: one primary-key descent and one
 * tuple lock per row. A statement cost several times that to plan, start
 * and end, on every push.
 *
 * The row is found through a snapshot taken now (the transaction's, under
 * REPEATABLE READ and SERIALIZABLE), and the lock follows it to its newest
 * version as a read committed statement would; under the stricter levels
 * a row changed since the snapshot is a serialization failure, as there.
 * The id is the key: a newer version can no longer fail the search.
 */
#include "storage/storage.h"

#include "access/genam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

static void
partition_vanished(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("partition vanished mid-push")));
}

/* (a delete too is "update" here, as SELECT ... FOR UPDATE words it) */
static void
serialization_failure(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access due to concurrent update")));
}

/* Lock one row, found by its id, and keep its locked version's allocator. */
static void
lock_one(Relation rel, IndexScanDesc scan, Snapshot snap, TupleTableSlot *found,
		 TupleTableSlot *slot, QsAppendMany *a, AttrNumber last_offset, AttrNumber txns_start)
{
	ScanKeyData key;
	TM_FailureData tmfd;
	TM_Result	res;
	ItemPointerData tid;
	bool		isnull;
	/* (no LOCK_UPDATE_IN_PROGRESS: every updater conflicts with NO KEY UPDATE) */
	uint8		flags = IsolationUsesXactSnapshot() ? 0 : TUPLE_LOCK_FLAG_FIND_LAST_VERSION;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(&a->pid));
	index_rescan(scan, &key, 1, NULL, 0);
	if (!index_getnext_slot(scan, ForwardScanDirection, found))
		partition_vanished();
	tid = found->tts_tid;
	res = table_tuple_lock(rel, &tid, snap, slot, GetCurrentCommandId(false),
						   LockTupleNoKeyExclusive, LockWaitBlock, flags, &tmfd);
	switch (res)
	{
		case TM_Ok:
			break;
		case TM_Updated:
			/* only without FIND_LAST_VERSION, under a transaction snapshot */
			serialization_failure();
			break;
		case TM_Deleted:
			if (IsolationUsesXactSnapshot())
				serialization_failure();
			partition_vanished();
			break;
		default:
			/* changed by this very command, or invisible: not a push's case */
			elog(ERROR, "unexpected result %d locking a partition row", (int) res);
	}
	a->last_offset = DatumGetInt64(slot_getattr(slot, last_offset, &isnull));
	a->txns_start = DatumGetInt64(slot_getattr(slot, txns_start, &isnull));
	a->ctid = slot->tts_tid;
	a->locked = true;
}

/*
 * Lock the rows of n distinct partitions, `a` sorted by pid (the one lock
 * order of appends: two pushes never deadlock on each other), and read
 * their allocators (last_offset, txns_start) and locked versions before
 * anything is appended. NO KEY UPDATE serializes pushers exactly like an
 * UPDATE of the row does, without blocking the FOR KEY SHARE checks of rows
 * that reference the partition (a pop creating its cursor must not wait
 * for an open push).
 */
void
qs_appends_lock(QsAppendMany *a, int n)
{
	Oid			relid = qs_rel_oid("log_partitions");
	Relation	rel;
	Relation	idx;
	Snapshot	snap;
	TupleTableSlot *found;
	TupleTableSlot *slot;
	IndexScanDesc scan;
	AttrNumber	last_offset,
				txns_start;

	/* FOR UPDATE asks the caller for UPDATE, as the append's own update does */
	if (pg_class_aclcheck(relid, GetUserId(), ACL_UPDATE) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, "log_partitions");
	/* rows this transaction wrote so far (a partition just created) are seen */
	CommandCounterIncrement();
	rel = table_open(relid, RowShareLock);
	if (!OidIsValid(RelationGetPrimaryKeyIndex(rel)))
		elog(ERROR, "queen.log_partitions has no primary key");
	idx = index_open(RelationGetPrimaryKeyIndex(rel), AccessShareLock);
	last_offset = qs_rel_column(rel, "last_offset");
	txns_start = qs_rel_column(rel, "txns_start");
	snap = RegisterSnapshot(GetTransactionSnapshot());
	found = table_slot_create(rel, NULL);
	slot = table_slot_create(rel, NULL);
	scan = index_beginscan(rel, idx, snap, 1, 0);
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (i > 0 && memcmp(a[i - 1].pid.data, a[i].pid.data, UUID_LEN) >= 0)
			elog(ERROR, "partition rows must be locked in id order, each once");
		lock_one(rel, scan, snap, found, slot, &a[i], last_offset, txns_start);
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(found);
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snap);
	index_close(idx, NoLock);
	table_close(rel, NoLock);
}
