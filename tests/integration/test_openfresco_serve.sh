#!/bin/bash
# drths-physical --openfresco --serve: three analyses one after another (drths-openfresco-client
# --repeat-trials), each with its complete run folder OUT/analysis-N (summary.json ending with
# DIE, physical.csv rows); with no further client the site ends after --wait-timeout. (A second
# client refused while one is served: fault.openfresco_timeouts.) Counts and exit codes only.
. "$(dirname "$0")/../lib.sh"
exp=$src/examples/opensees/linear-spring-ideal.yaml
record=$src/examples/records/elcentro-1940-ns-peknold.AT2
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
timeout 90 "$bdir/drths-physical" --experiment "$exp" --openfresco "127.0.0.1:$port" --serve \
    --step-duration 0.005 --wait-timeout 3 --out "$tmp/serve" --quiet \
    >"$tmp/site.out" 2>"$tmp/site.err" &
site=$!
pids+=("$site")
for n in 1 2 3; do
    # Between two analyses the listener is closed until the next session has started: a client
    # that comes then is refused and tries again, as a lab's script would be restarted.
    for try in $(seq 100); do
        if timeout 30 "$bdir/drths-openfresco-client" --connect "127.0.0.1:$port" \
            --record "$record" --steps 100 --step-duration 0.005 --variant generic \
            --repeat-trials >"$tmp/client-$n.out" 2>"$tmp/client-$n.err"; then
            break
        fi
        grep -q "cannot connect" "$tmp/client-$n.err" || fail "client $n failed"
        [ "$try" -lt 100 ] || fail "client $n could not connect"
        sleep 0.05
    done
    for _ in $(seq 200); do
        [ -f "$tmp/serve/analysis-$n/summary.json" ] && break
        sleep 0.05
    done
done
status=0
wait "$site" || status=$?
[ "$status" -eq 1 ] || fail "the site exited $status after the wait with no fourth client, not 1"
grep -q "no OpenFresco client connected within 3 s" "$tmp/site.out" "$tmp/site.err" ||
    fail "no sentence for the wait that ended the serving"
for n in 1 2 3; do
    d=$tmp/serve/analysis-$n
    [ -s "$d/physical.csv" ] || fail "analysis $n: no physical.csv"
    python3 - "$d/summary.json" <<'PY' || fail "analysis $n: summary"
import json, sys
o = json.load(open(sys.argv[1]))["openfresco"]
assert o["commits"] == 100 and "(DIE)" in o["end"], (o["commits"], o["end"])
PY
done
echo "three analyses served, each in its own run folder"
