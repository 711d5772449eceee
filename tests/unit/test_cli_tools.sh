#!/usr/bin/env bash
# Every tool program (tools/<verb>/main.c) speaks the command line of common/platform/cli.h:
#   --version prints "drths-X (drths) VERSION" with the same VERSION in every program (CMake's
#   project version first, when ctest gives it in DRTHS_EXPECT_VERSION) and exits 0;
#   --help and -h exit 0, print the usage first and end with the "Exit status" paragraph;
#   a bad number is refused with exit 2 and one line "drths-X: --opt: 'TEXT' is not ...";
#   an unknown option exits 2 with getopt's line and "Try 'drths-X --help'.";
#   a stray argument exits 2 with "drths-X: unexpected argument 'X' (see --help)".
# Nothing here starts a run: every refusal comes before anything is opened.
set -euo pipefail
bdir=${1:?build dir}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # description, condition result (0 = ok)
    if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi
}
# run TOOL ARGS...: the tool's exit code in $rc, its stdout and stderr in $tmp/out and $tmp/err.
run() {
    local tool=$1
    shift
    set +e
    timeout 10 "$bdir/drths-$tool" "$@" > "$tmp/out" 2> "$tmp/err"
    rc=$?
    set -e
}

# Every tools/<verb>/main.c, which CMake builds as drths-<verb>.
src=${DRTHS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tools=$(for m in "$src"/tools/*/main.c; do basename "$(dirname "$m")"; done)
check "tools found ($(echo $tools))" "$([ "$(echo "$tools" | wc -w)" -ge 9 ]; echo $?)"

# A bad number for each tool that takes one: TOOL|OPTION|VALUE|what the message says it is not.
bad_numbers=(
    "impair|--pool|5|an integer in 16..4194304"
    "impair|--seed|0x10|an integer in 0..9223372036854775807"
    "impair|--duration|-1|a number from 0 s to 1e+07 s"
    "specimen|--rate|fast|a number from 1 Hz to 1e+06 Hz"
    "specimen|--cycles|0|a positive number"
    "openfresco-client|--dt|0|a positive number of seconds"
    "openfresco-client|--steps|1e3|an integer in 1..1000000000"
    "tracking|--duration|2|a number from 3 s to 3600 s"
    "tracking|--seed|4.5|an integer in 0..2147483647"
    "bench-codec|--rounds|0|an integer in 1..1000"
    "bench-step|--steps|9|an integer in 10..100000000"
    "bench-step|--cpu|x|an integer in -1..4095"
)

version=
for t in $tools; do
    [ -x "$bdir/drths-$t" ] || { check "drths-$t built" 1; continue; }

    run "$t" --version
    line=$(cat "$tmp/out")
    v=${line#"drths-$t (drths) "}
    check "drths-$t --version exits 0 and prints 'drths-$t (drths) VERSION' ($line)" \
        "$([ $rc -eq 0 ] && [ "$v" != "$line" ] && [ -n "$v" ] && [ "$(wc -l < "$tmp/out")" -eq 1 ] &&
            [ ! -s "$tmp/err" ]; echo $?)"
    [ -n "$version" ] || version=$v
    check "drths-$t: the same version as the others ('$v')" "$([ "$v" = "$version" ]; echo $?)"

    for h in --help -h; do
        run "$t" "$h"
        check "drths-$t $h exits 0, usage first, ends with the exit status" \
            "$([ $rc -eq 0 ] && head -1 "$tmp/out" | grep -q "^usage: drths-$t " &&
                tail -4 "$tmp/out" | head -1 | grep -qx 'Exit status:' &&
                tail -1 "$tmp/out" | grep -q '^  2  wrong options' &&
                grep -q -- '--version' "$tmp/out" && [ ! -s "$tmp/err" ]; echo $?)"
    done

    run "$t" --no-such-option
    check "drths-$t --no-such-option exits 2 with getopt's line and the Try line" \
        "$([ $rc -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 2 ] &&
            head -1 "$tmp/err" | grep -q "^drths-$t: unrecognized option '--no-such-option'" &&
            [ "$(tail -1 "$tmp/err")" = "Try 'drths-$t --help'." ]; echo $?)"

    # Tools that take an operand get a second one; the others one.
    case $t in
    report | keygen | check) run "$t" "$tmp/a" stray ;;
    *) run "$t" stray ;;
    esac
    check "drths-$t refuses a stray argument with exit 2 ($(head -c 100 "$tmp/err"))" \
        "$([ $rc -eq 2 ] && [ "$(cat "$tmp/err")" = "drths-$t: unexpected argument 'stray' (see --help)" ]
            echo $?)"
done
if [ -n "${DRTHS_EXPECT_VERSION:-}" ]; then
    check "the version '$version' starts with the project version $DRTHS_EXPECT_VERSION" \
        "$(case $version in "$DRTHS_EXPECT_VERSION" | "$DRTHS_EXPECT_VERSION (git "*) echo 0 ;; *) echo 1 ;; esac)"
fi

for b in "${bad_numbers[@]}"; do
    IFS='|' read -r t opt val what <<< "$b"
    run "$t" "$opt" "$val"
    want="drths-$t: $opt: '$val' is not $what"
    check "drths-$t $opt $val: exit 2, '$want' ($(head -c 120 "$tmp/err"))" \
        "$([ $rc -eq 2 ] && [ "$(cat "$tmp/err")" = "$want" ] && [ ! -s "$tmp/out" ]; echo $?)"
done

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
