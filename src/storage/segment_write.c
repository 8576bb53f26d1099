/*
 * segment_write.c: the append's writes without a statement. For partitions
 * whose rows are locked (qs_appends_lock), bump each allocator row and
 * insert its segment and hash rows through the table AM, with the
 * constraints, indexes and AFTER ROW triggers a statement would run
 * (execReplication.c's simple-relation calls, as logical replication's
 * apply does); other triggers and row security that applies to the owner
 * are refused. A statement cost more to start (plan checks, node
 * initialisation) than these rows cost to write.
 */
#include "storage/storage.h"
#include "common/ids.h"

#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

/* The target tables, in the order their rows are written. */
enum
{
	REL_PARTITIONS,
	REL_SEGMENTS,
	REL_TXNS,
	NRELS
};

static const char *const rel_names[NRELS] = {"log_partitions", "log_segments", "log_txns"};
static const AclMode rel_modes[NRELS] = {ACL_UPDATE, ACL_INSERT, ACL_INSERT};

/* Column numbers of the columns the append reads or writes. */
typedef struct Cols
{
	AttrNumber	id,
				last_offset,
				last_write_at,
				oldest_live_at,
				oldest_txn_at;
	AttrNumber	partition_id[2],	/* segments, txns */
				base_offset[2],
				end_offset[2],
				created_at[2],
				body[2];		/* blob, hashes */
} Cols;

typedef struct Writer
{
	EState	   *estate;
	ResultRelInfo *rri[NRELS];
	TupleTableSlot *old_slot;
	TupleTableSlot *new_slot;
	TupleTableSlot *row_slot[2];	/* segments, txns */
	EPQState	epq;
	Cols		c;
} Writer;

/* A table (or index) of schema queen, by name: an error if missing. */
Oid
qs_rel_oid(const char *name)
{
	Oid			relid = get_relname_relid(name, get_namespace_oid("queen", false));

	if (!OidIsValid(relid))
		elog(ERROR, "queen.%s is missing", name);
	return relid;
}

/* A column's number, by name (the tables' own columns: an error if missing). */
AttrNumber
qs_rel_column(Relation rel, const char *name)
{
	TupleDesc	d = RelationGetDescr(rel);

	for (int i = 0; i < d->natts; i++)
	{
		Form_pg_attribute a = TupleDescAttr(d, i);

		if (!a->attisdropped && strcmp(NameStr(a->attname), name) == 0)
			return a->attnum;
	}
	elog(ERROR, "queen.%s has no column \"%s\"", RelationGetRelationName(rel), name);
	return InvalidAttrNumber;	/* keep compiler quiet */
}

/*
 * A row the append inserts sets every column: a column added to the table
 * later would otherwise be written NULL instead of its default.
 */
static void
all_columns_known(Relation rel, int known)
{
	TupleDesc	d = RelationGetDescr(rel);
	int			live = 0;

	for (int i = 0; i < d->natts; i++)
		if (!TupleDescAttr(d, i)->attisdropped)
			live++;
	if (live != known)
		elog(ERROR, "queen.%s has columns the append does not write", RelationGetRelationName(rel));
}

/*
 * Only AFTER ROW triggers (the foreign keys' among them) run as they would
 * for a statement: a BEFORE ROW trigger could skip a row the append counts
 * on, and statement triggers and transition tables need a statement.
 */
static void
triggers_supported(ResultRelInfo *rri)
{
	TriggerDesc *t = rri->ri_TrigDesc;

	if (t && (t->trig_insert_before_row || t->trig_update_before_row ||
			  t->trig_insert_before_statement || t->trig_insert_after_statement ||
			  t->trig_update_before_statement || t->trig_update_after_statement ||
			  t->trig_insert_new_table || t->trig_update_old_table || t->trig_update_new_table))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("queen.%s has a trigger the append cannot run",
						RelationGetRelationName(rri->ri_RelationDesc)),
				 errdetail("Segments are written row by row, without a statement."),
				 errhint("Only AFTER ... FOR EACH ROW triggers without transition tables are run.")));
}

static void
writer_open(Writer *w)
{
	List	   *rtable = NIL;
	Relation	rels[NRELS];
	RangeTblEntry *rtes[NRELS];
	MemoryContext old;

	memset(w, 0, sizeof(*w));
	w->estate = CreateExecutorState();
	/* everything below is freed with the executor state */
	old = MemoryContextSwitchTo(w->estate->es_query_cxt);
	for (int r = 0; r < NRELS; r++)
	{
		Oid			relid = qs_rel_oid(rel_names[r]);
		RangeTblEntry *rte;

		/* the caller runs as the extension's owner: check it, as a statement would */
		if (pg_class_aclcheck(relid, GetUserId(), rel_modes[r]) != ACLCHECK_OK)
			aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, rel_names[r]);
		if (check_enable_rls(relid, InvalidOid, false) == RLS_ENABLED)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("queen.%s has row security that applies to its owner", rel_names[r]),
					 errdetail("Segments are written without a statement, which row security policies need.")));
		rels[r] = table_open(relid, RowExclusiveLock);
		if (rels[r]->rd_rel->relkind != RELKIND_RELATION)
			elog(ERROR, "queen.%s must be a plain table", rel_names[r]);
		rte = makeNode(RangeTblEntry);
		rte->rtekind = RTE_RELATION;
		rte->relid = relid;
		rte->relkind = RELKIND_RELATION;
		rte->rellockmode = RowExclusiveLock;
		rtes[r] = rte;
		rtable = lappend(rtable, rte);
	}

	w->c.id = qs_rel_column(rels[REL_PARTITIONS], "id");
	w->c.last_offset = qs_rel_column(rels[REL_PARTITIONS], "last_offset");
	w->c.last_write_at = qs_rel_column(rels[REL_PARTITIONS], "last_write_at");
	w->c.oldest_live_at = qs_rel_column(rels[REL_PARTITIONS], "oldest_live_at");
	w->c.oldest_txn_at = qs_rel_column(rels[REL_PARTITIONS], "oldest_txn_at");
	/* what the update may change: for UPDATE OF triggers and the indexes' hints */
	{
		AttrNumber	upd[] = {w->c.last_offset, w->c.last_write_at, w->c.oldest_live_at,
		w->c.oldest_txn_at};

		for (int i = 0; i < (int) lengthof(upd); i++)
			rtes[REL_PARTITIONS]->updatedCols =
				bms_add_member(rtes[REL_PARTITIONS]->updatedCols,
							   upd[i] - FirstLowInvalidHeapAttributeNumber);
	}

	ExecInitRangeTable(w->estate, rtable);
	w->estate->es_output_cid = GetCurrentCommandId(true);
	/* only the update's crosscheck could read it: none is asked for */
	w->estate->es_snapshot = ActiveSnapshotSet() ? GetActiveSnapshot() : InvalidSnapshot;
	for (int r = 0; r < NRELS; r++)
	{
		w->rri[r] = makeNode(ResultRelInfo);
		InitResultRelInfo(w->rri[r], rels[r], r + 1, NULL, 0);
		triggers_supported(w->rri[r]);
		/* so that the AFTER ROW triggers find their relation */
		w->estate->es_opened_result_relations =
			lappend(w->estate->es_opened_result_relations, w->rri[r]);
		ExecOpenIndices(w->rri[r], false);
	}
	EvalPlanQualInit(&w->epq, w->estate, NULL, NIL, -1);
	AfterTriggerBeginQuery();

	for (int k = 0; k < 2; k++)
	{
		Relation	rel = rels[REL_SEGMENTS + k];

		w->c.partition_id[k] = qs_rel_column(rel, "partition_id");
		w->c.base_offset[k] = qs_rel_column(rel, "base_offset");
		w->c.end_offset[k] = qs_rel_column(rel, "end_offset");
		w->c.created_at[k] = qs_rel_column(rel, "created_at");
		w->c.body[k] = qs_rel_column(rel, k == 0 ? "blob" : "hashes");
		all_columns_known(rel, 5);
		w->row_slot[k] = ExecInitExtraTupleSlot(w->estate, RelationGetDescr(rel), &TTSOpsVirtual);
	}
	w->old_slot = table_slot_create(rels[REL_PARTITIONS], &w->estate->es_tupleTable);
	w->new_slot = ExecInitExtraTupleSlot(w->estate, RelationGetDescr(rels[REL_PARTITIONS]),
										 &TTSOpsVirtual);
	MemoryContextSwitchTo(old);
}

static void
writer_close(Writer *w)
{
	AfterTriggerEndQuery(w->estate);
	EvalPlanQualEnd(&w->epq);
	for (int r = 0; r < NRELS; r++)
	{
		ExecCloseIndices(w->rri[r]);
		table_close(w->rri[r]->ri_RelationDesc, NoLock);
	}
	ExecResetTupleTable(w->estate->es_tupleTable, false);
	FreeExecutorState(w->estate);
	/* what was written is seen by the statements that follow */
	CommandCounterIncrement();
}

static void
insert_row(Writer *w, int k, const QsAppendMany *a, Datum body)
{
	TupleTableSlot *s = w->row_slot[k];

	ExecClearTuple(s);
	memset(s->tts_isnull, true, sizeof(bool) * s->tts_tupleDescriptor->natts);
	s->tts_values[w->c.partition_id[k] - 1] = qs_uuid_datum(&a->pid);
	s->tts_values[w->c.base_offset[k] - 1] = Int64GetDatum(a->base_offset);
	s->tts_values[w->c.end_offset[k] - 1] = Int64GetDatum(a->base_offset + a->count - 1);
	s->tts_values[w->c.created_at[k] - 1] = TimestampTzGetDatum(a->created_at);
	s->tts_values[w->c.body[k] - 1] = body;
	s->tts_isnull[w->c.partition_id[k] - 1] = false;
	s->tts_isnull[w->c.base_offset[k] - 1] = false;
	s->tts_isnull[w->c.end_offset[k] - 1] = false;
	s->tts_isnull[w->c.created_at[k] - 1] = false;
	s->tts_isnull[w->c.body[k] - 1] = false;
	ExecStoreVirtualTuple(s);
	ExecSimpleRelationInsert(w->rri[REL_SEGMENTS + k], w->estate, s);
	ResetPerTupleExprContext(w->estate);
}

/* A timestamp column that is set when NULL, or (last_write_at) when stale. */
static void
set_if(TupleTableSlot *s, AttrNumber att, bool cond, TimestampTz now)
{
	if (cond)
	{
		s->tts_values[att - 1] = TimestampTzGetDatum(now);
		s->tts_isnull[att - 1] = false;
	}
}

/*
 * One partition: the allocator row moves by `count` (last_write_at only
 * when more than a second stale, so that the row stays HOT), the segment
 * takes the offsets after the old last_offset, and created_at is read
 * under the row lock, so it is monotone in offsets.
 */
static void
append_one(Writer *w, QsAppendMany *a)
{
	TupleTableSlot *old = w->old_slot;
	TupleTableSlot *new = w->new_slot;
	int			natts = old->tts_tupleDescriptor->natts;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	bytea	   *hashes;

	if (!table_tuple_fetch_row_version(w->rri[REL_PARTITIONS]->ri_RelationDesc, &a->ctid,
									   SnapshotAny, old))
		elog(ERROR, "the locked partition row is gone");
	slot_getallattrs(old);
	if (old->tts_isnull[w->c.id - 1] ||
		memcmp(DatumGetUUIDP(old->tts_values[w->c.id - 1])->data, a->pid.data, UUID_LEN) != 0 ||
		DatumGetInt64(old->tts_values[w->c.last_offset - 1]) != a->last_offset)
		elog(ERROR, "the locked partition row is not the one the lock read");

	ExecClearTuple(new);
	memcpy(new->tts_values, old->tts_values, sizeof(Datum) * natts);
	memcpy(new->tts_isnull, old->tts_isnull, sizeof(bool) * natts);
	new->tts_values[w->c.last_offset - 1] = Int64GetDatum(a->last_offset + a->count);
	set_if(new, w->c.last_write_at, old->tts_isnull[w->c.last_write_at - 1] ||
		   DatumGetTimestampTz(old->tts_values[w->c.last_write_at - 1]) < now - USECS_PER_SEC, now);
	set_if(new, w->c.oldest_live_at, old->tts_isnull[w->c.oldest_live_at - 1], now);
	set_if(new, w->c.oldest_txn_at, old->tts_isnull[w->c.oldest_txn_at - 1], now);
	ExecStoreVirtualTuple(new);
	ExecSimpleRelationUpdate(w->rri[REL_PARTITIONS], w->estate, &w->epq, old, new);
	ResetPerTupleExprContext(w->estate);

	a->base_offset = a->last_offset + 1;
	a->created_at = GetCurrentTimestamp();

	hashes = palloc(VARHDRSZ + (Size) a->count * QS_HASH_LEN);
	SET_VARSIZE(hashes, VARHDRSZ + (Size) a->count * QS_HASH_LEN);
	memcpy(VARDATA(hashes), a->hashes, (Size) a->count * QS_HASH_LEN);
	insert_row(w, 0, a, PointerGetDatum(a->blob));
	insert_row(w, 1, a, PointerGetDatum(hashes));
	pfree(hashes);
}

/*
 * Append the segment of every entry that has one (blob set), in `a`'s
 * order (pid order, the order the rows were locked in). Every such row is
 * locked by this transaction already.
 */
void
qs_segments_write(QsAppendMany *a, int n)
{
	Writer		w;

	writer_open(&w);
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (a[i].blob == NULL)
			continue;
		if (!a[i].locked)
			elog(ERROR, "a segment is appended only under its partition's row lock");
		append_one(&w, &a[i]);
	}
	writer_close(&w);
}
