#!/usr/bin/env bash
# Installs every system package queen_streams needs on Debian bookworm.
# Idempotent; must run as root. Skips apt entirely when everything is present.
# --test: also what the test suites need beyond the build (scripts/test.sh).
# --cells: also PL/Proxy, for a router in front of cells (scripts/cells.sh).
set -euo pipefail
TESTS=0
CELLS=0
[ "${1:-}" = "--test" ] && TESTS=1 && CELLS=1
[ "${1:-}" = "--cells" ] && CELLS=1

PACKAGES=(
	build-essential
	postgresql-15
	postgresql-server-dev-15
	libzstd-dev
	libxxhash-dev
	libssl-dev
	libmicrohttpd-dev
	postgresql-15-pgtap
	libtap-parser-sourcehandler-pgtap-perl
	libipc-run-perl
	curl
	openssl
	rsync
	clang
	libclang-rt-14-dev
	xxd
)
# the dashboard's browser tests (test/t/070_dashboard_browser.pl, 071_dashboard_firefox.pl)
[ "$TESTS" -eq 1 ] && PACKAGES+=(chromium firefox-esr)
# the PGXN distribution's check (make dist, scripts/check-meta.pl)
[ "$TESTS" -eq 1 ] && PACKAGES+=(git unzip)
# the Debian package's build and check (debian/, test/deb/run.sh)
[ "$TESTS" -eq 1 ] && PACKAGES+=(debhelper postgresql-server-dev-all lintian dpkg-dev fakeroot)
# the router of cells (queen_streams_router; dblink comes with postgresql-15)
[ "$CELLS" -eq 1 ] && PACKAGES+=(postgresql-15-plproxy)
# the alert rules' checks and the scrape test (promtool, a loopback Prometheus: test/t/017_prometheus.pl)
[ "$TESTS" -eq 1 ] && PACKAGES+=(prometheus)
# the failover test's formation (scripts/ha-formation.sh, test/t/080_ha_failover.pl)
[ "$TESTS" -eq 1 ] && PACKAGES+=(postgresql-15-auto-failover pg-auto-failover-cli)

missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "install-deps: missing packages (${missing[*]}); run as root" >&2
		exit 1
	fi
	echo "install-deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The dashboard's browser tests drive Debian's chromium with playwright-core
# (test/t/070_dashboard_browser.pl) and Debian's firefox-esr over WebDriver
# BiDi with puppeteer-core (071_dashboard_firefox.pl), both from npm and never
# a browser download, pinned by test/browser/package-lock.json; reinstalled
# when the lock changes.
[ "$TESTS" -eq 1 ] || exit 0
cd "$(dirname "$0")/.."
if ! command -v npm >/dev/null 2>&1; then
	# a machine without Node: Debian's own (18, enough for playwright-core and puppeteer-core 24)
	echo "install-deps: installing nodejs npm"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
if ! cmp -s test/browser/package-lock.json test/browser/node_modules/.qs-installed-lock 2>/dev/null; then
	echo "install-deps: npm ci in test/browser"
	( cd test/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --ignore-scripts >/dev/null )
	cp test/browser/package-lock.json test/browser/node_modules/.qs-installed-lock
fi
