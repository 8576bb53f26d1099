#!/usr/bin/env bash
# Group commit over HTTP (issue 14 item 6), reported, not asserted: in one
# run on a throwaway instance (fsync and synchronous_commit on, the default
# 2 HTTP workers unless QS_BENCH_HTTP_WORKERS says otherwise), each point QS_BENCH_DURATION seconds after a warm-up:
#
#   - push over HTTP, one message per request, 64 connections, into one
#     partition and into 16, with group commit off (max_requests = 1) and on
#     (the defaults);
#   - the same push over SQL from 64 pgbench clients (one partition, 16);
#   - stream cycles over HTTP from 8 connections (own source and sink
#     partition each), group commit off and on, against the same cycles over
#     SQL from 8 pgbench clients;
#   - the machine's limits in the same run: GET /health (the listener with
#     no SQL, 64 connections) and the 8 kB write + fdatasync rate of the
#     data directory's disk (pg_test_fsync), which bounds one flush per
#     commit.
#
#   bash bench/http/group_commit.sh      # as root; about 2 minutes a round, 1 to set up
#
# Knobs: QS_BENCH_DURATION (10), QS_BENCH_WARMUP (2), QS_BENCH_PG_BIN
# (/usr/lib/postgresql/15/bin; with a private copy of the PostgreSQL tree,
# whose pg_config installs there, the shared install is not touched),
# QS_BENCH_GC_REQUESTS / QS_BENCH_GC_WAIT / QS_BENCH_GC_AWAIT (the "on"
# settings, the defaults: 64, 0, 1 ms),
# QS_BENCH_HTTP_WORKERS (2, the default of queen_streams.http_workers),
# QS_BENCH_ROUNDS (3: every point runs once a round; a cell is the median of
# its rounds, with their range, and a ratio the median of the rounds' ratios:
# the same point moves by 10-15% from one run to the next here),
# QS_BENCH_HUGE_PAGES (1: bench/huge_pages.sh).
# Takes /tmp/queen_streams.test.lock like scripts/test.sh (machine quiet, and
# `make install` when the shared tree is used); QS_BENCH_LOCK=0 skips it,
# for a private tree only. Output: a table on stdout and
# bench/http/out/group_commit.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
GC_REQ=${QS_BENCH_GC_REQUESTS:-64}
GC_WAIT=${QS_BENCH_GC_WAIT:-0}
GC_AWAIT=${QS_BENCH_GC_AWAIT:-1}
WORKERS=${QS_BENCH_HTTP_WORKERS:-2}
ROUNDS=${QS_BENCH_ROUNDS:-3}
[ "$ROUNDS" -ge 1 ] || { echo "QS_BENCH_ROUNDS must be at least 1" >&2; exit 1; }

# shellcheck disable=SC2034 # bench/lib.sh reads them
TAG=bench/http/gc BENCH_DB=postgres BENCH_PORT=$((20000 + RANDOM % 20000))
HTTP_PORT=$((BENCH_PORT + 1))
. bench/lib.sh
OUT="$ROOT/bench/http/out"
DURATION=$DUR
WARMUP=$WARM

if [ "${QS_BENCH_LOCK:-1}" != 0 ]; then
	bench_lock
elif [ "$BIN" = /usr/lib/postgresql/15/bin ]; then
	echo "QS_BENCH_LOCK=0 needs a private QS_BENCH_PG_BIN" >&2
	exit 1
fi
bench_build

mkdir -p "$OUT"
bench_huge_pages 1280	# shared_buffers and slack
bench_initdb <<CONF
max_connections = 200
shared_buffers = 1GB
huge_pages = $HUGE
max_wal_size = 4GB
checkpoint_timeout = 30min
queen_streams.http_port = $HTTP_PORT
queen_streams.retention_interval = 0
queen_streams.max_connections = 1000
queen_streams.http_workers = $WORKERS
CONF
WORK=$W
DATA="$W/data"

cc -O2 -Wall -o "$WORK/loadgen" bench/http/loadgen.c
start
Q -c "CREATE EXTENSION queen_streams"
bench_wait_workers "$WORKERS"

gc() {	# max_requests max_wait await: set group commit, reload
	Q -c "ALTER SYSTEM SET queen_streams.group_commit_max_requests = $1" \
		-c "ALTER SYSTEM SET queen_streams.group_commit_max_wait = $2" \
		-c "ALTER SYSTEM SET queen_streams.group_commit_await = ${3:-0}" -c "SELECT pg_reload_conf()" >/dev/null
	sleep 0.5
}

# bodies: one line per connection
for i in $(seq 0 63); do
	echo "{\"items\":[{\"queue\":\"one\",\"payload\":{\"id\":$i,\"kind\":\"click\",\"user\":\"u-1234\"}}]}"
done >"$WORK/push_one.txt"
for i in $(seq 0 63); do
	echo "{\"items\":[{\"queue\":\"sixteen\",\"partition\":\"p$((i % 16))\",\"payload\":{\"id\":$i,\"kind\":\"click\",\"user\":\"u-1234\"}}]}"
done >"$WORK/push_sixteen.txt"
cat >"$WORK/push_one.sql" <<'SQL'
SELECT queen.push('{"items":[{"queue":"one","payload":{"id":1,"kind":"click","user":"u-1234"}}]}');
SQL
cat >"$WORK/push_sixteen.sql" <<'SQL'
\set p random(0, 15)
SELECT queen.push(('{"items":[{"queue":"sixteen","partition":"p' || :p || '","payload":{"id":1,"kind":"click","user":"u-1234"}}]}')::jsonb);
SQL
# the cycles: one query, 8 source partitions, each connection its own (as bench/http/run.sh)
bench_cycle_bodies 8
chmod 644 "$WORK"/*.txt "$WORK"/*.sql

lg() {	# connections, loadgen args...: its summary line
	local c=$1
	shift
	"$WORK/loadgen" -p "$HTTP_PORT" -c "$c" -d "$DURATION" -w "$WARMUP" "$@" | tee -a "$OUT/group_commit.loadgen.log"
}
pgb() {	# clients script: tps
	as_pg "$BIN/pgbench" -h "$WORK" -p "$PORT" -U postgres -n -M prepared -c "$1" -j 2 \
		-T "$((DURATION + WARMUP))" -f "$2" postgres 2>&1 | tee -a "$OUT/group_commit.pgbench.log" |
		sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -1
}
field() { sed -n "s/.* $1 \([0-9.]*\).*/\1/p"; }
per_commit() {	# PER_COMMIT: requests per group commit since the last call (not in a subshell)
	local c r
	c=$(curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | sed -n 's/^queen_streams_http_group_commits_total //p')
	r=$(curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | sed -n 's/^queen_streams_http_group_requests_total //p')
	PER_COMMIT=$(awk -v c="$((c - ${LAST_C:-0}))" -v r="$((r - ${LAST_R:-0}))" \
		'BEGIN { if (c > 0) printf "%.1f", r / c; else printf "-" }')
	LAST_C=$c LAST_R=$r
}

log "machine limits: fsync rate, GET /health"
FSYNC=$(as_pg "$BIN/pg_test_fsync" -s 3 -f "$DATA/fsync_probe" 2>/dev/null |
	sed -n '/Compare file sync methods using one 8kB write/,/Compare/p' | sed -n 's/^ *fdatasync *\([0-9.]*\) ops\/sec.*/\1/p' | head -1)
HEALTH=$(lg 64 -m GET -u /health)

# R[point] collects one value a round for each of its fields (point.rps,
# point.p50, point.p99, point.g for the requests per commit)
declare -A R
keep() {	# point, loadgen line: append its fields to the point's rounds
	local f
	for f in rps p50_ms p99_ms; do R[$1.${f%_ms}]="${R[$1.${f%_ms}]:-} $(echo "$2" | field $f)"; done
	R[$1.g]="${R[$1.g]:-} $PER_COMMIT"
	R[$1.status]=$(echo "$2" | sed -n 's/.*status //p')
}
two() { awk '{ if ($1 == "-") print; else printf "%.2f", $1 }'; }
one() { awk '{ if ($1 == "-") print; else printf "%.1f", $1 }'; }
range() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | sed -n '1p;$p' | paste -sd- -; }
ratios() {	# rounds of a, rounds of b (or one number): the rounds' a/b, space separated
	paste -d' ' <(tr ' ' '\n' <<<"$1" | sed '/^$/d') <(tr ' ' '\n' <<<"$2" | sed '/^$/d') |
		awk -v k="$2" '{ b = ($2 == "") ? k : $2; printf "%.2f ", $1 / b }'
}
for round in $(seq 1 "$ROUNDS"); do
	log "round $round of $ROUNDS"
	for mode in off on; do
		if [ $mode = off ]; then gc 1 0; else gc "$GC_REQ" "$GC_WAIT" "$GC_AWAIT"; fi
		per_commit
		log "push, 1 msg/request, 64 connections, one partition, group commit $mode"
		L=$(lg 64 -m POST -u /api/v1/push -b "$WORK/push_one.txt"); per_commit; keep one_$mode "$L"
		log "push, 1 msg/request, 64 connections, 16 partitions, group commit $mode"
		L=$(lg 64 -m POST -u /api/v1/push -b "$WORK/push_sixteen.txt"); per_commit; keep six_$mode "$L"
		log "cycles over HTTP, 8 connections, group commit $mode"
		L=$(lg 8 -m POST -u /streams/v1/cycle -b "$WORK/cycle_bodies.txt"); per_commit; keep cyc_$mode "$L"
	done
	log "push over SQL, 64 pgbench clients, one partition / 16"
	R[sql_one]="${R[sql_one]:-} $(pgb 64 "$WORK/push_one.sql")"
	R[sql_six]="${R[sql_six]:-} $(pgb 64 "$WORK/push_sixteen.sql")"
	log "cycles over SQL, 8 pgbench clients"
	R[sql_cyc]="${R[sql_cyc]:-} $(pgb 8 "$WORK/cycle_sql.sql")"
done
DEFERRED=$(curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | sed -n 's/^queen_streams_http_group_deferrals_total //p')

row() {	# name, point
	echo "| $1 | $(median "${R[$2.rps]}" | awk '{ printf "%.0f", $1 }') ($(range "${R[$2.rps]}")) |" \
		"$(median "${R[$2.p50]}" | two) | $(median "${R[$2.p99]}" | two) | $(median "${R[$2.g]}" | one) | ${R[$2.status]} |"
}
sqlrow() { echo "| $1 | $(median "$2" | awk '{ printf "%.0f", $1 }') ($(range "$(awk '{ for (i = 1; i <= NF; i++) printf "%.0f ", $i }' <<<"$2")")) | | | 1 | |"; }
ratio() {	# the median of the rounds' a/b, and their range
	local r
	r=$(ratios "$1" "$2")
	echo "**$(median "$r" | two)** ($(range "$r"))"
}
{
	echo "# bench/http/group_commit.sh ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, ${DURATION}s per point, $ROUNDS rounds)"
	echo
	echo "$WORKERS HTTP workers; fsync and synchronous_commit on; huge pages $HUGE; group commit on = max_requests $GC_REQ, max_wait ${GC_WAIT} ms, await ${GC_AWAIT} ms."
	echo "Machine: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); 8 kB write+fdatasync: ${FSYNC:-?} ops/s;" \
		"GET /health, 64 connections: $(echo "$HEALTH" | field rps) req/s (p50 $(echo "$HEALTH" | field p50_ms) ms)."
	echo "Each cell is the median of the rounds (range in brackets); statuses are the last round's."
	echo
	echo "| point | req/s | p50 ms | p99 ms | requests per commit | statuses |"
	echo "|---|---|---|---|---|---|"
	row "push 1 msg, 64 conns, 1 partition, group commit off" one_off
	row "push 1 msg, 64 conns, 1 partition, group commit on" one_on
	row "push 1 msg, 64 conns, 16 partitions, group commit off" six_off
	row "push 1 msg, 64 conns, 16 partitions, group commit on" six_on
	row "cycles, 8 conns, group commit off" cyc_off
	row "cycles, 8 conns, group commit on" cyc_on
	sqlrow "push over SQL, 64 pgbench clients, 1 partition" "${R[sql_one]}"
	sqlrow "push over SQL, 64 pgbench clients, 16 partitions" "${R[sql_six]}"
	sqlrow "cycles over SQL, 8 pgbench clients" "${R[sql_cyc]}"
	echo
	echo "Ratios (the median of the rounds' ratios, their range): push 1 partition on/off $(ratio "${R[one_on.rps]}" "${R[one_off.rps]}")," \
		"16 partitions on/off $(ratio "${R[six_on.rps]}" "${R[six_off.rps]}");" \
		"against issue 14's 2,130 and 6,200 req/s: $(ratio "${R[one_on.rps]}" 2130) and $(ratio "${R[six_on.rps]}" 6200);" \
		"cycles HTTP (on) / SQL $(ratio "${R[cyc_on.rps]}" "${R[sql_cyc]}");" \
		"push 1 partition (on) / GET /health $(ratio "${R[one_on.rps]}" "$(echo "$HEALTH" | field rps)")." \
		"Deferrals (a request that gave way on a lock): ${DEFERRED:-0}."
} | tee "$OUT/group_commit.md"
