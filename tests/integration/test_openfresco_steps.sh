#!/bin/bash
# How drths-physical --openfresco counts analysis steps and waits for the first target, with
# drths-openfresco-client on 127.0.0.1 against the ideal linear specimen (docs/openfresco.md,
# "Repeats and iterations" and "Time-outs"):
#   - GenericTCP sending the analysis time (--send-time), 2 iterations a step: steps from the
#     time (one per step, the iterations counted as such);
#   - GenericTCP without the time, 2 iterations a step: every trial a step, as before;
#   - ShadowSite, 2 iterations a step: steps from commits from the set-up on (the first step's
#     iterations are iterations, not steps);
#   - a first target 2 s after the set-up with --openfresco-step-timeout 1: the wait before the
#     first target is bounded by --wait-timeout (20 s), the run completes;
#   - the same with --wait-timeout 1.5 (the larger of it and the step time-out bounds the
#     first target): HOLD before anything moved, with the sentence naming --wait-timeout.
# Assertions on counts, exit codes and the HOLD sentence only.
. "$(dirname "$0")/../lib.sh"
exp=${DRTHS_SOURCE_DIR:-$src}/examples/opensees/linear-spring-ideal.yaml
record=$src/examples/records/elcentro-1940-ns-peknold.AT2
steps=100

# run_case NAME "SITE OPTIONS" "CLIENT OPTIONS": starts the site, runs the client; sets
# client_status and site_status.
run_case() {
    local name=$1 site_opts=$2 client_opts=$3
    read -r -a so <<<"$site_opts"
    read -r -a co <<<"$client_opts"
    start_openfresco "$name" "$exp" --step-duration 0.005 --out "$tmp/run-$name" --quiet "${so[@]}"
    local site=$last_pid
    client_status=0
    timeout 60 "$bdir/drths-openfresco-client" --connect "127.0.0.1:$port" --record "$record" \
        --steps "$steps" --step-duration 0.005 "${co[@]}" \
        >"$tmp/client-$name.out" 2>"$tmp/client-$name.err" || client_status=$?
    site_status=0
    wait "$site" || site_status=$?
}

# check NAME key=value...: the site's summary.json (openfresco block) has these values; an
# integer value may be given as LOW..HIGH.
check() {
    local name=$1
    shift
    python3 - "$tmp/run-$name/summary.json" "$@" <<'PY' || fail "$name: summary"
import json, sys
o = json.load(open(sys.argv[1]))["openfresco"]
bad = {}
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    got = o[k]
    if ".." in v:
        lo, hi = (int(x) for x in v.split(".."))
        ok = lo <= got <= hi
    else:
        ok = str(got) == v
    if not ok:
        bad[k] = (got, v)
if bad:
    print("summary differs (got, expected):", bad)
    sys.exit(1)
PY
}

# The last step's target is not waited for before DIE (the explicit client asks for its
# measurement, so all are reached here).
run_case time "--wait-timeout 20" "--variant generic --send-time --iterations 2"
[ "$client_status" -eq 0 ] && [ "$site_status" -eq 0 ] ||
    fail "time: client $client_status, site $site_status"
check time steps_from=time steps_reached=$steps iterations=$((2 * steps)) \
    max_iterations_in_a_step=2 targets=$((3 * steps)) commits=0

run_case notime "--wait-timeout 20" "--variant generic --iterations 2"
[ "$client_status" -eq 0 ] && [ "$site_status" -eq 0 ] ||
    fail "notime: client $client_status, site $site_status"
check notime steps_from=trials steps_reached=$((3 * steps)) iterations=0

run_case shadow "--wait-timeout 20" "--variant shadow --iterations 2"
[ "$client_status" -eq 0 ] && [ "$site_status" -eq 0 ] ||
    fail "shadow: client $client_status, site $site_status"
check shadow steps_from=commits steps_reached=$steps iterations=$((2 * steps)) \
    commits=$steps standing_steps=0

run_case delay "--wait-timeout 20 --openfresco-step-timeout 1" \
    "--variant generic --send-time --first-target-delay 2"
[ "$client_status" -eq 0 ] && [ "$site_status" -eq 0 ] ||
    fail "delay: client $client_status, site $site_status (a first target after 2 s)"
check delay steps_reached=$steps

run_case late "--wait-timeout 1.5 --openfresco-step-timeout 1" \
    "--variant generic --send-time --first-target-delay 3"
[ "$site_status" -eq 1 ] || fail "late: the site exited $site_status, expected 1 (HOLD)"
[ "$client_status" -ne 0 ] || fail "late: the client completed against a site in HOLD"
check late targets=0 steps_reached=0
grep -q "sent no first target within 1.5 s of its set-up (--wait-timeout" "$tmp/late.out" \
    "$tmp/late.err" "$tmp/run-late/summary.json" ||
    fail "late: the HOLD sentence does not name the first target and --wait-timeout"
echo "steps from the time, from trials and from commits; the first target waited for" \
    "--wait-timeout"
