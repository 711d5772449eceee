#!/bin/bash
# drths-physical --openfresco against an analysis client gone wrong, with the default
# experiment's actuator (compensated servo plant) and MR damper: a GenericTCP client (written here
# from docs/openfresco.md's wire description, not our own drths-openfresco-client) sends ten steps
# of 0.2 mm, then a target 45 mm away (inside the 0.1 m command limit, far beyond what one step
# can reach), or NaN, or 1e300. Each must be refused on arrival: HOLD naming the target, the site
# exits 1, and the command, the drive and the measured displacement never go more than 2 mm
# beyond the real targets (0 to 2 mm). Before the drive envelope the 45 mm target was
# written (drive 97 mm) and the measured displacement reached 98 mm.
. "$(dirname "$0")/../lib.sh"
make_experiment 2

# client.py PORT TARGET [linger]: the GenericTCP exchange (int32[11] sizes, then per step
# [3, d] and [6] -> [d, f]) for 10 steps of 0.2 mm, then TARGET and one more request (the site,
# having ended, answers it NaN), then with "linger" it stays connected and silent until the site
# closes (bounded), as an OpenSees client stuck elsewhere would.
cat >"$tmp/client.py" <<'PY'
import socket, struct, sys
port, last, linger = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:] == ["linger"]
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.sendall(struct.pack("<11i", 1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 256))
def vec(*v):
    return struct.pack("<256d", *(list(v) + [0.0] * (256 - len(v))))
def recv_vec():
    b = b""
    while len(b) < 2048:
        c = s.recv(2048 - len(b))
        if not c:
            return None
        b += c
    return struct.unpack("<256d", b)
for k in range(1, 11):
    s.sendall(vec(3, 0.0002 * k))
    s.sendall(vec(6))
    r = recv_vec()
    assert r is not None, "site closed during the ordinary steps (step %d)" % k
s.sendall(vec(3, last))
try:
    s.sendall(vec(6))
    r = recv_vec()
    print("answer to the bad target:", None if r is None else r[:2])
except OSError as e:
    print("connection ended:", e)
if linger:
    s.settimeout(30)
    print("site closed" if s.recv(1) == b"" else "unexpected data")
PY

# TARGET and the words its HOLD reason must hold (a NaN is refused by the codec as a protocol
# error, before it is a target).
for case in "0.045:needs 4.3 m/s" "nan:not a finite number" "1e300:beyond physical.limit_displacement_m"; do
    target=${case%%:*} words=${case#*:}
    start_openfresco "site-$target" "$tmp/exp.yaml" --step-duration 0.01 \
        --openfresco-variant generic --out "$tmp/run-$target" --quiet
    site=$last_pid
    timeout 30 python3 "$tmp/client.py" "$port" "$target" >"$tmp/client-$target.out" 2>&1 ||
        fail "target $target: the client failed: $(tail -n 3 "$tmp/client-$target.out")"
    wait_status "$site"
    [ "$rc" -eq 1 ] || fail "target $target: the site exited $rc, not 1"
    d=$tmp/run-$target
    python3 - "$d/summary.json" "$d/physical.csv" "$target" "$words" <<'PY' || fail "target $target"
import csv, json, math, sys
summary, rows = json.load(open(sys.argv[1])), list(csv.DictReader(open(sys.argv[2])))
target, words = sys.argv[3], sys.argv[4]
hold = summary["hold"]
assert hold["ticks"] > 0 and words in hold["reason"], hold
meas = max(abs(float(r["meas_disp_m"])) for r in rows)
drive = max(abs(float(r["drive_m"])) for r in rows)
cmd = max(abs(float(r["command_m"])) for r in rows if r["command_m"] not in ("", "nan"))
# The commands between targets are the predictor-corrector's (they may overshoot a late target).
assert cmd <= 0.002 + 0.002, "command %g m beyond the targets' 2 mm + 2 mm" % cmd
assert meas <= 0.002 + 0.002, "measured displacement %g m beyond the targets' 2 mm + 2 mm" % meas
assert drive <= 0.002 + 0.002, "drive %g m beyond the targets' 2 mm + 2 mm" % drive
print("target %s: HOLD (%s); largest |command| %.3f mm, |drive| %.3f mm, |measured| %.3f mm"
      % (target, hold["reason"][:90], cmd * 1e3, drive * 1e3, meas * 1e3))
PY
done

# The site, having ended, answers the client NaN until it ends; a client that stays connected
# and silent is cut by Ctrl-C at the site at once (the records are already on disk), not only
# after --openfresco-step-timeout (30 s here).
start_openfresco site-linger "$tmp/exp.yaml" --step-duration 0.01 --openfresco-variant generic \
    --openfresco-step-timeout 30 --out "$tmp/run-linger" --quiet
site=$last_pid
timeout 40 python3 "$tmp/client.py" "$port" 0.045 linger >"$tmp/client-linger.out" 2>&1 &
client=$!
pids+=("$client")
for _ in $(seq 200); do
    grep -q "answer to the bad target" "$tmp/client-linger.out" && break
    sleep 0.05
done
grep -q "answer to the bad target: (nan, nan)" "$tmp/client-linger.out" ||
    fail "linger: the request after the HOLD was not answered NaN: $(cat "$tmp/client-linger.out")"
for _ in $(seq 200); do
    grep -q "records written; waiting for the OpenFresco client" "$tmp/site-linger.err" && break
    sleep 0.05
done
grep -q "records written; waiting for the OpenFresco client" "$tmp/site-linger.err" ||
    fail "linger: the site did not say it waits for the client"
t0=$(date +%s.%N)
kill -INT "$(child_of "$site")"
wait_status "$site"
t1=$(date +%s.%N)
[ "$rc" -eq 1 ] || fail "linger: the site exited $rc after Ctrl-C, not 1"
python3 - "$tmp/run-linger/summary.json" "$t0" "$t1" <<'PY' || fail "linger"
import json, sys
a = json.load(open(sys.argv[1]))["openfresco"]["after_end"]
took = float(sys.argv[3]) - float(sys.argv[2])
assert a["client"] == "signal", a
assert took < 2.0, "the site took %.2f s to end after Ctrl-C" % took
print("linger: Ctrl-C ended the NaN answers' wait in %.2f s (%s)" % (took, a))
PY
