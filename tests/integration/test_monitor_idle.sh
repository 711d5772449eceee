#!/usr/bin/env bash
# Idle connections cannot lock drths-monitor's page: 64 connections from 127.0.0.1 that send
# nothing (the server's whole limit) leave a request from 127.0.0.2 answered at once, Abort
# included (libmicrohttpd's per-address limit: 16); the server closes an idle connection after
# its 5 s timeout, and then a request from 127.0.0.1 is answered again. Bounded: every wait has
# a deadline.
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
TIMEOUT_S, MARGIN_S = 5.0, 3.0

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
check(request("127.0.0.2") == 200, "with 64 idle connections from 127.0.0.1, 127.0.0.2 is answered")
st = request("127.0.0.2", "POST", "/control/abort")
check(st in (200, 409), f"and its Abort is answered ({st}: no site yet)")
# The server closes each idle connection after its timeout (recv returns b"" or a reset).
closed_at = None
s = idle[0]
s.settimeout(TIMEOUT_S + MARGIN_S)
try:
    s.recv(1)
    closed_at = time.monotonic() - t_open
except ConnectionResetError:
    closed_at = time.monotonic() - t_open
except TimeoutError:
    pass
check(closed_at is not None and closed_at <= TIMEOUT_S + MARGIN_S,
      f"an idle connection is closed by the server within {TIMEOUT_S + MARGIN_S:.0f} s ({closed_at})")
t0 = time.monotonic()
st = None
while st != 200 and time.monotonic() - t0 < MARGIN_S:
    st = request("127.0.0.1", bound=1.0)
check(st == 200, "then a request from 127.0.0.1 is answered again")
for s in idle:
    s.close()
sys.exit(status())
PY
stop_cleanly "$mpid" drths-monitor
echo "PASS"
