#!/usr/bin/env bash
# The write outage of a failover: a pg_auto_failover formation on this
# machine (scripts/ha-formation.sh), one client pushing one message at a time
# to both listeners (the next URL on any failure, as Queen's clients do),
# the primary's pg_autoctl and postmaster killed with SIGKILL, the secondary
# promoted by the monitor. The outage is the time from the kill to the first
# push answered 201 after it; the old primary then rejoins as the secondary
# (pg_rewind, by pg_autoctl) and the next round kills the new primary.
#
#   bash bench/failover.sh [ROUNDS]      as root; QS_HA_FAST=0 for pg_auto_failover's default timings
#
# Prints one line per round and a summary (also in bench/out/failover.md).
# Not run by CI. Holds /tmp/queen_streams.test.lock while it installs and runs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
# shellcheck disable=SC2034 # bench/lib.sh logs with it
TAG=bench/failover
. bench/lib.sh
export QS_HA_FAST=${QS_HA_FAST:-1}
export QS_HA_DIR=$(mktemp -d /tmp/queen_streams-failover.XXXXXX)
chown postgres:postgres "$QS_HA_DIR"
export QS_HA_MONITOR_PORT=${QS_HA_MONITOR_PORT:-16640}
export QS_HA_PG_PORTS=${QS_HA_PG_PORTS:-"16641 16642"}
export QS_HA_HTTP_PORTS=${QS_HA_HTTP_PORTS:-"16651 16652"}
read -r -a HTTP <<<"$QS_HA_HTTP_PORTS"
mkdir -p bench/out
OUT=bench/out/failover.md

# QS_LOCK_HELD=1: the caller holds the lock already
[ "${QS_LOCK_HELD:-0}" = 1 ] || bench_lock
bench_build
trap 'scripts/ha-formation.sh stop >/dev/null 2>&1 || true; rm -rf "$QS_HA_DIR"' EXIT
scripts/ha-formation.sh start >/dev/null

mon() {
	as_pg "$BIN/psql" -X -At -h 127.0.0.1 -p "$QS_HA_MONITOR_PORT" -U autoctl_node \
		-d pg_auto_failover -c "$1"
}
mon_setting() { mon "SELECT setting FROM pg_settings WHERE name = 'pgautofailover.$1'"; }

# The probe: pushes until it is told to stop; prints "ok SENT ANSWERED" per 201.
cat >"$QS_HA_DIR/probe.pl" <<'EOF'
use strict; use warnings;
use HTTP::Tiny; use Time::HiRes qw(time sleep);
my ($stop, @urls) = @ARGV;
my $ua = HTTP::Tiny->new(timeout => 5, keep_alive => 1);
my ($k, $n) = (0, 0);
$| = 1;
until (-e $stop)
{
	my $sent = time;
	my $r = $ua->request('POST', "$urls[$k % @urls]/api/v1/push",
		{ headers => { 'content-type' => 'application/json' },
		  content => qq({"items":[{"queue":"failover","transactionId":"f-$$-$n","payload":{"n":$n}}]}) });
	if ($r->{status} == 201) { printf "ok %.3f %.3f\n", $sent, time; $n++ }
	else { $k++ }
	sleep 0.01;
}
EOF

results=()
for r in $(seq 1 "$ROUNDS"); do
	primary=$(mon "SELECT nodename FROM pgautofailover.node WHERE goalstate = 'primary'")
	rm -f "$QS_HA_DIR/stop"
	perl "$QS_HA_DIR/probe.pl" "$QS_HA_DIR/stop" "http://127.0.0.1:${HTTP[0]}" "http://127.0.0.1:${HTTP[1]}" \
		>"$QS_HA_DIR/probe.$r" &
	probe=$!
	sleep 3
	sup=$(cat "$QS_HA_DIR/$primary/pg_autoctl.run.pid")
	pm=$(head -1 "$QS_HA_DIR/$primary/pgdata/postmaster.pid")
	kids=$(ps -o pid= --ppid "$sup" || true)
	kill_at=$(date +%s.%N)
	# shellcheck disable=SC2086
	kill -KILL "$sup" $kids "$pm"
	# until the probe was answered 201 again
	# until a push sent after the kill was answered 201
	while ! awk -v t="$kill_at" '$1 == "ok" && $2 > t { f = 1 } END { exit !f }' "$QS_HA_DIR/probe.$r"; do
		sleep 0.1
	done
	touch "$QS_HA_DIR/stop"
	wait "$probe"
	# outage: the longest time between two 201s; also the kill to the 201 of
	# the first push sent after it (one in flight at the kill may still be
	# answered, replicated, by the old primary)
	outage=$(awk '$1 == "ok" { if (p && $3 - p > g) g = $3 - p; p = $3 } END { printf "%.2f", g }' "$QS_HA_DIR/probe.$r")
	first=$(awk -v t="$kill_at" '$1 == "ok" && $2 > t { printf "%.2f", $3 - t; exit }' "$QS_HA_DIR/probe.$r")
	echo "round $r: killed $primary; writes refused for $outage s (kill to the 201 of the first push sent after it: $first s)"
	results+=("$outage")
	# the old primary rejoins as the secondary before the next round, once
	# its killed supervisor is gone (pg_autoctl refuses to start beside it)
	while kill -0 "$sup" 2>/dev/null; do sleep 0.1; done
	rm -f "$QS_HA_DIR/$primary/pg_autoctl.run.pid"
	t0=$(date +%s.%N)
	scripts/ha-formation.sh start >/dev/null
	echo "round $r: $primary rejoined as the synchronous secondary in $(echo "$(date +%s.%N) - $t0" | bc | xargs printf '%.1f') s"
done

detect=$(( $(mon_setting node_considered_unhealthy_timeout) + $(mon_setting primary_demote_timeout) ))
{
	echo "# failover write outage ($(date -u +%Y-%m-%d), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
	echo
	echo "monitor: health_check_period $(mon_setting health_check_period) ms, node_considered_unhealthy_timeout $(mon_setting node_considered_unhealthy_timeout) ms, primary_demote_timeout $(mon_setting primary_demote_timeout) ms"
	echo
	echo "| round | writes refused (s): the longest time between two 201s | / (unhealthy timeout + demote timeout) |"
	echo "|---|---|---|"
	i=1
	for o in "${results[@]}"; do
		echo "| $i | $o | $(echo "scale=2; $o * 1000 / $detect" | bc) |"
		i=$((i + 1))
	done
} | tee "$OUT"
