/*
 * push.c: queen.push (POST /api/v1/push) and the packing core that the
 * streams cycle shares: items grouped by (queue, partition) in first-seen
 * order, one segment per group, partitions appended in ascending id order
 * (the global lock order), intra-request duplicates collapsed.
 */
#include "storage/storage.h"


#include "utils/builtins.h"

static int
group_cmp_pid(const void *a, const void *b)
{
	const QsPushGroup *ga = *(QsPushGroup *const *) a;
	const QsPushGroup *gb = *(QsPushGroup *const *) b;

	return memcmp(ga->part.pid.data, gb->part.pid.data, UUID_LEN);
}

/* Pack the still-pending items of a group, append, record the verdict. */
static void
append_group(QsPushGroup *g, QsPushItem *items)
{
	StringInfoData raw;
	uint8	   *hashes = palloc(g->nitems * QS_HASH_LEN);
	bool	   *probe = palloc(g->nitems * sizeof(bool));
	int		   *member = palloc(g->nitems * sizeof(int));
	int			n = 0;
	QsAppendResult res;
	bytea	   *blob;

	initStringInfo(&raw);
	for (int k = 0; k < g->nitems; k++)
	{
		QsPushItem *it = &items[g->items[k]];

		if (it->status != QS_PUSH_PENDING)
			continue;
		qs_frame_append(&raw, it->flags, &it->id, it->has_trace ? &it->trace : NULL,
						it->txn, it->txn_len, it->psub, it->psub_len,
						it->payload, it->payload_len);
		qs_txn_hash(it->txn, it->txn_len, hashes + n * QS_HASH_LEN);
		/* A fresh UUIDv7 as transaction id cannot repeat: no need to probe it. */
		probe[n] = it->txn_given;
		member[n] = g->items[k];
		n++;
	}
	g->duplicate = false;
	g->ndups = 0;
	if (n == 0)
		return;

	blob = qs_segment_compress(raw.data, raw.len);
	qs_append_segment(&g->part.pid, g->part.window, n, hashes, blob, -1, probe, &res);
	g->duplicate = res.duplicate;
	g->ndups = res.ndups;
	g->dup_idx = res.dup_idx;
	g->dup_off = res.dup_off;
	if (!res.duplicate)
	{
		g->base_offset = res.base_offset;
		g->created_at = res.created_at;
		for (int i = 0; i < n; i++)
		{
			items[member[i]].status = QS_PUSH_QUEUED;
			items[member[i]].result_id = items[member[i]].id;
		}
		return;
	}
	for (int d = 0; d < res.ndups; d++)
	{
		QsPushItem *it = &items[member[res.dup_idx[d]]];
		QsFrame		orig;

		it->status = QS_PUSH_DUPLICATE;
		if (qs_frame_at(&g->part.pid, res.dup_off[d], &orig))
			memcpy(it->result_id.data, orig.id, UUID_LEN);
		else
			it->result_id = it->id;
	}
}

/*
 * Group, resolve (auto-creating under the tenant) and append. With `repack`
 * (the push route) the frames left after a duplicate verdict are packed
 * again until they land; without it (the cycle) a duplicate segment is
 * reported as such and writes nothing, as log_push_one_v1 does.
 */
QsPushGroup *
qs_push_items(const pg_uuid_t *tenant, QsPushItem *items, int nitems,
			  bool repack, int *ngroups)
{
	QsPushGroup *groups = palloc0(sizeof(QsPushGroup) * Max(nitems, 1));
	QsPushGroup **order;
	int			ng = 0;

	/* Group in first-seen order; the leader of a repeated txn wins. */
	for (int i = 0; i < nitems; i++)
	{
		QsPushItem *it = &items[i];
		int			g;

		for (g = 0; g < ng; g++)
			if (strcmp(groups[g].queue, it->queue) == 0 &&
				strcmp(groups[g].partition, it->partition) == 0)
				break;
		if (g == ng)
		{
			groups[g].queue = it->queue;
			groups[g].partition = it->partition;
			groups[g].items = palloc(sizeof(int) * nitems);
			ng++;
		}
		it->group = g;
		it->status = QS_PUSH_PENDING;
		it->leader = -1;
		for (int k = 0; k < groups[g].nitems; k++)
		{
			QsPushItem *lead = &items[groups[g].items[k]];

			if (lead->status == QS_PUSH_PENDING && lead->txn_len == it->txn_len &&
				memcmp(lead->txn, it->txn, it->txn_len) == 0)
			{
				it->status = QS_PUSH_DUPLICATE;
				it->result_id = lead->id;
				it->leader = groups[g].items[k];
				break;
			}
		}
		if (it->status == QS_PUSH_PENDING)
			groups[g].items[groups[g].nitems++] = i;
	}

	for (int g = 0; g < ng; g++)
		qs_partition_resolve(tenant, groups[g].queue, groups[g].partition, true, &groups[g].part);

	/* Envelope payloads of queues that ask for it (the tenant's own queue row). */
	for (int g = 0; g < ng; g++)
	{
		if (!groups[g].part.encrypt)
			continue;
		for (int k = 0; k < groups[g].nitems; k++)
		{
			QsPushItem *it = &items[groups[g].items[k]];
			char	   *env;
			int			envlen;

			if (qs_encrypt_payload(it->queue, it->payload, it->payload_len, &env, &envlen))
			{
				it->payload = env;
				it->payload_len = envlen;
				it->flags |= QS_FLAG_ENCRYPTED;
			}
			else
				break;			/* fail-open: one warning per group is enough */
		}
	}

	order = palloc(sizeof(QsPushGroup *) * Max(ng, 1));
	for (int g = 0; g < ng; g++)
		order[g] = &groups[g];
	qsort(order, ng, sizeof(QsPushGroup *), group_cmp_pid);

	for (int g = 0; g < ng; g++)
	{
		append_group(order[g], items);
		while (repack && order[g]->duplicate)
			append_group(order[g], items);
	}

	/*
	 * A follower reports its leader's id once the leader has landed: the
	 * original's id when the leader itself was a duplicate of an earlier push.
	 */
	for (int i = 0; i < nitems; i++)
		if (items[i].leader >= 0 && items[items[i].leader].status != QS_PUSH_PENDING)
			items[i].result_id = items[items[i].leader].result_id;
	/* counted, and parked long-poll pops woken, when this commits */
	for (int i = 0; i < nitems; i++)
		if (items[i].status == QS_PUSH_QUEUED)
			if (qs_pushed_hook)
				qs_pushed_hook(tenant, items[i].queue, 1);
	*ngroups = ng;
	return groups;
}

/* Names are checked again on resolve; here the error can name the item. */
static void
check_item_name(const char *what, const char *key, const char *name)
{
	if (name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: \"%s\" must not be empty", what, key)));
	if (strlen(name) > 255)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: \"%s\" is too long", what, key),
				 errdetail("Names are at most 255 bytes.")));
}

/*
 * An item's transaction id: the client's own when it gave a non-empty one
 * (only those can repeat, so only those are probed for duplicates), else
 * its message id's string.
 */
void
qs_push_item_txn(QsPushItem *it, JsonbContainer *o, const char *what)
{
	char	   *txn = qs_json_string(o, "transactionId", what, false);

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

/* SQL: queen.push(request jsonb, tenant uuid) */
PG_FUNCTION_INFO_V1(qs_push);
Datum
qs_push(PG_FUNCTION_ARGS)
{
	Jsonb	   *req;
	JsonbContainer *arr;
	pg_uuid_t	tenant;
	QsPushItem *items;
	int			n;
	int			ng;
	QsPushGroup *groups;
	char	   *psub = NULL;
	QsJson		j;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("items array is required")));
	req = PG_GETARG_JSONB_P(0);
	qs_tenant_arg(fcinfo, 1, &tenant);
	/* the pusher's identity comes from the caller (the token), never the body */
	if (PG_NARGS() > 2 && !PG_ARGISNULL(2))
		psub = text_to_cstring(PG_GETARG_TEXT_PP(2));
	arr = qs_json_array(qs_json_object_arg(req, "push request"), "items", "push request");
	if (arr == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("items array is required")));

	n = JsonContainerSize(arr);
	items = palloc0(sizeof(QsPushItem) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		JsonbValue *v = getIthJsonbValueFromContainer(arr, i);
		JsonbContainer *o = qs_json_container(v);
		QsPushItem *it = &items[i];
		JsonbValue	pv;
		char		what[32];

		snprintf(what, sizeof(what), "item %d", i);
		if (o == NULL || !JsonContainerIsObject(o))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must be a JSON object", what)));
		it->queue = qs_json_string(o, "queue", what, true);
		it->partition = qs_json_string(o, "partition", what, false);
		if (it->partition == NULL)
			it->partition = "Default";
		check_item_name(what, "queue", it->queue);
		check_item_name(what, "partition", it->partition);
		qs_uuid7(&it->id);
		qs_push_item_txn(it, o, what);
		it->has_trace = qs_json_uuid(o, "traceId", what, false, &it->trace);
		if (qs_json_get(o, "payload", &pv) || qs_json_get(o, "data", &pv))
			it->payload = qs_json_text(&pv, &it->payload_len);
		else
			it->payload = "";
		if (psub)
		{
			it->psub = psub;
			it->psub_len = strlen(psub);
		}
	}

	qsj_init(&j);
	qs_spi_connect();
	groups = qs_push_items(&tenant, items, n, true, &ng);
	qs_spi_finish();

	qsj_array(&j, NULL);
	for (int i = 0; i < n; i++)
	{
		qsj_object(&j, NULL);
		qsj_int(&j, "index", i);
		qsj_uuid(&j, "message_id", &items[i].result_id);
		qsj_strn(&j, "transaction_id", items[i].txn, items[i].txn_len);
		qsj_uuid(&j, "partition_id", &groups[items[i].group].part.pid);
		if (items[i].has_trace)
			qsj_uuid(&j, "trace_id", &items[i].trace);
		else
			qsj_null(&j, "trace_id");
		qsj_str(&j, "queueName", items[i].queue);
		qsj_str(&j, "status", items[i].status == QS_PUSH_QUEUED ? "queued" : "duplicate");
		qsj_end_object(&j);
	}
	qsj_end_array(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
