#!/bin/bash
# Two actuator channels over one OpenFresco connection (physical.channels), driven by
# drths-openfresco-client --dof 2 against drths-physical --openfresco on 127.0.0.1:
#   1. ShadowSite, two ideal linear springs (1e7 and 2e7 N/m): every step's measured
#      displacements equal the targets and each force is k_i times its channel's displacement
#      to rounding; summary.json names both channels, no HOLD, exit 0;
#   2. genericClient (--repeat-trials --iterations 1): one repeat and one iteration per step
#      counted on the vector, each force k_i times the current drift of its storey;
#   3. channel 2's force limit tripped: ONE HOLD for the site naming channel 2, both channels in
#      HOLD, exit 1;
#   4. a client with one control displacement against the two channels: refused, naming both;
#   5. an MR damper on channel 2: the run completes without HOLD;
#   6. the same file without --openfresco (network mode), and for drths-numerical: refused,
#      saying why;
#   7. --openfresco-stiffness with an empty value: refused.
. "$(dirname "$0")/../lib.sh"
exp=${DRTHS_SOURCE_DIR:-$src}/examples/opensees/linear-springs-2dof-ideal.yaml
record=$src/examples/records/elcentro-1940-ns-peknold.AT2
steps=200

# start_site NAME EXPERIMENT: the site in the background; sets $port.
start_site() {
    start_openfresco "site-$1" "$2" --step-duration 0.005 --wait-timeout 20 --out "$tmp/run-$1"
    site=$last_pid
}

# wait_site: the site's exit status in $status.
wait_site() {
    status=0
    wait "$site" || status=$?
}

# 1. ShadowSite, two linear springs.
start_site shadow "$exp"
timeout 60 "$bdir/drths-openfresco-client" --connect "127.0.0.1:$port" --record "$record" \
    --steps "$steps" --step-duration 0.005 --dof 2 --verbose \
    >"$tmp/client-shadow.out" 2>"$tmp/client-shadow.err" || fail "the client failed (shadow)"
wait_site
[ "$status" -eq 0 ] || fail "the site exited $status (shadow)"
python3 - "$tmp/client-shadow.out" "$tmp/run-shadow" "$steps" <<'PY' || fail "shadow: forces"
import json, sys
lines = [l.split() for l in open(sys.argv[1]) if l[:1].isdigit()]
steps = int(sys.argv[3])
assert len(lines) == steps, f"{len(lines)} step lines, expected {steps}"
k = (1.0e7, 2.0e7)
peak = [0.0, 0.0]
for l in lines:
    for i in range(2):
        target, meas, err, force = map(float, l[1 + 4 * i: 5 + 4 * i])
        assert meas == target, f"step {l[0]} channel {i + 1}: measured {meas} != target {target}"
        assert abs(force - k[i] * meas) <= 1e-12 * max(abs(force), 1.0), \
            f"step {l[0]} channel {i + 1}: force {force} != {k[i]} x {meas}"
        peak[i] = max(peak[i], abs(meas))
assert min(peak) > 1e-4, f"the drifts stayed tiny ({peak}): the test would prove nothing"
s = json.load(open(sys.argv[2] + "/summary.json"))
ch = s["channels"]
assert [c["name"] for c in ch] == ["x", "y"], ch
assert [c["stiffness_N_per_m"] for c in ch] == [1.0e7, 2.0e7]
assert not any(c["hold"]["active"] for c in ch), "a channel ended in HOLD"
assert all(c["tracking_rms_error_pct"] == 0 for c in ch), [c["tracking_rms_error_pct"] for c in ch]
o = s["openfresco"]
assert o["channels"] == 2 and o["stiffness_N_per_m"] == [1.0e7, 2.0e7], o
assert o["steps_reached"] == steps, o["steps_reached"]
hdr = open(sys.argv[2] + "/physical.csv").readline().strip().split(",")
assert "meas_force_N" in hdr and "ch2_meas_force_N" in hdr, hdr
print(f"shadow: {steps} steps, peak drifts {peak[0] * 1e3:.3f} / {peak[1] * 1e3:.3f} mm")
PY

# 2. genericClient with one iteration a step.
start_site generic "$exp"
timeout 60 "$bdir/drths-openfresco-client" --connect "127.0.0.1:$port" --record "$record" \
    --steps "$steps" --step-duration 0.005 --dof 2 --variant generic --repeat-trials \
    --iterations 1 --verbose >"$tmp/client-generic.out" 2>"$tmp/client-generic.err" ||
    fail "the client failed (generic)"
wait_site
[ "$status" -eq 0 ] || fail "the site exited $status (generic)"
python3 - "$tmp/client-generic.out" "$tmp/run-generic/summary.json" "$steps" <<'PY' ||
import json, sys
steps = int(sys.argv[3])
lines = [l.split() for l in open(sys.argv[1]) if l[:1].isdigit()]
assert len(lines) == steps
k = (1.0e7, 2.0e7)
for l in lines:
    for i in range(2):
        nxt, cur, force = map(float, l[1 + 3 * i: 4 + 3 * i])
        assert abs(force - k[i] * cur) <= 1e-12 * max(abs(force), 1.0), \
            f"step {l[0]} channel {i + 1}: force {force} != {k[i]} x {cur}"
o = json.load(open(sys.argv[2]))["openfresco"]
want = {"steps_from": "commits", "commits": steps, "repeats": steps, "iterations": steps,
        "targets": 3 * steps}
bad = {key: (o[key], v) for key, v in want.items() if o[key] != v}
assert not bad, f"summary differs (got, expected): {bad}"
print(f"generic: {o['repeats']} repeats, {o['iterations']} iterations, {o['commits']} commits")
PY
    fail "generic: counts or forces"

# 3. Channel 2's force limit: one HOLD for both.
sed 's/^      limit_force_N: 240000/      limit_force_N: 1000/' "$exp" >"$tmp/limit.yaml"
grep -q "limit_force_N: 1000" "$tmp/limit.yaml" || fail "could not lower channel 2's limit"
start_site limit "$tmp/limit.yaml"
timeout 60 "$bdir/drths-openfresco-client" --connect "127.0.0.1:$port" --record "$record" \
    --steps "$steps" --step-duration 0.005 --dof 2 \
    >"$tmp/client-limit.out" 2>"$tmp/client-limit.err" && fail "the client finished despite HOLD"
wait_site
[ "$status" -eq 1 ] || fail "the site exited $status after a limit (expected 1)"
grep -q "HOLD at tick [0-9]*: channel 2 (y): " "$tmp/site-limit.out" "$tmp/site-limit.err" ||
    fail "no HOLD line naming channel 2"
[ "$(cat "$tmp/site-limit.out" "$tmp/site-limit.err" | grep -c 'HOLD at tick')" -eq 1 ] ||
    fail "more than one HOLD line"
python3 - "$tmp/run-limit" <<'PY' || fail "limit: summary or records"
import csv, json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
ch = s["channels"]
assert all(c["hold"]["active"] for c in ch), "a channel was not held"
assert [c["held_the_site"] for c in ch] == [False, True], [c["held_the_site"] for c in ch]
assert ch[1]["hold"]["reason_code"] == "LIMIT", ch[1]["hold"]
assert ch[0]["hold"]["reason"].startswith("channel 2 (y): "), ch[0]["hold"]["reason"]
assert s["exit_reason"].startswith("channel 2 (y): ") and "force" in s["exit_reason"], s["exit_reason"]
rows = list(csv.DictReader(open(sys.argv[1] + "/physical.csv")))
first = {c: next(int(r["tick"]) for r in rows if r[c] not in ("", "nan") and float(r[c]) == 1)
         for c in ("hold", "ch2_hold")}
assert abs(first["hold"] - first["ch2_hold"]) <= 1, f"HOLD began apart: {first}"
print(f"limit: {s['exit_reason']}; HOLD rows from ticks {first}")
PY

# 4. One control displacement against two channels.
start_site mismatch "$exp"
timeout 60 "$bdir/drths-openfresco-client" --connect "127.0.0.1:$port" --record "$record" \
    --steps 10 --step-duration 0.005 >"$tmp/client-mismatch.out" 2>&1 &&
    fail "a one-DOF client ran against two channels"
wait_site
[ "$status" -eq 1 ] || fail "the site exited $status on a size mismatch (expected 1)"
grep -q "controls 1 displacement .*declares 2 actuator channels" "$tmp/site-mismatch.out" ||
    fail "the refusal does not name both sizes"

# 5. An MR damper on channel 2 (passive-off), completing without HOLD.
python3 - "$exp" "$tmp/mr.yaml" <<'PY'
import sys
t = open(sys.argv[1]).read()
old = "          model: linear-spring\n          stiffness_N_per_m: 2.0e7\n"
assert old in t
open(sys.argv[2], "w").write(t.replace(old, "          model: phillips2013-200kN\n"))
PY
start_site mr "$tmp/mr.yaml"
timeout 60 "$bdir/drths-openfresco-client" --connect "127.0.0.1:$port" --record "$record" \
    --steps "$steps" --step-duration 0.005 --dof 2 \
    >"$tmp/client-mr.out" 2>"$tmp/client-mr.err" || fail "the client failed (MR damper)"
wait_site
[ "$status" -eq 0 ] || fail "the site exited $status (MR damper)"
python3 - "$tmp/run-mr/summary.json" <<'PY' || fail "MR damper: summary"
import json, sys
s = json.load(open(sys.argv[1]))
ch = s["channels"]
assert [c["damper"] for c in ch] == ["linear-spring", "phillips2013-200kN"], ch
assert not any(c["hold"]["active"] for c in ch)
assert s["openfresco"]["stiffness_N_per_m"] == [1.0e7, 0], s["openfresco"]["stiffness_N_per_m"]
PY

# 6. Network mode refuses several channels.
status=0
timeout 20 "$bdir/drths-physical" --experiment "$exp" --listen 127.0.0.1:0 --wait-timeout 1 \
    --out "$tmp/run-net" >"$tmp/net.out" 2>"$tmp/net.err" || status=$?
[ "$status" -eq 2 ] || fail "network mode with two channels exited $status (expected 2)"
grep -q "physical.channels: 2 channels are served over OpenFresco only" "$tmp/net.err" ||
    fail "network mode's refusal does not say why"
status=0
timeout 20 "$bdir/drths-numerical" --experiment "$exp" --peer 127.0.0.1:9 --out "$tmp/run-num" \
    >"$tmp/num.out" 2>"$tmp/num.err" || status=$?
[ "$status" -eq 2 ] || fail "the numerical site with two channels exited $status (expected 2)"
# The refusal names the line of physical.channels (the file's only "  channels:" key).
chline=$(grep -n '^  channels:' "$exp" | cut -d: -f1)
[ "$(wc -l <<<"$chline")" -eq 1 ] && [ -n "$chline" ] ||
    fail "$exp: expected exactly one '  channels:' line, found: ${chline:-none}"
grep -q ":$chline: physical.channels: 2 channels are served over OpenFresco only" "$tmp/num.err" ||
    fail "the numerical site's refusal does not say why (at line $chline)"
# 7. --openfresco-stiffness with an empty value would shift the channels' stiffnesses: refused
#    before anything is opened, naming the value.
status=0
timeout 20 "$bdir/drths-physical" --experiment "$exp" --openfresco 127.0.0.1:0 \
    --openfresco-stiffness 1e7,,2e7 --out "$tmp/run-k" >"$tmp/k.out" 2>"$tmp/k.err" || status=$?
[ "$status" -eq 2 ] || fail "--openfresco-stiffness 1e7,,2e7 exited $status (expected 2)"
grep -q "value 2 of '1e7,,2e7' is empty" "$tmp/k.err" ||
    fail "--openfresco-stiffness 1e7,,2e7: the refusal does not name the empty value"
echo "two channels over one OpenFresco connection: forces, repeats, iterations, HOLD, refusals"
