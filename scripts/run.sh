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

say() { printf 'run.sh: %s\n' "$*" >&2; }

say "checking the system packages (scripts/install-deps.sh)"
scripts/install-deps.sh
# Installing replaces the server's library: not while a test run uses it.
LOCK=/tmp/queen_streams.test.lock
exec 9>"$LOCK"
if ! flock -n 9; then
	# the holder, from the kernel's table of locks (major:minor:inode)
	holder=$(awk -v ino=":$(stat -c %i "$LOCK") " 'index($0, ino) { print $5; exit }' /proc/locks)
	say "waiting for a test run to release the install lock $LOCK (pid ${holder:-unknown})"
	flock 9
fi
say "building"
make -s -j"$(nproc)" >/dev/null
say "installing the extension into $(pg_config --pkglibdir 2>/dev/null || echo "the server's folders")"
make -s install >/dev/null
exec 9>&-

as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

mkdir -p "$ROOT/.run"
[ "$(id -u)" -eq 0 ] && chown postgres:postgres "$ROOT/.run"
if [ ! -s "$DATA/PG_VERSION" ]; then
	say "creating a cluster in $DATA"
	as_pg "$BIN/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 >/dev/null
	cat >>"$DATA/postgresql.conf" <<CONF
# queen_streams
port = $PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$ROOT/.run'
shared_preload_libraries = 'queen_streams'
queen_streams.http_port = ${QS_HTTP_PORT:-6632}
# two-phase commit for the tests that prepare transactions (make installcheck)
max_prepared_transactions = 4
CONF
fi

if ! as_pg "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
	say "starting PostgreSQL on port $PORT"
	as_pg "$BIN/pg_ctl" -D "$DATA" -l "$LOGFILE" -w start >/dev/null
fi
say "creating (or updating) the extension in the postgres database"
as_pg "$BIN/psql" -h "$ROOT/.run" -p "$PORT" -U postgres -d postgres -qX -c "SET client_min_messages = warning" \
	-c "CREATE EXTENSION IF NOT EXISTS queen_streams" \
	-c "ALTER EXTENSION queen_streams UPDATE" >/dev/null
# The listener's address, as the running server has it (a server started
# by an older build has no listener until it is restarted).
show() { as_pg "$BIN/psql" -h "$ROOT/.run" -p "$PORT" -U postgres -d postgres -qXAt -c "SHOW $1" 2>/dev/null || true; }
HTTP_PORT=$(show queen_streams.http_port)
HTTP="http://$(show queen_streams.listen_address):$HTTP_PORT"
[ -z "$HTTP_PORT" ] && HTTP="(none: restart the server to start the HTTP listener)"
[ "$HTTP_PORT" = 0 ] && HTTP="(disabled: queen_streams.http_port = 0)"

cat <<INFO
queen_streams is running (PostgreSQL 15, data in .run/pgdata, log in .run/postgresql.log).
  connect:  psql -h 127.0.0.1 -p $PORT -U postgres postgres
  try:      SELECT queen.push('{"items":[{"queue":"demo","payload":{"hello":"world"}}]}');
            SELECT queen.pop('demo', auto_ack => true);   -- without auto_ack: lease, then queen.ack
  http:     $HTTP  (Queen's /api/v1 and /streams/v1 routes, /health, /metrics)
            curl -s -X POST $HTTP/api/v1/push -d '{"items":[{"queue":"demo","payload":{"hi":1}}]}'
            curl -s "$HTTP/api/v1/pop/queue/demo?wait=true&timeout=5000"
  example:  perl examples/window_counter.pl --url $HTTP --source events --sink events.counts --verbose
  stop:     Ctrl-C here (or: runuser -u postgres -- $BIN/pg_ctl -D $DATA stop)
INFO

[ "${1:-}" = "--detach" ] && exit 0
stop() { as_pg "$BIN/pg_ctl" -D "$DATA" -m fast stop >/dev/null 2>&1 || true; exit 0; }
trap stop INT TERM
while as_pg "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; do sleep 2; done
echo "PostgreSQL stopped; see $LOGFILE" >&2
exit 1
