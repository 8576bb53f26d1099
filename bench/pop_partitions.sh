#!/usr/bin/env bash
# Issue: pop at any partition count (reported, not asserted; not part of CI).
# One queue per size N (100, 1,000, 5,000, 20,000, 100,000 partitions), in one
# run on a throwaway instance (fsync and synchronous commit on):
#
#   - SQL: queen.pop(queue, batch => 1) + queen.ack from 4 pgbench clients
#     (-M prepared, -T QS_BENCH_DURATION), in queue mode and as a consumer
#     group; msgs/s = messages the cursors moved past (sum of
#     total_consumed) / the duration. Each partition holds ceil(M / N)
#     messages, M = QS_BENCH_MESSAGES (40,000): one each from 40,000
#     partitions up, enough that no point runs dry;
#   - HTTP: the same drain the way Queen's client does it, 10 keep-alive
#     connections popping batch 1 and acking each message
#     (bench/http/pop_drain.pl), queue mode then a new consumer group, until
#     the queue is empty (or QS_BENCH_HTTP_LIMIT seconds): msgs/s and, for
#     5,000 partitions, the drain's seconds;
#   - the long-poll wake once the HTTP group drain is done (then queue mode
#     and the group both have drained the queue): 15 times, a parked
#     autoAck pop of the queue and a push of one message to a random
#     partition, the pop's answer timed from the push's (bench/http/wake.pl);
#   - the 100-partition rate against each size's (the issue's targets:
#     >= 0.8x at 20,000, >= 0.7x at 100,000);
#   - batch 100 (QS_BENCH_BATCH100=1, the default): pop batch 100 + ack of
#     the batch's last message on a 16-partition queue of 400,000 messages,
#     1 and 4 pgbench clients for QS_BENCH_B100_DURATION (4 s), batches/s =
#     messages the cursor moved past / 100 / duration (the issue: must not get slower;
#     run the script on main's build too for the comparison).
#
#   bash bench/pop_partitions.sh      # as root
#
# Knobs: QS_BENCH_ROUNDS (3; each point's value is the median of the
# rounds'), QS_BENCH_SIZES ("100 1000 5000 20000 100000"), QS_BENCH_DURATION
# (10 s per SQL point), QS_BENCH_WARMUP (2), QS_BENCH_MESSAGES (40000),
# QS_BENCH_HTTP (1; 0: SQL only), QS_BENCH_HTTP_LIMIT (120 s),
# QS_BENCH_PG_BIN / QS_BENCH_BUILD as bench/lib.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${QS_BENCH_ROUNDS:-3}
SIZES=${QS_BENCH_SIZES:-"100 1000 5000 20000 100000"}
MSGS=${QS_BENCH_MESSAGES:-40000}
HTTP=${QS_BENCH_HTTP:-1}
HTTP_LIMIT=${QS_BENCH_HTTP_LIMIT:-120}
BATCH100=${QS_BENCH_BATCH100:-1}
B100_DUR=${QS_BENCH_B100_DURATION:-4}
# shellcheck disable=SC2034 # bench/lib.sh logs with it
TAG=pop_partitions
CACHE=${QS_BENCH_CACHE:-1000000}
. bench/lib.sh
bench_lock_build
bench_instance
Q -c "CREATE EXTENSION queen_streams"
[ "$HTTP" = 1 ] && bench_listener

cat >"$W/popack.sql" <<'SQL'
SELECT coalesce(r->>'leaseId', '') AS lease, coalesce(r->>'partitionId', '') AS pid,
       coalesce(r->'messages'->0->>'transactionId', '') AS txn,
       jsonb_array_length(r->'messages') AS n
  FROM queen.pop(:queue::text, consumer_group => :grp::text, batch => 1) AS r \gset
\if :n > 0
SELECT queen.ack(jsonb_build_object('transactionId', :txn::text, 'partitionId', :pid::text,
                                    'leaseId', :lease::text, 'consumerGroup', :grp::text));
\endif
SQL
chmod 644 "$W/popack.sql"
# batch 100: ack the batch's last message (the cursor moves past the batch)
cat >"$W/pop100.sql" <<'SQL'
SELECT coalesce(r->>'leaseId', '') AS lease, coalesce(r->>'partitionId', '') AS pid,
       coalesce(r->'messages'->-1->>'transactionId', '') AS txn,
       jsonb_array_length(r->'messages') AS n
  FROM queen.pop(:queue::text, batch => 100) AS r \gset
\if :n > 0
SELECT queen.ack(jsonb_build_object('transactionId', :txn::text, 'partitionId', :pid::text,
                                    'leaseId', :lease::text));
\endif
SQL
chmod 644 "$W/pop100.sql"

# fill QUEUE N PER: N partitions of PER messages each, 5,000 items a push
fill() {
	local q=$1 n=$2 per=$3 from
	for ((from = 1; from <= n; from += 5000 / per + 1)); do
		Q -c "SELECT queen.push(jsonb_build_object('items', (
			SELECT jsonb_agg(jsonb_build_object('queue', '$q', 'partition', 'p' || i,
			                 'payload', jsonb_build_object('i', i, 'r', r)))
			  FROM generate_series($from, least($n, $from + 5000 / $per)) i,
			       generate_series(1, $per) r)))" >/dev/null
	done
}
consumed() {	# consumed QUEUE GROUP
	Q -c "SELECT coalesce(sum(c.total_consumed), 0) FROM queen.log_consumers c
	        JOIN queen.log_partitions p ON p.id = c.partition_id
	        JOIN queen.queues q ON q.id = p.queue_id
	       WHERE q.name = '$1' AND c.consumer_group = '$2'"
}
declare -A RUNS RATE
record() { RUNS[$1]="${RUNS[$1]:-} $2"; RATE[$1]=$(median "${RUNS[$1]}" | awk '{ printf "%.0f", $1 }'); }
record1() { RUNS[$1]="${RUNS[$1]:-} $2"; RATE[$1]=$(median "${RUNS[$1]}" | awk '{ printf "%.1f", $1 }'); }

for round in $(seq "$ROUNDS"); do
	for n in $SIZES; do
		per=$(((MSGS + n - 1) / n))
		q=pp_${n}_r$round
		log "round $round: $n partitions, $per messages each"
		fill "$q" "$n" "$per"
		Q -c "CHECKPOINT"
		for mode in queue group; do
			grp=$([ $mode = group ] && echo g || echo "__QUEUE_MODE__")
			pgb -c 4 -j 2 -M prepared -T "$WARM" -D queue="$q" -D grp="$grp" -f "$W/popack.sql" >/dev/null 2>&1 || true
			before=$(consumed "$q" "$grp")
			pgb -c 4 -j 2 -M prepared -T "$DUR" -D queue="$q" -D grp="$grp" -f "$W/popack.sql" >"$W/sql_${mode}_$n.log" 2>&1 ||
				{ log "pgbench failed:"; grep -m3 -i error "$W/sql_${mode}_$n.log" >&2; exit 1; }
			after=$(consumed "$q" "$grp")
			record "sql_${mode}_$n" "$(awk -v a="$after" -v b="$before" -v d="$DUR" 'BEGIN { printf "%.0f", (a - b) / d }')"
			log "  sql $mode: ${RATE[sql_${mode}_$n]} msgs/s (median so far)"
		done
		if [ "$HTTP" = 1 ]; then
			hq=ph_${n}_r$round
			fill "$hq" "$n" 1
			Q -c "CHECKPOINT"
			for mode in queue group; do
				read -r acked secs rate < <(as_pg perl "$BENCH/http/pop_drain.pl" "$HTTP_PORT" "$hq" 10 "$HTTP_LIMIT" \
					$([ $mode = group ] && echo g))
				record "http_${mode}_$n" "$rate"
				record1 "http_${mode}_secs_$n" "$secs"
				log "  http $mode: $acked of $n in $secs s, $rate msgs/s"
			done
			# queue mode not drained within the limit: the rest over SQL
			# (auto-ack, 1,000 partitions a pop), so the wake is measured at any size
			if [ "$acked" -lt "$n" ]; then
				# one transaction a pop: a single one claiming them all runs out of lock slots
				while [ "$(Q -c "SELECT jsonb_array_length(queen.pop('$hq', batch => 10000,
				            partitions => 1000, auto_ack => true)->'messages')")" -gt 0 ]; do :; done
				acked=$n
			fi
			# queue mode drained: a parked pop woken by a push
			if [ "$acked" -ge "$n" ]; then
				read -r wmed wmax < <(as_pg perl "$BENCH/http/wake.pl" "$HTTP_PORT" "$hq" "$n" 15)
				record1 "wake_$n" "$wmed"
				log "  long-poll wake: median $wmed ms, worst $wmax ms"
			fi
		fi
	done
done

if [ "$BATCH100" = 1 ]; then
	for round in $(seq "$ROUNDS"); do
		for c in 1 4; do
			q=b100_${c}_r$round
			fill "$q" 16 25000
			Q -c "CHECKPOINT"
			pgb -c "$c" -j "$(( c > 1 ? 2 : 1 ))" -M prepared -T "$B100_DUR" -D queue="$q" -f "$W/pop100.sql" >"$W/b100_$c.log" 2>&1 ||
				{ log "pgbench failed:"; grep -m3 -i error "$W/b100_$c.log" >&2; exit 1; }
			# messages the cursors moved past: a queue that ran dry must not count its empty pops
			moved=$(consumed "$q" "__QUEUE_MODE__")
			[ "$moved" -ge 400000 ] && log "  the queue ran dry: lower QS_BENCH_B100_DURATION"
			record "b100_$c" "$(awk -v m="$moved" -v d="$B100_DUR" 'BEGIN { printf "%.0f", m / 100 / d }')"
			log "  batch 100, $c clients: ${RATE[b100_$c]} batches/s (median so far)"
		done
	done
fi

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0 && a != "") printf "%.2fx", a / b; else print "-" }'; }
first=${SIZES%% *}
{
	echo "| partitions | SQL queue mode, msgs/s | SQL group, msgs/s | HTTP queue mode, msgs/s (drain s) | HTTP new group, msgs/s (drain s) | long-poll wake, median ms | SQL queue mode vs $first | SQL group vs $first |"
	echo "|---|---|---|---|---|---|---|---|"
	for n in $SIZES; do
		echo "| $n | ${RATE[sql_queue_$n]} | ${RATE[sql_group_$n]} | ${RATE[http_queue_$n]:--} (${RATE[http_queue_secs_$n]:--}) | ${RATE[http_group_$n]:--} (${RATE[http_group_secs_$n]:--}) | ${RATE[wake_$n]:--} | $(ratio "${RATE[sql_queue_$n]}" "${RATE[sql_queue_$first]}") | $(ratio "${RATE[sql_group_$n]}" "${RATE[sql_group_$first]}") |"
	done
	if [ "$BATCH100" = 1 ]; then
		echo
		echo "batch 100 pop + ack, 16 partitions: ${RATE[b100_1]} batches/s with 1 client, ${RATE[b100_4]} with 4"
	fi
	echo
	echo "rounds: $ROUNDS, ${DUR}s a SQL point, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
} | tee "$W/table.md"
mkdir -p bench/out && cp "$W/table.md" bench/out/pop_partitions.md
