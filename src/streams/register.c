/*
 * register.c: queen_streams.register_query (POST /streams/v1/queries).
 *
 * Registration is idempotent on (tenant, name). A new name passes the
 * tenant's quota gate; an existing name always re-registers: with the same
 * config_hash its accumulators are kept, with a different one it is a 409
 * unless `reset` wipes its state first.
 */
#include "streams/streams.h"
#include "common/ids.h"
#include "common/spi.h"

#include "catalog/pg_type_d.h"
#include "utils/builtins.h"

static QsPlan find_plan = {
	"SELECT id, config_hash FROM queen_streams.queries"
	" WHERE tenant_id = $1 AND name = $2 FOR UPDATE",
	2, {UUIDOID, TEXTOID}
};

/*
 * The quota row lock serialises a tenant's new registrations; the count is a
 * statement of its own, so it sees every registration committed before the
 * lock was granted and the cap is exact.
 */
static QsPlan quota_plan = {
	"SELECT enabled, max_queries FROM queen_streams.quota WHERE tenant_id = $1 FOR UPDATE",
	1, {UUIDOID}
};

static QsPlan count_plan = {
	"SELECT count(*) FROM queen_streams.queries WHERE tenant_id = $1",
	1, {UUIDOID}
};

static QsPlan insert_plan = {
	"INSERT INTO queen_streams.queries (id, tenant_id, name, source_queue, sink_queue, config_hash)"
	" VALUES ($1, $2, $3, $4, $5, $6)"
	" ON CONFLICT (tenant_id, name) DO NOTHING RETURNING id",
	6, {UUIDOID, UUIDOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID}
};

static QsPlan update_plan = {
	"UPDATE queen_streams.queries"
	"   SET source_queue = $2, sink_queue = $3, config_hash = $4, updated_at = now()"
	" WHERE id = $1",
	4, {UUIDOID, TEXTOID, TEXTOID, TEXTOID}
};

static QsPlan wipe_plan = {
	"DELETE FROM queen_streams.state WHERE query_id = $1",
	1, {UUIDOID}
};

/* name, source_queue and config_hash: a non-empty string, else "<key> is required". */
static char *
required_string(JsonbContainer *obj, const char *key)
{
	JsonbValue	v;

	if (!qs_json_get(obj, key, &v) || v.type != jbvString || v.val.string.len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is required", key)));
	return pnstrdup(v.val.string.val, v.val.string.len);
}

PG_FUNCTION_INFO_V1(qs_register_query);
Datum
qs_register_query(PG_FUNCTION_ARGS)
{
	JsonbContainer *obj;
	pg_uuid_t	tenant;
	char	   *name,
			   *source,
			   *sink,
			   *hash;
	bool		reset;
	bool		fresh = false;
	bool		did_reset = false;
	char	   *denied = NULL;
	bool		mismatch = false;
	pg_uuid_t	id;
	Datum		args[6];
	char		nulls[6] = "      ";
	QsJson		j;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("request body must be a JSON object")));
	obj = qs_json_object_arg(PG_GETARG_JSONB_P(0), "request body");
	qs_tenant_arg(fcinfo, 1, &tenant);
	name = required_string(obj, "name");
	source = required_string(obj, "source_queue");
	hash = required_string(obj, "config_hash");
	sink = qs_json_string(obj, "sink_queue", "request", false);
	if (sink && sink[0] == '\0')
		sink = NULL;			/* an empty sink is stored as null */
	reset = qs_json_bool(obj, "reset", "request", false);

	qsj_init(&j);
	qs_spi_connect();
	for (;;)
	{
		bool		isnull;

		args[0] = qs_uuid_datum(&tenant);
		args[1] = CStringGetTextDatum(name);
		qs_exec(&find_plan, args, NULL, 1);
		if (SPI_processed == 1)
		{
			char	   *stored = TextDatumGetCString(qs_col(0, 2, &isnull));

			id = *DatumGetUUIDP(qs_col(0, 1, &isnull));
			mismatch = strcmp(stored, hash) != 0;
			if (mismatch && !reset)
				break;
			args[0] = qs_uuid_datum(&id);
			if (reset)
			{
				qs_exec(&wipe_plan, args, NULL, 0);
				did_reset = true;
			}
			args[1] = CStringGetTextDatum(source);
			args[2] = sink ? CStringGetTextDatum(sink) : (Datum) 0;
			nulls[2] = sink ? ' ' : 'n';
			args[3] = CStringGetTextDatum(hash);
			qs_exec(&update_plan, args, nulls, 0);
			mismatch = false;
			break;
		}

		/* A new name: the tenant gate (the default tenant is never gated). */
		if (memcmp(&tenant, &qs_default_tenant, sizeof(pg_uuid_t)) != 0)
		{
			bool		granted;
			int64		max;

			qs_exec(&quota_plan, args, NULL, 1);
			granted = SPI_processed == 1 && qs_col_bool(0, 1, false);
			max = SPI_processed == 1 ? qs_col_int64(0, 2, -1) : -1;

			/*
			 * The quota lock may have waited for a registration of this very
			 * name: if it is there now, this is a re-registration, which the
			 * gate never applies to.
			 */
			qs_exec(&find_plan, args, NULL, 1);
			if (SPI_processed == 1)
				continue;
			if (!granted)
			{
				denied = "streams not granted for this tenant";
				break;
			}
			if (max >= 0)
			{
				qs_exec(&count_plan, args, NULL, 1);
				if (qs_col_int64(0, 1, 0) >= max)
				{
					denied = psprintf("streams query quota exceeded (max " INT64_FORMAT ")", max);
					break;
				}
			}
		}

		qs_uuid7(&id);
		args[0] = qs_uuid_datum(&id);
		args[1] = qs_uuid_datum(&tenant);
		args[2] = CStringGetTextDatum(name);
		args[3] = CStringGetTextDatum(source);
		args[4] = sink ? CStringGetTextDatum(sink) : (Datum) 0;
		nulls[4] = sink ? ' ' : 'n';
		args[5] = CStringGetTextDatum(hash);
		qs_exec(&insert_plan, args, nulls, 1);
		if (SPI_processed == 1)
		{
			fresh = true;
			break;
		}
		/* A concurrent registration of this name won: re-register against it. */
		memset(nulls, ' ', sizeof(nulls));
	}
	qs_spi_finish();

	qsj_object(&j, NULL);
	if (denied)
	{
		qsj_bool(&j, "success", false);
		qsj_bool(&j, "denied", true);
		qsj_str(&j, "error", denied);
	}
	else if (mismatch)
	{
		qsj_bool(&j, "success", false);
		qsj_uuid(&j, "query_id", &id);
		qsj_str(&j, "name", name);
		qsj_str(&j, "error",
				psprintf("config_hash mismatch: operator chain changed for queryId '%s'. "
						 "Pass reset:true to wipe existing state, or use a new queryId.", name));
	}
	else
	{
		qsj_bool(&j, "success", true);
		qsj_uuid(&j, "query_id", &id);
		qsj_str(&j, "name", name);
		qsj_str(&j, "config_hash", hash);
		qsj_bool(&j, "fresh", fresh);
		qsj_bool(&j, "reset", did_reset);
	}
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}

static QsPlan lookup_plan = {
	"SELECT q.id, EXISTS (SELECT 1 FROM queen_streams.declared_streams d WHERE d.query_id = q.id)"
	"  FROM queen_streams.queries q WHERE q.tenant_id = $1 AND q.name = $2 FOR UPDATE OF q",
	2, {UUIDOID, TEXTOID}
};

static QsPlan delete_plan = {
	"DELETE FROM queen_streams.queries WHERE id = $1", 1, {UUIDOID}
};

/*
 * queen_streams.drop_query(name, tenant): forget a registered query and its
 * state (the state rows go by the foreign key's cascade). The consumer
 * group that read its source is the client's own, named by the client, so
 * its cursors stay (DELETE /api/v1/consumer-groups/:group removes them); a
 * declared stream is dropped with drop_stream, which knows its group.
 */
PG_FUNCTION_INFO_V1(qs_drop_query);
Datum
qs_drop_query(PG_FUNCTION_ARGS)
{
	char	   *name;
	pg_uuid_t	tenant;
	pg_uuid_t	id;
	Datum		args[2];
	bool		isnull;
	QsJson		j;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("query name must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	qs_tenant_arg(fcinfo, 1, &tenant);

	qs_spi_connect();
	args[0] = qs_uuid_datum(&tenant);
	args[1] = CStringGetTextDatum(name);
	qs_exec(&lookup_plan, args, NULL, 1);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("query \"%s\" does not exist", name)));
	id = *DatumGetUUIDP(qs_col(0, 1, &isnull));
	if (qs_col_bool(0, 2, false))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("query \"%s\" is a declared stream", name),
				 errhint("Drop it with queen_streams.drop_stream, which also removes its consumer group's cursors.")));
	args[0] = qs_uuid_datum(&id);
	qs_exec(&delete_plan, args, NULL, 0);
	qs_spi_finish();

	qsj_init(&j);
	qsj_object(&j, NULL);
	qsj_bool(&j, "success", true);
	qsj_str(&j, "name", name);
	qsj_uuid(&j, "query_id", &id);
	qsj_bool(&j, "dropped", true);
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
