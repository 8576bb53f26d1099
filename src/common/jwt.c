/*
 * jwt.c: bearer token verification for the HTTP listener (HS256 and RS256,
 * with OpenSSL), and the access levels its claims grant.
 *
 * A token must carry the algorithm of the configured key: HS256 with
 * the secret of queen_streams.jwt_secret_file (or jwt_secret), RS256 with
 * queen_streams.jwt_public_key_file.
 * "none" and any other algorithm are refused, and so is a token whose
 * algorithm names a key type that is not configured, which is what stops
 * algorithm confusion (an RS256 public key used as an HMAC secret).
 */
#include "common/guc.h"
#include "common/json.h"
#include "common/jwt.h"
#include "common/spi.h"

#include "common/base64.h"
#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "storage/fd.h"
#include "utils/builtins.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <math.h>
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
 * The top-level members of a token's header or payload, read with
 * PostgreSQL's JSON parser and semantic callbacks, never through jsonb:
 * numbers stay text (jsonb_in raises on a number like 1e999999999) and a
 * duplicate member makes the token malformed. An array of strings (aud) is
 * kept as its strings.
 */
typedef struct JwtMember
{
	char	   *name;
	JsonTokenType type;			/* of a scalar; JSON_TOKEN_ARRAY_START, JSON_TOKEN_OBJECT_START */
	char	   *text;			/* scalar text (strings unescaped) */
	List	   *strings;		/* the string elements of an array */
} JwtMember;

typedef struct JwtObject
{
	int			depth;
	bool		root_object;
	bool		duplicate;
	JwtMember  *cur;			/* member whose value is being read */
	List	   *members;
} JwtObject;

static void
jo_object_start(void *state)
{
	JwtObject  *o = state;

	if (o->depth == 0)
		o->root_object = true;
	else if (o->depth == 1 && o->cur)
		o->cur->type = JSON_TOKEN_OBJECT_START;
	o->depth++;
}

static void
jo_end(void *state)
{
	((JwtObject *) state)->depth--;
}

static void
jo_array_start(void *state)
{
	JwtObject  *o = state;

	if (o->depth == 1 && o->cur)
		o->cur->type = JSON_TOKEN_ARRAY_START;
	o->depth++;
}

static void
jo_field_start(void *state, char *fname, bool isnull)
{
	JwtObject  *o = state;
	ListCell   *lc;
	JwtMember  *m;

	if (o->depth != 1)
		return;
	foreach(lc, o->members)
		if (strcmp(((JwtMember *) lfirst(lc))->name, fname) == 0)
			o->duplicate = true;
	m = palloc0(sizeof(JwtMember));
	m->name = fname;
	o->members = lappend(o->members, m);
	o->cur = m;
}

static void
jo_scalar(void *state, char *token, JsonTokenType tokentype)
{
	JwtObject  *o = state;

	if (o->depth == 1 && o->cur)
	{
		o->cur->type = tokentype;
		o->cur->text = token;
	}
	else if (o->depth == 2 && o->cur && o->cur->type == JSON_TOKEN_ARRAY_START &&
			 tokentype == JSON_TOKEN_STRING)
		o->cur->strings = lappend(o->cur->strings, token);
}

/*
 * Parse JSON text into its top-level members; false unless it is one valid
 * JSON object without duplicate members. Never raises: the parser's own
 * errors (stack depth, encoding conversion) are caught here, in our frame.
 */
static bool
json_members(const char *text, int len, List **out)
{
	MemoryContext cxt = CurrentMemoryContext;
	JwtObject	o;
	JsonSemAction sem;
	volatile bool ok = false;

	*out = NIL;
	if (memchr(text, 0, len) != NULL || !pg_verifymbstr(text, len, true))
		return false;
	memset(&o, 0, sizeof(o));
	memset(&sem, 0, sizeof(sem));
	sem.semstate = &o;
	sem.object_start = jo_object_start;
	sem.object_end = jo_end;
	sem.array_start = jo_array_start;
	sem.array_end = jo_end;
	sem.object_field_start = jo_field_start;
	sem.scalar = jo_scalar;
	PG_TRY();
	{
		JsonLexContext *lex = makeJsonLexContextCstringLen((char *) text, len,
														   GetDatabaseEncoding(), true);

		ok = pg_parse_json(lex, &sem) == JSON_SUCCESS && o.root_object && !o.duplicate;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		/* before the signature: any client picks how often, so not at LOG */
		qs_log_dropped_error_at(DEBUG1, "a token's JSON raised while parsed; the token is refused");
		FlushErrorState();
		ok = false;
	}
	PG_END_TRY();
	if (ok)
		*out = o.members;
	return ok;
}

static JwtMember *
member(List *members, const char *name)
{
	ListCell   *lc;

	foreach(lc, members)
		if (strcmp(((JwtMember *) lfirst(lc))->name, name) == 0)
			return lfirst(lc);
	return NULL;
}

/* A member's string value, or NULL when absent or not a string. */
static char *
member_string(List *members, const char *name)
{
	JwtMember  *m = member(members, name);

	return m && m->type == JSON_TOKEN_STRING ? m->text : NULL;
}

/*
 * A numeric claim (exp, nbf, iat): QS_CLAIM_ABSENT, QS_CLAIM_BAD when it is
 * not a finite JSON number (a string "1700000000" included, as RFC 7519's
 * NumericDate says), else QS_CLAIM_OK with *out. strtod never raises.
 */
typedef enum
{
	QS_CLAIM_ABSENT,
	QS_CLAIM_BAD,
	QS_CLAIM_OK
} ClaimNumber;

static ClaimNumber
claim_number(List *members, const char *key, double *out)
{
	JwtMember  *m = member(members, key);
	char	   *end;
	double		d;

	*out = 0;
	if (m == NULL)
		return QS_CLAIM_ABSENT;
	if (m->type != JSON_TOKEN_NUMBER)
		return QS_CLAIM_BAD;
	d = strtod(m->text, &end);
	if (*end != '\0' || !isfinite(d))
		return QS_CLAIM_BAD;
	*out = d;
	return QS_CLAIM_OK;
}

/* Whether the aud claim (a string or an array of strings) names `want`. */
static bool
audience_has(List *members, const char *want)
{
	JwtMember  *m = member(members, "aud");
	ListCell   *lc;

	if (m == NULL)
		return false;
	if (m->type == JSON_TOKEN_STRING)
		return strcmp(m->text, want) == 0;
	if (m->type != JSON_TOKEN_ARRAY_START)
		return false;
	foreach(lc, m->strings)
		if (strcmp((char *) lfirst(lc), want) == 0)
			return true;
	return false;
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
	List	   *h,
			   *p;
	char	   *alg;
	char	   *s;
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

	if (!json_members(hdr, hlen, &h) || !json_members(pay, plen, &p))
		return "malformed token";

	alg = member_string(h, "alg");
	if (alg == NULL)
		return "token has no algorithm";

	if (strcmp(alg, "HS256") == 0)
	{
		unsigned char mac[EVP_MAX_MD_SIZE];
		unsigned int maclen = 0;

		const char *secret = qs_jwt_hmac_secret();

		if (secret == NULL)
			return "HS256 tokens are not accepted";
		if (HMAC(EVP_sha256(), secret, strlen(secret),
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

	/*
	 * RFC 7515 4.1.11: a recipient must refuse a token whose crit header
	 * names extensions it does not process; we process none.
	 */
	if (member(h, "crit") != NULL)
		return "token has a critical header that is not understood";

	now = (double) time(NULL);
	switch (claim_number(p, "exp", &t))
	{
		case QS_CLAIM_BAD:
			return "token exp is not a number";
		case QS_CLAIM_OK:
			if (now > t + JWT_LEEWAY_SECONDS)
				return "token expired";
			break;
		case QS_CLAIM_ABSENT:
			if (qs_jwt_require_exp)
				return "token has no expiry";
			break;
	}
	switch (claim_number(p, "nbf", &t))
	{
		case QS_CLAIM_BAD:
			return "token nbf is not a number";
		case QS_CLAIM_OK:
			if (now + JWT_LEEWAY_SECONDS < t)
				return "token not yet valid";
			break;
		case QS_CLAIM_ABSENT:
			break;
	}
	if (claim_number(p, "iat", &t) == QS_CLAIM_BAD)
		return "token iat is not a number";
	if (qs_jwt_issuer != NULL && qs_jwt_issuer[0] != '\0' &&
		((s = member_string(p, "iss")) == NULL || strcmp(s, qs_jwt_issuer) != 0))
		return "token issuer not accepted";
	if (qs_jwt_audience != NULL && qs_jwt_audience[0] != '\0' &&
		!audience_has(p, qs_jwt_audience))
		return "token audience not accepted";

	out->sub = member_string(p, "sub");
	out->level = role_level(member_string(p, "role"));
	if (qs_jwt_tenant_claim != NULL && qs_jwt_tenant_claim[0] != '\0')
	{
		out->tenant_present = member(p, qs_jwt_tenant_claim) != NULL;
		out->tenant = member_string(p, qs_jwt_tenant_claim);
	}
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
	if (qs_jwt_tenant_claim != NULL && qs_jwt_tenant_claim[0] != '\0')
		qsj_str(&j, "tenant", err ? NULL : tok.tenant);
	qsj_end_object(&j);
	PG_RETURN_JSONB_P(qsj_jsonb(&j));
}
