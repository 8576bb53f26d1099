/*
 * args.c: reading a SQL function's arguments with precise errors. Route
 * functions take text from URLs and bodies; an empty string means absent,
 * as an empty query parameter does over HTTP.
 */
#include "common/args.h"

#include "utils/builtins.h"
#include "utils/datetime.h"

/* A text argument as a C string; NULL for SQL NULL or an empty string. */
char *
qs_text_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_NARGS() <= argno || PG_ARGISNULL(argno) ||
		VARSIZE_ANY_EXHDR(PG_GETARG_TEXT_PP(argno)) == 0)
		return NULL;
	return text_to_cstring(PG_GETARG_TEXT_PP(argno));
}

/* The same, refused with 22023 "<what> is required" when absent. */
char *
qs_required_text_arg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	char	   *s = qs_text_arg(fcinfo, argno);

	if (s == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is required", what)));
	return s;
}

/*
 * The limit and offset of every paged read (the admin listings, dead
 * letters, traces): one rule, so each answers the same 400.
 */
void
qs_page_args(FunctionCallInfo fcinfo, int limno, int offno, int dflt, int *lim, int *off)
{
	*lim = PG_NARGS() <= limno || PG_ARGISNULL(limno) ? dflt : PG_GETARG_INT32(limno);
	*off = PG_NARGS() <= offno || PG_ARGISNULL(offno) ? 0 : PG_GETARG_INT32(offno);
	if (*lim < 0 || *lim > QS_PAGE_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("limit must be from 0 to %d", QS_PAGE_MAX),
				 errdetail("Got %d.", *lim)));
	if (*off < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("offset must not be negative"),
				 errdetail("Got %d.", *off)));
}

/* A timestamptz from text, refused with 22023 instead of a cast error. */
TimestampTz
qs_parse_timestamp(const char *s, const char *what)
{
	char		workbuf[MAXDATELEN + MAXDATEFIELDS];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf,
				dtype,
				tz = 0,
				dterr;
	struct pg_tm tm;
	fsec_t		fsec;
	TimestampTz ts = 0;

	dterr = ParseDateTime(s, workbuf, sizeof(workbuf), field, ftype, MAXDATEFIELDS, &nf);
	if (dterr == 0)
		dterr = DecodeDateTime(field, ftype, nf, &dtype, &tm, &fsec, &tz);
	if (dterr == 0 && dtype == DTK_DATE && tm2timestamp(&tm, fsec, &tz, &ts) != 0)
		dterr = 1;
	if (dterr == 0 && dtype == DTK_EPOCH)
		ts = SetEpochTimestamp();
	else if (dterr == 0 && dtype != DTK_DATE)
		dterr = 1;
	if (dterr != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is not a valid timestamp: \"%s\"", what, s),
				 errhint("Use ISO 8601, for example 2025-01-31T12:00:00.000Z.")));
	return ts;
}
