#!/bin/bash
# A real OpenSees with OpenFresco's Tcl package against drths-physical --openfresco: the
# explicit and the implicit examples of examples/opensees through expSite ShadowSite and through
# expControl GenericTCP (both with expElement twoNodeLink), with the ideal linear specimen, must
# record the displacements of their reference models (the element replaced by the spring) to
# 1e-6 of the peak, every run ending with DIE (site exit 0, no HOLD). Skipped (77) where
# OpenSees is not installed ($OPENSEES or OpenSees on PATH) or has no OpenFresco package
# (OpenFresco.so in $OPENFRESCO_LIB or on LD_LIBRARY_PATH); integration.openfresco_opensees
# runs element genericClient, which needs no package.
set -euo pipefail
bdir=$1
src=${DRTHS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
opensees=${OPENSEES:-$(command -v OpenSees || true)}
[ -x "$opensees" ] || { echo "SKIPPED: no OpenSees (set OPENSEES)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for way in shadowsite generictcp; do
    for kind in explicit implicit; do
        run=$tmp/$way-$kind
        status=0
        OUT=$run OPENSEES=$opensees "$src/examples/opensees/run-example.sh" "$bdir" "$way" \
            "$kind" >"$run.txt" 2>&1 || status=$?
        cat "$run.txt"
        [ "$status" -ne 77 ] || exit 77 # its SKIPPED line, printed above, says why
        [ "$status" -eq 0 ] || { echo "FAIL: $way $kind: exit $status" >&2; exit 1; }
        grep -q "steps 500, peak" "$run.txt" ||
            { echo "FAIL: $way $kind: not 500 steps" >&2; exit 1; }
        ! grep -q "HOLD at" "$run.txt" || { echo "FAIL: $way $kind: HOLD" >&2; exit 1; }
        python3 - "$run/run/summary.json" "$way" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))["openfresco"]
way = sys.argv[2]
assert o["variant"] == ("shadow" if way == "shadowsite" else "generic"), o["variant"]
assert "DIE" in o["end"], o["end"]
# ShadowSite commits every analysis step; GenericTCP never does, so each trial is a step. Either
# way every trial but the last (still played when DIE comes) is a step reached, and on the
# exact tangent (-initStif, Newton) no analysis step has a second new trial: no iterations.
if way == "shadowsite":
    assert o["commits"] == 500, o["commits"]
    assert o["steps_from"] == "commits", o["steps_from"]
else:
    assert o["commits"] == 0, o["commits"]
assert o["targets"] >= 499, o["targets"]
assert o["steps_reached"] >= o["targets"] - 1, (o["steps_reached"], o["targets"])
assert o["iterations"] == 0, o["iterations"]
PY
    done
done
