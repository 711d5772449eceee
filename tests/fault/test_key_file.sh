#!/usr/bin/env bash
# Key handling (protocol/PROTOCOL.md section 3, protocol/keyfile.h): both sites refuse a key file
# that others may read or write, or of the wrong size, or that is not a regular file (a FIFO
# used to block open() forever: every run is bounded by `timeout`, so that fails instead of
# hanging), or, as root, one owned by another user, with exit status 2 and a message naming the
# file and what to do; a key made by drths-keygen (mode 0600) is accepted (the actuator site then
# waits for a peer and, given 0.2 s, exits 1 for "no numerical site", not 2).
source "$(dirname "$0")/../lib.sh"
make_experiment 1
"$bdir/drths-keygen" "$tmp/good.key" >"$tmp/keygen.out" || fail "drths-keygen failed"
[ "$(stat -c %a "$tmp/good.key")" = 600 ] || fail "drths-keygen did not make a 0600 file"
cp "$tmp/good.key" "$tmp/other.key" && chmod 644 "$tmp/other.key"
cp "$tmp/good.key" "$tmp/group.key" && chmod 640 "$tmp/group.key"
cp "$tmp/good.key" "$tmp/writable.key" && chmod 622 "$tmp/writable.key"
head -c 31 "$tmp/good.key" >"$tmp/short.key" && chmod 600 "$tmp/short.key"
{ cat "$tmp/good.key"; printf x; } >"$tmp/long.key" && chmod 600 "$tmp/long.key"

expect_refused() { # KEY PATTERN
    local key=$1 pattern=$2 site
    for site in physical numerical; do
        local args=(--experiment "$tmp/exp.yaml" --key "$tmp/$key" --out "$tmp/run-$site-$key" --quiet)
        if [ "$site" = physical ]; then args+=(--listen 127.0.0.1:0 --wait-timeout 0.2)
        else args+=(--peer 127.0.0.1:9 --connect-timeout 0.2); fi
        local rc=0
        timeout -k 2 10 "$bdir/drths-$site" "${args[@]}" >"$tmp/$site-$key.out" 2>"$tmp/$site-$key.err" || rc=$?
        echo "drths-$site --key $key: exit $rc: $(head -n 1 "$tmp/$site-$key.err")"
        [ "$rc" != 124 ] && [ "$rc" != 137 ] || fail "drths-$site hung on $key (killed by timeout)"
        [ "$rc" = 2 ] || fail "drths-$site accepted $key (exit $rc)"
        grep -q -- "$pattern" "$tmp/$site-$key.err" || fail "drths-$site: no message matching '$pattern'"
    done
}
expect_refused other.key "readable by others (mode 0644); chmod 600"
expect_refused group.key "readable by its group (mode 0640); chmod 600"
expect_refused writable.key "writable by others (mode 0622); chmod 600"
expect_refused short.key "exactly 32 bytes (or 64 hex digits), got 31"
expect_refused long.key "exactly 32 bytes (or 64 hex digits), got 33"
mkfifo -m 600 "$tmp/fifo.key"
expect_refused fifo.key "fifo.key is a FIFO (named pipe), not a regular file"
mkdir -m 700 "$tmp/dir.key"
expect_refused dir.key "dir.key is a directory, not a regular file"
if [ "$(id -u)" = 0 ]; then
    cp "$tmp/good.key" "$tmp/nobody.key" && chown nobody "$tmp/nobody.key" && chmod 600 "$tmp/nobody.key"
    expect_refused nobody.key "nobody.key is owned by uid $(id -u nobody), not by you (uid 0)"
    owner_checked=1
else
    owner_checked=0
fi

rc=0
timeout 20 "$bdir/drths-physical" --experiment "$tmp/exp.yaml" --key "$tmp/good.key" \
    --listen 127.0.0.1:0 --wait-timeout 0.2 --out "$tmp/run-good" --quiet \
    >"$tmp/good.out" 2>"$tmp/good.err" || rc=$?
echo "drths-physical --key good.key: exit $rc ($(tail -n 1 "$tmp/good.err"))"
[ "$rc" = 1 ] || fail "a drths-keygen key was not accepted (exit $rc)"
grep -q "rehearsal key" "$tmp/good.err" && fail "the site used the rehearsal key"
# Everything else was checked; the owner rule needs root to give a file away.
[ "$owner_checked" = 1 ] || skip "not root: a key owned by another user was not tried"
echo PASS
