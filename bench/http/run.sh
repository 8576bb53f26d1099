#!/usr/bin/env bash
# queen_streams HTTP listener benchmark (issue 4), in one run on a throwaway
# instance. Not part of CI or scripts/test.sh.
#
#   bash bench/http/run.sh        # as root (the server and pgbench run as `postgres`)
#
# Measures, each for QS_BENCH_DURATION seconds after a warm-up:
#   - cycles/s over HTTP (POST /streams/v1/cycle: one state upsert, one sink
#     push, no source ack; each connection on its own partition);
#   - the same cycle over SQL (pgbench: SELECT queen_streams.cycle(...));
#   - the plain-SQL pgbench analog of the same writes (advisory lock, state
#     upsert, allocator UPDATE, segment and hash INSERTs) in tables of its own;
#   - push msgs/s over HTTP with 1 and with 100 messages per request;
#   - p50/p99 latency of every HTTP point, the server's CPU per request
#     (every process of the instance, from /proc), and the workers' RSS;
#   - then, restarted with the default 2 workers, cycles over HTTP again,
#     beside the SQL cycle from 2 pgbench clients.
# Goal: HTTP cycles >= 0.8 of the SQL cycle.
#
# Like for like: pgbench's C clients get C backends, each with a transaction
# in flight, and their commits share WAL flushes. A worker has one
# transaction in flight, so the listener gets as many workers as there are
# connections (QS_BENCH_WORKERS defaults to QS_BENCH_CONNS); with fewer,
# cycles wait on WAL flushes that pgbench's clients share. The workers
# balance connections among themselves (src/http/transport/daemon.c).
#
# Knobs: QS_BENCH_DURATION (10), QS_BENCH_WARMUP (2), QS_BENCH_CONNS (8),
# QS_BENCH_WORKERS (= connections), QS_BENCH_GROUP_COMMIT (max requests per
# group: 1, off, so that each worker has one request in flight as before),
# QS_BENCH_PORT (55442), QS_BENCH_HTTP_PORT (55443), QS_BENCH_PG_BIN (a
# private copy of the PostgreSQL tree: no lock; bench/lib.sh).
# Output: a table on stdout and bench/http/out/results.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
CONNS=${QS_BENCH_CONNS:-8}
WORKERS=${QS_BENCH_WORKERS:-$CONNS}
GROUP_COMMIT=${QS_BENCH_GROUP_COMMIT:-1}
HTTP_PORT=${QS_BENCH_HTTP_PORT:-55443}
# shellcheck disable=SC2034 # bench/lib.sh reads them
TAG=bench/http BENCH_PORT=${QS_BENCH_PORT:-55442} BENCH_DB=postgres
. bench/lib.sh
OUT="$ROOT/bench/http/out"
DURATION=$DUR
WARMUP=$WARM

# One install+benchmark at a time per machine (scripts/test.sh takes the same lock).
bench_lock_build

rm -rf "$OUT"
mkdir -p "$OUT"
bench_initdb <<CONF
shared_buffers = 1GB
max_wal_size = 4GB
queen_streams.http_port = $HTTP_PORT
queen_streams.http_workers = $WORKERS
max_worker_processes = $((WORKERS + 8))
queen_streams.group_commit_max_requests = $GROUP_COMMIT
queen_streams.retention_interval = 0
CONF
WORK=$W
DATA="$W/data"
trap 'cp -f "$W/log" "$OUT/postgresql.log" 2>/dev/null || true; bench_cleanup' EXIT

cc -O2 -Wall -o "$WORK/loadgen" bench/http/loadgen.c
start
Q -c "CREATE EXTENSION queen_streams"
bench_wait_workers "$WORKERS"

log "setting up: one query, $CONNS source partitions, $CONNS sink partitions"
bench_cycle_bodies "$CONNS"
Q >/dev/null <<SQL
-- the plain-SQL analog: the same rows written by plain statements
CREATE TABLE analog_state (query_id uuid, partition_id uuid, key text COLLATE "C", value jsonb,
	updated_at timestamptz, PRIMARY KEY (query_id, partition_id, key));
CREATE TABLE analog_partitions (i int PRIMARY KEY, last_offset bigint NOT NULL DEFAULT -1,
	last_write_at timestamptz) WITH (fillfactor = 70);
INSERT INTO analog_partitions (i) SELECT generate_series(1, 64);
CREATE TABLE analog_segments (i int, base_offset bigint, end_offset bigint, created_at timestamptz,
	blob bytea, PRIMARY KEY (i, base_offset));
CREATE TABLE analog_txns (i int, base_offset bigint, end_offset bigint, created_at timestamptz,
	hashes bytea, PRIMARY KEY (i, base_offset));
SQL

cat >"$WORK/analog.sql" <<'SQL'
BEGIN;
SELECT pg_advisory_xact_lock(hashtextextended('bench:' || :client_id, 0));
INSERT INTO analog_state VALUES ('00000000-0000-0000-0000-000000000000', '00000000-0000-0000-0000-000000000000',
	'k' || :client_id, '{"acc":{"count":1},"windowStart":0,"windowEnd":60000}', now())
	ON CONFLICT (query_id, partition_id, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now();
WITH p AS (UPDATE analog_partitions SET last_offset = last_offset + 1, last_write_at = now()
            WHERE i = :client_id + 1 RETURNING i, last_offset),
     s AS (INSERT INTO analog_segments SELECT i, last_offset, last_offset, now(),
            '\x28b52ffd2058a10100e8c5000000000000000000000000000000000000000000000000000000000000000000000000000000000000' FROM p)
INSERT INTO analog_txns SELECT i, last_offset, last_offset, now(), '\x00112233445566778899aabbccddeeff' FROM p;
END;
SQL
echo '{"items":[{"queue":"bench.push1","payload":{"id":1,"kind":"click","user":"u-1234"}}]}' >"$WORK/push1.txt"
Q -c "SELECT jsonb_build_object('items', jsonb_agg(jsonb_build_object('queue', 'bench.push100',
	'payload', jsonb_build_object('id', i, 'kind', 'click', 'user', 'u-' || i)))) FROM generate_series(1, 100) i" \
	>"$WORK/push100.txt"
chmod 644 "$WORK"/*.txt "$WORK"/*.sql

pgb() {	# pgbench a script [clients]; prints "tps"
	as_pg "$BIN/pgbench" -h "$WORK" -p "$PORT" -U postgres -n -M prepared -c "${2:-$CONNS}" -j 1 \
		-T "$((DURATION + WARMUP))" -f "$1" postgres 2>&1 | tee -a "$OUT/pgbench.log" |
		sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -1
}
lg() {	# loadgen; prints its summary line
	"$WORK/loadgen" -p "$HTTP_PORT" -c "$CONNS" -d "$DURATION" -w "$WARMUP" "$@" | tee -a "$OUT/loadgen.log"
}
field() { sed -n "s/.* $1 \([0-9.]*\).*/\1/p"; }

# CPU ticks of the whole instance: the postmaster, its children, and the
# children it has reaped (pgbench's backends).
TCK=$(getconf CLK_TCK)
ticks() {
	local pm t=0 pid st
	pm=$(head -1 "$DATA/postmaster.pid")
	for pid in "$pm" $(pgrep -P "$pm"); do
		st=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
		[ -n "$st" ] || continue
		set -- ${st##*) }
		t=$((t + ${12} + ${13}))
		[ "$pid" = "$pm" ] && t=$((t + ${14} + ${15}))
	done
	echo "$t"
}
T0=0
mark() { sleep 0.5; T0=$(ticks); }
cpu_per() {	# server CPU microseconds per operation since mark(), at $1 operations/s
	sleep 0.5
	awk -v t="$(( $(ticks) - T0 ))" -v hz="$TCK" -v r="$1" -v s="$((DURATION + WARMUP))" \
		'BEGIN { printf "%.0f", t / hz * 1e6 / (r * s) }'
}

log "cycles over HTTP ($CONNS connections, $WORKERS workers)"
mark; HTTP_CYCLE=$(lg -m POST -u /streams/v1/cycle -b "$WORK/cycle_bodies.txt")
C_HTTP_CYCLE=$(cpu_per "$(echo "$HTTP_CYCLE" | field rps)")
log "the same cycle over SQL ($CONNS pgbench clients)"
mark; SQL_CYCLE=$(pgb "$WORK/cycle_sql.sql"); C_SQL_CYCLE=$(cpu_per "$SQL_CYCLE")
log "the plain-SQL analog ($CONNS pgbench clients)"
mark; ANALOG=$(pgb "$WORK/analog.sql"); C_ANALOG=$(cpu_per "$ANALOG")
log "push over HTTP, 1 message per request"
mark; PUSH1=$(lg -m POST -u /api/v1/push -b "$WORK/push1.txt")
C_PUSH1=$(cpu_per "$(echo "$PUSH1" | field rps)")
log "push over HTTP, 100 messages per request"
mark; PUSH100=$(lg -m POST -u /api/v1/push -b "$WORK/push100.txt")
C_PUSH100=$(cpu_per "$(echo "$PUSH100" | field rps)")
log "GET /health (the listener alone)"
mark; HEALTH=$(lg -m GET -u /health); C_HEALTH=$(cpu_per "$(echo "$HEALTH" | field rps)")

RSS=$(Q -c "SELECT string_agg(pid::text, ' ') FROM queen_streams.http_workers()" |
	tr ' ' '\n' | while read -r pid; do
		awk '/VmRSS|RssAnon|RssShmem/ {printf "%s %s kB  ", $1, $2}' "/proc/$pid/status"; echo; done)
DIST=$(Q -c "SELECT string_agg(requests::text, ' ' ORDER BY worker) FROM queen_streams.http_workers()")

# The default listener: 2 workers for the same connections, beside pgbench
# with as many clients as transactions the listener can have in flight.
DEF_HTTP=""
if [ "$WORKERS" -ne 2 ]; then
	log "restarting with the default 2 workers"
	as_pg "$BIN/pg_ctl" -D "$DATA" -l "$W/log" -w restart \
		-o "-c queen_streams.http_workers=2" >/dev/null
	bench_wait_workers 2
	log "cycles over HTTP ($CONNS connections, 2 workers)"
	mark; DEF_HTTP=$(lg -m POST -u /streams/v1/cycle -b "$WORK/cycle_bodies.txt")
	C_DEF_HTTP=$(cpu_per "$(echo "$DEF_HTTP" | field rps)")
	log "the same cycle over SQL (2 pgbench clients)"
	mark; DEF_SQL=$(pgb "$WORK/cycle_sql.sql" 2); C_DEF_SQL=$(cpu_per "$DEF_SQL")
fi
OK=$(Q -c "SELECT count(*) FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id
	JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'bench.sink'")

hc=$(echo "$HTTP_CYCLE" | field rps)
ratio_sql=$(awk -v a="$hc" -v b="$SQL_CYCLE" 'BEGIN { printf "%.2f", a / b }')
ratio_analog=$(awk -v a="$hc" -v b="$ANALOG" 'BEGIN { printf "%.2f", a / b }')
p1=$(echo "$PUSH1" | field rps)
p100=$(echo "$PUSH100" | field rps)
row() {	# name, per second, loadgen line (or ""), cpu
	echo "| $1 | $2 | $(echo "$3" | field p50_ms) | $(echo "$3" | field p99_ms) | $4 |"
}
{
	echo "# bench/http results ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, ${DURATION}s per point)"
	echo
	echo "$CONNS HTTP connections and $CONNS pgbench clients; $WORKERS HTTP workers;" \
		"group_commit_max_requests = $GROUP_COMMIT; synchronous_commit = on."
	echo
	echo "| point | per second | p50 ms | p99 ms | server CPU µs/request |"
	echo "|---|---|---|---|---|"
	row "cycles over HTTP" "$hc" "$HTTP_CYCLE" "$C_HTTP_CYCLE"
	row "the same cycle over SQL (pgbench)" "$SQL_CYCLE" "" "$C_SQL_CYCLE"
	row "plain-SQL analog, same writes (pgbench)" "$ANALOG" "" "$C_ANALOG"
	row "push over HTTP, 1 msg/request" "$p1 msgs ($p1 req)" "$PUSH1" "$C_PUSH1"
	row "push over HTTP, 100 msgs/request" \
		"$(awk -v r="$p100" 'BEGIN { printf "%.0f", r * 100 }') msgs ($p100 req)" "$PUSH100" "$C_PUSH100"
	row "GET /health" "$(echo "$HEALTH" | field rps)" "$HEALTH" "$C_HEALTH"
	echo
	echo "HTTP cycles / SQL cycles = **$ratio_sql** (goal >= 0.8); HTTP cycles / plain-SQL analog = **$ratio_analog**."
	echo "Requests served per worker: $DIST."
	if [ -n "$DEF_HTTP" ]; then
		dh=$(echo "$DEF_HTTP" | field rps)
		echo
		echo "With the default 2 workers (at most 2 transactions in flight), same $CONNS connections:"
		echo
		echo "| point | per second | p50 ms | p99 ms | server CPU µs/request |"
		echo "|---|---|---|---|---|"
		row "cycles over HTTP, 2 workers" "$dh" "$DEF_HTTP" "$C_DEF_HTTP"
		row "the same cycle over SQL, 2 pgbench clients" "$DEF_SQL" "" "$C_DEF_SQL"
		echo
		echo "HTTP cycles (2 workers) / SQL cycles ($CONNS clients) =" \
			"**$(awk -v a="$dh" -v b="$SQL_CYCLE" 'BEGIN { printf "%.2f", a / b }')**;" \
			"/ SQL cycles (2 clients) = **$(awk -v a="$dh" -v b="$DEF_SQL" 'BEGIN { printf "%.2f", a / b }')**."
	fi
	echo
	echo "Worker memory at the end of the main run (RssShmem is shared_buffers pages the worker touched; RssAnon is its own):"
	echo "$RSS" | sed 's/^/- /'
	echo
	echo "Sink segments written by the HTTP and SQL cycles: $OK. Raw lines: loadgen.log, pgbench.log."
} | tee "$OUT/results.md"
