#!/bin/bash
# Runs one genericClient example of this folder against a drths actuator site and compares the
# displacement OpenSees records with the reference model's (docs/openfresco.md).
#
#   examples/opensees/run-example.sh BUILD_DIR KIND [EXPERIMENT [SITE OPTIONS...]]
#
# KIND is explicit or implicit (genericclient-1dof-KIND.tcl against reference-1dof-KIND.tcl),
# or explicit-2dof or implicit-2dof (genericclient-2dof-*.tcl, -dof 1 2, against the two-DOF
# reference). EXPERIMENT defaults to linear-spring-ideal.yaml, or linear-springs-2dof-ideal.yaml
# for the two-DOF kinds (the ideal linear specimens: the records must agree to 1e-6 of the peak;
# exit 1 otherwise). With another specimen (the default experiment's
# MR damper) the comparison is printed for information. OpenSees is $OPENSEES, else OpenSees on
# PATH; exit 77 when neither is found. The site's run
# folder, the OpenSees output and both records are kept in $OUT (default: a new temporary
# folder). Every program runs under `timeout`: OpenSees never exits on its own when the site
# ends the session early (it waits on the closed connection).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
usage="usage: run-example.sh BUILD_DIR explicit|implicit|explicit-2dof|implicit-2dof"
usage="$usage [EXPERIMENT [SITE OPTIONS...]]"
bdir=${1:?$usage}
kind=${2:?$usage}
case $kind in
explicit | implicit) model=1dof ideal=$here/linear-spring-ideal.yaml ;;
explicit-2dof | implicit-2dof)
    model=2dof ideal=$here/linear-springs-2dof-ideal.yaml kind=${kind%-2dof} ;;
*) echo "$usage" >&2; exit 2 ;;
esac
exp=${3:-$ideal}
shift 2
[ $# -gt 0 ] && shift
opensees=${OPENSEES:-$(command -v OpenSees || true)}
[ -x "$opensees" ] || { echo "SKIPPED: no OpenSees (set OPENSEES)"; exit 77; }
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
out=$(cd "$out" && pwd) # OpenSees runs there (it writes nros.log into its working folder)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
timeout 300 "$bdir/drths-physical" --experiment "$exp" --openfresco "127.0.0.1:$port" \
    --step-duration 0.01 --wait-timeout 30 --out "$out/run" --quiet "$@" >"$out/site.log" 2>&1 &
site=$!
for _ in $(seq 100); do grep -q "listening on TCP" "$out/site.log" 2>/dev/null && break; sleep 0.1; done
start=$(date +%s.%N)
(cd "$out" && timeout 240 "$opensees" "$here/genericclient-$model-$kind.tcl" "$port" \
    "$out/site.out" >"$out/opensees.log" 2>&1) || echo "OpenSees ended with status $? (124: killed by timeout)"
end=$(date +%s.%N)
status=0
wait "$site" || status=$?
(cd "$out" && timeout 60 "$opensees" "$here/reference-$model-$kind.tcl" 0 "$out/reference.out" \
    >"$out/reference.log" 2>&1)
python3 - "$out" "$status" "$start" "$end" <<'PY'
import json, sys
out, status, t0, t1 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
o = json.load(open(f"{out}/run/summary.json"))["openfresco"]
print(f"site exit {status}, OpenSees wall {t1 - t0:.2f} s; trials {o['targets']}, "
      f"steps {o['steps_reached']}, commits {o['commits']}, repeats {o['repeats']}, "
      f"iterations {o['iterations']} (at most {o['max_iterations_in_a_step']} a step), "
      f"late {o['late_targets']}, step-end tracking RMS {o['step_end_rms_error_pct']:.3f} %")
print(f"end: {o['end']}")
PY
grep -h "HOLD at" "$out/site.log" || true
echo "records in $out"
if [ "$exp" = "$ideal" ]; then
    python3 "$here/compare.py" "$out/site.out" "$out/reference.out" && [ "$status" -eq 0 ]
else
    python3 "$here/compare.py" "$out/site.out" "$out/reference.out" 1e300 || true
    exit "$status"
fi
