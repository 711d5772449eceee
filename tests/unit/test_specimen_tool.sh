#!/usr/bin/env bash
# drths-specimen: CSV header, row count, peak force in the plausible range for each damper,
# the plant and displacement-file paths, one-line errors with exit status 2, exit 1 when the output
# cannot be written.
set -euo pipefail
bdir=${1:?build dir}
tool="$bdir/drths-specimen"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # description, condition result (0 = ok)
    if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi
}
peak() { awk -F, 'NR > 1 { f = $4 < 0 ? -$4 : $4; if (f > m) m = f } END { printf "%.1f", m }' "$1"; }
in_range() { awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v >= lo && v <= hi) }'; }

# 200-kN damper at 2.5 A, 20 mm at 2 Hz, 3 cycles at 5 kHz: 7501 rows; peak about 215 kN.
"$tool" --model phillips2013-200kN --current 2.5 --sine 0.02,2 --out "$tmp/a.csv"
check "header" "$([ "$(head -1 "$tmp/a.csv")" = "time_s,disp_m,vel_m_s,force_N,command" ]; echo $?)"
check "rows 7501 (got $(($(wc -l < "$tmp/a.csv") - 1)))" "$([ "$(wc -l < "$tmp/a.csv")" -eq 7502 ]; echo $?)"
p=$(peak "$tmp/a.csv")
check "phillips 2.5 A 20 mm 2 Hz peak $p N in 180-250 kN" "$(in_range "$p" 180e3 250e3; echo $?)"
check "last row at t = 1.5 s" "$(awk -F, 'END { exit !($1 > 1.4999 && $1 < 1.5001) }' "$tmp/a.csv"; echo $?)"
check "command column 2.5 A" "$(awk -F, 'NR > 1 && $5 != 2.5 { bad = 1 } END { exit bad }' "$tmp/a.csv"; echo $?)"

# 0 A: a few tens of kN.
"$tool" --current 0 --sine 0.02,2 --cycles 2 --rate 2000 > "$tmp/b.csv"
check "rows 2001 at 2 kHz, 2 cycles" "$([ "$(wc -l < "$tmp/b.csv")" -eq 2002 ]; echo $?)"
p=$(peak "$tmp/b.csv")
check "phillips 0 A peak $p N in 15-40 kN" "$(in_range "$p" 15e3 40e3; echo $?)"

# Small damper at 2.25 V, 1.5 cm at 2.5 Hz: about 1.7 kN.
"$tool" --model spencer1997-small --voltage 2.25 --sine 0.015,2.5 > "$tmp/c.csv"
p=$(peak "$tmp/c.csv")
check "spencer 2.25 V peak $p N in 1.2-2.2 kN" "$(in_range "$p" 1.2e3 2.2e3; echo $?)"

# Through the plant: the displacement lags and falls slightly short; the force stays close.
"$tool" --current 2.5 --sine 0.02,2 --plant > "$tmp/d.csv"
p=$(peak "$tmp/d.csv")
check "plant rows 7501" "$([ "$(wc -l < "$tmp/d.csv")" -eq 7502 ]; echo $?)"
check "plant peak $p N in 180-250 kN" "$(in_range "$p" 180e3 250e3; echo $?)"
dmax=$(awk -F, 'NR > 1 { d = $2 < 0 ? -$2 : $2; if (d > m) m = d } END { print m }' "$tmp/d.csv")
check "plant peak displacement $dmax m in 19-20 mm" "$(in_range "$dmax" 0.019 0.0200; echo $?)"

# A displacement file: triangle 0 -> 10 mm -> 0 over 1 s, resampled at 1 kHz.
printf 'time_s,disp_m\n0,0\n0.5,0.01\n1.0,0\n' > "$tmp/h.csv"
"$tool" --displacement-file "$tmp/h.csv" --current 1 --rate 1000 > "$tmp/e.csv"
check "file rows 1001" "$([ "$(wc -l < "$tmp/e.csv")" -eq 1002 ]; echo $?)"
check "file mid-ramp velocity 0.02 m/s" "$(awk -F, 'NR == 252 { exit !($3 > 0.01999 && $3 < 0.02001) }' "$tmp/e.csv"; echo $?)"

# Bad options: exit 2 and one line on stderr naming the program (an unknown option: getopt's
# line and "Try 'drths-specimen --help'.").
for args in "--sine 0.02" "--model nope --sine 0.01,1" "--current 3 --sine 0.01,1" \
    "--voltage 1 --sine 0.01,1" "--bogus" "--sine 0.01,1 --rate -5" "" \
    "--displacement-file $tmp/missing.csv"; do
    set +e
    # shellcheck disable=SC2086
    "$tool" $args > /dev/null 2> "$tmp/err"
    rc=$?
    set -e
    lines=$(wc -l < "$tmp/err")
    check "'$args' exits 2 with one line ($(head -c 100 "$tmp/err"))" \
        "$([ $rc -eq 2 ] && grep -q '^drths-specimen: ' "$tmp/err" && { [ "$lines" -eq 1 ] ||
            { [ "$lines" -eq 2 ] && [ "$(tail -1 "$tmp/err")" = "Try 'drths-specimen --help'." ]; }; }
            echo $?)"
done
"$tool" --current 3 --sine 0.01,1 > /dev/null 2> "$tmp/err" || true
check "--current 3: names the option and the range" \
    "$(grep -qx "drths-specimen: --current: '3' is not a number from 0 A to 2.5 A" "$tmp/err"; echo $?)"
# An output that cannot be written is a failed run (exit 1), not a usage error.
set +e
"$tool" --sine 0.01,1 --out "$tmp/no/such/dir.csv" > /dev/null 2> "$tmp/err"
rc=$?
set -e
check "unwritable --out exits 1 ($(head -c 100 "$tmp/err"))" "$([ $rc -eq 1 ]; echo $?)"
check "--help" "$("$tool" --help | grep -q -- "--displacement-file"; echo $?)"

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
