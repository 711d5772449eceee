#!/usr/bin/env bash
# drths-physical with `daq: backend: comedi`, through the real comedilib, on the emulated board
# (tools/comedi-emu) with the virtual specimen behind it, against drths-numerical:
#   1. a short run completes (exit 0) and the board's counts are in the summary;
#   2. the load cell goes to full scale mid-run (the input saturates): HOLD, and the message
#      names the channel, its subdevice, channel and range and the converter's end;
#   3. the board stops answering mid-run (every ioctl fails with EIO): HOLD, and the message
#      names the channel (the first of the tick's read), the comedilib call and comedilib's
#      error;
# and in both faults the records agree (issue 29, item 5): summary.json's HOLD first_tick and
# ticks are physical.csv's, the log's "HOLD at tick" and the end report's; the HOLD reason names
# the channel with its subdevice, channel and range; the DAQ error repeated on every HOLD tick is
# printed once, then counted in one line; the HOLD lines and summary.json say whether the safe
# state was written (the failing board: it was not, and no line says the drive is at its safe
# command).
# The emulated board is linked ahead of libc with LD_PRELOAD; in a sanitizer build the sanitizer's
# runtime must come first in that list, so it is taken from the program's own libraries.
source "$(dirname "$0")/../lib.sh"
emu="$bdir/libdrths_comedi_emu.so"
[ -r "$emu" ] || skip "$emu not built"
san=$(ldd "$bdir/drths-physical" | sed -n 's/.*\(lib[at]san\.so[^ ]*\) => \([^ ]*\).*/\2/p' | head -n 1)
preload="${san:+$san:}$emu"
case "$san" in
*tsan*) skip "two live 5 kHz sites under TSan stall for tens of ms and hold before the injected fault (as the other live fault tests, excluded under TSan); integration.comedi_emu runs the comedi path under TSan" ;;
esac

# The default experiment, 2 s of record, on the emulated board's wiring.
make_experiment 2
cp "$src/examples/comedi-emu.calibration" "$tmp/"
sed -n '/^daq:/,$p' "$src/examples/three-story-elcentro-comedi.yaml" |
    sed -e 's|^  device: .*|  device: /dev/comedi-drths-test9|' >>"$tmp/exp.yaml"
grep -q '^  backend: comedi' "$tmp/exp.yaml" || fail "could not add the daq section"
# A comedi back end refuses the public rehearsal key: both sites take this one from the file.
"$bdir/drths-keygen" "$tmp/lab.key" >/dev/null || fail "drths-keygen failed"
sed -i "s|^  key_file: .*|  key_file: $tmp/lab.key|" "$tmp/exp.yaml"
grep -q "^  key_file: $tmp/lab.key\$" "$tmp/exp.yaml" || fail "could not set link.key_file"

# run NAME FAULT: both sites, the actuator site on the emulated board with FAULT; its exit status
# in $prc.
run() {
    local name=$1 fault=$2 port
    port=$(free_port)
    timeout 90 bash -c 'export LD_PRELOAD="$1"; shift; exec "$@"' _ "$preload" \
        env DRTHS_COMEDI_EMU_DEVICE=/dev/comedi-drths-test9 DRTHS_COMEDI_EMU_EXPERIMENT="$tmp/exp.yaml" \
        DRTHS_COMEDI_EMU_FAULT="$fault" \
        "$bdir/drths-physical" --experiment "$tmp/exp.yaml" --listen "127.0.0.1:$port" \
        --wait-timeout 20 --out "$tmp/$name-phys" --quiet >"$tmp/$name-phys.out" 2>"$tmp/$name-phys.err" &
    local ppid=$!
    pids+=("$ppid")
    start_numerical "$name-num" "$port"
    local npid=$last_pid
    wait_status "$ppid"
    prc=$rc
    wait_status "$npid"
    echo "$name: drths-physical exit $prc, drths-numerical exit $rc"
    # (sed, not head: with pipefail, grep killed by a closed pipe would end the test)
    cat "$tmp/$name-phys.out" "$tmp/$name-phys.err" | grep "HOLD\|comedi\|subdevice" |
        sed -n '1,8s/^/  | /p' || true
}

# hold_rows CSV: the number of rows flagged HOLD, and the first tick of them.
hold_rows() {
    python3 - "$1" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
held = [int(float(r["tick"])) for r in rows if float(r["hold"]) != 0]
print(len(held), held[0] if held else -1, len(rows))
PY
}

# agree NAME: summary.json's HOLD ticks against physical.csv's hold column, the log's "HOLD at
# tick" line and the end report's "(N ticks in HOLD from tick F)".
agree() {
    local name=$1 n first total
    read -r n first total < <(hold_rows "$tmp/$name-phys/physical.csv")
    local sfirst sticks
    sfirst=$(summary "$tmp/$name-phys" hold.first_tick)
    sticks=$(summary "$tmp/$name-phys" hold.ticks)
    [ "$sfirst" = "$first" ] && [ "$sticks" = "$n" ] ||
        fail "$name: summary.json says HOLD from tick $sfirst for $sticks ticks, physical.csv from $first for $n"
    grep -q "HOLD at tick $first: " "$tmp/$name-phys.err" || fail "$name: the log's HOLD tick is not $first"
    grep -q "($n ticks in HOLD from tick $first)" "$tmp/$name-phys.out" ||
        fail "$name: the end report does not say $n ticks in HOLD from tick $first"
    echo "ok   $name: HOLD from tick $first for $n ticks in physical.csv, summary.json, the log and the report"
}

run clean ""
[ "$prc" -eq 0 ] || fail "the run on the emulated board did not complete (exit $prc)"
check_records "$tmp/clean-phys" physical
[ "$(summary "$tmp/clean-phys" daq.backend)" = comedi ] || fail "summary.json: daq.backend is not comedi"
[ "$(summary "$tmp/clean-phys" daq.device)" = /dev/comedi-drths-test9 ] || fail "summary.json: daq.device"
[ "$(summary "$tmp/clean-phys" daq.errors)" = 0 ] || fail "summary.json: daq errors in the clean run"
read -r n first total < <(hold_rows "$tmp/clean-phys/physical.csv")
[ "$n" -eq 0 ] || fail "HOLD in the clean run at tick $first"
echo "ok   clean run: $total ticks, no HOLD"

# About 1 s into the run: four data instructions per tick, 5000 ticks.
run saturate "saturate:20000:1"
[ "$prc" -eq 1 ] || fail "saturated load cell: drths-physical exit $prc, not 1"
read -r n first total < <(hold_rows "$tmp/saturate-phys/physical.csv")
[ "$n" -gt 0 ] || fail "saturated load cell: no HOLD"
grep -q "force_in (subdevice 0, channel 1, range 0): the input is at the upper end of its converter (code 65535" \
    "$tmp/saturate-phys.out" "$tmp/saturate-phys.err" || fail "saturated load cell: no message naming the channel"
echo "ok   saturated load cell: HOLD from tick $first of $total, message names force_in"
agree saturate
summary "$tmp/saturate-phys" hold.reason | grep -q "on force_in" || fail "saturated load cell: the HOLD reason does not name force_in"
[ "$(summary "$tmp/saturate-phys" hold.safe_state_written)" = True ] || fail "saturated load cell: the safe state is not said written"
grep -q "HOLD: drive at .* m, written to the DAQ" "$tmp/saturate-phys.out" "$tmp/saturate-phys.err" || fail "saturated load cell: no line says the safe state was written"

run fail "fail:20000:EIO"
[ "$prc" -eq 1 ] || fail "failing board: drths-physical exit $prc, not 1"
read -r n first total < <(hold_rows "$tmp/fail-phys/physical.csv")
[ "$n" -gt 0 ] || fail "failing board: no HOLD"
grep -q "tick $first: /dev/comedi-drths-test9: displacement_in (subdevice 0, channel 0, range 0): comedi_data_read failed: Input/output error" \
    "$tmp/fail-phys.out" "$tmp/fail-phys.err" || fail "failing board: no message naming the channel and comedilib's error"
echo "ok   failing board: HOLD from tick $first of $total, message names the channel and EIO"
agree fail
# The HOLD reason names the failing channel of the board and the call.
reason=$(summary "$tmp/fail-phys" hold.reason)
grep -Eq <<<"$reason" '^DAQ write failed: command_out \(subdevice 1, channel 0, range 0\): comedi_data_write: Input/output error$' ||
    fail "failing board: the HOLD reason does not name the channel: $reason"
# One line for the DAQ error repeated on every HOLD tick, then its count.
lines=$(grep -c "comedi_data_read failed" "$tmp/fail-phys.err" || true)
[ "$lines" -eq 1 ] || fail "failing board: $lines lines for the repeated DAQ error, expected 1"
grep -q "the DAQ error of tick $first repeated $((n - 1)) times more, the last at tick $((first + n - 1))" \
    "$tmp/fail-phys.err" || fail "failing board: no line counts the $((n - 1)) repeats"
# The safe state was never written: no line may say the drive is at it.
[ "$(summary "$tmp/fail-phys" hold.safe_state_written)" = False ] || fail "failing board: summary.json says the safe state was written"
[ "$(summary "$tmp/fail-phys" hold.safe_state_write_failures)" -gt 0 ] || fail "failing board: no safe-state write failure counted"
if grep -q "HOLD: drive at" "$tmp/fail-phys.out" "$tmp/fail-phys.err"; then fail "failing board: a line says the drive is at its HOLD position"; fi
grep -q "NOT at their safe command; hold the actuator with its servo controller" "$tmp/fail-phys.err" ||
    fail "failing board: no line says the safe state was not written"
grep -q "safe state NOT written: the DAQ refused" "$tmp/fail-phys.out" || fail "failing board: the end report does not say the safe state was not written"
echo "ok   failing board: reason names command_out, one line + its count for $n repeated errors, safe state said NOT written"
