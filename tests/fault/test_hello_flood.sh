#!/usr/bin/env bash
# Review finding 3: authentic HELLOs of an earlier session, replayed in a flood at the actuator
# site before and during the run, must not keep the real session from starting and completing.
#   run 1: a clean run through drths-attack (tools/attack) as a plain relay, which captures the
#          numerical site's datagrams (among them its authentic HELLOs);
#   run 2: a sender on 127.0.0.1 replays run 1's HELLOs at the actuator site as fast as it can,
#          from before the numerical site starts until the run has ended.
# Asserts: both sites exit 0 in run 2, no HOLD; the actuator site counted the replays as
# HELLO_SEEN or HELLO_PINNED (dropped before decryption before the run) and HELLO_RUNNING
# (during it), and never as a new session. With protocol v1 the actuator site adopted every
# replayed HELLO, switching away from the real session, and the numerical site gave up.
source "$(dirname "$0")/../lib.sh"

make_experiment 2

pport=$(free_port)
rport=$(free_port)
start_physical old-phys "$pport"
ppid=$last_pid
start_attack_relay old-relay "$rport" "$pport" --capture "$tmp/old.bin"
rpid=$last_pid
start_numerical old-num "$rport"
npid=$last_pid
wait_status "$npid"
[ "$rc" = 0 ] || fail "run 1: drths-numerical exit $rc"
wait_status "$ppid"
[ "$rc" = 0 ] || fail "run 1: drths-physical exit $rc"
kill -TERM "$rpid" 2>/dev/null || true
wait "$rpid" || true
[ -s "$tmp/old.bin" ] || fail "run 1: nothing captured"

pport=$(free_port)
start_physical phys "$pport"
ppid=$last_pid
# The flooder: run 1's HELLOs (capture format: 4-byte little-endian length, datagram), round
# robin, until $tmp/stop exists (at most 60 s); it says how many it sent in $tmp/flood.json
# and creates $tmp/flooding after its first 1000.
python3 - "$tmp" "$pport" <<'PY' &
import json, os, socket, struct, sys, time
tmp, port = sys.argv[1], int(sys.argv[2])
data = open(f"{tmp}/old.bin", "rb").read()
hellos, i = [], 0
while i + 4 <= len(data):
    (n,) = struct.unpack_from("<I", data, i)
    d = data[i + 4:i + 4 + n]
    i += 4 + n
    if d[:4] == b"DRTH" and d[5] == 1:
        hellos.append(d)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sent, t0 = 0, time.monotonic()
while hellos and not os.path.exists(f"{tmp}/stop") and time.monotonic() - t0 < 60:
    for d in hellos:
        try:
            s.sendto(d, ("127.0.0.1", port))
            sent += 1
        except OSError:
            pass
    if sent >= 1000 and not os.path.exists(f"{tmp}/flooding"):
        open(f"{tmp}/flooding", "w").close()
    time.sleep(0.0002)
json.dump({"hellos": len(hellos), "sent": sent}, open(f"{tmp}/flood.json", "w"))
PY
fpid=$!
pids+=("$fpid")
for _ in $(seq 1 100); do
    [ -e "$tmp/flooding" ] && break
    kill -0 "$fpid" 2>/dev/null || break
    sleep 0.1
done
[ -e "$tmp/flooding" ] || fail "the flooder did not start (no HELLO in the capture?)"
start_numerical num "$pport"
npid=$last_pid
wait_status "$npid"
nrc=$rc
wait_status "$ppid"
prc=$rc
touch "$tmp/stop"
wait "$fpid" || true
echo "run 2: drths-numerical exit $nrc, drths-physical exit $prc"
sed 's/^/   /' "$tmp/num.err" | head -5
[ "$nrc" = 0 ] || fail "run 2: drths-numerical exit $nrc (the replayed HELLOs kept the session from starting)"
[ "$prc" = 0 ] || fail "run 2: drths-physical exit $prc"

python3 - "$tmp" <<'PY' || fail "flood checks failed"
import json, sys
tmp = sys.argv[1]
from checks import check, status
flood = json.load(open(f"{tmp}/flood.json"))
phys = json.load(open(f"{tmp}/phys/summary.json"))
rej = phys["rejects"]
print(f"     flood: {flood['sent']} datagrams of {flood['hellos']} HELLO(s); site rejects {rej}")
check(flood["sent"] > 1000, f"flood sent {flood['sent']} replayed HELLOs")
check(not phys["hold"]["active"], "no HOLD at the actuator site")
pre = rej.get("HELLO_SEEN", 0) + rej.get("HELLO_PINNED", 0)
check(pre > 0, f"before the run: {pre} replays dropped before decryption (SEEN + PINNED)")
check(rej.get("HELLO_RUNNING", 0) > 0,
      f"during the run: {rej.get('HELLO_RUNNING', 0)} HELLOs dropped before decryption")
check(rej.get("BAD_TAG", 0) == 0, "no replayed HELLO reached authentication and failed")
sys.exit(status())
PY
echo PASS
