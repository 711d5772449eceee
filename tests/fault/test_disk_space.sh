#!/usr/bin/env bash
# A run that cannot keep its records is refused before it starts, and a run folder is used once
# (docs/faults.md, "A full disk"). Neither site needs its peer here.
#  1. On a 2 MiB filesystem the test mounts itself (tmpfs; skipped where mounting is not
#     permitted) each site refuses to start, exit 2, with one sentence naming the folder, the
#     space the run needs and the space free, before it listens (actuator site) or sends its
#     first HELLO (numerical site), and leaves no record behind.
#  2. A run folder that holds an earlier run is refused (exit 2, the file named), so a new run
#     (even one killed with -9, which writes no summary) never leaves an earlier run's
#     summary.json beside its own records; the earlier run's files are left untouched.
#  3. On a filesystem that cannot reserve and reports no size (ramfs) the site runs and says that
#     nothing is held.
source "$(dirname "$0")/../lib.sh"
make_experiment 2

# ---- 2. a folder used once (no mount needed) -------------------------------------------------
run_physical() { # OUT: the actuator site alone, no numerical site (exit 1 after 0.3 s)
    rc=0
    timeout 30 "$bdir/drths-physical" --experiment "$tmp/exp.yaml" --listen 127.0.0.1:0 \
        --wait-timeout 0.3 --out "$1" --quiet >"$1.out" 2>"$1.err" || rc=$?
}
run_physical "$tmp/once"
[ "$rc" = 1 ] || fail "first run in $tmp/once: exit $rc, expected 1 (no numerical site)"
[ -f "$tmp/once/summary.json" ] || fail "the first run wrote no summary.json"
before=$(md5sum "$tmp/once/summary.json" "$tmp/once/physical.bin")
run_physical "$tmp/once"
echo "second run in the same folder: exit $rc: $(cat "$tmp/once.err")"
[ "$rc" = 2 ] || fail "a second run in a used folder: exit $rc, expected 2"
grep -q "already holds an earlier run (summary.json)" "$tmp/once.err" ||
    fail "the refusal does not name the earlier run's summary.json"
grep -q "listening on" "$tmp/once.out" && fail "the refused run listened"
[ "$(md5sum "$tmp/once/summary.json" "$tmp/once/physical.bin")" = "$before" ] ||
    fail "the refused run changed the earlier run's files"
# A folder left by a run killed with -9 (its .bin, no summary) is refused too.
mkdir -p "$tmp/killed" && cp "$tmp/once/physical.bin" "$tmp/killed/"
rc=0
timeout 30 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --peer 127.0.0.1:9 \
    --connect-timeout 0.3 --out "$tmp/killed" --quiet >"$tmp/killed.out" 2>"$tmp/killed.err" || rc=$?
[ "$rc" = 2 ] && grep -q "already holds an earlier run (physical.bin)" "$tmp/killed.err" ||
    fail "a folder holding a killed run's physical.bin: exit $rc: $(cat "$tmp/killed.err")"
# Files that are not a run's (the experiment, notes) do not count.
mkdir -p "$tmp/notes" && echo "operator notes" >"$tmp/notes/notes.txt"
run_physical "$tmp/notes"
[ "$rc" = 1 ] && [ -f "$tmp/notes/summary.json" ] || fail "a folder with notes only: exit $rc"
echo "ok   a run folder is used once"

# ---- 1. not enough space -----------------------------------------------------------------------
mkdir -p "$tmp/tiny"
mount -t tmpfs -o size=2m drths-test "$tmp/tiny" 2>"$tmp/mount.err" ||
    skip "cannot mount a tmpfs here ($(head -n 1 "$tmp/mount.err")): the space checks need a small filesystem"
trap 'umount "$tmp/tiny" 2>/dev/null || true; cleanup' EXIT
rc=0
timeout 30 "$bdir/drths-physical" --experiment "$tmp/exp.yaml" --listen 127.0.0.1:0 \
    --wait-timeout 5 --out "$tmp/tiny/phys" --quiet >"$tmp/phys.out" 2>"$tmp/phys.err" || rc=$?
echo "actuator site on 2 MiB: exit $rc: $(cat "$tmp/phys.err")"
[ "$rc" = 2 ] || fail "drths-physical on a 2 MiB filesystem: exit $rc, expected 2"
grep -Eq "not enough space in $tmp/tiny/phys for this run's records: it needs [0-9.]+ MB .*the filesystem has [0-9.]+ MB free" \
    "$tmp/phys.err" || fail "the actuator site's refusal does not name the folder and the space"
grep -q "listening on" "$tmp/phys.out" && fail "the actuator site listened before refusing"
rc=0
timeout 30 "$bdir/drths-numerical" --experiment "$tmp/exp.yaml" --peer 127.0.0.1:9 \
    --connect-timeout 5 --out "$tmp/tiny/num" --quiet >"$tmp/num.out" 2>"$tmp/num.err" || rc=$?
echo "numerical site on 2 MiB: exit $rc: $(cat "$tmp/num.err")"
[ "$rc" = 2 ] || fail "drths-numerical on a 2 MiB filesystem: exit $rc, expected 2"
grep -Eq "not enough space in $tmp/tiny/num for this run's records: it needs [0-9.]+ MB .*the filesystem has [0-9.]+ MB free" \
    "$tmp/num.err" || fail "the numerical site's refusal does not name the folder and the space"
grep -q "connecting: HELLO" "$tmp/num.out" && fail "the numerical site sent HELLO before refusing"
for f in phys/physical.bin num/numerical.bin phys/.drths-reserved-space num/.drths-reserved-space; do
    [ -e "$tmp/tiny/$f" ] && fail "a refused run left $f"
done
echo "ok   not enough space: both sites refused before anything ran"

# ---- 3. a filesystem without fallocate that reports no size (ramfs) ---------------------------
# Nothing can be held there and its "0 blocks free" means "no size", not "full": the site runs
# and says that nothing is held.
mkdir -p "$tmp/ram"
mount -t ramfs drths-test "$tmp/ram" 2>"$tmp/mount.err" || skip "cannot mount a ramfs here"
trap 'umount "$tmp/tiny" "$tmp/ram" 2>/dev/null || true; cleanup' EXIT
run_physical "$tmp/ram/phys"
echo "actuator site on ramfs: exit $rc, $(grep "space:" "$tmp/ram/phys.out" | sed 's/^ *//')"
[ "$rc" = 1 ] && [ -f "$tmp/ram/phys/summary.json" ] || fail "drths-physical on ramfs: exit $rc, expected 1 (no numerical site)"
grep -q "space: [0-9.]* MB needed, not held (this filesystem cannot reserve space" "$tmp/ram/phys.out" ||
    fail "the actuator site on ramfs does not say that nothing is held"
echo PASS
