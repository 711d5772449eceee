#!/usr/bin/env bash
# Fault: the relay (the network path) restarted mid-run (docs/faults.md): drths-impair is killed
# with kill -9 and started again on the same addresses (--source fixes the address the actuator
# site sees; without it the new relay's datagrams would be WRONG_SOURCE). The gap is a process
# start. From the limits of the default file: the commands sent during a gap of G ms leave about
# 5000 G - 3 ticks to conceal, and the concealment limit (20 ticks, 4 ms) is far below the
# silence watchdog (100 ms), so a restart that takes more than about 4.6 ms of COMMANDs is a
# HOLD by the concealment limit, a faster one resumes (the gap can also fall on the feedback
# alone: the numerical site waits for feedback before sending on).
#
# Asserted (the intended behaviour):
#   - resumed: both exit 0, never more than 20 concealed ticks in a row, the restart visible as
#     concealment on one side or the other, the new relay forwarding the rest of the run;
#   - or HOLD by the concealment limit and nothing else (reason code HOLD after a run of 20),
#     the numerical site told (ABORT through the new relay, or PEER_LOST when the ABORTs left
#     before the new relay had heard from it), both exit 1;
#   - never a HOLD by LIMIT, and no jump when commands come back: in a resumed run the
#     actuator's command velocity from the start of each concealed run (either side's) to 20
#     ticks after it stays within 1.5 times the run's own peak command velocity elsewhere
#     (physical.csv command_vel_m_s).
# What it did in 16 runs on 2026-11-25 (shared 2-CPU machine): resumed 12 times (0 to 45 ticks
# concealed, longest run 0 to 20; 31 to 105 feedback steps concealed; command velocity at the
# rejoins at most 0.045 m/s against a peak of 0.243 m/s); HOLD by the concealment limit 4 times;
# never HOLD by LIMIT.
# Earlier, once (docs/faults.md): HOLD by LIMIT, "command velocity -2.38976 m/s exceeds 1 m/s",
# after runs of at most 5 concealed ticks and 22 concealed feedback steps: a command far outside
# the motion came out of the concealment. That is a defect of the concealment/rejoin path, not
# an outcome to accept; this test fails when it happens. It is not marked WILL_FAIL because it
# happens too rarely (0 of 16 runs here) for an expected failure to be deterministic. For the
# relay restart to pass without any HOLD at all, the rejoin after concealment must not jump (on
# the actuator side and in the numerical site's use of concealed feedback) and the concealment
# budget must cover a process restart (more than 20 ticks, or a faster restart path).
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
    # A gap beyond the concealment limit: HOLD by that limit (the run that tripped it is 20
    # long; shorter runs before it, e.g. on a loaded machine, add to the total) and by nothing
    # else (a HOLD by LIMIT is the defect described at the top), the numerical site told.
    code = p["hold"]["reason_code"]
    if code != "HOLD" or p["commands"]["max_consecutive_concealed"] != 20:
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
    ok = (prc == 0 and nrc == 0 and p["commands"]["max_consecutive_concealed"] <= 20
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
