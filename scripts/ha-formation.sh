#!/usr/bin/env bash
# A local pg_auto_failover formation for trying queen_streams' high
# availability on one machine: a monitor, a primary and a synchronous
# secondary, each a PostgreSQL 15 on its own loopback port, queen_streams
# preloaded on both data nodes with the HTTP listener on its own port.
#
#   scripts/ha-formation.sh start     create (first time) and run the formation
#   scripts/ha-formation.sh status    pg_autoctl's view and each listener's /health
#   scripts/ha-formation.sh stop      stop every node (the data stays)
#   scripts/ha-formation.sh destroy   stop and remove the directory
#
# Settings (environment):
#   QS_HA_DIR            where everything lives (/tmp/queen_streams-ha)
#   QS_HA_MONITOR_PORT   the monitor's PostgreSQL port (6640)
#   QS_HA_PG_PORTS       the data nodes' PostgreSQL ports ("6641 6642")
#   QS_HA_HTTP_PORTS     their listeners' HTTP ports ("6651 6652")
#   QS_HA_FAST=1         the monitor's health checks and timeouts set low
#                        (failover within seconds; for tests, not production)
#
# Run as root (it drops to `postgres`: pg_autoctl refuses root) or as the
# user that owns QS_HA_DIR. Needs the packages of scripts/install-deps.sh
# --test and queen_streams installed (make install).
set -euo pipefail

if [ "$(id -u)" -eq 0 ]; then
	D=${QS_HA_DIR:-/tmp/queen_streams-ha}
	mkdir -p "$D"
	chown postgres:postgres "$D"
	exec runuser -u postgres -- env QS_HA_DIR="$D" "$0" "$@"
fi

D=${QS_HA_DIR:-/tmp/queen_streams-ha}
# pg_autoctl takes defaults from these (a test harness sets PGHOST to its own socket directory)
unset PGHOST PGHOSTADDR PGPORT PGDATA PGDATABASE PGUSER PGSERVICE PGSSLMODE
MONITOR_PORT=${QS_HA_MONITOR_PORT:-6640}
read -r -a PG_PORTS <<<"${QS_HA_PG_PORTS:-6641 6642}"
read -r -a HTTP_PORTS <<<"${QS_HA_HTTP_PORTS:-6651 6652}"
NODES=(node1 node2)
HOST=127.0.0.1

# pg_autoctl keeps its configuration and state under XDG directories: here
# inside the formation's directory, so that formations do not meet.
export XDG_CONFIG_HOME="$D/xdg/config" XDG_DATA_HOME="$D/xdg/share" XDG_RUNTIME_DIR="$D/xdg/run"
export PATH="$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin):/usr/lib/postgresql/15/bin:$PATH"
MONITOR_URI="postgres://autoctl_node@$HOST:$MONITOR_PORT/pg_auto_failover?sslmode=disable"

say() { printf 'ha-formation: %s\n' "$*" >&2; }

pgdata() { echo "$D/$1/pgdata"; }

running() {	# the pg_autoctl supervisor of $1 is alive
	local pidf="$D/$1/pg_autoctl.run.pid"
	[ -f "$pidf" ] && kill -0 "$(cat "$pidf")" 2>/dev/null
}

run_node() {	# start `pg_autoctl run` for $1 in its own session
	running "$1" && return 0
	setsid pg_autoctl run --pgdata "$(pgdata "$1")" >>"$D/$1/pg_autoctl.log" 2>&1 </dev/null &
	echo $! >"$D/$1/pg_autoctl.run.pid"
}

# Assigned and reported states of every data node, one "name reported assigned" a line.
states() {
	psql -X -At -F ' ' -h "$HOST" -p "$MONITOR_PORT" -U autoctl_node -d pg_auto_failover -c \
		"SELECT nodename, reportedstate, goalstate FROM pgautofailover.node ORDER BY nodeid" 2>/dev/null || true
}

wait_for() {	# wait_for SECONDS "desc" command...
	local t=$1 what=$2
	shift 2
	local end=$((SECONDS + t))
	until "$@"; do
		if [ $SECONDS -ge $end ]; then
			say "timed out waiting for $what"
			states >&2
			return 1
		fi
		sleep 0.5
	done
}

node_state_is() { states | grep -qx "$1 $2 $2"; }
# A primary and a secondary as the monitor sees them, and the primary
# replicating to the secondary synchronously. With one standby
# pg_auto_failover keeps number_sync_standbys at 0 (1 needs two standbys)
# and sets synchronous_standby_names to 'ANY 1 (<the standby>)': a commit
# waits until the standby has flushed its WAL (synchronous_commit = on).
formation_up() {
	local s p
	s=$(states)
	grep -qE '^node[12] primary primary$' <<<"$s" && grep -qE '^node[12] secondary secondary$' <<<"$s" || return 1
	p=$(primary_port)
	[ "$(psql -X -At -h "$HOST" -p "$p" -d postgres -c \
		"SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state IN ('sync', 'quorum')" 2>/dev/null)" = 1 ]
}

# The per-node settings, outside the data directory: postgresql.conf includes
# '../queen_streams.conf', which resolves next to each node's own data
# directory, so the secondary's copy of the primary's postgresql.conf (its
# base backup) still reads the secondary's own file.
node_conf() {
	local i=$1
	cat >"$D/${NODES[$i]}/queen_streams.conf" <<EOF
# queen_streams on ${NODES[$i]} (scripts/ha-formation.sh)
shared_preload_libraries = 'pg_stat_statements,queen_streams'
queen_streams.http_port = ${HTTP_PORTS[$i]}
queen_streams.listen_address = '$HOST'
queen_streams.http_workers = 2
# pg_auto_failover sizes memory for a machine of its own; one machine holds all three here
shared_buffers = '128MB'
wal_keep_size = '512MB'
EOF
}

monitor_conf() {
	[ "${QS_HA_FAST:-0}" = 1 ] || return 0
	cat >>"$(pgdata monitor)/postgresql.conf" <<'EOF'
# scripts/ha-formation.sh, QS_HA_FAST=1: fail over within seconds
pgautofailover.health_check_period = 1000
pgautofailover.health_check_timeout = 1000
pgautofailover.health_check_max_retries = 1
pgautofailover.health_check_retry_delay = 500
pgautofailover.node_considered_unhealthy_timeout = 3000
pgautofailover.primary_demote_timeout = 3000
pgautofailover.startup_grace_period = 3000
EOF
}

create() {
	mkdir -p "$D/monitor" "$D/node1" "$D/node2"
	if [ ! -f "$(pgdata monitor)/PG_VERSION" ]; then
		say "creating the monitor on port $MONITOR_PORT"
		pg_autoctl create monitor --pgdata "$(pgdata monitor)" --pgport "$MONITOR_PORT" \
			--hostname "$HOST" --auth trust --no-ssl >>"$D/monitor/pg_autoctl.log" 2>&1
		monitor_conf
	fi
	run_node monitor
	wait_for 60 "the monitor" pg_isready -q -h "$HOST" -p "$MONITOR_PORT"
	wait_for 30 "the monitor's schema" bash -c "psql -X -At -h $HOST -p $MONITOR_PORT -U autoctl_node -d pg_auto_failover -c 'SELECT 1 FROM pgautofailover.node LIMIT 0' >/dev/null 2>&1"
	for i in 0 1; do
		local n=${NODES[$i]}
		[ -f "$(pgdata "$n")/PG_VERSION" ] && continue
		node_conf "$i"
		say "creating $n on port ${PG_PORTS[$i]} (HTTP ${HTTP_PORTS[$i]})"
		pg_autoctl create postgres --pgdata "$(pgdata "$n")" --pgport "${PG_PORTS[$i]}" \
			--hostname "$HOST" --auth trust --no-ssl --monitor "$MONITOR_URI" --name "$n" \
			--dbname postgres >>"$D/$n/pg_autoctl.log" 2>&1
		grep -q "queen_streams.conf" "$(pgdata "$n")/postgresql.conf" ||
			echo "include_if_exists = '../queen_streams.conf'" >>"$(pgdata "$n")/postgresql.conf"
		run_node "$n"
		if [ "$i" -eq 0 ]; then
			wait_for 60 "node1 as single" node_state_is node1 single
		fi
	done
}

primary_port() {	# the PostgreSQL port of the node the monitor calls primary
	psql -X -At -h "$HOST" -p "$MONITOR_PORT" -U autoctl_node -d pg_auto_failover -c \
		"SELECT nodeport FROM pgautofailover.node WHERE goalstate IN ('primary', 'wait_primary', 'single') ORDER BY nodeid LIMIT 1"
}

health() {	# the listener on HTTP port $1 answers /health
	curl -s -m 2 "http://$HOST:$1/health"
}

listeners_up() {
	for p in "${HTTP_PORTS[@]}"; do
		health "$p" | grep -q '"status"' || return 1
	done
}

cmd_start() {
	create
	for n in monitor "${NODES[@]}"; do run_node "$n"; done
	wait_for 120 "a primary and a synchronous secondary" formation_up
	local primary
	primary=$(primary_port)
	wait_for 60 "the primary" pg_isready -q -h "$HOST" -p "$primary"
	psql -X -q -h "$HOST" -p "$primary" -d postgres -c 'CREATE EXTENSION IF NOT EXISTS queen_streams'
	wait_for 60 "both listeners" listeners_up
	cmd_status
}

cmd_status() {
	pg_autoctl show state --pgdata "$(pgdata monitor)" 2>/dev/null || say "the monitor is not running"
	for i in 0 1; do
		printf '%s http://%s:%s/health %s\n' "${NODES[$i]}" "$HOST" "${HTTP_PORTS[$i]}" \
			"$(health "${HTTP_PORTS[$i]}" || echo 'no answer')"
	done
}

cmd_stop() {
	for n in "${NODES[@]}" monitor; do
		running "$n" || continue
		pg_autoctl stop --pgdata "$(pgdata "$n")" >/dev/null 2>&1 || kill "$(cat "$D/$n/pg_autoctl.run.pid")" 2>/dev/null || true
		local end=$((SECONDS + 60))
		while running "$n" && [ $SECONDS -lt $end ]; do sleep 0.2; done
		rm -f "$D/$n/pg_autoctl.run.pid"
	done
}

case "${1:-}" in
start) cmd_start ;;
status) cmd_status ;;
stop) cmd_stop ;;
destroy) cmd_stop; rm -rf "${D:?}"/monitor "${D:?}"/node1 "${D:?}"/node2 "${D:?}"/xdg ;;
*)
	echo "usage: $0 start|status|stop|destroy" >&2
	exit 2
	;;
esac
