#!/usr/bin/env bash
# A file with a sites section run live: examples/two-labs.yaml cut to lab B alone (its damper at
# floor 2, its own address), 2 s of record. The actuator site takes its entry with --site labB
# (its channel, listen address), the numerical site the one link (the site's address): the
# handshake passes, so both computed the same fingerprint from their views of the file; both
# exit 0 with complete records; the reference run of the same file puts the damper at floor 2
# too, and the hybrid run's displacement RMS error against it is <= 0.5 % on every floor.
# Without --site the actuator site refuses the file, naming its sites.
source "$(dirname "$0")/../lib.sh"

port=$(free_port)
ln -sfn "$src/examples/records" "$tmp/records"
python3 - "$src/examples/two-labs.yaml" "$tmp/exp.yaml" "$port" "$tmp/runs" \
    "${DRTHS_TEST_MAX_TICK_LATE_MS:-200}" <<'PY' || fail "could not edit the experiment"
import re, sys
src, dst, port, runs, stall = sys.argv[1:]
t = open(src).read()
# Lab B alone, at a free port; the timing headroom of tests/lib.sh make_experiment.
t = t[:t.index("  - name: labA")] + t[t.index("  - name: labB"):]
t = t.replace('"127.0.0.1:47002"', f'"127.0.0.1:{port}"')
for key, value in (("duration_s", "2"), ("tail_s", "0"), ("safety_margin_ticks", "100"),
                   ("reorder_ticks", "50"), ("max_tick_late_ms", stall), ("directory", runs)):
    t, n = re.subn(rf"^(  {key}:) [^\n]*", rf"\1 {value}", t, count=1, flags=re.M)
    assert n == 1, key
open(dst, "w").write(t)
PY
grep -q "^  - name: labB" "$tmp/exp.yaml" && ! grep -q "name: labA" "$tmp/exp.yaml" ||
    fail "the experiment is not lab B alone"

# Without --site: refused with the names of the sites.
rc=0
timeout 20 "$bdir/drths-physical" --experiment "$tmp/exp.yaml" >"$tmp/nosite.out" \
    2>"$tmp/nosite.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "lists 1 sites (labB): say which is this one with --site NAME" \
    "$tmp/nosite.err" || fail "without --site: exit $rc, $(cat "$tmp/nosite.err")"

timeout 90 "$bdir/drths-physical" --experiment "$tmp/exp.yaml" --site labB --wait-timeout 20 \
    --out "$tmp/phys" --quiet >"$tmp/phys.out" 2>"$tmp/phys.err" &
ppid=$!
pids+=("$ppid")
timeout 90 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --connect-timeout 10 \
    --out "$tmp/num" --quiet >"$tmp/num.out" 2>"$tmp/num.err" &
npid=$!
pids+=("$npid")
wait_status "$npid"
nrc=$rc
wait_status "$ppid"
prc=$rc
pids=()
echo "drths-numerical exit $nrc, drths-physical exit $prc"
[ "$nrc" -eq 0 ] || fail "drths-numerical exit $nrc"
[ "$prc" -eq 0 ] || fail "drths-physical exit $prc"

timeout 60 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --reference --out "$tmp/ref" \
    --quiet >"$tmp/ref.out" 2>"$tmp/ref.err" || fail "reference run failed"
report "$tmp/report.out" "$tmp/num" --reference "$tmp/ref" --physical "$tmp/phys" --no-plots

python3 - "$tmp" <<'PY' || fail "record or fidelity check failed"
import csv, json, sys
from checks import check, status
tmp = sys.argv[1]
num = json.load(open(f"{tmp}/num/summary.json"))
phys = json.load(open(f"{tmp}/phys/summary.json"))
rep = json.load(open(f"{tmp}/num/report.json"))
def fp(d):
    return d.get("fingerprint") or d.get("experiment", {}).get("fingerprint")
check(fp(num) is not None and fp(num) == fp(phys), f"one fingerprint: {fp(num)} and {fp(phys)}")
rows = list(csv.DictReader(open(f"{tmp}/num/numerical.csv")))
steps = num["steps_planned"]
check(len(rows) == steps, f"numerical.csv: {len(rows)} rows of {steps}")
# The damper is lab B's, at floor 2: its stroke is x2 - x1 (to the CSV's 10 digits), not x1 as
# at floor 1.
ref = list(csv.DictReader(open(f"{tmp}/ref/numerical.csv")))
for what, rs in (("hybrid", rows), ("reference", ref)):
    at2 = max(abs(float(r["damper_disp_m"]) - (float(r["x2_m"]) - float(r["x1_m"]))) for r in rs)
    at1 = max(abs(float(r["damper_disp_m"]) - float(r["x1_m"])) for r in rs)
    check(at2 < 1e-9 and at1 > 1e-4,
          f"{what}: the damper's stroke is x2 - x1 within {at2:.3g} m (x1 is {at1:.3g} m off)")
for f in rep["fidelity"]["floors"]:
    e = f["disp_rms_err_pct"]
    check(e is not None and e <= 0.5, f"floor {f['floor']}: displacement RMS error {e:.4f} % <= 0.5 %")
sys.exit(status())
PY
echo "PASS"
