#!/usr/bin/env bash
# Without a board, drths-physical stops at start (the comedi back end fails at start with a clear
# message rather than running without its I/O): an experiment whose daq section
# names the comedi back end and a device that does not exist makes it exit 1 at once, with one
# message naming the device and the reason, before it listens or creates a run folder.
set -euo pipefail
bdir=$1
src=${DRTHS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ln -s "$src/examples/records" "$tmp/records"
dev=/dev/comedi-drths-test-absent
# A comedi back end refuses the public rehearsal key before it opens the board: give it a key.
"$bdir/drths-keygen" "$tmp/lab.key" >/dev/null
sed -e "s|^  directory: .*|  directory: $tmp/runs|" -e "s|^  key_file: .*|  key_file: $tmp/lab.key|" \
    "$src/examples/three-story-elcentro.yaml" >"$tmp/exp.yaml"
grep -q "^  key_file: $tmp/lab.key\$" "$tmp/exp.yaml"
cat >>"$tmp/exp.yaml" <<YAML

daq:
  backend: comedi
  device: $dev
  command_out:     {subdevice: 1, channel: 0, units_per_volt: 0.01}
  current_out:     {subdevice: 1, channel: 1, units_per_volt: 0.25}
  displacement_in: {subdevice: 0, channel: 0, aref: diff, units_per_volt: 0.01}
  force_in:        {subdevice: 0, channel: 1, aref: diff, units_per_volt: 25000}
YAML
set +e
timeout 20 "$bdir/drths-physical" --experiment "$tmp/exp.yaml" --listen 127.0.0.1:0 \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
echo "exit $rc; stderr: $(cat "$tmp/err")"
fails=0
check() { if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
check "exit 1" "$([ $rc -eq 1 ]; echo $?)"
check "message names the device" "$(grep -q "cannot open $dev" "$tmp/err"; echo $?)"
check "message gives the reason" "$(grep -q "No such file or directory" "$tmp/err"; echo $?)"
check "one line" "$([ "$(wc -l <"$tmp/err")" -eq 1 ]; echo $?)"
check "no run folder" "$([ ! -e "$tmp/runs" ]; echo $?)"
[ $fails -eq 0 ]
