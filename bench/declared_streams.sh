#!/usr/bin/env bash
# bench/declared_streams.sh: events per second through a declared tumbling
# count+sum per key (queen_streams.create_stream), run by 1 and by 2 stream
# workers, against examples/window_counter.pl doing the same fold over HTTP,
# and against this machine's bare consuming rate of the same backlog
# (queen.pop with auto_ack in one backend, no fold): one run, one table.
#
#   bash bench/declared_streams.sh          # as root; a few minutes
#
# Takes /tmp/queen_streams.test.lock, installs the extension from the working
# tree and runs a throwaway instance. QS_BENCH_PGROOT=<dir> installs into a
# private copy of the PostgreSQL tree there instead (make install DESTDIR=),
# which touches nothing shared and needs no lock (as QS_BENCH_PG_BIN does:
# bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
EVENTS=${QS_BENCH_EVENTS:-60000}
PARTS=8
KEYS=50
if [ -n "${QS_BENCH_PGROOT:-}" ]; then
	QS_BENCH_PG_BIN=$QS_BENCH_PGROOT/usr/lib/postgresql/15/bin
	export PATH="$QS_BENCH_PG_BIN:$PATH"
fi
# shellcheck disable=SC2034 # bench/lib.sh reads them
TAG=bench/streams BENCH_DB=postgres BENCH_PORT=$((20000 + RANDOM % 20000))
. bench/lib.sh
if [ -n "${QS_BENCH_PGROOT:-}" ]; then
	make -s -j2 >/dev/null
	make -s install DESTDIR="$QS_BENCH_PGROOT" >/dev/null
else
	bench_lock_build
fi

bench_initdb <<CONF
queen_streams.http_port = $((BENCH_PORT + 1))
queen_streams.http_workers = 2
queen_streams.stream_workers = 1
shared_buffers = 512MB
max_wal_size = 4GB
CONF
HTTP=$((PORT + 1))
stop() { as_pg "$BIN/pg_ctl" -D "$W/data" -m fast -w stop >/dev/null; }
sql() { Q -c "$1"; }
now() { date +%s.%N; }
start
sql "CREATE EXTENSION queen_streams"

# A backlog of $EVENTS orders on queue $1: ascending event time over 20
# minutes, $KEYS customers, $PARTS partitions; 500 a push.
fill() {
	sql "DO \$\$
	BEGIN
		FOR c IN 0 .. ($EVENTS - 1) / 500 LOOP
			PERFORM queen.push(jsonb_build_object('items', (
				SELECT jsonb_agg(jsonb_build_object('queue', '$1', 'partition', 'p' || (i % $PARTS),
					'payload', jsonb_build_object('key', 'c' || (i * 7 % $KEYS),
						'ts', 1700000000000 + i * (1200000 / $EVENTS), 'amount', i % 100)))
				  FROM generate_series(c * 500, least(c * 500 + 499, $EVENTS - 1)) i)));
		END LOOP;
	END \$\$"
}
lag() {
	sql "SELECT coalesce(sum(GREATEST(p.last_offset - coalesce(c.committed, -1), 0)), -1)
	       FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
	       LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = '$2'
	      WHERE q.name = '$1'"
}
wait_drained() {
	while [ "$(lag "$1" "$2")" != 0 ]; do sleep 0.05; done
}
rate() { awk -v n="$EVENTS" -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", n / (b - a) }'; }

# the machine's bare consuming rate: pop+auto-ack of the backlog, no fold
fill bare
t0=$(now)
sql "DO \$\$ BEGIN LOOP
	EXIT WHEN jsonb_array_length(queen.pop('bare', consumer_group => 'bare', batch => 200, auto_ack => true,
	                                       partitions => 4)->'messages') = 0;
END LOOP; END \$\$"
t1=$(now)
BARE=$(rate "$t0" "$t1")

DEF='"window": {"type": "tumbling", "size": 60}, "key": "$.key",
     "time": {"type": "event", "path": "$.ts"}, "batch": 200, "partitions": 4,
     "aggregates": {"count": {"fn": "count"}, "total": {"fn": "sum", "path": "$.amount"}}'
declared() {	# $1 queue, $2 workers
	fill "$1"
	t0=$(now)
	sql "SELECT queen_streams.create_stream('$1.w', '{\"source\": \"$1\", \"sink\": \"$1.out\", $DEF}')" >/dev/null
	wait_drained "$1" "streams.$1.w"
	t1=$(now)
	rate "$t0" "$t1"
}
ONE=$(declared one 1)
sql "ALTER SYSTEM SET queen_streams.stream_workers = 2"
stop
start
TWO=$(declared two 2)

# the example worker over HTTP: the same fold (a tumbling count per key)
fill sdk
t0=$(now)
as_pg perl "$ROOT/examples/window_counter.pl" --url "http://127.0.0.1:$HTTP" --source sdk \
	--sink sdk.out --time-field ts --batch 200 --partitions 4 --idle-flush 0 >/dev/null 2>&1 &
SDK_PID=$!
wait_drained sdk streams.sdk.out
t1=$(now)
kill "$SDK_PID" 2>/dev/null || true
wait "$SDK_PID" 2>/dev/null || true
SDK=$(rate "$t0" "$t1")

WIN=$(sql "SELECT count(*) FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
            WHERE q.name IN ('one.out', 'two.out')")
CPU=$(nproc)
cat <<EOF
declared streams, $EVENTS events, $PARTS partitions, $KEYS keys, $CPU cores
| consumer | events/s | vs bare pop+ack |
|---|---|---|
| bare queen.pop auto_ack, 1 backend, no fold | $BARE | 1.00 |
| declared stream, 1 stream worker | $ONE | $(awk -v a="$ONE" -v b="$BARE" 'BEGIN { printf "%.2f", a / b }') |
| declared stream, 2 stream workers | $TWO | $(awk -v a="$TWO" -v b="$BARE" 'BEGIN { printf "%.2f", a / b }') |
| examples/window_counter.pl over HTTP (count only) | $SDK | $(awk -v a="$SDK" -v b="$BARE" 'BEGIN { printf "%.2f", a / b }') |
EOF
