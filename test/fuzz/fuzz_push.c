/*
 * fuzz_push: the push reader (queen.push, src/storage/push_text.c: the jsonb
 * body walked into items through the checks push_text applies;
 * src/storage/push.c: grouped and packed into segments) with the storage
 * below it replaced by checks.
 *
 * Input: the request body, as the listener hands it to queen.push (NUL-free,
 * valid UTF-8, parsed as jsonb). Partitions resolve to made-up ids; each
 * appended segment is decoded again with the real decoder and compared with
 * the hashes push computed (in ascending partition order, every row locked
 * when there are several); a client id whose hash starts with a byte that
 * is a multiple of 4 is reported as already stored, so the duplicate and
 * repack paths run too. Checked:
 * push either answers one result per item or raises an input error (a 400:
 * 22023, 22P02, 22003, 54000), never anything else.
 */
#include "shim.h"

#include "storage/push.c"
#include "storage/push_text.c"
#include "common/json_scan.c"
#include "storage/codec.c"
#include "common/json_in.c"
#include "common/json_out.c"
#include "common/uuid7.c"
#include "common/text.c"
#include "mb/pg_wchar.h"

int			qs_max_segment_kb = 256 * 1024;
int			qs_zstd_level = 1;
QsPushedHook qs_pushed_hook = NULL;

#define NEVER(decl) decl { fprintf(stderr, "shim: %s called\n", __func__); abort(); }
NEVER(int timestamp2tm(TimestampTz dt, int *tzp, struct pg_tm *tm, fsec_t *fsec, const char **tzn, pg_tz *attimezone))
/* queen.push_text_many's, and the text reader's number check */
NEVER(void deconstruct_array(ArrayType *array, Oid elmtype, int elmlen, bool elmbyval, char elmalign, Datum **elemsp, bool **nullsp, int *nelemsp))
NEVER(ArrayType *construct_array(Datum *elems, int nelems, Oid elmtype, int elmlen, bool elmbyval, char elmalign))
NEVER(Datum DirectFunctionCall3Coll(PGFunction func, Oid collation, Datum arg1, Datum arg2, Datum arg3))
NEVER(Datum numeric_in(PG_FUNCTION_ARGS))

void *
repalloc_huge(void *p, Size size)
{
	return repalloc(p, size);
}

/* the text reader's (queen.push walks its jsonb: never reached) */
NEVER(void json_ereport_error(JsonParseErrorType error, JsonLexContext *lex))

/* the error context (push_text.c marks errors about the text) */
int
geterrcode(void)
{
	return fuzz_last_sqlstate;
}

int
errcontext_msg(const char *fmt,...)
{
	return 0;
}

int
set_errcontext_domain(const char *domain)
{
	return 0;
}

void
qs_tenant_arg(FunctionCallInfo fcinfo, int argno, pg_uuid_t *out)
{
	memset(out->data, 0, UUID_LEN);
	out->data[15] = 1;
}

void
qs_spi_connect(void)
{
}

void
qs_spi_finish(void)
{
}

bool
qs_partition_resolve(const pg_uuid_t *tenant, const char *queue, const char *partition,
					 bool create, QsPartition *out)
{
	uint8		h[QS_HASH_LEN];
	char	   *key = psprintf("%s/%s", queue, partition);

	qs_txn_hash(key, strlen(key), h);
	memcpy(out->pid.data, h, UUID_LEN);
	out->window = 3600;
	out->encrypt = false;
	return true;
}

bool
qs_encrypt_payload(const char *queue, const QsSeal *seal, const char *plain, int len,
				   char **env, int *envlen)
{
	return false;
}

/* The storage below push: partitions resolved, rows locked, segments appended. */
void
qs_partitions_resolve(const pg_uuid_t *tenant, const char *const *queues,
					  const char *const *partitions, int n, QsPartition *out)
{
	for (int i = 0; i < n; i++)
		qs_partition_resolve(tenant, queues[i], partitions[i], true, &out[i]);
}

static int64 next_offset = 0;

/* the global lock order: ascending, distinct partition ids */
static void
check_sorted(QsAppendMany *a, int n)
{
	for (int i = 1; i < n; i++)
		if (memcmp(a[i - 1].pid.data, a[i].pid.data, UUID_LEN) >= 0)
		{
			fprintf(stderr, "appends not in ascending, distinct partition order\n");
			abort();
		}
}

void
qs_appends_lock(QsAppendMany *a, int n)
{
	check_sorted(a, n);
	for (int i = 0; i < n; i++)
	{
		a[i].locked = true;
		a[i].last_offset = next_offset - 1;
		a[i].txns_start = 0;
	}
}

/* A probed hash whose first byte is a multiple of 4 is "already stored". */
void
qs_dedup_probe(const pg_uuid_t *pid, int window, int64 last_offset, int64 txns_start,
			   int64 verified, int count, const uint8 *hashes, const bool *probe,
			   TimestampTz now, QsAppendResult *res)
{
	int			ndups = 0;

	memset(res, 0, sizeof(*res));
	res->dup_idx = palloc(sizeof(int) * Max(count, 1));
	res->dup_off = palloc(sizeof(int64) * Max(count, 1));
	for (int i = 0; i < count; i++)
		if ((probe == NULL || probe[i]) && hashes[i * QS_HASH_LEN] % 4 == 0)
		{
			res->dup_idx[ndups] = i;
			res->dup_off[ndups++] = i;
		}
	res->duplicate = ndups > 0;
	res->ndups = ndups;
}

/* Each segment decoded with the real decoder: its frames' hashes must be the ones given. */
void
qs_appends_run(QsAppendMany *a, int n)
{
	check_sorted(a, n);
	for (int g = 0; g < n; g++)
	{
		QsFrame    *f;

		if (a[g].blob == NULL)
			continue;
		if (n > 1 && !a[g].locked)
		{
			fprintf(stderr, "appends to several partitions with a row not locked\n");
			abort();
		}
		f = qs_segment_decode(a[g].blob, a[g].count, &a[g].pid, next_offset);
		for (int i = 0; i < a[g].count; i++)
		{
			uint8		h[QS_HASH_LEN];

			qs_txn_hash(f[i].txn, f[i].txn_len, h);
			if (memcmp(h, a[g].hashes + i * QS_HASH_LEN, QS_HASH_LEN) != 0)
			{
				fprintf(stderr, "frame %d: its hash is not its transaction id's\n", i);
				abort();
			}
		}
		a[g].base_offset = next_offset;
		a[g].created_at = GetCurrentTimestamp();
		next_offset += a[g].count;
	}
}

void
qs_frame_ids_at(const pg_uuid_t *pid, const int64 *offsets, int n, pg_uuid_t *ids, bool *found)
{
	for (int i = 0; i < n; i++)
	{
		memset(ids[i].data, 0, UUID_LEN);
		ids[i].data[0] = 1;
		found[i] = offsets[i] % 2 == 0;
	}
}

bool
qs_frame_at(const pg_uuid_t *pid, int64 offset, QsFrame *frame)
{
	static const uint8 id[UUID_LEN] = {1, 2, 3};

	memset(frame, 0, sizeof(*frame));
	frame->id = id;
	return offset % 2 == 0;
}

static bool
input_error(int sqlstate)
{
	return sqlstate == ERRCODE_INVALID_PARAMETER_VALUE ||
		sqlstate == ERRCODE_INVALID_TEXT_REPRESENTATION ||
		sqlstate == ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE ||
		sqlstate == ERRCODE_PROGRAM_LIMIT_EXCEEDED ||
		sqlstate == ERRCODE_STATEMENT_TOO_COMPLEX;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *body;
	Jsonb	   *volatile req = NULL;
	Jsonb	   *volatile res = NULL;
	LOCAL_FCINFO(fcinfo, 3);

	if (size > 65536 || memchr(data, 0, size) != NULL ||
		pg_encoding_verifymbstr(PG_UTF8, (const char *) data, size) != (int) size)
		return 0;				/* the listener answers 400 before push */
	body = palloc(size + 1);
	memcpy(body, data, size);
	body[size] = '\0';
	if (!fuzz_try(req = (Jsonb *) fuzz_jsonb(body)))
		goto out;				/* "bad body": 400 */

	InitFunctionCallInfoData(*fcinfo, NULL, 3, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = PointerGetDatum(req);
	fcinfo->args[0].isnull = false;
	fcinfo->args[1].isnull = true;
	fcinfo->args[2].value = PointerGetDatum(cstring_to_text("fuzz-sub"));
	fcinfo->args[2].isnull = (size % 2) == 0;
	if (!fuzz_try(res = DatumGetJsonbP(qs_push(fcinfo))))
	{
		if (!input_error(fuzz_last_sqlstate))
		{
			fprintf(stderr, "push raised %s: %s\n", unpack_sql_state(fuzz_last_sqlstate),
					fuzz_last_message);
			abort();
		}
		goto out;
	}
	/* one result per item */
	{
		JsonbValue	v;
		JsonbContainer *items;

		if (!getKeyJsonValueFromContainer(&req->root, "items", 5, &v) || v.type != jbvBinary)
			abort();
		items = v.val.binary.data;
		if (!JB_ROOT_IS_ARRAY(res) || JsonContainerSize(&res->root) != JsonContainerSize(items))
		{
			fprintf(stderr, "push answered %u results for %u items\n",
					JsonContainerSize(&res->root), JsonContainerSize(items));
			abort();
		}
	}
out:
	error_context_stack = NULL;	/* an ereport longjmped past its frame */
	fuzz_reset();
	return 0;
}
