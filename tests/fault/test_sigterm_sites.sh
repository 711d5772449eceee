#!/usr/bin/env bash
# SIGTERM during a run ends BOTH sites with complete records and summaries (DESIGN.md 7): both
# sites on loopback run the default experiment with the realistic actuator (three-pole plant,
# one-tick I/O delay, feedforward); 1.5 s into the run one site gets SIGTERM. Twice: the
# signal to the actuator site, then to the numerical site. Each time both exit non-zero and name
# the signal; physical.csv has every tick from 0 to its summary's last tick, with the HOLD column
# set from the HOLD tick on and the drive never stepping by more than the rate limit in HOLD;
# numerical.csv has every step its summary counts; both summaries exist and name the reason.
# A run that held on the concealment limit before the signal (a stalled thread) is run once more.
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
    for f in "$tmp"/*/*.out "$tmp"/*/*.err; do [ -f "$f" ] && { echo "--- $f" >&2; sed 's/^/  | /' "$f" >&2; }; done
    exit 1
}

# Timing headroom for a shared machine, as in tests/integration/test_loopback.sh.
ln -s "$src/examples/records" "$tmp/records"
sed -e 's/^  duration_s: 0 .*/  duration_s: 10/' -e 's/^  tail_s: .*/  tail_s: 0/' \
    -e "s/^  plant: .*/  plant: three-pole/" -e "s/^  compensation: .*/  compensation: feedforward/" \
    -e 's/^  io_delay_ticks: .*/  io_delay_ticks: 1/' \
    -e 's/^  safety_margin_ticks: .*/  safety_margin_ticks: 100/' \
    -e 's/^  reorder_ticks: .*/  reorder_ticks: 50/' \
    -e "s|^  directory: .*|  directory: $tmp/runs|" \
    "$src/examples/three-story-elcentro.yaml" >"$tmp/exp.yaml"
grep -q '^  duration_s: 10$' "$tmp/exp.yaml" && grep -q '^  compensation: feedforward$' "$tmp/exp.yaml" &&
    grep -q '^  plant: three-pole' "$tmp/exp.yaml" || fail "could not edit the experiment"
# Rows are drained every 50 ms; a run must not finish before the signal.
port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

one_case() { # target: physical | numerical, [retry]
    local target=$1 d="$tmp/$1" p
    mkdir -p "$d"
    p=$(port)
    timeout 60 "$bdir/drths-physical" --experiment "$tmp/exp.yaml" --listen "127.0.0.1:$p" \
        --wait-timeout 20 --out "$d/phys" --quiet >"$d/phys.out" 2>"$d/phys.err" &
    local ppid=$!
    timeout 60 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --peer "127.0.0.1:$p" \
        --connect-timeout 5 --out "$d/num" --quiet >"$d/num.out" 2>"$d/num.err" &
    local npid=$!
    pids=("$ppid" "$npid")
    # Wait until the run is under way (the actuator site prints "run started"), then 1.5 s.
    for _ in $(seq 200); do grep -q "run started" "$d/phys.out" 2>/dev/null && break; sleep 0.1; done
    grep -q "run started" "$d/phys.out" || fail "$target: the run did not start"
    sleep 1.5
    local victim=$npid
    [ "$target" = physical ] && victim=$ppid
    if ! kill -TERM "$victim" 2>/dev/null; then
        # The run ended before the signal. On this VM a thread stalled for tens of ms now and
        # then, and the concealment limit rightly held the actuator: that says nothing of the
        # SIGTERM path, so the case runs once more (any other early end fails).
        wait "$npid" "$ppid" 2>/dev/null || true
        pids=()
        if [ "${2:-}" != retry ] && grep -q "too many concealed commands" "$d/phys.out"; then
            echo "$target: the run held on concealment before the signal (a stall); once more"
            rm -rf "$d"
            one_case "$target" retry
            return
        fi
        fail "$target: the site had ended before the signal"
    fi
    set +e
    wait "$npid"; local nrc=$?
    wait "$ppid"; local prc=$?
    set -e
    pids=()
    echo "SIGTERM to the $target site: drths-numerical exit $nrc, drths-physical exit $prc"
    [ "$nrc" -ne 0 ] || fail "$target: drths-numerical exit 0"
    [ "$prc" -ne 0 ] || fail "$target: drths-physical exit 0"
    [ "$nrc" -ne 124 ] && [ "$prc" -ne 124 ] || fail "$target: a site had to be killed by timeout"
    grep -qi "signal" "$d/num.out" "$d/num.err" || fail "$target: drths-numerical does not name the signal"
    grep -qi "signal" "$d/phys.out" "$d/phys.err" || fail "$target: drths-physical does not name the signal"
    python3 - "$d" "$target" <<'PY' || fail "$target: record check failed"
import csv, json, math, sys
d, target = sys.argv[1], sys.argv[2]
from checks import check, status
num = json.load(open(f"{d}/num/summary.json"))
phys = json.load(open(f"{d}/phys/summary.json"))
check("signal" in num["exit_reason"].lower(), f"numerical summary names the signal: {num['exit_reason']!r}")
check("signal" in phys["exit_reason"].lower(), f"physical summary names the signal: {phys['exit_reason']!r}")
rows = list(csv.DictReader(open(f"{d}/num/numerical.csv")))
steps = num["steps"]
check(steps > 5000 and len(rows) == steps and
      [int(float(r["step"])) for r in rows] == list(range(steps)),
      f"numerical.csv: every step 0..{steps - 1} ({len(rows)} rows)")
prow = list(csv.DictReader(open(f"{d}/phys/physical.csv")))
ticks = phys["ticks"]
check(ticks > 5000 and [int(float(r["tick"])) for r in prow] == list(range(ticks)),
      f"physical.csv: every tick 0..{ticks - 1} ({len(prow)} rows)")
check(phys["recorder"]["dropped_rows"] == 0 and phys["recorder"]["rows"] == ticks, "no row dropped")
hold = phys["hold"]
check(hold["active"] and hold["reason_code"] == "SIGNAL", f"HOLD {hold.get('reason_code')}: {hold.get('reason')}")
first = hold["first_tick"]
check(all(float(r["hold"]) == (1.0 if int(float(r["tick"])) >= first else 0.0) for r in prow),
      f"hold column 0 before tick {first}, 1 from it on")
# physical.csv holds 9 significant digits: each drive (< 0.1 m) is rounded by up to 5e-11 m.
lim = hold["max_drive_step_allowed_m"] * (1 + 1e-9) + 1e-10
steps_h = [abs(float(prow[i]["drive_m"]) - float(prow[i - 1]["drive_m"])) for i in range(first, len(prow))]
check(max(steps_h) <= lim, f"drive steps in HOLD at most {max(steps_h) * 1e6:.3f} um (limit {lim * 1e6:.3f} um)")
check(hold["max_drive_step_m"] <= hold["max_drive_step_allowed_m"] * (1 + 1e-12),
      f"largest HOLD drive step (exact, summary) {hold['max_drive_step_m'] * 1e6:.6f} um")
check(all(float(r["damper_command"]) == 0.0 for r in prow[first:]), "damper command 0 in HOLD")
check(hold["settled"], "drive reached its HOLD target")
sys.exit(status())
PY
}

one_case physical
one_case numerical
echo "both cases passed"
