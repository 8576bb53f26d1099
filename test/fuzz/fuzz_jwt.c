/*
 * fuzz_jwt: bearer token verification (qs_jwt_verify, src/common/jwt.c),
 * with an HS256 secret configured.
 *
 * Input: byte 0 even: the rest is the token as sent. Byte 0 odd: the rest is
 * "header\npayload" (JSON text, or anything), which the harness encodes and
 * signs with the secret, so claims parsing past the signature check is
 * reached too. Checked: qs_jwt_verify never raises (its contract: a bad token
 * is a reason, never an error), and a token it accepts has a known level.
 */
#include "shim.h"

#include "common/jwt.c"

int			qs_auth_mode = QS_AUTH_JWT;
char	   *qs_jwt_secret = "fuzz-secret";
char	   *qs_jwt_public_key_file = "";
/* settings later versions of jwt.c read (weak: absent from older headers) */
__attribute__((weak)) char *qs_jwt_tenant_claim = NULL;
__attribute__((weak)) bool qs_jwt_require_exp = false;
__attribute__((weak)) char *qs_jwt_issuer = NULL;
__attribute__((weak)) char *qs_jwt_audience = NULL;

/* the HS256 secret (src/common/secret_file.c: a file's, else the inline setting) */
const char *
qs_jwt_hmac_secret(void)
{
	return qs_jwt_secret;
}

/* a token's JSON that raises is refused and logged (src/common/subxact.c): no log here */
void
qs_log_dropped_error_at(int elevel, const char *why)
{
}

/* referenced by the SQL entry point and the key loader, never reached here */
#define NEVER(decl) decl { fprintf(stderr, "shim: %s called\n", __func__); abort(); }
NEVER(void qsj_init(QsJson *j))
NEVER(void qsj_object(QsJson *j, const char *key))
NEVER(void qsj_end(QsJson *j, char close))
NEVER(void qsj_bool(QsJson *j, const char *key, bool val))
NEVER(void qsj_str(QsJson *j, const char *key, const char *val))
NEVER(Jsonb *qsj_jsonb(QsJson *j))
NEVER(FILE *AllocateFile(const char *name, const char *mode))
NEVER(int FreeFile(FILE *file))

static void
b64url(StringInfo out, const unsigned char *s, int len)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

	for (int i = 0; i < len; i += 3)
	{
		uint32		v = s[i] << 16 | (i + 1 < len ? s[i + 1] << 8 : 0) | (i + 2 < len ? s[i + 2] : 0);

		appendStringInfoChar(out, tab[(v >> 18) & 63]);
		appendStringInfoChar(out, tab[(v >> 12) & 63]);
		if (i + 1 < len)
			appendStringInfoChar(out, tab[(v >> 6) & 63]);
		if (i + 2 < len)
			appendStringInfoChar(out, tab[v & 63]);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	StringInfoData tok;
	QsToken		out;
	const char *volatile err = NULL;

	if (size < 1 || size > 20000)
		return 0;
	initStringInfo(&tok);
	if ((data[0] & 1) == 0)
		appendBinaryStringInfo(&tok, (const char *) data + 1, size - 1);
	else
	{
		const uint8_t *nl = memchr(data + 1, '\n', size - 1);
		const uint8_t *end = data + size;
		unsigned char mac[EVP_MAX_MD_SIZE];
		unsigned int maclen = 0;

		if (nl == NULL)
			nl = end;
		b64url(&tok, data + 1, nl - data - 1);
		appendStringInfoChar(&tok, '.');
		if (nl < end)
			b64url(&tok, nl + 1, end - nl - 1);
		HMAC(EVP_sha256(), qs_jwt_secret, strlen(qs_jwt_secret),
			 (const unsigned char *) tok.data, tok.len, mac, &maclen);
		appendStringInfoChar(&tok, '.');
		b64url(&tok, mac, maclen);
	}
	if (!fuzz_try(err = qs_jwt_verify(tok.data, tok.len, &out)))
	{
		fprintf(stderr, "qs_jwt_verify raised %s: %s\n",
				unpack_sql_state(fuzz_last_sqlstate), fuzz_last_message);
		abort();
	}
	if (err == NULL && (out.level < QS_ACCESS_NONE || out.level > QS_ACCESS_PUSH_ONLY))
		abort();
	fuzz_reset();
	return 0;
}
