/*
 * jwt.c: bearer token verification for the HTTP listener (HS256 and RS256,
 * with OpenSSL), and the access levels its claims grant.
 *
 * A token must carry the algorithm of the configured key: HS256 with
 * queen_streams.jwt_secret, RS256 with queen_streams.jwt_public_key_file.
 * "none" and any other algorithm are refused, and so is a token whose
 * algorithm names a key type that is not configured, which is what stops
 * algorithm confusion (an RS256 public key used as an HMAC secret).
 */
#include "common/common.h"

#include "common/base64.h"
#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "storage/fd.h"
#include "utils/builtins.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <sys/stat.h>

#define JWT_LEEWAY_SECONDS 30
#define JWT_MAX_LEN 16384

/* The public key, cached per backend and reloaded when the file changes. */
static EVP_PKEY *pubkey = NULL;
static char *pubkey_path = NULL;
static time_t pubkey_mtime = 0;

static EVP_PKEY *
load_public_key(void)
{
	struct stat st;
	FILE	   *f;
	EVP_PKEY   *k;

	if (qs_jwt_public_key_file == NULL || qs_jwt_public_key_file[0] == '\0')
		return NULL;
	if (stat(qs_jwt_public_key_file, &st) != 0)
	{
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("could not read JWT public key file \"%s\": %m", qs_jwt_public_key_file)));
		return NULL;
	}
	if (pubkey && pubkey_path && strcmp(pubkey_path, qs_jwt_public_key_file) == 0 &&
		pubkey_mtime == st.st_mtime)
		return pubkey;

	f = AllocateFile(qs_jwt_public_key_file, "r");
	if (f == NULL)
	{
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("could not open JWT public key file \"%s\": %m", qs_jwt_public_key_file)));
		return NULL;
	}
	k = PEM_read_PUBKEY(f, NULL, NULL, NULL);
	FreeFile(f);
	if (k == NULL || EVP_PKEY_base_id(k) != EVP_PKEY_RSA)
	{
		if (k)
			EVP_PKEY_free(k);
		ereport(WARNING,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("JWT public key file \"%s\" does not hold an RSA public key in PEM form",
						qs_jwt_public_key_file)));
		return NULL;
	}
	if (pubkey)
		EVP_PKEY_free(pubkey);
	pubkey = k;
	if (pubkey_path)
		free(pubkey_path);
	pubkey_path = strdup(qs_jwt_public_key_file);
	pubkey_mtime = st.st_mtime;
	return pubkey;
}

/* base64url without padding -> bytes; false if malformed */
static bool
b64url_decode(const char *s, int len, char **out, int *outlen)
{
	char	   *std = palloc(len + 4);
	int			n = 0;
	int			dlen;

	for (int i = 0; i < len; i++)
	{
		char		c = s[i];

		if (c == '-')
			c = '+';
		else if (c == '_')
			c = '/';
		else if (c == '=' || c == '+' || c == '/')
			return false;
		std[n++] = c;
	}
	while (n % 4 != 0)
		std[n++] = '=';
	dlen = pg_b64_dec_len(n);
	*out = palloc(dlen + 1);
	*outlen = pg_b64_decode(std, n, *out, dlen);
	if (*outlen < 0)
		return false;
	(*out)[*outlen] = '\0';
	return true;
}

/*
 * Parse JSON text into an object container, or NULL. The text is validated
 * first (escapes included), so jsonb_in cannot raise on a hostile token.
 */
static JsonbContainer *
json_object_or_null(const char *text, int len)
{
	JsonLexContext *lex;
	Jsonb	   *jb;

	if (memchr(text, 0, len) != NULL || !pg_verifymbstr(text, len, true))
		return NULL;
	lex = makeJsonLexContextCstringLen((char *) text, len, GetDatabaseEncoding(), true);
	if (pg_parse_json(lex, &nullSemAction) != JSON_SUCCESS)
		return NULL;
	jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
	return JB_ROOT_IS_OBJECT(jb) ? &jb->root : NULL;
}

static bool
claim_number(JsonbContainer *c, const char *key, double *out)
{
	JsonbValue	v;

	if (getKeyJsonValueFromContainer(c, key, strlen(key), &v) == NULL)
		return false;
	if (v.type != jbvNumeric)
	{
		*out = 0;
		return true;			/* present but not a number: treated as 0 (invalid) */
	}
	*out = DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v.val.numeric)));
	return true;
}

static QsAccess
role_level(const char *role)
{
	if (role == NULL)
		return QS_ACCESS_NONE;
	if (strcmp(role, "read-only") == 0)
		return QS_ACCESS_READ;
	if (strcmp(role, "read-write") == 0)
		return QS_ACCESS_WRITE;
	if (strcmp(role, "admin") == 0)
		return QS_ACCESS_ADMIN;
	if (strcmp(role, "write-only") == 0)
		return QS_ACCESS_PUSH_ONLY;
	return QS_ACCESS_NONE;
}

/*
 * Verify a compact JWT. On success fills *out and returns NULL; otherwise
 * returns why (for logs and the 401 body). JSON parse errors in a header or
 * payload are caught here: a bad token must never raise.
 */
const char *
qs_jwt_verify(const char *token, int len, QsToken *out)
{
	const char *dot1,
			   *dot2;
	char	   *hdr,
			   *pay,
			   *sig;
	int			hlen,
				plen,
				slen;
	JsonbContainer *h = NULL,
			   *p = NULL;
	JsonbValue	v;
	char	   *alg;
	double		now,
				t;

	memset(out, 0, sizeof(*out));
	if (len <= 0 || len > JWT_MAX_LEN)
		return "malformed token";
	dot1 = memchr(token, '.', len);
	dot2 = dot1 ? memchr(dot1 + 1, '.', token + len - dot1 - 1) : NULL;
	if (dot1 == NULL || dot2 == NULL || memchr(dot2 + 1, '.', token + len - dot2 - 1))
		return "malformed token";
	if (!b64url_decode(token, dot1 - token, &hdr, &hlen) ||
		!b64url_decode(dot1 + 1, dot2 - dot1 - 1, &pay, &plen) ||
		!b64url_decode(dot2 + 1, token + len - dot2 - 1, &sig, &slen))
		return "malformed token";

	h = json_object_or_null(hdr, hlen);
	p = json_object_or_null(pay, plen);
	if (h == NULL || p == NULL)
		return "malformed token";

	if (getKeyJsonValueFromContainer(h, "alg", 3, &v) == NULL || v.type != jbvString)
		return "token has no algorithm";
	alg = pnstrdup(v.val.string.val, v.val.string.len);

	if (strcmp(alg, "HS256") == 0)
	{
		unsigned char mac[EVP_MAX_MD_SIZE];
		unsigned int maclen = 0;

		if (qs_jwt_secret == NULL || qs_jwt_secret[0] == '\0')
			return "HS256 tokens are not accepted";
		if (HMAC(EVP_sha256(), qs_jwt_secret, strlen(qs_jwt_secret),
				 (const unsigned char *) token, dot2 - token, mac, &maclen) == NULL)
			return "signature check failed";
		if (slen != (int) maclen || CRYPTO_memcmp(mac, sig, maclen) != 0)
			return "bad signature";
	}
	else if (strcmp(alg, "RS256") == 0)
	{
		EVP_PKEY   *key = load_public_key();
		EVP_MD_CTX *md;
		bool		ok;

		if (key == NULL)
			return "RS256 tokens are not accepted";
		md = EVP_MD_CTX_new();
		ok = md != NULL &&
			EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
			EVP_DigestVerify(md, (const unsigned char *) sig, slen,
							 (const unsigned char *) token, dot2 - token) == 1;
		if (md)
			EVP_MD_CTX_free(md);
		if (!ok)
			return "bad signature";
	}
	else
		return "unsupported token algorithm";

	now = (double) time(NULL);
	if (claim_number(p, "exp", &t) && now > t + JWT_LEEWAY_SECONDS)
		return "token expired";
	if (claim_number(p, "nbf", &t) && now + JWT_LEEWAY_SECONDS < t)
		return "token not yet valid";

	if (getKeyJsonValueFromContainer(p, "sub", 3, &v) != NULL && v.type == jbvString)
		out->sub = pnstrdup(v.val.string.val, v.val.string.len);
	if (getKeyJsonValueFromContainer(p, "role", 4, &v) != NULL && v.type == jbvString)
		out->level = role_level(pnstrdup(v.val.string.val, v.val.string.len));
	return NULL;
}

/* May a token of level `have` use a route that needs `need`? */
bool
qs_access_allows(QsAccess have, QsAccess need)
{
	if (have == QS_ACCESS_PUSH_ONLY)
		return need == QS_ACCESS_PUSH_ONLY;
	if (need == QS_ACCESS_PUSH_ONLY)
		need = QS_ACCESS_WRITE;	/* push is a read-write route too */
	return have != QS_ACCESS_NONE && have >= need;
}

/* SQL: queen_streams.verify_token(token text) -> jsonb, for tests and tools */
PG_FUNCTION_INFO_V1(qs_verify_token);
Datum
qs_verify_token(PG_FUNCTION_ARGS)
{
	text	   *t = PG_GETARG_TEXT_PP(0);
	QsToken		tok;
	const char *err = qs_jwt_verify(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), &tok);
	static const char *const names[] = {"none", "read-only", "read-write", "admin", "write-only"};
	QsJson		j;

	qsj_init(&j);
	qsj_object(&j, NULL);
	qsj_bool(&j, "valid", err == NULL);
	qsj_str(&j, "error", err);
	qsj_str(&j, "role", err ? NULL : names[tok.level]);
	qsj_str(&j, "sub", err ? NULL : tok.sub);
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
