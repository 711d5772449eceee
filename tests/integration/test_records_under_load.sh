#!/usr/bin/env bash
# Records are never lost under load, with the live monitor watching: drths-monitor on 127.0.0.1,
# the monitor's page open in headless Chromium (tests/browser/monitor_watch.js) for the whole
# run, both sites on loopback (no relay) with --monitor, started at once (no --wait-start), on
# the first 8 s of the default experiment, with six busy loops and a disk writer (dd with
# O_DIRECT, 1 MiB blocks, into the same file system as the records) running beside them. The
# telemetry to the monitor, the monitor streaming it and the browser drawing it are load on the
# sites' machine too. Expected: no row lost at either site (summary.json records_complete,
# recorder.dropped_rows 0), every step / tick in the CSVs, the CSV converted from the binary
# stream row for row, both sites exit 0; the monitor heard both sites to DONE and the page
# received their frames without an error. It prints what the recorders' writer threads saw:
# their longest stall and the most rows they found waiting. Skipped (77) without node or
# Chromium. Screenshot: <build>/test-artifacts/records-under-load.png.
source "$(dirname "$0")/../lib.sh"

need_browser
make_experiment 8
art="$bdir/test-artifacts"
mkdir -p "$art"
start_monitor
# The page is open before the load starts and stays open until both sites have ended.
open_page "$art/records-under-load.png"
hogs=()
stop_hogs() {
    for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${hogs[@]}"; do wait "$p" 2>/dev/null || true; done
    hogs=()
    rm -f "$tmp/dd.out"
}
trap 'stop_hogs; cleanup' EXIT
for _ in 1 2 3 4 5 6; do
    timeout 120 yes >/dev/null &
    hogs+=("$!")
done
# The disk writer repeats 400 MiB writes until the test stops it (O_DIRECT where the file
# system allows it, else through the page cache with a sync at the end of each pass). Under
# `timeout`, which signals its whole process group: stopping it stops the dd in progress too.
timeout 120 bash -c '
    flag=oflag=direct
    dd if=/dev/zero of="$1.probe" bs=1M count=1 oflag=direct 2>/dev/null || flag=conv=fdatasync
    rm -f "$1.probe"
    while :; do dd if=/dev/zero of="$1" bs=1M count=400 $flag 2>/dev/null || true; done
' dd "$tmp/dd.out" &
hogs+=("$!")

port=$(free_port)
start_physical phys "$port" --monitor "$tlm"
ppid=$last_pid
start_numerical num "$port" --monitor "$tlm"
npid=$last_pid
wait_status "$npid"
nrc=$rc
wait_status "$ppid"
prc=$rc
stop_hogs
close_page
brc=$rc
echo "drths-numerical exit $nrc, drths-physical exit $prc, browser exit $brc"
cat "$tmp/page.json"
grep -h "^ *record:" "$tmp/num.out" "$tmp/phys.out" || true

python3 - "$tmp" "$nrc" "$prc" "$brc" "$url" <<'PY' || fail "rows lost, records inconsistent or the monitor missed the run"
import csv, json, os, sys, urllib.request
tmp, nrc, prc, brc, url = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
from checks import check, status
for site, col in (("num", "step"), ("phys", "tick")):
    d = f"{tmp}/{site}"
    s = json.load(open(f"{d}/summary.json"))
    r = s["recorder"]
    kind = "numerical" if site == "num" else "physical"
    print(f"{kind}: {r['rows']} rows, {r['dropped_rows']} lost; ring {r['ring_rows']} rows, "
          f"peak {r['peak_ring_rows']} waiting; writer's longest stall {r['writer_max_stall_ms']:.1f} ms, "
          f"longest write {r['writer_max_write_ms']:.1f} ms; priority {r['writer_priority']}")
    check(s["records_complete"] is True and s["records_lost_rows"] == 0,
          f"{kind}: records_complete, {s['records_lost_rows']} rows lost")
    check(r["dropped_rows"] == 0, f"{kind}: recorder dropped {r['dropped_rows']} rows")
    rows = list(csv.DictReader(open(f"{d}/{kind}.csv")))
    check([int(float(x[col])) for x in rows] == list(range(len(rows))) and len(rows) == r["rows"],
          f"{kind}.csv: every {col} 0..{len(rows) - 1}, as many rows as the recorder wrote ({r['rows']})")
    with open(f"{d}/{kind}.bin", "rb") as f:
        head = f.read(4096).decode("ascii", "replace")
    hb = int(head.split("header_bytes ")[1].split()[0])
    rb = int(head.split("row_bytes ")[1].split()[0])
    size = os.path.getsize(f"{d}/{kind}.bin")
    check((size - hb) % rb == 0 and (size - hb) // rb == len(rows),
          f"{kind}.bin: {(size - hb) // rb} rows of {rb} bytes")
num = json.load(open(f"{tmp}/num/summary.json"))
check(len(list(csv.DictReader(open(f"{tmp}/num/numerical.csv")))) == num["steps_planned"],
      f"numerical.csv: all {num['steps_planned']} steps")
check(nrc == 0 and prc == 0, f"both sites exit 0 (numerical {nrc}, physical {prc})")
# The monitor and the page saw the run: 50 frames/s from each site for 8 s is about 400.
sites = json.load(urllib.request.urlopen(url.rstrip("/") + "/sites", timeout=5))
by = {x["site"]: x for x in sites["sites"]}
check(set(by) == {"numerical", "physical"}, f"the monitor heard both sites: {sorted(by)}")
check(all(x["state"] == "DONE" for x in by.values()),
      "both last reported DONE: " + ", ".join(f"{k} {v['state']}" for k, v in by.items()))
check(all(x["frames"] > 100 for x in by.values()),
      "monitor frames: " + ", ".join(f"{k} {v['frames']}" for k, v in by.items()))
try:
    page = json.load(open(f"{tmp}/page.json"))
except ValueError:
    page = {"error": "no JSON line from the browser"}
check(brc == 0 and "error" not in page, f"the page ran without an error: {page.get('error')}")
frames = page.get("frames", {})
check(all(frames.get(k, 0) > 100 for k in ("numerical", "physical")),
      f"frames the page received: {frames}")
sys.exit(status())
PY
stop_cleanly "$mpid" drths-monitor
pids=()
echo "PASS"
