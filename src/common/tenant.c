/*
 * tenant.c: the request tenant. A NULL tenant argument is the default tenant.
 */
#include "common/ids.h"

const pg_uuid_t qs_default_tenant = {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};

void
qs_tenant_arg(FunctionCallInfo fcinfo, int argno, pg_uuid_t *out)
{
	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		*out = qs_default_tenant;
	else
		*out = *PG_GETARG_UUID_P(argno);
}

Datum
qs_uuid_datum(const pg_uuid_t *u)
{
	pg_uuid_t  *copy = palloc(sizeof(pg_uuid_t));

	*copy = *u;
	return UUIDPGetDatum(copy);
}
