#!/usr/bin/env bash
# Fault: the relay (the network path) restarted mid-run (docs/faults.md): drths-impair is killed
# with kill -9 and started again on the same addresses (--source fixes the address the actuator
# site sees; without it the new relay's datagrams would be WRONG_SOURCE). The gap is a process
# start. From the limits of the default file: the commands sent during a gap of G ms leave about
# 5000 G - 3 ticks to conceal beyond the lead, and the concealment budget (max_concealed_ms: 50,
# 250 ticks, braking to rest) acts before the watchdog (100 ms without a command to play), so a
# restart that leaves the actuator without commands for more than about 50 ms is a HOLD by the
# budget, a faster one resumes (the gap can also fall on the feedback alone: the numerical site
# waits for feedback before sending on).
#
# Asserted (the intended behaviour):
#   - resumed: both exit 0, never more than 250 concealed ticks in a row, the restart visible as
#     concealment on one side or the other, the new relay forwarding the rest of the run;
#   - or HOLD by the concealment budget and nothing else (reason code HOLD after a run of 250),
#     the numerical site told (ABORT through the new relay, or PEER_LOST when the ABORTs left
#     before the new relay had heard from it), both exit 1;
#   - never a HOLD by LIMIT, and no jump when commands come back: in a resumed run the
#     actuator's command velocity from the start of each concealed run (either side's) to 20
#     ticks after it stays within 1.5 times the run's own peak command velocity elsewhere
#     (physical.csv command_vel_m_s).
# With the 20-tick limit (before max_concealed_ms), in 16 runs: resumed 12 times, HOLD by the
# concealment limit 4 times; once, earlier, HOLD by LIMIT ("command velocity -2.38976 m/s exceeds
# 1 m/s") after runs of at most 5 concealed ticks: a command far outside the motion came out of
# the concealment. With the braking concealment, the blended rejoin and the 50 ms budget, 5 runs
# on a heavily loaded shared machine: resumed twice, HOLD by the budget twice, and once HOLD by
# LIMIT ("command velocity 1.0103 m/s"): the commands came back together with a raise of L (105
# to 291 ticks), whose fillers hold the last position with velocity 0, a kink two ticks after
# the rejoin tick; the rejoin carried the received trajectory back by the cubic across that
# kink, read an acceleration of about 110 m/s^2 the commands did not have, and its acceleration
# term (long for a large acceleration, and faster the longer it is) accelerated the command to
# the velocity limit. Fixed in site-physical/actuator.c (start_rejoin: the cubic only within the
# jerk limit; the acceleration term within its velocity share) and reproduced in
# tests/unit/test_actuator.c (test_rejoin_into_fillers_after_raise_of_L). Then 5 runs: all
# resumed (112, 104, 61, 1 and 90 ticks concealed in a row; four with a raise of L and its
# fillers around the rejoin), rejoin velocity at most 0.040, 0.019, 0.034, 0.021 and 0.052 m/s
# against a peak of 0.243 m/s. It does not yet assert "no HOLD": on this machine a restart is
# not reliably shorter than the budget.
source "$(dirname "$0")/../lib.sh"
make_experiment 6
pport=$(free_port)
rport=$(free_port)
sport=$(free_port)
start_physical phys "$pport"
ppid=$last_pid
start_impair relay1 "$rport" "$pport" --source "127.0.0.1:$sport"
rpid=$last_pid
start_numerical num "$rport"
npid=$last_pid
wait_rows "$tmp/phys/physical.csv" 5000
kill -9 "$(child_of "$rpid")"
wait "$rpid" 2>/dev/null || true
start_impair relay2 "$rport" "$pport" --source "127.0.0.1:$sport"
rpid=$last_pid
wait_status "$npid"; nrc=$rc
wait_status "$ppid"; prc=$rc
kill -TERM "$rpid" 2>/dev/null || true
wait "$rpid" 2>/dev/null || true
echo "drths-numerical exit $nrc: $(summary "$tmp/num" exit_reason)"
echo "drths-physical exit $prc: $(summary "$tmp/phys" exit_reason)"
python3 - "$tmp" "$prc" "$nrc" <<'PY' || fail "relay restart checks"
import csv, json, sys
t, prc, nrc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
p = json.load(open(f"{t}/phys/summary.json"))
rows = list(csv.DictReader(open(f"{t}/phys/physical.csv")))
# The gap: the longest run of ticks without a received command (concealed or holding after
# the first concealment), in ticks of 0.2 ms.
conc = [int(r["tick"]) for r in rows if r["concealed"] == "1"]
first_gap = conc[0] if conc else None
hold = p["hold"]["active"]
print(f"concealed {p['commands']['concealed']} ticks from tick {first_gap} "
      f"(longest run {p['commands']['max_consecutive_concealed']}), "
      f"HOLD {hold} ({p['hold'].get('reason_code')}), "
      f"rejects {p['rejects']}")
ok = True
n = json.load(open(f"{t}/num/summary.json"))
print(f"numerical site: {n['exit_reason']}; concealed feedback {n.get('concealed_feedback')}")
if hold:
    # A gap beyond the concealment budget: HOLD by that budget (the run that tripped it is 250
    # long; shorter runs before it, e.g. on a loaded machine, add to the total) and by nothing
    # else (a HOLD by LIMIT is the defect described at the top), the numerical site told.
    code = p["hold"]["reason_code"]
    if code != "HOLD" or p["commands"]["max_consecutive_concealed"] != 250:
        print(f"FAIL: HOLD by {code} ({p['exit_reason']}), not by the concealment limit")
        ok = False
    # The ABORTs reach it only once the new relay has seen the numerical site (it sends FEEDBACK
    # and ABORT to the last client it heard from); if they are sent before that, PEER_LOST.
    ok = (ok and prc == 1 and nrc == 1
          and (n["exit_reason"].startswith("actuator site aborted")
               or n["exit_reason"].startswith("peer lost")))
else:
    # Resumed: never more than the limit in a row (the numerical site, waiting for feedback
    # that the new relay cannot deliver before it has seen the client, may add short runs).
    # No command need be lost at all: the numerical site waits for the feedback the dead relay
    # does not deliver before it sends the next COMMAND, so the gap may fall entirely on
    # concealed feedback. Either way the restart must show somewhere.
    r2 = json.load(open(f"{t}/relay2.json"))
    print(f"new relay forwarded {r2['forward']['forwarded']} COMMANDs")
    ok = (prc == 0 and nrc == 0 and p["commands"]["max_consecutive_concealed"] <= 250
          and p["commands"]["concealed"] + n.get("concealed_feedback", 0) >= 1
          and r2["forward"]["forwarded"] > 1000)
# No jump at a rejoin (when the run resumed: after a HOLD commands never come back). Windows:
# from each concealed tick at the actuator site to 20 ticks after it, and from each numerical
# step that used concealed feedback to 20 ticks after the tick its command is for (the step
# plus the loop delay L). Peak: the largest command velocity outside the windows.
steps = list(csv.DictReader(open(f"{t}/num/numerical.csv")))
lmax = max(int(float(r["loop_delay_ticks"])) for r in steps)
fb_conc = [int(float(r["step"])) for r in steps if r["fb_concealed"] == "1"]
window = set()
for s in fb_conc:
    window.update(range(s, s + lmax + 21))
for r in rows:
    if r["concealed"] == "1":
        window.update(range(int(r["tick"]), int(r["tick"]) + 21))
vel = [(int(r["tick"]) in window, abs(float(r["command_vel_m_s"]))) for r in rows
       if r["hold"] != "1"]
peak = max((v for w, v in vel if not w), default=0.0)
rejoin = max((v for w, v in vel if w), default=0.0)
print(f"command velocity: peak {peak:.3f} m/s outside concealment, {rejoin:.3f} m/s at most "
      f"from a concealed run to 20 ticks after it ({sum(w for w, _ in vel)} ticks)")
if not hold and rejoin > 1.5 * peak:
    print(f"FAIL: command velocity {rejoin:.3f} m/s around a rejoin, above 1.5 x the peak")
    ok = False
sys.exit(0 if ok else 1)
PY
check_records "$tmp/phys" physical
check_records "$tmp/num" numerical
echo PASS
