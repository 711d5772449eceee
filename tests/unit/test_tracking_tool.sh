#!/usr/bin/env bash
# drths-tracking: a 5 s version of the Table 2 benchmark of Phillips & Spencer 2013 on five
# plants (the models, bandwidth x0.7 and x1.3, gain x0.8 and x1.2) prints the 30-row table and
# exits 0; on the nominal plant the feedforward beats no compensation and meets the goal; the
# adaptive compensation meets the goal on every plant; --plant-* and --experiment run one plant; the CSV has one
# row per run; by default the lookahead is what the feedforward asks for (32), and with none the
# feedforward falls back to extrapolation and says so; bad
# options exit 2 with one line naming the program (an unknown option or a missing value:
# getopt's line and "Try 'drths-tracking --help'.").
set -euo pipefail
bdir=${1:?build dir}
tool="$bdir/drths-tracking"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # description, condition result (0 = ok)
    if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi
}

set +e
"$tool" --duration 5 --csv "$tmp/t.csv" > "$tmp/out" 2> "$tmp/err"
rc=$?
set -e
cat "$tmp/out"
check "exit 0 (got $rc: $(head -c 200 "$tmp/err"))" "$([ $rc -eq 0 ]; echo $?)"
check "header names the lookahead" "$(grep -q 'lookahead 32 ticks (feedforward needs 32)' "$tmp/out"; echo $?)"
check "table header" \
    "$(grep -q 'none  *polynomial  *ff average  *feedforward  *adaptive  *floor  *paper  *goal' "$tmp/out"; echo $?)"
# Data rows: "<case> 0-5 Hz|0-15 Hz <plant> none poly ff-average feedforward adaptive floor paper
# goal"; the numbers are the last 8 fields (the case and the plant names have spaces).
rows=$(grep -E ' 0-(5|15) Hz ' "$tmp/out" || true)
n=$(printf '%s\n' "$rows" | grep -c . || true)
check "30 rows: 6 cases x 5 plants (got $n)" "$([ "$n" -eq 30 ]; echo $?)"
nominal=$(printf '%s\n' "$rows" | grep ' nominal ' || true)
check "6 nominal rows" "$([ "$(printf '%s\n' "$nominal" | grep -c .)" -eq 6 ]; echo $?)"
bad=$(printf '%s\n' "$nominal" | awk '{ none = $(NF-7); ff = $(NF-4); if (!(ff < none)) print }')
check "feedforward beats none on the nominal plant${bad:+ (not: $bad)}" "$([ -z "$bad" ]; echo $?)"
# On the nominal plant the scheduled feedforward (commanded current through the
# current-dynamics model) meets the goal, half of Table 2's best in the band, in every row.
bad=$(printf '%s\n' "$nominal" | awk '{ ff = $(NF-4); goal = $NF; if (!(ff > 0 && ff <= goal)) print }')
check "scheduled feedforward at or below the goal on the nominal plant${bad:+ (not: $bad)}" \
    "$([ -z "$bad" ]; echo $?)"
# The adaptive compensation meets it on every plant, and is never far above the noise floor.
bad=$(printf '%s\n' "$rows" | awk '{ ad = $(NF-3); goal = $NF; if (!(ad > 0 && ad <= goal)) print }')
check "adaptive at or below the goal on every plant${bad:+ (not: $bad)}" "$([ -z "$bad" ]; echo $?)"
bad=$(printf '%s\n' "$rows" | awk '{ ad = $(NF-3); fl = $(NF-2); if (!(fl > 0 && ad <= 2 * fl)) print }')
check "adaptive within twice the noise floor${bad:+ (not: $bad)}" "$([ -z "$bad" ]; echo $?)"
# A plant 30 % slower costs the fixed feedforward several percent: the study's point.
bad=$(printf '%s\n' "$rows" | grep 'bandwidth x0.7' | awk '{ ff = $(NF-4); if (!(ff > 2)) print }')
check "the fixed feedforward suffers on a slower plant${bad:+ (not: $bad)}" "$([ -z "$bad" ]; echo $?)"
check "paper figures present" "$(grep -q ' 0.942 ' "$tmp/out" && grep -q ' 4.720 ' "$tmp/out"; echo $?)"
check "summary line" "$(grep -q 'other plants:  feedforward 0 of 24 rows, adaptive 24 of 24' "$tmp/out"; echo $?)"
check "csv: header + 150 runs (got $(wc -l < "$tmp/t.csv") lines)" "$([ "$(wc -l < "$tmp/t.csv")" -eq 151 ]; echo $?)"
check "csv: no extrapolation with the default lookahead" \
    "$(awk -F, 'NR > 1 && $4 ~ /^feedforward/ && $10 != 0 { bad = 1 } END { exit bad }' "$tmp/t.csv"; echo $?)"
check "csv: the adaptive factors of a slower plant exceed 1 (theta3 > 1.5)" \
    "$(awk -F, 'NR > 1 && $4 == "adaptive" && $14 == "bandwidth x0.7" && !($23 > 1.5) { bad = 1 } END { exit bad }' "$tmp/t.csv"; echo $?)"

# One plant from the command line, and from an experiment file.
"$tool" --duration 3 --plant-bandwidth 0.7 --plant-gain 1.2 > "$tmp/one"
check "--plant-*: 6 rows" "$([ "$(grep -cE ' 0-(5|15) Hz ' "$tmp/one")" -eq 6 ]; echo $?)"
check "--plant-*: the plant is named" "$(grep -q 'g1.2 f0.7 r1 c1' "$tmp/one"; echo $?)"
src=$(cd "$(dirname "$0")/../.." && pwd)
"$tool" --duration 3 --experiment "$src/examples/three-story-elcentro.yaml" > "$tmp/exp"
check "--experiment: 6 rows" "$([ "$(grep -cE ' 0-(5|15) Hz ' "$tmp/exp")" -eq 6 ]; echo $?)"
check "--experiment: the example's plant differs from the model" \
    "$(! grep -E ' 0-(5|15) Hz ' "$tmp/exp" | grep -q 'g1 f1 r1 c1'; echo $?)"

# No lookahead: every feedforward tick is extrapolated, and counted.
"$tool" --duration 3 --lookahead-ticks 0 --csv "$tmp/z.csv" > "$tmp/out0"
check "lookahead 0 reported" "$(grep -q 'lookahead 0 ticks (feedforward needs 32, the rest extrapolated)' "$tmp/out0"; echo $?)"
check "lookahead 0: every feedforward tick extrapolated" \
    "$(awk -F, 'NR > 1 && $4 ~ /^feedforward/ && $10 != $11 { bad = 1 } END { exit bad }' "$tmp/z.csv"; echo $?)"

for args in "--duration 1" "--lookahead-ticks 65" "--seed x" "--bogus" "--duration" "extra" \
    "--plant-gain 0" "--plant-bandwidth 11" "--experiment /nonexistent.yaml" \
    "--experiment $src/examples/three-story-elcentro.yaml --plant-gain 1.1"; do
    set +e
    # shellcheck disable=SC2086
    "$tool" $args > /dev/null 2> "$tmp/err"
    rc=$?
    set -e
    lines=$(wc -l < "$tmp/err")
    check "'$args' exits 2 with one line ($(head -c 100 "$tmp/err"))" \
        "$([ $rc -eq 2 ] && grep -q '^drths-tracking: ' "$tmp/err" && { [ "$lines" -eq 1 ] ||
            { [ "$lines" -eq 2 ] && [ "$(tail -1 "$tmp/err")" = "Try 'drths-tracking --help'." ]; }; }
            echo $?)"
done
"$tool" --lookahead-ticks 65 > /dev/null 2> "$tmp/err" || true
check "--lookahead-ticks 65: names the option and the range" \
    "$(grep -qx "drths-tracking: --lookahead-ticks: '65' is not an integer in 0..64" "$tmp/err"; echo $?)"
check "--help" "$("$tool" --help | grep -q -- "--lookahead-ticks"; echo $?)"

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
