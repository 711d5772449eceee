#!/usr/bin/env bash
# Idle connections cannot lock drths-monitor's page: 64 connections from 127.0.0.1 that send
# nothing leave a request from 127.0.0.1 itself and one from 127.0.0.2 answered at once, Abort
# included. The monitor keeps at most 32 unfinished requests from one address (the oldest idle
# ones are dropped for newer connections, at once) and drops the rest at the request deadline
# (3 s to send a whole request); then a request from 127.0.0.1 is answered again. Bounded: every
# wait has a deadline.
source "$(dirname "$0")/../lib.sh"
mkdir -p "$tmp/web"
echo '<!DOCTYPE html><title>t</title>' >"$tmp/web/index.html"
timeout 60 "$bdir/drths-monitor" --listen 127.0.0.1:0 --telemetry 127.0.0.1:0 --web "$tmp/web" \
    >"$tmp/monitor.out" 2>"$tmp/monitor.err" &
mpid=$!
pids+=("$mpid")
for _ in $(seq 100); do grep -q "telemetry udp" "$tmp/monitor.out" 2>/dev/null && break; sleep 0.05; done
port=$(sed -n 's|^drths-monitor: page http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$tmp/monitor.out")
[ -n "$port" ] || fail "drths-monitor did not print its page address"

timeout 40 python3 - "$port" <<'PY' || fail "idle connection check failed"
import http.client, socket, sys, time
from checks import check, status
port = int(sys.argv[1])
DEADLINE_S, MARGIN_S = 3.0, 1.5

def request(src, method="GET", path="/sites", bound=2.0):
    """The status of one request from source address src, or None without an answer in bound."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=bound, source_address=(src, 0))
    try:
        c.request(method, path, headers={"X-Drths-Control": "1"})
        return c.getresponse().status
    except OSError:
        return None
    finally:
        c.close()

check(request("127.0.0.1") == 200, "a request is answered before the idle connections")
idle = []
for _ in range(64):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    idle.append(s)
t_open = time.monotonic()
check(request("127.0.0.1") == 200, "with 64 idle connections from 127.0.0.1, 127.0.0.1 is answered")
check(request("127.0.0.2") == 200, "and 127.0.0.2 too")
st = request("127.0.0.1", "POST", "/control/abort")
check(st in (200, 409), f"and an Abort from 127.0.0.1 is answered ({st}: no site yet)")
# The server closes every idle connection (recv returns b"" or a reset): those past the 32 of
# one address at once, the others at the request deadline.
closed = []
for s in idle:
    s.settimeout(max(0.01, t_open + DEADLINE_S + MARGIN_S - time.monotonic()))
    try:
        s.recv(1)
        closed.append(time.monotonic() - t_open)
    except ConnectionResetError:
        closed.append(time.monotonic() - t_open)
    except TimeoutError:
        pass
early = sum(t < DEADLINE_S - 0.5 for t in closed)
check(len(closed) == 64, f"every idle connection is closed by the server within "
      f"{DEADLINE_S + MARGIN_S:.1f} s ({len(closed)} of 64, the last at {max(closed, default=0):.2f} s)")
check(early >= 32, f"at least 32 of them at once, for newer connections ({early})")
check(request("127.0.0.1", bound=1.0) == 200, "then a request from 127.0.0.1 is answered again")
for s in idle:
    s.close()
sys.exit(status())
PY
stop_cleanly "$mpid" drths-monitor
echo "PASS"
