/*
 * guc.c: every queen_streams setting, defined in one place.
 */
#include "common/common.h"

#include "utils/guc.h"

int			qs_zstd_level = 3;
int			qs_max_segment_kb = 262144;
char	   *qs_encryption_key = NULL;

void
qs_guc_init(void)
{
	DefineCustomIntVariable("queen_streams.zstd_level",
							gettext_noop("zstd compression level of new log segments."),
							NULL,
							&qs_zstd_level,
							3, 1, 19,
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

	DefineCustomStringVariable("queen_streams.encryption_key",
							   gettext_noop("AES-256-GCM key for queues with encryption enabled, as 64 hex digits."),
							   gettext_noop("When empty, the server's QUEEN_ENCRYPTION_KEY environment variable is used."),
							   &qs_encryption_key,
							   "",
							   PGC_SUSET, GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   NULL, NULL, NULL);

	MarkGUCPrefixReserved("queen_streams");
}
