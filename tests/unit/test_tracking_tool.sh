#!/usr/bin/env bash
# drths-tracking: a 5 s version of the Table 2 benchmark of Phillips & Spencer 2013 on five
# plants (the models, bandwidth x0.7 and x1.3, gain x0.8 and x1.2) prints the 30-row table and
# exits 0; on the nominal plant the feedforward beats no compensation and meets the goal; the
# adaptive compensation meets the goal on every plant, no factor of it long at a bound and its
# drive step within twice the command's; --plant-* and --experiment run one plant; on the
# four-factor plant of issue 30 the old bound 4 pins theta3 (and says so) and the derived bounds
# do not; --draws N draws plants over the range, reproducibly; the CSV has one row per run; by default the lookahead is what the feedforward asks for (32), and with none the
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
    "$(grep -q 'none  *polynomial  *ff average  *feedforward  *adaptive  *floor  *paper  *goal  *at bound  *step' "$tmp/out"; echo $?)"
# Data rows: "<case> 0-5 Hz|0-15 Hz <plant> none poly ff-average feedforward adaptive floor paper
# goal at-bound step"; these are the last 10 fields (the case and the plant names have spaces).
# "at bound" is one word: "-" or "t<k>:<percent>%".
rows=$(grep -E ' 0-(5|15) Hz ' "$tmp/out" || true)
n=$(printf '%s\n' "$rows" | grep -c . || true)
check "30 rows: 6 cases x 5 plants (got $n)" "$([ "$n" -eq 30 ]; echo $?)"
nominal=$(printf '%s\n' "$rows" | grep ' nominal ' || true)
check "6 nominal rows" "$([ "$(printf '%s\n' "$nominal" | grep -c .)" -eq 6 ]; echo $?)"
bad=$(printf '%s\n' "$nominal" | awk '{ none = $(NF-9); ff = $(NF-6); if (!(ff < none)) print }')
check "feedforward beats none on the nominal plant${bad:+ (not: $bad)}" "$([ -z "$bad" ]; echo $?)"
# On the nominal plant the scheduled feedforward (commanded current through the
# current-dynamics model) meets the goal, half of Table 2's best in the band, in every row.
bad=$(printf '%s\n' "$nominal" | awk '{ ff = $(NF-6); goal = $(NF-2); if (!(ff > 0 && ff <= goal)) print }')
check "scheduled feedforward at or below the goal on the nominal plant${bad:+ (not: $bad)}" \
    "$([ -z "$bad" ]; echo $?)"
# The adaptive compensation meets it on every plant, and is never far above the noise floor.
bad=$(printf '%s\n' "$rows" | awk '{ ad = $(NF-5); goal = $(NF-2); if (!(ad > 0 && ad <= goal)) print }')
check "adaptive at or below the goal on every plant${bad:+ (not: $bad)}" "$([ -z "$bad" ]; echo $?)"
bad=$(printf '%s\n' "$rows" | awk '{ ad = $(NF-5); fl = $(NF-4); if (!(fl > 0 && ad <= 2 * fl)) print }')
check "adaptive within twice the noise floor${bad:+ (not: $bad)}" "$([ -z "$bad" ]; echo $?)"
# Issue 30: no adaptive factor sits at a bound for long on these plants (the bounds come from
# the plant range), and the adaptive drive's largest step stays within drths-report's
# criterion, twice the command's.
bad=$(printf '%s\n' "$rows" | awk '{ b = $(NF-1); sub(/^t[0-3]:/, "", b); sub(/%$/, "", b)
    if (!($(NF-1) == "-" || b + 0 < 5)) print }')
check "no adaptive factor at a bound for 5 % of a run${bad:+ (not: $bad)}" "$([ -z "$bad" ]; echo $?)"
bad=$(printf '%s\n' "$rows" | awk '{ if (!($NF > 0 && $NF <= 2)) print }')
check "adaptive drive step / command step <= 2${bad:+ (not: $bad)}" "$([ -z "$bad" ]; echo $?)"
# A plant 30 % slower costs the fixed feedforward several percent: the study's point.
bad=$(printf '%s\n' "$rows" | grep 'bandwidth x0.7' | awk '{ ff = $(NF-6); if (!(ff > 2)) print }')
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

# Issue 30: the four-factor plant needs theta3 = 4.9. With the bound 4 of before, theta3 sits at
# it for most of the run and the table says so; with the bounds from the plant range it does
# not, and 0-15 Hz tracking is better. The CSV's at_bound_ticks3 agree with the table.
"$tool" --duration 5 --plant-gain 1.2 --plant-bandwidth 0.6 --plant-real-pole 1.4 \
    --plant-complex-pole 0.75 --csv "$tmp/f.csv" > "$tmp/four"
"$tool" --duration 5 --plant-gain 1.2 --plant-bandwidth 0.6 --plant-real-pole 1.4 \
    --plant-complex-pole 0.75 --adaptive-bound 4 --csv "$tmp/f4.csv" > "$tmp/four4"
cat "$tmp/four4"
check "--adaptive-bound 4 named in the header" "$(grep -q 'bounded to \[1/4, 4\]' "$tmp/four4"; echo $?)"
check "derived bounds named in the header" "$(grep -q 'theta3 0.00893-114' "$tmp/four"; echo $?)"
bad=$(grep -E ' 0-15 Hz ' "$tmp/four4" | awk '{ b = $(NF-1); if (b !~ /^t3:/) { print; next }
    sub(/^t3:/, "", b); sub(/%$/, "", b); if (!(b + 0 > 50)) print }')
check "bound 4: theta3 at its bound > 50 % of every 0-15 Hz run${bad:+ (not: $bad)}" "$([ -z "$bad" ]; echo $?)"
bad=$(grep -E ' 0-15 Hz ' "$tmp/four" | awk '{ b = $(NF-1); sub(/^t[0-3]:/, "", b); sub(/%$/, "", b)
    if (!($(NF-1) == "-" || b + 0 < 5)) print }')
check "derived bounds: no factor at a bound 5 % of a 0-15 Hz run${bad:+ (not: $bad)}" "$([ -z "$bad" ]; echo $?)"
check "csv: at_bound_ticks3 of bound 4 over half the observed ticks, derived under 5 %" \
    "$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        $4 == "adaptive" && $2 == "0-15" && !($c["at_bound_ticks3"] > 0.5 * $c["observed_ticks"]) { bad = 1 }
        END { exit bad }' "$tmp/f4.csv" &&
       awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        $4 == "adaptive" && !($c["at_bound_ticks3"] < 0.05 * $c["observed_ticks"]) { bad = 1 }
        END { exit bad }' "$tmp/f.csv"; echo $?)"

# --draws: N plants drawn over the range, listed, the same from the same seed.
"$tool" --duration 3 --draws 2 --seed 9 > "$tmp/d1"
"$tool" --duration 3 --draws 2 --seed 9 > "$tmp/d2"
"$tool" --duration 3 --draws 2 --seed 10 > "$tmp/d3"
check "--draws 2: 12 rows" "$([ "$(grep -cE ' 0-(5|15) Hz ' "$tmp/d1")" -eq 12 ]; echo $?)"
check "--draws 2: both draws listed" "$(grep -qE '^    draw 2 +g[0-9.]+ f' "$tmp/d1"; echo $?)"
check "--draws: the same seed draws the same plants" \
    "$(cmp -s <(grep '^    draw' "$tmp/d1") <(grep '^    draw' "$tmp/d2"); echo $?)"
check "--draws: another seed draws others" \
    "$(! cmp -s <(grep '^    draw' "$tmp/d1") <(grep '^    draw' "$tmp/d3"); echo $?)"
bad=$(grep '^    draw' "$tmp/d1" "$tmp/d3" | sed 's/.*draw [0-9]* *//' | awk '{
    g = substr($1, 2); f = substr($2, 2); r = substr($3, 2); c = substr($4, 2)
    if (!(g >= 0.7 && g <= 1.4 && f >= 0.5 && f <= 2 && r >= 0.5 && r <= 2 && c >= 0.5 && c <= 2)) print }')
check "--draws: every factor within the default range${bad:+ (not: $bad)}" "$([ -z "$bad" ]; echo $?)"

# No lookahead: every feedforward tick is extrapolated, and counted.
"$tool" --duration 3 --lookahead-ticks 0 --csv "$tmp/z.csv" > "$tmp/out0"
check "lookahead 0 reported" "$(grep -q 'lookahead 0 ticks (feedforward needs 32, the rest extrapolated)' "$tmp/out0"; echo $?)"
check "lookahead 0: every feedforward tick extrapolated" \
    "$(awk -F, 'NR > 1 && $4 ~ /^feedforward/ && $10 != $11 { bad = 1 } END { exit bad }' "$tmp/z.csv"; echo $?)"

for args in "--duration 1" "--lookahead-ticks 65" "--seed x" "--bogus" "--duration" "extra" \
    "--plant-gain 0" "--plant-bandwidth 11" "--experiment /nonexistent.yaml" \
    "--experiment $src/examples/three-story-elcentro.yaml --plant-gain 1.1" "--draws 0" \
    "--draws 2 --plant-gain 1.1" "--adaptive-bound 0.5"; do
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
