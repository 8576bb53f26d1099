/*
 * declare.c: queen_streams.create_stream, alter_stream, drop_stream,
 * pause_stream and resume_stream.
 *
 * A declared stream is registered through queen_streams.register_query,
 * the function behind POST /streams/v1/queries, with the definition's hash
 * as its config_hash: a name an SDK worker registered with the same hash is
 * adopted with its open windows; another hash is the 409 of that route,
 * here SQLSTATE 55000, and `reset` (alter_stream's argument, or "reset":
 * true in create_stream's definition) is its documented fix.
 */
#include "streams/streams.h"
#include "common/args.h"
#include "common/ids.h"
#include "common/spi.h"
#include "common/text.h"

#include "catalog/pg_type_d.h"
#include "utils/builtins.h"

static QsPlan register_plan = {
	"SELECT queen_streams.register_query($1, $2)", 2, {JSONBOID, UUIDOID}
};

static QsPlan find_plan = {
	"SELECT query_id FROM queen_streams.declared_streams"
	" WHERE tenant_id = $1 AND name = $2 FOR UPDATE",
	2, {UUIDOID, TEXTOID}
};

static QsPlan insert_plan = {
	"INSERT INTO queen_streams.declared_streams (query_id, tenant_id, name, definition, config_hash)"
	" VALUES ($1, $2, $3, $4, $5)",
	5, {UUIDOID, UUIDOID, TEXTOID, JSONBOID, TEXTOID}
};

static QsPlan update_plan = {
	"UPDATE queen_streams.declared_streams"
	"   SET definition = $2, config_hash = $3, updated_at = now() WHERE query_id = $1",
	3, {UUIDOID, JSONBOID, TEXTOID}
};

static QsPlan paused_plan = {
	"UPDATE queen_streams.declared_streams SET paused = $2, updated_at = now()"
	" WHERE query_id = $1",
	2, {UUIDOID, BOOLOID}
};

static QsPlan drop_query_plan = {
	"DELETE FROM queen_streams.queries WHERE id = $1", 1, {UUIDOID}
};

static QsPlan source_plan = {
	"SELECT 1 FROM queen.queues WHERE tenant_id = $1 AND name = $2",
	2, {UUIDOID, TEXTOID}
};

static QsPlan definition_plan = {
	"SELECT definition FROM queen_streams.declared_streams WHERE query_id = $1",
	1, {UUIDOID}
};

/* the group's cursors and subscription, on its source queue only */
static QsPlan drop_group_plan = {
	"SELECT queen.delete_consumer_group($1, $2, true, $3)"
	"  FROM queen.queues WHERE tenant_id = $3 AND name = $2",
	3, {TEXTOID, TEXTOID, UUIDOID}
};

static char *
stream_name(FunctionCallInfo fcinfo)
{
	char	   *name = qs_text_arg(fcinfo, 0);

	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a stream name is required")));
	if (qs_text_problem(name, strlen(name), QS_NAME_MAX - 8))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid stream name"),
				 errdetail("A stream name is 1 to %d bytes of text.", QS_NAME_MAX - 8)));
	return name;
}

/* The declared stream's query id, its row locked; 42704 when there is none. */
static pg_uuid_t
find_stream(const pg_uuid_t *tenant, const char *name)
{
	Datum		args[2];
	bool		isnull;

	args[0] = qs_uuid_datum(tenant);
	args[1] = CStringGetTextDatum(name);
	qs_exec(&find_plan, args, NULL, 1);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("stream \"%s\" does not exist", name)));
	return *DatumGetUUIDP(qs_col(0, 1, &isnull));
}

/* register_query for the definition; raises what its body reports */
static pg_uuid_t
register_stream(const pg_uuid_t *tenant, const char *name, const QsStreamDef *d,
				const char *hash, bool reset, bool *fresh)
{
	QsJson		j;
	Datum		args[2];
	bool		isnull;
	Jsonb	   *res;
	JsonbContainer *r;
	pg_uuid_t	id;

	qsj_init(&j);
	qsj_object(&j, NULL);
	qsj_str(&j, "name", name);
	qsj_str(&j, "source_queue", d->source);
	qsj_str(&j, "sink_queue", d->sink);
	qsj_str(&j, "config_hash", hash);
	qsj_bool(&j, "reset", reset);
	qsj_end_object(&j);
	args[0] = JsonbPGetDatum(qsj_jsonb(&j));
	args[1] = qs_uuid_datum(tenant);
	qs_exec(&register_plan, args, NULL, 1);
	res = DatumGetJsonbP(qs_col(0, 1, &isnull));
	r = &res->root;
	if (!qs_json_bool(r, "success", "registration", false))
	{
		char	   *error = qs_json_string(r, "error", "registration", false);

		if (qs_json_bool(r, "denied", "registration", false))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("the tenant may not register stream \"%s\"", name),
					 errdetail("The registration answered: %s.", error ? error : "denied")));
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("query \"%s\" is registered with another definition", name),
				 errdetail("%s", error ? error : "The config_hash differs."),
				 errhint("Pass reset => true to alter_stream (or \"reset\": true in create_stream's "
						 "definition) to drop its open windows and register the new definition.")));
	}
	qs_json_uuid(r, "query_id", "registration", true, &id);
	*fresh = qs_json_bool(r, "fresh", "registration", false);
	return id;
}

static Jsonb *
answer(const char *name, const pg_uuid_t *id, const char *hash, bool paused, Jsonb *def,
	   const char *extra_key, bool extra)
{
	QsJson		j;
	char	   *deftext = def ? JsonbToCString(NULL, &def->root, VARSIZE(def)) : NULL;

	qsj_init(&j);
	qsj_object(&j, NULL);
	qsj_bool(&j, "success", true);
	qsj_str(&j, "name", name);
	qsj_uuid(&j, "query_id", id);
	if (hash)
		qsj_str(&j, "config_hash", hash);
	qsj_bool(&j, "paused", paused);
	if (extra_key)
		qsj_bool(&j, extra_key, extra);
	if (deftext)
		qsj_raw(&j, "definition", deftext, strlen(deftext));
	qsj_end_object(&j);
	return qsj_jsonb(&j);
}

static Jsonb *
definition_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid stream definition field \"definition\""),
				 errdetail("The definition must be a JSON object.")));
	return PG_GETARG_JSONB_P(argno);
}

PG_FUNCTION_INFO_V1(qs_create_stream);
Datum
qs_create_stream(PG_FUNCTION_ARGS)
{
	char	   *name = stream_name(fcinfo);
	Jsonb	   *def = definition_arg(fcinfo, 1);
	pg_uuid_t	tenant;
	QsStreamDef d;
	Jsonb	   *norm;
	char	   *hash;
	pg_uuid_t	id;
	bool		fresh;
	Datum		args[5];
	Jsonb	   *res;

	qs_tenant_arg(fcinfo, 2, &tenant);
	qs_def_parse(def, name, &d);
	norm = qs_def_normalized(&d);
	hash = qs_def_hash(&d);

	qs_spi_connect();
	args[0] = qs_uuid_datum(&tenant);
	args[1] = CStringGetTextDatum(name);
	qs_exec(&find_plan, args, NULL, 1);
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("stream \"%s\" already exists", name),
				 errhint("Use queen_streams.alter_stream to change its definition.")));
	id = register_stream(&tenant, name, &d, hash, d.reset, &fresh);
	args[0] = qs_uuid_datum(&id);
	args[1] = qs_uuid_datum(&tenant);
	args[2] = CStringGetTextDatum(name);
	args[3] = JsonbPGetDatum(norm);
	args[4] = CStringGetTextDatum(hash);
	qs_exec(&insert_plan, args, NULL, 0);
	/* declaring before the first push is fine: the queue appears with it */
	args[0] = qs_uuid_datum(&tenant);
	args[1] = CStringGetTextDatum(d.source);
	qs_exec(&source_plan, args, NULL, 1);
	if (SPI_processed == 0)
		ereport(NOTICE,
				(errmsg("source queue \"%s\" does not exist yet", d.source),
				 errdetail("The stream starts folding when the first message is pushed to it.")));
	qs_spi_finish();

	res = answer(name, &id, hash, false, norm, "fresh", fresh);
	qs_stream_set_active(true);
	qs_streams_wake();
	PG_RETURN_JSONB_P(res);
}

PG_FUNCTION_INFO_V1(qs_alter_stream);
Datum
qs_alter_stream(PG_FUNCTION_ARGS)
{
	char	   *name = stream_name(fcinfo);
	Jsonb	   *def = definition_arg(fcinfo, 1);
	bool		reset = PG_ARGISNULL(2) ? false : PG_GETARG_BOOL(2);
	pg_uuid_t	tenant;
	QsStreamDef d;
	Jsonb	   *norm;
	char	   *hash;
	pg_uuid_t	id;
	bool		fresh;
	Datum		args[3];

	qs_tenant_arg(fcinfo, 3, &tenant);
	qs_def_parse(def, name, &d);
	if (d.reset)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid stream definition field \"reset\""),
				 errdetail("alter_stream takes reset as its own argument.")));
	norm = qs_def_normalized(&d);
	hash = qs_def_hash(&d);

	qs_spi_connect();
	id = find_stream(&tenant, name);
	(void) register_stream(&tenant, name, &d, hash, reset, &fresh);
	args[0] = qs_uuid_datum(&id);
	args[1] = JsonbPGetDatum(norm);
	args[2] = CStringGetTextDatum(hash);
	qs_exec(&update_plan, args, NULL, 0);
	qs_spi_finish();
	qs_streams_wake();
	PG_RETURN_JSONB_P(answer(name, &id, hash, false, norm, "reset", reset));
}

PG_FUNCTION_INFO_V1(qs_drop_stream);
Datum
qs_drop_stream(PG_FUNCTION_ARGS)
{
	char	   *name = stream_name(fcinfo);
	pg_uuid_t	tenant;
	pg_uuid_t	id;
	Datum		args[3];
	bool		isnull;
	Jsonb	   *def;

	qs_tenant_arg(fcinfo, 1, &tenant);
	qs_spi_connect();
	id = find_stream(&tenant, name);
	args[0] = qs_uuid_datum(&id);
	qs_exec(&definition_plan, args, NULL, 1);
	def = DatumGetJsonbP(qs_col(0, 1, &isnull));
	args[0] = CStringGetTextDatum(qs_json_string(&def->root, "consumer_group", "definition", true));
	args[1] = CStringGetTextDatum(qs_json_string(&def->root, "source", "definition", true));
	args[2] = qs_uuid_datum(&tenant);
	qs_exec(&drop_group_plan, args, NULL, 0);
	/* the declared row, its stats and the state go with the query */
	args[0] = qs_uuid_datum(&id);
	qs_exec(&drop_query_plan, args, NULL, 0);
	qs_spi_finish();
	PG_RETURN_JSONB_P(answer(name, &id, NULL, false, NULL, "dropped", true));
}

static Datum
set_paused(FunctionCallInfo fcinfo, bool paused)
{
	char	   *name = stream_name(fcinfo);
	pg_uuid_t	tenant;
	pg_uuid_t	id;
	Datum		args[2];

	qs_tenant_arg(fcinfo, 1, &tenant);
	qs_spi_connect();
	id = find_stream(&tenant, name);
	args[0] = qs_uuid_datum(&id);
	args[1] = BoolGetDatum(paused);
	qs_exec(&paused_plan, args, NULL, 0);
	qs_spi_finish();
	if (!paused)
		qs_streams_wake();
	PG_RETURN_JSONB_P(answer(name, &id, NULL, paused, NULL, NULL, false));
}

PG_FUNCTION_INFO_V1(qs_pause_stream);
Datum
qs_pause_stream(PG_FUNCTION_ARGS)
{
	return set_paused(fcinfo, true);
}

PG_FUNCTION_INFO_V1(qs_resume_stream);
Datum
qs_resume_stream(PG_FUNCTION_ARGS)
{
	return set_paused(fcinfo, false);
}
