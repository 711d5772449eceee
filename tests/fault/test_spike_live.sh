#!/usr/bin/env bash
# Fault: one authenticated, well-formed COMMAND sample 30 mm off the trajectory (a numerical
# site with a bug), injected live by drths-attack --spike-at with the session keys
# (DRTHS_KEYLOG_FILE). Expected (docs/faults.md, issue 28): the sample is refused when it
# arrives, before any preview or drive uses it: HOLD (reason LIMIT, "refused on arrival"),
# exit 1, records complete; no drive outside the envelope (drths-report's drive criteria pass);
# the drive never moved more than the commands did; the measured displacement stays within the
# real commands plus 2 mm.
source "$(dirname "$0")/../lib.sh"
make_experiment 5
export DRTHS_KEYLOG_FILE="$tmp/keylog"
pport=$(free_port)
rport=$(free_port)
start_physical phys "$pport"
ppid=$last_pid
start_attack_relay relay "$rport" "$pport" --keylog "$DRTHS_KEYLOG_FILE" --spike-at 12000 \
    --spike-m 0.03
rpid=$last_pid
start_numerical num "$rport"
npid=$last_pid
wait_status "$ppid"; prc=$rc
wait_status "$npid"; nrc=$rc
kill -TERM "$rpid" 2>/dev/null || true
wait "$rpid" || true
grep -q "^spike: COMMAND 12000" "$tmp/relay.err" || fail "the spike was not injected"
echo "drths-physical exit $prc: $(summary "$tmp/phys" exit_reason)"
echo "drths-numerical exit $nrc"
[ "$prc" = 1 ] || fail "drths-physical exit $prc, expected 1"
[ "$(summary "$tmp/phys" hold.reason_code)" = LIMIT ] ||
    fail "HOLD reason $(summary "$tmp/phys" hold.reason_code), expected LIMIT"
summary "$tmp/phys" hold.reason | grep -q "refused on arrival" ||
    fail "HOLD not a refusal on arrival: $(summary "$tmp/phys" hold.reason)"
[ "$(summary "$tmp/phys" envelope.refused)" = 0 ] ||
    fail "the envelope refused $(summary "$tmp/phys" envelope.refused) drives: the spike reached the drive"
check_records "$tmp/phys" physical
python3 - "$tmp/phys/physical.csv" <<'PY' || fail "the spike moved the specimen"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cmd = [abs(float(r["command_m"])) for r in rows if r["hold"] == "0"]
meas = [abs(float(r["meas_disp_m"])) for r in rows if r["meas_disp_m"] not in ("", "nan")]
drive = [float(r["drive_m"]) for r in rows]
step = max(abs(b - a) for a, b in zip(drive, drive[1:]))
cstep = max(abs(float(b["command_m"]) - float(a["command_m"])) for a, b in zip(rows, rows[1:])
            if a["hold"] == "0" and b["hold"] == "0")
print(f"  real commands within {max(cmd) * 1e3:.3f} mm, measured within {max(meas) * 1e3:.3f} mm;"
      f" largest drive step {step * 1e3:.4f} mm, command step {cstep * 1e3:.4f} mm")
sys.exit(0 if max(meas) <= max(cmd) + 0.002 and step <= 2 * cstep + 1e-6 else 1)
PY
echo PASS
