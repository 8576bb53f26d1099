/*
 * push.c: the packing core of every push (the requests push_text.c reads,
 * the streams cycle's sink items, requeues, transactions): items grouped
 * by (queue, partition) in first-seen order, one segment per group,
 * partitions appended in ascending id order (the global lock order),
 * intra-request duplicates collapsed.
 */
#include "storage/storage.h"
#include "common/hooks.h"
#include "common/ids.h"
#include "common/spi.h"
#include "common/text.h"


#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"

static int
group_cmp_pid(const void *a, const void *b)
{
	const QsPushGroup *ga = *(QsPushGroup *const *) a;
	const QsPushGroup *gb = *(QsPushGroup *const *) b;

	return memcmp(ga->part.pid.data, gb->part.pid.data, UUID_LEN);
}

/* Group lookup by (queue, partition): the key holds pointers into the items. */
typedef struct GroupKey
{
	const char *queue;
	const char *partition;
} GroupKey;

typedef struct GroupEnt
{
	GroupKey	key;
	int			g;
} GroupEnt;

static uint32
group_key_hash(const void *key, Size keysize)
{
	const GroupKey *k = key;

	return hash_combine(hash_bytes((const unsigned char *) k->queue, strlen(k->queue)),
						hash_bytes((const unsigned char *) k->partition, strlen(k->partition)));
}

static int
group_key_match(const void *a, const void *b, Size keysize)
{
	const GroupKey *x = a;
	const GroupKey *y = b;

	return strcmp(x->queue, y->queue) != 0 || strcmp(x->partition, y->partition) != 0;
}

/*
 * In-request duplicates: client transaction ids by (group, request, hash).
 * A merged push also keys each id's first item of all requests under
 * request -1, to find an id an earlier request of the merge carries.
 */
typedef struct TxnKey
{
	int			g;
	int			req;
	uint8		hash[QS_HASH_LEN];
} TxnKey;

typedef struct TxnEnt
{
	TxnKey		key;
	int			leader;
} TxnEnt;

/*
 * Answer each duplicate with its original's message id, decoding each
 * original segment once: the duplicates are sorted by original offset and
 * each covering segment serves every duplicate it holds.
 */
typedef struct DupRef
{
	int64		off;
	int			item;
} DupRef;

static int
dupref_cmp(const void *a, const void *b)
{
	const DupRef *x = a;
	const DupRef *y = b;

	return x->off < y->off ? -1 : x->off > y->off ? 1 : 0;
}

static void
resolve_dup_ids(QsPushGroup *g, QsPushItem *items, DupRef *refs, int n)
{
	int64	   *offs = palloc(sizeof(int64) * n);
	pg_uuid_t  *ids = palloc(sizeof(pg_uuid_t) * n);
	bool	   *found = palloc(sizeof(bool) * n);

	qsort(refs, n, sizeof(DupRef), dupref_cmp);
	for (int d = 0; d < n; d++)
		offs[d] = refs[d].off;
	qs_frame_ids_at(&g->part.pid, offs, n, ids, found);
	for (int d = 0; d < n; d++)
	{
		QsPushItem *it = &items[refs[d].item];

		it->result_id = found[d] ? ids[d] : it->id;
	}
	pfree(offs);
	pfree(ids);
	pfree(found);
}

/*
 * Pack the still-pending members of a group (the blob builder of an append).
 * Each frame was written into the group's buffer when its item was added:
 * when every frame is still pending the buffer is the segment; after a
 * duplicate verdict the fresh frames are copied out of it. A frame that
 * breaks a limit was never written: packing it raises that limit's error.
 */
typedef struct PackArg
{
	QsPushGroup *g;
	QsPushItem *items;
	int		   *member;
	int			n;
} PackArg;

static bytea *
pack_members(void *arg)
{
	PackArg    *pa = arg;
	StringInfoData raw;
	bytea	   *blob;

	if (pa->n == pa->g->nitems && pa->g->bad < 0)
		return qs_segment_compress(pa->g->raw.data, pa->g->raw.len);
	initStringInfo(&raw);
	for (int i = 0; i < pa->n; i++)
	{
		QsPushItem *it = &pa->items[pa->member[i]];

		CHECK_FOR_INTERRUPTS();
		if (it->frame_len < 0)
			qs_frame_append(&raw, it->flags, &it->id, it->has_trace ? &it->trace : NULL,
							it->txn, it->txn_len, it->psub, it->psub_len,
							it->payload, it->payload_len);
		else
			appendBinaryStringInfo(&raw, pa->g->raw.data + it->frame_off, it->frame_len);
	}
	blob = qs_segment_compress(raw.data, raw.len);
	pfree(raw.data);
	return blob;
}

/* Write an item's frame into its group's buffer, unless it breaks a limit. */
static void
write_frame(QsPushGroup *g, QsPushItem *it, int i)
{
	if (!qs_frame_fits(it->has_trace, it->txn_len, it->psub != NULL, it->psub_len,
					   it->payload_len))
	{
		it->frame_len = -1;
		if (g->bad < 0)
			g->bad = i;
		return;
	}
	it->frame_off = g->raw.len;
	qs_frame_append(&g->raw, it->flags, &it->id, it->has_trace ? &it->trace : NULL,
					it->txn, it->txn_len, it->psub, it->psub_len,
					it->payload, it->payload_len);
	it->frame_len = g->raw.len - it->frame_off;
}

/*
 * A group's append, in three steps so that several partitions append in one
 * statement: collect its pending items, probe its window for them (row
 * locked), pack what stays pending; `member` lists the items packed.
 */
typedef struct GroupAppend
{
	uint8	   *hashes;
	bool	   *probe;
	int		   *member;
	int		   *pos;			/* position among the group's items */
	int			n;
} GroupAppend;

static void
collect_pending(QsPushGroup *g, QsPushItem *items, GroupAppend *ga)
{
	ga->n = 0;
	for (int k = 0; k < g->nitems; k++)
	{
		QsPushItem *it = &items[g->items[k]];

		if (it->status != QS_PUSH_PENDING)
			continue;
		memcpy(ga->hashes + ga->n * QS_HASH_LEN, it->hash, QS_HASH_LEN);
		/* A fresh UUIDv7 as transaction id cannot repeat: no need to probe it. */
		ga->probe[ga->n] = it->txn_given;
		ga->member[ga->n] = g->items[k];
		ga->pos[ga->n] = k;
		ga->n++;
	}
}

/*
 * A merged push: an id that an earlier request's item carries as its own
 * message id (never probed, so still pending here) is, unless the window
 * already held it (`res`, the probe's verdict, comes first, as it would
 * one by one), a duplicate of that item, which this segment stores.
 * Whether any was marked.
 */
static bool
settle_crossed(QsPushItem *items, GroupAppend *ga, const QsAppendResult *res)
{
	bool	   *held = NULL;
	bool		any = false;

	for (int i = 0; i < ga->n; i++)
	{
		QsPushItem *it = &items[ga->member[i]];

		CHECK_FOR_INTERRUPTS();
		if (it->cross < 0)
			continue;
		if (held == NULL)
		{
			held = palloc0(sizeof(bool) * ga->n);
			for (int d = 0; d < res->ndups; d++)
				held[res->dup_idx[d]] = true;
		}
		if (!held[i])
		{
			it->status = QS_PUSH_DUPLICATE;
			it->leader = it->cross;
			any = true;
		}
	}
	if (held)
		pfree(held);
	return any;
}

/*
 * Probe the window (the row is locked) and set the duplicates aside: with
 * `repack` the fresh items stay pending, without it a duplicate group
 * writes nothing. Whether the pending items changed (a segment packed
 * before the probe must then be packed again).
 */
static bool
probe_group(QsPushGroup *g, QsPushItem *items, GroupAppend *ga, QsAppendMany *a, bool repack)
{
	QsAppendResult res;
	DupRef	   *refs;
	bool		crossed;

	memset(&res, 0, sizeof(res));
	qs_dedup_probe(&g->part.pid, g->part.window, a->last_offset, a->txns_start, -1,
				   ga->n, ga->hashes, ga->probe, GetCurrentTimestamp(), &res);
	crossed = settle_crossed(items, ga, &res);
	if (!res.duplicate)
	{
		if (crossed)
			collect_pending(g, items, ga);
		return crossed;
	}

	/* the duplicates, by their position among the group's items */
	if (g->ndups == 0)
	{
		g->dup_idx = palloc(sizeof(int) * g->nitems);
		g->dup_off = palloc(sizeof(int64) * g->nitems);
	}
	refs = palloc(sizeof(DupRef) * res.ndups);
	for (int d = 0; d < res.ndups; d++)
	{
		int			i = res.dup_idx[d];

		CHECK_FOR_INTERRUPTS();
		items[ga->member[i]].status = QS_PUSH_DUPLICATE;
		items[ga->member[i]].offset = res.dup_off[d];
		g->dup_idx[g->ndups] = ga->pos[i];
		g->dup_off[g->ndups] = res.dup_off[d];
		g->ndups++;
		refs[d].off = res.dup_off[d];
		refs[d].item = ga->member[i];
	}
	resolve_dup_ids(g, items, refs, res.ndups);
	pfree(refs);
	if (!repack)
	{
		/* the fresh items beside a duplicate are not written either */
		for (int k = 0; k < g->nitems; k++)
			if (items[g->items[k]].status == QS_PUSH_PENDING)
				items[g->items[k]].status = QS_PUSH_DUPLICATE;
	}
	collect_pending(g, items, ga);
	return true;
}

/* Whether any pending item has a client id, which can repeat. */
static bool
any_probed(GroupAppend *ga)
{
	for (int i = 0; i < ga->n; i++)
		if (ga->probe[i])
			return true;
	return false;
}

/* Whether packing all of the group's frames breaks no limit. */
static bool
within_limits(QsPushGroup *g)
{
	return g->bad < 0 && (Size) g->raw.len <= (Size) qs_max_segment_kb * 1024;
}

/* Pack the group's pending items into its append (none: no segment). */
static void
pack_group(QsPushGroup *g, QsPushItem *items, GroupAppend *ga, QsAppendMany *a)
{
	PackArg		pa;

	a->blob = NULL;
	if (ga->n == 0)
		return;
	pa.g = g;
	pa.items = items;
	pa.member = ga->member;
	pa.n = ga->n;
	a->blob = pack_members(&pa);
	a->count = ga->n;
	a->hashes = ga->hashes;
}

/* The append landed: its items are queued. */
static void
group_appended(QsPushGroup *g, QsPushItem *items, GroupAppend *ga, QsAppendMany *a)
{
	if (a->blob == NULL)
		return;
	g->stored = true;
	g->base_offset = a->base_offset;
	g->created_at = a->created_at;
	g->nqueued += ga->n;
	for (int i = 0; i < ga->n; i++)
	{
		items[ga->member[i]].status = QS_PUSH_QUEUED;
		items[ga->member[i]].result_id = items[ga->member[i]].id;
		items[ga->member[i]].offset = a->base_offset + i;
	}
}

/*
 * Append every group (`order`, sorted by pid). The segments are packed
 * first, outside any lock, as if nothing were a duplicate: a pusher holds
 * its partition's row until its commit, and compressing is the longest step
 * of an append. Then the rows are locked in pid order (a lone group without
 * dedup is locked by its append) and the windows probed; a group the probe
 * changed (a duplicate found) is packed again without its duplicates. A
 * group over a limit (an item, or the whole segment) that a duplicate could
 * bring back within it is packed only after its probe; one that no
 * duplicate can save raises before any lock. Then they are all appended.
 */
static void
append_groups(QsPushGroup **order, int ng, QsPushItem *items, bool repack)
{
	QsAppendMany *a = palloc0(sizeof(QsAppendMany) * ng);
	GroupAppend *ga = palloc0(sizeof(GroupAppend) * ng);
	bool	   *probes = palloc0(sizeof(bool) * ng);
	bool	   *packed = palloc0(sizeof(bool) * ng);
	bool		lock = ng > 1;

	for (int g = 0; g < ng; g++)
	{
		int			cap = Max(order[g]->nitems, 1);

		CHECK_FOR_INTERRUPTS();
		a[g].pid = order[g]->part.pid;
		a[g].window = order[g]->part.window;
		ga[g].hashes = palloc(cap * QS_HASH_LEN);
		ga[g].probe = palloc(cap * sizeof(bool));
		ga[g].member = palloc(cap * sizeof(int));
		ga[g].pos = palloc(cap * sizeof(int));
		collect_pending(order[g], items, &ga[g]);
		/* with dedup on the window is probed (and the cache kept) under the row lock */
		probes[g] = ga[g].n > 0 && a[g].window > 0;
		lock |= probes[g];
		if (!probes[g] || !any_probed(&ga[g]) || within_limits(order[g]))
		{
			pack_group(order[g], items, &ga[g], &a[g]);
			packed[g] = true;
		}
	}
	if (lock)
		qs_appends_lock(a, ng);
	for (int g = 0; g < ng; g++)
	{
		bool		changed;

		CHECK_FOR_INTERRUPTS();
		changed = probes[g] && probe_group(order[g], items, &ga[g], &a[g], repack);
		if (changed && packed[g])
		{
			if (a[g].blob)
				pfree(a[g].blob);
			packed[g] = false;
		}
		if (!packed[g])
			pack_group(order[g], items, &ga[g], &a[g]);
	}
	qs_appends_run(a, ng);
	for (int g = 0; g < ng; g++)
	{
		group_appended(order[g], items, &ga[g], &a[g]);
		order[g]->duplicate = !order[g]->stored && order[g]->ndups > 0;
		/* the frames are in the segment now */
		pfree(order[g]->raw.data);
		order[g]->raw.data = NULL;
		pfree(ga[g].hashes);
		pfree(ga[g].probe);
		pfree(ga[g].member);
		pfree(ga[g].pos);
		if (a[g].blob)
			pfree(a[g].blob);
	}
	pfree(a);
	pfree(ga);
	pfree(probes);
	pfree(packed);
}

/*
 * The incremental packer: qs_push_add groups one item (and writes its
 * frame) as soon as it is read, qs_push_finish resolves (auto-creating
 * under the tenant) and appends. With `repack` the frames left after a
 * duplicate verdict are packed again and land: a group stores its fresh
 * items and reports its duplicates. Without it a duplicate segment writes
 * nothing, as log_push_one_v1 does.
 *
 * Linear in the items: groups and in-request duplicates are found through
 * hash tables; only client transaction ids are compared (a server-minted
 * UUIDv7 cannot repeat).
 */
struct QsPushBatch
{
	bool		repack;
	bool		many;			/* several requests, each item's `req` says whose */
	QsPushGroup *groups;
	int			ng;
	int			cap;
	HTAB	   *gtab;
	HTAB	   *ttab;
};

QsPushBatch *
qs_push_begin(bool repack)
{
	QsPushBatch *b = palloc0(sizeof(QsPushBatch));
	HASHCTL		ctl;

	b->repack = repack;
	b->cap = 8;
	b->groups = palloc0(sizeof(QsPushGroup) * b->cap);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(GroupKey);
	ctl.entrysize = sizeof(GroupEnt);
	ctl.hash = group_key_hash;
	ctl.match = group_key_match;
	ctl.hcxt = CurrentMemoryContext;
	b->gtab = hash_create("queen_streams push groups", 16, &ctl,
						  HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
	return b;
}

/*
 * Several push requests as one push (queen.push_text_many): the items of
 * request k carry req = k, in request order. The answer is each request's
 * as if they had been pushed one after the other in one transaction: a
 * request's own repeated ids collapse as in a single push; an id an earlier
 * request carries is a duplicate of it only where the queue dedups (the
 * later push would have found it in the window), else it is stored again.
 */
QsPushBatch *
qs_push_begin_many(void)
{
	QsPushBatch *b = qs_push_begin(true);

	b->many = true;
	return b;
}

/* Group items[i] in first-seen order; the leader of a repeated txn wins. */
void
qs_push_add(QsPushBatch *b, QsPushItem *items, int i)
{
	QsPushItem *it = &items[i];
	GroupKey	gk;
	GroupEnt   *ge;
	QsPushGroup *grp;
	bool		found;
	int			g;

	gk.queue = it->queue;
	gk.partition = it->partition;
	ge = hash_search(b->gtab, &gk, HASH_ENTER, &found);
	if (!found)
	{
		if (b->ng == b->cap)
		{
			b->cap *= 2;
			b->groups = repalloc(b->groups, sizeof(QsPushGroup) * b->cap);
			memset(b->groups + b->ng, 0, sizeof(QsPushGroup) * (b->cap - b->ng));
		}
		ge->g = b->ng;
		grp = &b->groups[b->ng];
		grp->queue = it->queue;
		grp->partition = it->partition;
		grp->cap = 8;
		grp->items = palloc(sizeof(int) * grp->cap);
		grp->bad = -1;
		initStringInfo(&grp->raw);
		b->ng++;
	}
	g = ge->g;
	grp = &b->groups[g];
	it->group = g;
	it->status = QS_PUSH_PENDING;
	it->leader = -1;
	it->cross = -1;
	it->frame_len = -1;
	it->offset = -1;
	qs_txn_hash(it->txn, it->txn_len, it->hash);
	if (it->txn_given || (b->many && it->id_given))
	{
		TxnKey		tk;
		TxnEnt	   *te;

		if (b->ttab == NULL)
		{
			HASHCTL		ctl;

			memset(&ctl, 0, sizeof(ctl));
			ctl.keysize = sizeof(TxnKey);
			ctl.entrysize = sizeof(TxnEnt);
			ctl.hcxt = CurrentMemoryContext;
			b->ttab = hash_create("queen_streams push txns", 256, &ctl,
								  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		}
		memset(&tk, 0, sizeof(tk));
		tk.g = g;
		memcpy(tk.hash, it->hash, QS_HASH_LEN);
		if (it->txn_given)
		{
			tk.req = b->many ? it->req : 0;
			te = hash_search(b->ttab, &tk, HASH_ENTER, &found);
			if (found)
			{
				it->status = QS_PUSH_DUPLICATE;
				it->result_id = items[te->leader].id;
				it->leader = te->leader;
				return;
			}
			te->leader = i;
		}
		if (b->many)
		{
			/*
			 * First in its request: did an earlier request carry it? An
			 * item's own message id (a cycle's sink item may bring one) is
			 * its transaction id, which a later request may name.
			 */
			tk.req = -1;
			te = hash_search(b->ttab, &tk, HASH_ENTER, &found);
			if (!found)
				te->leader = i;
			else if (it->txn_given && items[te->leader].req != it->req)
				it->cross = te->leader;
		}
	}
	if (grp->nitems == grp->cap)
	{
		grp->cap *= 2;
		grp->items = repalloc(grp->items, sizeof(int) * grp->cap);
	}
	grp->items[grp->nitems++] = i;
	write_frame(grp, it, i);
}

QsPushGroup *
qs_push_finish(QsPushBatch *b, const pg_uuid_t *tenant, QsPushItem *items, int nitems,
			   int *ngroups)
{
	QsPushGroup *groups = b->groups;
	QsPushGroup **order;
	int			ng = b->ng;

	hash_destroy(b->gtab);
	if (b->ttab)
		hash_destroy(b->ttab);

	{
		const char **queues = palloc(sizeof(char *) * Max(ng, 1));
		const char **partitions = palloc(sizeof(char *) * Max(ng, 1));
		QsPartition *parts = palloc(sizeof(QsPartition) * Max(ng, 1));

		for (int g = 0; g < ng; g++)
		{
			queues[g] = groups[g].queue;
			partitions[g] = groups[g].partition;
		}
		qs_partitions_resolve(tenant, queues, partitions, ng, parts);
		for (int g = 0; g < ng; g++)
			groups[g].part = parts[g];
		pfree(queues);
		pfree(partitions);
		pfree(parts);
	}

	/*
	 * Envelope payloads of queues that ask for it (the tenant's own queue
	 * row), and write those groups' frames again.
	 */
	for (int g = 0; g < ng; g++)
	{
		QsPushGroup *grp = &groups[g];

		if (!grp->part.encrypt)
			continue;
		for (int k = 0; k < grp->nitems; k++)
		{
			QsPushItem *it = &items[grp->items[k]];
			char	   *env;
			int			envlen;
			QsSeal		seal = {&grp->part.pid, it->txn, it->txn_len};

			CHECK_FOR_INTERRUPTS();
			if (qs_encrypt_payload(it->queue, &seal, it->payload, it->payload_len, &env, &envlen))
			{
				it->payload = env;
				it->payload_len = envlen;
				it->flags |= QS_FLAG_ENCRYPTED;
			}
			else
				break;			/* fail-open: one warning per group is enough */
		}
		resetStringInfo(&grp->raw);
		grp->bad = -1;
		for (int k = 0; k < grp->nitems; k++)
		{
			CHECK_FOR_INTERRUPTS();
			write_frame(grp, &items[grp->items[k]], grp->items[k]);
		}
	}

	/*
	 * A merged push: an id an earlier request carries is, where the queue
	 * dedups, that item's duplicate, answered with its result (an earlier
	 * item's own message id is settled by the probe, probe_group).
	 */
	if (b->many)
		for (int i = 0; i < nitems; i++)
		{
			QsPushItem *it = &items[i];

			CHECK_FOR_INTERRUPTS();
			if (it->cross >= 0 && it->status == QS_PUSH_PENDING &&
				groups[it->group].part.window > 0 && items[it->cross].txn_given)
			{
				it->status = QS_PUSH_DUPLICATE;
				it->leader = it->cross;
			}
		}

	order = palloc(sizeof(QsPushGroup *) * Max(ng, 1));
	for (int g = 0; g < ng; g++)
		order[g] = &groups[g];
	qsort(order, ng, sizeof(QsPushGroup *), group_cmp_pid);

	append_groups(order, ng, items, b->repack);

	/*
	 * A follower reports its leader's id once the leader has landed: the
	 * original's id when the leader itself was a duplicate of an earlier push.
	 */
	for (int i = 0; i < nitems; i++)
		if (items[i].leader >= 0 && items[items[i].leader].status != QS_PUSH_PENDING)
		{
			items[i].result_id = items[items[i].leader].result_id;
			items[i].offset = items[items[i].leader].offset;
		}
	for (int i = 0; i < nitems; i++)
		items[i].pid = groups[items[i].group].part.pid;
	/* counted, and parked long-poll pops woken, when this commits */
	if (qs_pushed_hook)
		for (int g = 0; g < ng; g++)
			if (groups[g].nqueued > 0)
				qs_pushed_hook(tenant, groups[g].queue, groups[g].nqueued);
	*ngroups = ng;
	return groups;
}

/* All items at once: the streams cycle, requeues, transactions. */
QsPushGroup *
qs_push_items(const pg_uuid_t *tenant, QsPushItem *items, int nitems,
			  bool repack, int *ngroups)
{
	QsPushBatch *b = qs_push_begin(repack);

	for (int i = 0; i < nitems; i++)
	{
		CHECK_FOR_INTERRUPTS();
		qs_push_add(b, items, i);
	}
	return qs_push_finish(b, tenant, items, nitems, ngroups);
}

/*
 * An item's transaction id: the client's own when it gave a non-empty one
 * (only those can repeat, so only those are probed for duplicates), else
 * its message id's string.
 */
void
qs_push_set_txn(QsPushItem *it, char *txn)
{
	if (txn != NULL && txn[0] != '\0')
	{
		it->txn = txn;
		it->txn_given = true;
	}
	else
	{
		char	   *s = palloc(QS_UUID_STRLEN + 1);

		qs_uuid_format(&it->id, s);
		it->txn = s;
		it->txn_given = false;
	}
	it->txn_len = strlen(it->txn);
}
