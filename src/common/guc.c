/*
 * guc.c: the settings of what every floor shares: the heap a backend keeps,
 * the secrets (access tokens, the encryption key: secret_file.c reads them), and the database the library's workers (the listener's and
 * the stream workers') connect to. Each floor defines its own (storage and
 * streams in their guc.c, the listener in src/http/settings.c); _PG_init
 * calls them, then reserves the prefix once.
 */
#include "common/guc.h"
#include "common/jwt.h"

#include "miscadmin.h"
#include "utils/guc.h"

int			qs_backend_heap_keep_kb = 8192;
int			qs_auth_mode = QS_AUTH_OFF;
char	   *qs_jwt_secret = NULL;
char	   *qs_jwt_secret_file = NULL;
char	   *qs_jwt_public_key_file = NULL;
char	   *qs_jwt_tenant_claim = NULL;
bool		qs_jwt_require_exp = false;
char	   *qs_jwt_issuer = NULL;
char	   *qs_jwt_audience = NULL;
char	   *qs_encryption_key = NULL;
char	   *qs_encryption_key_file = NULL;
static char *workers_database = NULL;

static const struct config_enum_entry auth_options[] = {
	{"off", QS_AUTH_OFF, false},
	{"jwt", QS_AUTH_JWT, false},
	{NULL, 0, false}
};

void
qs_guc_init(void)
{
	/* PGC_POSTMASTER settings can only be defined while preloading. */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomStringVariable("queen_streams.database",
								   gettext_noop("Database the HTTP workers connect to."),
								   NULL,
								   &workers_database,
								   "postgres",
								   PGC_POSTMASTER, 0,
								   NULL, NULL, NULL);

	DefineCustomIntVariable("queen_streams.backend_heap_keep",
							gettext_noop("Freed heap a stream worker keeps for its next cycle (0: glibc's default, 128 kB)."),
							gettext_noop("Set once when the worker starts. Ordinary sessions are left as glibc "
										 "sets them; the HTTP workers keep 64 MB."),
							&qs_backend_heap_keep_kb,
							8192, 0, 1024 * 1024,
							PGC_POSTMASTER, GUC_UNIT_KB,
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

/*
 * The database the HTTP workers and the stream workers connect to
 * (queen_streams.database); defined only while preloading, as are the
 * workers.
 */
const char *
qs_workers_database(void)
{
	return workers_database;
}
