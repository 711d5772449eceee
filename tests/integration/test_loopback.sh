#!/usr/bin/env bash
# Both sites on loopback (no relay) on the first 3 s of the default experiment, the reference run
# of the same file, then drths-report: both sites exit 0, the records are complete (a row per
# step at the numerical site, a row per tick 0 .. last command tick at the actuator site),
# nothing was concealed, and the displacement RMS error is <= 0.5 % on every floor.
source "$(dirname "$0")/../lib.sh"

# The default experiment with a 3 s record and the timing headroom of tests/lib.sh
# (make_experiment: a 20 ms safety margin and a 10 ms reorder wait).
make_experiment 3
port=$(free_port)
# No wait for the actuator site to bind: the numerical site repeats HELLO every 200 ms for up
# to --connect-timeout.
start_physical phys "$port"
ppid=$last_pid
start_numerical num "$port"
npid=$last_pid
wait_status "$npid"
nrc=$rc
wait_status "$ppid"
prc=$rc
pids=()
cat "$tmp/num.out"
echo "drths-numerical exit $nrc, drths-physical exit $prc"
[ "$nrc" -eq 0 ] || fail "drths-numerical exit $nrc"
[ "$prc" -eq 0 ] || fail "drths-physical exit $prc"

timeout 60 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --reference --out "$tmp/ref" \
    --quiet >"$tmp/ref.out" 2>"$tmp/ref.err" || fail "reference run failed"
report "$tmp/report.out" "$tmp/num" --reference "$tmp/ref" --physical "$tmp/phys" --no-plots
sed -n '/Fidelity/,/damper force/p' "$tmp/report.out"

python3 - "$tmp" <<'PY' || fail "record or fidelity check failed"
import csv, json, math, sys
tmp = sys.argv[1]
num = json.load(open(f"{tmp}/num/summary.json"))
phys = json.load(open(f"{tmp}/phys/summary.json"))
rep = json.load(open(f"{tmp}/num/report.json"))
from checks import check, status
L = num["L"]
rows = list(csv.DictReader(open(f"{tmp}/num/numerical.csv")))
steps = num["steps_planned"]
check(len(rows) == steps and [int(float(r["step"])) for r in rows] == list(range(steps)),
      f"numerical.csv: steps 0..{steps - 1} ({len(rows)} rows)")
prow = list(csv.DictReader(open(f"{tmp}/phys/physical.csv")))
last = steps - 1 + L
check([int(float(r["tick"])) for r in prow] == list(range(last + 1)),
      f"physical.csv: every tick 0..{last} ({len(prow)} rows)")
check(phys["tick_lateness_us"]["spin_us"] == 0,
      f"--tick-spin auto sleeps to the deadline below 10 kHz (spin {phys['tick_lateness_us']['spin_us']} us)")
check(num["concealed_feedback"] == 0, f"feedback concealed {num['concealed_feedback']}")
check(sum(int(float(r["fb_concealed"])) for r in rows) == 0, "no row flagged fb_concealed")
check(sum(int(float(r["concealed"])) for r in prow) == 0, "no command concealed at the actuator site")
# The adaptive compensator's bounds come from the plant range (issue 30) and summary.json says
# how long each factor sat at one: ticks of the observed ticks, and the fraction.
ad = phys["tracking"].get("adaptive")
check(ad is not None and ad["bounds_from"] == "adaptive_range",
      f"summary.json tracking.adaptive with bounds from adaptive_range ({ad and ad.get('bounds_from')})")
if ad is not None:
    check(ad["observed_ticks"] > 0, f"adaptive observed ticks {ad['observed_ticks']}")
    check(ad["theta3"]["max"] > 100 and ad["theta0"]["max"] < 2,
          f"theta3 max {ad['theta3']['max']:.4g} > 100, theta0 max {ad['theta0']['max']:.4g} < 2 "
          f"(the default range's corners)")
    worst = 0.0
    for k in range(4):
        t = ad[f"theta{k}"]
        check(0 <= t["at_bound_ticks"] <= ad["observed_ticks"]
              and abs(t["at_bound_fraction"] - t["at_bound_ticks"] / ad["observed_ticks"]) < 1e-9
              and t["min"] <= t["final"] <= t["max"],
              f"theta{k}: {t['at_bound_ticks']} of {ad['observed_ticks']} ticks at a bound "
              f"({t['at_bound_fraction']:.4f}), final {t['final']:.4g} in [{t['min']:.4g}, {t['max']:.4g}]")
        worst = max(worst, t["at_bound_fraction"])
    check(ad["max_at_bound_fraction"] == worst and worst < 0.5,
          f"max at-bound fraction {ad['max_at_bound_fraction']:.4f} < 0.5 (the examples' plant is in the range)")
for f in rep["fidelity"]["floors"]:
    e = f["disp_rms_err_pct"]
    check(e is not None and e <= 0.5, f"floor {f['floor']}: displacement RMS error {e:.4f} % <= 0.5 %")
sys.exit(status())
PY
echo "PASS"
