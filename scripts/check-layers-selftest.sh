#!/usr/bin/env bash
# scripts/check-layers.sh must catch what it is there for: on a copy of src/,
# plant one upward arrow of each kind it checks (an include, a call, an
# extern declaration; across floors and inside src/http) and expect each to
# be reported and the check to fail; the unplanted copy must pass.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r src "$tmp/"
bash scripts/check-layers.sh "$tmp" >/dev/null || { echo "selftest: the unplanted copy fails"; exit 1; }

# dispatch includes transport's header and calls into the daemon
printf '#include "http/transport/transport.h"\n' >>"$tmp/src/http/dispatch/role.c"
printf 'static void\nplanted_a(void)\n{\n\tqs_http_daemon_run();\n}\n' >>"$tmp/src/http/dispatch/group.c"
# storage calls a function of streams, and declares one of http
printf 'static void\nplanted_b(void)\n{\n\tqs_stream_worker_started(0);\n}\n' >>"$tmp/src/storage/pop.c"
printf 'extern void qs_handback(void *req);\n' >>"$tmp/src/storage/ack.c"

if out=$(bash scripts/check-layers.sh "$tmp" 2>&1); then
	echo "selftest: the planted breaches pass"; exit 1
fi
for want in 'dispatch/role.c:[0-9]*: includes http/transport/transport.h' \
	'dispatch/group.c:[0-9]*: calls qs_http_daemon_run' \
	'storage/pop.c:[0-9]*: calls qs_stream_worker_started' \
	'storage/ack.c:[0-9]*: declares qs_handback'; do
	grep -q "$want" <<<"$out" || { echo "selftest: not reported: $want"; echo "$out"; exit 1; }
done
echo "layers selftest ok"
