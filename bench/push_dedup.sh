#!/usr/bin/env bash
# Push-path points of issue 14 (reported, not asserted): a fully duplicate
# retry against the original push, a push into a partition whose dedup window
# holds many hashes against one into an empty partition (warm and on a new
# connection), and N items in one push for N = 10k and 100k.
#
#   bash bench/push_dedup.sh     # as root; a throwaway instance, fsync on
#
# Knobs: QS_BENCH_PG_BIN (/usr/lib/postgresql/15/bin; a private copy of the
# tree benchmarks a build without touching the shared install),
# QS_BENCH_WINDOW_HASHES (1000000), QS_BENCH_CACHE (2000000 entries).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${QS_BENCH_PG_BIN:-/usr/lib/postgresql/15/bin}
NH=${QS_BENCH_WINDOW_HASHES:-1000000}
CACHE=${QS_BENCH_CACHE:-2000000}
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
D=$(mktemp -d /tmp/qs-pushbench.XXXXXX); chown postgres "$D"; chmod 755 "$D"
PORT=$((20000 + RANDOM % 20000))
trap 'as_pg "$BIN/pg_ctl" -D "$D/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$D"' EXIT
as_pg "$BIN/initdb" -D "$D/data" -A trust >/dev/null
cat >> "$D/data/postgresql.conf" <<CONF
shared_preload_libraries = 'queen_streams'
queen_streams.http_port = 0
queen_streams.dedup_cache_entries = $CACHE
port = $PORT
listen_addresses = ''
unix_socket_directories = '$D'
shared_buffers = 512MB
max_wal_size = 4GB
CONF
as_pg "$BIN/pg_ctl" -D "$D/data" -l "$D/log" start >/dev/null
Q() { as_pg "$BIN/psql" -h "$D" -p "$PORT" -X -qAt -d postgres "$@"; }
Q -c "CREATE EXTENSION queen_streams"
# wall-clock ms of one psql run of $1 (a new connection each time)
ms() { local t0 t1; t0=$(date +%s%N); Q -c "$1" >/dev/null; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000000 )); }
# ms of the statement alone, measured in the server
sms() { Q -c "\\timing on" -c "$1" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1; }

body() {	# queue, n, payload bytes, txn prefix ('' = no transaction ids)
	echo "SELECT jsonb_build_object('items', jsonb_agg(jsonb_build_object('queue', '$1', 'payload',
	      jsonb_build_object('i', i, 'pad', repeat('x', $3))) || CASE WHEN '$4' = '' THEN '{}'::jsonb
	      ELSE jsonb_build_object('transactionId', '$4' || i) END)) FROM generate_series(1, $2) i"
}
Q -c "CREATE TABLE bodies (name text PRIMARY KEY, b jsonb)"
Q -c "INSERT INTO bodies SELECT 'retry', ($(body retryq 3000 2000 r))"
Q -c "INSERT INTO bodies SELECT 'n10k', ($(body lin10 10000 100 n))"
Q -c "INSERT INTO bodies SELECT 'n100k', ($(body lin100 100000 100 n))"

echo "== fully duplicate retry (3,000 items, 2 KB payloads, client transaction ids)"
orig=$(sms "SELECT length(queen.push(b)::text) FROM bodies WHERE name = 'retry'")
retry=$(sms "SELECT length(queen.push(b)::text) FROM bodies WHERE name = 'retry'")
Q -c "SELECT 'retry answered: ' || string_agg(s || ' ' || c, ', ') FROM (SELECT e->>'status' s, count(*) c
      FROM bodies, jsonb_array_elements(queen.push(b)) e WHERE name = 'retry' GROUP BY 1) x"
echo "original ${orig} ms, retry ${retry} ms, ratio $(echo "scale=2; $retry / $orig" | bc)"

echo "== N items in one push (client transaction ids, ~120-byte payloads)"
t10=$(sms "SELECT length(queen.push(b)::text) FROM bodies WHERE name = 'n10k'")
t100=$(sms "SELECT length(queen.push(b)::text) FROM bodies WHERE name = 'n100k'")
echo "10k ${t10} ms, 100k ${t100} ms, ratio $(echo "scale=2; $t100 / $t10" | bc) (linear: 10)"

echo "== 100 items with transaction ids: a partition whose window holds $NH hashes vs an empty one"
Q -c "SELECT count(*) FROM (SELECT queen.push(jsonb_build_object('items', (SELECT jsonb_agg(jsonb_build_object(
        'queue', 'bigwin', 'transactionId', 'w' || k || '-' || i, 'payload', i)) FROM generate_series(1, 10000) i)))
      FROM generate_series(1, $NH / 10000) k) x" >/dev/null
Q -c "SELECT queen.push('{\"items\":[{\"queue\":\"emptywin\",\"transactionId\":\"e0\",\"payload\":0}]}')" >/dev/null
hund() { echo "SELECT length(queen.push(jsonb_build_object('items', (SELECT jsonb_agg(jsonb_build_object(
        'queue', '$1', 'transactionId', '$2' || i, 'payload', i)) FROM generate_series(1, 100) i)))::text)"; }
# first push into the big partition on this server (loads its window into the shared cache once)
first=$(sms "$(hund bigwin first-)")
echo "first push into the big partition since start: ${first} ms (reads the window once per server)"
for round in 1 2 3; do
	# a new connection each time: the cache is the server's, not the backend's
	nb=$(ms "$(hund bigwin nb$round-)"); ne=$(ms "$(hund emptywin ne$round-)")
	# warm: 20 pushes in one connection, mean statement time
	warm() {
		{ echo '\timing on'; for i in $(seq 1 20); do echo "$(hund "$1" "$2$i-");"; done; } > "$D/warm.sql"
		chmod 644 "$D/warm.sql"
		Q -f "$D/warm.sql" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | awk '{s+=$1} END {printf "%.2f", s/NR}'
	}
	wb=$(warm bigwin "wb$round-"); we=$(warm emptywin "we$round-")
	echo "round $round: new connection (wall, psql included) big ${nb} ms / empty ${ne} ms; warm big ${wb} ms / empty ${we} ms (ratio $(echo "scale=2; $wb / $we" | bc))"
done
echo "== after a restart (the shared cache starts empty)"
as_pg "$BIN/pg_ctl" -D "$D/data" -l "$D/log" restart >/dev/null
rb=$(sms "$(hund bigwin restart-)"); re=$(sms "$(hund emptywin restart-)")
rb2=$(sms "$(hund bigwin restart2-)")
echo "first push into the big partition ${rb} ms (reads its window once for the whole server), empty ${re} ms; the next push into the big one, another connection: ${rb2} ms"
