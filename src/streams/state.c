/*
 * state.c: queen_streams.state_get (POST /streams/v1/state/get).
 *
 * Reads one query's state shard for one source partition, filtered by exact
 * keys, a literal key prefix and ripeness (value.windowEnd a JSON number at
 * or before a bound), ANDed, ordered by key. A query of another tenant reads
 * exactly like an unknown one: empty rows.
 *
 * A ripe read (the idle flush's) first takes the shard lock the cycle takes
 * and notes its time: a row a cycle writes after it carries a later
 * updated_at, which is how the cycle tells that a flush's deletes were
 * written after the flush read them (cycle.c, README: stale cycles).
 *
 * One plan per combination of filters, so each is planned for what it uses:
 * the prefix becomes a range on the primary key (keys are COLLATE "C").
 */
#include "streams/streams.h"
#include "common/ids.h"
#include "common/spi.h"

#include "catalog/pg_type_d.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#define F_KEYS		1
#define F_PREFIX	2
#define F_UPPER		4			/* the prefix has a finite upper bound */
#define F_RIPE		8

/* the query is the caller's (args: query id, partition id, tenant) */
static QsPlan owned_plan = {
	"SELECT 1 FROM queen_streams.queries WHERE id = $1 AND tenant_id = $3",
	3, {UUIDOID, UUIDOID, UUIDOID}
};

static QsPlan plans[16];

static QsPlan *
state_plan(int mask)
{
	QsPlan	   *p = &plans[mask];

	if (p->sql == NULL)
	{
		StringInfoData sql;

		initStringInfo(&sql);
		appendStringInfoString(&sql,
							   "SELECT jsonb_build_object('success', true, 'rows',"
							   "  COALESCE(jsonb_agg(jsonb_build_object("
							   "    'key', s.key, 'value', s.value, 'updated_at', s.updated_at)"
							   "    ORDER BY s.key), '[]'::jsonb))"
							   "  FROM queen_streams.state s"
							   " WHERE s.query_id = $1 AND s.partition_id = $2"
							   "   AND EXISTS (SELECT 1 FROM queen_streams.queries q"
							   "                WHERE q.id = $1 AND q.tenant_id = $3)");
		if (mask & F_KEYS)
			appendStringInfoString(&sql, " AND s.key = ANY ($4)");
		if (mask & F_PREFIX)
			appendStringInfoString(&sql, " AND s.key >= $5");
		if (mask & F_UPPER)
			appendStringInfoString(&sql, " AND s.key < $6");
		if (mask & F_RIPE)
			appendStringInfoString(&sql,
								   " AND CASE WHEN jsonb_typeof(s.value -> 'windowEnd') = 'number'"
								   "          THEN (s.value -> 'windowEnd')::numeric <= $7"
								   "          ELSE false END");
		p->nargs = 7;
		p->argtypes[0] = UUIDOID;
		p->argtypes[1] = UUIDOID;
		p->argtypes[2] = UUIDOID;
		p->argtypes[3] = TEXTARRAYOID;
		p->argtypes[4] = TEXTOID;
		p->argtypes[5] = TEXTOID;
		p->argtypes[6] = NUMERICOID;
		p->sql = MemoryContextStrdup(TopMemoryContext, sql.data);
		pfree(sql.data);
	}
	return p;
}

/* keys: absent, null and [] all mean no filter. */
static ArrayType *
keys_filter(JsonbContainer *obj)
{
	JsonbContainer *arr = qs_json_array(obj, "keys", "state request");
	int			n;
	Datum	   *elems;

	if (arr == NULL || JsonContainerSize(arr) == 0)
		return NULL;
	n = JsonContainerSize(arr);
	elems = palloc(sizeof(Datum) * n);
	for (int i = 0; i < n; i++)
	{
		JsonbValue *v = getIthJsonbValueFromContainer(arr, i);

		if (v->type != jbvString)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("state request: \"keys\" must be an array of strings")));
		elems[i] = PointerGetDatum(cstring_to_text_with_len(v->val.string.val, v->val.string.len));
	}
	return construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT);
}

/*
 * The smallest string greater than every string starting with `prefix`
 * (bytewise): the prefix with its last byte incremented. NULL if none.
 */
static char *
prefix_upper(const char *prefix)
{
	int			len = strlen(prefix);
	char	   *up = pstrdup(prefix);

	while (len > 0 && (unsigned char) up[len - 1] == 0xFF)
		len--;
	if (len == 0)
		return NULL;
	up[len - 1] = (char) ((unsigned char) up[len - 1] + 1);
	up[len] = '\0';
	return up;
}

PG_FUNCTION_INFO_V1(qs_state_get);
Datum
qs_state_get(PG_FUNCTION_ARGS)
{
	JsonbContainer *obj;
	pg_uuid_t	tenant,
				qid,
				pid;
	ArrayType  *keys;
	char	   *prefix;
	char	   *upper = NULL;
	JsonbValue	ripe;
	bool		has_ripe;
	int			mask = 0;
	Datum		args[7];
	char		nulls[7] = "   nnnn";
	bool		isnull;
	Jsonb	   *result;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("request body must be a JSON object")));
	obj = qs_json_object_arg(PG_GETARG_JSONB_P(0), "request body");
	qs_tenant_arg(fcinfo, 1, &tenant);
	if (!qs_json_uuid(obj, "query_id", "state request", false, &qid))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("query_id is required")));
	if (!qs_json_uuid(obj, "partition_id", "state request", false, &pid))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("partition_id is required")));

	keys = keys_filter(obj);
	prefix = qs_json_string(obj, "key_prefix", "state request", false);
	if (prefix && prefix[0] == '\0')
		prefix = NULL;			/* an empty prefix is treated as absent */
	has_ripe = qs_json_get(obj, "ripe_at_or_before", &ripe);
	if (has_ripe && ripe.type != jbvNumeric)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("state request: \"ripe_at_or_before\" must be a number")));

	args[0] = qs_uuid_datum(&qid);
	args[1] = qs_uuid_datum(&pid);
	args[2] = qs_uuid_datum(&tenant);
	if (keys)
	{
		mask |= F_KEYS;
		args[3] = PointerGetDatum(keys);
		nulls[3] = ' ';
	}
	if (prefix)
	{
		mask |= F_PREFIX;
		args[4] = CStringGetTextDatum(prefix);
		nulls[4] = ' ';
		upper = prefix_upper(prefix);
		if (upper)
		{
			mask |= F_UPPER;
			args[5] = CStringGetTextDatum(upper);
			nulls[5] = ' ';
		}
	}
	if (has_ripe)
	{
		mask |= F_RIPE;
		args[6] = NumericGetDatum(ripe.val.numeric);
		nulls[6] = ' ';
	}

	qs_spi_connect();
	/*
	 * A ripe read (an idle flush's) is noted for the stale-cycle rule, under
	 * the shard lock; only for the caller's own query, so another tenant can
	 * neither hold the lock nor move the note (nor fill the note table).
	 */
	if (has_ripe)
	{
		qs_exec(&owned_plan, args, NULL, 1);
		if (SPI_processed == 1)
		{
			qs_cycle_shard_lock(&qid, &pid);
			qs_ripe_read_note(&qid, &pid, GetCurrentTimestamp());
		}
	}
	qs_exec(state_plan(mask), args, nulls, 1);
	result = DatumGetJsonbPCopy(qs_col(0, 1, &isnull));
	/* copy out of SPI memory before it goes away */
	result = (Jsonb *) SPI_datumTransfer(PointerGetDatum(result), false, -1);
	qs_spi_finish();
	PG_RETURN_JSONB_P(result);
}
