# Shared by the fault and monitor shell tests (sourced, not a test itself): a temporary folder, the
# default experiment shortened for a test, free ports, starting the sites and the checks every
# fault test makes on the records. Every process runs under `timeout`, so no test can hang.
# Exit status of a test: 0 passed, 77 skipped (`skip`: it cannot run here; ctest's
# SKIP_RETURN_CODE), anything else failed (`fail`).
set -euo pipefail
bdir=$1
src=${DRTHS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
export PYTHONPATH="$src/tests${PYTHONPATH:+:$PYTHONPATH}" # tests/checks.py
tmp=$(mktemp -d)
pids=()
cleanup() {
    # pids are `timeout` processes: kill what runs under them too.
    for p in "${pids[@]}"; do
        for c in $(pgrep -P "$p" 2>/dev/null); do kill -9 "$c" 2>/dev/null || true; done
        kill -9 "$p" 2>/dev/null || true
    done
    if [ -n "${DRTHS_KEEP_TMP:-}" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*" >&2
    for f in "$tmp"/*.out "$tmp"/*.err "$tmp"/*/*.out "$tmp"/*/*.err; do
        [ -f "$f" ] && { echo "--- $f" >&2; tail -n 40 "$f" | sed 's/^/  | /' >&2; }
    done
    exit 1
}

# skip REASON: the test cannot run on this machine (no root, a program missing): one line saying
# why, and exit 77, which ctest reports as skipped, not passed.
skip() {
    echo "SKIPPED: $*"
    exit 77
}

# make_experiment DURATION_S [sed expressions...]: $tmp/exp.yaml, the default experiment with a
# DURATION_S record, no tail, its output in $tmp and timing headroom for a shared test machine:
# on a loaded 2-CPU virtual machine the actuator site's SCHED_FIFO thread was seen stalled for up
# to 9 ms, which with the default 2 ms reorder wait and L = 3 ms on loopback is (correctly)
# concealment or HOLD, not what the tests are about; a 20 ms safety margin and a 10 ms reorder
# wait absorb such stalls, and a 200 ms stall bound (physical.max_tick_late_ms) keeps them from
# being a HOLD (fault.stall stops the site for 0.5 s and 3 s, beyond it).
# $DRTHS_TEST_MAX_TICK_LATE_MS replaces the 200 ms (tools/test --sanitize thread: ThreadSanitizer
# stalls the sites' threads for hundreds of ms under a flood). The record path is relative, so the records folder is linked beside
# it. Further sed expressions edit other fields.
make_experiment() {
    local d=$1 stall_ms=${DRTHS_TEST_MAX_TICK_LATE_MS:-200}
    shift
    local extra=()
    for e in "$@"; do extra+=(-e "$e"); done
    ln -sfn "$src/examples/records" "$tmp/records"
    sed -e "s/^  duration_s: 0 .*/  duration_s: $d/" -e 's/^  tail_s: .*/  tail_s: 0/' \
        -e 's/^  safety_margin_ticks: .*/  safety_margin_ticks: 100/' \
        -e 's/^  reorder_ticks: .*/  reorder_ticks: 50/' \
        -e "s/^  max_tick_late_ms: .*/  max_tick_late_ms: $stall_ms/" \
        -e "s|^  directory: .*|  directory: $tmp/runs|" \
        "$src/examples/three-story-elcentro.yaml" >"$tmp/exp.yaml"
    grep -q "^  duration_s: $d\$" "$tmp/exp.yaml" && grep -q '^  reorder_ticks: 50$' "$tmp/exp.yaml" &&
        grep -q "^  max_tick_late_ms: $stall_ms\$" "$tmp/exp.yaml" &&
        grep -q '^  safety_margin_ticks: 100$' "$tmp/exp.yaml" || fail "could not edit the experiment"
    # The test's own edits come after (they may change the headroom too).
    [ ${#extra[@]} -eq 0 ] || sed -i "${extra[@]}" "$tmp/exp.yaml"
}

# A free UDP port on 127.0.0.1 (the kernel picks it).
free_port() {
    python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_physical NAME PORT [options]: the actuator site in the background; pid in $last_pid.
start_physical() {
    local name=$1 port=$2
    shift 2
    timeout 90 "$bdir/drths-physical" --experiment "$tmp/exp.yaml" --listen "127.0.0.1:$port" \
        --wait-timeout 20 --out "$tmp/$name" --quiet "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    last_pid=$!
    pids+=("$last_pid")
}

# start_openfresco NAME EXPERIMENT [options]: drths-physical --openfresco on 127.0.0.1 in the
# background, on a port it picks itself (127.0.0.1:0) and prints; its output in $tmp/NAME.out
# and $tmp/NAME.err, its pid in $last_pid (also in pids), the port in $port.
start_openfresco() {
    local name=$1 exp=$2
    shift 2
    timeout 60 "$bdir/drths-physical" --experiment "$exp" --openfresco 127.0.0.1:0 "$@" \
        >"$tmp/$name.out" 2>"$tmp/$name.err" &
    last_pid=$!
    pids+=("$last_pid")
    port=
    for _ in $(seq 200); do
        port=$(sed -n 's/.*listening on TCP 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.out" |
            head -n 1)
        [ -n "$port" ] && break
        sleep 0.05
    done
    [ -n "$port" ] || fail "$name: the site did not say which port it listens on"
}

# start_numerical NAME PEER_PORT [options]: the numerical site in the background.
start_numerical() {
    local name=$1 port=$2
    shift 2
    timeout 90 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --peer "127.0.0.1:$port" \
        --connect-timeout 10 --out "$tmp/$name" --quiet "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    last_pid=$!
    pids+=("$last_pid")
}

# wait_status PID: its exit status in $rc, without tripping set -e (not in a $(...): a
# subshell cannot wait for its parent's children).
wait_status() {
    rc=0
    wait "$1" || rc=$?
}

# stop_cleanly PID WHAT: SIGTERM to PID, which must then exit 0.
stop_cleanly() {
    kill -TERM "$1"
    wait_status "$1"
    [ "$rc" -eq 0 ] || fail "$2 exit $rc after SIGTERM"
}

# record_rows CSV: the data rows of a site's record so far. During the run the record is the
# binary stream beside the CSV (NAME.bin: a text header of header_bytes, then row_bytes per row;
# common/platform/recorder.h); the CSV is written from it when the site ends.
record_rows() {
    local csv=$1 bin=${1%.csv}.bin hb rb size
    if [ -f "$csv" ]; then echo $(($(wc -l <"$csv") - 1)); return; fi
    if [ ! -f "$bin" ]; then echo 0; return; fi
    hb=$(head -c 4096 "$bin" | sed -n 's/^header_bytes //p')
    rb=$(head -c 4096 "$bin" | sed -n 's/^row_bytes //p')
    size=$(stat -c %s "$bin")
    [ -n "$hb" ] && [ -n "$rb" ] && [ "$size" -ge "$hb" ] && echo $(((size - hb) / rb)) || echo 0
}

# Waits (bounded) until a site's run has started: its record has more than MIN_ROWS rows.
wait_rows() {
    local csv=$1 min=$2 limit=${3:-30}
    local end=$((SECONDS + limit))
    while [ $SECONDS -lt $end ]; do
        if [ "$(record_rows "$csv")" -gt "$min" ]; then return 0; fi
        sleep 0.05
    done
    fail "$csv did not reach $min rows within $limit s"
}

# check_records DIR KIND: summary.json exists and the CSV has one row per tick/step from 0 to
# its last row with no gap (KIND physical: column tick; numerical: column step).
check_records() {
    python3 - "$1" "$2" <<'PY' || fail "records of $1 incomplete"
import csv, json, sys, os
d, kind = sys.argv[1], sys.argv[2]
s = json.load(open(os.path.join(d, "summary.json")))
col = "tick" if kind == "physical" else "step"
rows = list(csv.DictReader(open(os.path.join(d, kind + ".csv"))))
ticks = [int(float(r[col])) for r in rows]
ok = ticks == list(range(len(ticks))) and len(ticks) > 0
print(f"{'ok  ' if ok else 'FAIL'} {d}: {len(ticks)} rows, every {col} 0..{len(ticks) - 1}, "
      f"summary exit_code {s.get('exit_code')}: {s.get('exit_reason')}")
if kind == "physical":
    dropped = s["recorder"]["dropped_rows"]
    ok = ok and dropped == 0 and s["recorder"]["rows"] == len(ticks)
    print(f"{'ok  ' if ok else 'FAIL'} recorder: {s['recorder']['rows']} rows, {dropped} dropped")
sys.exit(0 if ok else 1)
PY
}

# start_impair NAME LISTEN_PORT TARGET_PORT [drths-impair options]: the impairment relay in the
# background (pid in $last_pid), at real-time priority 70, below the sites' 80, for the reason
# given in tools/attack/main.c: on a loaded machine an ordinary process is descheduled for
# tens of ms, which the sites would see as an outage the test did not ask for.
# report OUT ARGS...: drths-report ARGS for the figures a test checks itself, its output (stdout
# and stderr) in the file OUT. Exit 0 (PASS) and exit 1 with a FAIL verdict both give the
# figures; a gap in a record (the records must be complete), a wrong file or a crash fails the
# test.
report() {
  local out=$1 rc=0
  shift
  timeout 60 "$bdir/drths-report" "$@" >"$out" 2>&1 || rc=$?
  grep -q "GAP:" "$out" && fail "drths-report found a gap in a record ($out)"
  [ "$rc" = 0 ] || [ "$rc" = 1 ] || fail "drths-report exit $rc ($out)"
  [ "$rc" = 0 ] || grep -q "FAIL" "$out" || fail "drths-report exit 1 without a FAIL verdict ($out)"
}

start_impair() {
    local name=$1 lport=$2 tport=$3
    shift 3
    timeout 90 "$bdir/drths-impair" --listen "127.0.0.1:$lport" --target "127.0.0.1:$tport" \
        --rt-priority 70 --stats "$tmp/$name.json" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    last_pid=$!
    pids+=("$last_pid")
}

# child_of PID: the process `timeout` runs (to signal the site itself, e.g. kill -9).
child_of() {
    local c=""
    for _ in $(seq 100); do
        c=$(pgrep -P "$1" | head -n 1 || true)
        [ -n "$c" ] && { echo "$c"; return 0; }
        sleep 0.01
    done
    fail "no child process under $1"
}

# summary FILE EXPR: a value out of a summary.json, e.g. summary "$tmp/phys" 'hold.reason_code'.
summary() {
    python3 -c 'import json,sys
v = json.load(open(sys.argv[1] + "/summary.json"))
for k in sys.argv[2].split("."):
    v = v.get(k) if isinstance(v, dict) else None
print(v)' "$1" "$2"
}

# start_attack_relay NAME LISTEN_PORT TARGET_PORT [drths-attack options]: the on-path attacker
# and forwarder drths-attack (tools/attack) in the background (pid in $last_pid, its report in
# $tmp/NAME.json).
start_attack_relay() {
    local name=$1 lport=$2 tport=$3
    shift 3
    timeout 90 "$bdir/drths-attack" --listen "127.0.0.1:$lport" \
        --target "127.0.0.1:$tport" --report "$tmp/$name.json" "$@" \
        >"$tmp/$name.out" 2>"$tmp/$name.err" &
    last_pid=$!
    pids+=("$last_pid")
}

# need_browser: skips the test (77) unless node and /usr/bin/chromium are here, then builds the
# monitor's page into $bdir/web with tools/web-build (npm ci into web/node_modules when it is
# missing; the browser driver, puppeteer-core, comes from there too).
need_browser() {
    command -v node >/dev/null || skip "node is missing (tools/deps installs it)"
    [ -x /usr/bin/chromium ] || skip "/usr/bin/chromium is missing (tools/deps --test installs it)"
    DRTHS_BUILD_DIR=$bdir "$src/tools/web-build" >"$tmp/web-build.out" 2>&1 ||
        fail "tools/web-build failed"
    [ -f "$bdir/web/index.html" ] && [ -f "$bdir/web/uPlot.iife.min.js" ] || fail "no page in $bdir/web"
}

# start_monitor [drths-monitor options]: drths-monitor on 127.0.0.1 serving $bdir/web, on ports
# it picks itself and prints; its pid in $mpid (also in pids), the page's address in $url and
# the telemetry address the sites' --monitor takes in $tlm.
start_monitor() {
    timeout 180 "$bdir/drths-monitor" --listen 127.0.0.1:0 --telemetry 127.0.0.1:0 \
        --web "$bdir/web" "$@" >"$tmp/monitor.out" 2>"$tmp/monitor.err" &
    mpid=$!
    pids+=("$mpid")
    for _ in $(seq 100); do grep -q "telemetry udp" "$tmp/monitor.out" 2>/dev/null && break; sleep 0.05; done
    url=$(sed -n 's|^drths-monitor: page \(http://[^ ]*\).*|\1|p' "$tmp/monitor.out")
    tlm=$(sed -n 's|^drths-monitor: telemetry udp \([^ ]*\) .*|\1|p' "$tmp/monitor.out")
    [ -n "$url" ] && [ -n "$tlm" ] || fail "drths-monitor did not print its addresses"
    echo "monitor: $url, telemetry $tlm"
}

# run_e2e NAME [ACTUATOR_SITES]: tests/browser/monitor_e2e.js against the monitor's page ($url)
# (with ACTUATOR_SITES, comma-separated, for a file with several sites); the screenshot is
# $shot (<build>/test-artifacts/NAME.png), the script's exit $erc, its output printed.
run_e2e() {
    local art="$bdir/test-artifacts"
    shot="$art/$1.png"
    mkdir -p "$art"
    rm -f "$shot"
    erc=0
    NODE_PATH="$src/web/node_modules" timeout 150 node "$src/tests/browser/monitor_e2e.js" "$url" \
        "$shot" ${2:+"$2"} >"$tmp/e2e.out" 2>"$tmp/e2e.err" || erc=$?
    cat "$tmp/e2e.out"
}

# open_page SCREENSHOT: the monitor's page ($url) open in headless Chromium
# (tests/browser/monitor_watch.js) until close_page; returns once the page script runs. Its pid
# is in $page_pid, its output in $tmp/page.out.
open_page() {
    rm -f "$tmp/page.stop" "$1"
    NODE_PATH="$src/web/node_modules" timeout 180 node "$src/tests/browser/monitor_watch.js" \
        "$url" "$tmp/page.stop" "$1" >"$tmp/page.out" 2>"$tmp/page.err" &
    page_pid=$!
    pids+=("$page_pid")
    local end=$((SECONDS + 60))
    until grep -q "^page open" "$tmp/page.out" 2>/dev/null; do
        kill -0 "$page_pid" 2>/dev/null || fail "the browser ended before the page opened"
        [ $SECONDS -lt $end ] || fail "the page did not open within 60 s"
        sleep 0.1
    done
}

# close_page: tells the browser to close the page; its exit status in $rc and its one JSON line
# (frames per site, chart points, errors) in $tmp/page.json.
close_page() {
    touch "$tmp/page.stop"
    wait_status "$page_pid"
    tail -n 1 "$tmp/page.out" >"$tmp/page.json"
}

# wait_bound PORT: until a UDP socket is bound to PORT (at most 10 s), so that no check runs
# against a site that is not listening yet.
wait_bound() {
    for _ in $(seq 1 100); do
        [ -n "$(ss -Hlun "sport = :$1" 2>/dev/null)" ] && return 0
        sleep 0.1
    done
    fail "nothing listens on UDP port $1 after 10 s"
}

# expect_checks FILE NAME...: each drths-conform check NAME has a PASS line in FILE and no check
# FAILed.
expect_checks() {
    local f=$1
    shift
    for n in "$@"; do
        grep -q "^PASS $n: " "$f" || fail "no 'PASS $n' in $f"
    done
    ! grep -q '^FAIL ' "$f" || fail "FAIL lines in $f"
}

# start_sites EXP SITE...: a file with sites run live: one drths-physical per SITE (--site, run
# folder $tmp/SITE, its pid in pid_SITE), then drths-numerical (run folder $tmp/num, pid in npid).
start_sites() {
    local exp=$1 lab
    shift
    for lab in "$@"; do
        timeout 90 "$bdir/drths-physical" --experiment "$exp" --site "$lab" \
            --wait-timeout 20 --out "$tmp/$lab" --quiet >"$tmp/$lab.out" 2>"$tmp/$lab.err" &
        pids+=("$!")
        eval "pid_$lab=$!"
    done
    timeout 90 "$bdir/drths-numerical" --experiment "$exp" --connect-timeout 10 \
        --out "$tmp/num" --quiet >"$tmp/num.out" 2>"$tmp/num.err" &
    npid=$!
    pids+=("$npid")
}
