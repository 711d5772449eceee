#!/usr/bin/env bash
# drths-monitor with a key per link (several laboratories, --key twice), against stand-in sites
# (tests/monitor_site.py): a frame of labA under lab A's key and one of labB under lab B's are
# taken; a later frame naming labB made with lab A's key (a lab forging another) and one under a
# key the monitor was not given are refused as bad_mac and move nothing; an Abort reaches each
# lab sealed with its own key (lab B's opens with B's key and not with A's).
source "$(dirname "$0")/../lib.sh"

for k in a b c; do
    python3 -c 'import os; print(os.urandom(32).hex())' >"$tmp/$k.key"
    chmod 600 "$tmp/$k.key"
done
start_monitor --key "$tmp/a.key" --key "$tmp/b.key"
[ "$(grep -c "key id [0-9a-f]\{16\}" "$tmp/monitor.out")" -eq 2 ] || fail "two key ids expected"

timeout 30 python3 - "$url" "$tlm" "$tmp" <<'PY' || fail "key check failed"
import json, socket, sys, time, urllib.request
from checks import check, status
from monitor_site import monitor_key, open_control, seal_frame
url, tlm, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
host, port = tlm.rsplit(":", 1)
key = {k: monitor_key(bytes.fromhex(open(f"{tmp}/{k}.key").read().strip())) for k in "abc"}
def sites():
    return json.loads(urllib.request.urlopen(url.rstrip("/") + "/sites", timeout=5).read())
def sock():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(0.2)
    return s
sa, sb = sock(), sock()
epoch = time.time_ns()
sa.sendto(seal_frame(key["a"], "labA", epoch, 1, 0, {"state": "RUN"}), (host, int(port)))
sb.sendto(seal_frame(key["b"], "labB", epoch, 1, 0, {"state": "RUN"}), (host, int(port)))
end = time.time() + 5
while time.time() < end and len(sites()["sites"]) < 2:
    time.sleep(0.05)
by = {s["site"]: s for s in sites()["sites"]}
check(set(by) == {"labA", "labB"}, f"both labs taken under their own keys: {sorted(by)}")
# Lab A's key naming labB, from labB's own address (so only the key can refuse it); a key the
# monitor was not given.
sb.sendto(seal_frame(key["a"], "labB", epoch, 2, 0, {"state": "HOLD"}), (host, int(port)))
sb.sendto(seal_frame(key["c"], "labB", epoch, 3, 0, {"state": "HOLD"}), (host, int(port)))
end = time.time() + 5
while time.time() < end and sites()["rejected"]["bad_mac"] < 2:
    time.sleep(0.05)
s = sites()
by = {x["site"]: x for x in s["sites"]}
check(s["rejected"]["bad_mac"] == 2, f"refused as bad_mac: {s['rejected']}")
check(by["labB"]["frames"] == 1 and by["labB"]["state"] == "RUN",
      f"labB unmoved: {by['labB']['frames']} frames, {by['labB']['state']}")
# Abort: each lab gets it sealed with its own key.
r = urllib.request.Request(url.rstrip("/") + "/control/abort", method="POST",
                           headers={"X-Drths-Control": "1"})
urllib.request.urlopen(r, timeout=5).read()
got = {}
end = time.time() + 3
while time.time() < end and len(got) < 2:
    for name, so in (("labA", sa), ("labB", sb)):
        try:
            got.setdefault(name, so.recvfrom(512)[0])
        except socket.timeout:
            pass
check(set(got) == {"labA", "labB"}, f"an Abort at each lab: {sorted(got)}")
if "labB" in got:
    c = open_control(key["b"], got["labB"])
    check(c is not None and c["site"] == "labB" and c["cmd"] == "abort",
          f"lab B's Abort opens with lab B's key: {c}")
    check(open_control(key["a"], got["labB"]) is None, "lab B's Abort does not open with lab A's key")
if "labA" in got:
    check(open_control(key["a"], got["labA"]) is not None, "lab A's Abort opens with lab A's key")
sys.exit(status())
PY
stop_cleanly "$mpid" drths-monitor
pids=()
echo "PASS"
