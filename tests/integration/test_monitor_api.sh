#!/usr/bin/env bash
# drths-monitor's HTTP API and its access rules, without a browser or a run: a stand-in site on
# 127.0.0.1 sends authenticated telemetry frames (tests/monitor_site.py) with the link key; the
# page, /events, /sites and /control need the token; control needs the X-Drths-Control header
# and a loopback Host; a non-loopback --listen without --token, or --telemetry without --key,
# is refused (exit 2).
# Forged telemetry (the old unauthenticated frame, a wrong MAC, a replay of the real site's
# frame from another address, four made-up sites) is dropped and counted by reason: it takes no
# site slot, does not move the site's pinned address, and the Abort goes to the real site only,
# authenticated, retransmitted until the site's frames acknowledge it; /sites then says
# "acknowledged". A command never acknowledged is retried 20 times, then "unacknowledged".
# A restarted site moves the pin; a command not yet acknowledged is not carried over to the new
# run. With --site physical=127.0.0.2 the site's frames are taken from that host only.
source "$(dirname "$0")/../lib.sh"

set +e
"$bdir/drths-monitor" --listen 0.0.0.0:0 --telemetry 0 >"$tmp/refused.out" 2>&1
rc=$?
"$bdir/drths-monitor" --listen 127.0.0.1:0 --telemetry 0.0.0.0:0 >"$tmp/refused2.out" 2>&1
rc2=$?
set -e
[ "$rc" -eq 2 ] || fail "non-loopback --listen without --token: exit $rc, want 2"
grep -q "needs --token" "$tmp/refused.out" || fail "no reason given for the refusal"
[ "$rc2" -eq 2 ] || fail "non-loopback --telemetry without --key: exit $rc2, want 2"
grep -q "needs --key" "$tmp/refused2.out" || fail "no reason given for the --key refusal"

mkdir -p "$tmp/web"
echo '<!DOCTYPE html><title>t</title>' >"$tmp/web/index.html"
echo 's3cret-page' >"$tmp/page.token"
python3 -c 'import os; print(os.urandom(32).hex())' >"$tmp/link.key"
chmod 600 "$tmp/link.key"
timeout 60 "$bdir/drths-monitor" --listen 127.0.0.1:0 --telemetry 127.0.0.1:0 --web "$tmp/web" \
    --token "$tmp/page.token" --key "$tmp/link.key" >"$tmp/monitor.out" 2>"$tmp/monitor.err" &
mpid=$!
pids+=("$mpid")
for _ in $(seq 100); do grep -q "telemetry udp" "$tmp/monitor.out" 2>/dev/null && break; sleep 0.05; done
url=$(sed -n 's|^drths-monitor: page \(http://[^/ ]*/\).*|\1|p' "$tmp/monitor.out")
tlm=$(sed -n 's|^drths-monitor: telemetry udp \([^ ]*\) .*|\1|p' "$tmp/monitor.out")
[ -n "$url" ] && [ -n "$tlm" ] || fail "drths-monitor did not print its addresses"
grep -q "key id [0-9a-f]\{16\}" "$tmp/monitor.out" || fail "drths-monitor did not print its key id"

timeout 40 python3 - "$url" "$tlm" "$tmp/link.key" <<'PY' || fail "API check failed"
import json, socket, sys, time, urllib.error, urllib.request
from checks import check, status
from monitor_site import Site, monitor_key, open_control, seal_frame
url, tlm, keyfile = sys.argv[1], sys.argv[2], sys.argv[3]
host, port = tlm.rsplit(":", 1)
key = monitor_key(bytes.fromhex(open(keyfile).read().strip()))
T = {"X-Drths-Token": "s3cret-page"}
C = {"X-Drths-Control": "1", "X-Drths-Token": "s3cret-page"}
def req(path, method="GET", headers=None):
    r = urllib.request.Request(url + path.lstrip("/"), method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(r, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
def sites():
    return json.loads(req("/sites", headers=T)[1])
def until(pred, what, bound_s=5.0):
    """Polls /sites until pred holds (bounded); returns the last answer."""
    t_end = time.monotonic() + bound_s
    while True:
        s = sites()
        if pred(s) or time.monotonic() > t_end:
            check(pred(s), what + f": {s}")
            return s
        time.sleep(0.02)

site = Site("physical", tlm, key)
first = site.send(state="READY", tick=-1, event="hi")
site.send(state="READY", tick=-1, event="hi")

# The attacker: another socket on 127.0.0.1 (another port), without the key.
atk = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
atk.bind(("127.0.0.1", 0))
to = (host, int(port))
atk.sendto(b'{"site":"physical","state":"RUN"}\n', to)            # the old frame: malformed
atk.sendto(b"not json at all", to)                                  # malformed
bad = seal_frame(bytes(32), "physical", site.epoch, 100, 0, {"state": "RUN", "tick": 1})
atk.sendto(bad, to)                                                 # wrong key: bad MAC
for i in range(4):                                                  # four made-up sites
    atk.sendto(seal_frame(bytes(32), f"fake{i}", 1, 1, 0, {"state": "RUN"}), to)
atk.sendto(first, to)                                               # replay from elsewhere

s = until(lambda s: sum(s["rejected"].values()) >= 8, "eight forged frames counted")
check([x["site"] for x in s["sites"]] == ["physical"] and s["frames"] == 2,
      "/sites: one site, two frames (nothing forged kept)")
check(s["sites"][0]["addr"] == site.addr(), "the site is pinned to its own address")
check(s["rejected"] == {"malformed": 2, "bad_mac": 5, "replay": 1, "address": 0, "no_slot": 0},
      "rejected by reason")
check(s["sites"][0]["control"] is None, "no control sent yet")
# A fresh frame of the real site (right sequence) from the attacker's address: refused.
nxt = seal_frame(key, "physical", site.epoch, 50, 0, {"state": "RUN"})
atk.sendto(nxt, to)
s = until(lambda s: s["rejected"]["address"] == 1, "an authentic frame from elsewhere refused")
check(s["sites"][0]["addr"] == site.addr() and s["sites"][0]["state"] == "READY",
      "the pin and the state did not move")

check(req("/")[0] == 403, "page without the token: 403")
st, body = req("/?token=s3cret-page")
check(st == 200 and b"<title>t</title>" in body, "page with the token: 200")
check(req("/?token=s3cret-pagX")[0] == 403, "page with a wrong token: 403")
check(req("/../monitor.out?token=s3cret-page")[0] == 404, "no path outside the web directory")
check(req("/sites", headers={"X-Drths-Token": "s3cret-page", "Host": "evil.example"})[0] == 403,
      "a non-loopback Host header: 403")
check(req("/control/abort?token=s3cret-page", "POST")[0] == 403, "control without X-Drths-Control: 403")
check(req("/control/abort", "POST", {"X-Drths-Control": "1"})[0] == 403, "control without the token: 403")
check(req("/control/bogus", "POST", C)[0] == 404, "unknown command: 404")

# Abort: to the pinned address only, authenticated, retransmitted until acknowledged.
st, body = req("/control/abort", "POST", C)
check(st == 200 and json.loads(body)["sent_to"] == ["physical"], f"abort: {st} {body!r}")
site.sock.settimeout(5)
data = site.sock.recv(512)
c = open_control(key, data)
check(c is not None and c["cmd"] == "abort" and c["site"] == "physical" and c["epoch"] == site.epoch,
      f"the site got an authentic abort: {data!r}")
check(b"s3cret" not in data and key.hex().encode() not in data, "no secret in the datagram")
try:
    got = atk.recv(512, socket.MSG_DONTWAIT)
except BlockingIOError:
    got = None
check(got is None, f"nothing went to the attacker: {got!r}")
check(sites()["sites"][0]["control"]["status"] == "sent", "not acknowledged yet: sent")
again = site.sock.recv(512)                                         # within 100 ms
check(again == data, "retransmitted (the same datagram) while not acknowledged")
site.handle(data)
site.handle(again)
site.poll()
check(site.executed == ["abort"], "the site executes it once")
site.send(state="HOLD", tick=5)                                     # its frame carries ACK
s = until(lambda s: s["sites"][0]["control"]["status"] == "acknowledged", "abort acknowledged")
ctl = s["sites"][0]["control"]
check(ctl["command"] == "abort" and ctl["acked_at"] and ctl["acked_at"] >= ctl["sent_at"],
      f"acknowledged at a time: {ctl}")
tries = ctl["tries"]
time.sleep(0.3)                                                     # three retransmit periods
check(sites()["sites"][0]["control"]["tries"] == tries, "no retransmission after the ack")

# Stop goes to the actuator site when there is no numerical site; never acknowledged, it is
# retried 20 times (2 s) and then said so.
site.sock.settimeout(0.5)
site.poll()  # drains the abort's retransmissions
st, body = req("/control/stop", "POST", C)
c = open_control(key, site.sock.recv(512))
check(st == 200 and c and c["cmd"] == "stop" and c["ctr"] > site.ack, f"stop with no numerical site: {c}")
s = until(lambda s: s["sites"][0]["control"]["status"] == "unacknowledged", "stop unacknowledged", 6)
check(s["sites"][0]["control"]["tries"] == 20, "20 tries")

# The site restarts (a later epoch, another port): the pin moves with its first frame. A Start
# for it, then another restart before it acknowledged: the Start is not carried over.
site2 = Site("physical", tlm, key)
site2.send(state="READY")
s = until(lambda s: s["sites"][0]["addr"] == site2.addr(), "a restarted site moves the pin")
st, _ = req("/control/start", "POST", C)
site2.sock.settimeout(5)
c = open_control(key, site2.sock.recv(512))
check(st == 200 and c and c["cmd"] == "start" and c["epoch"] == site2.epoch,
      f"start sealed for the new epoch: {c}")
site3 = Site("physical", tlm, key)
site3.send(state="READY")
s = until(lambda s: s["sites"][0]["addr"] == site3.addr()
          and s["sites"][0]["control"]["status"] == "unacknowledged",
          "restarted again: the pending Start ends unacknowledged")
time.sleep(0.3)                                                     # three retransmit periods
check(site3.poll() == 0, "and is not sent to the new run")
site = site3

# /events: the stored frames first, then a live one.
r = urllib.request.Request(url + "events?token=s3cret-page")
with urllib.request.urlopen(r, timeout=5) as ev:
    check(ev.headers["Content-Type"] == "text/event-stream", "event stream content type")
    line = ev.readline()
    check(line.startswith(b'data: {"v":1,"site":"physical"'), f"first event {line[:60]!r}")
    ev.readline()
    site.send(state="RUN", tick=6)
    for _ in range(50):  # the stored frames, keep-alives, then the live one
        line = ev.readline()
        if b'"tick":6' in line:
            break
    check(line.startswith(b"data: {") and b'"state":"RUN"' in line, f"live event {line[:80]!r}")
sys.exit(status())
PY
stop_cleanly "$mpid" drths-monitor
pids=()
grep -q "9 rejected (malformed 2, bad_mac 5, replay 1, address 1, no_slot 0)" "$tmp/monitor.out" ||
    fail "the forged frames were not counted by reason: $(tail -1 "$tmp/monitor.out")"
grep -q "fails authentication" "$tmp/monitor.err" || fail "no warning about frames failing authentication"

# --site NAME=HOST: the site's frames are taken from that host only, even authentic ones.
timeout 30 "$bdir/drths-monitor" --listen 127.0.0.1:0 --telemetry 127.0.0.1:0 --web "$tmp/web" \
    --key "$tmp/link.key" --site physical=127.0.0.2 >"$tmp/monitor2.out" 2>"$tmp/monitor2.err" &
mpid=$!
pids+=("$mpid")
for _ in $(seq 100); do grep -q "telemetry udp" "$tmp/monitor2.out" 2>/dev/null && break; sleep 0.05; done
url=$(sed -n 's|^drths-monitor: page \(http://[^/ ]*/\).*|\1|p' "$tmp/monitor2.out")
tlm=$(sed -n 's|^drths-monitor: telemetry udp \([^ ]*\) .*|\1|p' "$tmp/monitor2.out")
timeout 20 python3 - "$url" "$tlm" "$tmp/link.key" <<'PY' || fail "--site check failed"
import json, sys, time, urllib.request
from checks import check, status
from monitor_site import Site, monitor_key
url, tlm, keyfile = sys.argv[1], sys.argv[2], sys.argv[3]
key = monitor_key(bytes.fromhex(open(keyfile).read().strip()))
elsewhere = Site("physical", tlm, key, bind="127.0.0.1")
elsewhere.send(state="READY")
real = Site("physical", tlm, key, bind="127.0.0.2")
real.send(state="READY")
t_end = time.monotonic() + 5
while True:
    s = json.loads(urllib.request.urlopen(url + "sites", timeout=5).read())
    if s["sites"] or time.monotonic() > t_end:
        break
    time.sleep(0.02)
check(s["rejected"]["address"] == 1 and [x["addr"] for x in s["sites"]] == [real.addr()],
      f"the site's frames from 127.0.0.1 refused, from 127.0.0.2 taken: {s}")
sys.exit(status())
PY
stop_cleanly "$mpid" drths-monitor
pids=()
echo "PASS"
