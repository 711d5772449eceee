#!/usr/bin/env bash
# drths-tracking: a 5 s version of the Table 2 benchmark of Phillips & Spencer 2013 prints the
# six-row table and exits 0; the feedforward beats no compensation in every row; the CSV has one
# row per run; with no lookahead the feedforward falls back to extrapolation and says so; bad
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
check "header names the lookahead" "$(grep -q 'lookahead 3 ticks' "$tmp/out"; echo $?)"
check "table header" "$(grep -q 'none  *polynomial  *ff average  *feedforward' "$tmp/out"; echo $?)"
# Data rows: "<case> 0-5 Hz|0-15 Hz  rms none poly ff-average feedforward paper goal"; the
# numbers are the last 7 fields.
rows=$(grep -E ' 0-(5|15) Hz ' "$tmp/out" || true)
n=$(printf '%s\n' "$rows" | grep -c . || true)
check "six rows (got $n)" "$([ "$n" -eq 6 ]; echo $?)"
bad=$(printf '%s\n' "$rows" | awk '{ none = $(NF-5); ff = $(NF-3); if (!(ff < none)) print }')
check "feedforward beats none in every row${bad:+ (not: $bad)}" "$([ -z "$bad" ]; echo $?)"
bad=$(printf '%s\n' "$rows" | awk '{ ff = $(NF-3); if (!(ff > 0 && ff < 10)) print }')
check "feedforward errors in (0, 10) %${bad:+ (not: $bad)}" "$([ -z "$bad" ]; echo $?)"
# The scheduled feedforward (commanded current through the current-dynamics model) meets the
# goal, half the paper's best figure, in every row.
bad=$(printf '%s\n' "$rows" | awk '{ ff = $(NF-2); goal = $NF; if (!(ff > 0 && ff <= goal)) print }')
check "scheduled feedforward at or below the goal${bad:+ (not: $bad)}" "$([ -z "$bad" ]; echo $?)"
check "paper figures present" "$(grep -q ' 0.942 ' "$tmp/out" && grep -q ' 4.720 ' "$tmp/out"; echo $?)"
check "csv: header + 24 runs (got $(wc -l < "$tmp/t.csv") lines)" "$([ "$(wc -l < "$tmp/t.csv")" -eq 25 ]; echo $?)"
check "csv: no extrapolation with lookahead 3" \
    "$(awk -F, 'NR > 1 && $4 ~ /^feedforward/ && $10 != 0 { bad = 1 } END { exit bad }' "$tmp/t.csv"; echo $?)"

# No lookahead: every feedforward tick is extrapolated, and counted.
"$tool" --duration 3 --lookahead-ticks 0 --csv "$tmp/z.csv" > "$tmp/out0"
check "lookahead 0 reported" "$(grep -q 'lookahead 0 ticks (feedforward needs 3, the rest extrapolated)' "$tmp/out0"; echo $?)"
check "lookahead 0: every feedforward tick extrapolated" \
    "$(awk -F, 'NR > 1 && $4 ~ /^feedforward/ && $10 != $11 { bad = 1 } END { exit bad }' "$tmp/z.csv"; echo $?)"

for args in "--duration 1" "--lookahead-ticks 65" "--seed x" "--bogus" "--duration" "extra"; do
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
