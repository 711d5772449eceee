#!/usr/bin/env bash
# The connectivity test of the days before (drths-numerical --probe-only against
# drths-physical --probe-only), through the real programs on 127.0.0.1:
#   1. both sites exit 0; the numerical site prints the round trip, the loss, the repair reach,
#      a GO verdict and the L the sites would choose; summary.json has the loss figures;
#   2. through the impairment relay with bursty loss, the bursts are counted (summary.json) and
#      the report names the longest;
#   3. a numerical site that wants to run is refused by a --probe-only actuator site (ABORT
#      naming --probe-only), and both exit 1: a probe-only site never moves anything.
source "$(dirname "$0")/../lib.sh"
make_experiment 2

port=$(free_port)
start_physical phys1 "$port" --probe-only
p1=$last_pid
start_numerical num1 "$port" --probe-only --probe-seconds 1
n1=$last_pid
wait_status "$n1"
[ "$rc" -eq 0 ] || fail "numerical --probe-only: exit $rc"
wait_status "$p1"
[ "$rc" -eq 0 ] || fail "physical --probe-only: exit $rc after the test session ended"
sed 's/^/  | /' "$tmp/num1.out" | grep -A8 '^  | probes:'
grep -q '^probes: 2000 sent, 2000 answered' "$tmp/num1.out" || fail "not 2000 probes answered"
grep -q '^  loss: 0 probes' "$tmp/num1.out" || fail "no loss line"
grep -q '^verdict: GO' "$tmp/num1.out" || fail "no GO verdict on loopback"
grep -q 'probe-only session finished' "$tmp/phys1.out" || fail "the actuator site did not say the session finished"
[ "$(summary "$tmp/num1" probes.loss_bursts)" = 0 ] || fail "summary.json: loss_bursts"

# Bursty loss (Gilbert-Elliott, mean bursts of 5) on the way to the actuator site: the bursts are
# seen and counted. (Its STOPs may be lost too: that site is left to the clean-up.)
port=$(free_port)
rport=$(free_port)
start_physical phys2 "$port" --probe-only
p2=$last_pid
start_impair relay "$rport" "$port" --forward "loss gemodel 2% 20%" --seed 7
start_numerical num2 "$rport" --probe-only --probe-seconds 1
wait_status "$last_pid"
[ "$rc" -eq 0 ] || fail "numerical --probe-only through the relay: exit $rc"
bursts=$(summary "$tmp/num2" probes.loss_bursts)
longest=$(summary "$tmp/num2" probes.loss_longest)
echo "through the relay: $bursts loss bursts, the longest $longest probes"
[ "$bursts" -gt 0 ] && [ "$longest" -gt 1 ] || fail "the relay's loss bursts were not counted"
grep -q "the longest $longest probes" "$tmp/num2.out" || fail "the longest burst is not printed"

# A numerical site that wants to run: refused.
port=$(free_port)
start_physical phys3 "$port" --probe-only
p3=$last_pid
start_numerical num3 "$port"
wait_status "$last_pid"
[ "$rc" -eq 1 ] || fail "a run against a --probe-only actuator site: exit $rc, expected 1"
grep -q 'runs --probe-only' "$tmp/num3.err" || fail "the numerical site does not say why"
wait_status "$p3"
[ "$rc" -eq 1 ] || fail "the --probe-only actuator site asked to run: exit $rc, expected 1"
[ "$(record_rows "$tmp/phys3/physical.csv")" -eq 0 ] || fail "the --probe-only site recorded ticks"
echo "PASS: probe-only test, bursts counted, a run refused"
