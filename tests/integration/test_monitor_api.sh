#!/usr/bin/env bash
# drths-monitor's HTTP API and its access rules, without a browser or a run: a stand-in site on
# 127.0.0.1 sends telemetry frames; the page, /events, /sites and /control need the token;
# control needs the X-Drths-Control header and a loopback Host; control datagrams reach the
# site with the control token; a non-loopback --listen without --token is refused (exit 2);
# malformed frames are counted, not streamed.
source "$(dirname "$0")/../lib.sh"

set +e
"$bdir/drths-monitor" --listen 0.0.0.0:0 --telemetry 0 >"$tmp/refused.out" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "non-loopback --listen without --token: exit $rc, want 2"
grep -q "needs --token" "$tmp/refused.out" || fail "no reason given for the refusal"

mkdir -p "$tmp/web"
echo '<!DOCTYPE html><title>t</title>' >"$tmp/web/index.html"
echo 's3cret-page' >"$tmp/page.token"
echo 'ctl-token' >"$tmp/ctl.token"
timeout 60 "$bdir/drths-monitor" --listen 127.0.0.1:0 --telemetry 127.0.0.1:0 --web "$tmp/web" \
    --token "$tmp/page.token" --control-token "$tmp/ctl.token" >"$tmp/monitor.out" 2>"$tmp/monitor.err" &
mpid=$!
pids+=("$mpid")
for _ in $(seq 100); do grep -q "telemetry udp" "$tmp/monitor.out" 2>/dev/null && break; sleep 0.05; done
url=$(sed -n 's|^drths-monitor: page \(http://[^/ ]*/\).*|\1|p' "$tmp/monitor.out")
tlm=$(sed -n 's|^drths-monitor: telemetry udp \([^ ]*\) .*|\1|p' "$tmp/monitor.out")
[ -n "$url" ] && [ -n "$tlm" ] || fail "drths-monitor did not print its addresses"

timeout 30 python3 - "$url" "$tlm" <<'PY' || fail "API check failed"
import json, socket, sys, urllib.error, urllib.request
url, tlm = sys.argv[1], sys.argv[2]
host, port = tlm.rsplit(":", 1)
from checks import check, status
def req(path, method="GET", headers=None):
    r = urllib.request.Request(url + path.lstrip("/"), method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(r, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()

site = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
site.bind(("127.0.0.1", 0))
site.settimeout(5)
frame = {"v": 1, "site": "physical", "seq": 0, "state": "READY", "tick": -1, "event": "hi"}
site.sendto((json.dumps(frame) + "\n").encode(), (host, int(port)))
site.sendto(b"not json at all", (host, int(port)))
site.sendto(b'{"v":1,"state":"RUN"}', (host, int(port)))  # no site name

check(req("/")[0] == 403, "page without the token: 403")
st, body = req("/?token=s3cret-page")
check(st == 200 and b"<title>t</title>" in body, "page with the token: 200")
check(req("/?token=s3cret-pagX")[0] == 403, "page with a wrong token: 403")
check(req("/../monitor.out?token=s3cret-page")[0] == 404, "no path outside the web directory")
check(req("/sites", headers={"X-Drths-Token": "s3cret-page", "Host": "evil.example"})[0] == 403,
      "a non-loopback Host header: 403")
# /sites until the frame is in (the datagram and this request race; bounded)
for _ in range(50):
    st, body = req("/sites?token=s3cret-page")
    sites = json.loads(body)
    if sites["sites"]:
        break
check(st == 200 and [s["site"] for s in sites["sites"]] == ["physical"] and sites["frames"] == 1,
      f"/sites: one site, one frame (malformed frames not kept): {sites}")

st, _ = req("/control/abort?token=s3cret-page", "POST")
check(st == 403, "control without X-Drths-Control: 403")
st, _ = req("/control/abort", "POST", {"X-Drths-Control": "1"})
check(st == 403, "control without the token: 403")
st, body = req("/control/bogus?token=s3cret-page", "POST", {"X-Drths-Control": "1"})
check(st == 404, "unknown command: 404")
st, body = req("/control/abort", "POST", {"X-Drths-Control": "1", "X-Drths-Token": "s3cret-page"})
check(st == 200 and json.loads(body)["sent_to"] == ["physical"], f"abort: {st} {body!r}")
data, _ = site.recvfrom(512)
check(data == b"drths-control abort ctl-token\n", f"the site got {data!r}")
# Stop goes to the actuator site when there is no numerical site.
st, body = req("/control/stop", "POST", {"X-Drths-Control": "1", "X-Drths-Token": "s3cret-page"})
data, _ = site.recvfrom(512)
check(st == 200 and data == b"drths-control stop ctl-token\n", f"stop with no numerical site: {data!r}")

# /events: the stored frame first, then a live one.
r = urllib.request.Request(url + "events?token=s3cret-page")
with urllib.request.urlopen(r, timeout=5) as ev:
    check(ev.headers["Content-Type"] == "text/event-stream", "event stream content type")
    line = ev.readline()
    check(line.startswith(b"data: {") and b'"site": "physical"' in line, f"first event {line[:60]!r}")
    ev.readline()
    frame["state"] = "RUN"
    site.sendto(json.dumps(frame).encode(), (host, int(port)))
    line = ev.readline()
    while line.startswith(b":") or line == b"\n":
        line = ev.readline()
    check(b'"state": "RUN"' in line, f"live event {line[:80]!r}")
sys.exit(status())
PY
stop_cleanly "$mpid" drths-monitor
pids=()
grep -q "2 rejected" "$tmp/monitor.out" || fail "the two malformed frames were not counted"
echo "PASS"
