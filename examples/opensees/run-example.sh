#!/bin/bash
# Runs one example of this folder against a drths actuator site and compares the displacement
# OpenSees records with the reference model's (docs/openfresco.md).
#
#   examples/opensees/run-example.sh BUILD_DIR [genericclient|shadowsite|generictcp] \
#       explicit|implicit|explicit-2dof|implicit-2dof [EXPERIMENT [SITE OPTIONS...]]
#
# The client is OpenSees's element genericClient (the default), OpenFresco's expSite ShadowSite
# or its expControl GenericTCP (both with expElement twoNodeLink), in the explicit or the
# implicit analysis, of the one-DOF model (model-1dof.tcl) or of the two-DOF model
# (model-2dof.tcl, two actuator channels; kinds explicit-2dof and implicit-2dof). EXPERIMENT
# defaults to linear-spring-ideal.yaml, or linear-springs-2dof-ideal.yaml for the two-DOF kinds
# (the ideal linear specimens: the records must agree to 1e-6 of the peak; exit 1 otherwise).
# With another specimen (the default experiment's MR damper) the comparison is printed for
# information. OpenSees is $OPENSEES, else OpenSees on PATH; exit 77 when neither is found.
# ShadowSite and GenericTCP need OpenFresco's Tcl package: OpenFresco.so in $OPENFRESCO_LIB (a
# folder) or on LD_LIBRARY_PATH; exit 77 when `loadPackage OpenFresco` does not provide
# expSite. Extra arguments for the OpenSees scripts after the port and the record file (the
# implicit analysis's tolerance, the OpenFresco element's initial stiffness) go in
# $OPENSEES_ARGS; the reference gets the same. The site's run folder, the OpenSees output and
# both records are kept in $OUT (default: a new temporary folder). Every program runs under
# `timeout`: OpenSees never exits on its own when the site ends the session early (it waits on
# the closed connection).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd -P)
usage="usage: run-example.sh BUILD_DIR [genericclient|shadowsite|generictcp]"
usage+=" explicit|implicit|explicit-2dof|implicit-2dof [EXPERIMENT [SITE OPTIONS...]]"
bdir=${1:?$usage}
shift
way=genericclient
case ${1:-} in
    genericclient | shadowsite | generictcp) way=$1; shift ;;
esac
kind=${1:?$usage}
case $kind in
explicit | implicit) model=1dof ideal=$here/linear-spring-ideal.yaml ;;
explicit-2dof | implicit-2dof)
    model=2dof ideal=$here/linear-springs-2dof-ideal.yaml kind=${kind%-2dof} ;;
*) echo "$usage" >&2; exit 2 ;;
esac
shift
exp=${1:-$ideal}
[ $# -gt 0 ] && shift
read -r -a script_args <<<"${OPENSEES_ARGS:-}"
opensees=${OPENSEES:-$(command -v OpenSees || true)}
[ -x "$opensees" ] || { echo "SKIPPED: no OpenSees (set OPENSEES)"; exit 77; }
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
out=$(cd "$out" && pwd) # OpenSees runs there (it writes nros.log into its working folder)
if [ "$way" != genericclient ]; then
    if [ -n "${OPENFRESCO_LIB:-}" ]; then
        export LD_LIBRARY_PATH="$OPENFRESCO_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    printf '%s\n' 'model BasicBuilder -ndm 1 -ndf 1' 'loadPackage OpenFresco' \
        'puts "expSite commands: [llength [info commands expSite]]"' >"$out/probe.tcl"
    (cd "$out" && timeout 60 "$opensees" "$out/probe.tcl" </dev/null >"$out/probe.log" 2>&1) ||
        true
    grep -q "expSite commands: 1" "$out/probe.log" || {
        echo "SKIPPED: OpenSees has no OpenFresco package (loadPackage OpenFresco: put" \
            "OpenFresco.so in \$OPENFRESCO_LIB or on LD_LIBRARY_PATH)"
        exit 77
    }
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
timeout 300 "$bdir/drths-physical" --experiment "$exp" --openfresco "127.0.0.1:$port" \
    --step-duration 0.01 --wait-timeout 30 --out "$out/run" --quiet "$@" >"$out/site.log" 2>&1 &
site=$!
for _ in $(seq 100); do grep -q "listening on TCP" "$out/site.log" 2>/dev/null && break; sleep 0.1; done
start=$(date +%s.%N)
# stdin from /dev/null: GenericTCP asks the operator twice to press Enter at its set-up (and
# reads end-of-file as Enter); from a terminal it would wait there until the site's step
# watchdog ends the run.
(cd "$out" && timeout 240 "$opensees" "$here/$way-$model-$kind.tcl" "$port" \
    "$out/site.out" "${script_args[@]}" </dev/null >"$out/opensees.log" 2>&1) ||
    echo "OpenSees ended with status $? (124: killed by timeout)"
end=$(date +%s.%N)
status=0
wait "$site" || status=$?
(cd "$out" && timeout 60 "$opensees" "$here/reference-$model-$kind.tcl" 0 "$out/reference.out" \
    "${script_args[@]}" </dev/null >"$out/reference.log" 2>&1)
python3 - "$out" "$status" "$start" "$end" <<'PY'
import json, sys
out, status, t0, t1 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
o = json.load(open(f"{out}/run/summary.json"))["openfresco"]
# No step reached (a client lost at once): the site writes null for the tracking error.
rms = "-" if o["step_end_rms_error_pct"] is None else f"{o['step_end_rms_error_pct']:.3f}"
print(f"site exit {status}, OpenSees wall {t1 - t0:.2f} s; trials {o['targets']}, "
      f"steps {o['steps_reached']}, commits {o['commits']}, repeats {o['repeats']}, "
      f"iterations {o['iterations']} (at most {o['max_iterations_in_a_step']} a step), "
      f"late {o['late_targets']}, step-end tracking RMS {rms} %")
print(f"end: {o['end']}")
PY
grep -h "HOLD at" "$out/site.log" || true
echo "records in $out"
# The ideal specimen however its path is written (the default, examples/opensees/..., ./...).
if [ "$(realpath "$exp")" = "$ideal" ]; then
    python3 "$here/compare.py" "$out/site.out" "$out/reference.out" && [ "$status" -eq 0 ]
else
    python3 "$here/compare.py" "$out/site.out" "$out/reference.out" 1e300 || true
    exit "$status"
fi
