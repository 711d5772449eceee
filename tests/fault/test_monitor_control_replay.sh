#!/usr/bin/env bash
# A real drths-physical (--monitor --wait-start) against a stand-in monitor that has the key
# (tests/monitor_site.py): control datagrams made with a wrong key, for an earlier run of the
# site (another epoch) or for the other site are refused and counted (the frames' ctl_refused);
# a valid Start is executed and acknowledged (the frames' ACK); a replay of an older valid Abort
# is refused and the site keeps running; a retransmission of the Start is answered, not counted
# as refused; a fresh Abort ends the site, which says the monitor aborted it.
source "$(dirname "$0")/../lib.sh"
make_experiment 5
mon=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
port=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The stand-in monitor binds first and stays up; the site is started once it listens.
timeout 60 python3 - "$mon" "$tmp" <<'PY' >"$tmp/check.out" 2>&1 &
import json, socket, sys, time
from checks import check, status
from monitor_site import REHEARSAL_PSK, monitor_key, seal_control
port, tmp = int(sys.argv[1]), sys.argv[2]
key = monitor_key(REHEARSAL_PSK)
m = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
m.bind(("127.0.0.1", port))
m.settimeout(20)
open(f"{tmp}/listening", "w").close()

def frame():
    """The next frame: (epoch, seq, ack, json) and the sender."""
    data, addr = m.recvfrom(2048)
    head, body = data.split(b"\n", 1)
    f = head.split(b" ")
    return (int(f[3]), int(f[4]), int(f[5]), json.loads(body)), addr

def until(pred, what, bound_s=5.0):
    t_end = time.monotonic() + bound_s
    while True:
        (epoch, seq, ack, j), addr = frame()
        if pred(ack, j) or time.monotonic() > t_end:
            check(pred(ack, j), f"{what}: ack {ack}, {j['state']}, ctl_refused {j['ctl_refused']}")
            return epoch, addr

(epoch, _, _, j), site = frame()
check(j["site"] == "physical" and j["state"] == "READY", "the site reports READY")
ctr = time.time_ns()
m.sendto(seal_control(bytes(32), "physical", epoch, ctr + 1, "abort"), site)     # wrong key
m.sendto(seal_control(key, "physical", epoch - 1, ctr + 2, "abort"), site)       # earlier run
m.sendto(seal_control(key, "numerical", epoch, ctr + 3, "abort"), site)          # other site
old_abort = seal_control(key, "physical", epoch, ctr + 5, "abort")               # kept, unsent
start = seal_control(key, "physical", epoch, ctr + 10, "start")
m.sendto(start, site)
until(lambda ack, j: ack == ctr + 10, "Start executed and acknowledged")
until(lambda ack, j: j["ctl_refused"] == 3, "the three bad datagrams refused")
m.sendto(old_abort, site)                                                         # a replay
until(lambda ack, j: j["ctl_refused"] == 4, "a replay of an older Abort refused")
m.sendto(start, site)                                                             # retransmission
t_end = time.monotonic() + 0.5                                                    # 25 polls
while time.monotonic() < t_end:
    (_, _, ack, j), _ = frame()
check(j["ctl_refused"] == 4 and ack == ctr + 10 and j["state"] != "DONE",
      "a retransmission is not refused; the site still runs")
check(not open(f"{tmp}/phys.err").read().count("abort from the monitor"),
      "the site did not act on the replayed Abort")
m.sendto(seal_control(key, "physical", epoch, ctr + 11, "abort"), site)
until(lambda ack, j: ack == ctr + 11, "a fresh Abort acknowledged")
sys.exit(status())
PY
cpid=$!
pids+=("$cpid")
for _ in $(seq 100); do [ -f "$tmp/listening" ] && break; sleep 0.05; done
start_physical phys "$port" --monitor "127.0.0.1:$mon" --wait-start
ppid=$last_pid
set +e
wait "$cpid"
crc=$?
wait "$ppid"
prc=$?
set -e
cat "$tmp/check.out"
[ "$crc" -eq 0 ] || fail "control replay check failed"
[ "$prc" -ne 124 ] || fail "drths-physical did not end after the Abort"
grep -q "abort from the monitor" "$tmp/phys.err" || fail "drths-physical does not say the monitor aborted it"
echo "PASS"
