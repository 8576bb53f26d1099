/*
 * fuzz_router: the router's path matching (src/http/pattern.c) against every
 * pattern of the real route table (patterns.inc, extracted from
 * src/http/dispatch/routes.c by the Makefile) and against fuzzed patterns.
 *
 * Input: the path (as libmicrohttpd hands it: no query string, NUL-free);
 * the first byte chooses a table pattern or, when 0xff, the input is
 * "pattern\npath". Checked: parameters are non-empty, hold no '/', lie
 * inside the path, and substituting them back into the pattern gives the path.
 */
#include "postgres.h"
#include "http/pattern.h"

#include <stdint.h>

static const char *const patterns[] = {
#include "patterns.inc"
};

static void
check(const char *pattern, const char *path)
{
	const char *ps[QS_MAX_PARAMS];
	int			pl[QS_MAX_PARAMS];
	int			np = -1;
	char		rebuilt[8192];
	int			n = 0;
	int			k = 0;

	if (!qs_pattern_match(pattern, path, ps, pl, &np))
		return;
	if (np < 0 || np > QS_MAX_PARAMS)
		abort();
	for (int i = 0; i < np; i++)
	{
		if (pl[i] <= 0 || ps[i] < path || ps[i] + pl[i] > path + strlen(path) ||
			memchr(ps[i], '/', pl[i]) != NULL)
			abort();
	}
	/* the pattern with its parameters substituted is the path */
	for (const char *p = pattern; *p;)
	{
		if (p[0] == ':' && (p == pattern || p[-1] == '/'))
		{
			if (k >= np || n + pl[k] >= (int) sizeof(rebuilt))
				abort();
			memcpy(rebuilt + n, ps[k], pl[k]);
			n += pl[k++];
			p = strchrnul(p, '/');
			continue;
		}
		if (n + 1 >= (int) sizeof(rebuilt))
			return;
		rebuilt[n++] = *p++;
	}
	rebuilt[n] = '\0';
	if (k != np || strcmp(rebuilt, path) != 0)
	{
		fprintf(stderr, "pattern %s matched %s as %s\n", pattern, path, rebuilt);
		abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *buf;

	if (size < 1 || size > 4096)
		return 0;
	buf = malloc(size);
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = '\0';		/* a path is a C string: stop at a NUL */
	if (data[0] == 0xff)
	{
		char	   *nl = strchr(buf, '\n');

		if (nl)
		{
			*nl = '\0';
			check(buf, nl + 1);
		}
	}
	else
	{
		/* one pattern chosen, then all of them, as the router loops */
		check(patterns[data[0] % lengthof(patterns)], buf);
		for (size_t i = 0; i < lengthof(patterns); i++)
			check(patterns[i], buf);
	}
	free(buf);
	return 0;
}
