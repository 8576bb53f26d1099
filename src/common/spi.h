/*
 * spi.h: spi_plan.c and subxact.c: kept SPI plans, internal subtransactions.
 */
#ifndef QS_SPI_H
#define QS_SPI_H

#include "common/base.h"

#include "executor/spi.h"

/* spi_plan.c: statements prepared once per backend and kept */
#define QS_MAX_PLAN_ARGS 20
typedef struct QsPlan
{
	const char *sql;
	int			nargs;
	Oid			argtypes[QS_MAX_PLAN_ARGS];
	SPIPlanPtr	plan;
	bool		generic;		/* always the generic plan (.generic = true) */
} QsPlan;

extern int	qs_exec(QsPlan *p, Datum *values, const char *nulls, long tcount);
extern Portal qs_cursor(QsPlan *p, Datum *values, const char *nulls);
extern Datum qs_col(int row, int col, bool *isnull);
extern int64 qs_col_int64(int row, int col, int64 ifnull);
extern bool qs_col_bool(int row, int col, bool ifnull);
extern void qs_spi_connect(void);
extern void qs_spi_finish(void);

/*
 * subxact.c: run work (connected to SPI) in an internal subtransaction; it
 * returns true to keep what it did, false to roll it back. The answer is
 * NULL, or the words of the error that rolled it back, logged under `what`
 * (e.g. "queen.transaction"); an error that is not a verdict on the work
 * (a deadlock, a timeout, an internal error) is raised again.
 */
typedef bool (*QsSubxactWork) (void *arg);
extern const char *qs_subxact_run(QsSubxactWork work, void *arg, const char *what);
extern const char *qs_subxact_run_also(QsSubxactWork work, void *arg, const char *what,
									   int also_verdict);
/* in a PG_CATCH that drops its error: log it (LOG, its SQLSTATE) after `why` */
extern void qs_log_dropped_error(const char *why);
extern void qs_log_dropped_error_at(int elevel, const char *why);

#endif							/* QS_SPI_H */
