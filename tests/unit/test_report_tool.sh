#!/usr/bin/env bash
# drths-report on small synthetic run folders with known differences:
#   hybrid = 1.01 x reference for every floor displacement and acceleration -> 1 % peak and RMS
#   error on every floor; 20 of 2000 steps concealed feedback (1 %); 4 of 2000 ticks concealed
#   commands (0.2 %); measured = 1.01 x commanded displacement -> tracking error 1 %;
#   round trip 80..89 ms (median 85: nearest rank 998 of 1995); tick lateness 1..100 us.
# Checks the printed table, report.json, the verdict and its exit code (1 % of concealed
# feedback is above the default 0.5 %: FAIL, exit 1), the PNGs (when gnuplot is installed), the
# message and exit code for a missing file and a missing column, and a run without physical.csv.
# Gaps in real records: tests/unit/test_report_gaps.sh.
set -euo pipefail
bdir=${1:?build dir}
tool=$bdir/drths-report
work=$(mktemp -d "${TMPDIR:-/tmp}/drths-test-report-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# make_numerical FILE SCALE HYBRID(0/1) [DROP_COLUMN]
make_numerical() {
    awk -v scale="$2" -v hybrid="$3" -v drop="${4:-}" 'BEGIN {
        n = 2000; dt = 0.001; pi = 3.14159265358979
        split("step time_s ag_m_s2 x1_m x2_m v1_m_s v2_m_s a1_abs_m_s2 a2_abs_m_s2 damper_disp_m damper_vel_m_s damper_force_N damper_command", h, " ")
        nh = 13
        if (hybrid) { h[++nh] = "fb_tick"; h[++nh] = "fb_concealed"; h[++nh] = "force_measured_N"
                      h[++nh] = "force_model_N"; h[++nh] = "force_used_N"; h[++nh] = "rtt_ms"
                      h[++nh] = "loop_delay_ticks" }
        line = ""
        for (c = 1; c <= nh; c++) if (h[c] != drop) line = line (line == "" ? "" : ",") h[c]
        print line
        for (i = 0; i < n; i++) {
            t = i * dt; w = 2 * pi * 2
            v["step"] = i; v["time_s"] = t; v["ag_m_s2"] = sin(w * t)
            v["x1_m"] = scale * 0.01 * sin(w * t); v["x2_m"] = scale * 0.02 * sin(w * t)
            v["v1_m_s"] = 0.01 * w * cos(w * t); v["v2_m_s"] = 0.02 * w * cos(w * t)
            v["a1_abs_m_s2"] = -scale * 0.01 * w * w * sin(w * t)
            v["a2_abs_m_s2"] = -scale * 0.02 * w * w * sin(w * t)
            v["damper_disp_m"] = 0.01 * sin(w * t); v["damper_vel_m_s"] = 0.01 * w * cos(w * t)
            v["damper_force_N"] = scale * 1e5 * cos(w * t); v["damper_command"] = 2.5
            v["fb_tick"] = i; v["fb_concealed"] = (i % 100 == 50)
            v["force_measured_N"] = v["force_model_N"] = v["force_used_N"] = v["damper_force_N"]
            v["rtt_ms"] = (i < 5) ? "nan" : 80 + i % 10; v["loop_delay_ticks"] = 100
            line = ""
            for (c = 1; c <= nh; c++) if (h[c] != drop) {
                x = v[h[c]]; s = (x == "nan") ? "nan" : sprintf("%.9g", x)
                line = line (line == "" ? "" : ",") s
            }
            print line
        }
    }' > "$1"
}

make_physical() {
    awk 'BEGIN {
        n = 2000; dt = 0.001; pi = 3.14159265358979
        print "tick,time_s,cmd_tick,command_m,command_vel_m_s,damper_command,concealed,hold,meas_disp_m,meas_force_N,cmd_lead_ms,wake_late_us"
        for (i = 0; i < n; i++) {
            t = i * dt; cmd = 0.01 * sin(2 * pi * 2 * t); conc = (i % 500 == 7)
            printf "%d,%.9g,%d,%.9g,0,2.5,%d,0,%.9g,0,%s,%d\n", i, t, i, cmd, conc, 1.01 * cmd,
                   conc ? "nan" : "5", i % 100 + 1
        }
    }' > "$1"
}

mkdir -p "$work/ref" "$work/hyb"
make_numerical "$work/ref/numerical.csv" 1 0
make_numerical "$work/hyb/numerical.csv" 1.01 1
make_physical "$work/hyb/physical.csv"

set +e
out=$("$tool" "$work/hyb" --reference "$work/ref"); rc=$?
set -e
echo "$out"
[ $rc -eq 1 ] || fail "exit code $rc for a run that fails its acceptance criteria (want 1)"

# The table: floor rows "floor peak_hyb peak_ref peak_err max_err rms_err" with 1.000 % errors.
grep -Eq <<<"$out" '^    1     10\.100     10\.000      1\.000      1\.000      1\.000$' ||
    fail "floor 1 row"
grep -Eq <<<"$out" '^    2     20\.200     20\.000      1\.000      1\.000      1\.000$' ||
    fail "floor 2 row"
grep -Eq <<<"$out" '^  max .* 1\.000      1\.000      1\.000$' || fail "max row"
# The verdict: the records are complete, 1 % concealed feedback fails the default 0.5 %.
grep -Eq <<<"$out" '^rows missing from the records \(rows\) +0 +0 +PASS$' || fail "records row"
grep -Eq <<<"$out" '^concealed feedback \(%\) +1\.000 +0\.500 +FAIL$' || fail "feedback criterion"
grep -Eq <<<"$out" '^concealed commands \(%\) +0\.200 +0\.500 +PASS$' || fail "command criterion"
grep -Eq <<<"$out" '^overall +FAIL$' || fail "overall verdict"
grep -q <<<"$out" '^  max err   max|h - r| / max|r|' || fail "figures defined"
grep -q <<<"$out" 'concealed feedback     20 of 2000 steps (1.000 %)' || fail "concealed fb"
grep -q <<<"$out" 'concealed commands     4 of 2000 ticks (0.200 %)' || fail "concealed cmd"
grep -Eq <<<"$out" '^round trip \(ms\) +1995 +80\.000 +85\.000 +89\.000 +89\.000 +89\.000$' \
    || fail "round trip row"
grep -Eq <<<"$out" '^tick lateness \(us\) +2000 +1\.000 +50\.000 +99\.000 +100\.000 +100\.000$' \
    || fail "tick lateness row"
grep -q <<<"$out" 'RMS error norm         1.000 %' || fail "tracking"
width=$(echo "$out" | awk '{ if (length($0) > m) m = length($0) } END { print m }')
[ "$width" -le 100 ] || fail "table is $width columns wide"

# report.txt holds the table; report.json the same figures.
[ -s "$work/hyb/report.txt" ] || fail "report.txt missing"
grep -q 'Fidelity against the reference' "$work/hyb/report.txt" || fail "report.txt content"
json=$work/hyb/report.json
[ -s "$json" ] || fail "report.json missing"
# value KEY: the first number after "KEY": in report.json
value() { grep -m1 "\"$1\":" "$json" | sed -E 's/.*: *([^,]*),?$/\1/'; }
near() { awk -v a="$1" -v b="$2" -v e="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= e) }'; }
near "$(value disp_rms_err_pct)" 1.0 1e-6 || fail "json disp_rms_err_pct = $(value disp_rms_err_pct)"
near "$(value disp_peak_err_pct)" 1.0 1e-6 || fail "json disp_peak_err_pct"
near "$(value acc_rms_err_pct)" 1.0 1e-6 || fail "json acc_rms_err_pct"
near "$(value fb_concealed_pct)" 1.0 1e-9 || fail "json fb_concealed_pct"
near "$(value rms_err_pct)" 1.0 1e-6 || fail "json tracking rms_err_pct"
near "$(value disp_max_err_pct)" 1.0 1e-6 || fail "json disp_max_err_pct"
grep -q '"outcome": "FAIL"' "$json" || fail "json verdict"
[ "$(value cmd_concealed)" = 4 ] || fail "json cmd_concealed"
if command -v jq >/dev/null; then
    jq -e '.fidelity.floors | length == 2' "$json" >/dev/null || fail "json floors"
    jq -e '.realtime.wake_late_us.p99_9 == 100' "$json" >/dev/null || fail "json p99.9"
    jq -e '.link.rtt_ms.n == 1995' "$json" >/dev/null || fail "json rtt n"
fi

if command -v gnuplot >/dev/null; then
    for p in displacement acceleration error damper tracking link; do
        [ -s "$work/hyb/report_$p.png" ] || fail "report_$p.png missing or empty"
        head -c 8 "$work/hyb/report_$p.png" | od -An -c | grep -q 'P   N   G' || fail "$p not a PNG"
    done
else
    echo "gnuplot not installed: PNG checks skipped"
fi

# --out, and no gnuplot on PATH: one line, still the table; the exit code is the verdict's.
set +e
out=$(PATH=/nonexistent "$tool" "$work/hyb" --reference "$work/ref" --out "$work/elsewhere")
rc=$?
set -e
[ $rc -eq 1 ] || fail "exit code $rc without gnuplot"
grep -q <<<"$out" '^gnuplot not found' || fail "no gnuplot message"
grep -q <<<"$out" 'Fidelity' || fail "no table without gnuplot"
[ -s "$work/elsewhere/report.json" ] || fail "--out ignored"

# Comparing two reference runs: no physical.csv, no hybrid columns; fidelity only, 0 %: PASS.
out=$("$tool" "$work/ref" --reference "$work/ref" --no-plots) || fail "ref vs ref exit"
grep -Eq <<<"$out" '^    1     10\.000     10\.000      0\.000      0\.000      0\.000$' ||
    fail "ref vs ref"
grep -Eq <<<"$out" '^overall +PASS$' || fail "ref vs ref verdict"
grep -q <<<"$out" 'Link' && fail "link section without link data"
[ -e "$work/ref/report_displacement.png" ] && fail "--no-plots wrote plots"

# Missing file: message names it, exit 2.
set +e
msg=$("$tool" "$work/hyb" --reference "$work/nothere" --no-plots 2>&1 >/dev/null); rc=$?
set -e
[ $rc -eq 2 ] || fail "missing reference: exit $rc"
grep -q <<<"$msg" "$work/nothere/numerical.csv" || fail "missing file not named: $msg"

# Missing column: message names file and column, exit 2.
mkdir -p "$work/bad"
make_numerical "$work/bad/numerical.csv" 1.01 1 a2_abs_m_s2
set +e
msg=$("$tool" "$work/bad" --reference "$work/ref" 2>&1 >/dev/null); rc=$?
set -e
[ $rc -eq 2 ] || fail "missing column: exit $rc"
grep -q <<<"$msg" "$work/bad/numerical.csv: no column a2_abs_m_s2" || fail "column msg: $msg"

# Malformed physical.csv: file and line, exit 2.
cp "$work/ref/numerical.csv" "$work/bad/numerical.csv"
make_physical "$work/bad/physical.csv"
sed -i '5s/,[^,]*$//' "$work/bad/physical.csv"
set +e
msg=$("$tool" "$work/bad" --reference "$work/ref" --no-plots 2>&1 >/dev/null); rc=$?
set -e
[ $rc -eq 2 ] || fail "malformed physical.csv: exit $rc"
grep -q <<<"$msg" "$work/bad/physical.csv:5: 11 fields, the header has 12" || fail "line msg: $msg"

# The drive (docs/report.md, "The drive"): physical.csv with drive_m, one tick ahead of the
# command (a compensation's lead); the envelope from the run folder's experiment.yaml (1 kHz,
# the default envelope: 0.1 m, 1.25 m/s, 200 m/s^2, 0.01 m). Smooth: PASS. A 2 mm jump of the
# drive for one tick at tick 1000: a 2.126 mm step, 17 times the largest command step
# (0.126 mm), and 4000 m/s^2 at tick 1001 where it turns back (20 times the bound); ticks
# 1000..1002 outside the envelope, the first by its acceleration.
src=$(cd "$(dirname "$0")/../.." && pwd)
make_drive() { # FILE JUMP_M
    awk -v jump="$2" 'BEGIN {
        n = 2000; dt = 0.001; pi = 3.14159265358979
        print "tick,time_s,cmd_tick,command_m,command_vel_m_s,damper_command,concealed,hold,meas_disp_m,meas_force_N,cmd_lead_ms,wake_late_us,drive_m"
        for (i = 0; i < n; i++) {
            t = i * dt; cmd = 0.01 * sin(2 * pi * 2 * t); u = 0.01 * sin(2 * pi * 2 * (t + dt))
            if (i == 1000) u += jump
            printf "%d,%.9g,%d,%.9g,0,2.5,0,0,%.9g,0,5,%d,%.9g\n", i, t, i, cmd, 1.01 * cmd,
                   i % 100 + 1, u
        }
    }' > "$1"
}
mkdir -p "$work/drive"
cp "$work/ref/numerical.csv" "$work/drive/numerical.csv"
{ sed "s|records/tiny.txt|$src/tests/data/config/records/tiny.txt|" \
      "$src/tests/data/config/minimal.yaml"; echo "rate_hz: 1000"; } >"$work/drive/experiment.yaml"
make_drive "$work/drive/physical.csv" 0
out=$("$tool" "$work/drive" --reference "$work/ref" --no-plots) ||
    { echo "$out"; fail "smooth drive: exit $?"; }
grep -Eq <<<"$out" '^drive step / command step \(ratio\) +(0\.99[0-9]|1\.00[0-9]) +2\.000 +PASS$' ||
    { echo "$out"; fail "smooth drive: ratio row"; }
grep -Eq <<<"$out" '^drive envelope used, max \(fraction\) +0\.[0-9]+ +1\.000 +PASS$' ||
    fail "smooth drive: envelope row"
grep -q <<<"$out" "^  envelope   $work/drive/experiment.yaml$" || fail "drive table"
make_drive "$work/drive/physical.csv" 0.002
set +e
out=$("$tool" "$work/drive" --reference "$work/ref" --no-plots); rc=$?
set -e
[ $rc -eq 1 ] || { echo "$out"; fail "drive jump: exit $rc (want 1)"; }
grep -Eq <<<"$out" '^drive step / command step \(ratio\) +1[67]\.[0-9]+ +2\.000 +FAIL$' ||
    { echo "$out"; fail "drive jump: ratio row"; }
grep -Eq <<<"$out" '^  where: drive step 2\.1[0-9]+ mm at tick 1000; command step at most 0\.126 mm' ||
    { echo "$out"; fail "drive jump: where of the ratio"; }
grep -Eq <<<"$out" '^drive envelope used, max \(fraction\) +(19\.9|20\.0)[0-9]* +1\.000 +FAIL$' ||
    fail "drive jump: envelope row"
grep -Eq <<<"$out" '^  where: acceleration 4[0-9.]+ m/s\^2 \(limit 200\) at tick 1001; outside at 3 ticks, the first 1000$' ||
    fail "drive jump: where of the envelope"
grep -q <<<"$out" 'OUTSIDE the envelope at 3 ticks, the first at tick 1000 (acceleration)' ||
    fail "drive jump: table"
width=$(echo "$out" | grep -v "$work" | awk '{ if (length($0) > m) m = length($0) } END { print m }')
[ "$width" -le 100 ] || fail "drive table is $width columns wide"
if command -v jq >/dev/null; then
    jq -e '.drive.channels[0].envelope.outside_ticks == 3 and
           .drive.channels[0].envelope.max_use_bound == "limit_drive_acceleration_m_s2"' \
        "$work/drive/report.json" >/dev/null || fail "json drive"
fi

# A numerical run of two links (PROTOCOL.md section 12): per-link columns labA.* and labB.*
# and summary.json's links. Lab A's feedback concealed at steps 100..109 (10, longest 10), lab
# B's every 500th step (4, longest 1); round trips 2 ms and 12 ms. The per-site table gives
# each site's L needed and feedback wait from the summary, its round trip and concealed feedback
# from the record; report.json has the same under links. A summary naming a third site is of
# another run: exit 2, named.
mkdir -p "$work/links"
awk 'BEGIN {
    print "step,time_s,ag_m_s2,x1_m,v1_m_s,a1_abs_m_s2,loop_delay_ticks,labA.fb_concealed,labA.rtt_ms,labB.fb_concealed,labB.rtt_ms"
    for (i = 0; i < 2000; i++)
        printf "%d,%.4f,0,0,0,0,70,%d,2,%d,12\n", i, i * 0.0002, (i >= 100 && i < 110), (i % 500 == 0)
}' >"$work/links/numerical.csv"
cat >"$work/links/summary.json" <<'JSON'
{
  "kind": "numerical",
  "loop_delay": {"L": 1},
  "L": 70,
  "links": [
    {"site": "labA", "L_needed": 25, "feedback_wait_ms": 1.5},
    {"site": "labB", "L_needed": 70, "feedback_wait_ms": 6.25}
  ]
}
JSON
set +e
out=$("$tool" "$work/links" --no-plots); rc=$?
set -e
[ $rc -le 1 ] || { echo "$out"; fail "two links: exit $rc"; }
grep -q <<<"$out" "^Links (one per site; the run's L 70 ticks" || { echo "$out"; fail "links heading"; }
grep -Eq <<<"$out" '^labA +25 +1\.500 +2\.000 +2\.000 +2\.000 +10 \(0\.50%\) +10$' ||
    { echo "$out"; fail "lab A's row"; }
grep -Eq <<<"$out" '^labB +70 +6\.250 +12\.000 +12\.000 +12\.000 +4 \(0\.20%\) +1$' ||
    { echo "$out"; fail "lab B's row"; }
if command -v jq >/dev/null; then
    jq -e '.links | length == 2 and .[0].site == "labA" and .[0].L_needed == 25 and
           .[1].fb_concealed == 4 and .[1].rtt_ms.max == 12' "$work/links/report.json" \
        >/dev/null || fail "json links"
fi
sed -i 's/"labB"/"labC"/' "$work/links/summary.json"
set +e
"$tool" "$work/links" --no-plots >/dev/null 2>"$work/links.err"; rc=$?
set -e
[ $rc -eq 2 ] && grep -q 'links names site "labC"' "$work/links.err" ||
    fail "a summary of another run: exit $rc, $(cat "$work/links.err")"

# The adaptive compensation's factors (docs/report.md, "Adaptive compensation"): the actuator
# site's summary.json says theta3 sat at its upper bound 4 on 1980 of 2000 ticks (99 %) and
# theta0 on 100 (5 %, under the 10 % flag); physical.csv's adaptive_theta3 rises from 1 to 4
# by tick 20 and stays there. The tracking section gives each factor's run range, bounds and
# share at a bound, flags theta3 alone with what it means for the lab, and report.json says
# the same. A summary.json that is not JSON leaves the factors out with a warning naming it.
mkdir -p "$work/adapt"
cp "$work/hyb/numerical.csv" "$work/adapt/numerical.csv"
awk 'BEGIN {
    n = 2000; dt = 0.001; pi = 3.14159265358979
    print "tick,time_s,cmd_tick,command_m,command_vel_m_s,damper_command,concealed,hold,meas_disp_m,meas_force_N,cmd_lead_ms,wake_late_us,adaptive_theta0,adaptive_theta1,adaptive_theta2,adaptive_theta3"
    for (i = 0; i < n; i++) {
        t = i * dt; cmd = 0.01 * sin(2 * pi * 2 * t); th3 = (i < 20) ? 1 + 3 * i / 20 : 4
        printf "%d,%.9g,%d,%.9g,0,2.5,0,0,%.9g,0,5,%d,%.9g,%.9g,0.9,%.9g\n", i, t, i, cmd,
               1.01 * cmd, i % 100 + 1, (i < 100) ? 0.57 : 1.1, 1 + 0.2 * i / (n - 1), th3
    }
}' >"$work/adapt/physical.csv"
cat >"$work/adapt/summary.json" <<'JSON'
{
  "kind": "physical",
  "tracking_rms_error_pct": 1.0,
  "tracking": {
    "compensation": "adaptive",
    "ticks": 2000,
    "adaptive": {
      "bounds_from": "adaptive_range",
      "observed_ticks": 2000,
      "updates": 1990,
      "clamped": 1980,
      "fallbacks": 0,
      "theta0": {"min": 0.57, "max": 1.79, "final": 1.1, "at_bound_ticks": 100, "at_bound_fraction": 0.05},
      "theta1": {"min": 0.14, "max": 7.1, "final": 1.2, "at_bound_ticks": 0, "at_bound_fraction": 0},
      "theta2": {"min": 0.036, "max": 29, "final": 0.9, "at_bound_ticks": 0, "at_bound_fraction": 0},
      "theta3": {"min": 0.25, "max": 4, "final": 4, "at_bound_ticks": 1980, "at_bound_fraction": 0.99},
      "max_at_bound_fraction": 0.99
    }
  }
}
JSON
set +e
out=$("$tool" "$work/adapt" --reference "$work/ref" --no-plots); rc=$?
set -e
[ $rc -eq 1 ] || { echo "$out"; fail "adaptive: exit $rc (the run fails on concealed feedback: 1)"; }
grep -q <<<"$out" '^adaptive factors (bounds from actuator.adaptive_range; run range from physical.csv)$' ||
    { echo "$out"; fail "adaptive: heading"; }
# Only inside the tracking section: after its RMS line, before the real-time section.
sed -n '/^Tracking (measured/,/^Real time/p' <<<"$out" | grep -q '^  theta3 ' ||
    fail "adaptive: factors outside the tracking section"
grep -Eq <<<"$out" '^  theta3 +1 +4 +4 +0\.25 +4 +99\.00 %  AT BOUND$' ||
    { echo "$out"; fail "adaptive: theta3's row"; }
grep -Eq <<<"$out" '^  theta0 +0\.57 +1\.1 +1\.1 +0\.57 +1\.79 +5\.00 %$' ||
    { echo "$out"; fail "adaptive: theta0's row (5 % is not flagged)"; }
grep -Eq <<<"$out" '^  theta1 +1 +1\.2 +1\.2 +0\.14 +7\.1 +0\.00 %$' || fail "adaptive: theta1's row"
[ "$(grep -c 'AT BOUND' <<<"$out")" -eq 2 ] || fail "adaptive: more than theta3 flagged"
grep -q <<<"$out" '^  AT BOUND: theta3 sat at a bound on 99.00 % of the run (1980 of 2000 ticks, more than 10 %).$' ||
    fail "adaptive: the sentence"
grep -q <<<"$out" 'The compensator could not follow the actuator: the plant is outside actuator.adaptive_range.$' || fail "adaptive: what it means"
grep -q <<<"$out" 'Widen actuator.adaptive_range, or check the actuator' || fail "adaptive: what to do"
width=$(echo "$out" | grep -v "$work" | awk '{ if (length($0) > m) m = length($0) } END { print m }')
[ "$width" -le 100 ] || fail "adaptive table is $width columns wide"
grep -q '"at_bound_fraction": 0.99' "$work/adapt/report.json" || fail "adaptive: json fraction"
grep -q 'theta3 sat at a bound on 99.00 % of the run: the plant is outside actuator.adaptive_range' \
    "$work/adapt/report.json" || fail "adaptive: json warning"
if command -v jq >/dev/null; then
    jq -e '.tracking.adaptive.factors | length == 4 and .[3].at_bound == true and
           .[3].at_bound_ticks == 1980 and .[3].run_min == 1 and .[3].upper == 4 and
           .[0].at_bound == false' "$work/adapt/report.json" >/dev/null || fail "adaptive: json factors"
    jq -e '.tracking.adaptive.warnings | length == 1' "$work/adapt/report.json" >/dev/null ||
        fail "adaptive: json warnings"
fi
grep -q <<<"$(cat "$work/hyb/report.txt")" 'adaptive factors' && fail "adaptive factors without a summary"
echo '{"kind": "physical", "tracking": {"adaptive": {' >"$work/adapt/summary.json"
set +e
out=$("$tool" "$work/adapt" --reference "$work/ref" --no-plots 2>"$work/adapt.err"); rc=$?
set -e
[ $rc -eq 1 ] || fail "adaptive, summary cut short: exit $rc (want the verdict's 1)"
grep -q "warning: $work/adapt/summary.json: not JSON at byte" "$work/adapt.err" ||
    fail "adaptive, summary cut short: $(cat "$work/adapt.err")"
grep -q <<<"$out" 'adaptive factors' && fail "adaptive factors from a summary cut short"
echo "PASS"
