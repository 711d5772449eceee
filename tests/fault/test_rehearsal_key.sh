#!/usr/bin/env bash
# The public rehearsal key is for a rehearsal on one machine only (README, Security): without a
# key file, the actuator site refuses to listen on an address that is not loopback (0.0.0.0, the
# old default of the examples, and [::]) and to drive a comedi board even on loopback, and the
# numerical site refuses a peer that is not loopback: exit 2, before any socket or board is
# opened, with a sentence naming the address (or the back end) and what to do (drths-keygen,
# --key, link.key_file). On loopback with the virtual specimen it is still taken, with its
# warning, and with a key file every address is fine. The refused numerical run names 0.0.0.0:9,
# which Linux delivers to this machine, so even a site that took it would send nothing out.
source "$(dirname "$0")/../lib.sh"
make_experiment 1
"$bdir/drths-keygen" "$tmp/lab.key" >/dev/null || fail "drths-keygen failed"

# physical NAME [options]: drths-physical without a peer for 0.2 s; exit status in $rc.
physical() {
    local name=$1
    shift
    rc=0
    timeout -k 2 10 "$bdir/drths-physical" --experiment "$tmp/exp.yaml" --wait-timeout 0.2 \
        --out "$tmp/run-$name" --quiet "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
    echo "drths-physical $*: exit $rc: $(head -n 1 "$tmp/$name.err")"
}
refused() { # NAME PATTERN...: exit 2 and each pattern in NAME.err
    local name=$1
    shift
    [ "$rc" = 2 ] || fail "$name: exit $rc, not 2 (the rehearsal key was taken)"
    for p in "$@"; do grep -qF -- "$p" "$tmp/$name.err" || fail "$name: no '$p' in the message"; done
    [ ! -e "$tmp/run-$name" ] || fail "$name: a run folder was made before the refusal"
}
todo=("drths-keygen" "--key lab.key or link.key_file")

physical any --listen 0.0.0.0:0
refused any "rehearsal key is refused for a link listening on 0.0.0.0:0 (--listen), which is not a loopback address" "${todo[@]}"
physical any6 --listen "[::]:0"
refused any6 "listening on [::]:0 (--listen)" "${todo[@]}"
# The example's old default, from the file (its address is not bound: the refusal comes first).
sed 's|^  listen: .*|  listen: "0.0.0.0:47000"|' "$tmp/exp.yaml" >"$tmp/any.yaml"
physical file --experiment "$tmp/any.yaml"
refused file "listening on 0.0.0.0:47000 (physical.listen)" "${todo[@]}"

# A comedi back end (its device absent: the refusal comes before the board is opened).
cp "$tmp/exp.yaml" "$tmp/comedi.yaml"
sed -n '/^daq:/,$p' "$src/examples/three-story-elcentro-comedi.yaml" |
    sed -e 's|^  device: .*|  device: /dev/comedi-drths-test-absent|' >>"$tmp/comedi.yaml"
physical comedi --experiment "$tmp/comedi.yaml" --listen 127.0.0.1:0
refused comedi "refused with a real DAQ (daq.backend comedi)" "${todo[@]}"
grep -q "cannot open /dev/comedi" "$tmp/comedi.err" && fail "comedi: the board was tried first"

# Allowed: loopback with the virtual specimen (with the warning), any address with a key.
physical loop --listen 127.0.0.1:0
[ "$rc" = 1 ] || fail "loopback, rehearsal key: exit $rc, not 1 (no numerical site)"
grep -q "using the public rehearsal key" "$tmp/loop.err" || fail "loopback: no warning"
physical keyed --listen 0.0.0.0:0 --key "$tmp/lab.key"
[ "$rc" = 1 ] || fail "0.0.0.0 with a key: exit $rc, not 1 (no numerical site)"
physical keyed-comedi --experiment "$tmp/comedi.yaml" --listen 127.0.0.1:0 --key "$tmp/lab.key"
[ "$rc" = 1 ] && grep -q "cannot open /dev/comedi-drths-test-absent" "$tmp/keyed-comedi.err" ||
    fail "comedi with a key: exit $rc, not the missing board's exit 1"

# The numerical site: a peer that is not loopback.
rc=0
timeout -k 2 10 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --peer 0.0.0.0:9 \
    --connect-timeout 0.2 --out "$tmp/run-num" --quiet >"$tmp/num.out" 2>"$tmp/num.err" || rc=$?
echo "drths-numerical --peer 0.0.0.0:9: exit $rc: $(head -n 1 "$tmp/num.err")"
refused num "refused for a link to 0.0.0.0:9 (--peer), which is not a loopback address" "${todo[@]}"
echo PASS
