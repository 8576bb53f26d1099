/*
 * args.h: args.c: a SQL function's arguments, with precise errors.
 */
#ifndef QS_ARGS_H
#define QS_ARGS_H

#include "common/base.h"

/* args.c: reading a SQL function's arguments with precise errors */
extern char *qs_text_arg(FunctionCallInfo fcinfo, int argno);	/* NULL for NULL or '' */
extern char *qs_required_text_arg(FunctionCallInfo fcinfo, int argno, const char *what);
extern TimestampTz qs_parse_timestamp(const char *s, const char *what);
/* limit and offset of a paged read: NULL takes the default; limit 0 to QS_PAGE_MAX, offset >= 0 */
#define QS_PAGE_MAX 10000
extern void qs_page_args(FunctionCallInfo fcinfo, int limno, int offno, int dflt,
						 int *lim, int *off);

#endif							/* QS_ARGS_H */
