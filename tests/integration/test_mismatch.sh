#!/usr/bin/env bash
# The two sites given experiment files whose shared parts differ (another damping ratio): the
# handshake detects the fingerprint mismatch, both exit non-zero within a few seconds, and the
# numerical site's stderr says the actuator site runs a different experiment.
set -euo pipefail
bdir=$1
src=${DRTHS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
fail() {
    echo "FAIL: $*" >&2
    for f in "$tmp"/*.out "$tmp"/*.err; do [ -f "$f" ] && { echo "--- $f" >&2; sed 's/^/  | /' "$f" >&2; }; done
    exit 1
}

ln -s "$src/examples/records" "$tmp/records"
sed -e "s|^  directory: .*|  directory: $tmp/runs|" "$src/examples/three-story-elcentro.yaml" \
    >"$tmp/a.yaml"
sed -e 's/^    ratio: \[0.02\]/    ratio: [0.03]/' "$tmp/a.yaml" >"$tmp/b.yaml"
! cmp -s "$tmp/a.yaml" "$tmp/b.yaml" || fail "could not change the damping ratio"

port=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

t0=$(date +%s%N)
timeout 20 "$bdir/drths-physical" --experiment "$tmp/b.yaml" --listen "127.0.0.1:$port" \
    --wait-timeout 10 --out "$tmp/phys" --quiet >"$tmp/phys.out" 2>"$tmp/phys.err" &
ppid=$!
pids+=("$ppid")
set +e
timeout 20 "$bdir/drths-numerical" --experiment "$tmp/a.yaml" --peer "127.0.0.1:$port" \
    --connect-timeout 5 --out "$tmp/num" --quiet >"$tmp/num.out" 2>"$tmp/num.err"
nrc=$?
wait "$ppid"
prc=$?
set -e
pids=()
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "drths-numerical exit $nrc, drths-physical exit $prc, both done after $ms ms"
grep -h "fingerprint" "$tmp/num.err" "$tmp/phys.out" "$tmp/phys.err" || true
[ "$nrc" -ne 0 ] && [ "$nrc" -ne 124 ] || fail "drths-numerical exit $nrc"
[ "$prc" -ne 0 ] && [ "$prc" -ne 124 ] || fail "drths-physical exit $prc"
grep -q "the actuator site runs a different experiment (fingerprint" "$tmp/num.err" ||
    fail "the numerical site's stderr does not name the fingerprint mismatch"
[ "$ms" -le 5000 ] || fail "took $ms ms"
grep -q '"exit_code": 1' "$tmp/num/summary.json" || fail "numerical summary.json lacks exit_code 1"
echo "PASS"
