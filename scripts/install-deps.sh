#!/usr/bin/env bash
# Installs every system package queen_streams needs on Debian bookworm.
# Idempotent; must run as root. Skips apt entirely when everything is present.
set -euo pipefail

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
)

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
