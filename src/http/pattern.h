/*
 * pattern.h: route patterns ("/api/v1/pop/queue/:queue"), matched with no
 * backend service at all.
 */
#ifndef QS_HTTP_PATTERN_H
#define QS_HTTP_PATTERN_H

#include "c.h"

#define QS_MAX_PARAMS	4		/* :name segments of one pattern */

/*
 * Whether `path` matches `pattern`; each ":name" segment matches one
 * non-empty segment, whose bounds (into path) go to ps/pl, *np of them.
 */
extern bool qs_pattern_match(const char *pattern, const char *path,
							 const char **ps, int *pl, int *np);

#endif							/* QS_HTTP_PATTERN_H */
