#!/usr/bin/env bash
# Pushes of which some roll back (reported, not asserted): 4 clients, each
# transaction one push_text of 100 items with fresh client transaction ids
# into one of 16 partitions, into a dedup cache already holding 3M hashes;
# one point where every transaction commits, one where 1 in 10 rolls back.
# Both do the same work up to their end (a rollback then skips the wait for
# a flush), so the second should run at least as many transactions a second
# as the first. Until 2026-12-06 every sixteenth rollback of a partition
# cost a pass over the whole cache under its lock.
#
#   bash bench/push_rollbacks.sh     # as root; a throwaway instance, fsync on
#
# Knobs: QS_BENCH_DURATION (10 s a point), QS_BENCH_WARMUP (2),
# QS_BENCH_ROUNDS (3), QS_BENCH_CACHE (60000000 entries: more than three
# rounds write, so that the cache never fills), QS_BENCH_PG_BIN.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC2034 # bench/lib.sh reads both
TAG=rollbacks
ROUNDS=${QS_BENCH_ROUNDS:-3}
# shellcheck disable=SC2034
CACHE=${QS_BENCH_CACHE:-60000000}
. bench/lib.sh
bench_lock_build
bench_instance
Q -c "CREATE EXTENSION queen_streams"

log "filling the cache with 3M hashes"
Q <<'SQL'
CREATE PROCEDURE fill(n int) LANGUAGE plpgsql AS $$
BEGIN
	FOR k IN 1 .. n LOOP
		PERFORM queen.push_text((SELECT '{"items":[' || string_agg(format(
			'{"queue":"fill","partition":"p%s","transactionId":"f-%s-%s","payload":{"a":1}}', k % 64, k, i), ',')
			|| ']}' FROM generate_series(1, 10000) i));
		COMMIT;
	END LOOP;
END $$;
CALL fill(300);
SQL
Q -c "SELECT queen.push_text('{\"items\":[' || (SELECT string_agg(format(
	'{\"queue\":\"rb\",\"partition\":\"p%s\",\"payload\":1}', i), ',') FROM generate_series(0, 15) i) || ']}') IS NOT NULL" >/dev/null

# A pgbench script: 1 in $2 transactions rolls back (0: none does).
script() {
	{
		echo '\set p random(0, 15)'
		echo '\set k random(1, 2000000000)'
		echo 'BEGIN;'
		echo "SELECT queen.push_text('{\"items\":[' || (SELECT string_agg(format('{\"queue\":\"rb\",\"partition\":\"p%s\",\"transactionId\":\"r-%s-%s\",\"payload\":{\"a\":1}}', :p, :k, i), ',') FROM generate_series(1, 100) i) || ']}') IS NOT NULL;"
		if [ "$2" = 0 ]; then
			echo 'COMMIT;'
		else
			printf '%s\n' "\\set r random(1, $2)" '\if :r = 1' 'ROLLBACK;' '\else' 'COMMIT;' '\endif'
		fi
	} >"$W/scripts/$1.sql"
	[ "$(id -u)" -eq 0 ] && chown postgres "$W/scripts/$1.sql"
	return 0
}
script none 0
script tenth 10

# transactions a second, and the latency's standard deviation (ms)
run() {
	local out
	pgb -c 4 -j 2 -T "$WARM" -f "scripts/$1.sql" >/dev/null 2>&1
	out=$(pgb -c 4 -j 2 -T "$DUR" -P 1 -f "scripts/$1.sql" 2>&1)
	printf '%s %s\n' "$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out")" \
		"$(sed -n 's/^latency stddev = \([0-9.]*\) ms$/\1/p' <<<"$out")"
}

none="" tenth="" ratio="" sd_none="" sd_tenth=""
for r in $(seq "$ROUNDS"); do
	read -r a sa < <(run none)
	read -r b sb < <(run tenth)
	log "round $r: none rolled back $a tx/s (stddev $sa ms), 1 in 10 $b tx/s (stddev $sb ms)"
	none+="$a " tenth+="$b " sd_none+="$sa " sd_tenth+="$sb "
	ratio+="$(echo "scale=3; $b / $a" | bc) "
done
echo "push_text of 100 ids, 4 clients, 16 partitions, 3M hashes cached before, ${DUR} s a point, $ROUNDS rounds (medians):"
echo "  every transaction commits:  $(median "$none") tx/s, latency stddev $(median "$sd_none") ms"
echo "  1 in 10 rolls back:         $(median "$tenth") tx/s, latency stddev $(median "$sd_tenth") ms"
echo "  ratio (rounds: $ratio): $(median "$ratio")"
# a partition the cache stopped holding is probed by key, and writes keys
echo "  keys written (0: the cache never overflowed): $(Q -c "SELECT count(*) FROM queen.log_txn_keys")"
