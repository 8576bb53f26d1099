/*
 * settings.c: the HTTP listener's settings. Those that shape processes
 * (port, workers) need a restart; the limits reload on SIGHUP.
 */
#include "http/http.h"
#include "http/listener.h"

#include "miscadmin.h"
#include "utils/guc.h"

int			qs_http_port = 6632;
char	   *qs_http_listen_address = NULL;
int			qs_http_workers = 2;
int			qs_http_max_body_bytes = 16 * 1024 * 1024;
int			qs_http_max_header_bytes = 16 * 1024;
int			qs_http_header_timeout_ms = 10000;
int			qs_http_body_timeout_ms = 30000;
int			qs_http_idle_timeout_ms = 60000;
int			qs_http_max_connections = 1000;
int			qs_http_statement_timeout_ms = 30000;
int			qs_http_tenancy = QS_TENANCY_OFF;
bool		qs_http_jwt_trust_tenant_header = false;
int			qs_http_retention_interval_s = 60;
int			qs_http_pop_recheck_ms = 1000;
int			qs_http_pop_max_wait_ms = 60000;
int			qs_http_sample_interval_s = 60;
int			qs_http_group_max_requests = 64;
int			qs_http_group_max_wait_ms = 0;
int			qs_http_group_await_ms = 1;
int			qs_http_metrics_queues = 1024;
int			qs_http_metrics_queue_idle_s = 3600;
int			qs_http_metrics_gauges_interval_s = 10;

static const struct config_enum_entry tenancy_options[] = {
	{"off", QS_TENANCY_OFF, false},
	{"header", QS_TENANCY_HEADER, false},
	{NULL, 0, false}
};

void
qs_http_guc_init(void)
{
	/* PGC_POSTMASTER settings can only be defined while preloading. */
	if (process_shared_preload_libraries_in_progress)
	{
		DefineCustomIntVariable("queen_streams.http_port",
								gettext_noop("TCP port of the embedded HTTP listener; 0 disables it."),
								NULL,
								&qs_http_port,
								6632, 0, 65535,
								PGC_POSTMASTER, 0,
								NULL, NULL, NULL);
		DefineCustomStringVariable("queen_streams.listen_address",
								   gettext_noop("IP address the HTTP listener binds (\"*\" for every IPv4 address)."),
								   NULL,
								   &qs_http_listen_address,
								   "127.0.0.1",
								   PGC_POSTMASTER, 0,
								   NULL, NULL, NULL);
		DefineCustomIntVariable("queen_streams.http_workers",
								gettext_noop("Number of HTTP worker processes sharing the port."),
								NULL,
								&qs_http_workers,
								2, 1, QS_MAX_WORKERS,
								PGC_POSTMASTER, 0,
								NULL, NULL, NULL);
	}

	DefineCustomIntVariable("queen_streams.max_body_bytes",
							gettext_noop("Largest HTTP request body; larger ones are answered 413."),
							NULL,
							&qs_http_max_body_bytes,
							16 * 1024 * 1024, 1024, 1024 * 1024 * 1024 - 1,
							PGC_SIGHUP, GUC_UNIT_BYTE,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queen_streams.max_header_bytes",
							gettext_noop("Largest HTTP request line and headers; larger ones are answered 431."),
							NULL,
							&qs_http_max_header_bytes,
							16 * 1024, 1024, 1024 * 1024,
							PGC_SIGHUP, GUC_UNIT_BYTE,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queen_streams.header_timeout",
							gettext_noop("Time a new HTTP connection has to send complete request headers."),
							NULL,
							&qs_http_header_timeout_ms,
							10000, 100, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queen_streams.body_timeout",
							gettext_noop("Time an HTTP client has to send a request body, and to read a response."),
							NULL,
							&qs_http_body_timeout_ms,
							30000, 100, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queen_streams.idle_timeout",
							gettext_noop("Time a keep-alive HTTP connection may wait for its next request."),
							NULL,
							&qs_http_idle_timeout_ms,
							60000, 100, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queen_streams.max_connections",
							gettext_noop("Open HTTP connections across all workers; requests beyond get 503."),
							NULL,
							&qs_http_max_connections,
							1000, 1, 1000000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queen_streams.http_statement_timeout",
							gettext_noop("Longest time one HTTP request may spend in its transaction; 0 disables."),
							NULL,
							&qs_http_statement_timeout_ms,
							30000, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("queen_streams.tenancy",
							 gettext_noop("Where HTTP requests take their tenant from: off (default tenant) or header (x-queen-tenant)."),
							 NULL,
							 &qs_http_tenancy,
							 QS_TENANCY_OFF, tenancy_options,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("queen_streams.jwt_trust_tenant_header",
							 gettext_noop("With auth = jwt and tenancy = header, let a token without the tenant claim act for the tenant x-queen-tenant names."),
							 gettext_noop("Off (the default): such a token is refused with 403. On: the behaviour before 0.8, "
										  "where such a token of role admin is also a server-wide admin."),
							 &qs_http_jwt_trust_tenant_header,
							 false,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("queen_streams.retention_interval",
							gettext_noop("Period of the retention sweep run by the first HTTP worker; 0 disables it."),
							NULL,
							&qs_http_retention_interval_s,
							60, 0, 86400,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queen_streams.sample_interval",
							gettext_noop("How often the first HTTP worker samples the per-queue counters for the dashboard's charts."),
							gettext_noop("The last 60 intervals are kept in shared memory."),
							&qs_http_sample_interval_s,
							60, 1, 3600,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queen_streams.metrics_queues",
							gettext_noop("Slots of the per-queue counters (/metrics, the dashboard's charts), the overflow row included."),
							gettext_noop("About 1.8 kB of shared memory each. A queue that finds no slot is counted "
										 "in the overflow row queue=\"(other)\"."),
							&qs_http_metrics_queues,
							1024, 16, 65536,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queen_streams.metrics_queue_idle",
							gettext_noop("How long a queue's counters must be idle before a new queue may take their slot (0: never)."),
							gettext_noop("Only when the new queue finds no free slot; a deleted queue's slot is free at once."),
							&qs_http_metrics_queue_idle_s,
							3600, 0, 30 * 86400,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queen_streams.metrics_gauges_interval",
							gettext_noop("How often the listener refreshes the snapshot the /metrics gauges read (0: every scrape reads the tables)."),
							gettext_noop("Refreshed in a background worker while /metrics is scraped; the "
										 "gauge queen_streams_gauges_age_seconds is the snapshot's age."),
							&qs_http_metrics_gauges_interval_s,
							10, 0, 3600,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queen_streams.pop_recheck_interval",
							gettext_noop("How often a parked long-poll pop retries without a wake-up."),
							gettext_noop("Pushes wake parked pops at commit; this covers leases that expire "
										 "and prepared transactions."),
							&qs_http_pop_recheck_ms,
							1000, 10, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queen_streams.pop_max_wait",
							gettext_noop("Longest time a long-poll pop waits; a larger timeout parameter is clamped to it."),
							NULL,
							&qs_http_pop_max_wait_ms,
							60000, 100, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queen_streams.group_commit_max_requests",
							gettext_noop("Most writing HTTP requests a worker runs in one transaction and commits together; 1 disables group commit."),
							gettext_noop("Each request runs in its own subtransaction; answers follow the shared, synchronous commit."),
							&qs_http_group_max_requests,
							64, 1, 10000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queen_streams.group_commit_max_wait",
							gettext_noop("How long a worker waits for more requests before it runs a group that is not full; 0 runs what arrived together."),
							NULL,
							&qs_http_group_max_wait_ms,
							0, 0, 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queen_streams.group_commit_await",
							gettext_noop("How long a group that is not full may wait for the connections the last group answered to send again; 0 does not wait for them."),
							gettext_noop("A closed-loop client sends its next request as soon as it reads its answer: "
										 "waiting for those keeps a worker's clients in one group, served by one flush."),
							&qs_http_group_await_ms,
							1, 0, 10000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
}
