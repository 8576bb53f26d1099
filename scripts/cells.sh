#!/usr/bin/env bash
# A router and cells on this machine, for trying queen_streams cells
# (doc/deploying.md): one PostgreSQL server per cell and
# one for the router, each with the library preloaded and its own HTTP
# listener, on loopback ports, data under .run/cells/, run as `postgres`.
#
#   bash scripts/cells.sh [start] [--cells N]   # build, install, start (default 3 cells)
#   bash scripts/cells.sh status
#   bash scripts/cells.sh stop
#
# Ports ($QS_CELLS_PORT, default 6560): the router's PostgreSQL on 6560 and
# its listener on 6660; cell i's PostgreSQL on 6561+i and listener 6661+i.
# Extra postgresql.conf lines for every server: $QS_CELLS_CONF; for the
# router only: $QS_CELLS_ROUTER_CONF. Another data directory: $QS_CELLS_DIR.
# $PG_CONFIG picks another PostgreSQL build (default: the one on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
ACTION=start
CELLS=3
while [ $# -gt 0 ]; do
	case "$1" in
		start|stop|status) ACTION=$1 ;;
		--cells) CELLS=$2; shift ;;
		*) echo "usage: $0 [start|stop|status] [--cells N]" >&2; exit 2 ;;
	esac
	shift
done
PG_CONFIG=${PG_CONFIG:-pg_config}
BASE=${QS_CELLS_PORT:-6560}
DIR=${QS_CELLS_DIR:-$ROOT/.run/cells}
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
BIN=$("$PG_CONFIG" --bindir)
psql_at() { as_pg "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -d postgres "${@:2}"; }
nodes() { echo router; for ((i = 0; i < CELLS; i++)); do echo "cell$i"; done; }
pg_port() { [ "$1" = router ] && echo "$BASE" || echo $((BASE + 1 + ${1#cell})); }

if [ "$ACTION" = stop ] || [ "$ACTION" = status ]; then
	for d in "$DIR"/*/; do
		[ -d "$d" ] || continue
		if [ "$ACTION" = stop ]; then
			as_pg "$BIN/pg_ctl" -D "$d" -m fast stop >/dev/null 2>&1 && echo "stopped $(basename "$d")" || true
		else
			as_pg "$BIN/pg_ctl" -D "$d" status >/dev/null 2>&1 && echo "$(basename "$d"): running" \
			  || echo "$(basename "$d"): stopped"
		fi
	done
	exit 0
fi

if [ -z "${QS_CELLS_NO_BUILD:-}" ]; then	# set it when already built and installed
	[ "$(id -u)" -eq 0 ] && scripts/install-deps.sh --cells >/dev/null
	# the install goes into the server's lib dir: one at a time per machine
	exec 9>/tmp/queen_streams.test.lock
	flock 9
	make -s -j"$(nproc)" PG_CONFIG="$PG_CONFIG" >/dev/null
	make -s install PG_CONFIG="$PG_CONFIG" >/dev/null
	flock -u 9
fi

mkdir -p "$DIR"
[ "$(id -u)" -eq 0 ] && chown postgres:postgres "$DIR"
for n in $(nodes); do
	port=$(pg_port "$n")
	http=$((port + 100))
	d=$DIR/$n
	if [ ! -s "$d/PG_VERSION" ]; then
		as_pg "$BIN/initdb" -D "$d" -A trust -U postgres >/dev/null
		cat >> "$d/postgresql.conf" <<EOF
# scripts/cells.sh
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
shared_preload_libraries = 'queen_streams'
queen_streams.http_port = $http
queen_streams.tenancy = header
max_connections = 200
${QS_CELLS_CONF:-}
EOF
		[ "$n" = router ] && echo "${QS_CELLS_ROUTER_CONF:-}" >> "$d/postgresql.conf"
	fi
	as_pg "$BIN/pg_ctl" -D "$d" status >/dev/null 2>&1 ||
		as_pg "$BIN/pg_ctl" -D "$d" -l "$d/server.log" -w start >/dev/null
done

for ((i = 0; i < CELLS; i++)); do
	psql_at "$(pg_port "cell$i")" -c 'SET client_min_messages = warning' -c 'CREATE EXTENSION IF NOT EXISTS queen_streams'
done
psql_at "$BASE" -c 'SET client_min_messages = warning' -c 'CREATE EXTENSION IF NOT EXISTS queen_streams_router CASCADE'
for ((i = 0; i < CELLS; i++)); do
	psql_at "$BASE" -c "SELECT queen_router.add_cell('cell$i', 'host=127.0.0.1 port=$(pg_port "cell$i") dbname=postgres user=postgres')
		WHERE NOT EXISTS (SELECT 1 FROM queen_router.cells WHERE cell = 'cell$i')" >/dev/null
done

cat <<EOF
router:  psql -h 127.0.0.1 -p $BASE -U postgres postgres    HTTP http://127.0.0.1:$((BASE + 100))
EOF
for ((i = 0; i < CELLS; i++)); do
	p=$(pg_port "cell$i")
	echo "cell$i:   psql -h 127.0.0.1 -p $p -U postgres postgres    HTTP http://127.0.0.1:$((p + 100))"
done
echo "tenants: header x-queen-tenant; move one: CALL queen_router.move_tenant('<uuid>', 'cell1') on the router"
echo "stop:    bash scripts/cells.sh stop"
