#!/bin/bash
# A real OpenSees with OpenFresco's Tcl package against drths-physical --openfresco: the
# explicit and the implicit examples of examples/opensees, one DOF and two DOF (two actuator
# channels), through expSite ShadowSite and through expControl GenericTCP (both with expElement
# twoNodeLink), with the ideal linear specimens, must record the displacements of their
# reference models (the element replaced by the springs) to 1e-6 of the peak, every run ending
# with DIE (site exit 0, no HOLD), with the analysis's 500 steps counted (ShadowSite from its
# commits, GenericTCP from the time in its trials) and, on the exact tangent, no iterations.
# Then both one-DOF implicit examples with `Newton -initial` (OpenFresco's twoNodeLink answers
# no initial stiffness, so Newton iterates): the iterations are counted as iterations, not
# steps, from the first step on: exactly 500 steps reached. Skipped (77) where OpenSees is not
# installed ($OPENSEES or OpenSees on PATH) or has no OpenFresco package (OpenFresco.so in
# $OPENFRESCO_LIB or on LD_LIBRARY_PATH); integration.openfresco_opensees runs element
# genericClient, which needs no package.
set -euo pipefail
bdir=$1
src=${DRTHS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
opensees=${OPENSEES:-$(command -v OpenSees || true)}
[ -x "$opensees" ] || { echo "SKIPPED: no OpenSees (set OPENSEES)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# run_one WAY KIND NEWTON: one example (NEWTON: tangent, or initial for `Newton -initial`).
run_one() {
    local way=$1 kind=$2 newton=$3 run=$tmp/$1-$2-$3 status=0 args=
    [ "$newton" = initial ] && args="1e-9 1e7 initial"
    OUT=$run OPENSEES=$opensees OPENSEES_ARGS=$args "$src/examples/opensees/run-example.sh" \
        "$bdir" "$way" "$kind" >"$run.txt" 2>&1 || status=$?
    cat "$run.txt"
    [ "$status" -ne 77 ] || exit 77 # its SKIPPED line, printed above, says why
    [ "$status" -eq 0 ] || { echo "FAIL: $way $kind $newton: exit $status" >&2; exit 1; }
    grep -q "steps 500, peak" "$run.txt" ||
        { echo "FAIL: $way $kind $newton: not 500 steps" >&2; exit 1; }
    ! grep -q "HOLD at" "$run.txt" || { echo "FAIL: $way $kind $newton: HOLD" >&2; exit 1; }
    python3 - "$run/run/summary.json" "$way" "$kind" "$newton" <<'PY' ||
import json, sys
o = json.load(open(sys.argv[1]))["openfresco"]
way, kind, newton = sys.argv[2:5]
assert o["variant"] == ("shadow" if way == "shadowsite" else "generic"), o["variant"]
assert "DIE" in o["end"], o["end"]
assert o["channels"] == (2 if kind.endswith("-2dof") else 1), o["channels"]
# ShadowSite commits every analysis step: its steps are counted from its commits, its first
# step (before the first commit) from the time in its trials; GenericTCP never commits but
# sends the analysis time (-ctrlModes 1 0 0 0 1), and its steps are counted from the time. The analysis has 500 steps: an explicit one sends no
# trial in its first (at rest: ShadowSite's commit plays it in place, GenericTCP's is not
# played) and does not wait for its last before DIE.
if way == "shadowsite":
    assert o["commits"] == 500, o["commits"]
    assert o["steps_from"] == "commits", o["steps_from"]
else:
    assert o["commits"] == 0, o["commits"]
    assert o["steps_from"] == "time", o["steps_from"]
if kind.startswith("implicit"):
    assert o["steps_reached"] == 500, o["steps_reached"]
else:
    assert 498 <= o["steps_reached"] <= 500, o["steps_reached"]
if newton == "initial":
    assert o["iterations"] > 500, o["iterations"]
    assert o["max_iterations_in_a_step"] <= 3, o["max_iterations_in_a_step"]
else:
    assert o["iterations"] == 0, o["iterations"]
PY
        { echo "FAIL: $way $kind $newton: summary" >&2; exit 1; }
}
for way in shadowsite generictcp; do
    for kind in explicit implicit explicit-2dof implicit-2dof; do
        run_one "$way" "$kind" tangent
    done
    run_one "$way" implicit initial
done
