#!/usr/bin/env bash
# drths-report writes report.mat, a MATLAB v7.3 MAT-file: an HDF5 file with a 512-byte user block
# that starts with MATLAB's 128-byte header, and one N-by-1 double variable per CSV column
# (numerical_<column>, reference_<column>, physical_<column>, attribute MATLAB_class "double").
# Checked here: the header bytes, then, with h5py (Debian python3-h5py; tools/deps --test), that
# both report.mat and report.h5 read back equal to the CSV files. Records: the reference run of a
# 0.5 s experiment (twice, the second with the ground motion scaled by 1.002) and a small
# synthetic physical.csv with a NaN.
set -euo pipefail
bdir=${1:?build dir}
src=${DRTHS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
export PYTHONPATH="$src/tests${PYTHONPATH:+:$PYTHONPATH}" # tests/checks.py
# The Python on the PATH may be another one than Debian's, which has python3-h5py.
py=
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import h5py, numpy' 2>/dev/null; then
        py=$p
        break
    fi
done
[ -n "$py" ] || { echo "SKIPPED: no h5py (Debian python3-h5py; tools/deps --test)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/drths-test-report-mat-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

source "$src/tests/report_fixture.sh"
mat=$work/hyb/report.mat
[ -s "$mat" ] || fail "report.mat missing"
grep -q "^records: $mat " "$work/out" || fail "report.mat not announced"

"$py" - "$work" <<'PY' || fail "report.mat or report.h5 differs from the CSV files"
import csv, math, sys
import h5py, numpy as np
from checks import check, status
w = sys.argv[1]
head = open(f"{w}/hyb/report.mat", "rb").read(512)
text = head[:116].decode("ascii")
check(text.startswith("MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: ")
      and text.rstrip(" ").endswith("HDF5 schema 1.00 ."), f"MAT header text: {text.rstrip()!r}")
check(head[116:124] == bytes(8) and head[124:128] == b"\x00\x02IM",
      f"MAT version 0x0200 and endian indicator IM: {head[116:128].hex()}")
files = {"numerical": f"{w}/hyb/numerical.csv", "reference": f"{w}/ref/numerical.csv",
         "physical": f"{w}/hyb/physical.csv"}
with h5py.File(f"{w}/hyb/report.mat", "r") as m, h5py.File(f"{w}/hyb/report.h5", "r") as h:
    check(m.userblock_size == 512, f"user block {m.userblock_size} bytes")
    for g, path in files.items():
        with open(path) as f:
            rd = csv.reader(f)
            names = next(rd)
            rows = np.array([[float(v) for v in r] for r in rd])
        bad = []
        for i, c in enumerate(names):
            v = f"{g}_{c}"
            d = m.get(v)
            if (d is None or d.shape != (1, len(rows)) or d.attrs.get("MATLAB_class") != b"double"
                    or not np.array_equal(d[0], rows[:, i], equal_nan=True)):
                bad.append(v)
            if not np.array_equal(h[g][c][:], rows[:, i], equal_nan=True):
                bad.append(f"/{g}/{c}")
        check(not bad, f"{g}: {len(names)} columns of {len(rows)} rows in report.mat and report.h5"
              + (f" (differ: {bad})" if bad else ""))
    check(len(m.keys()) == sum(len(open(p).readline().split(",")) for p in files.values()),
          f"report.mat holds {len(m.keys())} variables, one per column")
    check(math.isnan(m["physical_meas_force_N"][0, 7]), "a NaN in the CSV is a NaN in report.mat")
sys.exit(status())
PY
echo "PASS"
