#!/usr/bin/env bash
# A full disk is never silent (docs/faults.md, "A full disk"). Both sites on loopback, a 3 s
# record:
#  1. Filled after the start: both run folders on one 128 MiB filesystem the test mounts itself
#     (tmpfs; skipped where mounting is not permitted); once the run is under way another file
#     fills the filesystem to the last block. The space each site reserved at its start holds its
#     records: both end "end of record", exit 0, with every row in their CSVs and their
#     summaries written.
#  2. Writes failing anyway: once the run is under way the actuator site's file size limit is
#     lowered from outside (prlimit --fsize: the kernel then refuses its next writes with EFBIG,
#     a real I/O error, whatever the reservation). The actuator site says so, HOLDs and sends
#     ABORT RECORDS; both exit 1, both summaries say the record is incomplete with the count of
#     rows lost, and no line of either log claims "0 lost" or exit 0.
#  3. The same with the numerical site's writes failing: it ends the run with ABORT RECORDS.
source "$(dirname "$0")/../lib.sh"
make_experiment 3

# ---- 1. filled after the start ------------------------------------------------------------------
command -v prlimit >/dev/null || skip "prlimit (util-linux) is missing: it injects the write errors"
mkdir -p "$tmp/disk"
mount -t tmpfs -o size=128m drths-test "$tmp/disk" 2>"$tmp/mount.err" ||
    skip "cannot mount a tmpfs here ($(head -n 1 "$tmp/mount.err")): the test needs a filesystem it can fill"
trap 'umount "$tmp/disk" 2>/dev/null || true; cleanup' EXIT
p=$(free_port)
timeout 90 "$bdir/drths-physical" --experiment "$tmp/exp.yaml" --listen "127.0.0.1:$p" \
    --wait-timeout 20 --out "$tmp/disk/phys" --quiet >"$tmp/fill-phys.out" 2>"$tmp/fill-phys.err" &
ppid=$!
pids+=("$ppid")
timeout 90 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --peer "127.0.0.1:$p" \
    --connect-timeout 10 --out "$tmp/disk/num" --quiet >"$tmp/fill-num.out" 2>"$tmp/fill-num.err" &
npid=$!
pids+=("$npid")
wait_rows "$tmp/disk/phys/physical.csv" 2000
dd if=/dev/zero of="$tmp/disk/filler" bs=1M >/dev/null 2>&1 || true
free_kb=$(df -k --output=avail "$tmp/disk" | tail -n 1 | tr -d ' ')
echo "filled: $(du -m "$tmp/disk/filler" | cut -f1) MB of filler, ${free_kb} kB left"
[ "$free_kb" -lt 64 ] || fail "the filesystem was not filled (${free_kb} kB left)"
wait_status "$ppid"; prc=$rc
wait_status "$npid"; nrc=$rc
echo "filled after the start: drths-physical exit $prc, drths-numerical exit $nrc"
[ "$prc" = 0 ] && [ "$nrc" = 0 ] || fail "a site did not end the filled run with exit 0 ($prc, $nrc)"
check_records "$tmp/disk/phys" physical
check_records "$tmp/disk/num" numerical
for d in phys num; do
    [ "$(summary "$tmp/disk/$d" records_complete)" = True ] || fail "$d: records not complete"
    [ -e "$tmp/disk/$d/.drths-reserved-space" ] && fail "$d: the reserve file was left behind"
done
rm -f "$tmp/disk/filler"
echo "ok   a disk filled after the start took nothing from the records"

# ---- 2 and 3. writes failing anyway -------------------------------------------------------------
# failing_case SITE: SITE's (physical | numerical) file size limit drops to 200 kB above its
# .bin's size 0.4 s into the run.
failing_case() {
    local site=$1 d="$tmp/$1" p bin victim
    mkdir -p "$d"
    p=$(free_port)
    start_physical "$site/phys" "$p"
    local ppid=$last_pid
    start_numerical "$site/num" "$p"
    local npid=$last_pid
    wait_rows "$d/phys/physical.csv" 2000
    if [ "$site" = physical ]; then bin="$d/phys/physical.bin"; victim=$ppid
    else bin="$d/num/numerical.bin"; victim=$npid; fi
    prlimit --pid "$(child_of "$victim")" --fsize=$(($(stat -c %s "$bin") + 200000)) ||
        fail "prlimit could not lower the file size limit"
    wait_status "$ppid"; local prc=$rc
    wait_status "$npid"; local nrc=$rc
    echo "$site's writes failing: drths-physical exit $prc: $(summary "$d/phys" exit_reason)"
    echo "                         drths-numerical exit $nrc: $(summary "$d/num" exit_reason)"
    [ "$prc" = 1 ] && [ "$nrc" = 1 ] || fail "$site's writes failing: exits $prc and $nrc, expected 1 and 1"
    local own other
    if [ "$site" = physical ]; then own="$d/phys"; other="$d/num"; else own="$d/num"; other="$d/phys"; fi
    [ "$(summary "$own" records_complete)" = False ] || fail "$own: records_complete is not false"
    local lost
    lost=$(summary "$own" records_lost_rows)
    [ "$lost" -gt 0 ] || fail "$own: records_lost_rows $lost"
    summary "$own" exit_reason | grep -Eq "record incomplete: $lost rows of [a-z]+\.bin not written \(File too large; it stops at row [0-9]+\)" ||
        fail "$own: the reason does not say the record is incomplete with its count ($lost)"
    summary "$other" exit_reason | grep -Eq "RECORDS: writing [a-z]+\.bin failed at row [0-9]+ \(File too large\): records incomplete, [0-9]+ rows lost so far" ||
        fail "$other: the reason does not carry the peer's ABORT RECORDS with its count"
    grep -q "ERROR: writing [a-z]*.bin failed (File too large)" "$own.err" ||
        fail "$site: no error line when the write failed"
    # No line of the failing site may claim a complete record, and neither site a clean end.
    if grep -E "\(0 lost\)|0 dropped" "$own.out" "$own.err" ||
        grep -E "exit 0\)|end of record" "$d"/*.out "$d"/*.err; then
        fail "$site: a log line claims a complete record or a clean end"
    fi
    grep -q "records: [0-9]* rows ([1-9][0-9]* lost: the disk refused a write" "$d/phys.out" ||
        [ "$site" = numerical ] || fail "physical: the records line does not count the rows lost"
    echo "ok   $site's writes failing: both exit 1, $lost rows lost, both summaries say so"
}
failing_case physical
failing_case numerical
echo PASS
