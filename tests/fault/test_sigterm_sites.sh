#!/usr/bin/env bash
# SIGTERM during a run ends BOTH sites with complete records and summaries (SIGINT and SIGTERM
# stop a site gracefully, through HOLD at the actuator site, keeping the records): both
# sites on loopback run the default experiment with the realistic actuator (three-pole plant,
# one-tick I/O delay, feedforward); 1.5 s into the run one site gets SIGTERM. Twice: the
# signal to the actuator site, then to the numerical site. Each time both exit non-zero and name
# the signal; physical.csv has every tick from 0 to its summary's last tick, with the HOLD column
# set from the HOLD tick on and the drive never stepping by more than the rate limit in HOLD;
# numerical.csv has every step its summary counts; both summaries exist and name the reason.
# A run that held on the concealment limit before the signal (a stalled thread) is run once more.
source "$(dirname "$0")/../lib.sh"

# The realistic actuator (three-pole plant, one-tick I/O delay, feedforward) and a 10 s record,
# so a run does not finish before the signal (rows are drained every 50 ms).
make_experiment 10 "s/^  plant: .*/  plant: three-pole/" \
    "s/^  compensation: .*/  compensation: feedforward/" 's/^  io_delay_ticks: .*/  io_delay_ticks: 1/'
grep -q '^  compensation: feedforward$' "$tmp/exp.yaml" && grep -q '^  plant: three-pole' "$tmp/exp.yaml" &&
    grep -q '^  io_delay_ticks: 1$' "$tmp/exp.yaml" || fail "could not edit the experiment"

one_case() { # target: physical | numerical, [retry]
    local target=$1 d="$tmp/$1" p
    mkdir -p "$d"
    p=$(free_port)
    start_physical "$target/phys" "$p"
    local ppid=$last_pid
    start_numerical "$target/num" "$p"
    local npid=$last_pid
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
    wait_status "$npid"
    local nrc=$rc
    wait_status "$ppid"
    local prc=$rc
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
