#!/usr/bin/env bash
# Issue 14, item 4: the two ways to answer "does this partition's window hold
# this transaction id?", measured in one run on a throwaway instance (fsync and
# synchronous commit on; reported, not asserted; not part of CI):
#
#   cache  what ships: queen.push_text of 100 items with client transaction
#          ids, probed and recorded in the shared dedup cache (src/storage/dedup.c);
#   index  the alternative the issue names: a btree on (partition, hash) holding
#          one row per id, probed and filled by one batched statement per push
#          (INSERT ... SELECT unnest ... ON CONFLICT DO NOTHING RETURNING: exact
#          under concurrency, a second insert of a key waits for the first's
#          transaction), then the same push_text into a queue without a window,
#          so that the cache is neither probed nor filled.
#
# Both write the same segments and hash rows; 4 clients, 100 items per call,
# one random partition of 16 per call. Three phases:
#   1. windows small (fresh queues, a few seconds of pushes);
#   2. after W more hashes (QS_BENCH_WINDOW_HASHES, 2M) went into each side's
#      windows (the cache holds them all);
#   3. the instance restarted with dedup_cache_entries at half what the
#      windows hold, so some partitions are left out of the cache and probed
#      by key (queen.log_txn_keys, 0.7.0; 0.6.0 read their window).
#
#   bash bench/dedup_alternatives.sh     # as root; about 3 minutes
#
# Same lock and knobs as push_table.sh: QS_BENCH_PG_BIN, QS_BENCH_DURATION (10),
# QS_BENCH_WARMUP (2), QS_BENCH_BUILD (1), QS_BENCH_HUGE_PAGES (1: shared
# memory on huge pages, bench/huge_pages.sh; the runs in bench/README.md
# before 2026-12-05 had 4 kB pages, so their numbers are not comparable).
set -euo pipefail
cd "$(dirname "$0")/.."
NH=${QS_BENCH_WINDOW_HASHES:-2000000}
TAG=dedup_alternatives
CACHE=16000000	# phases 1 and 2: all of it
. bench/lib.sh
bench_lock_build
bench_instance
Q -c "CREATE EXTENSION queen_streams" -c "CREATE SCHEMA bench" \
	-c "CREATE TABLE bench.txn_idx (partition_id uuid, hash bytea, msg_offset bigint NOT NULL,
	    PRIMARY KEY (partition_id, hash))" >/dev/null

# ---------------------------------------------------------------- queues and scripts
for q in cq iq; do	# cq: the cache's queue; iq: the index's, without a window
	Q -c "SELECT queen.push(jsonb_build_object('items', jsonb_agg(jsonb_build_object(
		'queue', '$q', 'partition', 'p-' || i, 'payload', '{}'::jsonb)))) FROM generate_series(0, 15) i" >/dev/null
done
Q -c "UPDATE queen.queues SET dedup_window_seconds = 0 WHERE name = 'iq'"
perl "$BENCH/gen_push.pl" "$W/scripts" cache spread cq 4
perl "$BENCH/gen_push.pl" "$W/scripts" index spread iq 4
sed -i 's/^SELECT queen.push(\(.*\)::jsonb);$/SELECT queen.push_text(\1);/' "$W"/scripts/*.sql
for f in "$W"/scripts/index.*.sql; do	# BEGIN; the batched probe-and-record; the push; COMMIT
	p=${f%.sql}; p=${p##*.}
	pid=$(Q -c "SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.name = 'iq' AND p.name = 'p-$p'")
	perl -i -pe "s/^(SELECT queen.push_text.*)\$/BEGIN;\nINSERT INTO bench.txn_idx (partition_id, hash, msg_offset) SELECT '$pid', queen.txn_hash(format('tx-%s-%s', :k16_digits_wide, i)), i FROM generate_series(0, 99) i ON CONFLICT DO NOTHING RETURNING hash;\n\$1\nCOMMIT;/" "$f"
done
[ "$(id -u)" -eq 0 ] && chown -R postgres:postgres "$W/scripts"
files() { local f; for f in "$W"/scripts/"$1".*.sql; do printf -- '-f scripts/%s ' "${f##*/}"; done; }

declare -A RATE
INV=0
point() {	# point NAME SCRIPTS: messages pushed per second, 4 clients
	local name=$1 fam=$2 tps failed
	INV=$((INV + 1))
	# shellcheck disable=SC2046
	(cd "$W" && as_pg "$BIN/pgbench" -h "$W" -p "$PORT" -U postgres -n -c 4 -j "$NCPU" -M simple -T "$WARM" \
		-D n=$((INV * 1000000000)) $(files "$fam") bench >/dev/null 2>&1) || true
	Q -c CHECKPOINT
	INV=$((INV + 1))
	# shellcheck disable=SC2046
	(cd "$W" && as_pg "$BIN/pgbench" -h "$W" -p "$PORT" -U postgres -n -c 4 -j "$NCPU" -M simple -T "$DUR" \
		-D n=$((INV * 1000000000)) $(files "$fam") bench >"$W/$name.log" 2>&1) ||
		log "$name: pgbench failed: $(tail -3 "$W/$name.log")"
	tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$W/$name.log")
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$W/$name.log")
	RATE[$name]=$(awk -v t="${tps:-0}" 'BEGIN { printf "%.0f", t * 100 }')
	log "$name: ${RATE[$name]} msgs/s (${failed:-?} failed)"
}
held() {	# hashes each side's windows hold
	Q -c "SELECT (SELECT sum(t.end_offset - t.base_offset + 1) FROM queen.log_txns t
		JOIN queen.log_partitions p ON p.id = t.partition_id JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.name = 'cq') || ' / ' || (SELECT count(*) FROM bench.txn_idx)"
}

log "phase 1: small windows"
for r in a b; do point "cache_small_$r" cache; point "index_small_$r" index; done
SMALL=$(held)

log "phase 2: $NH more hashes into each side's windows"
per=10000
Q -c "SELECT count(queen.push_text((SELECT '{\"items\":[' || string_agg(format(
	'{\"queue\":\"cq\",\"partition\":\"p-%s\",\"transactionId\":\"fill-%s-%s\",\"payload\":%s}', i % 16, k, i, i), ',')
	|| ']}' FROM generate_series(1, $per) i))) FROM generate_series(1, $NH / $per) k" >/dev/null
Q -c "INSERT INTO bench.txn_idx SELECT p.id, queen.txn_hash('fill-' || g), g
	FROM generate_series(1, $NH) g JOIN queen.log_partitions p ON p.name = 'p-' || (g % 16)
	JOIN queen.queues q ON q.id = p.queue_id AND q.name = 'iq'" >/dev/null
Q -c "VACUUM ANALYZE" >/dev/null
for r in a b; do point "cache_big_$r" cache; point "index_big_$r" index; done
BIG=$(held)

CAP=$(($(Q -c "SELECT sum(end_offset - base_offset + 1) FROM queen.log_txns") / 2))
log "phase 3: restarted with dedup_cache_entries = $CAP"
Q -c "ALTER SYSTEM SET queen_streams.dedup_cache_entries = $CAP" >/dev/null
as_pg "$BIN/pg_ctl" -D "$W/data" -m fast -w stop >/dev/null
start
# round a pays the one-time keying of the partitions left out of the cache
for r in a b c; do point "cache_over_$r" cache; point "index_over_$r" index; done
OVER=$(held)

# ---------------------------------------------------------------- table
mean() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (a + b) / 2 }'; }
r() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$ROOT" rev-parse --short HEAD); $NCPU CPUs ($CPU),"
echo "PostgreSQL $(Q -c 'SHOW server_version'), fsync and synchronous_commit on, 4 clients, ${DUR}s per point,"
echo "two rounds per phase (cache, index, cache, index; a third after the restart); msgs/s, 100 per call."
echo
echo "| phase (hashes held: cache / index) | cache | index | cache / index |"
echo "|---|---:|---:|---:|"
for ph in "small:$SMALL" "big:$BIG" "over:$OVER"; do
	k=${ph%%:*}
	c=$(mean "${RATE[cache_${k}_a]}" "${RATE[cache_${k}_b]}")
	i=$(mean "${RATE[index_${k}_a]}" "${RATE[index_${k}_b]}")
	echo "| $k (${ph#*:}) | $c (${RATE[cache_${k}_a]}, ${RATE[cache_${k}_b]}) | $i (${RATE[index_${k}_a]}, ${RATE[index_${k}_b]}) | $(r "$c" "$i") |"
done
c=$(mean "${RATE[cache_over_b]}" "${RATE[cache_over_c]}")
i=$(mean "${RATE[index_over_b]}" "${RATE[index_over_c]}")
echo "| over, keyed (rounds b, c) | $c (${RATE[cache_over_b]}, ${RATE[cache_over_c]}) | $i (${RATE[index_over_b]}, ${RATE[index_over_c]}) | $(r "$c" "$i") |"
echo
echo "index: $(Q -c "SELECT pg_size_pretty(pg_total_relation_size('bench.txn_idx'))") for $(Q -c 'SELECT count(*) FROM bench.txn_idx') ids;"
echo "phase 3's cache: $CAP entries for the windows' $(Q -c "SELECT sum(t.end_offset - t.base_offset + 1) FROM queen.log_txns t") hashes."
