/*
 * spi_plan.c: statements prepared once per backend (SPI_keepplan) and run
 * with parameters. Plans revalidate themselves after DDL, so a dropped and
 * re-created extension keeps working in the same backend.
 *
 * A plan marked generic skips the plan cache's custom plans: a range or a
 * LIMIT given as a parameter makes the generic plan look dearer than it is,
 * so without the mark such a statement is planned again at every call.
 */
#include "common/spi.h"
#include "common/workers.h"

static SPIPlanPtr
qs_plan(QsPlan *p)
{
	if (p->plan == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare_cursor(p->sql, p->nargs, p->argtypes,
											  p->generic ? CURSOR_OPT_GENERIC_PLAN : 0);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed (%s) for: %s",
				 SPI_result_code_string(SPI_result), p->sql);
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		p->plan = plan;
	}
	return p->plan;
}

int
qs_exec(QsPlan *p, Datum *values, const char *nulls, long tcount)
{
	int			rc = SPI_execute_plan(qs_plan(p), values, nulls, false, tcount);

	if (rc < 0)
		elog(ERROR, "SPI_execute_plan failed (%s) for: %s",
			 SPI_result_code_string(rc), p->sql);
	return rc;
}

/*
 * The statement as a cursor, for results read in chunks (SPI_cursor_fetch,
 * then SPI_freetuptable): memory bounded by a chunk, not by the result.
 * It sees what qs_exec would (a new snapshot after this command's writes).
 */
Portal
qs_cursor(QsPlan *p, Datum *values, const char *nulls)
{
	Portal		portal = SPI_cursor_open(NULL, qs_plan(p), values, nulls, false);

	if (portal == NULL)
		elog(ERROR, "SPI_cursor_open failed (%s) for: %s",
			 SPI_result_code_string(SPI_result), p->sql);
	return portal;
}

Datum
qs_col(int row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);
}

int64
qs_col_int64(int row, int col, int64 ifnull)
{
	bool		isnull;
	Datum		d = qs_col(row, col, &isnull);

	return isnull ? ifnull : DatumGetInt64(d);
}

bool
qs_col_bool(int row, int col, bool ifnull)
{
	bool		isnull;
	Datum		d = qs_col(row, col, &isnull);

	return isnull ? ifnull : DatumGetBool(d);
}

void
qs_spi_connect(void)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
}

void
qs_spi_finish(void)
{
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed");
}
