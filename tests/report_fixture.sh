# The report fixture of the report-output tests (tests/unit/test_report_hdf5.sh,
# test_report_mat.sh), sourced after they set src, bdir, work and fail(): the reference run of a
# 0.5 s experiment in $work/ref, the same with the ground motion scaled by 1.002 in $work/hyb as
# a stand-in hybrid run, a small synthetic physical.csv beside it (a NaN force at tick 7), and
# drths-report of the two, its output in $work/out.
ln -s "$src/examples/records" "$work/records"
sed -e 's/^  duration_s: 0 .*/  duration_s: 0.5/' -e 's/^  tail_s: .*/  tail_s: 0/' \
    "$src/examples/three-story-elcentro.yaml" >"$work/exp.yaml"
sed 's/^  scale: 1.0 .*/  scale: 1.002/' "$work/exp.yaml" >"$work/exp-hyb.yaml"
"$bdir/drths-numerical" --experiment "$work/exp.yaml" --reference --quiet --out "$work/ref" \
    >/dev/null || fail "reference run"
"$bdir/drths-numerical" --experiment "$work/exp-hyb.yaml" --reference --quiet --out "$work/hyb" \
    >/dev/null || fail "hybrid stand-in run"
awk 'BEGIN {
    print "tick,time_s,cmd_tick,command_m,command_vel_m_s,damper_command,concealed,hold,meas_disp_m,meas_force_N,cmd_lead_ms,wake_late_us"
    for (i = 0; i < 2500; i++) {
        t = i * 0.0002; cmd = 0.005 * sin(2 * 3.14159265358979 * t)
        printf "%d,%.9g,%d,%.9g,0,0,0,0,%.9g,%s,5,%d\n", i, t, i, cmd, 1.005 * cmd,
               i == 7 ? "nan" : "1.5e3", i % 13
    }
}' >"$work/hyb/physical.csv"

"$bdir/drths-report" "$work/hyb" --reference "$work/ref" --no-plots >"$work/out" 2>&1 ||
    { cat "$work/out"; fail "drths-report exit $?"; }
