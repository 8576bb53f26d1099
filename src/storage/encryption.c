/*
 * encryption.c: payload envelopes for queues with encryption enabled
 *, byte-compatible with Queen's.
 *
 * AES-256-GCM; 16 random IV bytes are generated and stored but only the
 * first 12 are the nonce (Queen's original OpenSSL code never set the IV
 * length); 16-byte tag. The stored payload is the JSON text
 * {"v":2,"encrypted":"<b64>","iv":"<b64 16 bytes>","authTag":"<b64 16 bytes>"}
 * whose tag also covers its binding (the AAD): the partition id (which
 * names its queue and tenant) and the transaction id of its frame, so an
 * envelope copied into another partition or message does not open. Ids,
 * not names: a dump and restore keeps them, and nothing renames a queue.
 * Queen's envelope, the same without "v" and with no AAD, still opens
 * (written before version 2, or by Queen) unless
 * queen_streams.encryption_unbound_read is off.
 *
 * Encryption fails closed: without a usable key, or on a cipher error, the
 * push is refused and nothing is stored, unless
 * queen_streams.encryption_fail_open (Queen's behaviour) stores the
 * plaintext with a WARNING. Reading decrypts only frames (and dead letters)
 * flagged ENCRYPTED, and serves one that does not decrypt as stored, with a
 * WARNING.
 */
#include "storage/storage.h"
#include "common/guc.h"
#include "common/ids.h"

#include "common/base64.h"
#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"

#include <openssl/evp.h>

#define QS_KEY_LEN	32
#define QS_IV_LEN	16
#define QS_NONCE_LEN 12
#define QS_TAG_LEN	16
#define QS_ENVELOPE_VERSION 2

/* the AAD of a version 2 envelope: a label, the partition id, the txn id */
static const char aad_label[] = "queen_streams envelope v2";

static uint8 *
aad_of(const QsSeal *seal, int *len)
{
	uint8	   *aad = palloc(sizeof(aad_label) + UUID_LEN + 2 + seal->txn_len);
	uint8	   *p = aad;

	memcpy(p, aad_label, sizeof(aad_label));	/* with its NUL: a fixed-length label */
	p += sizeof(aad_label);
	memcpy(p, seal->pid->data, UUID_LEN);
	p += UUID_LEN;
	/* the length first: no two (partition, txn) give the same bytes */
	*p++ = (uint8) ((seal->txn_len >> 8) & 0xff);
	*p++ = (uint8) (seal->txn_len & 0xff);
	if (seal->txn_len > 0)
		memcpy(p, seal->txn, seal->txn_len);
	p += seal->txn_len;
	*len = p - aad;
	return aad;
}

/*
 * The key: encryption_key_file's, else encryption_key, else
 * QUEEN_ENCRYPTION_KEY; exactly 64 hex digits.
 */
static bool
load_key(uint8 *key)
{
	const char *src = qs_encryption_key_text() ? qs_encryption_key_text()
		: getenv("QUEEN_ENCRYPTION_KEY");

	if (src == NULL || strlen(src) != QS_KEY_LEN * 2)
		return false;
	for (int i = 0; i < QS_KEY_LEN; i++)
	{
		int			hi = qs_hexval(src[2 * i]),
					lo = qs_hexval(src[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		key[i] = (uint8) ((hi << 4) | lo);
	}
	return true;
}

static char *
b64(const uint8 *src, int len)
{
	int			n = pg_b64_enc_len(len);
	char	   *out = palloc(n + 1);

	n = pg_b64_encode((const char *) src, len, out, n);
	if (n < 0)
		elog(ERROR, "base64 encoding failed");
	out[n] = '\0';
	return out;
}

static bool
aes_gcm(bool enc, const uint8 *key, const uint8 *nonce, const uint8 *aad, int aadlen,
		const uint8 *in, int inlen, uint8 *out, uint8 *tag)
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	int			n = 0,
				fin = 0,
				aadout = 0;
	bool		ok;

	if (ctx == NULL)
		return false;
	ok = EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL, enc ? 1 : 0) == 1 &&
		EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, QS_NONCE_LEN, NULL) == 1 &&
		EVP_CipherInit_ex(ctx, NULL, NULL, key, nonce, enc ? 1 : 0) == 1 &&
		(aadlen == 0 || EVP_CipherUpdate(ctx, NULL, &aadout, aad, aadlen) == 1) &&
		(inlen == 0 || EVP_CipherUpdate(ctx, out, &n, in, inlen) == 1);
	if (ok && !enc)
		ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, QS_TAG_LEN, tag) == 1;
	/* for decryption this is where a wrong key or a forged tag fails */
	ok = ok && EVP_CipherFinal_ex(ctx, out + n, &fin) == 1;
	if (ok && enc)
		ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, QS_TAG_LEN, tag) == 1;
	EVP_CIPHER_CTX_free(ctx);
	return ok && n + fin == inlen;
}

/*
 * Replace a payload by its envelope, bound to seal. Without a usable key or
 * on a cipher failure it raises (nothing is stored), or with
 * queen_streams.encryption_fail_open returns false after a WARNING naming
 * the queue (the caller keeps the plaintext).
 */
bool
qs_encrypt_payload(const char *queue, const QsSeal *seal, const char *plain, int len,
				   char **env, int *envlen)
{
	uint8		key[QS_KEY_LEN];
	uint8		iv[QS_IV_LEN];
	uint8		tag[QS_TAG_LEN];
	uint8	   *ct;
	uint8	   *aad;
	int			aadlen;
	StringInfoData s;

	if (!load_key(key))
	{
		ereport(qs_encryption_fail_open ? WARNING : ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("queue \"%s\" has encryption enabled but no usable encryption key is configured", queue),
				 qs_encryption_fail_open ? errdetail("The message was stored unencrypted.")
				 : errdetail("Nothing was stored."),
				 errhint("Set queen_streams.encryption_key (or QUEEN_ENCRYPTION_KEY) to 64 hex digits, "
						 "or turn queen_streams.encryption_fail_open on to store plaintext.")));
		return false;
	}
	qs_random_bytes(iv, QS_IV_LEN);
	ct = palloc(len + 1);
	aad = aad_of(seal, &aadlen);
	if (!aes_gcm(true, key, iv, aad, aadlen, (const uint8 *) plain, len, ct, tag))
	{
		ereport(qs_encryption_fail_open ? WARNING : ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not encrypt a message for queue \"%s\"", queue),
				 qs_encryption_fail_open ? errdetail("The message was stored unencrypted.")
				 : errdetail("Nothing was stored.")));
		return false;
	}
	initStringInfo(&s);
	appendStringInfo(&s, "{\"v\":%d,\"encrypted\":\"%s\",\"iv\":\"%s\",\"authTag\":\"%s\"}",
					 QS_ENVELOPE_VERSION, b64(ct, len), b64(iv, QS_IV_LEN), b64(tag, QS_TAG_LEN));
	*env = s.data;
	*envlen = s.len;
	return true;
}

/* A base64 string field of an envelope, decoded; false if absent or bad. */
static bool
env_field(Jsonb *jb, const char *key, uint8 **out, int *outlen)
{
	JsonbValue	v;
	int			n;

	if (getKeyJsonValueFromContainer(&jb->root, key, strlen(key), &v) == NULL ||
		v.type != jbvString)
		return false;
	*out = palloc(pg_b64_dec_len(v.val.string.len) + 1);
	n = pg_b64_decode(v.val.string.val, v.val.string.len, (char *) *out,
					  pg_b64_dec_len(v.val.string.len));
	if (n < 0)
		return false;
	*outlen = n;
	return true;
}

/* The envelope's version: 1 without "v" (Queen's), 0 if "v" is not a known one. */
static int
env_version(Jsonb *jb)
{
	JsonbValue	v;

	if (getKeyJsonValueFromContainer(&jb->root, "v", 1, &v) == NULL)
		return 1;
	if (v.type == jbvNumeric &&
		DatumGetBool(DirectFunctionCall2(numeric_eq, NumericGetDatum(v.val.numeric),
										 DirectFunctionCall1(int4_numeric, Int32GetDatum(QS_ENVELOPE_VERSION)))))
		return QS_ENVELOPE_VERSION;
	return 0;
}

/*
 * Decrypt the envelope of a frame (or dead letter) flagged ENCRYPTED, which
 * seal names, into *plain. Returns false, with a WARNING, when it is not an
 * envelope or does not decrypt (another key, altered, or bound to another
 * partition or message): the caller then serves the payload as stored.
 * Never raises on what it reads.
 */
bool
qs_decrypt_payload(const QsSeal *seal, const char *payload, int len, char **plain, int *plainlen)
{
	Jsonb	   *jb;
	uint8	   *ct,
			   *iv,
			   *tag;
	int			ctlen,
				ivlen,
				taglen;
	uint8		key[QS_KEY_LEN];
	char	   *text;
	JsonLexContext *lex;
	int			version = 0;
	uint8	   *aad = NULL;
	int			aadlen = 0;

	text = pnstrdup(payload, len);
	lex = makeJsonLexContextCstringLen(text, len, GetDatabaseEncoding(), false);
	if (memchr(payload, 0, len) != NULL || !pg_verifymbstr(payload, len, true) ||
		pg_parse_json(lex, &nullSemAction) != JSON_SUCCESS ||
		!JB_ROOT_IS_OBJECT(jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)))) ||
		(version = env_version(jb)) == 0 ||
		!env_field(jb, "encrypted", &ct, &ctlen) ||
		!env_field(jb, "iv", &iv, &ivlen) || ivlen < QS_NONCE_LEN ||
		!env_field(jb, "authTag", &tag, &taglen) || taglen != QS_TAG_LEN)
	{
		ereport(WARNING,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("a stored message flagged encrypted does not hold an encryption envelope"),
				 errdetail("The message is served as stored.")));
		return false;
	}

	if (!load_key(key))
	{
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot decrypt a stored message: no encryption key is configured"),
				 errdetail("The message is served as stored.")));
		return false;
	}
	if (version == 1 && !qs_encryption_unbound_read)
	{
		ereport(WARNING,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("refused to decrypt a stored message whose envelope is not bound to its partition and message"),
				 errdetail("The message is served as stored."),
				 errhint("Such envelopes were written before queen_streams 0.8.0 or by Queen; "
						 "turn queen_streams.encryption_unbound_read on to read them.")));
		return false;
	}
	if (version == QS_ENVELOPE_VERSION)
		aad = aad_of(seal, &aadlen);
	*plain = palloc(ctlen + 1);
	if (!aes_gcm(false, key, iv, aad, aadlen, ct, ctlen, (uint8 *) *plain, tag))
	{
		ereport(WARNING,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("could not decrypt a stored message"),
				 errdetail("The key does not match, the envelope was altered, or it was sealed for another "
						   "partition or message; the message is served as stored.")));
		return false;
	}
	(*plain)[ctlen] = '\0';
	*plainlen = ctlen;
	return true;
}
