#!/usr/bin/env bash
# queen_streams benchmark (issue 2): queen.push and pop+ack with 100-message
# batches against a row-per-message (pgmq-shaped) baseline, in one run, on a
# throwaway PostgreSQL instance. Not part of CI or scripts/test.sh.
#
#   bash bench/run.sh            # as root (server and pgbench run as `postgres`)
#
# Knobs (environment):
#   QS_BENCH_DURATION=15     seconds measured per point
#   QS_BENCH_WARMUP=3        unmeasured seconds of the same load before each point
#   QS_BENCH_PUSH_CLIENTS="4 8"
#   QS_BENCH_POP_CLIENTS=4
#   QS_BENCH_PREFILL=2500000 messages pre-filled into each side before pop+ack
#   QS_BENCH_EXTRAS=1        also run the extra queen push shapes (mixed / one partition / no txn id)
#   QS_BENCH_FSYNC=1         measure fdatasync with pg_test_fsync first
#   QS_BENCH_PGSS=0          1: preload pg_stat_statements (track=all), dump the top statements per point
#   QS_BENCH_PERF=0          1: `perf record -a -g` during each queen point (bench/out/perf-*.txt)
#   QS_BENCH_KEEP=0          1: leave the instance running at the end (prints how to connect)
#   QS_BENCH_PG_BIN=/usr/lib/postgresql/15/bin   PostgreSQL to run (a private copy of the tree
#                            lets you benchmark a patched build without touching the shared install)
#   QS_BENCH_POINTS=all      push | pop: run only those points (for A/B comparisons)
#   QS_BENCH_BUILD=1         0: skip `make install`, benchmark the extension already installed there
#
# Output: a table on stdout and bench/out/results.md (plus raw logs in bench/out/).
# shellcheck disable=SC2015  # `A && B || true` is meant: best effort
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BENCH="$ROOT/bench"
OUT="$BENCH/out"
BIN=${QS_BENCH_PG_BIN:-/usr/lib/postgresql/15/bin}
BUILD=${QS_BENCH_BUILD:-1}
POINTS=${QS_BENCH_POINTS:-all}

DURATION=${QS_BENCH_DURATION:-15}
WARMUP=${QS_BENCH_WARMUP:-3}
PUSH_CLIENTS=${QS_BENCH_PUSH_CLIENTS:-"4 8"}
POP_CLIENTS=${QS_BENCH_POP_CLIENTS:-4}
PREFILL=${QS_BENCH_PREFILL:-2500000}
EXTRAS=${QS_BENCH_EXTRAS:-1}
FSYNC=${QS_BENCH_FSYNC:-1}
PGSS=${QS_BENCH_PGSS:-0}
PERF=${QS_BENCH_PERF:-0}
KEEP=${QS_BENCH_KEEP:-0}
VARIANTS=4
NCPU=$(nproc)

# shellcheck disable=SC2034 # bench/lib.sh logs with it
TAG=bench
. bench/lib.sh

# One install+benchmark at a time per machine (scripts/test.sh takes the same lock).
exec 9>/tmp/queen_streams.test.lock
log "waiting for /tmp/queen_streams.test.lock"
flock 9
if [ "$BUILD" = 1 ]; then
	log "building and installing the extension"
	make -s PG_CONFIG="$BIN/pg_config" && make -s PG_CONFIG="$BIN/pg_config" install
fi
LIBSO="$("$BIN/pg_config" --pkglibdir)/queen_streams.so"
LIBSUM=$(md5sum "$LIBSO" | cut -d' ' -f1)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
# perf resolves symbols by build id: keep a copy of this very library.
[ "$PERF" = 1 ] && perf buildid-cache -a "$LIBSO" 2>/dev/null || true

rm -rf "$OUT"
mkdir -p "$OUT/logs"
WORK=$(mktemp -d /tmp/queen_streams-bench.XXXXXX)
chmod 755 "$WORK"
[ "$(id -u)" -eq 0 ] && chown postgres:postgres "$WORK"
DATA="$WORK/data"
VMSTAT_PID=
PERF_PID=

cleanup() {
	[ -n "$VMSTAT_PID" ] && kill "$VMSTAT_PID" 2>/dev/null || true
	[ -n "$PERF_PID" ] && kill "$PERF_PID" 2>/dev/null || true
	if [ "$KEEP" = 1 ] && [ -s "$DATA/PG_VERSION" ]; then
		log "instance kept: psql -h 127.0.0.1 -p $PORT -U postgres bench   (stop: runuser -u postgres -- $BIN/pg_ctl -D $DATA stop; rm -rf $WORK)"
		return
	fi
	if [ -s "$DATA/PG_VERSION" ]; then
		as_pg "$BIN/pg_ctl" -D "$DATA" -m immediate stop >/dev/null 2>&1 || true
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=${QS_BENCH_PORT:-55432}
while ! port_free "$PORT"; do PORT=$((PORT + 1)); done

# ---------------------------------------------------------------- instance
log "initdb in $WORK (port $PORT)"
as_pg "$BIN/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 --no-sync >/dev/null
PRELOAD=queen_streams
[ "$PGSS" = 1 ] && PRELOAD="queen_streams,pg_stat_statements"
cat >>"$DATA/postgresql.conf" <<CONF
# queen_streams benchmark
port = $PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$WORK'
shared_preload_libraries = '$PRELOAD'
shared_buffers = 1GB
max_wal_size = 4GB
min_wal_size = 1GB
checkpoint_timeout = 30min
max_connections = 40
synchronous_commit = on
log_min_messages = warning
CONF
if [ "$PGSS" = 1 ]; then
	printf 'pg_stat_statements.track = all\npg_stat_statements.max = 1000\n' >>"$DATA/postgresql.conf"
fi
as_pg "$BIN/pg_ctl" -D "$DATA" -l "$WORK/server.log" -w start >/dev/null

PSQL() { as_pg "$BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U postgres -d bench "$@"; }
as_pg "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres bench
cp "$BENCH"/*.sql "$WORK/"
mkdir -p "$WORK/scripts"
gen() {	# gen NAME MODE TARGET: a family of push scripts (see gen_push.pl)
	perl "$BENCH/gen_push.pl" "$WORK/scripts" "$1" "$2" "$3" "$VARIANTS"
	[ "$(id -u)" -eq 0 ] && chown -R postgres:postgres "$WORK/scripts"
	true
}
[ "$(id -u)" -eq 0 ] && chown postgres:postgres "$WORK"/*.sql
PSQL -f "$WORK/setup.sql"
[ "$PGSS" = 1 ] && PSQL -c "CREATE EXTENSION pg_stat_statements"
PGVER=$(PSQL -c "SHOW server_version")

# ---------------------------------------------------------------- machine
CPU_MODEL=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
MEM=$(free -g | awk '/^Mem:/ {print $2 " GiB"}')
FSYNC_LINE="not measured"
if [ "$FSYNC" = 1 ]; then
	log "pg_test_fsync (fdatasync rate of the data disk)"
	as_pg "$BIN/pg_test_fsync" -s 2 -f "$WORK/fsync.test" >"$OUT/logs/pg_test_fsync.txt" 2>&1 || true
	FSYNC_LINE=$(awk '/fdatasync/ && /ops\/sec/ {print $2 " ops/s (" $4 " us/op)"; exit}' "$OUT/logs/pg_test_fsync.txt")
	rm -f "$WORK/fsync.test"
fi

# ---------------------------------------------------------------- helpers
# Messages a side holds right now; points take the difference.
count_msgs() {
	case $1 in
	push_queen) PSQL -c "SELECT coalesce(sum(p.last_offset + 1), 0) FROM queen.log_partitions p
		JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = '$QUEUE'" ;;
	push_base) PSQL -c "SELECT count(*) FROM bench.q_push" ;;
	pop_queen) PSQL -c "SELECT coalesce(sum(c.committed + 1), 0) FROM queen.log_consumers c
		JOIN queen.log_partitions p ON p.id = c.partition_id
		JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'bench_pop'" ;;
	pop_base) PSQL -c "SELECT -count(*) FROM bench.q_pop" ;;
	esac
}

pgb() {	# pgbench against the bench database, as postgres, from $WORK
	(cd "$WORK" && as_pg env PGOPTIONS="${PGB_OPTIONS:-}" "$BIN/pgbench" -h 127.0.0.1 -p "$PORT" \
		-U postgres -n "$@" bench)
}

script_args() {	# -f for every file of a generated script family
	local f
	for f in "$WORK"/scripts/"$1".*.sql; do printf -- '-f scripts/%s ' "${f##*/}"; done
}

# Every pgbench invocation starts its counter n at its own base, 1e9 apart:
# transactionIds (tx-<n*1000+client>-<i>) then never repeat across runs.
INV=0
next_base() { INV=$((INV + 1)); NBASE=$((INV * 1000000000)); }

RESULTS="$WORK/results.tsv"
: >"$RESULTS"

# measure NAME KIND CLIENTS MODE pgbench-args...   (push_queen counts messages of queue $QUEUE)
measure() {
	local name=$1 kind=$2 clients=$3 mode=$4
	shift 4
	local jobs=$((clients < NCPU ? clients : NCPU))
	local lf="$OUT/logs/$name.log"
	if [ "$WARMUP" -gt 0 ]; then
		next_base
		pgb -c "$clients" -j "$jobs" -M "$mode" -T "$WARMUP" -D n="$NBASE" "$@" \
			>"$OUT/logs/$name.warmup.log" 2>&1 || true
	fi
	PSQL -c "CHECKPOINT" >/dev/null
	[ "$PGSS" = 1 ] && PSQL -c "SELECT pg_stat_statements_reset()" >/dev/null
	local m0 w0 x0 m1 w1 x1 rc
	m0=$(count_msgs "$kind")
	w0=$(PSQL -c "SELECT pg_current_wal_lsn()")
	x0=$(PSQL -c "SELECT xact_commit FROM pg_stat_database WHERE datname = 'bench'")
	vmstat 1 "$((DURATION + 1))" >"$OUT/logs/$name.vmstat" 2>&1 &
	VMSTAT_PID=$!
	if [ "$PERF" = 1 ] && [[ $kind == *queen ]] && command -v perf >/dev/null; then
		perf record -F 499 -a -g --buildid-mmap -o "$OUT/perf-$name.data" -- sleep "$((DURATION - 2))" \
			>/dev/null 2>&1 &
		PERF_PID=$!
	fi
	log "$name: $clients clients, ${DURATION}s"
	rc=0
	next_base
	pgb -c "$clients" -j "$jobs" -M "$mode" -T "$DURATION" -D n="$NBASE" "$@" >"$lf" 2>&1 || rc=$?
	wait "$VMSTAT_PID" 2>/dev/null || true
	VMSTAT_PID=
	if [ -n "$PERF_PID" ]; then
		wait "$PERF_PID" 2>/dev/null || true
		PERF_PID=
		perf report -i "$OUT/perf-$name.data" --stdio --no-children --sort dso,sym \
			--percent-limit 0.7 2>/dev/null | grep -v '^$' | grep -E '^ +[0-9]' \
			>"$OUT/perf-$name.txt" || true
		perf report -i "$OUT/perf-$name.data" --stdio --no-children --sort comm,dso \
			2>/dev/null | grep -E '^ +[0-9]' | head -20 >"$OUT/perf-$name.dso.txt" || true
	fi
	sleep 1	# let the stats collector see the last commits
	m1=$(count_msgs "$kind")
	w1=$(PSQL -c "SELECT pg_current_wal_lsn()")
	x1=$(PSQL -c "SELECT xact_commit FROM pg_stat_database WHERE datname = 'bench'")
	if [ "$PGSS" = 1 ]; then
		PSQL -F $'\t' -c "SELECT calls, round(total_exec_time::numeric, 1) AS ms,
			round((total_exec_time / greatest(calls, 1))::numeric, 3) AS ms_per_call,
			rows, shared_blks_hit, shared_blks_read, wal_bytes,
			left(regexp_replace(query, '\s+', ' ', 'g'), 160)
			FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 25" >"$OUT/pgss-$name.tsv"
	fi
	local nx tps lat aborted=""
	nx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$lf")
	tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$lf")
	lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$lf")
	if [ "$rc" -ne 0 ] || grep -q 'aborted' "$lf"; then
		aborted="ABORTED (see bench/out/logs/$name.log)"
		log "$name: pgbench failed: $(grep -m1 -E 'aborted|ERROR|FATAL' "$lf" || tail -1 "$lf")"
	fi
	local wal
	wal=$(PSQL -c "SELECT pg_wal_lsn_diff('$w1', '$w0')::bigint")
	# msgs/s = messages moved / measured time, measured time = transactions / tps.
	awk -v name="$name" -v kind="$kind" -v c="$clients" -v nx="${nx:-0}" -v tps="${tps:-0}" \
		-v lat="${lat:-0}" -v dm="$((m1 - m0))" -v wal="$wal" -v dx="$((x1 - x0))" \
		-v ab="$aborted" -v vm="$OUT/logs/$name.vmstat" 'BEGIN {
		secs = (tps > 0) ? nx / tps : 0
		rate = (secs > 0) ? dm / secs : 0
		# vmstat columns: us sy id wa st are 13..17; skip the two header lines and the since-boot line
		n = 0; us = sy = id = wa = 0
		while ((getline line < vm) > 0) {
			k = split(line, f, " ")
			if (f[1] !~ /^[0-9]+$/) continue
			if (++seen == 1) continue
			us += f[13]; sy += f[14]; id += f[15]; wa += f[16]; n++
		}
		if (n == 0) n = 1
		printf "%s\t%s\t%d\t%.1f\t%.0f\t%.2f\t%d\t%.0f\t%.0f\t%.0f/%.0f/%.0f/%.0f\t%s\t%.1f\n",
			name, kind, c, tps, rate, lat, dm, (dm > 0 ? wal / dm : 0),
			(secs > 0 ? dx / secs : 0), us / n, sy / n, id / n, wa / n, ab,
			(nx > 0 ? dm / nx : 0)
	}' >>"$RESULTS"
	tail -1 "$RESULTS" | awk -F'\t' '{printf "    -> %s msgs/s (%s scripts/s, %s ms avg)\n", $5, $4, $6}' >&2
}

# ---------------------------------------------------------------- push
# Each queen point pushes into a fresh queue (16 partitions created by a first
# unmeasured push), so the points do not inherit each other's dedup window.
create_queue() {	# create_queue NAME: the queue and its partitions p-0..p-15
	QUEUE=$1
	PSQL -c "SELECT queen.push(jsonb_build_object('items', jsonb_agg(jsonb_build_object(
		'queue', '$1', 'partition', 'p-' || i, 'payload', '{}'::jsonb))))
		FROM generate_series(0, 15) i" >/dev/null
}
fresh_queue() {	# fresh_queue NAME MODE: generate its scripts, create its partitions
	gen "$1" "$2" "$1"
	create_queue "$1"
}
# The storage floor: queen.log_push_one_v1 with a segment packed beforehand
# (what Queen's broker sends: frames, zstd and hashes are built outside PG),
# dedup window 0. One file per (variant, partition), the same payloads.
engine_scripts() {	# engine_scripts QUEUE
	local q=$1
	gen "${q}_src" notxn "$q"
	bench_engine_scripts "$q" "$WORK" PSQL
	[ "$(id -u)" -eq 0 ] && chown -R postgres:postgres "$WORK/scripts"
	create_queue "$q"
}
c1=$(echo "$PUSH_CLIENTS" | awk '{print $1}')
[ "$POINTS" = pop ] && PUSH_CLIENTS= && EXTRAS=0
gen base_push base q_push
for c in $PUSH_CLIENTS; do
	fresh_queue "push_c$c" spread
	# shellcheck disable=SC2046
	measure "push_queen_c$c" push_queen "$c" simple $(script_args "push_c$c")
	# shellcheck disable=SC2046
	measure "push_base_c$c" push_base "$c" simple $(script_args base_push)
done
if [ "$EXTRAS" = 1 ]; then
	for shape in mixed one notxn; do
		fresh_queue "push_${shape}_c$c1" "$shape"
		# shellcheck disable=SC2046
		measure "push_queen_${shape}_c$c1" push_queen "$c1" simple $(script_args "push_${shape}_c$c1")
	done
	engine_scripts "push_engine_c$c1"
	# shellcheck disable=SC2046
	measure "push_queen_engine_c$c1" push_queen "$c1" simple $(script_args "push_engine_c$c1")
fi

# ---------------------------------------------------------------- pop+ack
PREFILLED_Q=- PREFILLED_B=- LEFT_Q=- LEFT_B=- DRY=""
if [ "$POINTS" != push ]; then
per_client=$(((PREFILL + 799) / 800))	# 8 clients x 100 messages per transaction
log "pre-filling $((per_client * 800)) messages into each side (synchronous_commit=off)"
t0=$(date +%s)
fresh_queue bench_pop spread
gen base_fill base q_pop
next_base
# shellcheck disable=SC2046
PGB_OPTIONS="-c synchronous_commit=off" pgb -c 8 -j "$NCPU" -M simple -t "$per_client" \
	-D n="$NBASE" $(script_args bench_pop) >"$OUT/logs/prefill_queen.log" 2>&1
# shellcheck disable=SC2046
PGB_OPTIONS="-c synchronous_commit=off" pgb -c 8 -j "$NCPU" -M simple -t "$per_client" \
	$(script_args base_fill) >"$OUT/logs/prefill_base.log" 2>&1
PSQL -c "VACUUM ANALYZE" >/dev/null
log "pre-fill done in $(($(date +%s) - t0)) s"
PREFILLED_Q=$(PSQL -c "SELECT sum(p.last_offset + 1) FROM queen.log_partitions p
	JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'bench_pop'")
PREFILLED_B=$(PSQL -c "SELECT count(*) FROM bench.q_pop")

if [ "$EXTRAS" = 1 ]; then
	# The same push into a queue that already holds the pre-fill inside its
	# dedup window (~PREFILL/16 messages per partition): the probe's steady state.
	QUEUE=bench_pop
	# shellcheck disable=SC2046
	measure "push_queen_full_c$c1" push_queen "$c1" simple $(script_args bench_pop)
fi

measure "popack_queen_c$POP_CLIENTS" pop_queen "$POP_CLIENTS" prepared -f queen_pop_ack.sql
measure "popack_base_c$POP_CLIENTS" pop_base "$POP_CLIENTS" prepared -f base_pop_ack.sql

LEFT_Q=$(PSQL -c "SELECT min(p.last_offset - coalesce(c.committed, -1)) FROM queen.log_partitions p
	JOIN queen.queues q ON q.id = p.queue_id
	LEFT JOIN queen.log_consumers c ON c.partition_id = p.id WHERE q.name = 'bench_pop'")
LEFT_B=$(PSQL -c "SELECT count(*) FROM bench.q_pop")
DRY=""
if [ "${LEFT_Q:-0}" -le 0 ] || [ "${LEFT_B:-0}" -le 0 ]; then
	DRY="WARNING: a queue ran dry during pop+ack (queen: min backlog per partition $LEFT_Q, baseline: $LEFT_B rows left); raise QS_BENCH_PREFILL"
	log "$DRY"
fi
fi
SIZES=$(PSQL -F ' ' -c "SELECT
	pg_size_pretty(pg_total_relation_size('queen.log_segments') + pg_total_relation_size('queen.log_txns')),
	pg_size_pretty(pg_total_relation_size('bench.q_push') + pg_total_relation_size('bench.q_pop'))")

# ---------------------------------------------------------------- report
ratio() {	# ratio QUEEN_POINT BASE_POINT
	awk -F'\t' -v q="$1" -v b="$2" '$1 == q {qr = $5} $1 == b {br = $5}
		END { if (qr > 0 && br > 0) printf "%.2f", qr / br; else printf "n/a" }' "$RESULTS"
}
verdict() { awk -v r="$1" 'BEGIN { if (r == "n/a") print "n/a"; else if (r + 0 >= 2) print "meets the 2x goal"; else print "BELOW the 2x goal" }'; }

{
	echo "# queen_streams benchmark"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- src sql 2>/dev/null || echo ' + uncommitted src/sql changes')"
	echo
	echo "Machine: $NCPU CPUs ($CPU_MODEL), $MEM RAM; pgbench runs on the same CPUs."
	echo "Load average when the run started: $LOAD_START (other work on the machine shares the CPUs)."
	echo "Extension: $LIBSO$([ "$BUILD" = 1 ] && echo ", built from the working tree by this run")."
	[ "$LIBSUM" != "$(md5sum "$LIBSO" | cut -d' ' -f1)" ] &&
		echo "Note: another build re-installed queen_streams.so during the run (the server kept the copy it preloaded; perf symbols for it may be wrong)."
	echo "fdatasync (pg_test_fsync, 8 kB): $FSYNC_LINE."
	echo "PostgreSQL $PGVER: shared_buffers 1GB, max_wal_size 4GB, checkpoint_timeout 30min,"
	echo "synchronous_commit on, CHECKPOINT before each point; ${DURATION}s per point after ${WARMUP}s of warm-up."
	echo "Payloads: ~165 B JSON events (6 kinds, 4 batch variants); 100 messages per transaction."
	echo
	echo "| point | clients | scripts/s | msgs/s | avg latency ms | msgs | msgs/script | WAL B/msg | commits/s | CPU us/sy/id/wa % |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
	awk -F'\t' '{printf "| %s%s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
		$1, ($11 != "" ? " " $11 : ""), $3, $4, $5, $6, $7, $12, $8, $9, $10}' "$RESULTS"
	echo
	echo "| ratio queen / baseline | value | goal |"
	echo "|---|---:|---|"
	for c in $PUSH_CLIENTS; do
		r=$(ratio "push_queen_c$c" "push_base_c$c")
		echo "| push, $c clients | $r | $(verdict "$r") |"
	done
	r=$(ratio "popack_queen_c$POP_CLIENTS" "popack_base_c$POP_CLIENTS")
	echo "| pop+ack, $POP_CLIENTS clients | $r | $(verdict "$r") |"
	if [ "$EXTRAS" = 1 ]; then
		for shape in notxn mixed one full engine; do
			r=$(ratio "push_queen_${shape}_c$c1" "push_base_c$c1")
			echo "| extra: push_queen_${shape}_c$c1 / push_base_c$c1 | $r | (not the goal's shape) |"
		done
	fi
	echo
	echo "Pre-filled before pop+ack: queen $PREFILLED_Q messages (16 partitions), baseline $PREFILLED_B rows."
	echo "Left after: queen min backlog per partition $LEFT_Q, baseline $LEFT_B rows. Storage at the end: queen segments+hashes $(echo "$SIZES" | cut -d' ' -f1-2), baseline tables $(echo "$SIZES" | cut -d' ' -f3-4)."
	[ -n "$DRY" ] && echo && echo "**$DRY**"
	echo
	echo "Points: push = one \`queen.push\` of 100 items (one random partition of 16 per batch, client"
	echo "transactionIds, so the dedup probe runs; a fresh queue per point) vs one pgmq send_batch-shaped"
	echo "INSERT of the same 100 payloads. Extras: push_queen_notxn = no transactionId (no dedup probe);"
	echo "push_queen_mixed = the 100 items spread over the 16 partitions; push_queen_one = every client on"
	echo "one partition; push_queen_full = push into the pre-filled pop queue (its dedup window already"
	echo "holds the pre-fill); push_queen_engine = queen.log_push_one_v1 with a segment packed beforehand"
	echo "(frames, zstd, hashes built outside PG, as Queen's broker does), dedup window 0: the storage floor."
	echo "pop+ack = pop (transaction 1) + ack of the last transactionId (transaction 2)"
	echo "vs pgmq read (SKIP LOCKED, vt/read_ct update) + delete of the leased ids. msgs/s counts messages"
	echo "written, or acked/deleted, in the database over the measured time (transactions / tps)."
} >"$OUT/results.md"

echo
printf '%-24s %7s %10s %10s %8s %9s %10s %14s\n' point clients scripts/s msgs/s lat_ms WAL_B/msg commits/s 'cpu us/sy/id/wa'
awk -F'\t' '{printf "%-24s %7s %10s %10s %8s %9s %10s %14s %s\n", $1, $3, $4, $5, $6, $8, $9, $10, $11}' "$RESULTS"
echo
grep -E '^\| (push|pop)' "$OUT/results.md" | grep -E 'goal' || true
[ -n "$DRY" ] && echo "$DRY"
echo "results: bench/out/results.md"
