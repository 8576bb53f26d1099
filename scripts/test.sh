#!/usr/bin/env bash
# Sets up and runs every test suite of queen_streams against throwaway
# PostgreSQL instances: the layering check, pg_regress, the isolation
# tester, pgTAP and TAP.
# Run as root on Debian bookworm (installs what is missing); the servers
# themselves run as the unprivileged user `postgres`.
#
# While developing, a subset can be run (CI runs everything):
#   QS_REGRESS="configure pop"  QS_ISOLATION="pop_pop"  QS_TAP="test/t/001_http_routes.pl"
#   QS_PG_PRIVATE=1             (a private PostgreSQL tree: no machine-wide lock)
#   QS_SUITES="regress tap"     (any of: lint deb regress pgtap tap; default all)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

scripts/install-deps.sh --test
if [ -n "${QS_PG_PRIVATE:-}" ]; then
	# A private copy of the PostgreSQL tree per checkout (its binaries find
	# their lib and share dirs relative to themselves), so several checkouts
	# can test at once without the machine-wide lock.
	PRIV=/tmp/queen_streams-pg.$(printf '%s' "$ROOT" | md5sum | cut -c1-8)
	mkdir -p "$PRIV/usr/lib/postgresql" "$PRIV/usr/share/postgresql" "$PRIV/usr/include"
	rsync -a /usr/lib/postgresql/15 "$PRIV/usr/lib/postgresql/"
	rsync -a /usr/share/postgresql/15 "$PRIV/usr/share/postgresql/"
	ln -sfn /usr/include/postgresql "$PRIV/usr/include/postgresql"
	export PG_CONFIG=$PRIV/usr/lib/postgresql/15/bin/pg_config
	export PATH=$PRIV/usr/lib/postgresql/15/bin:$PATH
else
	# One run at a time per machine: every run installs into the server's lib dir.
	exec 9>/tmp/queen_streams.test.lock
	flock 9
fi
SUITES=${QS_SUITES:-lint deb regress pgtap tap}
want() { [[ " $SUITES " == *" $1 "* ]]; }
passed=0
failed=0
status=0

# The Debian package is installed into, and purged from, the server's own
# folders: it runs before this run's `make install`, under the install lock.
if want deb; then
	echo "== Debian package (test/deb/run.sh)"
	DEBOUT=$(mktemp /tmp/queen_streams-deb-out.XXXXXX)
	if [ -n "${QS_PG_PRIVATE:-}" ]; then
		flock /tmp/queen_streams.test.lock bash test/deb/run.sh 2>&1 | tee "$DEBOUT" || status=1
	else
		bash test/deb/run.sh 2>&1 | tee "$DEBOUT" || status=1
	fi
	passed=$((passed + $(grep -cE '^ok [0-9]+' "$DEBOUT" || true)))
	failed=$((failed + $(grep -cE '^not ok [0-9]+' "$DEBOUT" || true)))
	rm -f "$DEBOUT"
fi

make -s -j"$(nproc)" QS_WERROR=1 >/dev/null
make -s install >/dev/null

# PostgreSQL refuses to run as root: test from a copy owned by `postgres`.
WORK=$(mktemp -d /tmp/queen_streams-test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# (test/fuzz/work: corpora a running fuzzer keeps changing)
rsync -a --exclude .git --exclude .run --exclude test/fuzz/work "$ROOT/" "$WORK/"
chown -R postgres:postgres "$WORK"
as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- env PATH="$PATH" ${PG_CONFIG:+PG_CONFIG="$PG_CONFIG"} "$@"
	else "$@"; fi
}

LOG="$WORK/test-output.log"
note() { printf '%s\n' "$*" | tee -a "$LOG"; }

count_pg_regress() {	# counts "ok"/"FAILED" lines of pg_regress output
	local out=$1
	local ok bad
	ok=$(grep -cE '^(ok|test|     ).* \.\.\. ok|^ok [0-9]+ ' "$out" || true)
	bad=$(grep -cE '\.\.\. FAILED|^not ok ' "$out" || true)
	passed=$((passed + ok))
	failed=$((failed + bad))
}

cd "$WORK"
SUBSET=()
[ -n "${QS_REGRESS:-}" ] && SUBSET+=("REGRESS=$QS_REGRESS")
[ -n "${QS_ISOLATION+x}" ] && SUBSET+=("ISOLATION=$QS_ISOLATION")

if want lint; then
	note "== lint (scripts/check-layers.sh)"
	if bash scripts/check-layers.sh 2>&1 | tee "$WORK/lint.out"; then
		passed=$((passed + 1))
	else
		status=1
		failed=$((failed + $(grep -c ': \(includes\|declares\|calls\) ' "$WORK/lint.out" || true)))
	fi
	note "== lint (the layer check catches planted breaches: scripts/check-layers-selftest.sh)"
	if bash scripts/check-layers-selftest.sh 2>&1 | tee "$WORK/lint-self.out" && grep -qx 'layers selftest ok' "$WORK/lint-self.out"; then
		passed=$((passed + 1))
	else
		status=1
		failed=$((failed + 1))
	fi
	note "== lint (links between the pages: scripts/check-doc-links.pl)"
	if perl scripts/check-doc-links.pl 2>&1 | tee "$WORK/links.out" && grep -qx 'links ok' "$WORK/links.out"; then
		passed=$((passed + 1))
	else
		status=1
		failed=$((failed + 1))
	fi
	note "== lint (META.json and the PGXN zip of HEAD: make dist, scripts/check-meta.pl)"
	if (cd "$ROOT" && make -s dist DISTFILE="$WORK/dist.zip" >/dev/null) &&
		perl scripts/check-meta.pl "$WORK/dist.zip" 2>&1 | tee "$WORK/meta.out" && grep -qx 'meta ok' "$WORK/meta.out"; then
		passed=$((passed + 1))
	else
		status=1
		failed=$((failed + 1))
	fi
fi

if want regress; then
note "== pg_regress and isolation (throwaway instances, library preloaded)"
if ! as_pg make -s installcheck QS_TEMP_INSTANCE=1 "${SUBSET[@]}" 2>&1 | tee "$WORK/regress.out"; then status=1; fi
count_pg_regress "$WORK/regress.out"
for d in regression.diffs output_iso/regression.diffs; do
	[ -s "$d" ] && { echo "---- $d"; cat "$d"; }
done
# Keep the actual outputs for inspection (test/results is ignored by git).
mkdir -p "$ROOT/test/results"
cp -f results/*.out output_iso/results/*.out "$ROOT/test/results/" 2>/dev/null || true
fi

if want pgtap && compgen -G "test/pgtap/*.sql" >/dev/null; then
	note "== pgTAP"
	if ! as_pg test/pgtap/run.sh 2>&1 | tee "$WORK/pgtap.out"; then status=1; fi
	p=$(sed -n 's/^Files=\([0-9]*\), Tests=\([0-9]*\).*/\2/p' "$WORK/pgtap.out" | tail -1)
	f=$(grep -cE '^not ok' "$WORK/pgtap.out" || true)
	passed=$((passed + ${p:-0} - f)); failed=$((failed + f))
fi

if want tap && compgen -G "test/t/*.pl" >/dev/null; then
	note "== TAP"
	if ! as_pg make -s prove_installcheck PROVE_FLAGS=-v ${QS_TAP:+PROVE_TESTS="$QS_TAP"} 2>&1 | tee "$WORK/tap.out"; then status=1; fi
	p=$(grep -cE '^ok [0-9]+' "$WORK/tap.out" || true)
	f=$(grep -cE '^not ok [0-9]+' "$WORK/tap.out" || true)
	passed=$((passed + p)); failed=$((failed + f))
	# The dashboard's screenshots (070_dashboard_browser.pl): kept with the
	# results; QS_UPDATE_SCREENSHOTS=1 also refreshes the README's.
	if compgen -G "tmp_check/dashboard/screenshots/*.png" >/dev/null; then
		mkdir -p "$ROOT/test/results/screenshots"
		cp -f tmp_check/dashboard/screenshots/*.png "$ROOT/test/results/screenshots/"
		if [ -n "${QS_UPDATE_SCREENSHOTS:-}" ]; then
			mkdir -p "$ROOT/doc/screenshots"
			cp -f tmp_check/dashboard/screenshots/*.png "$ROOT/doc/screenshots/"
		fi
	fi
	# Firefox's (071_dashboard_firefox.pl): kept with the results only
	if compgen -G "tmp_check/dashboard-firefox/screenshots/*.png" >/dev/null; then
		mkdir -p "$ROOT/test/results/screenshots/firefox"
		cp -f tmp_check/dashboard-firefox/screenshots/*.png "$ROOT/test/results/screenshots/firefox/"
	fi
fi

[ "$status" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1
echo
echo "tests: $passed passed, $failed failed"
exit "$status"
