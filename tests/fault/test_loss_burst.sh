#!/usr/bin/env bash
# Fault: a burst of 100 % loss shorter than the watchdog (docs/faults.md): 15 consecutive
# datagrams lost in each direction (3 ms at 5000 Hz) from the 10000th COMMAND on, dropped by the
# drths-attack forwarder (counted in datagrams, so a descheduled relay cannot miss the window).
# The binding limit for a burst is not the 100 ms silence watchdog but max_concealed_ticks (20
# ticks, 4 ms): a burst of N COMMANDs leaves N - 3 ticks to conceal, the first COMMAND after it
# repairing up to 3 from redundancy (R = 4; 2 observed). Expected: 12 to 14 ticks concealed at
# the actuator site (13 observed), then resumed; the numerical site conceals the missing feedback (counted) and resumes; no HOLD;
# both exit 0 with complete records. (Longer: HOLD, test_blackout.sh.)
source "$(dirname "$0")/../lib.sh"
# R = 4 (consecutive offsets): the burst is longer than the redundancy reaches. With the
# default R = 8 the samples at offset 16 repair it and nothing is concealed (unit.hybrid).
make_experiment 4 's/^  redundancy: .*/  redundancy: 4/'
pport=$(free_port)
rport=$(free_port)
start_physical phys "$pport"
ppid=$last_pid
start_attack_relay relay "$rport" "$pport" --burst-at 10000 --burst 15
rpid=$last_pid
start_numerical num "$rport"
npid=$last_pid
wait_status "$npid"; nrc=$rc
wait_status "$ppid"; prc=$rc
kill -TERM "$rpid" 2>/dev/null || true
wait "$rpid" || true
echo "drths-numerical exit $nrc, drths-physical exit $prc"
[ "$prc" = 0 ] || fail "drths-physical exit $prc ($(summary "$tmp/phys" exit_reason))"
[ "$nrc" = 0 ] || fail "drths-numerical exit $nrc ($(summary "$tmp/num" exit_reason))"
python3 - "$tmp" <<'PY' || fail "burst checks"
import json, sys
t = sys.argv[1]
p = json.load(open(f"{t}/phys/summary.json"))
n = json.load(open(f"{t}/num/summary.json"))
r = json.load(open(f"{t}/relay.json"))
c = p["commands"]
print(f"relay: dropped {r['burst_dropped'][0]} COMMANDs, {r['burst_dropped'][1]} FEEDBACKs")
print(f"actuator site: concealed {c['concealed']} (longest run {c['max_consecutive_concealed']}), "
      f"from redundancy {c['from_redundancy']}, hold {p['hold']['active']}")
print(f"numerical site: concealed feedback {n.get('concealed_feedback')} "
      f"(max {n.get('max_consecutive_concealed')} in a row)")
ok = (r["burst_dropped"] == [15, 15] and not p["hold"]["active"] and 12 <= c["concealed"] <= 14
      and c["max_consecutive_concealed"] == c["concealed"] and n.get("concealed_feedback", 0) >= 1)
sys.exit(0 if ok else 1)
PY
check_records "$tmp/phys" physical
check_records "$tmp/num" numerical
echo PASS
