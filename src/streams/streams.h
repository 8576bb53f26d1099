/*
 * streams.h: the three streams routes (register a query, read its state,
 * commit a cycle) and the one mapping from a response body to HTTP status.
 */
#ifndef QS_STREAMS_H
#define QS_STREAMS_H

#include "common/common.h"

/* Route names as the listener and queen_streams.http_status() spell them. */
#define QS_ROUTE_QUERIES	"queries"
#define QS_ROUTE_STATE_GET	"state/get"
#define QS_ROUTE_CYCLE		"cycle"

/* HTTP status for a completed call of a streams route (status.c). */
extern int	qs_http_status(const char *route, Jsonb *response);

#endif							/* QS_STREAMS_H */
