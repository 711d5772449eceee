#!/usr/bin/env bash
# tools/netem-lab: netem detection (this kernel has none: exit 3 and a plain message), no
# namespace left behind, --dry-run prints the expected tc lines, bad options are refused, and
# the namespace/veth/command path works (run with pfifo through the test seam, since netem is
# missing here). Needs root for namespaces: without root, once the checks above have passed,
# it prints "SKIPPED: ..." and exits 77 (ctest reports it as skipped).
set -uo pipefail
src=${DRTHS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
lab=$src/tools/netem-lab
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
leftovers() { ip netns list 2>/dev/null | grep -E '^drths-' ; }

# --dry-run and option checks need no root.
out=$("$lab" --dry-run --delay 40ms --jitter 5ms --distribution normal --loss 1% \
      --numerical 'drths-numerical e.yaml' --physical 'drths-physical e.yaml' 2>&1); rc=$?
[ $rc = 0 ] || fail "--dry-run exit $rc"
for dev in "drths-num qdisc add dev veth-num" "drths-phys qdisc add dev veth-phys"; do
    want="tc -n $dev root netem limit 10000 delay 40ms 5ms distribution normal loss random 1%"
    grep -qxF "$want" <<<"$out" && ok "dry-run prints: $want" || fail "dry-run lacks: $want
$out"
done
grep -q "ip netns exec drths-phys .*bash -c 'drths-physical e.yaml'" <<<"$out" \
    && ok "dry-run runs the physical command in drths-phys" || fail "dry-run physical command"
out=$("$lab" --dry-run --delay 25ms --loss 0.5% 2>&1)
grep -qxF "tc -n drths-num qdisc add dev veth-num root netem limit 10000 delay 25ms loss random 0.5%" <<<"$out" \
    && ok "dry-run without jitter" || fail "dry-run without jitter: $out"
out=$("$lab" --delay 40 2>&1); rc=$?
[ $rc = 2 ] && grep -q 'give a time with a unit' <<<"$out" && ok "--delay 40 refused (exit 2)" \
    || fail "--delay 40: exit $rc: $out"
out=$("$lab" --dry-run --delay 40ms --distribution normal 2>&1); rc=$?
[ $rc = 2 ] && grep -q 'needs --jitter' <<<"$out" && ok "distribution without jitter refused" \
    || fail "distribution without jitter: exit $rc: $out"

if [ "$(id -u)" != 0 ]; then
    [ $fails = 0 ] || exit 1
    echo "SKIPPED: not root (the namespace checks need root; the dry-run and option checks passed)"
    exit 77
fi
[ -z "$(leftovers)" ] || { echo "drths-* namespaces exist before the test: $(leftovers); not touching them"; exit 1; }

# Detection on this kernel.
out=$("$lab" --check 2>&1); rc=$?
if [ $rc = 3 ]; then
    grep -q 'this kernel has no netem qdisc (sch_netem); use tools/rehearse' <<<"$out" \
        && ok "--check: no netem, exit 3" || fail "--check message: $out"
    # A run without netem stops with the same message and exit 3.
    out=$("$lab" --delay 5ms --numerical true --physical true 2>&1); rc=$?
    [ $rc = 3 ] && grep -q 'no netem qdisc' <<<"$out" && ok "run without netem: exit 3" \
        || fail "run without netem: exit $rc: $out"
elif [ $rc = 0 ]; then
    grep -q 'netem qdisc available' <<<"$out" && ok "--check: netem available" || fail "--check: $out"
else
    fail "--check exit $rc: $out"
fi
[ -z "$(leftovers)" ] && ok "no drths-* namespace left after detection" || fail "left: $(leftovers)"

# The namespace path with pfifo instead of netem: addresses, commands, statuses, cleanup.
if command -v python3 >/dev/null; then
    echo_srv='import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("10.77.0.2", 9400)); s.settimeout(10); d,a=s.recvfrom(100); s.sendto(d, a)'
    client='import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1)
for i in range(10):
    s.sendto(b"ping", ("10.77.0.2", 9400))
    try:
        d,a=s.recvfrom(100); sys.exit(0 if d==b"ping" else 5)
    except socket.timeout: pass
sys.exit(6)'
    out=$(NETEM_LAB_TEST_QDISC=pfifo "$lab" --timeout 30 \
        --physical "python3 -c '$echo_srv'" --numerical "python3 -c '$client'" 2>&1); rc=$?
    [ $rc = 0 ] && grep -q 'numerical site exited 0, physical site exited 0' <<<"$out" \
        && ok "UDP echo across the veth pair (10.77.0.1 -> 10.77.0.2)" || fail "veth echo: exit $rc: $out"
else
    echo "note: no python3, the UDP echo across the veth pair is not checked"
fi
out=$(NETEM_LAB_TEST_QDISC=pfifo "$lab" --numerical 'ip -br addr show veth-num | grep -q 10.77.0.1/24 && exit 7' \
      --physical 'test "$DRTHS_PHYS_ADDR" = 10.77.0.2' 2>&1); rc=$?
[ $rc = 7 ] && ok "numerical status propagated (7), commands ran in their namespaces" || fail "status: exit $rc: $out"
out=$(NETEM_LAB_TEST_QDISC=pfifo "$lab" --numerical true --physical 'exit 9' 2>&1); rc=$?
[ $rc = 9 ] && ok "physical status propagated (9)" || fail "physical status: exit $rc: $out"
[ -z "$(leftovers)" ] && ok "no drths-* namespace left after runs" || fail "left: $(leftovers)"

[ $fails = 0 ] && { echo "all netem-lab checks passed"; exit 0; }
echo "$fails check(s) failed"; exit 1
