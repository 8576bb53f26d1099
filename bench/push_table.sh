#!/usr/bin/env bash
# Issue 14's push-path table (reported, not asserted; not part of CI), in one
# run on a throwaway instance (fsync and synchronous commit on):
#
#   - push, 100 messages per call, 4 and 8 clients: queen.push_text with client
#     transaction ids, against the bare-INSERT row-per-message baseline
#     (bench/setup.sql, pgmq's shape) and the engine floor (a segment packed
#     beforehand into queen.log_push_one_v1); push_text without ids, and
#     queen.push(jsonb) with ids, at 4 clients;
#   - N items in one push_text, N = 10k and 100k;
#   - a fully duplicate retry against the original push;
#   - 100 items with ids into a partition whose dedup window holds 1M hashes
#     against an empty one, warm and on a new connection;
#   - pop+ack, 100 per batch, 4 clients, against the baseline's read+delete:
#     bench/popack.c (libpq, one connection per client) for all three sides:
#     queen.pop_text, queen.pop, and the baseline;
#   - a diagnostic beside the first ratio: push_text, the INSERT and the
#     engine floor at 4 clients with synchronous_commit off, what each costs
#     without waiting for its commit's flush, and from the two runs of each
#     the flush wait per call and what push_text would need for 2x;
#   - the same push over HTTP, the route Queen's clients use: POST
#     /api/v1/push from 4 and 8 keep-alive connections (bench/http/loadgen,
#     fresh transaction ids in every request; connection i always on
#     partition p-<i>), the listener on its defaults (two workers, group
#     commit on: requests that arrive together share one call and one
#     commit), beside the INSERT at 4 and 8 clients. Reported without a
#     verdict: the INSERT's clients commit one statement each.
#
#   bash bench/push_table.sh      # as root; about 20 minutes
#   QS_BENCH_PAIR=1 bash bench/push_table.sh    # only queen.push(jsonb) against
#                                 # queen.push_text, 4 clients (a few minutes)
#   QS_BENCH_PAIR=1 bash bench/push_table.sh   # only queen.push(jsonb) against
#                                 # queen.push_text, 4 clients, interleaved rounds
#
# It takes /tmp/queen_streams.test.lock and installs the working tree into
# the shared PostgreSQL. With QS_BENCH_PG_BIN naming a private copy of the
# tree (bench/README.md) it installs there and takes no lock.
# Knobs: QS_BENCH_ROUNDS (3: every pgbench and pop+ack point runs once a
# round; ratios are the median of the rounds'), QS_BENCH_DURATION (10 s per
# point), QS_BENCH_WARMUP (2), QS_BENCH_PREFILL (messages into the baseline
# before pop+ack, 1.5M per round; three times that into queen's side),
# QS_BENCH_WINDOW_HASHES (1000000), QS_BENCH_CACHE (dedup cache entries,
# 30M per round: 2.6 GB of shared memory a round), QS_BENCH_HUGE_PAGES (1:
# bench/huge_pages.sh), QS_BENCH_BUILD (1; 0: use what is installed).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${QS_BENCH_ROUNDS:-3}
PAIR=${QS_BENCH_PAIR:-0}
[ "$ROUNDS" -ge 1 ] || { echo "QS_BENCH_ROUNDS must be at least 1" >&2; exit 1; }
# pop_text and pop(jsonb) both drain bench_pop (about 3M messages a round
# here): queen's side holds three times the baseline's 1.5M a round
PREFILL=${QS_BENCH_PREFILL:-$((1500000 * ROUNDS))}
NH=${QS_BENCH_WINDOW_HASHES:-1000000}
VARIANTS=4
# shellcheck disable=SC2034 # bench/lib.sh logs with it
TAG=push_table
# all the ids the table pushes (about 25M a round here, the unsynchronised
# point 5.5M and HTTP 10M of them, 1.2M more for the single calls) with
# room to spare: no point should meet a full cache (the table says how many
# keys were written: 0 if none did)
CACHE=${QS_BENCH_CACHE:-$((30000000 * ROUNDS))}
[ "$PAIR" = 1 ] && CACHE=${QS_BENCH_CACHE:-$((3000000 * ROUNDS))}
. bench/lib.sh
bench_lock_build
bench_instance
cp "$BENCH"/*.sql "$W/"
[ "$(id -u)" -eq 0 ] && chown postgres:postgres "$W"/*.sql
Q -f "$W/setup.sql" >/dev/null
[ "$PAIR" = 1 ] || bench_listener

# ---------------------------------------------------------------- scripts
gen() {	# gen NAME MODE TARGET [FN]: a gen_push.pl family; FN push_text turns the calls into text ones
	perl "$BENCH/gen_push.pl" "$W/scripts" "$1" "$2" "$3" "$VARIANTS"
	if [ "${4:-}" = push_text ]; then
		sed -i 's/^SELECT queen.push(\(.*\)::jsonb);$/SELECT queen.push_text(\1);/' "$W/scripts/$1".*.sql
	fi
	[ "$(id -u)" -eq 0 ] && chown -R postgres:postgres "$W/scripts"
	true
}
create_queue() {	# the queue and its partitions p-0..p-15
	Q -c "SELECT queen.push(jsonb_build_object('items', jsonb_agg(jsonb_build_object(
		'queue', '$1', 'partition', 'p-' || i, 'payload', '{}'::jsonb)))) FROM generate_series(0, 15) i" >/dev/null
}
engine_scripts() {	# the engine floor: one pre-packed segment per (variant, partition), window 0
	local q=$1
	gen "${q}_src" notxn "$q"
	create_queue "$q"
	Q -c "UPDATE queen.queues SET dedup_window_seconds = 0 WHERE name = '$q'"
	bench_engine_scripts "$q" "$W" Q
	[ "$(id -u)" -eq 0 ] && chown -R postgres:postgres "$W/scripts"
	true
}
files() { local f; for f in "$W"/scripts/"$1".*.sql; do printf -- '-f scripts/%s ' "${f##*/}"; done; }
http_bodies() {	# http_bodies QUEUE: a family's requests, one a line, connection i on partition i % 16
	local v p
	gen "$1" spread "$1"
	create_queue "$1"
	for v in $(seq 1 "$VARIANTS"); do
		for p in $(seq 0 15); do
			sed -n "s/^SELECT queen.push('\(.*\)'::jsonb);$/\1/p" "$W/scripts/$1.$v.$p.sql"
		done
	done >"$W/$1.bodies"
	rm -f "$W/scripts/$1".*.sql
}

# ---------------------------------------------------------------- single calls
if [ "$PAIR" != 1 ]; then	# (not indented: the pair mode skips this section)
# First, while the shared dedup cache holds only what these points push.
# server-side ms of one statement
sms() { Q -c '\timing on' -c "$1" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1; }
# text bodies: queue, n, payload pad bytes, txn prefix ('' = none)
body() {
	echo "SELECT '{\"items\":[' || string_agg(format('{\"queue\":\"$1\",%s\"payload\":{\"i\":%s,\"pad\":\"%s\"}}',
	      CASE WHEN '$4' = '' THEN '' ELSE format('\"transactionId\":\"$4%s\",', i) END, i, repeat('x', $3)), ',')
	      || ']}' FROM generate_series(1, $2) i"
}
Q -c "CREATE TABLE bodies (name text PRIMARY KEY, b text)"
Q -c "INSERT INTO bodies SELECT 'n10k', ($(body lin10 10000 100 n))"
Q -c "INSERT INTO bodies SELECT 'n100k', ($(body lin100 100000 100 n))"
Q -c "INSERT INTO bodies SELECT 'retry', ($(body retryq 3000 2000 r))"
log "N items in one push"
T10=$(sms "SELECT length(queen.push_text(b)::text) FROM bodies WHERE name = 'n10k'")
T100=$(sms "SELECT length(queen.push_text(b)::text) FROM bodies WHERE name = 'n100k'")
log "fully duplicate retry"
ORIG=$(sms "SELECT length(queen.push_text(b)::text) FROM bodies WHERE name = 'retry'")
RETRY=$(sms "SELECT length(queen.push_text(b)::text) FROM bodies WHERE name = 'retry'")
RETRY_DUPS=$(Q -c "SELECT count(*) FILTER (WHERE e->>'status' = 'duplicate')
	FROM bodies, json_array_elements(queen.push_text(b)) e WHERE name = 'retry'")

log "a window of $NH hashes"
Q -c "SELECT count(*) FROM (SELECT queen.push_text((SELECT '{\"items\":[' || string_agg(format(
	'{\"queue\":\"bigwin\",\"transactionId\":\"w%s-%s\",\"payload\":%s}', k, i, i), ',') || ']}'
	FROM generate_series(1, 10000) i)) FROM generate_series(1, $NH / 10000) k) x" >/dev/null
Q -c "SELECT queen.push_text('{\"items\":[{\"queue\":\"emptywin\",\"transactionId\":\"e0\",\"payload\":0}]}')" >/dev/null
HASHES=$(Q -c "SELECT sum(t.end_offset - t.base_offset + 1) FROM queen.log_txns t
	JOIN queen.log_partitions p ON p.id = t.partition_id JOIN queen.queues q ON q.id = p.queue_id
	WHERE q.name = 'bigwin'")
hund() { echo "SELECT length(queen.push_text((SELECT '{\"items\":[' || string_agg(format(
	'{\"queue\":\"$1\",\"transactionId\":\"$2%s\",\"payload\":%s}', i, i), ',') || ']}'
	FROM generate_series(1, 100) i))::text)"; }
sms "$(hund bigwin first-)" >/dev/null	# the first push since start reads the window into the shared cache
warm() {	# mean server ms of 20 pushes on one connection
	{ echo '\timing on'; for i in $(seq 1 20); do echo "$(hund "$1" "$2$i-");"; done; } >"$W/warm.sql"
	chmod 644 "$W/warm.sql"
	Q -f "$W/warm.sql" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | awk '{s += $1} END {printf "%.2f", s / NR}'
}
fresh() {	# mean server ms of the first push of 10 new connections
	local s=0 i
	for i in $(seq 1 10); do s=$(echo "$s + $(sms "$(hund "$1" "$2$i-")")" | bc); done
	echo "scale=2; $s / 10" | bc
}
WB=$(warm bigwin wb-); WE=$(warm emptywin we-)
NB=$(fresh bigwin nb-); NE=$(fresh emptywin ne-)

fi

# ---------------------------------------------------------------- pgbench points
INV=0
count() {	# messages a side holds now
	case $1 in
	queen) Q -c "SELECT coalesce(sum(p.last_offset + 1), 0) FROM queen.log_partitions p
		JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = '$2'" ;;
	base) Q -c "SELECT count(*) FROM bench.q_push" ;;
	popq) Q -c "SELECT coalesce(sum(c.committed + 1), 0) FROM queen.log_consumers c
		JOIN queen.log_partitions p ON p.id = c.partition_id
		JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'bench_pop'" ;;
	popb) Q -c "SELECT -count(*) FROM bench.q_pop" ;;
	esac
}
declare -A RATE RUNS
record() {	# record NAME RATE: one round's rate of a point, and the median of its rounds so far
	RUNS[$1]="${RUNS[$1]:-} $2"
	RATE[$1]=$(median "${RUNS[$1]}" | awk '{ printf "%.0f", $1 }')
}
point() {	# point NAME KIND QUEUE CLIENTS MODE pgbench-args...: msgs/s moved in the database
	local name=$1 kind=$2 queue=$3 c=$4 mode=$5
	shift 5
	local j=$((c < NCPU ? c : NCPU)) m0 m1 nx tps rate
	INV=$((INV + 1))
	pgb -c "$c" -j "$j" -M "$mode" -T "$WARM" -D n=$((INV * 1000000000)) "$@" >/dev/null 2>&1 || true
	Q -c CHECKPOINT
	m0=$(count "$kind" "$queue")
	INV=$((INV + 1))
	pgb -c "$c" -j "$j" -M "$mode" -T "$DUR" -D n=$((INV * 1000000000)) "$@" >"$W/$name.log" 2>&1 ||
		{ log "$name: pgbench failed: $(tail -3 "$W/$name.log")"; }
	m1=$(count "$kind" "$queue")
	nx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$W/$name.log")
	tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$W/$name.log")
	rate=$(awk -v dm=$((m1 - m0)) -v nx="${nx:-0}" -v tps="${tps:-0}" \
		'BEGIN { s = (tps > 0) ? nx / tps : 0; printf "%.0f", (s > 0) ? dm / s : 0 }')
	record "$name" "$rate"
	log "$name: $rate msgs/s ($c clients)"
}

# lg_push QUEUE CONNS SECS BASE: POST /api/v1/push, every request's ids
# fresh (loadgen numbers the scripts' placeholder from BASE)
lg_push() {
	"$W/loadgen" -p "$HTTP_PORT" -c "$2" -d "$3" -w 0 -m POST -u /api/v1/push -b "$W/$1.bodies" \
		-n :k16_digits_wide -N "$4"
}
# group commits and the requests they carried so far, from /metrics
group_counts() {
	curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | awk '/^queen_streams_http_group_commits_total / { c = $2 }
		/^queen_streams_http_group_requests_total / { r = $2 } END { print c + 0, r + 0 }'
}
# The pair alone: queen.push(jsonb) against queen.push_text on the same
# requests (gen_push.pl spread, ids), 4 clients, interleaved in each round.
if [ "$PAIR" = 1 ]; then
	gen text_c4 spread text_c4 push_text
	create_queue text_c4
	gen jsonb_c4 spread jsonb_c4
	create_queue jsonb_c4
	for round in $(seq 1 "$ROUNDS"); do
		log "pair round $round of $ROUNDS"
		# shellcheck disable=SC2046
		point text_c4 queen text_c4 4 simple $(files text_c4)
		# shellcheck disable=SC2046
		point jsonb_c4 queen jsonb_c4 4 simple $(files jsonb_c4)
	done
	pr() { paste -d' ' <(tr ' ' '\n' <<<"${RUNS[jsonb_c4]}" | sed '/^$/d') \
		<(tr ' ' '\n' <<<"${RUNS[text_c4]}" | sed '/^$/d') | awk '$2 > 0 { printf "%.2f\n", $1 / $2 }'; }
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$ROOT" rev-parse --short HEAD); $NCPU CPUs,"
	echo "load average at the end $(cut -d' ' -f1-3 /proc/loadavg); ${DUR}s a point, $ROUNDS interleaved rounds"
	echo
	echo "| point | msgs/s (median) | rounds |"
	echo "|---|---:|---|"
	for p in text_c4 jsonb_c4; do
		echo "| $p | ${RATE[$p]} | $(tr -s ' ' ',' <<<"${RUNS[$p]# }") |"
	done
	echo "| push(jsonb) / push_text | $(median "$(pr | tr '\n' ' ')" | awk '{ printf "%.2f", $1 }') | $(pr | tr '\n' ',' | sed 's/,$//') |"
	exit 0
fi
declare -A PER_GROUP
hpoint() {	# hpoint NAME QUEUE CONNS: msgs/s moved in the database over HTTP
	local name=$1 queue=$2 c=$3 m0 m1 t0 t1 g0 g1 out rate
	INV=$((INV + 1))
	lg_push "$queue" "$c" "$WARM" $((INV * 1000000000)) >/dev/null || log "$name: the warm-up's loadgen failed"
	Q -c CHECKPOINT
	m0=$(count queen "$queue")
	g0=$(group_counts)
	INV=$((INV + 1))
	t0=$(date +%s.%N)
	out=$(lg_push "$queue" "$c" "$DUR" $((INV * 1000000000))) || log "$name: loadgen failed: $out"
	t1=$(date +%s.%N)
	g1=$(group_counts)
	m1=$(count queen "$queue")
	grep -q ' status 201:[0-9]*$' <<<"$out" || log "$name: not every request was queued: $out"
	rate=$(awk -v dm=$((m1 - m0)) -v s="$(echo "$t1 - $t0" | bc)" 'BEGIN { printf "%.0f", (s > 0) ? dm / s : 0 }')
	record "$name" "$rate"
	PER_GROUP[$name]="${PER_GROUP[$name]:-} $(awk -v a="$g0" -v b="$g1" 'BEGIN { split(a, x, " "); split(b, y, " ");
		printf "%.1f", (y[1] > x[1]) ? (y[2] - x[2]) / (y[1] - x[1]) : 0 }')"
	log "$name: $rate msgs/s ($c connections; $out)"
}

log "push points: $ROUNDS rounds, ${DUR}s each after ${WARM}s warm-up"
gen base_push base q_push
for c in 4 8; do
	gen "text_c$c" spread "text_c$c" push_text
	create_queue "text_c$c"
	engine_scripts "engine_c$c"
	http_bodies "http_c$c"
done
gen text_notxn notxn text_notxn push_text
create_queue text_notxn
gen jsonb_c4 spread jsonb_c4
create_queue jsonb_c4
# Every point once a round, push_text, the INSERT and the floor back to back:
# a ratio is taken in each round and its median reported (with its range),
# so that a slow stretch of the machine (the flush rate here moves by 2x
# within minutes) falls on both of its sides.
for round in $(seq 1 "$ROUNDS"); do
	log "push round $round of $ROUNDS"
	for c in 4 8; do
		# shellcheck disable=SC2046
		point "text_c$c" queen "text_c$c" "$c" simple $(files "text_c$c")
		# shellcheck disable=SC2046
		point "base_c$c" base - "$c" simple $(files base_push)
		# shellcheck disable=SC2046
		point "engine_c$c" queen "engine_c$c" "$c" simple $(files "engine_c$c")
		hpoint "http_c$c" "http_c$c" "$c"
	done
	# the first pair again without the flush: how much of the ratio is CPU
	PGB_OPTIONS="-c synchronous_commit=off"
	# shellcheck disable=SC2046
	point text_c4_nosync queen text_c4 4 simple $(files text_c4)
	# shellcheck disable=SC2046
	point base_c4_nosync base - 4 simple $(files base_push)
	# shellcheck disable=SC2046
	point engine_c4_nosync queen engine_c4 4 simple $(files engine_c4)
	PGB_OPTIONS=
	# shellcheck disable=SC2046
	point text_notxn_c4 queen text_notxn 4 simple $(files text_notxn)
	# shellcheck disable=SC2046
	point jsonb_c4 queen jsonb_c4 4 simple $(files jsonb_c4)
done

log "pop+ack: pre-filling $((3 * PREFILL)) messages into queen's side, $PREFILL into the baseline"
per=$(((PREFILL + 799) / 800))
gen bench_pop notxn bench_pop push_text
create_queue bench_pop
gen base_fill base q_pop
# shellcheck disable=SC2046
PGB_OPTIONS="-c synchronous_commit=off" pgb -c 8 -j "$NCPU" -M simple -t $((3 * per)) -D n=1 $(files bench_pop) \
	>/dev/null 2>&1
# shellcheck disable=SC2046
PGB_OPTIONS="-c synchronous_commit=off" pgb -c 8 -j "$NCPU" -M simple -t "$per" $(files base_fill) >/dev/null 2>&1
Q -c "VACUUM ANALYZE" >/dev/null
# pop+ack with bench/popack (the client reads each answer, as any client does)
cc -O2 -o "$W/popack" "$BENCH/popack.c" -I"$("$BIN/pg_config" --includedir)" \
	-L"$("$BIN/pg_config" --libdir)" -lpq -lpthread
chmod 755 "$W/popack"
popack() {	# popack NAME KIND MODE: msgs/s moved in the database, 4 clients
	local name=$1 kind=$2 mode=$3 m0 m1 secs rate
	as_pg "$W/popack" "host=$W port=$PORT user=postgres dbname=bench" "$mode" 4 "$WARM" >/dev/null || true
	Q -c CHECKPOINT
	m0=$(count "$kind" -)
	as_pg "$W/popack" "host=$W port=$PORT user=postgres dbname=bench" "$mode" 4 "$DUR" >"$W/$name.log" 2>&1 ||
		log "$name: popack failed: $(tail -3 "$W/$name.log")"
	m1=$(count "$kind" -)
	secs=$(sed -n 's/.* seconds \([0-9.]*\)$/\1/p' "$W/$name.log")
	rate=$(awk -v dm=$((m1 - m0)) -v s="${secs:-0}" 'BEGIN { printf "%.0f", (s > 0) ? dm / s : 0 }')
	record "$name" "$rate"
	log "$name: $rate msgs/s (4 clients)"
}
for round in $(seq 1 "$ROUNDS"); do
	log "pop+ack round $round of $ROUNDS"
	popack popack_text_c4 popq text
	popack popack_queen_c4 popq jsonb
	popack popack_base_c4 popb base
done
LEFT_Q=$(Q -c "SELECT min(p.last_offset - coalesce(c.committed, -1)) FROM queen.log_partitions p
	JOIN queen.queues q ON q.id = p.queue_id LEFT JOIN queen.log_consumers c ON c.partition_id = p.id
	WHERE q.name = 'bench_pop'")
LEFT_B=$(Q -c "SELECT count(*) FROM bench.q_pop")

# ---------------------------------------------------------------- table
KEYS=$(Q -c "SELECT count(*) FROM queen.log_txn_keys")
r() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
ratios() {	# ratios A B: A's rate over B's in each round, one a line
	paste -d' ' <(tr ' ' '\n' <<<"${RUNS[$1]}" | sed '/^$/d') <(tr ' ' '\n' <<<"${RUNS[$2]}" | sed '/^$/d') |
		awk '$2 > 0 { printf "%.4f\n", $1 / $2 }'
}
rmed() { median "$(ratios "$1" "$2" | tr '\n' ' ')" | awk '{ printf "%.2f", $1 }'; }
rrange() { ratios "$1" "$2" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { if (NR) printf "%.2f-%.2f", lo, hi }'; }
prow() {	# prow LABEL A B OP TARGET: the median of the rounds' A / B, their range, the verdict
	local v
	v=$(rmed "$2" "$3")
	[ -n "$v" ] || v=n/a
	printf '| %s | %s (%s) | %s %s | %s |\n' "$1" "$v" "$(rrange "$2" "$3")" "$4" "$5" "$(met "$v" "$5" "$4")"
}
met() { awk -v v="$1" -v t="$2" -v op="$3" 'BEGIN { if (v == "n/a") print "n/a";
	else if ((op == ">=" && v + 0 >= t) || (op == "<=" && v + 0 <= t)) print "met"; else print "MISSED" }'; }
row() { printf '| %s | %s | %s %s | %s |\n' "$1" "$2" "$3" "$4" "$(met "$2" "$4" "$3")"; }
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$ROOT" rev-parse --short HEAD); $NCPU CPUs ($CPU),"
echo "load average at the end $(cut -d' ' -f1-3 /proc/loadavg); PostgreSQL $(Q -c 'SHOW server_version'),"
echo "fsync and synchronous_commit on, huge pages $HUGE, dedup cache $CACHE entries; ~165-byte JSON events,"
echo "100 per call; every point ${DUR}s, once in each of $ROUNDS interleaved rounds; a ratio is the median of"
echo "the rounds' ratios (their range in brackets); keys written: $KEYS (0: no point met a full cache)."
echo
echo "| point | msgs/s (median) | rounds |"
echo "|---|---:|---|"
for p in text_c4 base_c4 engine_c4 http_c4 text_c4_nosync base_c4_nosync engine_c4_nosync text_c8 base_c8 engine_c8 http_c8 text_notxn_c4 jsonb_c4 popack_text_c4 popack_queen_c4 popack_base_c4; do
	echo "| $p | ${RATE[$p]} | $(tr -s ' ' ',' <<<"${RUNS[$p]# }") |"
done
echo
echo "| ratio | value | target | |"
echo "|---|---:|---|---|"
for c in 4 8; do
	prow "push_text / bare INSERT, $c clients" "text_c$c" "base_c$c" ">=" 2
	prow "push_text / engine floor, $c clients" "text_c$c" "engine_c$c" ">=" 0.7
done
for c in 4 8; do
	echo "| push over HTTP, $c connections / bare INSERT, $c clients | $(rmed "http_c$c" "base_c$c") ($(rrange "http_c$c" "base_c$c")) | (group commit on; requests a commit: $(tr -s ' ' ',' <<<"${PER_GROUP[http_c$c]# }")) | |"
done
echo "| push_text / bare INSERT, 4 clients, synchronous_commit off | $(rmed text_c4_nosync base_c4_nosync) ($(rrange text_c4_nosync base_c4_nosync)) | (diagnostic: no flush wait) | |"
echo "| engine floor / bare INSERT, 4 clients | $(rmed engine_c4 base_c4) ($(rrange engine_c4 base_c4)) | (2x the INSERT is 2 / this of the floor) | |"
echo "| engine floor / bare INSERT, 4 clients, synchronous_commit off | $(rmed engine_c4_nosync base_c4_nosync) ($(rrange engine_c4_nosync base_c4_nosync)) | (diagnostic) | |"
prow "with ids / without, 4 clients" text_c4 text_notxn_c4 ">=" 0.8
echo "| push_text / push(jsonb), 4 clients | $(rmed text_c4 jsonb_c4) ($(rrange text_c4 jsonb_c4)) | (the path it replaces) | |"
row "100k items / 10k items in one push ($T100 / $T10 ms)" "$(r "$T100" "$T10")" "<=" 12
row "duplicate retry / original, 3,000 × 2 KB ($RETRY / $ORIG ms, $RETRY_DUPS duplicates)" "$(r "$RETRY" "$ORIG")" "<=" 2
row "100 items, $HASHES-hash window / empty, warm ($WB / $WE ms)" "$(r "$WB" "$WE")" "<=" 1.5
row "same, first push of a new connection ($NB / $NE ms)" "$(r "$NB" "$NE")" "<=" 1.5
prow "pop_text+ack / read+delete, 4 clients" popack_text_c4 popack_base_c4 ">=" 3
echo "| pop(jsonb)+ack / read+delete, 4 clients | $(rmed popack_queen_c4 popack_base_c4) ($(rrange popack_queen_c4 popack_base_c4)) | (the jsonb entry) | |"
echo
# A call of 100 messages from each of 4 clients takes L = 4e5 / rate ms; the
# flush wait per call is L with the flush less L without it. If push_text
# waited as long as it does now, 2x the INSERT needs its call at half the
# INSERT's: this is what that leaves for push_text without the flush.
lat() { awk -v r="${RATE[$1]:-0}" 'BEGIN { if (r > 0) printf "%.3f", 400000 / r; else print "n/a" }'; }
# minus A B: A - B, n/a if either is
minus() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a") print "n/a"; else printf "%.3f", a - b }'; }
WT=$(minus "$(lat text_c4)" "$(lat text_c4_nosync)")
WI=$(minus "$(lat base_c4)" "$(lat base_c4_nosync)")
NEED=$(awk -v b="$(lat base_c4)" -v w="$WT" 'BEGIN { if (b == "n/a" || w == "n/a") { print "n/a"; exit }
	l = b / 2 - w; if (l > 0) printf "%.0f", 400000 / l; else print "n/a (the wait alone is more than half the INSERT)" }')
echo "Per call of 100 messages, 4 clients (from the medians): push_text $(lat text_c4) ms, $(lat text_c4_nosync) without the"
echo "flush (a wait of $WT ms); the INSERT $(lat base_c4) and $(lat base_c4_nosync) ($WI ms); the engine floor $(lat engine_c4)"
echo "and $(lat engine_c4_nosync). For 2x the INSERT with the wait it has, push_text without the flush would need"
case $NEED in
n/a*) echo "$NEED." ;;
*) echo "$NEED msgs/s: $(r "$NEED" "${RATE[engine_c4_nosync]:-0}") x the engine floor without the flush." ;;
esac
echo
echo "Backlog left after pop+ack: queen min per partition $LEFT_Q, baseline $LEFT_B rows (0 means it ran dry)."
