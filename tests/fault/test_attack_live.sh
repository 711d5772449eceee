#!/usr/bin/env bash
# Hostile datagrams during a live run. Both sites on loopback, 5 s of the default experiment,
# with the on-path attacker drths-attack (tools/attack) as the relay between them:
#   run 1: no attack; the relay captures every datagram of the numerical site;
#   run 2: a new session; the relay injects, from the peer's own address, each single attack of
#          its table (forged tag, bit flips, truncations, oversize, wrong magic / version / type /
#          direction / session / counter, replays in the session, keyed valid msgpack with wrong
#          types, ...), 1000 datagrams from another address, all of run 1 again (the replay of
#          an earlier session; its HELLO is dropped before decryption, HELLO_RUNNING), and 1 s
#          of junk flood at the highest rate it can send;
#   run 3: run 2's attacks on an actuator site with --kernel-filter.
# Asserts: both sites exit 0 in both runs; no HOLD; the actuator site counted every injected
# datagram under the reason the attacker declared for it (exactly; for the flood, less the
# kernel's receive-buffer drops of the site's socket, which never reach it); the attacked run's
# displacement error against the reference run is within the clean run's bounds. With the kernel
# filter: no HOLD, nothing the filter must refuse reached the site (only authentication and
# replay failures are counted by reason), the kernel counted drops, and the same fidelity bound.
source "$(dirname "$0")/../lib.sh"

make_experiment 5
# Protocol v2's session keys come from an ephemeral exchange: the on-path attacker, even with
# the PSK, cannot compute them. Its keyed attacks read them from the numerical site's key log
# (DRTHS_KEYLOG_FILE, a test-only aid like TLS's SSLKEYLOGFILE).
export DRTHS_KEYLOG_FILE="$tmp/keylog"

run() { # run NAME PHYSICAL_OPTIONS RELAY_OPTIONS...
    local name=$1 popts=$2
    shift 2
    local pport rport
    pport=$(free_port)
    rport=$(free_port)
    # shellcheck disable=SC2086
    start_physical "$name-phys" "$pport" $popts
    local ppid=$last_pid
    start_attack_relay "$name-relay" "$rport" "$pport" --keylog "$DRTHS_KEYLOG_FILE" "$@"
    local rpid=$last_pid
    start_numerical "$name-num" "$rport"
    local npid=$last_pid
    local nrc prc
    wait_status "$npid"
    nrc=$rc
    wait_status "$ppid"
    prc=$rc
    kill -TERM "$rpid" 2>/dev/null || true
    wait "$rpid" || true
    echo "$name: drths-numerical exit $nrc, drths-physical exit $prc"
    [ "$nrc" = 0 ] || fail "$name: drths-numerical exit $nrc"
    [ "$prc" = 0 ] || fail "$name: drths-physical exit $prc"
    report "$tmp/$name-report.out" "$tmp/$name-num" --reference "$tmp/ref" \
        --physical "$tmp/$name-phys" --no-plots
}

timeout 60 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --reference --out "$tmp/ref" \
    --quiet >"$tmp/ref.out" 2>"$tmp/ref.err" || fail "reference run failed"
run clean "" --capture "$tmp/session1.bin"
run attack "" --attack --old "$tmp/session1.bin" --seed 5
run filtered --kernel-filter --attack --old "$tmp/session1.bin" --seed 6
sed 's/^/   /' "$tmp/attack-relay.err" | head -60

python3 - "$tmp" <<'PY' || fail "attack checks failed"
import json, sys
tmp = sys.argv[1]
from checks import check, status
relay = json.load(open(f"{tmp}/attack-relay.json"))
phys = json.load(open(f"{tmp}/attack-phys/summary.json"))
clean_phys = json.load(open(f"{tmp}/clean-phys/summary.json"))
check(relay["attacks_done"] == relay["attacks_total"],
      f"all {relay['attacks_total']} single attacks sent ({relay['attacks_done']})")
check(relay["old_session_sent"] > 0 and relay["flood_sent"] > 10000,
      f"old session replayed ({relay['old_session_sent']} bytes), flood "
      f"{relay['flood_sent']} datagrams at {relay['flood_rate_per_s']:.0f}/s")
check(not phys["hold"]["active"], "no HOLD at the actuator site")
check(clean_phys["rejects"] == {}, f"clean run: no rejects ({clean_phys['rejects']})")
got = phys["rejects"]
exp = relay["expect"]
flood = relay["flood_expect"]
drops = relay["kernel_drops"]
names = sorted(set(got) | set(exp) | set(flood))
print(f"     {'reason':16} {'site':>9} {'attacks':>9} {'flood':>9}")
missing = 0
for n in names:
    g, e, f = got.get(n, 0), exp.get(n, 0), flood.get(n, 0)
    print(f"     {n:16} {g:9d} {e:9d} {f:9d}")
    check(e + f - drops <= g <= e + f, f"{n}: counted {g}, sent {e + f} (kernel drops {drops})")
    missing += e + f - g
check(missing <= drops, f"datagrams not counted {missing} <= kernel drops {drops}")
c = phys["commands"]
print(f"     attacked run: concealed {c['concealed']}, from redundancy {c['from_redundancy']}, "
      f"late {c['late']}; clean run: concealed {clean_phys['commands']['concealed']}")
clean = json.load(open(f"{tmp}/clean-num/report.json"))["fidelity"]["floors"]
att = json.load(open(f"{tmp}/attack-num/report.json"))["fidelity"]["floors"]
for a, b in zip(clean, att):
    ea, eb = a["disp_rms_err_pct"], b["disp_rms_err_pct"]
    # The clean run's bound (tests/integration/test_loopback.sh: 0.5 %), and within a few
    # times the clean run's own error: the sensor noise differs between two runs, and the
    # flooder, on the same 2-CPU machine, delays the sites for some commands (a remote
    # attacker would cost them only the receive path). Seen on CI: clean 0.08 %, attacked
    # 0.20 % after a 1 s flood at the highest rate.
    check(eb is not None and eb <= 0.5 and eb <= 3 * ea + 0.05,
          f"floor {a['floor']}: displacement RMS error attacked {eb:.4f} % "
          f"(clean {ea:.4f} %)")
filt = json.load(open(f"{tmp}/filtered-phys/summary.json"))
check(filt["kernel_filter"] and not filt["hold"]["active"], "kernel filter: on, no HOLD")
keyless = {"TOO_SHORT", "TOO_LONG", "BAD_MAGIC", "BAD_VERSION", "BAD_TYPE", "WRONG_DIRECTION",
           "BAD_RESERVED", "BAD_SESSION", "WRONG_SOURCE", "OTHER_SESSION"}
passed = {n: v for n, v in filt["rejects"].items() if n in keyless}
check(not passed, f"kernel filter: no key-less reject reached the site ({passed})")
check(filt["kernel_drops"] > 10000,
      f"kernel filter: {filt['kernel_drops']} kernel drops; counted by reason "
      f"{filt['rejects']}")
fatt = json.load(open(f"{tmp}/filtered-num/report.json"))["fidelity"]["floors"]
for a, b in zip(clean, fatt):
    ea, eb = a["disp_rms_err_pct"], b["disp_rms_err_pct"]
    check(eb is not None and eb <= 0.5 and eb <= 3 * ea + 0.05,
          f"kernel filter, floor {a['floor']}: displacement RMS error {eb:.4f} % "
          f"(clean {ea:.4f} %)")
sys.exit(status())
PY
check_records "$tmp/filtered-phys" physical
check_records "$tmp/attack-phys" physical
check_records "$tmp/attack-num" numerical
echo PASS
