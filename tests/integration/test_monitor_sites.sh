#!/usr/bin/env bash
# The live monitor with several laboratories: examples/two-labs.yaml on free ports, each link
# with its own key (sites[i].key_file), drths-monitor given both keys (--key twice), the three
# sites with --monitor and --wait-start, the page in headless Chromium
# (tests/browser/monitor_e2e.js with the sites labA,labB): one panel per site (numerical, labA,
# labB; no "physical"), Start when all three report READY and acknowledged by each, the
# numerical site's link table with one row per laboratory and its round trip, each laboratory's
# own chart series, Stop; then every site ended through the SIGTERM path with its records and
# the monitor heard the three, each under its own key (no frame refused).
# The screenshot goes to <build>/test-artifacts/monitor-sites.png.
source "$(dirname "$0")/../lib.sh"

need_browser

pa=$(free_port)
pb=$(free_port)
ln -sfn "$src/examples/records" "$tmp/records"
"$bdir/drths-keygen" "$tmp/a.key" >/dev/null || fail "drths-keygen"
"$bdir/drths-keygen" "$tmp/b.key" >/dev/null || fail "drths-keygen"
python3 - "$src/examples/two-labs.yaml" "$tmp/exp.yaml" "$pa" "$pb" "$tmp" <<'PY' || fail "could not edit the experiment"
import re, sys
src, dst, pa, pb, tmp = sys.argv[1:]
t = open(src).read()
t = t.replace('address: "127.0.0.1:47001"', f'address: "127.0.0.1:{pa}"')
t = t.replace('address: "127.0.0.1:47002"', f'address: "127.0.0.1:{pb}"')
# Each link its own key: the two sites' key_file entries, in order.
keys = iter((f"{tmp}/a.key", f"{tmp}/b.key"))
t, n = re.subn(r"^(    key_file:) null", lambda m: f'{m.group(1)} "{next(keys)}"', t, flags=re.M)
assert n == 2, n
for key, value in (("duration_s", "30"), ("tail_s", "20"), ("safety_margin_ticks", "100"),
                   ("reorder_ticks", "50"), ("directory", f"{tmp}/runs")):
    t, n = re.subn(rf"^(  {key}:) [^\n]*", rf"\1 {value}", t, count=1, flags=re.M)
    assert n == 1, key
open(dst, "w").write(t)
PY

start_monitor --key "$tmp/a.key" --key "$tmp/b.key"
[ "$(grep -c "key id [0-9a-f]\{16\}" "$tmp/monitor.out")" -eq 2 ] || fail "the monitor did not print both key ids"
for lab in labA labB; do
    timeout 120 "$bdir/drths-physical" --experiment "$tmp/exp.yaml" --site "$lab" \
        --wait-timeout 60 --out "$tmp/$lab" --quiet --monitor "$tlm" --wait-start \
        >"$tmp/$lab.out" 2>"$tmp/$lab.err" &
    pids+=("$!")
    eval "pid_$lab=$!"
done
timeout 120 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --connect-timeout 10 \
    --out "$tmp/num" --quiet --monitor "$tlm" --wait-start >"$tmp/num.out" 2>"$tmp/num.err" &
npid=$!
pids+=("$npid")

run_e2e monitor-sites labA,labB
set +e
wait "$npid"; nrc=$?
wait "$pid_labA"; arc=$?
wait "$pid_labB"; brc=$?
set -e
pids=("$mpid")
echo "browser test exit $erc, drths-numerical exit $nrc, labA exit $arc, labB exit $brc"
[ "$erc" -eq 0 ] || fail "the browser test failed (screenshot: $shot)"
[ "$nrc" -eq 1 ] && [ "$arc" -eq 1 ] && [ "$brc" -eq 1 ] ||
    fail "every site ends through the SIGTERM path (exit 1): numerical $nrc, labA $arc, labB $brc"
check_records "$tmp/num" numerical
check_records "$tmp/labA" physical
check_records "$tmp/labB" physical

python3 - "$tmp" "$url" <<'PY' || fail "monitor check failed"
import json, sys, urllib.request
from checks import check, status
d, url = sys.argv[1], sys.argv[2]
sites = json.load(urllib.request.urlopen(url.rstrip("/") + "/sites", timeout=5))
by = {s["site"]: s for s in sites["sites"]}
check(set(by) == {"numerical", "labA", "labB"}, f"the monitor heard the three sites: {sorted(by)}")
check(all(s["state"] == "DONE" for s in by.values()), "all last reported DONE")
check(all(s["frames"] > 100 for s in by.values()),
      "frames: " + ", ".join(f"{k} {v['frames']}" for k, v in by.items()))
check(sum(sites["rejected"].values()) == 0, f"no frame refused: {sites['rejected']}")
for lab in ("labA", "labB"):
    s = json.load(open(f"{d}/{lab}/summary.json"))
    check("stopped from the monitor" in s["exit_reason"], f"{lab}: {s['exit_reason']!r}")
sys.exit(status())
PY
stop_cleanly "$mpid" drths-monitor
pids=()
echo "screenshot: $shot"
echo "PASS"
