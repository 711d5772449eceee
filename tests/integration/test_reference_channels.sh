#!/usr/bin/env bash
# drths-numerical --reference and physical.channels: the reference integrates the structure with
# one damper (the specimen at specimen.floor), and the channels are DOFs of an OpenFresco
# analysis, not of that structure, so a file that declares them is refused instead of run with
# the top-level specimen alone (which it did, silently, before):
#   1. examples/opensees/linear-springs-2dof-ideal.yaml (two channels): exit 2, one message
#      naming the file, the line and physical.channels, nothing on stdout, no run folder;
#   2. the same file without physical.channels: the reference runs (exit 0, numerical.csv and
#      summary.json written), so the refusal is the channels' and nothing else's.
source "$(dirname "$0")/../lib.sh"
two="$src/examples/opensees/linear-springs-2dof-ideal.yaml"

set +e
timeout 60 "$bdir/drths-numerical" --experiment "$two" --reference --quiet --out "$tmp/two" \
    >"$tmp/two.out" 2>"$tmp/two.err"
rc=$?
set -e
sed 's/^/  | /' "$tmp/two.err"
[ "$rc" -eq 2 ] || fail "two channels: exit $rc, expected 2 (refused)"
grep -q "^drths-numerical: .*linear-springs-2dof-ideal.yaml:57: physical.channels: --reference cannot honour 2 actuator channels" \
    "$tmp/two.err" || fail "two channels: the message does not name the file, line and physical.channels"
[ "$(wc -l <"$tmp/two.err")" -eq 1 ] || fail "two channels: more than one line on stderr"
[ ! -s "$tmp/two.out" ] || fail "two channels: something on stdout"
[ ! -e "$tmp/two" ] || fail "two channels: a run folder was written"

# The channels are the last lines of the file: without them the file describes one channel.
sed '/^  channels:/,$d' "$two" >"$tmp/one.yaml"
grep -q '^  limit_displacement_m: 0.1' "$tmp/one.yaml" && ! grep -q 'channels:' "$tmp/one.yaml" ||
    fail "could not remove physical.channels"
set +e
timeout 60 "$bdir/drths-numerical" --experiment "$tmp/one.yaml" --reference --quiet \
    --out "$tmp/one" >"$tmp/one.out" 2>"$tmp/one.err"
rc=$?
set -e
[ "$rc" -eq 0 ] || fail "without physical.channels: exit $rc, expected 0"
[ -s "$tmp/one/numerical.csv" ] && [ -s "$tmp/one/summary.json" ] ||
    fail "without physical.channels: no numerical.csv or summary.json"
echo "reference: two channels refused, one channel runs"
