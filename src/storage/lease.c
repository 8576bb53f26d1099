/*
 * lease.c: queen.renew_lease (POST /api/v1/lease/:leaseId/extend).
 * Extends every live lease of a worker under the tenant, never shortening one.
 */
#include "storage/storage.h"
#include "common/ids.h"
#include "common/spi.h"

#include "catalog/pg_type_d.h"
#include "utils/builtins.h"

static QsPlan renew_plan = {
	"UPDATE queen.log_consumers c"
	"   SET lease_expires_at = GREATEST(c.lease_expires_at,"
	"                                   clock_timestamp() + make_interval(secs => $2))"
	"  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
	" WHERE c.partition_id = p.id AND q.tenant_id = $3"
	"   AND c.worker_id = $1 AND c.lease_expires_at >= clock_timestamp()"
	" RETURNING c.lease_expires_at",
	3, {TEXTOID, INT4OID, UUIDOID}
};

PG_FUNCTION_INFO_V1(qs_renew_lease);
Datum
qs_renew_lease(PG_FUNCTION_ARGS)
{
	char	   *lease;
	int32		seconds = PG_ARGISNULL(1) ? 60 : PG_GETARG_INT32(1);
	pg_uuid_t	tenant;
	Datum		args[3];
	uint64		renewed;
	TimestampTz expires = 0;
	QsJson		j;

	if (PG_ARGISNULL(0) || VARSIZE_ANY_EXHDR(PG_GETARG_TEXT_PP(0)) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease id is required")));
	if (seconds < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("seconds must be a positive integer"),
				 errdetail("Got %d.", seconds)));
	lease = text_to_cstring(PG_GETARG_TEXT_PP(0));
	qs_tenant_arg(fcinfo, 2, &tenant);

	qsj_init(&j);
	qs_spi_connect();
	args[0] = CStringGetTextDatum(lease);
	args[1] = Int32GetDatum(seconds);
	args[2] = qs_uuid_datum(&tenant);
	qs_exec(&renew_plan, args, NULL, 0);
	renewed = SPI_processed;
	for (uint64 r = 0; r < renewed; r++)
	{
		bool		isnull;
		TimestampTz t = DatumGetTimestampTz(qs_col(r, 1, &isnull));

		/* the earliest deadline is when the caller must renew again */
		expires = (r == 0) ? t : Min(expires, t);
	}
	qs_spi_finish();

	qsj_object(&j, NULL);
	qsj_str(&j, "leaseId", lease);
	qsj_bool(&j, "success", renewed > 0);
	qsj_int(&j, "renewed", (int64) renewed);
	if (renewed > 0)
	{
		qsj_time(&j, "newExpiresAt", expires);
		qsj_time(&j, "expiresAt", expires);
		qsj_time(&j, "lease_expires_at", expires);
	}
	else
	{
		qsj_null(&j, "newExpiresAt");
		qsj_null(&j, "expiresAt");
		qsj_null(&j, "lease_expires_at");
	}
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
