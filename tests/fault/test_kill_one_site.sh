#!/usr/bin/env bash
# Fault: kill -9 of one of two actuator sites mid-run (docs/faults.md, one fate). Expected: the
# numerical site hears nothing more from lab B, declares it lost after the sites' watchdog
# (physical.watchdog_ms, 100 ms) and sends ABORT to lab A, which holds within about its own
# watchdog of lab B's last feedback (at most twice it here, for a loaded machine), not after
# the 1 s --peer-timeout; the numerical site exits 1 naming lab B in its exit reason and in
# summary.json's stopped_by; lab A exits 1 with its HOLD naming lab B; the numerical site's and
# lab A's records are complete.
source "$(dirname "$0")/../lib.sh"

pa=$(free_port)
pb=$(free_port)
ln -sfn "$src/examples/records" "$tmp/records"
python3 - "$src/examples/two-labs.yaml" "$tmp/exp.yaml" "$pa" "$pb" "$tmp/runs" \
    "${DRTHS_TEST_MAX_TICK_LATE_MS:-200}" <<'PY' || fail "could not edit the experiment"
import re, sys
src, dst, pa, pb, runs, stall = sys.argv[1:]
t = open(src).read()
t = t.replace('"127.0.0.1:47001"', f'"127.0.0.1:{pa}"').replace('"127.0.0.1:47002"',
                                                                f'"127.0.0.1:{pb}"')
for key, value in (("duration_s", "6"), ("tail_s", "0"), ("safety_margin_ticks", "100"),
                   ("reorder_ticks", "50"), ("max_tick_late_ms", stall), ("directory", runs)):
    t, n = re.subn(rf"^(  {key}:) [^\n]*", rf"\1 {value}", t, count=1, flags=re.M)
    assert n == 1, key
open(dst, "w").write(t)
PY

start_sites "$tmp/exp.yaml" labA labB
wait_rows "$tmp/labB/physical.csv" 5000
kill -9 "$(child_of "$pid_labB")"
wait_status "$pid_labB"
brc=$rc
wait_status "$npid"
nrc=$rc
wait_status "$pid_labA"
arc=$rc
echo "lab B killed (status $brc); drths-numerical exit $nrc: $(summary "$tmp/num" exit_reason)"
echo "lab A exit $arc: $(summary "$tmp/labA" exit_reason)"
[ "$brc" = 137 ] || fail "lab B was not killed by signal 9 (status $brc)"
[ "$nrc" = 1 ] || fail "drths-numerical exit $nrc, expected 1"
[ "$arc" = 1 ] || fail "lab A exit $arc, expected 1 (HOLD)"
grep -q "site labB stopped the test" "$tmp/num.err" || fail "the numerical site's message does not name lab B"
check_records "$tmp/num" numerical
check_records "$tmp/labA" physical

python3 - "$tmp" <<'PY' || fail "one fate check failed"
import json, sys
from checks import check, status
tmp = sys.argv[1]
num = json.load(open(f"{tmp}/num/summary.json"))
a = json.load(open(f"{tmp}/labA/summary.json"))
sb = num.get("stopped_by") or {}
check(sb.get("site") == "labB" and sb.get("end") == "peer lost",
      f"summary.json stopped_by: {sb}")
check("labB" in num["exit_reason"], f"exit_reason names lab B: {num['exit_reason']}")
hold = a.get("hold", {})
check(hold.get("active") and hold.get("reason_code") == "PEER_LOST" and "labB" in hold.get("reason", ""),
      f"lab A held: {hold.get('reason_code')}: {hold.get('reason')}")
last_b = {l["site"]: l for l in num["links"]}["labB"]["newest_feedback_tick"]
wd = 0.1 * 5000  # physical.watchdog_ms 100 at 5 kHz
lag = hold.get("first_tick", 1e18) - last_b
check(0 < lag <= 2 * wd, f"lab A in HOLD {lag} ticks after lab B's last feedback (watchdog {wd:.0f})")
sys.exit(status())
PY
echo PASS
