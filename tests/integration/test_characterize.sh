#!/usr/bin/env bash
# drths-physical --characterize, through the real program, on the virtual specimen of a copy of
# the default experiment whose damper is unlike the nominal model (specimen.true_scale alpha
# 1.15, c0 0.9, c1 1.1, gamma_beta 0.85, A 1.2), with the short protocol:
#   1. exit 0, the total actuator time printed before the run, physical.csv, fit.csv,
#      model.yaml and summary.json in the run folder;
#   2. every fitted parameter within 2 % of the truth in the fit's gauge (summary.json's
#      error_pct), A and x0 reported as fixed with their reason;
#   3. the model file loads where the numerical site reads it (drths-check with
#      numerical.smith_model, exit 0 and its SHA-256 printed), and a damaged copy is refused
#      with the file, the line and the field named (drths-check and drths-numerical, exit 2);
#   4. --protocol without --characterize is refused;
#   5. the protocol ran through the experiment's compensation (adaptive): summary.json's
#      tracking of the set-points within 1 % RMS, physical.csv with the drive written.
source "$(dirname "$0")/../lib.sh"

# The fit integrates the damper model some 2000 times over the record: seconds in a plain build,
# beyond the test's timeout under a sanitizer (the code is one thread: ThreadSanitizer has
# nothing to check in it; unit.damperfile and unit.damperfit cover the parsing and the fit).
if ldd "$bdir/drths-physical" | grep -q 'lib[at]san\.so'; then
    skip "a sanitizer build (the characterization's fit takes minutes there)"
fi

make_experiment 2 's/^    alpha: 1.0 .*/    alpha: 1.15/' 's/^    c0: 1.0/    c0: 0.9/' \
    's/^    c1: 1.0/    c1: 1.1/' 's/^    gamma_beta: 1.0/    gamma_beta: 0.85/' 's/^    A: 1.0/    A: 1.2/'
grep -q '^    gamma_beta: 0.85$' "$tmp/exp.yaml" || fail "could not set specimen.true_scale"

set +e
timeout 280 "$bdir/drths-physical" --experiment "$tmp/exp.yaml" --characterize --protocol short \
    --out "$tmp/cz" >"$tmp/cz.out" 2>"$tmp/cz.err"
rc=$?
set -e
sed 's/^/  | /' "$tmp/cz.out"
[ "$rc" -eq 0 ] || fail "--characterize: exit $rc, expected 0"
head -n 1 "$tmp/cz.out" | grep -q 'total actuator time [0-9.]* s' ||
    fail "the first line does not give the total actuator time"
for f in physical.csv fit.csv model.yaml summary.json; do
    [ -s "$tmp/cz/$f" ] || fail "no $f in the run folder"
done
head -n 1 "$tmp/cz/physical.csv" | grep -q ',drive_m$' || fail "physical.csv: no drive_m column"

python3 - "$tmp/cz/summary.json" <<'EOF' || fail "summary.json: parameters not recovered"
import json, sys
s = json.load(open(sys.argv[1]))
fit = s["fit"]
assert s["complete"] and fit["done"], "protocol or fit incomplete"
bad, fixed = [], []
for p in fit["parameters"]:
    if "fixed" in p:
        fixed.append(p["name"])
        continue
    if p["true"] == 0:
        # k0, k1: absent from the 200-kN damper; a few N/mm at most (kN/mm units)
        if abs(p["value"]) > 0.02:
            bad.append("%s = %g (true 0)" % (p["name"], p["value"]))
    elif abs(p["error_pct"]) > 2.0:
        bad.append("%s %.2f %%" % (p["name"], p["error_pct"]))
assert not bad, "beyond 2 %: " + ", ".join(bad)
assert sorted(fixed) == ["A", "x0"], fixed
ran = [t for t in s["tests"] if not t["skipped"]]
assert len(ran) > 10 and all("force_error_rms_N" in t for t in ran), "tests without a force error"
assert all(t["peak_force_N"] <= 0.8 * 240000 + 5000 or t["wound_down"] for t in ran), "guard"
# Through the test's compensation (the example's adaptive one): the specimen at the planned
# set-points (about 9 % RMS error straight to the DAQ, the actuator's lag).
tr = s["tracking"]
assert tr["compensation"] == "adaptive", tr
assert tr["rms_error_pct"] < 1.0, "tracking of the set-points: %.3f %% RMS" % tr["rms_error_pct"]
print("recovered within 2 %%: %d parameters; set-points tracked to %.3f %% RMS"
      % (len(fit["parameters"]) - len(fixed), tr["rms_error_pct"]))
EOF

# The numerical site reads it.
sed -e "s|^  smith: fixed|  smith: adaptive\n  smith_model: $tmp/cz/model.yaml|" "$tmp/exp.yaml" >"$tmp/model.yaml"
grep -q '^  smith_model: ' "$tmp/model.yaml" || fail "could not set numerical.smith_model"
set +e
"$bdir/drths-check" "$tmp/model.yaml" >"$tmp/check.out" 2>&1
rc=$?
set -e
[ "$rc" -eq 0 ] || fail "drths-check with the model: exit $rc, expected 0"
sha=$(sha256sum "$tmp/cz/model.yaml" | cut -d' ' -f1)
grep -q "numerical.smith_model .* (sha256 $sha): loads" "$tmp/check.out" ||
    fail "drths-check does not name the model file and its SHA-256"

# A damaged copy: one value that is not a number.
sed 's/^  c1_b: {value: [0-9.e+-]*/  c1_b: {value: 1x5/' "$tmp/cz/model.yaml" >"$tmp/bad-model.yaml"
cmp -s "$tmp/cz/model.yaml" "$tmp/bad-model.yaml" && fail "could not damage the model file"
line=$(grep -n '^  c1_b:' "$tmp/bad-model.yaml" | cut -d: -f1)
sed "s|$tmp/cz/model.yaml|$tmp/bad-model.yaml|" "$tmp/model.yaml" >"$tmp/bad.yaml"
for prog in drths-check drths-numerical; do
    set +e
    if [ $prog = drths-check ]; then
        timeout 60 "$bdir/$prog" "$tmp/bad.yaml" >"$tmp/bad.out" 2>&1
    else
        timeout 60 "$bdir/$prog" --experiment "$tmp/bad.yaml" >"$tmp/bad.out" 2>&1
    fi
    rc=$?
    set -e
    [ "$rc" -eq 2 ] || fail "$prog with a damaged model file: exit $rc, expected 2"
    grep -q "bad-model.yaml:$line: parameters.c1_b: value '1x5' is not a number" "$tmp/bad.out" ||
        fail "$prog does not name the file, line and field: $(cat "$tmp/bad.out")"
done

set +e
"$bdir/drths-physical" --experiment "$tmp/exp.yaml" --protocol short >"$tmp/p.out" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q -- '--protocol goes with --characterize' "$tmp/p.out" ||
    fail "--protocol alone: exit $rc, expected 2 with a message"
echo "PASS"
