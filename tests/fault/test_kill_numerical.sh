#!/usr/bin/env bash
# Fault: kill -9 of the numerical site mid-run (docs/faults.md). Commands arrive L minus the
# round trip ahead of their tick, i.e. about the safety margin; this test makes that lead 120 ms
# (link.safety_margin_ticks: 600, physical.playout_ticks: 1000 to buffer it). The watchdog acts
# on the absence of commands to play: the buffered commands are played to the end (no HOLD
# while they last, though nothing arrives for 120 ms), then, the concealment budget raised to
# 1 s (physical.max_concealed_ms: 1000) so that only the watchdog can act, HOLD with reason
# WATCHDOG 100 ms after the buffer ran dry, ABORT sent (to no one), 0.2 s more of recording,
# exit 1; the actuator site's record and summary complete. (With the default budget, 50 ms, the
# concealment budget holds first: the same as test_blackout.sh.)
source "$(dirname "$0")/../lib.sh"
make_experiment 6 's/^  safety_margin_ticks: .*/  safety_margin_ticks: 600/' \
    's/^  playout_ticks: .*/  playout_ticks: 1000/' 's/^  max_concealed_ms: .*/  max_concealed_ms: 1000/'
grep -q '^  playout_ticks: 1000' "$tmp/exp.yaml" || fail "could not edit the experiment"
grep -q '^  max_concealed_ms: 1000' "$tmp/exp.yaml" || fail "could not edit the experiment"
pport=$(free_port)
start_physical phys "$pport"
ppid=$last_pid
start_numerical num "$pport"
npid=$last_pid
wait_rows "$tmp/phys/physical.csv" 5000
kill -9 "$(child_of "$npid")"
wait_status "$npid"; nrc=$rc
wait_status "$ppid"; prc=$rc
echo "drths-numerical killed (status $nrc); drths-physical exit $prc: $(summary "$tmp/phys" exit_reason)"
[ "$nrc" = 137 ] || fail "the numerical site was not killed by signal 9 (status $nrc)"
[ "$prc" = 1 ] || fail "drths-physical exit $prc, expected 1"
[ "$(summary "$tmp/phys" hold.reason_code)" = WATCHDOG ] ||
    fail "HOLD reason $(summary "$tmp/phys" hold.reason_code), expected WATCHDOG"
echo "L = $(summary "$tmp/phys" loop_delay_ms) ms, $(summary "$tmp/phys" hold.ticks) ticks in HOLD"
check_records "$tmp/phys" physical
echo PASS
