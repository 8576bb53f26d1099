# shellcheck shell=bash disable=SC2034
# Sourced, from the tree's root, by the bench scripts: their knobs, as_pg
# and log, the lock, the build, one throwaway instance, the median, the
# streams cycle bodies, the engine floor's scripts. The caller sets TAG (log prefix) and, before bench_instance,
# CACHE (dedup_cache_entries).
ROOT=$(pwd)
BENCH="$ROOT/bench"
BIN=${QS_BENCH_PG_BIN:-/usr/lib/postgresql/15/bin}
DUR=${QS_BENCH_DURATION:-10}
WARM=${QS_BENCH_WARMUP:-2}
NCPU=$(nproc)
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
log() { printf '[%s %s] %s\n' "$TAG" "$(date +%H:%M:%S)" "$*" >&2; }

# The shared tree is installed into and the machine should be quiet: take the
# test suite's lock (bench_lock). A private QS_BENCH_PG_BIN needs neither.
bench_lock() {
	exec 9>/tmp/queen_streams.test.lock
	log "waiting for /tmp/queen_streams.test.lock"
	flock 9
}
# QS_BENCH_BUILD=0: what is installed in BIN's tree already
bench_build() {
	[ "${QS_BENCH_BUILD:-1}" = 1 ] || return 0
	make -s -j"$NCPU" PG_CONFIG="$BIN/pg_config" >/dev/null && make -s PG_CONFIG="$BIN/pg_config" install >/dev/null
}
bench_lock_build() {
	if [ "$BIN" = /usr/lib/postgresql/15/bin ]; then bench_lock; fi
	bench_build
}

. "$BENCH/huge_pages.sh"
. "$BENCH/median.sh"
bench_cleanup() {
	as_pg "$BIN/pg_ctl" -D "$W/data" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$W"
	bench_huge_pages_release
}

# A throwaway instance in W (stopped and removed at exit), on PORT
# (BENCH_PORT, else random) with its socket in W, the library preloaded, and then the
# caller's own settings, read from stdin (a later line wins). Not started.
bench_initdb() {
	W=$(mktemp -d "/tmp/qs-${TAG//\//-}.XXXXXX")
	chmod 755 "$W"
	PORT=${BENCH_PORT:-$((20000 + RANDOM % 20000))}
	trap bench_cleanup EXIT
	[ "$(id -u)" -eq 0 ] && chown postgres:postgres "$W"
	as_pg "$BIN/initdb" -D "$W/data" -U postgres -A trust -E UTF8 --no-sync >/dev/null
	{
		cat <<CONF
shared_preload_libraries = 'queen_streams'
port = $PORT
listen_addresses = ''
unix_socket_directories = '$W'
CONF
		cat
	} >>"$W/data/postgresql.conf"
}

# An instance in W (fsync and synchronous commit on, no listener until
# bench_listener), database "bench"; Q runs psql in it, start starts it again.
bench_instance() {
	# shared_buffers, the dedup cache (~92 bytes an entry) and the rest (about
	# 100 MB; huge_pages = on fails to start rather than fall back unseen)
	bench_huge_pages $((1024 + CACHE * 92 / 1048576 + 256))
	bench_initdb <<CONF
queen_streams.http_port = 0
queen_streams.dedup_cache_entries = $CACHE
shared_buffers = 1GB
max_wal_size = 4GB
checkpoint_timeout = 30min
max_connections = 40
synchronous_commit = on
huge_pages = $HUGE
CONF
	start
	as_pg "$BIN/createdb" -h "$W" -p "$PORT" -U postgres bench
	mkdir -p "$W/scripts"
}
start() { as_pg "$BIN/pg_ctl" -D "$W/data" -l "$W/log" -w start >/dev/null; }

# The HTTP listener on HTTP_PORT, serving "bench" with its defaults (two
# workers, group commit on), and bench/http/loadgen in W: once the
# extension is in "bench", which the workers need when they start.
bench_listener() {
	HTTP_PORT=$((PORT + 1))
	Q -c "ALTER SYSTEM SET queen_streams.http_port = $HTTP_PORT" \
		-c "ALTER SYSTEM SET queen_streams.database = 'bench'" >/dev/null
	as_pg "$BIN/pg_ctl" -D "$W/data" -l "$W/log" -w restart >/dev/null
	# shellcheck disable=SC2119 # all of them
	bench_wait_workers
	cc -O2 -o "$W/loadgen" "$BENCH/http/loadgen.c"
}
# until N (all, by default) HTTP workers listen, 10 s at the most
# shellcheck disable=SC2120 # bench/http/*.sh pass N
bench_wait_workers() {
	listening() { [ "$(Q -c "SELECT count(*) FILTER (WHERE listening) = ${1:-count(*)} AND count(*) > 0 FROM queen_streams.http_workers()")" = t ]; }
	for _ in $(seq 100); do
		listening "$@" && return
		sleep 0.1
	done
	log "the listener is not up on port $HTTP_PORT:"
	tail -5 "$W/log" >&2
	exit 1
}
# psql in W, in BENCH_DB ("bench")
Q() { as_pg "$BIN/psql" -h "$W" -p "$PORT" -U postgres -X -qAt -v ON_ERROR_STOP=1 -d "${BENCH_DB:-bench}" "$@"; }
# pgbench in W against "bench"; PGB_OPTIONS: settings for its sessions (PGOPTIONS)
pgb() { (cd "$W" && as_pg env PGOPTIONS="${PGB_OPTIONS:-}" "$BIN/pgbench" -h "$W" -p "$PORT" -U postgres -n "$@" bench); }

# One query and, per connection, its own source and sink partition (the
# cycle's advisory lock, the allocator row), in BENCH_DB: $1 cycle bodies,
# one a line in W/cycle_bodies.txt for loadgen, and W/cycle_sql.sql, the
# same cycles for pgbench (client k: body k % $1 + 1).
bench_cycle_bodies() {
	Q -v conns="$1" >/dev/null <"$BENCH/http/cycle_bodies.sql"
	Q -c "COPY (SELECT body FROM bench_bodies ORDER BY i) TO STDOUT" >"$W/cycle_bodies.txt"
	echo "SELECT queen_streams.cycle(body) FROM bench_bodies WHERE i = :client_id % $1 + 1;" >"$W/cycle_sql.sql"
	chmod 644 "$W/cycle_bodies.txt" "$W/cycle_sql.sql"
}

# The engine floor's scripts for queue $1 in $2/scripts, run through the psql
# function $3: one segment per (variant, partition) packed beforehand (what
# Queen's broker sends: frames, zstd and hashes built outside PG), from the
# gen_push.pl family "$1_src" (notxn) the caller generated, same payloads.
bench_engine_scripts() {
	local q=$1 dir=$2 psql=$3 v req
	for v in $(seq 1 "$VARIANTS"); do
		req=$(sed -n 's/^SELECT queen.push(\(.*\)::jsonb);$/\1/p' "$dir/scripts/${q}_src.$v.0.sql")
		cat >"$dir/engine.sql" <<SQL
SELECT p, format('SELECT queen.log_push_one_v1(%L, %L, 100, %L::bytea, -1, %L::bytea, NULL, 0);',
		'$q', 'p-' || p, h, b)
  FROM (SELECT string_agg(queen.txn_hash(x->>'transactionId'), ''::bytea ORDER BY i) AS h,
               queen.segment_pack(jsonb_agg(x ORDER BY i)) AS b
          FROM (SELECT i, jsonb_build_object('id', queen.uuid_generate_v7(),
                       'transactionId', 'tx-' || i, 'payload', e->'payload') AS x
                  FROM jsonb_array_elements(($req)::jsonb->'items') WITH ORDINALITY AS t(e, i)) f) s,
       generate_series(0, 15) AS p
SQL
		[ "$(id -u)" -eq 0 ] && chown postgres:postgres "$dir/engine.sql"
		"$psql" -F $'\t' -f "$dir/engine.sql" | while IFS=$'\t' read -r p line; do
			printf '%s\n' "$line" >"$dir/scripts/$q.$v.$p.sql"
		done
	done
	rm -f "$dir/scripts/${q}_src".*.sql "$dir/engine.sql"
}
