/*
 * guc.c: every queen_streams setting, defined in one place.
 */
#include "common/common.h"

#include "http/http_int.h"
#include "miscadmin.h"
#include "utils/guc.h"

int			qs_zstd_level = 3;
int			qs_max_segment_kb = 262144;
int			qs_dedup_cache_entries = 262144;
char	   *qs_encryption_key = NULL;
int			qs_auth_mode = QS_AUTH_OFF;
char	   *qs_jwt_secret = NULL;
char	   *qs_jwt_public_key_file = NULL;

static const struct config_enum_entry auth_options[] = {
	{"off", QS_AUTH_OFF, false},
	{"jwt", QS_AUTH_JWT, false},
	{NULL, 0, false}
};

/* The HTTP listener (src/http); its limits reload on SIGHUP. */
int			qs_http_port = 6632;
char	   *qs_http_listen_address = NULL;
int			qs_http_workers = 2;
char	   *qs_http_database = NULL;
int			qs_http_max_body_bytes = 16 * 1024 * 1024;
int			qs_http_max_header_bytes = 16 * 1024;
int			qs_http_header_timeout_ms = 10000;
int			qs_http_body_timeout_ms = 30000;
int			qs_http_idle_timeout_ms = 60000;
int			qs_http_max_connections = 1000;
int			qs_http_statement_timeout_ms = 30000;
int			qs_http_tenancy = QS_TENANCY_OFF;
int			qs_http_retention_interval_s = 60;
int			qs_http_pop_recheck_ms = 1000;
bool		qs_http_group_flush = false;

static const struct config_enum_entry tenancy_options[] = {
	{"off", QS_TENANCY_OFF, false},
	{"header", QS_TENANCY_HEADER, false},
	{NULL, 0, false}
};

static void
define_http_settings(void)
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
		DefineCustomStringVariable("queen_streams.database",
								   gettext_noop("Database the HTTP workers connect to."),
								   NULL,
								   &qs_http_database,
								   "postgres",
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
	DefineCustomIntVariable("queen_streams.retention_interval",
							gettext_noop("Period of the retention sweep run by the first HTTP worker; 0 disables it."),
							NULL,
							&qs_http_retention_interval_s,
							60, 0, 86400,
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
	DefineCustomBoolVariable("queen_streams.group_flush",
							 gettext_noop("HTTP workers flush the WAL once for all requests in hand instead of once per commit."),
							 gettext_noop("Answers still wait for their commit to be durable, but other sessions may see "
										  "a commit a moment before it is, as with synchronous_commit = off."),
							 &qs_http_group_flush,
							 false,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
}

void
qs_guc_init(void)
{
	DefineCustomIntVariable("queen_streams.zstd_level",
							gettext_noop("zstd compression level of new log segments."),
							NULL,
							&qs_zstd_level,
							3, 1, 19,
							PGC_USERSET, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen_streams.max_segment_size",
							gettext_noop("Largest decompressed log segment that is written or read."),
							gettext_noop("A push whose packed frames for one partition exceed it is refused; "
										 "a stored segment that claims more is reported as corrupt."),
							&qs_max_segment_kb,
							262144, 64, 1048575,
							PGC_SUSET, GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen_streams.dedup_cache_entries",
							gettext_noop("Transaction-id hashes each backend keeps to answer push dedup probes."),
							gettext_noop("About 64 bytes each; a queue whose dedup window holds more "
										 "falls back to reading the window."),
							&qs_dedup_cache_entries,
							262144, 1024, INT_MAX / 2,
							PGC_USERSET, 0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("queen_streams.encryption_key",
							   gettext_noop("AES-256-GCM key for queues with encryption enabled, as 64 hex digits."),
							   gettext_noop("When empty, the server's QUEEN_ENCRYPTION_KEY environment variable is used."),
							   &qs_encryption_key,
							   "",
							   PGC_SUSET, GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   NULL, NULL, NULL);

	define_http_settings();

	DefineCustomEnumVariable("queen_streams.auth",
							 gettext_noop("Access control of the HTTP listener: off, or jwt (Authorization: Bearer)."),
							 NULL,
							 &qs_auth_mode,
							 QS_AUTH_OFF, auth_options,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomStringVariable("queen_streams.jwt_secret",
							   gettext_noop("HMAC secret that HS256 bearer tokens are signed with."),
							   NULL,
							   &qs_jwt_secret,
							   "",
							   PGC_SUSET, GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("queen_streams.jwt_public_key_file",
							   gettext_noop("PEM file with the RSA public key that RS256 bearer tokens are checked against."),
							   NULL,
							   &qs_jwt_public_key_file,
							   "",
							   PGC_SUSET, GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);

	MarkGUCPrefixReserved("queen_streams");
}
