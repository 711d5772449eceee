#!/usr/bin/env bash
# The live monitor end to end: drths-monitor on 127.0.0.1, both sites on loopback with
# --monitor and --wait-start, the page in headless Chromium (tests/browser/monitor_e2e.js):
# Start when both report READY, the charts get data and the counters move, Stop; then both sites
# ended through the SIGTERM path (exit 1, HOLD with reason code SIGNAL, the text naming the
# monitor, not killed by the timeout)
# with complete records: summary.json, every numerical step and every actuator tick in the CSVs,
# no row dropped. The screenshot goes to <build>/test-artifacts/monitor.png.
source "$(dirname "$0")/../lib.sh"

need_browser

# A 30 s record and 20 s of free vibration (Stop comes long before the end, even on a slow
# machine), with make_experiment's timing headroom.
make_experiment 30 's/^  tail_s: 0$/  tail_s: 20/'
grep -q '^  tail_s: 20$' "$tmp/exp.yaml" || fail "could not edit the experiment"

# The monitor picks free ports itself and prints them.
start_monitor

port=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
timeout 90 "$bdir/drths-physical" --experiment "$tmp/exp.yaml" --listen "127.0.0.1:$port" \
    --wait-timeout 60 --out "$tmp/phys" --quiet --monitor "$tlm" --wait-start \
    >"$tmp/phys.out" 2>"$tmp/phys.err" &
ppid=$!
pids+=("$ppid")
timeout 90 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --peer "127.0.0.1:$port" \
    --connect-timeout 10 --out "$tmp/num" --quiet --monitor "$tlm" --wait-start \
    >"$tmp/num.out" 2>"$tmp/num.err" &
npid=$!
pids+=("$npid")

run_e2e monitor
set +e
wait "$npid"; nrc=$?
wait "$ppid"; prc=$?
set -e
pids=("$mpid")
echo "browser test exit $erc, drths-numerical exit $nrc, drths-physical exit $prc"
[ "$erc" -eq 0 ] || fail "the browser test failed (screenshot: $shot)"
[ -s "$shot" ] || fail "no screenshot"
[ "$nrc" -ne 124 ] && [ "$prc" -ne 124 ] || fail "a site had to be killed by the timeout"
[ "$nrc" -eq 1 ] || fail "drths-numerical exit $nrc (Stop takes the SIGTERM path: exit 1)"
[ "$prc" -eq 1 ] || fail "drths-physical exit $prc (Stop takes the SIGTERM path: exit 1)"
grep -q "stop from the monitor" "$tmp/num.err" || fail "drths-numerical does not say the monitor stopped it"

python3 - "$tmp" "$url" <<'PY' || fail "record or monitor check failed"
import csv, json, sys, urllib.request
d, url = sys.argv[1], sys.argv[2]
from checks import check, status
num = json.load(open(f"{d}/num/summary.json"))
phys = json.load(open(f"{d}/phys/summary.json"))
check(num["exit_reason"] == "stopped from the monitor", f"numerical: {num['exit_reason']!r}")
check("stopped from the monitor at the numerical site" in phys["exit_reason"],
      f"physical: {phys['exit_reason']!r}")
check(phys["hold"]["active"] and phys["hold"]["reason_code"] == "SIGNAL",
      f"the actuator site held (SIGNAL path): {phys['hold'].get('reason')!r}")
rows = list(csv.DictReader(open(f"{d}/num/numerical.csv")))
steps = num["steps"]
check(steps > 5000 and len(rows) == steps and
      [int(float(r["step"])) for r in rows] == list(range(steps)),
      f"numerical.csv: every step 0..{steps - 1} ({len(rows)} rows)")
check(steps < num["steps_planned"], f"stopped before the end of the record ({steps} of {num['steps_planned']})")
prow = list(csv.DictReader(open(f"{d}/phys/physical.csv")))
ticks = phys["ticks"]
check(ticks > 5000 and [int(float(r["tick"])) for r in prow] == list(range(ticks)),
      f"physical.csv: every tick 0..{ticks - 1} ({len(prow)} rows)")
check(phys["recorder"]["dropped_rows"] == 0 and phys["recorder"]["rows"] == ticks, "no row dropped")
sites = json.load(urllib.request.urlopen(url.rstrip("/") + "/sites", timeout=5))
by = {s["site"]: s for s in sites["sites"]}
check(set(by) == {"numerical", "physical"}, f"the monitor heard both sites: {sorted(by)}")
check(all(s["state"] == "DONE" for s in by.values()), "both last reported DONE")
check(all(s["frames"] > 100 for s in by.values()),
      "frames: " + ", ".join(f"{k} {v['frames']}" for k, v in by.items()))
check(sites["controls_sent"] >= 3, f"control datagrams sent: {sites['controls_sent']} (start x2, stop)")
sys.exit(status())
PY
# The monitor ends cleanly on SIGTERM (and, in the sanitizer builds, without a report).
stop_cleanly "$mpid" drths-monitor
pids=()
grep -q "frames received" "$tmp/monitor.out" || fail "drths-monitor did not print its totals"
echo "screenshot: $shot"
echo "PASS"
