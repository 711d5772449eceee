#!/usr/bin/env bash
# Two laboratories live (PROTOCOL.md section 12): examples/two-labs.yaml on free ports, 2 s of
# record, lab A direct and lab B through drths-impair at 5 ms each way. The numerical site holds
# both links (one handshake each, before any EPOCH 1), takes one L for both, the largest either
# needs (lab B's), and each step uses both dampers' measured forces: all three exit 0 with
# complete records and one fingerprint; damper 1 acts at floor 1 and damper 2 at floor 2 as in
# the reference run of the same file; every floor's displacement RMS and peak error against the
# reference is <= 0.5 %; no feedback was concealed for long, no site held; summary.json times
# every step of the loop (step_timing: its cost and its lateness).
source "$(dirname "$0")/../lib.sh"

pa=$(free_port)
pb=$(free_port)
rb=$(free_port)
ln -sfn "$src/examples/records" "$tmp/records"
python3 - "$src/examples/two-labs.yaml" "$tmp/exp.yaml" "$pa" "$rb" "$pb" "$tmp/runs" \
    "${DRTHS_TEST_MAX_TICK_LATE_MS:-200}" <<'PY' || fail "could not edit the experiment"
import re, sys
src, dst, pa, rb, pb, runs, stall = sys.argv[1:]
t = open(src).read()
# Lab A at its port; lab B's datagrams go to the relay (address) and it listens behind it.
t = t.replace('address: "127.0.0.1:47001"', f'address: "127.0.0.1:{pa}"')
t = t.replace('address: "127.0.0.1:47002"',
              f'address: "127.0.0.1:{rb}"\n    listen: "127.0.0.1:{pb}"')
for key, value in (("duration_s", "2"), ("tail_s", "0"), ("safety_margin_ticks", "100"),
                   ("reorder_ticks", "50"), ("max_tick_late_ms", stall), ("directory", runs)):
    t, n = re.subn(rf"^(  {key}:) [^\n]*", rf"\1 {value}", t, count=1, flags=re.M)
    assert n == 1, key
open(dst, "w").write(t)
PY
grep -q "listen: \"127.0.0.1:$pb\"" "$tmp/exp.yaml" || fail "the experiment has no relay for lab B"

start_impair relay "$rb" "$pb" --forward "delay 5ms" --backward "delay 5ms" --seed 1
start_sites "$tmp/exp.yaml" labA labB
wait_status "$npid"
nrc=$rc
wait_status "$pid_labA"
arc=$rc
wait_status "$pid_labB"
brc=$rc
echo "drths-numerical exit $nrc, lab A exit $arc, lab B exit $brc"
[ "$nrc" -eq 0 ] || fail "drths-numerical exit $nrc"
[ "$arc" -eq 0 ] && [ "$brc" -eq 0 ] || fail "an actuator site failed: A $arc, B $brc"
check_records "$tmp/num" numerical
check_records "$tmp/labA" physical
check_records "$tmp/labB" physical

timeout 60 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --reference --out "$tmp/ref" \
    --quiet >"$tmp/ref.out" 2>"$tmp/ref.err" || fail "reference run failed"
report "$tmp/report.out" "$tmp/num" --reference "$tmp/ref" --physical "$tmp/labA" --no-plots

python3 - "$tmp" <<'PY' || fail "links, dampers or fidelity check failed"
import csv, json, sys
from checks import check, status
tmp = sys.argv[1]
num = json.load(open(f"{tmp}/num/summary.json"))
def fp(d):
    return d.get("fingerprint") or d.get("experiment", {}).get("fingerprint")
fps = {fp(json.load(open(f"{tmp}/{d}/summary.json"))) for d in ("num", "labA", "labB")}
check(len(fps) == 1 and None not in fps, f"one fingerprint at the three sites: {fps}")
links = {l["site"]: l for l in num.get("links", [])}
check(sorted(links) == ["labA", "labB"], f"two links in summary.json: {sorted(links)}")
la, lb = links["labA"]["L_needed"], links["labB"]["L_needed"]
check(lb > la and num["L"] == max(la, lb),
      f"one L for both, the largest: L {num['L']}, lab A needs {la}, lab B (5 ms each way) {lb}")
for name, l in links.items():
    check(l["ticks_received"] > 0.99 * num["steps_planned"] and l["max_consecutive_concealed"] < 50,
          f"{name}: {l['ticks_received']} ticks received of {num['steps_planned']}, at most "
          f"{l['max_consecutive_concealed']} concealed in a row")
    phys = json.load(open(f"{tmp}/{name}/summary.json"))
    check(not phys.get("hold", {}).get("active"), f"{name}: no HOLD")
rows = list(csv.DictReader(open(f"{tmp}/num/numerical.csv")))
check(len(rows) == num["steps_planned"], f"numerical.csv: {len(rows)} rows of {num['steps_planned']}")
ref = list(csv.DictReader(open(f"{tmp}/ref/numerical.csv")))
for what, rs in (("hybrid", rows), ("reference", ref)):
    d1 = max(abs(float(r["damper1_disp_m"]) - float(r["x1_m"])) for r in rs)
    d2 = max(abs(float(r["damper2_disp_m"]) - (float(r["x2_m"]) - float(r["x1_m"]))) for r in rs)
    check(d1 < 1e-9 and d2 < 1e-9, f"{what}: damper 1 spans floor 1 ({d1:.3g} m), damper 2 "
          f"floors 1-2 ({d2:.3g} m)")
    f2 = max(abs(float(r["damper2_force_N"])) for r in rs)
    check(f2 > 1e3, f"{what}: damper 2 pushes ({f2:.0f} N peak)")
# The loop's step timing (summary.json step_timing): every step timed, its cost and lateness.
st = num.get("step_timing", {})
steps = st.get("steps", 0)
check(steps >= num["steps_planned"] - 2,
      f"step_timing: {steps} steps timed of {num['steps_planned']}")
c, late = st.get("compute_us", {}), st.get("lateness_us", {})
check(0 < c.get("p50", 0) <= c.get("p99", 0) <= c.get("max", 0),
      f"step_timing: compute p50 {c.get('p50')} <= p99 {c.get('p99')} <= max {c.get('max')} us")
check(0 <= late.get("p50", -1) <= late.get("max", -1) and "later_than_half_dt" in late,
      f"step_timing: lateness p50 {late.get('p50')} <= max {late.get('max')} us")
rep = json.load(open(f"{tmp}/num/report.json"))
for f in rep["fidelity"]["floors"]:
    e, p = f["disp_rms_err_pct"], f["disp_peak_err_pct"]
    check(e is not None and e <= 0.5 and p is not None and p <= 0.5,
          f"floor {f['floor']}: displacement RMS error {e:.4f} %, peak {p:.4f} % <= 0.5 %")
sys.exit(status())
PY
echo "PASS"
