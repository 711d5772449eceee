#!/usr/bin/env bash
# Fault: the actuator site stopped mid-run (SIGSTOP, then SIGCONT), a stand-in for any stall of
# the process or the machine, for 0.5 s and for 3 s (docs/faults.md). The first tick woken after
# the stall is later than physical.max_tick_late_ms (200 ms in the tests' copy of the
# experiment, tests/lib.sh): HOLD with a sentence saying so ("stall: ..."), reason WATCHDOG, exit 1, records complete. No commanded tick is played later
# than that bound, and the ticks missed during the stall, run back to back afterwards, write
# nothing in HOLD: the drive of such a row is the drive of the row before it (the ramp never runs
# faster than real time).
source "$(dirname "$0")/../lib.sh"
for stop in 0.5 3; do
    make_experiment 8
    pport=$(free_port)
    start_physical "phys-$stop" "$pport"
    ppid=$last_pid
    start_numerical "num-$stop" "$pport"
    npid=$last_pid
    wait_rows "$tmp/phys-$stop/physical.csv" 10000
    site=$(child_of "$ppid")
    kill -STOP "$site"
    sleep "$stop"
    kill -CONT "$site"
    wait_status "$ppid"; prc=$rc
    wait_status "$npid"; nrc=$rc
    echo "stopped $stop s: drths-physical exit $prc: $(summary "$tmp/phys-$stop" exit_reason)"
    echo "  drths-numerical exit $nrc"
    [ "$prc" = 1 ] || fail "drths-physical exit $prc after a $stop s stall, expected 1"
    [ "$(summary "$tmp/phys-$stop" hold.reason_code)" = WATCHDOG ] ||
        fail "HOLD reason $(summary "$tmp/phys-$stop" hold.reason_code), expected WATCHDOG"
    summary "$tmp/phys-$stop" hold.reason | grep -q "^stall: tick .*max_tick_late_ms 200)" ||
        fail "HOLD not named a stall: $(summary "$tmp/phys-$stop" hold.reason)"
    check_records "$tmp/phys-$stop" physical
    python3 - "$tmp/phys-$stop/physical.csv" <<'PY' || fail "ticks played after the stall ($stop s)"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
late_played = [r for r in rows if r["hold"] == "0" and float(r["cmd_tick"]) >= 0
               and float(r["wake_late_us"]) > 200000]
# In HOLD, a tick woken a period (200 us) or more late writes nothing: its drive is the last.
moved = [r for p, r in zip(rows, rows[1:]) if r["hold"] == "1" and p["hold"] == "1"
         and float(r["wake_late_us"]) >= 200 and float(r["drive_m"]) != float(p["drive_m"])]
latest = max(float(r["wake_late_us"]) for r in rows)
held = sum(r["hold"] == "1" for r in rows)
print(f"  latest wake-up {latest / 1000:.1f} ms; {len(late_played)} commanded ticks played "
      f"later than 200 ms; {held} ticks in HOLD, {len(moved)} of them late and moving the drive")
sys.exit(1 if late_played or moved or latest < 200000 else 0)
PY
done
echo PASS
