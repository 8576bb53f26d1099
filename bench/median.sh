# shellcheck shell=bash
# Sourced by the benchmarks that run their points in rounds (bench/lib.sh,
# bench/http/group_commit.sh): the median of a round's values.

# The median of the numbers in $1, space separated ("-", no value, is left
# out; an even count gives the mean of the middle two; none gives "-").
median() {
	tr ' ' '\n' <<<"$1" | sed '/^$/d;/^-$/d' | sort -g |
		awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else if (NR) print (v[NR / 2] + v[NR / 2 + 1]) / 2; else print "-" }'
}
