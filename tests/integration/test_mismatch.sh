#!/usr/bin/env bash
# The two sites given experiment files whose shared parts differ (another damping ratio): the
# actuator site refuses the HELLO with ABORT naming the section that differs (structure), the
# numerical site exits non-zero within a few seconds saying so, and the actuator site keeps
# waiting: a matching numerical site after it runs to the end. Then a different key at each
# site: the actuator site says so within seconds, the numerical site's message names the key.
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
sed -e "s|^  directory: .*|  directory: $tmp/runs|" -e "s/^  duration_s: 0 .*/  duration_s: 1/" \
    -e 's/^  tail_s: .*/  tail_s: 0/' \
    -e "s/^  max_tick_late_ms: .*/  max_tick_late_ms: ${DRTHS_TEST_MAX_TICK_LATE_MS:-200}/" \
    "$src/examples/three-story-elcentro.yaml" >"$tmp/a.yaml"
grep -q "^  duration_s: 1$" "$tmp/a.yaml" || fail "could not shorten the record"
sed -e 's/^    ratio: \[0.02\]/    ratio: [0.03]/' "$tmp/a.yaml" >"$tmp/b.yaml"
! cmp -s "$tmp/a.yaml" "$tmp/b.yaml" || fail "could not change the damping ratio"

port=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

t0=$(date +%s%N)
timeout 30 "$bdir/drths-physical" --experiment "$tmp/b.yaml" --listen "127.0.0.1:$port" \
    --wait-timeout 20 --out "$tmp/phys" --quiet >"$tmp/phys.out" 2>"$tmp/phys.err" &
ppid=$!
pids+=("$ppid")
set +e
timeout 20 "$bdir/drths-numerical" --experiment "$tmp/a.yaml" --peer "127.0.0.1:$port" \
    --connect-timeout 5 --out "$tmp/num" --quiet >"$tmp/num.out" 2>"$tmp/num.err"
nrc=$?
set -e
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "drths-numerical exit $nrc after $ms ms"
grep -h "differs" "$tmp/num.err" "$tmp/phys.out" "$tmp/phys.err" || true
[ "$nrc" -ne 0 ] && [ "$nrc" -ne 124 ] || fail "drths-numerical exit $nrc"
[ "$ms" -le 5000 ] || fail "took $ms ms"
# Both sites name the section that differs (the damping ratio is in structure).
grep -q "refused the session: FINGERPRINT_MISMATCH: experiment differs in structure:" \
    "$tmp/num.err" || fail "the numerical site's stderr does not name the differing section"
grep -q '"exit_code": 1' "$tmp/num/summary.json" || fail "numerical summary.json lacks exit_code 1"
# The actuator site refused that HELLO and goes on waiting (protocol v2): still running, and a
# matching numerical site is then accepted.
kill -0 "$ppid" 2>/dev/null || fail "the actuator site exited after a mismatching HELLO"
grep -hq "refused (FINGERPRINT_MISMATCH): experiment differs in structure:" \
    "$tmp/phys.out" "$tmp/phys.err" || fail "the actuator site does not name the section"
set +e
timeout 20 "$bdir/drths-numerical" --experiment "$tmp/b.yaml" --peer "127.0.0.1:$port" \
    --connect-timeout 5 --out "$tmp/num2" --quiet >"$tmp/num2.out" 2>"$tmp/num2.err"
nrc=$?
wait "$ppid"
prc=$?
set -e
pids=()
echo "matching run after it: drths-numerical exit $nrc, drths-physical exit $prc"
[ "$nrc" = 0 ] || fail "the matching numerical site after the mismatch: exit $nrc"
[ "$prc" = 0 ] || fail "the actuator site after the mismatch and a matching run: exit $prc"

# A different key at each site: the actuator site says so within seconds (its HELLOs fail
# authentication), the numerical site's "no answer" names the key as a cause.
"$bdir/drths-keygen" "$tmp/k1" >/dev/null
"$bdir/drths-keygen" "$tmp/k2" >/dev/null
t0=$(date +%s%N)
timeout 30 "$bdir/drths-physical" --experiment "$tmp/a.yaml" --listen "127.0.0.1:$port" \
    --key "$tmp/k1" --wait-timeout 20 --out "$tmp/phys3" --quiet >"$tmp/phys3.out" \
    2>"$tmp/phys3.err" &
ppid=$!
pids+=("$ppid")
set +e
timeout 20 "$bdir/drths-numerical" --experiment "$tmp/a.yaml" --peer "127.0.0.1:$port" \
    --key "$tmp/k2" --connect-timeout 3 --out "$tmp/num3" --quiet >"$tmp/num3.out" \
    2>"$tmp/num3.err"
nrc=$?
set -e
kill -TERM "$ppid" 2>/dev/null || true
wait "$ppid" || true
pids=()
grep -h "key" "$tmp/num3.err" "$tmp/phys3.out" "$tmp/phys3.err" | grep -v "key file\|rehearsal" || true
[ "$nrc" = 1 ] || fail "key mismatch: drths-numerical exit $nrc"
grep -q 'A different key? compare `drths-keygen --id` at both sites' "$tmp/num3.err" ||
    fail "key mismatch: the numerical site does not name the key"
grep -hq 'fails authentication: a different key? compare `drths-keygen --id` at both sites' \
    "$tmp/phys3.out" "$tmp/phys3.err" || fail "key mismatch: the actuator site does not say so"
echo "PASS"
