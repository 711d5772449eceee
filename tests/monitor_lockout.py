"""The monitor lock-out attack of issue 29 (case 3) and the operator's view of it, for
tests/fault/test_monitor_lockout.sh and for measuring beyond it. Found on PYTHONPATH like
checks.py.

    python3 tests/monitor_lockout.py PORT TELEMETRY TOKEN NAME [options]

A stand-in site (monitor_site.Site) sends telemetry to TELEMETRY at 50 Hz and executes control.
Attackers, each a thread that reconnects at once whenever the server drops it: --local-readers
event readers from the page's own address (the operator's), and on each --others address
--readers-per-other readers and --slow-per-other slow clients (a partial request, then a header
line every 0.5 s, never finished and never with the token; readers send the token when there is
one). The attackers run in a process of their own, so that they take no time from the
operator's requests but the machine's. When every attacker has made its first attempt, the operator loads the page, opens its
event stream, presses Abort and waits for the site's acknowledgement, all within 1 s (checked).
With --check-deadline it then waits until every slow client's first connection was dropped,
checks that it was at the 3 s request deadline, and repeats the operator's round."""
import argparse
import multiprocessing
import socket
import sys
import threading
import time

from checks import check, status
from monitor_site import REHEARSAL_PSK, Site, monitor_key

ap = argparse.ArgumentParser()
ap.add_argument("port", type=int)
ap.add_argument("tlm")
ap.add_argument("token")
ap.add_argument("name")
ap.add_argument("--page-host", default="127.0.0.1", help="the page's (and operator's) address")
ap.add_argument("--local-readers", type=int, default=16)
ap.add_argument("--others", default="127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5")
ap.add_argument("--readers-per-other", type=int, default=8)
ap.add_argument("--slow-per-other", type=int, default=8)
ap.add_argument("--check-deadline", action="store_true")
ap.add_argument("--rounds", type=int, default=1, help="operator rounds under attack, 0.5 s apart")
args = ap.parse_args()
port, tlm, token, name = args.port, args.tlm, args.token, args.name
PAGE = args.page_host
FAMILY = socket.AF_INET6 if ":" in PAGE else socket.AF_INET
HOST_HDR = f"[{PAGE}]" if FAMILY == socket.AF_INET6 else PAGE
tok_hdr = f"X-Drths-Token: {token}\r\n" if token else ""
stop = multiprocessing.Event()

# A stand-in site at 50 Hz that executes control and acknowledges it in its next frame.
site = Site("physical", tlm, monitor_key(REHEARSAL_PSK))


def run_site():
    while not stop.is_set():
        site.poll()
        site.send(state="RUN", tick=site.seq)
        stop.wait(0.02)


first = multiprocessing.Semaphore(0)    # one release per attacker after its first attempt
dropped = multiprocessing.Semaphore(0)  # one release per slow client when its first connection ends
held = multiprocessing.Queue()          # how long each slow client's first connection lasted (s)
tried = multiprocessing.Queue()         # the connections each kind made, when the attack ends


def attacker(kind, src, tries):
    """Keeps one connection from src busy: reads /events, or trickles a request it never ends;
    reconnects at once whenever the server drops it."""
    released = timed = False
    while not stop.is_set():
        t_open = time.monotonic()
        s = socket.socket(FAMILY, socket.SOCK_STREAM)
        try:
            s.settimeout(0.5)
            s.bind((src, 0))
            s.connect((PAGE, port))
            if kind == "reader":
                s.sendall(f"GET /events HTTP/1.1\r\nHost: {HOST_HDR}\r\n{tok_hdr}\r\n".encode())
                got = s.recv(64)
            else:
                s.sendall(f"GET /sites HTTP/1.1\r\nHost: {HOST_HDR}\r\n".encode())
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
            held.put(time.monotonic() - t_open)
            dropped.release()


def attack(clients):
    """The attackers' process: a thread per client until stop."""
    tries = {"reader": 0, "slow": 0}
    threads = [threading.Thread(target=attacker, args=c + (tries,), daemon=True) for c in clients]
    for t in threads:
        t.start()
    stop.wait()
    for t in threads:
        t.join(timeout=2)
    tried.put(tries)


clients = [("reader", PAGE)] * args.local_readers
for o in filter(None, args.others.split(",")):
    clients += [("reader", o)] * args.readers_per_other + [("slow", o)] * args.slow_per_other
n_slow = sum(kind == "slow" for kind, _ in clients)
attackers = multiprocessing.Process(target=attack, args=(clients,), daemon=True)
attackers.start()
threading.Thread(target=run_site, daemon=True).start()
t_end = time.monotonic() + 15
ready = sum(first.acquire(timeout=max(0.0, t_end - time.monotonic())) for _ in clients)
check(ready == len(clients), f"{name}: all {len(clients)} clients made their first attempt ({ready})")


def ask(method, path, deadline, extra="", want_body=True):
    """(status, head and body so far) of one request from the operator's address by the
    deadline, or (None, reason)."""
    try:
        s = socket.create_connection((PAGE, port),
                                     timeout=max(0.01, deadline - time.monotonic()),
                                     source_address=(PAGE, 0))
    except OSError as e:
        return None, repr(e)
    try:
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: {HOST_HDR}\r\n{tok_hdr}{extra}"
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
    s_body = s_body if isinstance(s_body, bytes) else b""  # the reason when unanswered
    http = s_body[s_body.find(b'"http"'):].strip().decode(errors="replace")
    print(f"{name}, {when}: {http}")

for k in range(args.rounds):
    if k:
        stop.wait(0.5)
    operator("under attack" if args.rounds == 1 else f"under attack, round {k + 1}", k + 1)
if args.check_deadline:
    # The slow clients trickle a header line every 0.5 s, so no idle time-out ends them; the
    # whole request's deadline (3 s) must.
    t_end = time.monotonic() + 6
    n = sum(dropped.acquire(timeout=max(0.0, t_end - time.monotonic())) for _ in range(n_slow))
    times = [held.get(timeout=1) for _ in range(n)]
    check(n == n_slow and all(2.5 <= h <= 3.5 for h in times),
          f"{name}: every slow request was dropped at its 3 s deadline ({n} of {n_slow}, held "
          f"{min(times, default=0):.2f} to {max(times, default=0):.2f} s)")
    operator("after the deadline", args.rounds + 1)
stop.set()
try:
    print(f"{name}: attack connections made: {tried.get(timeout=5)}")
except Exception:
    print(f"{name}: the attackers did not say how many connections they made")
attackers.join(timeout=5)
if attackers.is_alive():
    attackers.kill()
sys.exit(status())
