#!/usr/bin/env bash
# drths-physical --io-check, the commissioning check, through the real program:
#   1. on the default experiment's virtual specimen: exit 0, and each channel is judged; with
#      two actuator channels (physical.channels), each in turn;
#   2. on the emulated comedi board (tools/comedi-emu, the real comedilib) wired as
#      examples/three-story-elcentro-comedi.yaml says, with an experiment file whose force_in
#      has the wrong sign (the load cell reversed): exit 1 and force_in named REVERSED; with
#      displacement_in's sign wrong: displacement_in named; with the right file: exit 0.
# Short legs (0.1 s) keep each check under two seconds.
source "$(dirname "$0")/../lib.sh"

check() { # NAME ARGS...: runs drths-physical --io-check, its exit status in $rc
    local name=$1
    shift
    set +e
    timeout 60 "$@" --io-check --io-leg 0.1 >"$tmp/$name.out" 2>"$tmp/$name.err"
    rc=$?
    set -e
    sed 's/^/  | /' "$tmp/$name.out"
}

make_experiment 2
check virtual "$bdir/drths-physical" --experiment "$tmp/exp.yaml"
[ "$rc" -eq 0 ] || fail "virtual specimen: exit $rc, expected 0"
grep -q '^  command_out -> displacement_in  gain +0\.9[0-9]*, .* delay [0-9.]* ms' "$tmp/virtual.out" ||
    fail "virtual specimen: no gain and delay line"
grep -q '^  force_in .* OK$' "$tmp/virtual.out" || fail "virtual specimen: force_in not OK"
grep -q '^  current_out .* OK$' "$tmp/virtual.out" || fail "virtual specimen: current_out not OK"

# Several actuator channels (physical.channels): each checked in turn on its own specimen.
two="$src/examples/opensees/linear-springs-2dof-ideal.yaml"
check channels "$bdir/drths-physical" --experiment "$two"
[ "$rc" -eq 0 ] || fail "two channels: exit $rc, expected 0"
n=$(grep -c '^drths-physical: actuator channel [12] ([xy]): I/O check of ' "$tmp/channels.out")
[ "$n" -eq 2 ] || fail "two channels: $n I/O checks, expected one each"
n=$(grep -c '^verdict: OK' "$tmp/channels.out")
[ "$n" -eq 2 ] || fail "two channels: $n verdicts OK, expected 2"
grep -A4 '^drths-physical: actuator channel 2 (y)' "$tmp/channels.out" |
    grep -q '^  force_in .* OK$' || fail "two channels: channel 2's force_in not judged"

emu="$bdir/libdrths_comedi_emu.so"
[ -r "$emu" ] || skip "$emu not built (the virtual case passed)"
san=$(ldd "$bdir/drths-physical" | sed -n 's/.*\(lib[at]san\.so[^ ]*\) => \([^ ]*\).*/\2/p' | head -n 1)
preload="${san:+$san:}$emu"
cp "$src/examples/comedi-emu.calibration" "$tmp/"
sed -n '/^daq:/,$p' "$src/examples/three-story-elcentro-comedi.yaml" |
    sed -e 's|^  device: .*|  device: /dev/comedi-drths-test8|' >>"$tmp/exp.yaml"
grep -q '^  backend: comedi' "$tmp/exp.yaml" || fail "could not add the daq section"
# The lab's file with one sign wrong; the board is wired as exp.yaml says.
sed -e '/^  force_in:/s/units_per_volt: 25000/units_per_volt: -25000/' "$tmp/exp.yaml" >"$tmp/force.yaml"
sed -e '/^  displacement_in:/s/units_per_volt: 0.01/units_per_volt: -0.01/' "$tmp/exp.yaml" >"$tmp/disp.yaml"
cmp -s "$tmp/exp.yaml" "$tmp/force.yaml" && fail "could not reverse force_in"
cmp -s "$tmp/exp.yaml" "$tmp/disp.yaml" && fail "could not reverse displacement_in"
board=(env LD_PRELOAD="$preload" DRTHS_COMEDI_EMU_DEVICE=/dev/comedi-drths-test8
    DRTHS_COMEDI_EMU_EXPERIMENT="$tmp/exp.yaml" "$bdir/drths-physical")
check right "${board[@]}" --experiment "$tmp/exp.yaml"
[ "$rc" -eq 0 ] || fail "comedi, right wiring: exit $rc, expected 0"
check force "${board[@]}" --experiment "$tmp/force.yaml"
[ "$rc" -eq 1 ] || fail "comedi, force_in reversed: exit $rc, expected 1"
grep -q '^  force_in .*REVERSED$' "$tmp/force.out" || fail "force_in not named REVERSED"
grep -q 'force_in is reversed' "$tmp/force.out" || fail "no sentence naming force_in"
check disp "${board[@]}" --experiment "$tmp/disp.yaml"
[ "$rc" -eq 1 ] || fail "comedi, displacement_in reversed: exit $rc, expected 1"
grep -q 'displacement_in is the reversed one' "$tmp/disp.out" || fail "displacement_in not named"
echo "PASS: io-check judges the virtual rig and names a reversed load cell and transducer"
