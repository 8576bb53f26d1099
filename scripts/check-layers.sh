#!/usr/bin/env bash
# The layering rule, checked: src/common -> src/storage -> src/streams ->
# src/http, and inside src/http: src/http (settings, shared memory, the
# request between the halves) -> src/http/dispatch -> src/http/transport.
# Each folder includes only its own headers and lower ones, declares
# (extern) no function that a higher one defines, and calls no qs_
# function that a higher one defines; so dispatch never calls transport.
# src/http/http.h, the listener's public face, may be included by any part
# of it. src/queen_streams.c (_PG_init) sits above them all. Prints each
# breach as file:line and exits 1 if there is any; "layers ok" otherwise.
#
#   scripts/check-layers.sh [DIR]   check DIR's src/ (default: this checkout)
set -uo pipefail
cd "${1:-$(dirname "$0")/..}" || exit 2

files=$(find src -name '*.[ch]' -not -name 'dashboard_assets.c' | sort)
ours=$(cd src && find . -mindepth 2 -name '*.h' | sed 's|^\./||' | sort)	# "dir/name.h", "dir/sub/name.h" of ours (the server's share folder names: storage/fd.h)

{
	# lines "H <header>" (our headers), "D <file> <name>" (a function defined
	# in a .c: the name at the start of a line, then "("), "I <file>:<line> <header>",
	# "E <file>:<line> <name>" (an extern function declaration)
	for h in $ours; do echo "H $h"; done
	grep -HoE '^[a-z_][a-z0-9_]*\(' $(grep -l . $files | grep '\.c$') |
		sed -E 's/^([^:]*):([a-z0-9_]*)\($/D \1 \2/'
	grep -HnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' $files |
		sed -E 's/^([^:]*:[0-9]*):.*"([^"]+)".*/I \1 \2/'
	grep -HnE '^[[:space:]]*extern[^;(]*[a-z_][a-z0-9_]*[[:space:]]*\(' $files | grep -v '(\*' |
		sed -E 's/^([^:]*:[0-9]*):([^(]*[^a-z0-9_(])?([a-z_][a-z0-9_]*)[[:space:]]*\(.*/E \1 \3/'
	# "C <file>:<line> <name>": a call of a qs_ function (not its definition,
	# not a comment line), in a .c
	grep -HnoE '^[[:space:]]+[^*/[:space:]].*' $(echo "$files" | grep '\.c$') |
		awk -F: '{ f = $1; l = $2; t = substr($0, length(f) + length(l) + 3)
			while (match(t, /(^|[^a-z0-9_])qs_[a-z0-9_]*[[:space:]]*\(/)) {
				n = substr(t, RSTART, RLENGTH); sub(/^[^q]*/, "", n); sub(/[[:space:]]*\($/, "", n)
				print "C " f ":" l " " n; t = substr(t, RSTART + RLENGTH) } }'
} | awk '
	function rank(p) {
		if (p ~ /^(src\/)?common\//) return 0
		if (p ~ /^(src\/)?storage\//) return 1
		if (p ~ /^(src\/)?streams\//) return 2
		if (p ~ /^(src\/)?http\/http\.h$/) return 5	# the face: declares the worker entry (transport)
		if (p ~ /^(src\/)?http\/transport\//) return 5
		if (p ~ /^(src\/)?http\/dispatch\//) return 4
		if (p ~ /^(src\/)?http\//) return 3
		return 9
	}
	function file_of(loc) { sub(/:[0-9]*$/, "", loc); return loc }
	$1 == "H" { ours[$2] = 1 }
	$1 == "D" { def[$3] = $2 }
	$1 == "I" { inc[++ni] = $2 " " $3 }
	$1 == "E" { ext[++ne] = $2 " " $3 }
	$1 == "C" { call[++nc] = $2 " " $3 }
	END {
		bad = 0
		for (i = 1; i <= ni; i++) {
			split(inc[i], a, " ")
			if (a[2] == "http/http.h" && rank(file_of(a[1])) >= 3) continue
			if ((a[2] in ours) && rank(a[2]) > rank(file_of(a[1]))) {
				print a[1] ": includes " a[2] ", a higher layer"; bad = 1
			}
		}
		for (i = 1; i <= ne; i++) {
			split(ext[i], a, " ")
			f = file_of(a[1])
			if (rank(f) == 9 || !(a[2] in def)) continue
			if (rank(def[a[2]]) > rank(f)) {
				print a[1] ": declares " a[2] ", defined in " def[a[2]] " (a higher layer)"; bad = 1
			}
		}
		for (i = 1; i <= nc; i++) {
			split(call[i], a, " ")
			f = file_of(a[1])
			if (rank(f) == 9 || !(a[2] in def) || def[a[2]] == f) continue
			if (rank(def[a[2]]) > rank(f)) {
				print a[1] ": calls " a[2] ", defined in " def[a[2]] " (a higher layer)"; bad = 1
			}
		}
		if (bad) { print "layers: breaches found (see CONTRIBUTING.md, The layers)"; exit 1 }
		print "layers ok"
	}'
