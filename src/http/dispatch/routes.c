/*
 * routes.c: the route table. Every route the listener answers is one row:
 * method, path pattern, the label it is counted under in /metrics, the
 * access level it needs with queen_streams.auth = jwt, and its handler:
 * a hand-written route (push, pop, acks, streams, ...) or one call of a SQL
 * function (QsCall, run by routes_api.c). Rows are matched in order, so a
 * literal segment ("lagging") must come before a :param in the same place.
 *
 * Access levels follow Queen: reads are read-only, writes read-write,
 * administration admin; pushes also admit write-only tokens.
 */
#include "http/dispatch/route.h"

#define R	QS_ACCESS_READ
#define W	QS_ACCESS_WRITE
#define A	QS_ACCESS_ADMIN

#define CALL(ok, sql, ...) (&(const QsCall) {sql, ok, {__VA_ARGS__}})

const QsRoute qs_routes[] = {
	{"-", "", "none", QS_ACCESS_NONE, NULL, NULL},

	/* queues: push, pop, ack, leases */
	{"POST", "/api/v1/push", "push", QS_ACCESS_PUSH_ONLY, &qs_route_push, NULL},
	{"GET", "/api/v1/pop/queue/:queue", "pop", W, &qs_route_pop, NULL},
	{"GET", "/api/v1/pop/queue/:queue/partition/:partition", "pop", W, &qs_route_pop, NULL},
	{"POST", "/api/v1/ack", "ack", W, &qs_route_ack, NULL},
	{"POST", "/api/v1/ack/batch", "ack_batch", W, &qs_route_ack_batch, NULL},
	{"POST", "/api/v1/lease/:leaseId/extend", "lease_extend", W, &qs_route_lease_extend, NULL},
	{"POST", "/api/v1/transaction", "transaction", W, NULL,
	CALL(200, "SELECT queen.transaction($1, $2, $3)", "body", "tenant", "sub")},

	/* streams */
	{"POST", "/streams/v1/queries", "streams_queries", W, &qs_route_queries, NULL},
	{"POST", "/streams/v1/state/get", "streams_state_get", R, &qs_route_state_get, NULL},
	{"POST", "/streams/v1/cycle", "streams_cycle", W, &qs_route_cycle, NULL},
	{"GET", "/streams/v1/streams", "streams_streams", R, NULL,
	CALL(200, "SELECT queen_streams.streams($1)", "tenant")},
	{"POST", "/streams/v1/streams/:name/pause", "streams_pause", W, NULL,
	CALL(200, "SELECT queen_streams.pause_stream($1, $2)", ":name", "tenant")},
	{"POST", "/streams/v1/streams/:name/resume", "streams_resume", W, NULL,
	CALL(200, "SELECT queen_streams.resume_stream($1, $2)", ":name", "tenant")},

	/* queue administration */
	{"POST", "/api/v1/configure", "configure", W, &qs_route_configure, NULL},
	{"DELETE", "/api/v1/resources/queues/:queue", "delete_queue", A, &qs_route_delete_queue, NULL},

	/* dead letters and single messages */
	{"GET", "/api/v1/dlq", "dlq", R, NULL,
		CALL(200, "SELECT queen.dlq($1, $2, $3, $4::timestamptz, $5::timestamptz,"
			 " coalesce($6::int, 100), coalesce($7::int, 0), $8)",
			 "?queue", "?consumerGroup", "?partition", "?from", "?to", "?limit", "?offset",
			 "tenant")},
	{"GET", "/api/v1/messages", "messages", R, NULL,
		CALL(200, "SELECT queen.messages($1, $2, $3, $4, $5, $6::timestamptz, $7::timestamptz,"
			 " coalesce($8::int, 200), coalesce($9::int, 0), $10)",
			 "?queue", "?partition", "?ns", "?task", "?status", "?from", "?to", "?limit",
			 "?offset", "tenant")},
	{"GET", "/api/v1/messages/:partitionId/:transactionId", "message", R, NULL,
	CALL(200, "SELECT queen.message($1::uuid, $2, $3)", ":partitionId", ":transactionId", "tenant")},
	{"DELETE", "/api/v1/messages/:partitionId/:transactionId", "delete_message", W, NULL,
		CALL(200, "SELECT queen.delete_message($1::uuid, $2, $3)",
			 ":partitionId", ":transactionId", "tenant")},
	{"POST", "/api/v1/messages/:partitionId/:transactionId/retry", "retry_message", W, NULL,
		CALL(200, "SELECT queen.retry_message($1::uuid, $2, $3)",
			 ":partitionId", ":transactionId", "tenant")},

	/* consumer groups */
	{"GET", "/api/v1/consumer-groups", "consumer_groups", R, NULL,
	CALL(200, "SELECT queen.consumer_groups($1)", "tenant")},
	{"GET", "/api/v1/consumer-groups/lagging", "consumer_groups_lagging", R, NULL,
		CALL(200, "SELECT queen.consumer_groups_lagging(coalesce($1::int, 3600), $2)",
			 "?minLagSeconds", "tenant")},
	{"GET", "/api/v1/consumer-groups/:group", "consumer_group", R, NULL,
	CALL(200, "SELECT queen.consumer_group($1, $2)", ":group", "tenant")},
	{"DELETE", "/api/v1/consumer-groups/:group", "delete_consumer_group", A, NULL,
		CALL(200, "SELECT queen.delete_consumer_group($1, NULL, coalesce($2::boolean, true), $3)",
			 ":group", "?deleteMetadata", "tenant")},
	{"DELETE", "/api/v1/consumer-groups/:group/queues/:queue", "delete_consumer_group", A, NULL,
		CALL(200, "SELECT queen.delete_consumer_group($1, $2, coalesce($3::boolean, true), $4)",
			 ":group", ":queue", "?deleteMetadata", "tenant")},
	{"POST", "/api/v1/consumer-groups/:group/subscription", "update_subscription", W, NULL,
	CALL(200, "SELECT queen.update_subscription($1, $2, $3)", ":group", "body", "tenant")},
	{"POST", "/api/v1/consumer-groups/:group/queues/:queue/seek", "seek", W, NULL,
	CALL(200, "SELECT queen.seek($1, $2, $3, $4)", ":group", ":queue", "body", "tenant")},
	{"POST", "/api/v1/consumer-groups/:group/queues/:queue/partitions/:partition/seek",
		"seek_partition", W, NULL,
		CALL(200, "SELECT queen.seek_partition($1, $2, $3, $4)",
			 ":group", ":queue", ":partition", "tenant")},

	/* maintenance */
	{"GET", "/api/v1/system/maintenance", "maintenance", A, NULL,
	CALL(200, "SELECT queen.maintenance('push')")},
	{"POST", "/api/v1/system/maintenance", "maintenance", A, NULL,
	CALL(200, "SELECT queen.set_maintenance('push', $1)", "body")},
	{"GET", "/api/v1/system/maintenance/pop", "maintenance_pop", A, NULL,
	CALL(200, "SELECT queen.maintenance('pop')")},
	{"POST", "/api/v1/system/maintenance/pop", "maintenance_pop", A, NULL,
	CALL(200, "SELECT queen.set_maintenance('pop', $1)", "body")},
	{"GET", "/api/v1/status/buffers", "buffers", R, NULL,
	CALL(200, "SELECT queen.maintenance('buffers')")},

	/* resources and status */
	{"GET", "/api/v1/resources/queues", "queues", R, NULL,
	CALL(200, "SELECT queen.queues_list($1)", "tenant")},
	{"GET", "/api/v1/resources/queues/:queue", "queue", R, NULL,
	CALL(200, "SELECT queen.queue_detail($1, $2)", ":queue", "tenant")},
	{"GET", "/api/v1/resources/overview", "overview", R, NULL,
	CALL(200, "SELECT queen.overview($1)", "tenant")},
	{"GET", "/api/v1/resources/namespaces", "namespaces", R, NULL,
	CALL(200, "SELECT queen.namespaces($1)", "tenant")},
	{"GET", "/api/v1/resources/tasks", "tasks", R, NULL,
	CALL(200, "SELECT queen.tasks($1)", "tenant")},
	{"GET", "/api/v1/status", "status", R, NULL,
		CALL(200, "SELECT queen.status($1::timestamptz, $2::timestamptz, $3, $4, $5, $6)",
			 "?from", "?to", "?queue", "?namespace", "?task", "tenant")},
	{"GET", "/api/v1/status/queues", "status_queues", R, NULL,
		CALL(200, "SELECT queen.status_queues($1, $2, coalesce($3::int, 100), coalesce($4::int, 0), $5)",
			 "?namespace", "?task", "?limit", "?offset", "tenant")},
	{"GET", "/api/v1/status/queues/:queue", "status_queue", R, NULL,
	CALL(200, "SELECT queen.status_queue($1, $2)", ":queue", "tenant")},
	{"GET", "/api/v1/status/queues/:queue/messages", "queue_messages", R, NULL,
		CALL(200, "SELECT queen.queue_messages($1, coalesce($2::int, 50), coalesce($3::int, 0), $4)",
			 ":queue", "?limit", "?offset", "tenant")},

	/* traces */
	{"POST", "/api/v1/traces", "traces", W, NULL,
	CALL(201, "SELECT queen.trace_add($1, $2)", "body", "tenant")},
	{"GET", "/api/v1/traces/names", "trace_names", R, NULL,
		CALL(200, "SELECT queen.trace_names(coalesce($1::int, 50), coalesce($2::int, 0), $3)",
			 "?limit", "?offset", "tenant")},
	{"GET", "/api/v1/traces/by-name/:name", "traces_by_name", R, NULL,
		CALL(200, "SELECT queen.traces_by_name($1, coalesce($2::int, 100), coalesce($3::int, 0), $4)",
			 ":name", "?limit", "?offset", "tenant")},
	{"GET", "/api/v1/traces/:partitionId/:transactionId", "traces", R, NULL,
	CALL(200, "SELECT queen.traces($1::uuid, $2, $3)", ":partitionId", ":transactionId", "tenant")},

	/* the dashboard: its page is public, what it shows comes from the routes */
	{"GET", "/api/v1/dashboard/throughput", "dashboard_throughput", R, NULL,
	CALL(200, "SELECT queen_streams.dashboard_throughput($1, $2)", "?queue", "tenant")},
	{"GET", "/api/v1/dashboard/streams", "dashboard_streams", R, NULL,
	CALL(200, "SELECT queen_streams.dashboard_streams($1)", "tenant")},
	{"GET", "/api/v1/dashboard/groups", "dashboard_groups", R, NULL,
	CALL(200, "SELECT queen_streams.dashboard_groups($1)", "tenant")},
	{"GET", "/api/v1/dashboard/workers", "dashboard_workers", R, NULL,
	CALL(200, "SELECT queen_streams.dashboard_workers()")},
	{"GET", "/", "dashboard", QS_ACCESS_NONE, &qs_route_dashboard, NULL},
	{"GET", "/dashboard", "dashboard", QS_ACCESS_NONE, &qs_route_dashboard, NULL},
	{"GET", "/dashboard/:file", "dashboard", QS_ACCESS_NONE, &qs_route_dashboard, NULL},

	/* the server */
	{"GET", "/health", "health", QS_ACCESS_NONE, &qs_route_health, NULL},
	{"GET", "/metrics", "metrics", R, &qs_route_metrics, NULL},
};

const int	qs_nroutes = lengthof(qs_routes);

/*
 * Whether a route must run on the primary; a hot standby answers it 503
 * (role.c). Those are the routes that write: every level above read except
 * the admin GETs (the maintenance switches read), pop included (it takes
 * leases). And streams state/get, the read half of a cycle's
 * read-modify-write: a standby's copy may trail the primary's by the
 * commits not yet replayed, and a counter built on it would lose updates.
 */
bool
qs_route_needs_primary(QsRouteId id)
{
	const QsRoute *r = &qs_routes[id];

	if (id == QS_R_NONE)
		return false;
	if (r->def == &qs_route_state_get)
		return true;
	switch (r->access)
	{
		case QS_ACCESS_PUSH_ONLY:
		case QS_ACCESS_WRITE:
			return true;
		case QS_ACCESS_ADMIN:
			return strcmp(r->method, "GET") != 0;
		default:
			return false;
	}
}

StaticAssertDecl(lengthof(qs_routes) <= QS_MAX_ROUTES, "raise QS_MAX_ROUTES");
