/*
 * pattern.c: route pattern matching, pure string work kept apart from the
 * router so the fuzz harness (test/fuzz/fuzz_router.c) can run it alone.
 */
#include "http/pattern.h"

#include <string.h>

/*
 * Whether `path` matches `pattern`; each ":name" segment matches one
 * non-empty segment, whose bounds are stored in params (into path).
 */
bool
qs_pattern_match(const char *pattern, const char *path, const char **ps, int *pl, int *np)
{
	*np = 0;
	while (*pattern && *path)
	{
		if (*pattern != '/' || *path != '/')
			return false;
		pattern++, path++;
		if (*pattern == ':')
		{
			const char *end = strchr(path, '/');
			int			len = end ? end - path : (int) strlen(path);

			if (len == 0 || *np == QS_MAX_PARAMS)
				return false;
			ps[*np] = path;
			pl[(*np)++] = len;
			path += len;
			pattern = strchrnul(pattern, '/');
		}
		else
		{
			const char *end = strchrnul(pattern, '/');
			int			len = end - pattern;

			if (strncmp(pattern, path, len) != 0 || (path[len] != '/' && path[len] != '\0'))
				return false;
			pattern += len;
			path += len;
		}
	}
	return *pattern == '\0' && *path == '\0';
}
