#!/bin/bash
# drths-openfresco-client --repeat-trials against drths-physical --openfresco on 127.0.0.1: the
# genericClient sequence (each trial repeated, a commit per step) is counted as one step per
# commit, without and with Newton-like iterations (--iterations 2), and the run ends cleanly
# (DIE, exit 0) with the site's summary saying so. Assertions on counts and exit codes only.
. "$(dirname "$0")/../lib.sh"
exp=${DRTHS_SOURCE_DIR:-$src}/examples/opensees/linear-spring-ideal.yaml
record=$src/examples/records/elcentro-1940-ns-peknold.AT2
steps=200
for iters in 0 2; do
    start_openfresco "site-$iters" "$exp" --step-duration 0.005 --wait-timeout 20 \
        --out "$tmp/run-$iters" --quiet
    site=$last_pid
    extra=()
    [ "$iters" -gt 0 ] && extra=(--iterations "$iters")
    timeout 60 "$bdir/drths-openfresco-client" --connect "127.0.0.1:$port" --record "$record" \
        --steps "$steps" --step-duration 0.005 --variant generic --repeat-trials "${extra[@]}" \
        >"$tmp/client-$iters.out" 2>"$tmp/client-$iters.err" ||
        fail "the client failed (iterations $iters)"
    grep -q "^drths-openfresco-client: $steps steps (genericClient)" "$tmp/client-$iters.out" ||
        fail "the client did not run $steps steps"
    status=0
    wait "$site" || status=$?
    [ "$status" -eq 0 ] || fail "the site exited $status (iterations $iters)"
    python3 - "$tmp/run-$iters/summary.json" "$steps" "$iters" <<'PY' || fail "summary (iterations $iters)"
import json, sys
o = json.load(open(sys.argv[1]))["openfresco"]
steps, iters = int(sys.argv[2]), int(sys.argv[3])
checks = {
    "steps_from": (o["steps_from"], "commits"),
    "commits": (o["commits"], steps),
    "repeats": (o["repeats"], steps),
    "iterations": (o["iterations"], iters * steps),
    "targets": (o["targets"], steps * (2 + iters)),
}
bad = {k: v for k, v in checks.items() if v[0] != v[1]}
# The last step's target is sent with the last commit and not waited for before DIE.
if not steps - 1 <= o["steps_reached"] <= steps:
    bad["steps_reached"] = (o["steps_reached"], steps)
if "(DIE)" not in o["end"]:
    bad["end"] = (o["end"], "DIE")
if bad:
    print("summary differs (got, expected):", bad)
    sys.exit(1)
PY
done
echo "genericClient sequence: $steps steps counted from commits, with 0 and 2 iterations a step"
