#!/usr/bin/env bash
# Fault: kill -9 of the actuator site mid-run (docs/faults.md). Expected: the numerical site
# receives nothing more, conceals feedback until its peer timeout (1 s) and stops with
# PEER_LOST: exit 1, its record (a row per step up to where it stopped) and summary complete.
source "$(dirname "$0")/../lib.sh"
make_experiment 6
pport=$(free_port)
start_physical phys "$pport"
ppid=$last_pid
start_numerical num "$pport"
npid=$last_pid
wait_rows "$tmp/phys/physical.csv" 5000
kill -9 "$(child_of "$ppid")"
wait_status "$ppid"; prc=$rc
wait_status "$npid"; nrc=$rc
echo "drths-physical killed (status $prc); drths-numerical exit $nrc: $(summary "$tmp/num" exit_reason)"
[ "$prc" = 137 ] || fail "the actuator site was not killed by signal 9 (status $prc)"
[ "$nrc" = 1 ] || fail "drths-numerical exit $nrc, expected 1"
case "$(summary "$tmp/num" exit_reason)" in "peer lost"*) ;; *) fail "not PEER_LOST" ;; esac
check_records "$tmp/num" numerical
echo PASS
