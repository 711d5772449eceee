#!/usr/bin/env bash
# Fault: heavy reordering and duplication (docs/faults.md): drths-impair "delay 40ms 20ms
# duplicate 20%" in both directions (a uniform 20..60 ms one-way delay reorders nearly every
# datagram; a fifth is sent twice). Expected: L is chosen from the probes above the worst round
# trip, the actuator site plays commands in tick order and the numerical site waits for
# feedback in tick order; every duplicate is rejected as REPLAYED by the receiving site (the
# same counter; at most 60 ms = 300 counters late, inside the 1024-counter window), so the
# actuator site's REPLAYED count equals the relay's forward duplicated count exactly (the
# numerical site's: the backward count less the few in flight when it stopped reading); the run
# completes (both exit 0, no HOLD, nothing concealed) with complete records.
# The test raises physical.playout_ticks to 1000: with the default 300 (60 ms), commands that
# arrive more than 60 ms ahead are dropped as too_far (L is about 136 ms here and the fastest
# datagrams take 20 ms): about half of them, which redundancy and concealment then cover with
# runs of up to 17 concealed ticks, too close to the limit of 20 (docs/faults.md).
source "$(dirname "$0")/../lib.sh"
make_experiment 4 's/^  playout_ticks: .*/  playout_ticks: 1000/'
grep -q '^  playout_ticks: 1000' "$tmp/exp.yaml" || fail "could not edit the experiment"
pport=$(free_port)
rport=$(free_port)
start_physical phys "$pport"
ppid=$last_pid
start_impair relay "$rport" "$pport" --forward 'delay 40ms 20ms duplicate 20%' \
    --backward 'delay 40ms 20ms duplicate 20%' --seed 3
rpid=$last_pid
start_numerical num "$rport"
npid=$last_pid
wait_status "$npid"; nrc=$rc
wait_status "$ppid"; prc=$rc
kill -TERM "$rpid" 2>/dev/null || true
wait "$rpid" 2>/dev/null || true
echo "drths-numerical exit $nrc: $(summary "$tmp/num" exit_reason)"
echo "drths-physical exit $prc: $(summary "$tmp/phys" exit_reason)"
[ "$prc" = 0 ] || fail "drths-physical exit $prc"
[ "$nrc" = 0 ] || fail "drths-numerical exit $nrc"
python3 - "$tmp" <<'PY' || fail "reorder/duplicate checks"
import json, sys
t = sys.argv[1]
p = json.load(open(f"{t}/phys/summary.json"))
n = json.load(open(f"{t}/num/summary.json"))
r = json.load(open(f"{t}/relay.json"))
fw, bw = r["forward"], r["backward"]
c = p["commands"]
pr, nr = p["rejects"].get("REPLAYED", 0), n.get("rejects", {}).get("REPLAYED", 0)
print(f"relay: forward duplicated {fw['duplicated']} reordered {fw['reordered']}, "
      f"backward duplicated {bw['duplicated']} reordered {bw['reordered']}")
print(f"actuator site: REPLAYED {pr}, L {p['loop_delay_ms']} ms, reordered {c['reordered']}, "
      f"too far {c['too_far']}, from redundancy {c['from_redundancy']}, "
      f"concealed {c['concealed']} (longest run {c['max_consecutive_concealed']}), "
      f"late {c['late']}, hold {p['hold']['active']}")
print(f"numerical site: REPLAYED {nr}, concealed feedback {n.get('concealed_feedback')}")
ok = (pr == fw["duplicated"] > 0 and 0.97 * bw["duplicated"] <= nr <= bw["duplicated"]
      and not p["hold"]["active"] and c["too_far"] == 0 and c["concealed"] == 0
      and fw["reordered"] > 1000)
sys.exit(0 if ok else 1)
PY
check_records "$tmp/phys" physical
check_records "$tmp/num" numerical
echo PASS
