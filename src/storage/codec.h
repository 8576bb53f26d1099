/*
 * codec.h: the segment format (codec.c): frames, their flags, and the
 * zstd segments that hold them.
 */
#ifndef QS_STORAGE_CODEC_H
#define QS_STORAGE_CODEC_H

#include "common/base.h"

#include "lib/stringinfo.h"
#include "utils/uuid.h"

/* Frame flags. */
#define QS_FLAG_TRACE		0x01
#define QS_FLAG_PRODUCER_SUB	0x02
#define QS_FLAG_ENCRYPTED	0x04

#define QS_HASH_LEN 16
#define QS_FRAME_MIN_BODY 19	/* flags + id + txn_len */

/* One decoded frame; every pointer points into the decompressed buffer. */
typedef struct QsFrame
{
	uint8		flags;
	const uint8 *id;			/* 16 bytes */
	const uint8 *trace;			/* 16 bytes or NULL */
	const char *txn;
	int			txn_len;
	const char *psub;			/* NULL when absent */
	int			psub_len;
	const char *payload;
	int			payload_len;
} QsFrame;

/* codec.c */
extern void qs_frame_append(StringInfo raw, uint8 flags, const pg_uuid_t *id,
							const pg_uuid_t *trace, const char *txn, int txn_len,
							const char *psub, int psub_len,
							const char *payload, int payload_len);
extern bool qs_frame_fits(bool trace, int txn_len, bool psub, int psub_len, int payload_len);
extern uint64 qs_frame_check(bool trace, int txn_len, bool psub, int psub_len, int payload_len);
extern bytea *qs_segment_compress(const char *raw, Size len);
extern QsFrame *qs_segment_decode(bytea *blob, int64 count, const pg_uuid_t *pid, int64 base);
extern QsFrame *qs_segment_try_decode(bytea *blob, int64 count, char **why);
extern void qs_segment_corrupt_error(const pg_uuid_t *pid, int64 base, const char *why) pg_attribute_noreturn();
extern void qs_txn_hash(const char *txn, int len, uint8 *out);

#endif							/* QS_STORAGE_CODEC_H */
