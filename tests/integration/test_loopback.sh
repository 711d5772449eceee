#!/usr/bin/env bash
# Both sites on loopback (no relay) on the first 3 s of the default experiment, the reference run
# of the same file, then drths-report: both sites exit 0, the records are complete (a row per
# step at the numerical site, a row per tick 0 .. last command tick at the actuator site),
# nothing was concealed, and the displacement RMS error is <= 0.5 % on every floor.
set -euo pipefail
bdir=$1
src=${DRTHS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
export PYTHONPATH="$src/tests${PYTHONPATH:+:$PYTHONPATH}" # tests/checks.py
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
fail() {
    echo "FAIL: $*" >&2
    for f in "$tmp"/*.out "$tmp"/*.err; do [ -f "$f" ] && { echo "--- $f" >&2; sed 's/^/  | /' "$f" >&2; }; done
    exit 1
}

# The experiment: the default file with a 3 s record, no free-vibration tail and its output in
# the temporary folder; the record path is relative, so the records folder sits beside it.
# Timing headroom for a shared test machine: on a loaded 2-CPU virtual machine the actuator
# site's SCHED_FIFO thread was seen stalled for up to 9 ms, which with the default 2 ms reorder
# wait and L = 3 ms on loopback is (correctly) concealment or HOLD, not what this test is about.
# A 20 ms safety margin and a 10 ms reorder wait absorb such stalls.
ln -s "$src/examples/records" "$tmp/records"
sed -e 's/^  duration_s: 0 .*/  duration_s: 3/' -e 's/^  tail_s: .*/  tail_s: 0/' \
    -e 's/^  safety_margin_ticks: .*/  safety_margin_ticks: 100/' \
    -e 's/^  reorder_ticks: .*/  reorder_ticks: 50/' \
    -e "s|^  directory: .*|  directory: $tmp/runs|" \
    "$src/examples/three-story-elcentro.yaml" >"$tmp/exp.yaml"
grep -q '^  duration_s: 3$' "$tmp/exp.yaml" && grep -q '^  reorder_ticks: 50$' "$tmp/exp.yaml" &&
    grep -q '^  safety_margin_ticks: 100$' "$tmp/exp.yaml" || fail "could not edit the experiment"

port=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

timeout 60 "$bdir/drths-physical" --experiment "$tmp/exp.yaml" --listen "127.0.0.1:$port" \
    --wait-timeout 20 --out "$tmp/phys" --quiet >"$tmp/phys.out" 2>"$tmp/phys.err" &
ppid=$!
pids+=("$ppid")
# No wait for the actuator site to bind: the numerical site repeats HELLO every 200 ms for up
# to --connect-timeout.
set +e
timeout 60 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --peer "127.0.0.1:$port" \
    --connect-timeout 5 --out "$tmp/num" --quiet >"$tmp/num.out" 2>"$tmp/num.err"
nrc=$?
wait "$ppid"
prc=$?
set -e
pids=()
cat "$tmp/num.out"
echo "drths-numerical exit $nrc, drths-physical exit $prc"
[ "$nrc" -eq 0 ] || fail "drths-numerical exit $nrc"
[ "$prc" -eq 0 ] || fail "drths-physical exit $prc"

timeout 60 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --reference --out "$tmp/ref" \
    --quiet >"$tmp/ref.out" 2>"$tmp/ref.err" || fail "reference run failed"
timeout 60 "$bdir/drths-report" "$tmp/num" --reference "$tmp/ref" --physical "$tmp/phys" \
    --no-plots >"$tmp/report.out" 2>"$tmp/report.err" || fail "drths-report failed"
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
for f in rep["fidelity"]["floors"]:
    e = f["disp_rms_err_pct"]
    check(e is not None and e <= 0.5, f"floor {f['floor']}: displacement RMS error {e:.4f} % <= 0.5 %")
sys.exit(status())
PY
echo "PASS"
