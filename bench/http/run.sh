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
#   - p50/p99 latency of every HTTP point, and the workers' RSS at the end.
# Goal: HTTP cycles >= 0.8 of the SQL analog.
#
# Knobs: QS_BENCH_DURATION (10), QS_BENCH_WARMUP (2), QS_BENCH_CONNS (8),
# QS_BENCH_WORKERS (2), QS_BENCH_GROUP_FLUSH (off), QS_BENCH_PORT (55442),
# QS_BENCH_HTTP_PORT (55443).
# Output: a table on stdout and bench/http/out/results.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
OUT="$ROOT/bench/http/out"
BIN=/usr/lib/postgresql/15/bin
DURATION=${QS_BENCH_DURATION:-10}
WARMUP=${QS_BENCH_WARMUP:-2}
CONNS=${QS_BENCH_CONNS:-8}
WORKERS=${QS_BENCH_WORKERS:-2}
GROUP_FLUSH=${QS_BENCH_GROUP_FLUSH:-off}
PORT=${QS_BENCH_PORT:-55442}
HTTP_PORT=${QS_BENCH_HTTP_PORT:-55443}

as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
log() { printf '[bench/http %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# One install+benchmark at a time per machine (scripts/test.sh takes the same lock).
exec 9>/tmp/queen_streams.test.lock
log "waiting for /tmp/queen_streams.test.lock"
flock 9
make -s && make -s install

rm -rf "$OUT"
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/queen_streams-bench-http.XXXXXX)
chmod 755 "$WORK"
[ "$(id -u)" -eq 0 ] && chown postgres:postgres "$WORK"
DATA="$WORK/data"
cleanup() {
	[ -s "$DATA/PG_VERSION" ] && as_pg "$BIN/pg_ctl" -D "$DATA" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'cp -f "$WORK/postgresql.log" "$OUT/" 2>/dev/null || true; cleanup' EXIT

cc -O2 -Wall -o "$WORK/loadgen" bench/http/loadgen.c
as_pg "$BIN/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 >/dev/null
cat >>"$DATA/postgresql.conf" <<CONF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$WORK'
shared_buffers = 1GB
max_wal_size = 4GB
shared_preload_libraries = 'queen_streams'
queen_streams.http_port = $HTTP_PORT
queen_streams.http_workers = $WORKERS
queen_streams.group_flush = $GROUP_FLUSH
queen_streams.retention_interval = 0
CONF
as_pg "$BIN/pg_ctl" -D "$DATA" -l "$WORK/postgresql.log" -w start >/dev/null
PSQL=(as_pg "$BIN/psql" -h "$WORK" -p "$PORT" -U postgres -d postgres -qXAt -v ON_ERROR_STOP=1)
"${PSQL[@]}" -c "CREATE EXTENSION queen_streams"
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$HTTP_PORT/health" && break; sleep 0.1; done

log "setting up: one query, $CONNS source partitions, $CONNS sink partitions"
"${PSQL[@]}" >/dev/null <<SQL
SELECT queen.push(jsonb_build_object('items',
	(SELECT jsonb_agg(jsonb_build_object('queue', 'bench.src', 'partition', 'p' || i, 'payload', '{}'::jsonb))
	   FROM generate_series(1, $CONNS) i)));
SELECT queen_streams.register_query(
	'{"name":"bench","source_queue":"bench.src","sink_queue":"bench.sink","config_hash":"h"}');
-- one cycle body per connection / pgbench client: its own source partition
-- (the cycle's advisory lock) and its own sink partition (the allocator row)
CREATE TABLE bench_bodies AS
SELECT row_number() OVER (ORDER BY p.name)::int AS i,
       jsonb_build_object(
         'query_id', (SELECT id FROM queen_streams.queries WHERE name = 'bench'),
         'partition_id', p.id,
         'state_ops', jsonb_build_array(jsonb_build_object('type', 'upsert', 'key', 'tumb:60' || chr(31) || 'k',
             'value', '{"acc":{"count":1},"windowStart":0,"windowEnd":60000}'::jsonb)),
         'push_items', jsonb_build_array(jsonb_build_object('queue', 'bench.sink',
             'partition', 's' || p.name, 'payload', '{"key":"k","count":1}'::jsonb)),
         'ack', NULL) AS body
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = 'bench.src';
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
"${PSQL[@]}" -c "COPY (SELECT body FROM bench_bodies ORDER BY i) TO STDOUT" >"$WORK/cycle_bodies.txt"
chmod 644 "$WORK/cycle_bodies.txt"

cat >"$WORK/cycle_sql.sql" <<'SQL'
SELECT queen_streams.cycle(body) FROM bench_bodies WHERE i = :client_id % (SELECT count(*) FROM bench_bodies) + 1;
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
"${PSQL[@]}" -c "SELECT jsonb_build_object('items', jsonb_agg(jsonb_build_object('queue', 'bench.push100',
	'payload', jsonb_build_object('id', i, 'kind', 'click', 'user', 'u-' || i)))) FROM generate_series(1, 100) i" \
	>"$WORK/push100.txt"
chmod 644 "$WORK"/*.txt "$WORK"/*.sql

pgb() {	# pgbench a script; prints "tps"
	as_pg "$BIN/pgbench" -h "$WORK" -p "$PORT" -U postgres -n -M prepared -c "$CONNS" -j 1 \
		-T "$((DURATION + WARMUP))" -f "$1" postgres 2>&1 | tee -a "$OUT/pgbench.log" |
		sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -1
}
lg() {	# loadgen; prints its summary line
	"$WORK/loadgen" -p "$HTTP_PORT" -c "$CONNS" -d "$DURATION" -w "$WARMUP" "$@" | tee -a "$OUT/loadgen.log"
}
field() { sed -n "s/.* $1 \([0-9.]*\).*/\1/p"; }

log "cycles over HTTP ($CONNS connections)"
HTTP_CYCLE=$(lg -m POST -u /streams/v1/cycle -b "$WORK/cycle_bodies.txt")
log "the same cycle over SQL ($CONNS pgbench clients)"
SQL_CYCLE=$(pgb "$WORK/cycle_sql.sql")
log "the plain-SQL analog ($CONNS pgbench clients)"
ANALOG=$(pgb "$WORK/analog.sql")
log "push over HTTP, 1 message per request"
PUSH1=$(lg -m POST -u /api/v1/push -b "$WORK/push1.txt")
log "push over HTTP, 100 messages per request"
PUSH100=$(lg -m POST -u /api/v1/push -b "$WORK/push100.txt")
log "GET /health (the listener alone)"
HEALTH=$(lg -m GET -u /health)

RSS=$("${PSQL[@]}" -c "SELECT string_agg(pid::text, ' ') FROM queen_streams.http_workers()" |
	tr ' ' '\n' | while read -r pid; do
		awk '/VmRSS|RssAnon|RssShmem/ {printf "%s %s kB  ", $1, $2}' "/proc/$pid/status"; echo; done)
OK=$("${PSQL[@]}" -c "SELECT count(*) FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id
	JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'bench.sink'")

hc=$(echo "$HTTP_CYCLE" | field rps)
ratio_sql=$(awk -v a="$hc" -v b="$SQL_CYCLE" 'BEGIN { printf "%.2f", a / b }')
ratio_analog=$(awk -v a="$hc" -v b="$ANALOG" 'BEGIN { printf "%.2f", a / b }')
p1=$(echo "$PUSH1" | field rps)
p100=$(echo "$PUSH100" | field rps)
{
	echo "# bench/http results ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $CONNS connections/clients, $WORKERS workers, ${DURATION}s per point)"
	echo
	echo "| point | per second | p50 ms | p99 ms |"
	echo "|---|---|---|---|"
	echo "| cycles over HTTP | $hc | $(echo "$HTTP_CYCLE" | field p50_ms) | $(echo "$HTTP_CYCLE" | field p99_ms) |"
	echo "| the same cycle over SQL (pgbench) | $SQL_CYCLE | | |"
	echo "| plain-SQL analog, same writes (pgbench) | $ANALOG | | |"
	echo "| push over HTTP, 1 msg/request | $p1 msgs ($p1 req) | $(echo "$PUSH1" | field p50_ms) | $(echo "$PUSH1" | field p99_ms) |"
	echo "| push over HTTP, 100 msgs/request | $(awk -v r="$p100" 'BEGIN { printf "%.0f", r * 100 }') msgs ($p100 req) | $(echo "$PUSH100" | field p50_ms) | $(echo "$PUSH100" | field p99_ms) |"
	echo "| GET /health | $(echo "$HEALTH" | field rps) | $(echo "$HEALTH" | field p50_ms) | $(echo "$HEALTH" | field p99_ms) |"
	echo
	echo "HTTP cycles / SQL cycles = **$ratio_sql** (goal >= 0.8); HTTP cycles / plain-SQL analog = **$ratio_analog**."
	echo
	echo "Worker memory after the run (RssShmem is shared_buffers pages the worker touched; RssAnon is its own):"
	echo "$RSS" | sed 's/^/- /'
	echo
	echo "Sink segments written by the HTTP and SQL cycles: $OK. Raw lines: loadgen.log, pgbench.log."
} | tee "$OUT/results.md"
