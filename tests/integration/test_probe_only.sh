#!/usr/bin/env bash
# The connectivity test of the days before (drths-numerical --probe-only against
# drths-physical --probe-only), through the real programs on 127.0.0.1:
#   1. both sites exit 0; the numerical site prints the round trip, the loss, the repair reach,
#      a GO verdict and the L the sites would choose; summary.json has the loss figures;
#   2. through the impairment relay with bursty loss, the bursts are counted (summary.json) and
#      the report names the longest;
#   3. a numerical site that wants to run is refused by a --probe-only actuator site (ABORT
#      naming --probe-only), and both exit 1: a probe-only site never moves anything;
#   4. both ends agree on the outcome when the last messages are lost (PROTOCOL.md 7.5): the
#      bursty relay of case 2 also cuts the link in both directions before the probes end, so
#      every copy of the numerical site's end-of-test STOP is lost: the numerical site gives its
#      verdict and exits 0, and the actuator site, which answered probes and then heard nothing,
#      ends the session as finished, exit 0 (it waited for another numerical site and exited 1);
#   5. a test that fails at the numerical site (no echo comes back) ends with ABORT: both exit 1
#      (the actuator site does not take the silence after its probes for a finished test).
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
grep -q "^drths-numerical: connectivity test (--probe-only) of '" "$tmp/num1.out" ||
    fail "the first line does not say this is the connectivity test: $(head -n 1 "$tmp/num1.out")"
! grep -q 'hybrid run of' "$tmp/num1.out" || fail "--probe-only calls itself a hybrid run"
grep -q 'probe-only session finished' "$tmp/phys1.out" || fail "the actuator site did not say the session finished"
[ "$(summary "$tmp/num1" probes.loss_bursts)" = 0 ] || fail "summary.json: loss_bursts"

# Bursty loss (Gilbert-Elliott, mean bursts of 5) on the way to the actuator site: the bursts are
# seen and counted, and both ends finish the test (exit 0), whether the end-of-test STOP comes
# through or not.
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
wait_status "$p2"
[ "$rc" -eq 0 ] || fail "physical --probe-only through the relay: exit $rc, the numerical end exited 0"

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

# 4. The same bursty relay cuts both directions 1.5 s after it starts, before the 2 s of probes
# end: the last probes, their echoes and every copy of the end-of-test STOP are lost.
port=$(free_port)
rport=$(free_port)
start_physical phys4 "$port" --probe-only
p4=$last_pid
start_impair relay4 "$rport" "$port" --forward "loss gemodel 2% 20%" --seed 7 \
    --change '1.5:both:loss 100%'
r4=$last_pid
start_numerical num4 "$rport" --probe-only --probe-seconds 2
wait_status "$last_pid"
nrc=$rc
wait_status "$p4"
prc=$rc
kill -TERM "$r4" 2>/dev/null || true
verdict=$(sed -n 's/^verdict: \([A-Z-]*\).*/\1/p' "$tmp/num4.out")
echo "link cut at the end: numerical exit $nrc (verdict $verdict), physical exit $prc: $(summary "$tmp/phys4" exit_reason)"
[ -n "$verdict" ] || fail "link cut at the end: the numerical site gave no verdict"
[ "$nrc" -eq 0 ] || fail "link cut at the end: numerical --probe-only exit $nrc"
[ "$prc" -eq 0 ] || fail "link cut at the end: the actuator site exit $prc, the numerical site's $nrc"
summary "$tmp/phys4" exit_reason | grep -q '^probe-only session finished: the numerical site fell silent for 10 s after [0-9]* probes were answered' ||
    fail "link cut at the end: the actuator site does not say the test finished in silence"

# 5. The echoes stop 1 s after the relay starts (the handshake is done by then), and 12 s of
# probes follow: fewer than 10 % come back, the numerical site fails the test and says so; the
# actuator site, which answered every probe, ends with it.
port=$(free_port)
rport=$(free_port)
start_physical phys5 "$port" --probe-only
p5=$last_pid
start_impair relay5 "$rport" "$port" --change '1.0:backward:loss 100%'
start_numerical num5 "$rport" --probe-only --probe-seconds 12
wait_status "$last_pid"
nrc=$rc
wait_status "$p5"
prc=$rc
echo "no echo: numerical exit $nrc, physical exit $prc: $(summary "$tmp/phys5" exit_reason)"
[ "$nrc" -eq 1 ] && [ "$prc" -eq 1 ] || fail "no echo: numerical exit $nrc, physical exit $prc, expected 1 and 1"
summary "$tmp/phys5" exit_reason | grep -q '^numerical site aborted: PEER_LOST: only [0-9]* of 24000 probes were answered' ||
    fail "no echo: the actuator site does not give the numerical site's reason"
echo "PASS: probe-only test, bursts counted, a run refused, both ends agree when the end is lost"
