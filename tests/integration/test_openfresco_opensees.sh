#!/bin/bash
# A real OpenSees (element genericClient) against drths-physical --openfresco: the explicit and
# the implicit examples of examples/opensees with the ideal linear specimen, one DOF and two
# (-dof 1 2 against two actuator channels), must record the displacements of their reference
# models (the element replaced by the springs) to 1e-6 of the peak, the site counting one step
# per analysis step. Skipped (77) where OpenSees is not
# installed: $OPENSEES (the path of an OpenSees binary) or OpenSees on PATH.
set -euo pipefail
bdir=$1
src=${DRTHS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
opensees=${OPENSEES:-$(command -v OpenSees || true)}
[ -x "$opensees" ] || { echo "SKIPPED: no OpenSees (set OPENSEES)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for kind in explicit implicit explicit-2dof implicit-2dof; do
    OUT=$tmp/$kind OPENSEES=$opensees "$src/examples/opensees/run-example.sh" "$bdir" "$kind" \
        >"$tmp/$kind.txt" 2>&1 || { cat "$tmp/$kind.txt" >&2; echo "FAIL: $kind" >&2; exit 1; }
    cat "$tmp/$kind.txt"
    grep -q "steps 500, peak" "$tmp/$kind.txt" || { echo "FAIL: $kind: not 500 steps" >&2; exit 1; }
    python3 - "$tmp/$kind/run/summary.json" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))["openfresco"]
assert o["commits"] == 500, o["commits"]
assert o["steps_reached"] in (499, 500), o["steps_reached"]
PY
done
