/*
 * guc.c: the storage engine's settings: segments, the dedup cache, pop
 * bounds, payload encryption (its key is read with the other secrets, in
 * src/common), acks. Each floor defines its own (common, storage, streams,
 * the listener); _PG_init calls them, then reserves the prefix once.
 */
#include "storage/storage.h"

#include <limits.h>

#include "utils/guc.h"

int			qs_zstd_level = 1;
int			qs_max_segment_kb = 262144;
int			qs_dedup_cache_entries = 262144;
int			qs_dedup_partition_entries = 0;
int			qs_dedup_key_budget = 262144;
int			qs_max_pop_batch = 10000;
int			qs_max_pop_partitions = 1000;
int			qs_pop_ready_recheck_s = 30;
int			qs_pop_ready_min_partitions = 256;
bool		qs_encryption_fail_open = false;
bool		qs_encryption_unbound_read = true;
bool		qs_ack_requires_lease = false;

void
qs_storage_guc_init(void)
{
	/*
	 * Both as large as a declared stream may ask (definition.c) and far above
	 * what Queen's clients send (batch 200, partitions 4). SUSET: an
	 * administrator may raise them for one role (ALTER ROLE ... SET), a
	 * caller not for itself.
	 */
	DefineCustomIntVariable("queen_streams.max_pop_batch",
							gettext_noop("Largest batch one pop may ask for."),
							gettext_noop("A pop that asks for more is refused (22023, HTTP 400) before it reads anything."),
							&qs_max_pop_batch,
							10000, 1, INT_MAX,
							PGC_SUSET, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen_streams.max_pop_partitions",
							gettext_noop("Most partitions one wildcard pop may ask to claim."),
							gettext_noop("A pop that asks for more is refused (22023, HTTP 400) before it reads anything."),
							&qs_max_pop_partitions,
							1000, 1, INT_MAX,
							PGC_SUSET, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen_streams.pop_ready_recheck",
							gettext_noop("How often a wildcard pop rebuilds its consumer group's ready set from the cursors."),
							gettext_noop("The set is kept in step by push, pop and ack; the rebuild bounds how long "
										 "a missed update can hide a partition's backlog."),
							&qs_pop_ready_recheck_s,
							30, 1, 86400,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen_streams.pop_ready_min_partitions",
							gettext_noop("Fewest partitions a queue has before its wildcard pops keep a ready set."),
							gettext_noop("Below it a wildcard pop reads every partition of the queue, which costs "
										 "less than keeping the set in step with push, pop and ack."),
							&qs_pop_ready_min_partitions,
							256, 0, INT_MAX,
							PGC_SUSET, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen_streams.zstd_level",
							gettext_noop("zstd compression level of new log segments."),
							gettext_noop("Segments under 1 kB packed are written at level -1."),
							&qs_zstd_level,
							1, 1, 19,
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

	DefineCustomIntVariable("queen_streams.dedup_cache_entries",
							gettext_noop("Transaction-id hashes the server keeps in shared memory to answer push dedup probes."),
							gettext_noop("About 92 bytes of shared memory each, reserved and touched at start when the library is "
										 "preloaded. A partition whose dedup window holds more than fits is probed "
										 "by key (queen.log_txn_keys)."),
							&qs_dedup_cache_entries,
							262144, 1024, INT_MAX / 2,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen_streams.dedup_partition_entries",
							gettext_noop("Most hashes one partition may hold in the dedup cache (0: no limit but the cache's)."),
							gettext_noop("A partition that would hold more is probed by key (queen.log_txn_keys) instead."),
							&qs_dedup_partition_entries,
							0, 0, INT_MAX / 2,
							PGC_SUSET, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen_streams.dedup_key_budget",
							gettext_noop("Most hashes one dedup probe turns into keys (queen.log_txn_keys)."),
							gettext_noop("A larger backlog is keyed over several probes, each reading the window past the keys meanwhile."),
							&qs_dedup_key_budget,
							262144, 1000, INT_MAX / 2,
							PGC_SUSET, 0,
							NULL, NULL, NULL);


	DefineCustomBoolVariable("queen_streams.encryption_fail_open",
							 gettext_noop("Store plaintext, with a WARNING, when a queue with encryption enabled has no usable key."),
							 gettext_noop("Off: such a push is refused and nothing is stored. On: Queen's behaviour."),
							 &qs_encryption_fail_open,
							 false,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("queen_streams.encryption_unbound_read",
							 gettext_noop("Decrypt envelopes not bound to their partition and message (written before 0.8.0, or by Queen)."),
							 gettext_noop("Off once none is left: such an envelope could be copied into another queue "
										  "and read there."),
							 &qs_encryption_unbound_read,
							 true,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("queen_streams.ack_requires_lease",
							 gettext_noop("Refuse an ack without leaseId of a message that a live lease covers."),
							 gettext_noop("Off (Queen's behaviour): an ack without leaseId skips the lease check "
										  "and can commit another consumer's leased batch."),
							 &qs_ack_requires_lease,
							 false,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
}
