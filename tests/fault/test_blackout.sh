#!/usr/bin/env bash
# Fault: a 2 s network blackout mid-run (docs/faults.md). drths-impair drops everything in both
# directions from 2.5 s to 4.5 s after it starts (the run starts at about 0.4 s and lasts 6 s).
# Expected, with the default limits of the experiment file: the actuator site runs out of
# commands L ticks after the blackout begins, conceals the budget, max_concealed_ms = 50 ms
# (250 ticks, braking to rest meanwhile) and goes to HOLD ("too many concealed commands": the
# budget trips before the watchdog's 100 ms without a command to play), sends ABORT (lost in the blackout), lingers 0.2 s recording
# and exits 1; the numerical site hears nothing for its peer timeout (1 s) and aborts with
# PEER_LOST, exit 1, saying that the actuator site may have stopped (its ABORT may have been
# lost). Both records complete.
# Then a 200 ms blackout: the actuator site holds and sends its ABORTs inside it (all lost), but
# its FEEDBACKs flagged HOLD come through after it; the numerical site's PEER_LOST says the
# actuator site was in HOLD and its ABORT did not arrive (issue 29, item 5).
source "$(dirname "$0")/../lib.sh"
make_experiment 6
pport=$(free_port)
rport=$(free_port)
start_physical phys "$pport"
ppid=$last_pid
start_impair relay "$rport" "$pport" --change '2.5:both:loss 100%' --change '4.5:both:'
rpid=$last_pid
start_numerical num "$rport"
npid=$last_pid
wait_status "$npid"; nrc=$rc
wait_status "$ppid"; prc=$rc
kill -TERM "$rpid" 2>/dev/null || true
echo "drths-numerical exit $nrc ($(summary "$tmp/num" exit_reason))"
echo "drths-physical exit $prc ($(summary "$tmp/phys" exit_reason)), hold $(summary "$tmp/phys" hold.reason_code) at tick $(python3 -c "
import csv; print(next(r['tick'] for r in csv.DictReader(open('$tmp/phys/physical.csv')) if r['hold'] == '1'))")"
[ "$prc" = 1 ] || fail "drths-physical exit $prc, expected 1"
[ "$nrc" = 1 ] || fail "drths-numerical exit $nrc, expected 1"
[ "$(summary "$tmp/phys" hold.active)" = True ] || fail "no HOLD at the actuator site"
[ "$(summary "$tmp/phys" hold.reason_code)" = HOLD ] || fail "HOLD reason is not the concealment limit"
case "$(summary "$tmp/num" exit_reason)" in
"peer lost: no valid datagram from the actuator site for 1 s after its FEEDBACK for tick "*"; the actuator site may have stopped"*) ;;
*) fail "numerical site: not peer lost, or it does not say the actuator site may have stopped" ;;
esac
# The HOLD comes after the run started and within the blackout (relay time 2.5 s .. 4.5 s).
python3 - "$tmp" <<'PY' || fail "HOLD timing"
import csv, json, sys
t = sys.argv[1]
rows = list(csv.DictReader(open(f"{t}/phys/physical.csv")))
first = next(int(r["tick"]) for r in rows if r["hold"] == "1")
s = json.load(open(f"{t}/phys/summary.json"))
print(f"HOLD from tick {first} ({first / 5000:.3f} s of the run), {s['hold']['ticks']} ticks in HOLD, "
      f"concealed {s['commands']['concealed']}")
sys.exit(0 if 5000 < first < 25000 and s["commands"]["concealed"] == 250 else 1)
PY
check_records "$tmp/phys" physical
check_records "$tmp/num" numerical

# 200 ms: the ABORTs fall inside the blackout, the HOLD's FEEDBACKs (0.2 s of linger) after it.
pport=$(free_port)
rport=$(free_port)
start_physical phys2 "$pport"
ppid=$last_pid
start_impair relay2 "$rport" "$pport" --change '2.5:both:loss 100%' --change '2.7:both:'
rpid=$last_pid
start_numerical num2 "$rport"
npid=$last_pid
wait_status "$npid"; nrc=$rc
wait_status "$ppid"; prc=$rc
kill -TERM "$rpid" 2>/dev/null || true
reason=$(summary "$tmp/num2" exit_reason)
echo "200 ms: drths-numerical exit $nrc ($reason)"
echo "200 ms: drths-physical exit $prc ($(summary "$tmp/phys2" exit_reason)), HOLD from tick $(summary "$tmp/phys2" hold.first_tick)"
[ "$prc" = 1 ] && [ "$nrc" = 1 ] || fail "200 ms: exits $prc (physical) and $nrc (numerical), expected 1 and 1"
[ "$(summary "$tmp/phys2" hold.reason_code)" = HOLD ] || fail "200 ms: the actuator site did not hold on the concealment limit"
[ "$(summary "$tmp/num2" feedback.actuator_hold_ticks)" -gt 0 ] ||
    fail "200 ms: no FEEDBACK flagged HOLD reached the numerical site (the blackout hid the whole HOLD)"
from=$(summary "$tmp/num2" feedback.actuator_hold_seen_from_tick)
case "$reason" in
"peer lost: no valid datagram from the actuator site for 1 s; it was in HOLD by tick $from (its FEEDBACKs say so) and its ABORT, which names the cause, did not arrive"*) ;;
*) fail "200 ms: the numerical site's end does not say the actuator site was in HOLD: $reason" ;;
esac
check_records "$tmp/phys2" physical
check_records "$tmp/num2" numerical
echo PASS
