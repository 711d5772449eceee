#!/usr/bin/env bash
# drths-check, the pre-flight check of an experiment file: every example passes it with exit 0
# and no WARNING or ERROR; copies of the default experiment edited with the unit slips a reviewer
# found are caught: `scale: 100` (an ERROR row and a warning naming the scale and the limit),
# tonnes typed as kg (`floor_mass_kg: [50, 50, 50]`: frequencies and the mass named), a
# displacement limit beyond the converter's range (refused, exit 2), and a mode change that leaves
# the clipped-optimal weights in (run, with a note per ignored field). --shared-text prints only
# the shared text, whose hash is the fingerprint of the full report.
set -euo pipefail
bdir=${1:?build dir}
src=${DRTHS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tool=$bdir/drths-check
work=$(mktemp -d "${TMPDIR:-/tmp}/drths-test-check-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
    echo "FAIL: $*" >&2
    [ -f "$work/out" ] && sed 's/^/  | /' "$work/out" >&2
    exit 1
}
# run FILE: drths-check's output in $work/out, its exit code in $rc.
run() {
    set +e
    "$tool" "$@" >"$work/out" 2>&1
    rc=$?
    set -e
}

for e in "$src"/examples/*.yaml; do
    run "$e"
    [ "$rc" -eq 0 ] || fail "$(basename "$e"): exit $rc, want 0"
    ! grep -Eq 'WARNING|ERROR|REFUSED' "$work/out" || fail "$(basename "$e"): alarming output"
    grep -q '^result: OK$' "$work/out" || fail "$(basename "$e"): no 'result: OK'"
    grep -Eq '^fingerprint: [0-9a-f]{64}$' "$work/out" || fail "$(basename "$e"): no fingerprint"
done

# edited NAME SED: $work/NAME.yaml, the default experiment edited by SED (which must change it).
ln -s "$src/examples/records" "$work/records"
edited() {
    sed -e "$2" "$src/examples/three-story-elcentro.yaml" >"$work/$1.yaml"
    ! cmp -s "$work/$1.yaml" "$src/examples/three-story-elcentro.yaml" ||
        fail "$1: sed changed nothing"
}

edited scale 's/^  scale: 1.0 .*/  scale: 100/'
run "$work/scale.yaml"
[ "$rc" -eq 1 ] || fail "scale 100: exit $rc, want 1 (warnings)"
grep -Eq '^  stroke \(command\) .* ERROR +physical.limit_displacement_m$' "$work/out" ||
    fail "scale 100: the stroke row is not an ERROR against physical.limit_displacement_m"
want='WARNING: ground_motion.scale = 100 takes the reference to .* m, beyond '
grep -q "${want}physical.limit_displacement_m = 0.1" "$work/out" || fail "scale 100: no warning naming the scale and the limit"

edited mass 's/^  floor_mass_kg: .*/  floor_mass_kg: [50, 50, 50]/'
run "$work/mass.yaml"
[ "$rc" -eq 1 ] || fail "50 kg floors: exit $rc, want 1"
grep -q 'WARNING: structure: mode 3 at 390.* Hz is outside 0.1..50 Hz' "$work/out" ||
    fail "50 kg floors: no warning on the 390 Hz mode"
grep -q 'WARNING: structure.floor_mass_kg: floor 1 weighs 50 kg, under a tonne' "$work/out" ||
    fail "50 kg floors: the masses are not named"

edited limit 's/^  limit_displacement_m: .*/  limit_displacement_m: 100/'
run "$work/limit.yaml"
[ "$rc" -eq 2 ] || fail "limit_displacement_m 100: exit $rc, want 2 (refused)"
grep -Eq '^  physical.limit_displacement_m .* of actuator.displacement_range_m +ERROR$' \
    "$work/out" || fail "limit 100 m: no ERROR row against the converter's range"
grep -q '^result: REFUSED' "$work/out" || fail "limit 100 m: not refused"

edited mode 's/^  mode: clipped-optimal .*/  mode: passive-off/'
run "$work/mode.yaml"
[ "$rc" -eq 0 ] || fail "passive-off with the weights left in: exit $rc, want 0"
for k in q_disp q_acc r; do
    why='(it applies to control.mode clipped-optimal only; mode is passive-off)'
    grep -qF ": control.$k: ignored $why" "$work/out" || fail "no note for control.$k"
    grep -q "^note: .*mode.yaml:[0-9]*: control.$k: ignored" "$work/out" ||
        fail "the note for control.$k names no file and line"
done

# --shared-text: only the text; its BLAKE2b-256 is the fingerprint the full report prints.
run "$src/examples/three-story-elcentro.yaml"
fp=$(sed -n 's/^fingerprint: //p' "$work/out")
run --shared-text "$src/examples/three-story-elcentro.yaml"
[ "$rc" -eq 0 ] || fail "--shared-text: exit $rc"
head -n 1 "$work/out" | grep -q '^drths-experiment-shared v' || fail "--shared-text: not the text"
! grep -q 'fingerprint\|result' "$work/out" || fail "--shared-text printed more than the text"
want=$(python3 -c 'import hashlib, sys
print(hashlib.blake2b(open(sys.argv[1], "rb").read(), digest_size=32).hexdigest())' "$work/out")
[ "$fp" = "$want" ] || fail "fingerprint $fp is not the hash of the shared text ($want)"

# A wrong file is a usage error naming the field; no file at all too.
edited bad 's/^  scale: 1.0 .*/  scale: -1/'
run "$work/bad.yaml"
[ "$rc" -eq 2 ] && grep -q 'ground_motion.scale: must be > 0' "$work/out" ||
    fail "scale -1: exit $rc"
run
[ "$rc" -eq 2 ] || fail "no argument: exit $rc, want 2"
echo "drths-check: examples clean; scale, mass, limit and mode slips caught"
