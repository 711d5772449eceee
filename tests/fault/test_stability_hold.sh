#!/usr/bin/env bash
# Fault: a loop that goes unstable (docs/design.md, "Safety", the stability detector). The
# default experiment with the Smith predictor off and the loop delay fixed at 92 ms
# (link.loop_delay_ticks: 460, as over the rehearsal's 80 ms round trip): the damper's force
# acts late enough to feed the first mode. The numerical site's detector must see the interface
# supplying energy within the first second, end with ABORT {HOLD, "stability: ..."} (exit 1,
# summary.json stability.tripped), and the actuator site must hold on it (exit 1, reason HOLD,
# the sentence in its exit reason); both records complete.
source "$(dirname "$0")/../lib.sh"
make_experiment 4 's/^  smith: .*/  smith: off/' 's/^  loop_delay_ticks: .*/  loop_delay_ticks: 460/'
grep -q '^  smith: off' "$tmp/exp.yaml" || fail "could not edit the experiment"
grep -q '^  loop_delay_ticks: 460' "$tmp/exp.yaml" || fail "could not edit the experiment"
pport=$(free_port)
start_physical phys "$pport"
ppid=$last_pid
start_numerical num "$pport"
npid=$last_pid
wait_status "$npid"; nrc=$rc
wait_status "$ppid"; prc=$rc
echo "drths-numerical exit $nrc: $(summary "$tmp/num" exit_reason)"
echo "drths-physical exit $prc: $(summary "$tmp/phys" exit_reason)"
[ "$nrc" = 1 ] || fail "drths-numerical exit $nrc, expected 1"
[ "$prc" = 1 ] || fail "drths-physical exit $prc, expected 1"
[ "$(summary "$tmp/num" stability.tripped)" = True ] || fail "the detector did not trip"
t=$(summary "$tmp/num" stability.trip.time_s)
r=$(summary "$tmp/num" stability.trip.ratio)
echo "tripped at $t s of simulated time, ratio $r (limit $(summary "$tmp/num" stability.limit_ratio))"
python3 -c "import sys; t, r = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if t < 1.5 and r >= 0.5 else 1)" "$t" "$r" ||
    fail "tripped at $t s with ratio $r: expected before 1.5 s with a ratio of at least 0.5"
[ "$(summary "$tmp/phys" hold.reason_code)" = HOLD ] ||
    fail "HOLD reason $(summary "$tmp/phys" hold.reason_code), expected HOLD"
summary "$tmp/phys" exit_reason | grep -q "stability: the interface supplied" ||
    fail "the actuator site's exit reason does not carry the detector's sentence"
check_records "$tmp/phys" physical
check_records "$tmp/num" numerical
echo PASS
