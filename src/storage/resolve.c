/*
 * resolve.c: a (tenant, queue, partition) name to its partition without a
 * statement: one descent of the queues' (tenant_id, name) index and one of
 * the partitions' (queue_id, name) index, through a snapshot taken now, as
 * the statement it replaces would read them. Every push resolves its
 * partitions, and a statement cost several times these descents to start
 * and end. Creating a missing partition stays a statement (allocator.c).
 *
 * Row security or a missing privilege would make the statement see other
 * rows (or fail): then the caller is told to use it (qs_resolve_direct
 * returns false).
 */
#include "storage/storage.h"
#include "common/ids.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

typedef struct Side
{
	Relation	rel;
	Relation	idx;
	IndexScanDesc scan;
	TupleTableSlot *slot;
} Side;

/* Whether a statement of the caller would read the table as it is. */
static bool
readable(Oid relid)
{
	return pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK &&
		check_enable_rls(relid, InvalidOid, true) != RLS_ENABLED;
}

/* Open a table and its unique index on (k1, k2), and a scan of them. */
static void
side_open(Side *s, Oid relid, Oid idxid, Snapshot snap, const char *k1, const char *k2)
{
	Form_pg_index ix;

	s->rel = table_open(relid, AccessShareLock);
	s->idx = index_open(idxid, AccessShareLock);
	ix = s->idx->rd_index;
	if (ix->indrelid != relid || !ix->indisunique || !ix->indisvalid || ix->indnkeyatts != 2 ||
		ix->indkey.values[0] != qs_rel_column(s->rel, k1) ||
		ix->indkey.values[1] != qs_rel_column(s->rel, k2))
		elog(ERROR, "%s is not the unique index on (%s, %s) that resolve reads",
			 RelationGetRelationName(s->idx), k1, k2);
	s->slot = table_slot_create(s->rel, NULL);
	s->scan = index_beginscan(s->rel, s->idx, snap, 2, 0);
}

static void
side_close(Side *s)
{
	index_endscan(s->scan);
	ExecDropSingleTupleTableSlot(s->slot);
	index_close(s->idx, NoLock);
	table_close(s->rel, NoLock);
}

/* The visible row whose index keys are (k1 uuid, k2 text), if any. */
static bool
probe(Side *s, Datum k1, const char *k2)
{
	ScanKeyData keys[2];

	ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
						   s->idx->rd_indcollation[0], F_UUID_EQ, k1);
	ScanKeyEntryInitialize(&keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid,
						   s->idx->rd_indcollation[1], F_TEXTEQ, CStringGetTextDatum(k2));
	index_rescan(s->scan, keys, 2, NULL, 0);
	return index_getnext_slot(s->scan, ForwardScanDirection, s->slot);
}

/*
 * Resolve n (queue, partition) names of one tenant into out[]; found[i]
 * says which exist. False, with nothing resolved, when only a statement
 * may read these tables (see above).
 */
bool
qs_resolve_direct(const pg_uuid_t *tenant, const char *const *queues,
				  const char *const *partitions, int n, QsPartition *out, bool *found)
{
	Oid			queues_id = qs_rel_oid("queues");
	Oid			parts_id = qs_rel_oid("log_partitions");
	Snapshot	snap;
	Side		q,
				p;
	AttrNumber	q_id,
				q_window,
				q_encrypt,
				p_id;
	Datum		tenant_datum = qs_uuid_datum(tenant);
	const char *last_queue = NULL;
	bool		queue_found = false;
	Datum		queue_id = (Datum) 0;
	int			window = 0;
	bool		encrypt = false;

	if (!readable(queues_id) || !readable(parts_id))
		return false;
	/* rows this transaction wrote so far (a partition just created) are seen */
	CommandCounterIncrement();
	snap = RegisterSnapshot(GetTransactionSnapshot());
	side_open(&q, queues_id, qs_rel_oid("queues_tenant_name_uk"), snap, "tenant_id", "name");
	side_open(&p, parts_id, qs_rel_oid("log_partitions_queue_id_name_key"), snap,
			  "queue_id", "name");
	q_id = qs_rel_column(q.rel, "id");
	q_window = qs_rel_column(q.rel, "dedup_window_seconds");
	q_encrypt = qs_rel_column(q.rel, "encryption_enabled");
	p_id = qs_rel_column(p.rel, "id");

	for (int i = 0; i < n; i++)
	{
		bool		isnull;

		CHECK_FOR_INTERRUPTS();
		found[i] = false;
		/* the names of one push mostly share their queue: one descent each */
		if (last_queue == NULL || strcmp(last_queue, queues[i]) != 0)
		{
			last_queue = queues[i];
			queue_found = probe(&q, tenant_datum, queues[i]);
			if (queue_found)
			{
				queue_id = datumCopy(slot_getattr(q.slot, q_id, &isnull), false, UUID_LEN);
				window = DatumGetInt32(slot_getattr(q.slot, q_window, &isnull));
				encrypt = DatumGetBool(slot_getattr(q.slot, q_encrypt, &isnull)) && !isnull;
			}
		}
		if (!queue_found || !probe(&p, queue_id, partitions[i]))
			continue;
		out[i].pid = *DatumGetUUIDP(slot_getattr(p.slot, p_id, &isnull));
		out[i].window = window;
		out[i].encrypt = encrypt;
		found[i] = true;
	}
	side_close(&p);
	side_close(&q);
	UnregisterSnapshot(snap);
	return true;
}
