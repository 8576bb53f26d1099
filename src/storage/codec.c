/*
 * codec.c: the segment format: frames packed back to back, the
 * whole segment one zstd frame, and the xxh3-128 hash of each transaction id.
 *
 * Frame: u32 LE body_len | u8 flags | 16B message id | [16B trace id]
 *        | u16 LE txn_len | txn | [u16 LE psub_len | psub] | payload
 */
#include "storage/storage.h"
#include "common/ids.h"

#include "funcapi.h"
#include "utils/builtins.h"

#include <xxhash.h>
#include <zstd.h>

static ZSTD_CCtx *cctx = NULL;
static ZSTD_DCtx *dctx = NULL;

static void
put_u16(StringInfo s, uint16 v)
{
	uint8		b[2] = {(uint8) v, (uint8) (v >> 8)};

	appendBinaryStringInfo(s, (char *) b, 2);
}

static void
put_u32(StringInfo s, uint32 v)
{
	uint8		b[4] = {(uint8) v, (uint8) (v >> 8), (uint8) (v >> 16), (uint8) (v >> 24)};

	appendBinaryStringInfo(s, (char *) b, 4);
}

static uint16
get_u16(const uint8 *p)
{
	return (uint16) (p[0] | (p[1] << 8));
}

static uint32
get_u32(const uint8 *p)
{
	return (uint32) p[0] | ((uint32) p[1] << 8) | ((uint32) p[2] << 16) | ((uint32) p[3] << 24);
}

typedef enum FrameLimit
{
	FRAME_FITS,
	FRAME_TXN_LONG,
	FRAME_PSUB_LONG,
	FRAME_TOO_LARGE
} FrameLimit;

/* The limit a frame of these sizes breaks, and its length after its u32 length word. */
static FrameLimit
frame_limit(bool trace, int txn_len, bool psub, int psub_len, int payload_len, uint64 *body)
{
	*body = 1 + UUID_LEN + 2 + (uint64) txn_len + payload_len;
	if (trace)
		*body += UUID_LEN;
	if (psub)
		*body += 2 + psub_len;
	if (txn_len > PG_UINT16_MAX)
		return FRAME_TXN_LONG;
	if (psub && psub_len > PG_UINT16_MAX)
		return FRAME_PSUB_LONG;
	if (*body > (uint64) qs_max_segment_kb * 1024)
		return FRAME_TOO_LARGE;
	return FRAME_FITS;
}

/* Whether qs_frame_append would take the frame (qs_frame_check raises the limit broken). */
bool
qs_frame_fits(bool trace, int txn_len, bool psub, int psub_len, int payload_len)
{
	uint64		body;

	return frame_limit(trace, txn_len, psub, psub_len, payload_len, &body) == FRAME_FITS;
}

/* Raise the limit a frame of these sizes breaks, if any; else its length after the length word. */
uint64
qs_frame_check(bool trace, int txn_len, bool psub, int psub_len, int payload_len)
{
	uint64		body;

	switch (frame_limit(trace, txn_len, psub, psub_len, payload_len, &body))
	{
		case FRAME_FITS:
			break;
		case FRAME_TXN_LONG:
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("transactionId is too long"),
					 errdetail("A transactionId is at most 65535 bytes; this one has %d.", txn_len)));
			break;
		case FRAME_PSUB_LONG:
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("producer subject is too long")));
			break;
		case FRAME_TOO_LARGE:
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("message is too large"),
					 errdetail("A frame of %llu bytes exceeds queen_streams.max_segment_size.",
							   (unsigned long long) body)));
			break;
	}
	return body;
}

void
qs_frame_append(StringInfo raw, uint8 flags, const pg_uuid_t *id,
				const pg_uuid_t *trace, const char *txn, int txn_len,
				const char *psub, int psub_len,
				const char *payload, int payload_len)
{
	uint64		body = qs_frame_check(trace != NULL, txn_len, psub != NULL, psub_len, payload_len);

	if (trace)
		flags |= QS_FLAG_TRACE;
	if (psub)
		flags |= QS_FLAG_PRODUCER_SUB;

	put_u32(raw, (uint32) body);
	appendStringInfoChar(raw, (char) flags);
	appendBinaryStringInfo(raw, (const char *) id->data, UUID_LEN);
	if (trace)
		appendBinaryStringInfo(raw, (const char *) trace->data, UUID_LEN);
	put_u16(raw, (uint16) txn_len);
	appendBinaryStringInfo(raw, txn, txn_len);
	if (psub)
	{
		put_u16(raw, (uint16) psub_len);
		appendBinaryStringInfo(raw, psub, psub_len);
	}
	appendBinaryStringInfo(raw, payload, payload_len);
}

/*
 * Below this many packed bytes a segment is compressed at zstd's level -1,
 * whatever zstd_level says. Level -1 stores literals raw: the literal
 * (Huffman) stage of the positive levels costs about 3 us a segment whatever
 * its size, more time than the few dozen bytes it saves on a segment of a
 * few small messages (a group commit of 32 one-message requests over 16
 * partitions writes 16 such segments).
 */
#define QS_SMALL_SEGMENT 1024

bytea *
qs_segment_compress(const char *raw, Size len)
{
	size_t		bound = ZSTD_compressBound(len);
	bytea	   *out;
	size_t		n;

	if (len > (Size) qs_max_segment_kb * 1024)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("segment is too large"),
				 errdetail("The packed frames for one partition take %zu bytes, more than queen_streams.max_segment_size.",
						   len),
				 errhint("Push fewer or smaller messages per request.")));
	if (cctx == NULL)
	{
		cctx = ZSTD_createCCtx();
		if (cctx == NULL)
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	}
	ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel,
						   len < QS_SMALL_SEGMENT ? -1 : qs_zstd_level);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);

	out = palloc(VARHDRSZ + bound);
	n = ZSTD_compress2(cctx, VARDATA(out), bound, raw, len);
	if (ZSTD_isError(n))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("zstd compression failed: %s", ZSTD_getErrorName(n))));
	SET_VARSIZE(out, VARHDRSZ + n);
	return out;
}

/*
 * Corruption is reported, not raised, inside the decoder: a wildcard pop
 * must be able to step over a damaged partition (pop.c), everyone else
 * raises the one error below.
 */
static bool
corrupt(char **why, const char *fmt,...)
pg_attribute_printf(2, 3);

static bool
corrupt(char **why, const char *fmt,...)
{
	char		detail[256];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	*why = pstrdup(detail);
	return false;
}

void
qs_segment_corrupt_error(const pg_uuid_t *pid, int64 base, const char *why)
{
	char		ps[QS_UUID_STRLEN + 1];

	if (pid)
	{
		qs_uuid_format(pid, ps);
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("corrupt log segment in partition %s at base offset " INT64_FORMAT, ps, base),
				 errdetail("%s", why)));
	}
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("corrupt log segment"),
			 errdetail("%s", why)));
}

/* Decompress a segment, refusing anything over the size cap. */
static uint8 *
segment_decompress(bytea *blob, size_t *len, char **why)
{
	const char *src = VARDATA_ANY(blob);
	size_t		srclen = VARSIZE_ANY_EXHDR(blob);
	unsigned long long size = ZSTD_getFrameContentSize(src, srclen);
	uint8	   *raw;
	size_t		n;

	if (size == ZSTD_CONTENTSIZE_ERROR)
		return corrupt(why, "The blob is not a zstd frame."), NULL;
	if (size == ZSTD_CONTENTSIZE_UNKNOWN)
		return corrupt(why, "The zstd frame does not declare its size."), NULL;
	if (size > (unsigned long long) qs_max_segment_kb * 1024)
		return corrupt(why, "It claims %llu decompressed bytes, over queen_streams.max_segment_size.", size), NULL;

	if (dctx == NULL)
	{
		dctx = ZSTD_createDCtx();
		if (dctx == NULL)
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
		ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, 27);
	}

	raw = palloc(size > 0 ? size : 1);
	n = ZSTD_decompressDCtx(dctx, raw, size, src, srclen);
	if (ZSTD_isError(n))
		return corrupt(why, "zstd: %s.", ZSTD_getErrorName(n)), NULL;
	if (n != size)
		return corrupt(why, "Decompressed %zu bytes, the frame header declared %llu.", n, (unsigned long long) size), NULL;
	*len = size;
	return raw;
}

/*
 * Decompress and split a segment into exactly `count` frames. Anything that
 * does not tile the buffer exactly, or claims more than the size cap, is
 * corrupt: NULL with *why set, never a short batch. Every size computed
 * from `count` is bounded by the buffer first, so nothing can wrap.
 */
QsFrame *
qs_segment_try_decode(bytea *blob, int64 count, char **why)
{
	size_t		size;
	uint8	   *raw = segment_decompress(blob, &size, why);
	size_t		pos = 0;
	QsFrame    *frames;

	if (raw == NULL)
		return NULL;
	if (count < 1 || (uint64) count > size / (4 + QS_FRAME_MIN_BODY))
		return corrupt(why, "%lld frames cannot fit in %zu bytes.", (long long) count, size), NULL;

	frames = palloc(sizeof(QsFrame) * (Size) count);	/* count <= size / 23: no wrap */
	for (int64 i = 0; i < count; i++)
	{
		QsFrame    *f = &frames[i];
		const uint8 *p;
		const uint8 *end;
		uint32		body;

		if (size - pos < 4)
			return corrupt(why, "Frame " INT64_FORMAT " of " INT64_FORMAT " is missing.", i, count), NULL;
		body = get_u32(raw + pos);
		pos += 4;
		if (body < QS_FRAME_MIN_BODY || body > size - pos)
			return corrupt(why, "Frame " INT64_FORMAT " has an impossible body length %u.", i, body), NULL;
		p = raw + pos;
		end = p + body;
		pos += body;

		f->flags = *p++;
		f->id = p;
		p += UUID_LEN;
		f->trace = NULL;
		if (f->flags & QS_FLAG_TRACE)
		{
			if (end - p < UUID_LEN + 2)
				return corrupt(why, "Frame " INT64_FORMAT " is too short for its trace id.", i), NULL;
			f->trace = p;
			p += UUID_LEN;
		}
		f->txn_len = get_u16(p);
		p += 2;
		if (end - p < f->txn_len)
			return corrupt(why, "Frame " INT64_FORMAT " is too short for its transaction id.", i), NULL;
		f->txn = (const char *) p;
		p += f->txn_len;
		f->psub = NULL;
		f->psub_len = 0;
		if (f->flags & QS_FLAG_PRODUCER_SUB)
		{
			if (end - p < 2 || end - p - 2 < get_u16(p))
				return corrupt(why, "Frame " INT64_FORMAT " is too short for its producer subject.", i), NULL;
			f->psub_len = get_u16(p);
			p += 2;
			f->psub = (const char *) p;
			p += f->psub_len;
		}
		f->payload = (const char *) p;
		f->payload_len = end - p;
	}
	if (pos != size)
		return corrupt(why, "%zu bytes follow the last of " INT64_FORMAT " frames.", size - pos, count), NULL;
	return frames;
}

/* The same, raising XX001 naming the segment (pid may be NULL). */
QsFrame *
qs_segment_decode(bytea *blob, int64 count, const pg_uuid_t *pid, int64 base)
{
	char	   *why = NULL;
	QsFrame    *frames = qs_segment_try_decode(blob, count, &why);

	if (frames == NULL)
		qs_segment_corrupt_error(pid, base, why);
	return frames;
}

void
qs_txn_hash(const char *txn, int len, uint8 *out)
{
	XXH128_hash_t h = XXH3_128bits(txn, len);
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, h);	/* big endian: high 64 bits first */
	memcpy(out, c.digest, QS_HASH_LEN);
}

/* SQL: queen.txn_hash(text) */
PG_FUNCTION_INFO_V1(qs_txn_hash_sql);
Datum
qs_txn_hash_sql(PG_FUNCTION_ARGS)
{
	text	   *t = PG_GETARG_TEXT_PP(0);
	bytea	   *out = palloc(VARHDRSZ + QS_HASH_LEN);

	qs_txn_hash(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), (uint8 *) VARDATA(out));
	SET_VARSIZE(out, VARHDRSZ + QS_HASH_LEN);
	PG_RETURN_BYTEA_P(out);
}

/* SQL: queen.segment_pack(jsonb) -> bytea, for tests and tools */
PG_FUNCTION_INFO_V1(qs_segment_pack);
Datum
qs_segment_pack(PG_FUNCTION_ARGS)
{
	Jsonb	   *jb = PG_GETARG_JSONB_P(0);
	StringInfoData raw;
	int			n;

	if (!JB_ROOT_IS_ARRAY(jb) || JB_ROOT_IS_SCALAR(jb))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("segment_pack expects a JSON array of frames")));
	initStringInfo(&raw);
	n = JB_ROOT_COUNT(jb);
	for (int i = 0; i < n; i++)
	{
		JsonbValue *v = getIthJsonbValueFromContainer(&jb->root, i);
		JsonbContainer *o = qs_json_container(v);
		JsonbValue	pv;
		pg_uuid_t	id,
					trace;
		bool		has_trace;
		char	   *txn,
				   *psub,
				   *payload = "";
		int			plen = 0;
		char		what[32];

		snprintf(what, sizeof(what), "frame %d", i);
		if (o == NULL || !JsonContainerIsObject(o))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must be a JSON object", what)));
		qs_json_uuid(o, "id", what, true, &id);
		has_trace = qs_json_uuid(o, "traceId", what, false, &trace);
		txn = qs_json_string(o, "transactionId", what, true);
		psub = qs_json_string(o, "producerSub", what, false);
		if (qs_json_get(o, "payload", &pv))
			payload = qs_json_text(&pv, &plen);
		/* "encrypted": the payload is taken as an envelope (tests of stored envelopes) */
		qs_frame_append(&raw, qs_json_bool(o, "encrypted", what, false) ? QS_FLAG_ENCRYPTED : 0,
						&id, has_trace ? &trace : NULL, txn, strlen(txn),
						psub, psub ? strlen(psub) : 0, payload, plen);
	}
	PG_RETURN_BYTEA_P(qs_segment_compress(raw.data, raw.len));
}

/* SQL: queen.segment_frames(bytea, bigint) -> SETOF record */
PG_FUNCTION_INFO_V1(qs_segment_frames);
Datum
qs_segment_frames(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bytea	   *blob = PG_GETARG_BYTEA_PP(0);
	int64		count = PG_GETARG_INT64(1);
	QsFrame    *frames;

	InitMaterializedSRF(fcinfo, 0);
	frames = qs_segment_decode(blob, count, NULL, 0);
	for (int64 i = 0; i < count; i++)
	{
		QsFrame    *f = &frames[i];
		Datum		values[7];
		bool		nulls[7] = {false};
		pg_uuid_t	id,
					trace;

		memcpy(id.data, f->id, UUID_LEN);
		values[0] = Int32GetDatum((int32) i);
		values[1] = Int32GetDatum(f->flags);
		values[2] = qs_uuid_datum(&id);
		if (f->trace)
		{
			memcpy(trace.data, f->trace, UUID_LEN);
			values[3] = qs_uuid_datum(&trace);
		}
		else
			nulls[3] = true;
		values[4] = PointerGetDatum(cstring_to_text_with_len(f->txn, f->txn_len));
		if (f->psub)
			values[5] = PointerGetDatum(cstring_to_text_with_len(f->psub, f->psub_len));
		else
			nulls[5] = true;
		values[6] = PointerGetDatum(cstring_to_text_with_len(f->payload, f->payload_len));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* SQL: queen.segment_decompress(bytea) -> bytea, the packed frames */
PG_FUNCTION_INFO_V1(qs_segment_decompress);
Datum
qs_segment_decompress(PG_FUNCTION_ARGS)
{
	size_t		len;
	char	   *why = NULL;
	uint8	   *raw = segment_decompress(PG_GETARG_BYTEA_PP(0), &len, &why);
	bytea	   *out;

	if (raw == NULL)
		qs_segment_corrupt_error(NULL, 0, why);
	out = palloc(VARHDRSZ + len);

	SET_VARSIZE(out, VARHDRSZ + len);
	memcpy(VARDATA(out), raw, len);
	PG_RETURN_BYTEA_P(out);
}
