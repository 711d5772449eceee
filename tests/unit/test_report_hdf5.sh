#!/usr/bin/env bash
# drths-report writes report.h5: every column of numerical.csv, the reference's numerical.csv and
# physical.csv as a dataset of the same name (read back here with h5dump, equal to the CSV
# values), each with its unit as an attribute, and summary.json's fields as root attributes.
# Records: the reference run of a 0.5 s experiment (twice, the second with the ground motion
# scaled by 1.002) and a small synthetic physical.csv.
set -euo pipefail
bdir=${1:?build dir}
src=${DRTHS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
export PYTHONPATH="$src/tests${PYTHONPATH:+:$PYTHONPATH}" # tests/checks.py
command -v h5dump >/dev/null || { echo "SKIPPED: no h5dump (Debian hdf5-tools; tools/deps --test)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/drths-test-report-hdf5-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

source "$src/tests/report_fixture.sh"
h5=$work/hyb/report.h5
[ -s "$h5" ] || fail "report.h5 missing"
grep -q "^records: $h5 " "$work/out" || fail "report.h5 not announced"

# Each dataset as text (h5dump -o: the values only, comma separated), and the attributes.
for g in numerical reference physical; do
    case $g in numerical) csv=$work/hyb/numerical.csv ;; reference) csv=$work/ref/numerical.csv ;;
               physical) csv=$work/hyb/physical.csv ;; esac
    mkdir -p "$work/dump/$g"
    for c in $(head -1 "$csv" | tr ',' ' '); do
        h5dump -d "/$g/$c" -y -w 0 -m '%.17g' -o "$work/dump/$g/$c" "$h5" >/dev/null ||
            fail "no dataset /$g/$c"
        h5dump -a "/$g/$c/unit" "$h5" | sed -nE 's/.*\(0\): "(.*)"/\1/p' >"$work/dump/$g/$c.unit"
    done
done
h5dump -A "$h5" >"$work/attrs"

python3 - "$work" <<'PY' || fail "report.h5 differs from the CSV files"
import csv, json, math, os, re, sys
from checks import check, status
w = sys.argv[1]
files = {"numerical": f"{w}/hyb/numerical.csv", "reference": f"{w}/ref/numerical.csv",
         "physical": f"{w}/hyb/physical.csv"}
units = {"x1_m": "m", "v1_m_s": "m/s", "a1_abs_m_s2": "m/s^2", "damper_force_N": "N",
         "time_s": "s", "cmd_lead_ms": "ms", "wake_late_us": "us", "step": "1", "tick": "1"}
for g, path in files.items():
    with open(path) as f:
        rd = csv.reader(f)
        head = next(rd)
        rows = [[float(v) for v in r] for r in rd]
    bad = []
    for i, c in enumerate(head):
        text = open(f"{w}/dump/{g}/{c}").read()
        vals = [float(v) for v in re.split(r"[,\s]+", text.strip()) if v]
        want = [r[i] for r in rows]
        same = len(vals) == len(want) and all(
            (math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(vals, want))
        if not same:
            bad.append(c)
        unit = open(f"{w}/dump/{g}/{c}.unit").read().strip()
        if c in units and unit != units[c]:
            bad.append(f"{c} unit {unit}")
    check(not bad, f"/{g}: {len(head)} datasets equal the {len(rows)} rows of {os.path.basename(path)}"
          + (f" (differ: {bad})" if bad else ""))
attrs = open(f"{w}/attrs").read()
summary = json.load(open(f"{w}/hyb/summary.json"))
for k in ("experiment", "fingerprint", "steps", "dt_s"):
    check(f'ATTRIBUTE "summary.{k}"' in attrs, f"root attribute summary.{k}")
check(summary["fingerprint"] in attrs, "the fingerprint's value")
check('ATTRIBUTE "verdict"' in attrs and 'ATTRIBUTE "run"' in attrs, "verdict and run attributes")
sys.exit(status())
PY
echo "PASS"
