#!/usr/bin/env bash
# Finding (issue 29, case 3): drths-monitor could be locked. 16 clients reading GET /events from
# 127.0.0.1 took that address's 16 connections, so the operator on 127.0.0.1 could neither load
# the page nor send Abort; 64 more from four other addresses took the 64 in all; with --token,
# token-less partial requests held the slots as well. Now: the operator on 127.0.0.1, with 16
# event readers on its own address and, on each of 127.0.0.2..5, 8 event readers and 8 slow
# partial requests (a header line every 0.5 s, never finished, never with the token), all of
# which reconnect as soon as they are dropped: the page loads, the event stream opens, and
# POST /control/abort is answered and acknowledged by a stand-in site within 1 s. Run without
# and with --token (the readers have the token: the operator's own forgotten tabs, the worst
# case). Bounded: the attack is measured ready by condition (every client has made its first
# attempt), every request has a deadline, and the clients stop by themselves.
source "$(dirname "$0")/../lib.sh"
mkdir -p "$tmp/web"
echo '<!DOCTYPE html><title>t</title>' >"$tmp/web/index.html"
echo 's3cret-page' >"$tmp/page.token"

run_case() { # run_case NAME [monitor options]
    local name=$1
    shift
    timeout 60 "$bdir/drths-monitor" --listen 127.0.0.1:0 --telemetry 127.0.0.1:0 --web "$tmp/web" \
        "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    local mpid=$!
    pids+=("$mpid")
    for _ in $(seq 100); do grep -q "telemetry udp" "$tmp/$name.out" 2>/dev/null && break; sleep 0.05; done
    local port tlm
    port=$(sed -n 's|^drths-monitor: page http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$tmp/$name.out")
    tlm=$(sed -n 's|^drths-monitor: telemetry udp \([^ ]*\) .*|\1|p' "$tmp/$name.out")
    [ -n "$port" ] && [ -n "$tlm" ] || fail "drths-monitor did not print its addresses ($name)"
    local token=""
    [ $# -eq 0 ] || token=s3cret-page
    timeout 50 python3 - "$port" "$tlm" "$token" "$name" <<'PY' || fail "the operator was locked out ($name)"
import socket, sys, threading, time
from checks import check, status
from monitor_site import REHEARSAL_PSK, Site, monitor_key
port, tlm, token, name = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
tok_hdr = f"X-Drths-Token: {token}\r\n" if token else ""
stop = threading.Event()

# A stand-in site at 50 Hz that executes control and acknowledges it in its next frame.
site = Site("physical", tlm, monitor_key(REHEARSAL_PSK))
def run_site():
    while not stop.is_set():
        site.poll()
        site.send(state="RUN", tick=site.seq)
        stop.wait(0.02)
threading.Thread(target=run_site, daemon=True).start()

first = threading.Semaphore(0)  # one release per attacker after its first attempt
dropped = threading.Semaphore(0)  # one release per slow client when its first connection ends
held = []                         # how long each slow client's first connection lasted (s)
tries = {"reader": 0, "slow": 0}
def attacker(kind, src):
    """Keeps one connection from src busy: reads /events, or trickles a request it never ends;
    reconnects at once whenever the server drops it."""
    released = timed = False
    while not stop.is_set():
        t_open = time.monotonic()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.settimeout(0.5)
            s.bind((src, 0))
            s.connect(("127.0.0.1", port))
            if kind == "reader":
                s.sendall(f"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n{tok_hdr}\r\n".encode())
                got = s.recv(64)
            else:
                s.sendall(b"GET /sites HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                got = b"trickling"
            tries[kind] += 1
            if not released:
                first.release()
                released = True
            while got and not stop.is_set():
                try:
                    if kind == "slow":  # a header line, then 0.5 s listening for the end
                        s.sendall(b"X-Slow: 1\r\n")
                        got = s.recv(64)
                    else:
                        got = s.recv(65536)
                except socket.timeout:
                    pass
        except OSError:
            if not released:
                first.release()
                released = True
            stop.wait(0.01)
        finally:
            s.close()
        if kind == "slow" and not timed and not stop.is_set():
            timed = True  # how long the server kept this client's first connection
            held.append(time.monotonic() - t_open)
            dropped.release()

clients = [("reader", "127.0.0.1")] * 16
for i in range(2, 6):
    clients += [("reader", f"127.0.0.{i}")] * 8 + [("slow", f"127.0.0.{i}")] * 8
threads = [threading.Thread(target=attacker, args=c, daemon=True) for c in clients]
for t in threads:
    t.start()
t_end = time.monotonic() + 15
ready = sum(first.acquire(timeout=max(0.0, t_end - time.monotonic())) for _ in clients)
check(ready == len(clients), f"{name}: all {len(clients)} clients made their first attempt ({ready})")

def ask(method, path, deadline, extra="", want_body=True):
    """(status, head and body so far) of one request from 127.0.0.1 by the deadline, or
    (None, reason)."""
    try:
        s = socket.create_connection(("127.0.0.1", port),
                                     timeout=max(0.01, deadline - time.monotonic()),
                                     source_address=("127.0.0.1", 0))
    except OSError as e:
        return None, repr(e)
    try:
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{tok_hdr}{extra}"
                  "Connection: close\r\nContent-Length: 0\r\n\r\n".encode())
        data = b""
        while time.monotonic() < deadline:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            if not want_body and b"\r\n\r\n" in data:
                break
        if not data.startswith(b"HTTP/1.1 "):
            return None, f"no answer: {data[:80]!r}"
        return int(data[9:12]), data
    except OSError as e:
        return None, repr(e)
    finally:
        s.close()

def operator(when, n_abort):
    """The operator loads the page, opens its event stream, presses Abort and sees it
    acknowledged, all within 1 s."""
    t0 = time.monotonic()
    deadline = t0 + 1.0
    st, page = ask("GET", "/", deadline)
    t_page = time.monotonic() - t0
    st_ev, _ = ask("GET", "/events", deadline, want_body=False)
    st_ab, body = ask("POST", "/control/abort", deadline, "X-Drths-Control: 1\r\n")
    t_abort = time.monotonic() - t0
    acked, s_body = None, b""
    while st_ab == 200 and time.monotonic() < deadline:
        s_st, s_body = ask("GET", "/sites", deadline)
        if s_st == 200 and b'"status":"acknowledged"' in s_body:
            acked = time.monotonic() - t0
            break
    check(st == 200 and b"<title>t</title>" in page,
          f"{name}, {when}: the page loads ({st}, {t_page:.3f} s)")
    check(st_ev == 200, f"{name}, {when}: the page's event stream opens ({st_ev})")
    check(st_ab == 200 and b'"sent_to":["physical"]' in body,
          f"{name}, {when}: Abort is answered ({st_ab}, {t_abort:.3f} s)")
    check(acked is not None and acked <= 1.0, f"{name}, {when}: Abort is acknowledged within "
          f"1 s ({acked if acked is None else round(acked, 3)} s)")
    check(site.executed == ["abort"] * n_abort,
          f"{name}, {when}: the site executed each Abort once ({site.executed})")
    http = s_body[s_body.find(b'"http"'):].strip().decode(errors="replace")
    print(f"{name}, {when}: {http}")

operator("under attack", 1)
# The slow clients trickle a header line every 0.5 s, so no idle time-out ends them; the whole
# request's deadline (3 s) must.
t_end = time.monotonic() + 6
n = sum(dropped.acquire(timeout=max(0.0, t_end - time.monotonic())) for _ in range(32))
check(n == 32 and all(2.5 <= h <= 3.5 for h in held),
      f"{name}: every slow request was dropped at its 3 s deadline ({n} of 32, held "
      f"{min(held, default=0):.2f} to {max(held, default=0):.2f} s)")
operator("after the deadline", 2)
print(f"{name}: attack connections made: {tries}")
stop.set()
for t in threads:
    t.join(timeout=2)
sys.exit(status())
PY
    stop_cleanly "$mpid" drths-monitor
}

run_case open
run_case token --token "$tmp/page.token"
echo "PASS"
