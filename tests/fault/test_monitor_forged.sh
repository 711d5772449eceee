#!/usr/bin/env bash
# Finding: drths-monitor took any sender's frame as a site's and sent Abort (with the control
# token in clear) to that sender. Now: a real drths-physical with --monitor --wait-start, and an
# attacker on 127.0.0.1 that sends the old forged frame {"site":"physical","state":"RUN"}, a
# frame sealed with a wrong key, and frames for four made-up sites. All are refused and counted;
# the site stays pinned to its own address; Abort goes there only, the site acknowledges it
# (the API says "acknowledged") and ends as after SIGTERM, saying the monitor aborted it.
source "$(dirname "$0")/../lib.sh"
make_experiment 5
mkdir -p "$tmp/web"
echo '<!DOCTYPE html><title>t</title>' >"$tmp/web/index.html"
timeout 60 "$bdir/drths-monitor" --listen 127.0.0.1:0 --telemetry 127.0.0.1:0 --web "$tmp/web" \
    >"$tmp/monitor.out" 2>"$tmp/monitor.err" &
mpid=$!
pids+=("$mpid")
for _ in $(seq 100); do grep -q "telemetry udp" "$tmp/monitor.out" 2>/dev/null && break; sleep 0.05; done
url=$(sed -n 's|^drths-monitor: page \(http://[^/ ]*/\).*|\1|p' "$tmp/monitor.out")
tlm=$(sed -n 's|^drths-monitor: telemetry udp \([^ ]*\) .*|\1|p' "$tmp/monitor.out")
[ -n "$url" ] && [ -n "$tlm" ] || fail "drths-monitor did not print its addresses"
port=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start_physical phys "$port" --monitor "$tlm" --wait-start
ppid=$last_pid

timeout 40 python3 - "$url" "$tlm" <<'PY' || fail "forged telemetry check failed"
import json, socket, sys, time, urllib.request
from checks import check, status
from monitor_site import seal_frame
url, tlm = sys.argv[1], sys.argv[2]
host, port = tlm.rsplit(":", 1)
C = {"X-Drths-Control": "1"}
def req(path, method="GET", headers=None):
    r = urllib.request.Request(url + path.lstrip("/"), method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(r, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, {}
def until(pred, what, bound_s):
    t_end = time.monotonic() + bound_s
    while True:
        s = req("/sites")[1]
        if pred(s) or time.monotonic() > t_end:
            check(pred(s), what + f": {s}")
            return s
        time.sleep(0.05)

s = until(lambda s: any(x["site"] == "physical" and x["state"] == "READY" for x in s["sites"]),
          "the actuator site is READY at the monitor", 20)
real = s["sites"][0]["addr"]
atk = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
atk.bind(("127.0.0.1", 0))
to = (host, int(port))
atk.sendto(b'{"site":"physical","state":"RUN"}', to)
atk.sendto(seal_frame(bytes(32), "physical", 2**62, 1, 0, {"state": "RUN"}), to)
for i in range(4):
    atk.sendto(seal_frame(bytes(32), f"site{i}", 1, 1, 0, {"state": "RUN"}), to)
s = until(lambda s: s["rejected"]["malformed"] == 1 and s["rejected"]["bad_mac"] == 5,
          "the forged frames are refused and counted", 5)
check([x["site"] for x in s["sites"]] == ["physical"], "no forged site took a slot")
check(s["sites"][0]["addr"] == real and s["sites"][0]["state"] == "READY",
      "the pin and the state did not move")
st, body = req("/control/abort", "POST", C)
check(st == 200 and body.get("sent_to") == ["physical"], f"abort sent: {st} {body}")
s = until(lambda s: (s["sites"][0]["control"] or {}).get("status") == "acknowledged",
          "abort acknowledged by the actuator site", 5)
try:
    got = atk.recv(512, socket.MSG_DONTWAIT)
except BlockingIOError:
    got = None
check(got is None, f"nothing went to the attacker: {got!r}")
sys.exit(status())
PY
set +e
wait "$ppid"
prc=$?
set -e
[ "$prc" -ne 124 ] || fail "drths-physical did not end after the Abort"
grep -q "abort from the monitor" "$tmp/phys.err" || fail "drths-physical does not say the monitor aborted it: $(cat "$tmp/phys.err")"
echo "drths-physical exit $prc: $(grep -m1 "abort" "$tmp/phys.err")"
stop_cleanly "$mpid" drths-monitor
echo "PASS"
