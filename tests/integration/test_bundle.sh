#!/usr/bin/env bash
# tools/bundle, the offline bundle for a lab PC (README, "Install on a lab PC"): from the package
# cpack makes here, it must write one file holding the drths .deb, what a minimal Debian 12 lacks
# for it (libhdf5-103-1 and the libraries behind it), its Recommends (gnuplot-nox, man-db), and
# nothing of the minimal system itself (libc6, dpkg); the file lists and extracts its contents and
# carries the installer. tools/bundle itself checks with apt-get --simulate, against a private
# status of the minimal system and no package source, that the bundle installs from its own
# files. Skipped when cpack, apt or the Debian archive is not there. The install itself, in a
# debootstrap --variant=minbase root without network, is not run here: making the root needs
# minutes and the archive; it is done by hand (unshare -n chroot ROOT sh BUNDLE).
source "$(dirname "$0")/../lib.sh"

for p in cpack apt-get apt-cache dpkg-deb; do
    command -v "$p" >/dev/null || skip "$p is missing (tools/deps installs cmake; apt is Debian's)"
done
[ -f "$bdir/CPackConfig.cmake" ] || skip "no CPackConfig.cmake in $bdir"
# A sanitizer build's package is not what a lab carries; integration.package checks its layout.
grep -Eq '^DRTHS_(ASAN|TSAN):BOOL=ON' "$bdir/CMakeCache.txt" &&
    skip "a sanitizer build: the bundle is made from a release build (integration.package runs here)"
command -v npm >/dev/null || [ -f "$bdir/web/index.html" ] ||
    skip "npm is missing and $bdir/web is not built: the monitor's page cannot be packaged"
apt-cache show --no-all-versions libhdf5-103-1 >/dev/null 2>&1 ||
    skip "apt knows no libhdf5-103-1: no Debian 12 package lists here (apt-get update)"

(cd "$bdir" && timeout 600 cpack -G DEB -B "$tmp/pkg" >"$tmp/cpack.out" 2>&1) ||
    fail "cpack -G DEB failed: $(tail -n 5 "$tmp/cpack.out")"
deb=$(ls "$tmp"/pkg/drths_*.deb)
set +e
timeout 600 "$src/tools/bundle" --deb "$deb" --out "$tmp/out/drths.run" >"$tmp/bundle.out" 2>&1
rc=$?
set -e
[ "$rc" -ne 3 ] || skip "the Debian archive cannot be reached from here: $(tail -n 3 "$tmp/bundle.out" | tr '\n' ' ')"
[ "$rc" -eq 0 ] || fail "tools/bundle: exit $rc"
cat "$tmp/bundle.out"
[ -s "$tmp/out/drths.run" ] || fail "tools/bundle wrote no bundle"
grep -q '^bundle: .*drths.run ([0-9]* MB, [0-9]* packages)$' "$tmp/bundle.out" ||
    fail "tools/bundle did not say the bundle's size and package count"

sh "$tmp/out/drths.run" --list >"$tmp/list.out" || fail "sh BUNDLE --list failed"
for p in drths libhdf5-103-1 libuv1 libcyaml1 libcomedi0 gnuplot-nox man-db; do
    grep -q "^${p}_.*\.deb$" "$tmp/list.out" || fail "the bundle lacks $p"
done
# The minimal system's own packages stay out: the lab PC has them.
for p in libc6 dpkg bash apt; do
    ! grep -q "^${p}_" "$tmp/list.out" || fail "the bundle carries $p, which every Debian 12 has"
done
n=$(wc -l <"$tmp/list.out")
grep -q "($(du -m "$tmp/out/drths.run" | cut -f1) MB, $n packages)" "$tmp/bundle.out" ||
    fail "the package count said ($(tail -n 2 "$tmp/bundle.out" | head -n 1)) is not the $n listed"

sh "$tmp/out/drths.run" --extract "$tmp/x" || fail "sh BUNDLE --extract failed"
dir=$(ls -d "$tmp"/x/drths-bundle_*)
[ -x "$dir/install" ] || fail "the bundle has no installer"
m=$(find "$dir/debs" -name '*.deb' | wc -l)
[ "$m" -eq "$n" ] || fail "$m .debs extracted, $n listed"
cmp -s "$dir/debs/$(basename "$deb")" "$deb" || fail "the bundle's drths .deb is not the one given"
# The installer installs only from its own folder, with no package source.
grep -q 'Dir::Etc::SourceList=/dev/null' "$dir/install" || fail "the installer may read package sources"
echo "bundle: $n packages, $(du -m "$tmp/out/drths.run" | cut -f1) MB"
