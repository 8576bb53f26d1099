#!/usr/bin/env bash
# Sets up and runs the main job: a local PostgreSQL 15 whose data lives in
# .run/ under the project folder (kept between runs), with queen_streams
# preloaded and created in the `postgres` database. Stays in the foreground
# until Ctrl-C (or pass --detach to leave it running).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PORT=${QS_PORT:-6543}
BIN=/usr/lib/postgresql/15/bin
DATA="$ROOT/.run/pgdata"
LOGFILE="$ROOT/.run/postgresql.log"

scripts/install-deps.sh
make -s -j"$(nproc)" >/dev/null
make -s install >/dev/null

as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

mkdir -p "$ROOT/.run"
[ "$(id -u)" -eq 0 ] && chown postgres:postgres "$ROOT/.run"
if [ ! -s "$DATA/PG_VERSION" ]; then
	as_pg "$BIN/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 >/dev/null
	cat >>"$DATA/postgresql.conf" <<CONF
# queen_streams
port = $PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$ROOT/.run'
shared_preload_libraries = 'queen_streams'
CONF
fi

if ! as_pg "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
	as_pg "$BIN/pg_ctl" -D "$DATA" -l "$LOGFILE" -w start >/dev/null
fi
as_pg "$BIN/psql" -h "$ROOT/.run" -p "$PORT" -U postgres -d postgres -qX \
	-c "CREATE EXTENSION IF NOT EXISTS queen_streams" \
	-c "ALTER EXTENSION queen_streams UPDATE" >/dev/null

cat <<INFO
queen_streams is running (PostgreSQL 15, data in .run/pgdata, log in .run/postgresql.log).
  connect:  psql -h 127.0.0.1 -p $PORT -U postgres postgres
  try:      SELECT queen.push('{"items":[{"queue":"demo","payload":{"hello":"world"}}]}');
            SELECT queen.pop('demo');
  stop:     Ctrl-C here (or: runuser -u postgres -- $BIN/pg_ctl -D $DATA stop)
INFO

[ "${1:-}" = "--detach" ] && exit 0
stop() { as_pg "$BIN/pg_ctl" -D "$DATA" -m fast stop >/dev/null 2>&1 || true; exit 0; }
trap stop INT TERM
while as_pg "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; do sleep 2; done
echo "PostgreSQL stopped; see $LOGFILE" >&2
exit 1
