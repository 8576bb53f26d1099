# shellcheck shell=bash disable=SC2034
# Sourced by bench/lib.sh (which defines log) for the benchmarks that start
# their own instance: huge pages for its shared
# memory when root can reserve them (QS_BENCH_HUGE_PAGES=1, the default; 0:
# 4 kB pages). Every backend maps each 4 kB page of shared memory it
# touches with a fault of its own, and the dedup cache is touched at
# random: on the development VM a new connection pushing into a large
# cache ran at about a third of its warm speed for its first seconds, and
# the baseline's shared_buffers pay the same. HUGE (on or off) goes into
# postgresql.conf and the run's report; bench_huge_pages_release gives the
# reservation back. Two such runs at once (private trees take no lock) would
# each give back what the other reserved.
HUGE=off
HUGE_WAS=
bench_huge_pages() {	# bench_huge_pages MB: reserve MB of huge pages if allowed
	local want have kb
	[ "${QS_BENCH_HUGE_PAGES:-1}" = 1 ] && [ "$(id -u)" -eq 0 ] && [ -w /proc/sys/vm/nr_hugepages ] || return 0
	kb=$(awk '/^Hugepagesize:/ { print $2 }' /proc/meminfo)
	[ -n "$kb" ] && [ "$kb" -gt 0 ] || return 0
	HUGE_WAS=$(cat /proc/sys/vm/nr_hugepages)
	want=$((HUGE_WAS + ($1 * 1024 + kb - 1) / kb))
	echo "$want" >/proc/sys/vm/nr_hugepages 2>/dev/null || true
	have=$(cat /proc/sys/vm/nr_hugepages)
	if [ "$have" -ge "$want" ]; then
		HUGE=on
	else
		log "could reserve only $((have - HUGE_WAS)) of $((want - HUGE_WAS)) huge pages: 4 kB pages"
		echo "$HUGE_WAS" >/proc/sys/vm/nr_hugepages || true
		HUGE_WAS=
	fi
}
bench_huge_pages_release() {
	[ -z "$HUGE_WAS" ] || echo "$HUGE_WAS" >/proc/sys/vm/nr_hugepages || true
	HUGE_WAS=
}
