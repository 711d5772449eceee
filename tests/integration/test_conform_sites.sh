#!/usr/bin/env bash
# drths-conform against a numerical site holding two links (PROTOCOL.md section 12):
# examples/two-labs.yaml on free ports, each lab with its own key file.
#   1. drths-conform --role physical on a file with sites and no --site: exit 2 naming the sites;
#   2. two drths-conform --role physical, --site labA and --site labB (each listening at its
#      site's address with its site's key, no --listen or --key), and drths-numerical on the
#      file: both suites report conformance (every check PASS, hello-link: link 0 and link 1),
#      all three exit 0, the numerical site's summary names both links;
#   3. drths-conform --role numerical --site labB against drths-physical --site labB: the suite
#      is link 1 of the numerical site (its HELLO and the HELLO_ACK's echo carry link 1) with
#      lab B's key, every check passes.
source "$(dirname "$0")/../lib.sh"

conform="$bdir/drths-conform"
pa=$(free_port)
pb=$(free_port)
ln -sfn "$src/examples/records" "$tmp/records"
"$bdir/drths-keygen" "$tmp/labA.key" >/dev/null || fail "drths-keygen labA"
"$bdir/drths-keygen" "$tmp/labB.key" >/dev/null || fail "drths-keygen labB"
python3 - "$src/examples/two-labs.yaml" "$tmp/exp.yaml" "$pa" "$pb" "$tmp/runs" \
    "${DRTHS_TEST_MAX_TICK_LATE_MS:-200}" <<'PY' || fail "could not edit the experiment"
import re, sys
src, dst, pa, pb, runs, stall = sys.argv[1:]
t = open(src).read()
for lab, port in (("A", pa), ("B", pb)):
    old = f'address: "127.0.0.1:4700{1 if lab == "A" else 2}"'
    assert old in t, old
    t = t.replace(old, f'address: "127.0.0.1:{port}"')
# Each lab its own key, given by the file (relative to it).
t, n = re.subn(r'^(    key_file:) null', r'\1 KEY', t, flags=re.M)
assert n == 2, n
t = t.replace("KEY", "labA.key", 1).replace("KEY", "labB.key", 1)
# A link silent for physical.watchdog_ms is lost (PEER_LOST at every site): 1 s, not 100 ms,
# so that a process of three stalled on a shared 2-CPU machine (or under ThreadSanitizer) is not
# what the test sees; the suites check the protocol, not the watchdog.
for key, value in (("duration_s", "1"), ("tail_s", "0"), ("safety_margin_ticks", "100"),
                   ("reorder_ticks", "50"), ("max_tick_late_ms", stall), ("watchdog_ms", "1000"),
                   ("directory", runs)):
    t, n = re.subn(rf"^(  {key}:) [^\n]*", rf"\1 {value}", t, count=1, flags=re.M)
    assert n == 1, key
open(dst, "w").write(t)
PY
grep -q 'key_file: labB.key' "$tmp/exp.yaml" || fail "the experiment has no key for lab B"

# 1. Which site is this one? The file lists two: the suite must be told.
rc=0
"$conform" --role physical --experiment "$tmp/exp.yaml" >"$tmp/nosite.out" \
    2>"$tmp/nosite.err" || rc=$?
[ "$rc" = 2 ] || fail "--role physical on a file with sites, no --site: exit $rc (2 expected)"
grep -q -- "2 sites (labA, labB).*--site NAME" "$tmp/nosite.err" ||
    fail "the refusal does not name the sites and --site: $(cat "$tmp/nosite.err")"
rc=0
"$conform" --role physical --experiment "$tmp/exp.yaml" --site labC >"$tmp/labC.out" \
    2>"$tmp/labC.err" || rc=$?
[ "$rc" = 2 ] && grep -q 'no site named "labC"' "$tmp/labC.err" ||
    fail "--site labC: exit $rc, $(cat "$tmp/labC.err")"

# 2. Two suites as the two actuator sites of one numerical site.
for lab in labA labB; do
    timeout 60 "$conform" --role physical --site "$lab" --experiment "$tmp/exp.yaml" \
        --timeout 30 >"$tmp/conform-$lab.out" 2>"$tmp/conform-$lab.err" &
    pids+=("$!")
    eval "pid_$lab=$!"
done
wait_bound "$pa"
wait_bound "$pb"
timeout 90 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --connect-timeout 10 \
    --out "$tmp/num" --quiet >"$tmp/num.out" 2>"$tmp/num.err" &
npid=$!
pids+=("$npid")
wait_status "$pid_labA"
arc=$rc
wait_status "$pid_labB"
brc=$rc
wait_status "$npid"
nrc=$rc
cat "$tmp/conform-labA.out" "$tmp/conform-labB.out"
echo "drths-numerical exit $nrc, suite labA exit $arc, suite labB exit $brc"
[ "$arc" = 0 ] && [ "$brc" = 0 ] || fail "a suite failed: labA $arc, labB $brc"
[ "$nrc" = 0 ] || fail "drths-numerical exit $nrc against the two suites"
for lab in labA labB; do
    expect_checks "$tmp/conform-$lab.out" hello-format hello-fields hello-link hello-sections \
        hello-repeat probes start-epoch command-first command-samples command-echo \
        command-timely stop-sent
    grep -q '^summary: 1[0-9] passed, 0 failed' "$tmp/conform-$lab.out" ||
        fail "no passing summary for $lab"
done
grep -q "^drths-conform .*site labA, link 0, key id $("$bdir/drths-keygen" --id "$tmp/labA.key")" \
    "$tmp/conform-labA.out" || fail "suite labA: not site labA, link 0 with lab A's key"
grep -q '^PASS hello-link: HELLO for link 1, 1 expected' "$tmp/conform-labB.out" ||
    fail "suite labB did not see link 1"
python3 - "$tmp/num/summary.json" <<'PY' || fail "the numerical site's summary"
import json, sys
from checks import check, status
s = json.load(open(sys.argv[1]))
links = [l["site"] for l in s.get("links", [])]
check(links == ["labA", "labB"], f"summary.json links: {links}")
sys.exit(status())
PY

# 3. The suite as the numerical site's link 1, to actuator site labB.
timeout 60 "$bdir/drths-physical" --experiment "$tmp/exp.yaml" --site labB --wait-timeout 20 \
    --out "$tmp/physB" --quiet >"$tmp/physB.out" 2>"$tmp/physB.err" &
ppid=$!
pids+=("$ppid")
wait_bound "$pb"
rc=0
timeout 60 "$conform" --role numerical --site labB --experiment "$tmp/exp.yaml" \
    >"$tmp/conform-numB.out" 2>"$tmp/conform-numB.err" || rc=$?
cat "$tmp/conform-numB.out"
[ "$rc" = 0 ] || fail "drths-conform --role numerical --site labB exit $rc"
expect_checks "$tmp/conform-numB.out" hello-ack key-schedule probe-echo start-epoch \
    feedback-ticks stop-answer run-ends
grep -q 'link 1, ' "$tmp/conform-numB.out" || fail "the HELLO_ACK did not echo link 1"
wait_status "$ppid"
[ "$rc" = 0 ] || fail "drths-physical --site labB exit $rc after the suite's STOP"
echo PASS
