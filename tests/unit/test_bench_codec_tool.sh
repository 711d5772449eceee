#!/usr/bin/env bash
# drths-bench-codec measures the datagrams an experiment sends: by default those of
# examples/three-story-elcentro.yaml (R = 8, one channel: a COMMAND of 375 bytes and a FEEDBACK
# of 284 with the bench's steady-state values), with --experiment those of another file (R = 4:
# 223 and 176 bytes), each beside libsodium's AEAD alone on the same bytes and their ratio, and
# names the ChaCha20 code this CPU runs (protocol/chacha20.h), which the figures depend on. A
# missing file is refused with its name. Only the shape is checked here: timing goals live in
# tools/bench, never in pass/fail tests.
set -euo pipefail
bdir=${1:?build dir}
src=${DRTHS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tool=$bdir/drths-bench-codec
work=$(mktemp -d "${TMPDIR:-/tmp}/drths-test-bench-codec-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
    echo "FAIL: $*" >&2
    for f in "$work/out" "$work/err"; do [ -f "$f" ] && sed 's/^/  | /' "$f" >&2; done
    exit 1
}
# run ARGS...: a few rounds of a few datagrams, no loopback; exit code in $rc.
run() {
    set +e
    timeout 60 "$tool" --rounds 3 --batch 2 --pingpong 0 "$@" >"$work/out" 2>"$work/err"
    rc=$?
    set -e
}
# codec TYPE BYTES: the line of TYPE has BYTES and every figure, the AEAD alone's included.
codec() {
    grep -Eq "^codec type=$1 bytes=$2 seal_ns=[0-9]+ open_ns=[0-9]+ total_ns=[0-9]+ aead_seal_ns=[0-9]+ aead_open_ns=[0-9]+ aead_total_ns=[0-9]+ ratio=[0-9.]+$" \
        "$work/out" || fail "no $1 line of $2 bytes with the AEAD alone beside it"
}

run
[ "$rc" -eq 0 ] || fail "default experiment: exit $rc"
grep -Eq "^experiment path=.*/three-story-elcentro.yaml r=8 channels=1 chacha20=(avx512vl|avx2|libsodium)$" \
    "$work/out" || fail "the default is not the example at R = 8, or the ChaCha20 code is not named"
codec COMMAND 375
codec FEEDBACK 284
grep -q "other work on the machine moves every figure" "$work/err" || fail "no noise caveat"

ln -s "$src/examples/records" "$work/records"
sed 's/^  redundancy: .*/  redundancy: 4/' "$src/examples/three-story-elcentro.yaml" >"$work/r4.yaml"
run --experiment "$work/r4.yaml"
[ "$rc" -eq 0 ] || fail "R = 4: exit $rc"
grep -q "^experiment path=$work/r4.yaml r=4 channels=1 chacha20=" "$work/out" || fail "R = 4 not read"
codec COMMAND 223
codec FEEDBACK 176

# --chacha20: the codec's figures with another ChaCha20 code (libsodium's runs everywhere); a
# name that is not one is refused, naming it.
run --chacha20 libsodium
[ "$rc" -eq 0 ] || fail "--chacha20 libsodium: exit $rc"
grep -q "^experiment .* chacha20=libsodium$" "$work/out" || fail "--chacha20 libsodium not used"
codec COMMAND 375
run --chacha20 sse9
[ "$rc" -eq 2 ] || fail "--chacha20 sse9: exit $rc, not 2"
grep -q "sse9" "$work/err" || fail "the error does not name the refused --chacha20"

run --experiment "$work/missing.yaml"
[ "$rc" -ne 0 ] || fail "a missing experiment was accepted"
grep -q "missing.yaml" "$work/err" || fail "the error does not name the missing file"
echo "ok"
