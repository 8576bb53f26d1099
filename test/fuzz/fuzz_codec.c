/*
 * fuzz_codec: the segment decoder (qs_segment_decode and its frame walk,
 * src/storage/codec.c).
 *
 * Input: byte 0 chooses the mode, bytes 1-2 the frame count (u16 LE), the rest
 * is either a blob as stored (bit 0 clear: zstd frame or garbage) or the raw
 * frames (bit 0 set), compressed here first so the walk sees every shape.
 * Bit 1 passes a partition id (the error names it), bit 2 sets a 1 kB size cap.
 * Checked: a decode either succeeds or raises XX001 (data_corrupted); a
 * successful one tiles the buffer exactly, and packing its frames again with
 * qs_frame_append gives the same bytes.
 */
#include "shim.h"

#include "storage/codec.c"
#include "common/json_in.c"
#include "common/uuid7.c"

int			qs_max_segment_kb = 256 * 1024;
int			qs_zstd_level = 1;

static void
run(const uint8_t *data, size_t size)
{
	uint8		mode = data[0];
	int64		count = data[1] | (data[2] << 8);
	const uint8 *body = data + 3;
	size_t		blen = size - 3;
	bytea	   *volatile blob = NULL;
	QsFrame    *volatile frames = NULL;
	pg_uuid_t	pid;
	size_t		rawlen = 0;
	uint8	   *raw = NULL;

	memset(pid.data, 0xab, UUID_LEN);
	qs_max_segment_kb = (mode & 4) ? 1 : 256 * 1024;
	if (mode & 1)
	{
		if (!fuzz_try(blob = qs_segment_compress((const char *) body, blen)))
			return;				/* over the cap: refused on push already */
	}
	else
	{
		blob = palloc(VARHDRSZ + blen);
		SET_VARSIZE(blob, VARHDRSZ + blen);
		memcpy(VARDATA(blob), body, blen);
	}
	if (!fuzz_try(frames = qs_segment_decode(blob, count, (mode & 2) ? &pid : NULL, 42)))
	{
		if (fuzz_last_sqlstate != ERRCODE_DATA_CORRUPTED)
		{
			fprintf(stderr, "decode raised %s, not XX001: %s\n",
					unpack_sql_state(fuzz_last_sqlstate), fuzz_last_message);
			abort();
		}
		return;
	}
	if (!fuzz_try(raw = segment_decompress(blob, NULL, 0, &rawlen)))
		abort();				/* it just worked */

	{
		StringInfoData again;

		initStringInfo(&again);
		for (int64 i = 0; i < count; i++)
		{
			QsFrame    *f = &frames[i];
			pg_uuid_t	id,
						trace;

			/* the bytes themselves are read below: ASan checks their bounds */
			if (f->txn_len < 0 || f->psub_len < 0 || f->payload_len < 0)
				abort();
			memcpy(id.data, f->id, UUID_LEN);
			if (f->trace)
				memcpy(trace.data, f->trace, UUID_LEN);
			if (!fuzz_try(qs_frame_append(&again, f->flags & ~(QS_FLAG_TRACE | QS_FLAG_PRODUCER_SUB),
										  &id, f->trace ? &trace : NULL, f->txn, f->txn_len,
										  f->psub, f->psub_len, f->payload, f->payload_len)))
				abort();
		}
		if ((size_t) again.len != rawlen || memcmp(again.data, raw, rawlen) != 0)
		{
			fprintf(stderr, "frames do not pack back to the same bytes\n");
			abort();
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	run(data, size);
	fuzz_reset();
	return 0;
}
