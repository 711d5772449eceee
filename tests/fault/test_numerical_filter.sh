#!/usr/bin/env bash
# drths-numerical --kernel-filter during a live run. Both sites on loopback, 4 s of the default
# experiment, with the on-path attacker drths-attack (tools/attack) between them. Two floods of the
# numerical site's port, one after the other, each of junk and of well-formed headers of other
# sessions:
#   - once the run is on, for 1 s from another local socket (off path): the site's socket is
#     connected to its peer, so the kernel finds no socket for these datagrams;
#   - from COMMAND 10000 (2 s in), for 1 s from the forwarder's socket, the address the site
#     sends to and takes answers from (drths-attack --flood-client): these reach the
#     socket, and its filter (the numerical role, this run's session) must drop them all.
# Asserts: --kernel-filter with --reference is refused (exit 2); the start-up line; both sites
# exit 0; the off-path flooder's sends came back "connection refused"; the numerical site's
# summary says kernel_filter, counts kernel drops for at least the on-path flood and nothing by
# reason (without the filter the first flood would be WRONG_SOURCE and the second counted by
# reason, as the forwarder's report says); the records are complete and the displacement error
# is within the clean bound.
source "$(dirname "$0")/../lib.sh"

make_experiment 4
# The reference run has no network: the option is refused there, with exit status 2.
rc=0
timeout 20 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --reference --kernel-filter \
    >"$tmp/refused.out" 2>"$tmp/refused.err" || rc=$?
[ "$rc" = 2 ] && grep -q -- "--kernel-filter is for a hybrid run" "$tmp/refused.err" ||
    fail "--reference --kernel-filter: exit $rc, expected 2 and a message"
pport=$(free_port)
rport=$(free_port)
start_physical phys "$pport"
ppid=$last_pid
start_attack_relay relay "$rport" "$pport" --flood-client --seed 7
rpid=$last_pid
start_numerical num "$rport" --kernel-filter
npid=$last_pid
wait_rows "$tmp/num/numerical.csv" 200
grep -q "kernel filter: only session" "$tmp/num.out" || fail "no kernel filter line at start"
site=$(pgrep -P "$npid" drths-numerica | head -1)
[ -n "$site" ] || fail "drths-numerical is not running"
nport=$(ss -Hanup | awk -v p="pid=$site," '$0 ~ p { n = split($4, a, ":"); print a[n]; exit }')
[ -n "$nport" ] || fail "cannot find the numerical site's UDP port"
timeout 20 python3 - "$nport" >"$tmp/flood.out" 2>&1 <<'PY' || fail "flooder failed"
import os, socket, struct, sys, time
port = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("127.0.0.1", port))
sent = refused = 0
end = time.monotonic() + 1.0
while time.monotonic() < end:
    if sent % 2:
        d = os.urandom(100)
    else:  # a FEEDBACK header of another session, then junk
        d = b"DRTH" + bytes([1, 6, 0, 0]) + struct.pack(">QQQII", sent + 1, 1, 1, 0, 0) + os.urandom(60)
    try:
        s.send(d)
        sent += 1
    except ConnectionRefusedError:
        refused += 1
print(f"sent {sent} refused {refused}")
PY
cat "$tmp/flood.out"
wait_status "$npid"
nrc=$rc
wait_status "$ppid"
prc=$rc
kill -TERM "$rpid" 2>/dev/null || true
wait_status "$rpid"
[ "$rc" = 0 ] || fail "drths-attack exit $rc"
echo "drths-numerical exit $nrc, drths-physical exit $prc"
[ "$nrc" = 0 ] || fail "drths-numerical exit $nrc"
[ "$prc" = 0 ] || fail "drths-physical exit $prc"
timeout 60 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --reference --out "$tmp/ref" \
    --quiet >"$tmp/ref.out" 2>"$tmp/ref.err" || fail "reference run failed"
report "$tmp/report.out" "$tmp/num" --reference "$tmp/ref" --physical "$tmp/phys" --no-plots

python3 - "$tmp" <<'PY' || fail "numerical kernel filter checks failed"
import json, re, sys
tmp = sys.argv[1]
from checks import check, status
num = json.load(open(f"{tmp}/num/summary.json"))
relay = json.load(open(f"{tmp}/relay.json"))
sent, refused = map(int, re.findall(r"\d+", open(f"{tmp}/flood.out").read())[:2])
check(sent > 1000, f"off-path flood: {sent} datagrams sent")
check(refused > 0, f"off-path flood: {refused} sends refused (no socket took them)")
csent = relay["client_flood_sent"]
cexp = relay["client_flood_expect"]
check(csent > 10000 and sum(cexp.values()) == csent,
      f"on-path flood: {csent} datagrams at {relay['client_flood_rate_per_s']:.0f}/s, "
      f"without the filter counted as {cexp}")
check(num["kernel_filter"] is True, "summary: kernel_filter true")
# Each on-path datagram the loopback delivered was refused by the filter; the loopback itself
# drops some under a flood (its backlog is 1000 datagrams), so not all of them get there.
drops = num.get("kernel_drops", -1)
check(drops > csent // 4, f"summary: kernel_drops {drops} (on-path flood {csent})")
check(num["rejects"] == {}, f"nothing counted by reason at the numerical site ({num['rejects']})")
for f in json.load(open(f"{tmp}/num/report.json"))["fidelity"]["floors"]:
    e = f["disp_rms_err_pct"]
    check(e is not None and e <= 0.5, f"floor {f['floor']}: displacement RMS error {e:.4f} % <= 0.5 %")
sys.exit(status())
PY
check_records "$tmp/num" numerical
check_records "$tmp/phys" physical
echo PASS
