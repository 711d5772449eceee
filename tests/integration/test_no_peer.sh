#!/usr/bin/env bash
# drths-numerical aimed at a port nobody listens on: with --connect-timeout 2 it gives up after
# about 2 s, exits 1 and says where it looked, and still leaves a summary.json.
set -euo pipefail
bdir=$1
src=${DRTHS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$tmp"/out "$tmp"/err; do [ -f "$f" ] && sed 's/^/  | /' "$f" >&2; done; exit 1; }

# A port that was free a moment ago: bind an ephemeral UDP port, note it, let it go.
port=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

t0=$(date +%s%N)
set +e
timeout 10 "$bdir/drths-numerical" --experiment "$src/examples/three-story-elcentro.yaml" \
    --peer "127.0.0.1:$port" --connect-timeout 2 --out "$tmp/run" --quiet >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "drths-numerical exit $rc after $ms ms"
[ "$rc" -eq 1 ] || fail "exit status $rc, expected 1"
grep -q "no answer from the actuator site at 127.0.0.1:$port after 2 s: is drths-physical running and listening there? A different key? compare \`drths-keygen --id\` at both sites" "$tmp/err" ||
    fail "stderr lacks the 'no answer' sentence (with the key as a cause)"
[ "$ms" -ge 1900 ] || fail "gave up after $ms ms, before the 2 s timeout"
[ "$ms" -le 3500 ] || fail "took $ms ms, expected about 2 s"
grep -q '"exit_code": 1' "$tmp/run/summary.json" || fail "summary.json lacks exit_code 1"
echo "PASS"
