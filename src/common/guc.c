/*
 * guc.c: the settings of the storage engine, encryption and access tokens.
 * The listener's own settings are in src/http/settings.c; _PG_init defines
 * both, then reserves the prefix.
 */
#include "common/common.h"

#include "miscadmin.h"
#include "utils/guc.h"

int			qs_zstd_level = 1;
int			qs_max_segment_kb = 262144;
int			qs_dedup_cache_entries = 262144;
int			qs_dedup_partition_entries = 0;
int			qs_dedup_key_budget = 262144;
int			qs_backend_heap_keep_kb = 8192;
int			qs_max_pop_batch = 10000;
int			qs_max_pop_partitions = 1000;
int			qs_pop_ready_recheck_s = 30;
char	   *qs_encryption_key = NULL;
char	   *qs_encryption_key_file = NULL;
bool		qs_encryption_fail_open = false;
bool		qs_encryption_unbound_read = true;
bool		qs_ack_requires_lease = false;
int			qs_stream_workers = 1;
int			qs_stream_poll_ms = 1000;
int			qs_auth_mode = QS_AUTH_OFF;
char	   *qs_jwt_secret = NULL;
char	   *qs_jwt_secret_file = NULL;
char	   *qs_jwt_public_key_file = NULL;
char	   *qs_jwt_tenant_claim = NULL;
bool		qs_jwt_require_exp = false;
char	   *qs_jwt_issuer = NULL;
char	   *qs_jwt_audience = NULL;

static const struct config_enum_entry auth_options[] = {
	{"off", QS_AUTH_OFF, false},
	{"jwt", QS_AUTH_JWT, false},
	{NULL, 0, false}
};

void
qs_guc_init(void)
{
	DefineCustomIntVariable("queen_streams.stream_workers",
							gettext_noop("Background workers that run declared streams (0: none)."),
							gettext_noop("Separate from the HTTP workers; they share the streams' partitions "
										 "through the source leases."),
							&qs_stream_workers,
							1, 0, 64,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen_streams.stream_poll_interval",
							gettext_noop("Longest a stream worker sleeps before it looks for work again."),
							gettext_noop("A push that commits wakes the workers at once; the interval bounds "
										 "how late idle flushes and expired leases are seen."),
							&qs_stream_poll_ms,
							1000, 10, 60000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen_streams.backend_heap_keep",
							gettext_noop("Freed heap a backend running queen_streams code keeps for its next call (0: glibc's default, 128 kB)."),
							gettext_noop("Below it, each pop or push gives its memory back to the system when its "
										 "transaction ends and faults it in again at the next call."),
							&qs_backend_heap_keep_kb,
							8192, 0, 1024 * 1024,
							PGC_SIGHUP, GUC_UNIT_KB,
							NULL, NULL, NULL);

	/*
	 * Both as large as a declared stream may ask (definition.c) and far above
	 * what Queen's clients send (batch 200, partitions 4). SUSET: an
	 * administrator may raise them for one role (ALTER ROLE ... SET), a
	 * caller not for itself.
	 */
	DefineCustomIntVariable("queen_streams.max_pop_batch",
							gettext_noop("Largest batch one pop may ask for."),
							gettext_noop("A pop that asks for more is refused (22023, HTTP 400) before it reads anything."),
							&qs_max_pop_batch,
							10000, 1, INT_MAX,
							PGC_SUSET, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen_streams.max_pop_partitions",
							gettext_noop("Most partitions one wildcard pop may ask to claim."),
							gettext_noop("A pop that asks for more is refused (22023, HTTP 400) before it reads anything."),
							&qs_max_pop_partitions,
							1000, 1, INT_MAX,
							PGC_SUSET, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen_streams.pop_ready_recheck",
							gettext_noop("How often a wildcard pop rebuilds its consumer group's ready set from the cursors."),
							gettext_noop("The set is kept in step by push, pop and ack; the rebuild bounds how long "
										 "a missed update can hide a partition's backlog."),
							&qs_pop_ready_recheck_s,
							30, 1, 86400,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen_streams.zstd_level",
							gettext_noop("zstd compression level of new log segments."),
							gettext_noop("Segments under 1 kB packed are written at level -1."),
							&qs_zstd_level,
							1, 1, 19,
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
							gettext_noop("Transaction-id hashes the server keeps in shared memory to answer push dedup probes."),
							gettext_noop("About 92 bytes of shared memory each, reserved and touched at start when the library is "
										 "preloaded. A partition whose dedup window holds more than fits is probed "
										 "by key (queen.log_txn_keys)."),
							&qs_dedup_cache_entries,
							262144, 1024, INT_MAX / 2,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen_streams.dedup_partition_entries",
							gettext_noop("Most hashes one partition may hold in the dedup cache (0: no limit but the cache's)."),
							gettext_noop("A partition that would hold more is probed by key (queen.log_txn_keys) instead."),
							&qs_dedup_partition_entries,
							0, 0, INT_MAX / 2,
							PGC_SUSET, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen_streams.dedup_key_budget",
							gettext_noop("Most hashes one dedup probe turns into keys (queen.log_txn_keys)."),
							gettext_noop("A larger backlog is keyed over several probes, each reading the window past the keys meanwhile."),
							&qs_dedup_key_budget,
							262144, 1000, INT_MAX / 2,
							PGC_SUSET, 0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("queen_streams.encryption_key",
							   gettext_noop("AES-256-GCM key for queues with encryption enabled, as 64 hex digits."),
							   gettext_noop("Written to the server log when a reload changes it: prefer encryption_key_file. "
											"Ignored while encryption_key_file is set; when both are empty, the server's "
											"QUEEN_ENCRYPTION_KEY environment variable is used."),
							   &qs_encryption_key,
							   "",
							   PGC_SUSET, GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("queen_streams.encryption_key_file",
							   gettext_noop("File holding the AES-256-GCM key as 64 hex digits; read at start and on SIGHUP."),
							   gettext_noop("Owned by the server's user (mode 0600 or less) or root (0640 or less). "
											"When set, encryption_key is ignored."),
							   &qs_encryption_key_file,
							   "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY,
							   qs_check_encryption_key_file, qs_assign_encryption_key_file, NULL);

	DefineCustomBoolVariable("queen_streams.encryption_fail_open",
							 gettext_noop("Store plaintext, with a WARNING, when a queue with encryption enabled has no usable key."),
							 gettext_noop("Off: such a push is refused and nothing is stored. On: Queen's behaviour."),
							 &qs_encryption_fail_open,
							 false,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("queen_streams.encryption_unbound_read",
							 gettext_noop("Decrypt envelopes not bound to their partition and message (written before 0.8.0, or by Queen)."),
							 gettext_noop("Off once none is left: such an envelope could be copied into another queue "
										  "and read there."),
							 &qs_encryption_unbound_read,
							 true,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("queen_streams.ack_requires_lease",
							 gettext_noop("Refuse an ack without leaseId of a message that a live lease covers."),
							 gettext_noop("Off (Queen's behaviour): an ack without leaseId skips the lease check "
										  "and can commit another consumer's leased batch."),
							 &qs_ack_requires_lease,
							 false,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("queen_streams.auth",
							 gettext_noop("Access control of the HTTP listener: off, or jwt (Authorization: Bearer)."),
							 NULL,
							 &qs_auth_mode,
							 QS_AUTH_OFF, auth_options,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomStringVariable("queen_streams.jwt_secret",
							   gettext_noop("HMAC secret that HS256 bearer tokens are signed with."),
							   gettext_noop("Written to the server log when a reload changes it: prefer jwt_secret_file. "
											"Ignored while jwt_secret_file is set."),
							   &qs_jwt_secret,
							   "",
							   PGC_SUSET, GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("queen_streams.jwt_secret_file",
							   gettext_noop("File holding the HMAC secret of HS256 bearer tokens; read at start and on SIGHUP."),
							   gettext_noop("Its contents less trailing newlines. Owned by the server's user (mode 0600 "
											"or less) or root (0640 or less). When set, jwt_secret is ignored."),
							   &qs_jwt_secret_file,
							   "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY,
							   qs_check_jwt_secret_file, qs_assign_jwt_secret_file, NULL);
	DefineCustomStringVariable("queen_streams.jwt_public_key_file",
							   gettext_noop("PEM file with the RSA public key that RS256 bearer tokens are checked against."),
							   NULL,
							   &qs_jwt_public_key_file,
							   "",
							   PGC_SUSET, GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("queen_streams.jwt_tenant_claim",
							   gettext_noop("Token claim that names the only tenant a token may act for."),
							   gettext_noop("With auth = jwt and tenancy = header a token must carry it: a tenant UUID, "
											"or \"*\" in an admin token (server-wide). Without it (or with this empty) a token "
											"is refused with 403 unless queen_streams.jwt_trust_tenant_header is on."),
							   &qs_jwt_tenant_claim,
							   "",
							   PGC_SUSET, 0,
							   NULL, NULL, NULL);
	DefineCustomBoolVariable("queen_streams.jwt_require_exp",
							 gettext_noop("Refuse bearer tokens without an exp claim."),
							 NULL,
							 &qs_jwt_require_exp,
							 false,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomStringVariable("queen_streams.jwt_issuer",
							   gettext_noop("The iss claim every bearer token must carry; empty: not checked."),
							   NULL,
							   &qs_jwt_issuer,
							   "",
							   PGC_SUSET, 0,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("queen_streams.jwt_audience",
							   gettext_noop("The audience every bearer token's aud claim must name; empty: not checked."),
							   NULL,
							   &qs_jwt_audience,
							   "",
							   PGC_SUSET, 0,
							   NULL, NULL, NULL);
}
