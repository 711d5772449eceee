#!/usr/bin/env bash
# drths-conform against this implementation's own sites, both roles, and once against something
# that is not a drths site, to prove the suite can fail:
#   1. --role numerical against drths-physical: every check passes (exit 0), the site ends its
#      run with exit 0 after the suite's STOP;
#   2. --role physical against drths-numerical: every check passes, both exit 0;
#   3. --role physical --mismatch: the numerical site's ABORT FINGERPRINT_MISMATCH is seen, the
#      suite exits 0 and the numerical site 1;
#   4. --role numerical against a UDP echo server: exit 1 with FAIL lines.
source "$(dirname "$0")/../lib.sh"

make_experiment 1
conform="$bdir/drths-conform"

# 1. The suite as the numerical site.
pport=$(free_port)
start_physical phys "$pport"
ppid=$last_pid
wait_bound "$pport"
rc=0
timeout 60 "$conform" --role numerical --peer "127.0.0.1:$pport" --experiment "$tmp/exp.yaml" \
    >"$tmp/conform-num.out" 2>"$tmp/conform-num.err" || rc=$?
cat "$tmp/conform-num.out"
[ "$rc" = 0 ] || fail "drths-conform --role numerical exit $rc"
expect_checks "$tmp/conform-num.out" junk-ignored v1-ignored version-mismatch \
    fingerprint-mismatch wrong-key-ignored replayed-hello-start chained-hellos-start hello-ack \
    hello-ack-fresh-ephemeral key-schedule \
    probe-echo hello-pinned hello-replay start-epoch feedback-ticks feedback-samples \
    feedback-rest feedback-echo feedback-no-hold feedback-follows hello-during-run stop-answer \
    run-ends
grep -q '^summary: .* 0 failed' "$tmp/conform-num.out" || fail "no summary line"
wait_status "$ppid"
[ "$rc" = 0 ] || fail "drths-physical exit $rc after the suite's STOP"

# 2. The suite as the actuator site.
cport=$(free_port)
timeout 60 "$conform" --role physical --listen "127.0.0.1:$cport" --experiment "$tmp/exp.yaml" \
    --timeout 30 >"$tmp/conform-phys.out" 2>"$tmp/conform-phys.err" &
cpid=$!
pids+=("$cpid")
wait_bound "$cport"
start_numerical num "$cport"
npid=$last_pid
wait_status "$cpid"
crc=$rc
wait_status "$npid"
nrc=$rc
cat "$tmp/conform-phys.out"
[ "$crc" = 0 ] || fail "drths-conform --role physical exit $crc"
[ "$nrc" = 0 ] || fail "drths-numerical exit $nrc against the suite"
expect_checks "$tmp/conform-phys.out" hello-format hello-fields hello-sections hello-repeat \
    probes start-epoch command-first command-samples command-echo command-timely stop-sent

# 3. A HELLO_ACK of another experiment: the numerical site must abort.
cport=$(free_port)
timeout 60 "$conform" --role physical --listen "127.0.0.1:$cport" --experiment "$tmp/exp.yaml" \
    --mismatch >"$tmp/conform-mis.out" 2>"$tmp/conform-mis.err" &
cpid=$!
pids+=("$cpid")
wait_bound "$cport"
start_numerical num-mis "$cport"
npid=$last_pid
wait_status "$cpid"
crc=$rc
wait_status "$npid"
nrc=$rc
cat "$tmp/conform-mis.out"
[ "$crc" = 0 ] || fail "drths-conform --mismatch exit $crc"
[ "$nrc" = 1 ] || fail "drths-numerical exit $nrc after a mismatching HELLO_ACK (1 expected)"
expect_checks "$tmp/conform-mis.out" fingerprint-abort

# 4. Not a drths site: a UDP echo server. The suite must fail, not pass by silence.
eport=$(free_port)
timeout 60 python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", int(sys.argv[1])))
open(sys.argv[2], "w").close()
while True:
    d, a = s.recvfrom(65536)
    s.sendto(d, a)
' "$eport" "$tmp/echo-ready" &
pids+=("$!")
for _ in $(seq 1 50); do
    [ -e "$tmp/echo-ready" ] && break
    sleep 0.1
done
[ -e "$tmp/echo-ready" ] || fail "the UDP echo server did not start"
rc=0
timeout 60 "$conform" --role numerical --peer "127.0.0.1:$eport" --experiment "$tmp/exp.yaml" \
    >"$tmp/conform-echo.out" 2>"$tmp/conform-echo.err" || rc=$?
cat "$tmp/conform-echo.out"
[ "$rc" = 1 ] || fail "drths-conform against a UDP echo server: exit $rc (1 expected)"
grep -q '^FAIL junk-ignored: ' "$tmp/conform-echo.out" || fail "no 'FAIL junk-ignored'"
grep -q '^FAIL hello-ack: ' "$tmp/conform-echo.out" || fail "no 'FAIL hello-ack'"

# Usage errors are exit 2.
rc=0
"$conform" --role numerical --experiment "$tmp/exp.yaml" 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "--role numerical without --peer: exit $rc (2 expected)"
echo PASS
