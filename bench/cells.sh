#!/usr/bin/env bash
# Cells benchmark (issue 10): aggregate push and cycle throughput through a
# router (queen_streams_router, PL/Proxy) in front of 1, 2 and 3 cells, all
# on this machine, beside the same load sent straight to one cell's own
# listener, and the router's cost per call. Not part of CI or scripts/test.sh.
#
#   bash bench/cells.sh          # as root (the servers run as `postgres`); about 3 minutes
#
# Servers: scripts/cells.sh in a temporary directory (a router and 3 cells,
# each its own PostgreSQL with queen_streams preloaded, synchronous_commit on,
# 4 HTTP workers each). Tenants: 6, tenant k placed on cell k % N. Load:
# bench/http/loadgen, one keep-alive connection per tenant, closed loop, for
# QS_BENCH_DURATION (10) s after QS_BENCH_WARMUP (2) s:
#   - push: POST /api/v1/push with 10 messages (no transactionId);
#   - cycle: POST /streams/v1/cycle, one state upsert and one sink push, no
#     ack, each tenant on its own source partition and query.
# Router cost: pgbench, 1 client, the cheapest routed read
# (queen.partition_queue) on the router and on the cell itself.
# Knobs: QS_BENCH_DURATION, QS_BENCH_WARMUP, QS_BENCH_PORT (26560: the
# router's PostgreSQL; listeners +100, cells +1..+3), PG_CONFIG.
# Output: a table on stdout and in bench/out/cells.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${QS_BENCH_PORT:-26560}
TENANTS=6
PG_CONFIG=${PG_CONFIG:-pg_config}
# shellcheck disable=SC2034 # bench/lib.sh reads it
TAG=bench/cells QS_BENCH_PG_BIN=$("$PG_CONFIG" --bindir)
. bench/lib.sh
OUT="$ROOT/bench/out"
DURATION=$DUR
WARMUP=$WARM
sql() { as_pg "$BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -d postgres -c "$2"; }

mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/qs-bench-cells.XXXXXX)
chmod 755 "$WORK"
cleanup() {
	QS_CELLS_DIR=$WORK/cells QS_CELLS_PORT=$BASE PG_CONFIG=$PG_CONFIG bash scripts/cells.sh stop >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
cc -O2 -Wall -o "$WORK/loadgen" bench/http/loadgen.c

# Holds the lock that scripts/test.sh takes while it builds, installs and
# runs: the servers use the installed library.
# ($QS_BENCH_NO_LOCK=1 for a PG_CONFIG of a private copy of PostgreSQL.)
[ -n "${QS_BENCH_NO_LOCK:-}" ] || bench_lock
log "building, installing, starting a router and 3 cells"
bench_build
QS_CELLS_DIR=$WORK/cells QS_CELLS_PORT=$BASE QS_CELLS_NO_BUILD=1 PG_CONFIG=$PG_CONFIG \
	QS_CELLS_CONF=$'queen_streams.http_workers = 4\nqueen_streams.retention_interval = 0\nshared_buffers = 256MB' \
	bash scripts/cells.sh start --cells 3 >/dev/null
R=$BASE
RH=$((BASE + 100))
cellport() { echo $((BASE + 1 + $1)); }
sleep 2

for ((k = 0; k < TENANTS; k++)); do printf '%08d-0000-4000-8000-%012d\n' "$((k + 1))" "$((k + 1))"; done >"$WORK/tenants.txt"
mapfile -t T <"$WORK/tenants.txt"
# streams for every tenant, on every cell (the control plane's table)
for c in 0 1 2; do
	for t in "${T[@]}"; do sql "$(cellport $c)" "INSERT INTO queen_streams.quota (tenant_id) VALUES ('$t') ON CONFLICT DO NOTHING"; done
done
echo "{\"items\":[$(for i in $(seq 1 10); do printf '%s{"queue":"QUEUE","payload":{"id":%d,"kind":"click","user":"u-%d"}}' "$([ "$i" -gt 1 ] && echo ,)" "$i" "$i"; done)]}" >"$WORK/push10.tmpl"

lg() {	# port, method, path, bodies; prints loadgen's summary line
	"$WORK/loadgen" -p "$1" -c "$TENANTS" -d "$DURATION" -w "$WARMUP" -t "$WORK/tenants.txt" -m "$2" -u "$3" -b "$4" |
		tee -a "$OUT/cells-loadgen.log"
}
field() { sed -n "s/.* $1 \([0-9.]*\).*/\1/p"; }

# Places tenant k on cell k % n, with the router routing to cells 0..n-1;
# creates each tenant's source partition and query for this point.
setup() {
	local n=$1 tag=$2
	sql "$R" "DELETE FROM queen_router.placement; DELETE FROM queen_router.cells" >/dev/null
	for ((c = 0; c < n; c++)); do
		sql "$R" "INSERT INTO queen_router.cells (cell, idx, connstr) VALUES ('cell$c', $c,
			'host=127.0.0.1 port=$(cellport $c) dbname=postgres user=postgres')" >/dev/null
	done
	for ((k = 0; k < TENANTS; k++)); do
		sql "$R" "SELECT queen_router.place_tenant('${T[$k]}', 'cell$((k % n))')" >/dev/null
	done
	sed "s/QUEUE/push.$tag/g" "$WORK/push10.tmpl" >"$WORK/push_$tag.txt"
	: >"$WORK/cycle_$tag.txt"
	for t in "${T[@]}"; do
		local pid qid
		pid=$(sql "$R" "SELECT queen.push('{\"items\":[{\"queue\":\"src.$tag\",\"payload\":{}}]}', '$t')->0->>'partition_id'")
		qid=$(sql "$R" "SELECT queen_streams.register_query('{\"name\":\"q.$tag\",\"source_queue\":\"src.$tag\",\"sink_queue\":\"sink.$tag\",\"config_hash\":\"h\"}', '$t')->>'query_id'")
		echo "{\"query_id\":\"$qid\",\"partition_id\":\"$pid\",\"state_ops\":[{\"type\":\"upsert\",\"key\":\"k\",\"value\":{\"acc\":1}}],\"push_items\":[{\"queue\":\"sink.$tag\",\"payload\":{\"key\":\"k\",\"count\":1}}]}" >>"$WORK/cycle_$tag.txt"
	done
	chmod 644 "$WORK"/*.txt
}

# WAL flushes of the three cells together (pg_stat_wal), and the machine's
# busy and total CPU ticks (/proc/stat), to read each point by.
syncs() { local n=0; for c in 0 1 2; do n=$((n + $(sql "$(cellport $c)" "SELECT wal_sync FROM pg_stat_wal"))); done; echo "$n"; }
cpu() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 }' /proc/stat; }

declare -A RES
point() {	# name, port, method, path, bodies, messages per request
	local line rps s0 s1 c0 c1
	s0=$(syncs); c0=$(cpu)
	line=$(lg "$2" "$3" "$4" "$5")
	s1=$(syncs); c1=$(cpu)
	rps=$(echo "$line" | field rps)
	RES[$1]="$rps|$(awk -v r="$rps" -v m="$6" 'BEGIN { printf "%.0f", r * m }')|$(echo "$line" | field p50_ms)|$(echo "$line" | field p99_ms)|$(echo "$line" | sed -n 's/.*status\(.*\)/\1/p')|$(awk -v a="$s0" -v b="$s1" -v n="$(echo "$line" | sed -n "s/^requests \([0-9]*\).*/\1/p")" 'BEGIN { printf "%.2f", (b - a) / n }')|$(echo "$c0 $c1" | awk '{ printf "%.0f", 100 * ($3 - $1) / ($4 - $2) }')"
	log "$1: $line"
}

for n in 1 2 3; do
	log "router in front of $n cell(s)"
	setup "$n" "n$n"
	point "router, $n cell(s): push" "$RH" POST /api/v1/push "$WORK/push_n$n.txt" 10
	point "router, $n cell(s): cycle" "$RH" POST /streams/v1/cycle "$WORK/cycle_n$n.txt" 1
done
# the same load straight at cell 0 (where every tenant of the 1-cell point lives)
log "straight to cell 0's own listener"
point "cell 0 directly: push" "$(($(cellport 0) + 100))" POST /api/v1/push "$WORK/push_n1.txt" 10
point "cell 0 directly: cycle" "$(($(cellport 0) + 100))" POST /streams/v1/cycle "$WORK/cycle_n1.txt" 1

# the router's cost per call: the same cheap read routed and local
PID=$(sql "$(cellport 0)" "SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = '${T[0]}' LIMIT 1")
echo "SELECT queen.partition_queue('$PID', '${T[0]}');" >"$WORK/probe.sql"
chmod 644 "$WORK/probe.sql"
pgb() { as_pg "$BIN/pgbench" -h 127.0.0.1 -p "$1" -U postgres -n -M prepared -c 1 -T "$DURATION" -f "$WORK/probe.sql" postgres 2>&1 |
	sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -1; }
sql "$R" "UPDATE queen_router.placement SET cell = 'cell0'" >/dev/null
sql "$R" "DELETE FROM queen_router.cells WHERE idx > 0" >/dev/null
log "the router's cost per call (pgbench, 1 client)"
TPS_ROUTER=$(pgb "$R")
TPS_CELL=$(pgb "$(cellport 0)")
[ -n "${QS_BENCH_NO_LOCK:-}" ] || flock -u 9

CPUS=$(nproc)
MODEL=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
{
	echo "## bench/cells.sh, $(date -u +%Y-%m-%d) ($CPUS cores, $MODEL; ${DURATION} s per point, $TENANTS connections)"
	echo
	echo "| point | requests/s | msgs/s | p50 ms | p99 ms | statuses | cell WAL flushes per request | machine CPU busy % |"
	echo "|---|---|---|---|---|---|---|---|"
	for k in "router, 1 cell(s): push" "router, 2 cell(s): push" "router, 3 cell(s): push" "cell 0 directly: push" \
		"router, 1 cell(s): cycle" "router, 2 cell(s): cycle" "router, 3 cell(s): cycle" "cell 0 directly: cycle"; do
		IFS='|' read -r rps msgs p50 p99 st fl busy <<<"${RES[$k]}"
		echo "| $k | $rps | $msgs | $p50 | $p99 | $st | $fl | $busy |"
	done
	echo
	awk -v r="$TPS_ROUTER" -v c="$TPS_CELL" 'BEGIN {
		printf "Routed read `queen.partition_queue` from 1 pgbench client: %.0f/s on the router, %.0f/s on the cell itself: the router adds %.0f µs per call.\n", r, c, 1e6 / r - 1e6 / c }'
	awk -v a="${RES["router, 1 cell(s): push"]%%|*}" -v d="${RES["cell 0 directly: push"]%%|*}" \
		-v b="${RES["router, 1 cell(s): cycle"]%%|*}" -v e="${RES["cell 0 directly: cycle"]%%|*}" 'BEGIN {
		printf "Through the router to 1 cell, against that cell directly: push %.2f, cycle %.2f.\n", a / d, b / e }'
} | tee "$OUT/cells.md"
