#!/usr/bin/env bash
# Finding (issue 29, case 3): drths-monitor could be locked. 16 clients reading GET /events from
# 127.0.0.1 took that address's 16 connections, so the operator on 127.0.0.1 could neither load
# the page nor send Abort; 64 more from four other addresses took the 64 in all; with --token,
# token-less partial requests held the slots as well. Now: the operator on 127.0.0.1, with 16
# event readers on its own address and, on each of 127.0.0.2..5, 8 event readers and 8 slow
# partial requests (a header line every 0.5 s, never finished, never with the token), all of
# which reconnect as soon as they are dropped: the page loads, the event stream opens, and
# POST /control/abort is answered and acknowledged by a stand-in site within 1 s; then every slow
# request is dropped at the whole request's 3 s deadline (2.5 to 3.5 s after it opened: its
# header every 0.5 s keeps libmicrohttpd's idle time-out from doing it) and the operator's round
# is repeated. Run without and with --token (the readers have the token: the operator's own
# forgotten tabs, the worst case). The attack and the checks: tests/monitor_lockout.py. Bounded: the attack is measured ready by condition (every client has made its first
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
    timeout 50 python3 "$src/tests/monitor_lockout.py" "$port" "$tlm" "$token" "$name" \
        --check-deadline || fail "the operator was locked out ($name)"
    stop_cleanly "$mpid" drths-monitor
}

run_case open
run_case token --token "$tmp/page.token"
echo "PASS"
