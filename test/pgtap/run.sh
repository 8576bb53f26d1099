#!/usr/bin/env bash
# Runs the pgTAP suites (test/pgtap/*.sql) against a throwaway instance with
# queen_streams preloaded. Called by scripts/test.sh as the postgres user,
# after the extension was built and installed. Exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")"
HERE=$(pwd)

PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$("$PG_CONFIG" --bindir)

TMP=$(mktemp -d "${TMPDIR:-/tmp}/queen_streams-pgtap.XXXXXX")
DATA="$TMP/data"
started=0
cleanup() {
	if [ "$started" -eq 1 ]; then
		"$BINDIR/pg_ctl" -D "$DATA" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT

# A free port: nothing answers on it. The server listens on a unix socket in
# $TMP only, so the port merely names that socket.
PORT=
for _ in $(seq 100); do
	p=$((20000 + RANDOM % 40000))
	if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
		PORT=$p
		break
	fi
done
[ -n "$PORT" ] || { echo "pgtap: no free port" >&2; exit 1; }

"$BINDIR/initdb" -D "$DATA" -A trust -U postgres --no-sync >"$TMP/initdb.log" 2>&1 ||
	{ cat "$TMP/initdb.log"; exit 1; }
cat >>"$DATA/postgresql.conf" <<CONF
shared_preload_libraries = 'queen_streams'
listen_addresses = ''
port = $PORT
unix_socket_directories = '$TMP'
fsync = off
CONF
"$BINDIR/pg_ctl" -D "$DATA" -l "$TMP/server.log" -w start >/dev/null ||
	{ cat "$TMP/server.log"; exit 1; }
started=1

export PGHOST="$TMP" PGPORT="$PORT" PGUSER=postgres PGDATABASE=pgtap
"$BINDIR/createdb" pgtap
"$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 \
	-c 'CREATE EXTENSION pgtap' -c 'CREATE EXTENSION queen_streams'

status=0
pg_prove --psql-bin "$BINDIR/psql" -v "$HERE"/*.sql || status=$?
if [ "$status" -ne 0 ]; then
	echo "pgtap: server log:" >&2
	tail -n 50 "$TMP/server.log" >&2 || true
fi
exit "$status"
