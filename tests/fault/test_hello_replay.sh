#!/usr/bin/env bash
# Issue 29, cases 1 and 2: recorded HELLOs replayed at a fresh actuator site must not keep the
# real numerical site from starting.
#   recording: a numerical site that waited 4.5 s for an actuator site that is not there
#              (its HELLO repeated every 200 ms, one session id), then 12 numerical sites that
#              each sent one HELLO, all captured by a UDP listener;
#   case 1:    a fresh drths-physical; one of the first session's HELLOs replayed every 0.8 s
#              from another address (a different one each time, so each passes the replay
#              window), from before the real numerical site starts until the run has ended;
#   case 2:    a fresh drths-physical; the 12 sessions' HELLOs flooded round robin.
#   then both cases again over IPv6 loopback (::1), when this machine has it.
# Asserts in each: the real numerical site starts within 2 s of its first HELLO (its summary's
# handshake.start_after_first_hello_s), both sites end "end of record" with exit 0, and the
# actuator site answered the replays (half-open sessions) without ever being pinned by them.
# Before (issue 29) the replayed HELLO was adopted and each repeat refreshed the 1 s pin: the
# real site got HELLO_PINNED until it gave up; the 12 sessions were adopted one after another.
source "$(dirname "$0")/../lib.sh"

make_experiment 1

# ---- the recording ----
cport=$(free_port)
python3 - "$tmp" "$cport" <<'PY' &
import os, socket, struct, sys, time
tmp, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", port))
s.settimeout(0.1)
open(f"{tmp}/capturing", "w").close()
out, t0 = open(f"{tmp}/hellos.bin", "wb"), time.monotonic()
while not os.path.exists(f"{tmp}/capture.stop") and time.monotonic() - t0 < 60:
    try:
        d = s.recv(65536)
    except socket.timeout:
        continue
    if d[:4] == b"DRTH" and len(d) > 6 and d[5] == 1:
        out.write(struct.pack("<I", len(d)) + d)
        out.flush()
PY
cpid=$!
pids+=("$cpid")
for _ in $(seq 100); do [ -e "$tmp/capturing" ] && break; sleep 0.05; done
[ -e "$tmp/capturing" ] || fail "the capture listener did not start"
start_numerical rec-wait "$cport" --connect-timeout 4.5
wait_status "$last_pid"
[ "$rc" = 1 ] || fail "recording: the waiting numerical site exit $rc (1 expected: no answer)"
for i in $(seq 1 12); do
    start_numerical "rec-$i" "$cport" --connect-timeout 0.1
    wait_status "$last_pid"
    [ "$rc" = 1 ] || fail "recording: numerical site $i exit $rc (1 expected: no answer)"
done
touch "$tmp/capture.stop"
wait "$cpid" || true

# replay MODE HOST PORT: the replayer in the background until $tmp/replay.stop (at most 60 s):
# MODE wait: the waiting session's HELLOs, a different one every 0.8 s; MODE chain: one HELLO of
# each of the 12 other sessions, round robin, 1000 per second. It creates $tmp/replaying once
# it has sent its first (wait) or first 200 (chain), and writes $tmp/replay.json at the end.
replay() {
    rm -f "$tmp/replay.stop" "$tmp/replaying" "$tmp/replay.json"
    python3 - "$tmp" "$1" "$2" "$3" <<'PY' &
import json, os, socket, struct, sys, time
tmp, mode, host, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
data = open(f"{tmp}/hellos.bin", "rb").read()
sessions, i = {}, 0
while i + 4 <= len(data):
    (n,) = struct.unpack_from("<I", data, i)
    d = data[i + 4:i + 4 + n]
    i += 4 + n
    sessions.setdefault(d[8:16], []).append(d)
ordered = sorted(sessions.values(), key=len, reverse=True)
if mode == "wait":
    hellos, gap, ready = ordered[0], 0.8, 1
else:
    hellos, gap, ready = [v[0] for v in ordered[1:]], 0.001, 200
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
sent, t0 = 0, time.monotonic()
while not os.path.exists(f"{tmp}/replay.stop") and time.monotonic() - t0 < 60:
    s.sendto(hellos[sent % len(hellos)], (host, port))
    sent += 1
    if sent == ready:
        open(f"{tmp}/replaying", "w").close()
    time.sleep(gap)
json.dump({"sessions": len(sessions), "hellos": len(hellos), "sent": sent},
          open(f"{tmp}/replay.json", "w"))
PY
    rpid=$!
    pids+=("$rpid")
    for _ in $(seq 100); do [ -e "$tmp/replaying" ] && break; sleep 0.05; done
    [ -e "$tmp/replaying" ] || fail "$1: the replayer did not start (no HELLO captured?)"
}

# A free UDP port on ::1.
free_port6() {
    python3 -c 'import socket; s=socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.bind(("::1", 0)); print(s.getsockname()[1])'
}

# one_case NAME MODE [HOST]: a fresh actuator site on HOST (127.0.0.1, or ::1), the replayer,
# then the real numerical site; the sites' options are tests/lib.sh's.
one_case() {
    local name=$1 mode=$2 host=${3:-127.0.0.1} pport addr nrc prc
    if [ "$host" = ::1 ]; then pport=$(free_port6); addr="[::1]:$pport"; else
        pport=$(free_port); addr="$host:$pport"; fi
    timeout 90 "$bdir/drths-physical" --experiment "$tmp/exp.yaml" --listen "$addr" \
        --wait-timeout 20 --out "$tmp/$name-phys" --quiet >"$tmp/$name-phys.out" 2>"$tmp/$name-phys.err" &
    local ppid=$!
    pids+=("$ppid")
    for _ in $(seq 100); do [ -n "$(ss -Hlun "sport = :$pport" 2>/dev/null)" ] && break; sleep 0.1; done
    replay "$mode" "$host" "$pport"
    [ "$mode" = wait ] && sleep 0.3 # the next replay comes 0.5 s after the real first HELLO
    timeout 90 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --peer "$addr" \
        --connect-timeout 10 --out "$tmp/$name-num" --quiet >"$tmp/$name-num.out" 2>"$tmp/$name-num.err" &
    local npid=$!
    pids+=("$npid")
    wait_status "$npid"
    nrc=$rc
    wait_status "$ppid"
    prc=$rc
    touch "$tmp/replay.stop"
    wait "$rpid" || true
    echo "$name: drths-numerical exit $nrc ($(summary "$tmp/$name-num" exit_reason)), drths-physical exit $prc ($(summary "$tmp/$name-phys" exit_reason))"
    [ "$nrc" = 0 ] || fail "$name: drths-numerical exit $nrc (the replayed HELLOs kept it from starting)"
    [ "$prc" = 0 ] || fail "$name: drths-physical exit $prc"
    python3 - "$tmp" "$name" "$mode" <<'PY' || fail "$name: checks failed"
import json, sys
tmp, name, mode = sys.argv[1:]
from checks import check, status
rep = json.load(open(f"{tmp}/replay.json"))
num = json.load(open(f"{tmp}/{name}-num/summary.json"))
phys = json.load(open(f"{tmp}/{name}-phys/summary.json"))
hs, rej = num["handshake"], phys["rejects"]
start = hs.get("start_after_first_hello_s")
print(f"     replay: {rep['sent']} datagrams of {rep['hellos']} HELLO(s) "
      f"({rep['sessions']} sessions captured); site rejects {rej}")
print(f"     the real numerical site: {hs['hellos_sent']} HELLO(s), started "
      f"{start if start is None else round(start, 3)} s after its first")
check(rep["sessions"] == 13, f"13 sessions captured: {rep['sessions']}")
# The replayer's own floor (3 at 0.8 s, 200 before the real site starts); its rate during the
# run depends on the machine (973 in 1.3 s under TSan), so the flood's reach into the run is
# checked by the site's HELLO_RUNNING count below, not by a count of datagrams sent.
check(rep["sent"] >= (3 if mode == "wait" else 200), f"replayed {rep['sent']} HELLOs")
check(start is not None and start < 2.0, f"the run started within 2 s of the first HELLO: {start}")
check(num["exit_reason"] == "end of record", f"numerical site: {num['exit_reason']}")
check(phys["exit_reason"] == "end of record", f"actuator site: {phys['exit_reason']}")
check(not phys["hold"]["active"], "no HOLD at the actuator site")
check(rej.get("HELLO_PINNED", 0) == 0, "the real site's HELLO was never pinned out")
check(rej.get("HELLO_RUNNING", 0) > 0 or mode == "wait", "HELLOs during the run dropped")
ho = phys["half_open"]
print(f"     actuator site: {ho['answered']} HELLO(s) answered as half-open sessions, "
      f"{ho['pushed_out']} pushed out")
check(ho["answered"] == (2 if mode == "wait" else 13),
      f"the replayed session(s) and the real one answered: {ho['answered']}")
sys.exit(status())
PY
    check_records "$tmp/$name-phys" physical
    check_records "$tmp/$name-num" numerical
}

one_case replay-every-0.8s wait
one_case chained-12 chain
if python3 -c 'import socket; socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).bind(("::1", 0))' 2>/dev/null; then
    one_case replay-every-0.8s-ipv6 wait ::1
    one_case chained-12-ipv6 chain ::1
else
    echo "IPv6 loopback (::1) is not available here: the two cases ran over IPv4 only"
fi
echo PASS
