#!/usr/bin/env bash
# The monitor page keeps working when a site goes silent, and Abort asks first: stand-in sites on
# 127.0.0.1 (python) send RUN frames to drths-monitor at 50 Hz; the actuator site's stop after
# 4 s. In headless Chromium (tests/browser/monitor_disconnect.js) the actuator site must show
# "disconnected" while the numerical site stays RUN; a dismissed Abort sends nothing, a confirmed
# one reaches both stand-ins. Screenshot: <build>/test-artifacts/monitor-disconnect.png.
source "$(dirname "$0")/../lib.sh"
command -v node >/dev/null || skip "node is missing (tools/deps installs it)"
[ -x /usr/bin/chromium ] || skip "/usr/bin/chromium is missing (tools/deps --test installs it)"
DRTHS_BUILD_DIR=$bdir "$src/tools/web-build" >"$tmp/web-build.out" 2>&1 || fail "tools/web-build failed"

timeout 60 "$bdir/drths-monitor" --listen 127.0.0.1:0 --telemetry 127.0.0.1:0 --web "$bdir/web" \
    >"$tmp/monitor.out" 2>"$tmp/monitor.err" &
pids+=("$!")
for _ in $(seq 100); do grep -q "telemetry udp" "$tmp/monitor.out" 2>/dev/null && break; sleep 0.05; done
url=$(sed -n 's|^drths-monitor: page \(http://[^ ]*\).*|\1|p' "$tmp/monitor.out")
tlm=$(sed -n 's|^drths-monitor: telemetry udp \([^ ]*\) .*|\1|p' "$tmp/monitor.out")
[ -n "$url" ] && [ -n "$tlm" ] || fail "drths-monitor did not print its addresses"

# Stand-in sites (tests/monitor_site.py, the rehearsal key like the monitor): a sine at 50
# frames/s; each executes a control datagram once (its frames acknowledge it) and appends the
# command to its file.
timeout 50 python3 - "$tlm" "$tmp" >"$tmp/sites.out" 2>&1 <<'PY' &
import math, sys, time
from monitor_site import REHEARSAL_PSK, Site, monitor_key
tlm, tmp = sys.argv[1], sys.argv[2]
key = monitor_key(REHEARSAL_PSK)
sites = {name: Site(name, tlm, key) for name in ("numerical", "physical")}
t0 = time.monotonic()
k = 0
while time.monotonic() - t0 < 45:
    t = k * 0.02
    for name, s in sites.items():
        done = len(s.executed)
        s.poll()
        for cmd in s.executed[done:]:
            with open(f"{tmp}/{name}.control", "a") as out:
                out.write(cmd)
        if name == "physical" and t > 4.0:
            continue
        d = 0.01 * math.sin(2 * math.pi * t)
        s.send(seq=k, state="RUN", tick=k * 100, t=t, cmd=d,
               meas=d if name == "physical" else None, fmeas=1e5 * d,
               fused=1e5 * d if name == "numerical" else None, smith=0, damper=0, L=105,
               rtt=0.1, lateness=50, late=0, concealed=k // 50, rejected=0, tlm_errors=0,
               event_seq=1, event="stand-in")
    k += 1
    time.sleep(max(0.0, t0 + k * 0.02 - time.monotonic()))
PY
pids+=("$!")

art="$bdir/test-artifacts"
mkdir -p "$art"
set +e
NODE_PATH="$src/web/node_modules" timeout 90 node "$src/tests/browser/monitor_disconnect.js" "$url" \
    "$art/monitor-disconnect.png" >"$tmp/e2e.out" 2>"$tmp/e2e.err"
erc=$?
set -e
cat "$tmp/e2e.out"
[ "$erc" -eq 0 ] || fail "the browser test failed (screenshot: $art/monitor-disconnect.png)"
# The stand-ins poll every 20 ms: bounded wait for the datagrams.
for _ in $(seq 50); do [ -f "$tmp/numerical.control" ] && [ -f "$tmp/physical.control" ] && break; sleep 0.1; done
for s in numerical physical; do
    [ -f "$tmp/$s.control" ] || fail "the $s stand-in got no control datagram"
    got=$(cat "$tmp/$s.control")
    [ "$got" = "abort" ] || fail "the $s stand-in executed '$got', want exactly one abort"
done
echo "PASS"
