/*
 * metrics_text.c: the Prometheus text format's writers, in a file of their
 * own so that the counters (metrics.c) and the gauges (metrics_gauges.c)
 * both use them without either depending on the other.
 */
#include "http/dispatch/metrics_text.h"

/* A label value, escaped as the text format asks. */
void
qs_metrics_label(StringInfo out, const char *s)
{
	for (; *s; s++)
	{
		if (*s == '\\' || *s == '"')
			appendStringInfoChar(out, '\\');
		if (*s == '\n')
			appendStringInfoString(out, "\\n");
		else
			appendStringInfoChar(out, *s);
	}
}

/* A family's HELP and TYPE lines. */
void
qs_metrics_header(StringInfo out, const char *name, const char *type, const char *help)
{
	appendStringInfo(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}
