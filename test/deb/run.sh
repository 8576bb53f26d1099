#!/usr/bin/env bash
# The Debian package, as a user gets it: builds postgresql-15-queen-streams
# from this tree with dpkg-buildpackage, checks it with lintian (no error),
# installs it, makes a machine-wide cluster with pg_createcluster that
# preloads the library, creates both extensions, pushes and pops over SQL
# and over HTTP, updates the extension from 0.1.0 through the packaged
# upgrade scripts, then drops the cluster and purges the package, which must
# leave none of its files behind. Run as root; it installs into the server's
# own folders, so nothing else may use them meanwhile (scripts/test.sh runs
# it under its install lock, before its own `make install`).
# Prints TAP; exits 1 on any failure.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/queen_streams-deb.XXXXXX)
CLUSTER=qs_deb_test
PKG=postgresql-15-queen-streams
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; [ -n "${2:-}" ] && sed 's/^/# /' "$2" | tail -30; }
check() {	# check NAME LOGFILE CMD...: ok when CMD succeeds
	local name=$1 log=$2; shift 2
	if "$@" >"$log" 2>&1; then ok "$name"; else not_ok "$name" "$log"; fi
}
cleanup() {
	pg_dropcluster 15 "$CLUSTER" --stop >/dev/null 2>&1
	dpkg -s "$PKG" >/dev/null 2>&1 && apt-get purge -y -qq "$PKG" >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT

# a copy of the tree without what git ignores
rsync -a --exclude .git --exclude .run --exclude node_modules --exclude 'test/fuzz/work' \
	--exclude tmp_check --exclude 'test/results' "$ROOT/" "$T/src/"
(cd "$T/src" && make -s clean >/dev/null 2>&1)
check "dpkg-buildpackage -us -uc -b builds $PKG" "$T/build.log" \
	bash -c "cd '$T/src' && dpkg-buildpackage -us -uc -b"
deb=$(ls "$T"/${PKG}_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { echo "1..$n"; exit 1; }

check "lintian finds no error in the package" "$T/lintian.log" \
	lintian --fail-on error "$deb"
check "the package installs with its dependencies" "$T/install.log" \
	env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb"
dpkg -L "$PKG" | while read -r f; do [ -f "$f" ] && echo "$f"; done >"$T/files"
upgrade_scripts() {	# every release's upgrade script, from the release folders sql/X.Y.Z
	local prev=0.1.0 v
	for v in $(cd "$ROOT/sql" && ls -d [0-9]*.[0-9]*.[0-9]* | sort -V); do
		echo "queen_streams--$prev--$v.sql"
		prev=$v
	done
	(cd "$ROOT/sql" && ls queen_streams_router--*--*.sql)
}
holds_everything() {
	local f ext=/usr/share/postgresql/15/extension
	for f in /usr/lib/postgresql/15/lib/queen_streams.so "$ext/queen_streams.control" \
		"$ext/queen_streams_router.control" $(upgrade_scripts | sed "s|^|$ext/|"); do
		grep -qx "$f" "$T/files" || { echo "missing: $f"; return 1; }
	done
}
check "the package holds the library, both extensions and every upgrade script" "$T/files.log" holds_everything

# a machine-wide cluster, configured the way the README tells a user to
port=$(perl -MIO::Socket::INET -e 'print IO::Socket::INET->new(Listen => 1, LocalAddr => "127.0.0.1")->sockport')
http=$(perl -MIO::Socket::INET -e 'print IO::Socket::INET->new(Listen => 1, LocalAddr => "127.0.0.1")->sockport')
check "pg_createcluster makes a cluster" "$T/cluster.log" pg_createcluster 15 "$CLUSTER" -p "$port"
cat >"/etc/postgresql/15/$CLUSTER/conf.d/queen_streams.conf" <<CONF
shared_preload_libraries = 'queen_streams'
queen_streams.http_port = $http
queen_streams.listen_address = '127.0.0.1'
CONF
check "the cluster starts with the library preloaded" "$T/start.log" pg_ctlcluster 15 "$CLUSTER" start
psql_pg() { runuser -u postgres -- psql -p "$port" -d "${DB:-postgres}" -qXAt -v ON_ERROR_STOP=1 "$@"; }
sql_push_pop() {
	psql_pg -c "SELECT queen.push('{\"items\":[{\"queue\":\"deb\",\"payload\":{\"n\":1}}]}')" &&
		psql_pg -c "SELECT queen.pop('deb', auto_ack => true)" | tee /dev/stderr | grep -q '"n": 1'
}
http_push_pop() {
	curl -sf -X POST "http://127.0.0.1:$http/api/v1/push" -H 'Content-Type: application/json' \
		-d '{"items":[{"queue":"deb","payload":{"n":2}}]}' &&
		curl -sf "http://127.0.0.1:$http/api/v1/pop/queue/deb?wait=false&autoAck=true" | tee /dev/stderr | grep -q '"n":2'
}
update_from_first() {
	local want
	want=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$ROOT/queen_streams.control")
	psql_pg -c 'CREATE DATABASE deb_update' &&
		DB=deb_update psql_pg -c "CREATE EXTENSION queen_streams VERSION '0.1.0'" -c 'ALTER EXTENSION queen_streams UPDATE' &&
		[ "$(DB=deb_update psql_pg -c "SELECT extversion FROM pg_extension WHERE extname = 'queen_streams'")" = "$want" ]
}
create_router() {
	psql_pg -c 'CREATE DATABASE deb_router' && DB=deb_router psql_pg -c 'CREATE EXTENSION queen_streams_router CASCADE'
}
none_left() {
	local f left=0
	while read -r f; do [ -e "$f" ] && { echo "left: $f"; left=1; }; done <"$T/files"
	return $left
}

check "CREATE EXTENSION queen_streams" "$T/create.log" psql_pg -c "CREATE EXTENSION queen_streams"
check "a push and a pop over SQL" "$T/sql.log" sql_push_pop
# the listener comes up with the server; give it a moment to bind
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$http/health" >/dev/null && break; sleep 0.2; done
check "a push and a pop over HTTP" "$T/http.log" http_push_pop
check "queen_streams 0.1.0 updates to the packaged version" "$T/update.log" update_from_first
check "CREATE EXTENSION queen_streams_router (with PL/Proxy and dblink)" "$T/router.log" create_router

check "the cluster is dropped" "$T/drop.log" pg_dropcluster 15 "$CLUSTER" --stop
check "the package is purged" "$T/purge.log" env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "$PKG"
check "the purge leaves none of the package's files" "$T/left.log" none_left

echo "1..$n"
[ "$fails" -eq 0 ]
