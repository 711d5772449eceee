#!/usr/bin/env bash
# The Debian package (cmake/install.cmake): cpack builds it from this build folder, dpkg-deb
# unpacks it into a temporary root, and the installed programs run from there: drths-physical
# --help, drths-numerical --version (the version of this build), a man page through man -l,
# drths-check on every installed example, drths-monitor serving its installed page, and
# drths-rehearse (--help, --version, and its --io-check on the emulated comedi board of
# lib/drths with the installed example, from another folder). Every shared library an installed
# program or the emulated board loads must come from a package the .deb depends on, so the
# package installs on a lab PC with nothing missing; gnuplot-nox and man-db are recommended.
source "$(dirname "$0")/../lib.sh"

for p in cpack help2man dpkg-deb man; do
    command -v "$p" >/dev/null || skip "$p is missing (tools/deps installs it)"
done
[ -f "$bdir/CPackConfig.cmake" ] || skip "no CPackConfig.cmake in $bdir"
[ -f "$bdir/man/drths-numerical.1" ] || fail "the build made no man pages although help2man is here"
command -v npm >/dev/null || [ -f "$bdir/web/index.html" ] ||
    skip "npm is missing and $bdir/web is not built: the monitor's page cannot be packaged"

(cd "$bdir" && timeout 600 cpack -G DEB -B "$tmp/pkg" >"$tmp/cpack.out" 2>&1) ||
    fail "cpack -G DEB failed: $(tail -n 5 "$tmp/cpack.out")"
debs=("$tmp"/pkg/drths_*.deb)
[ -f "${debs[0]}" ] || fail "cpack made no drths_*.deb"
deb=${debs[0]}
root=$tmp/root
dpkg-deb -x "$deb" "$root"
nfiles=$(dpkg-deb -c "$deb" | grep -vc '/$')
echo "package $(basename "$deb"): $(stat -c %s "$deb") bytes, $nfiles files"

bin=$root/usr/bin
for p in drths-numerical drths-physical drths-monitor drths-report drths-keygen drths-check \
    drths-rehearse drths-impair; do
    [ -x "$bin/$p" ] || fail "$p is not installed"
    [ -f "$root/usr/share/man/man1/$p.1" ] || fail "no man page for $p"
done
[ ! -e "$bin/drths-attack" ] || fail "drths-attack is a test tool and must not be installed"
"$bin/drths-physical" --help >"$tmp/help.out" || fail "installed drths-physical --help failed"
grep -q '^usage: drths-physical' "$tmp/help.out" || fail "drths-physical --help prints no usage"
"$bin/drths-numerical" --version >"$tmp/version.out" || fail "installed --version failed"
want=${DRTHS_EXPECT_VERSION:-}
grep -q "^drths-numerical (drths) $want" "$tmp/version.out" ||
    fail "drths-numerical --version: $(cat "$tmp/version.out"), want $want"
MANWIDTH=100 man -l "$root/usr/share/man/man1/drths-numerical.1" >"$tmp/man.out" 2>/dev/null ||
    fail "man -l drths-numerical.1 failed"
grep -q 'numerical site of a real-time hybrid simulation' "$tmp/man.out" ||
    fail "the man page has no NAME line"
grep -q -- '--experiment' "$tmp/man.out" || fail "the man page does not list the options"
# SYNOPSIS lists each form of a command whole (cmake/man-help), not its continuation lines as
# forms of their own, and ends before the description.
synopsis() { # PROGRAM: the SYNOPSIS section of its installed man page, one line per form
    MANWIDTH=400 man -l "$root/usr/share/man/man1/$1.1" 2>/dev/null |
        sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' | sed -e '1d' -e '$d' -e '/^$/d' -e 's/^ *//'
}
synopsis drths-physical >"$tmp/syn-physical.out"
grep -q '^drths-physical --experiment FILE \[--site NAME\] \[--listen HOST:PORT\].* \[--monitor HOST:PORT \[--wait-start\]\]$' \
    "$tmp/syn-physical.out" || fail "drths-physical's SYNOPSIS splits its first form"
grep -q '^drths-physical --experiment FILE --io-check \[--io-amplitude M\] \[--io-leg S\] \[--io-current A\]$' \
    "$tmp/syn-physical.out" || fail "drths-physical's SYNOPSIS lacks the --io-check form"
n=$(grep -vc '^drths-physical ' "$tmp/syn-physical.out" || true)
[ "$n" -eq 0 ] || fail "drths-physical's SYNOPSIS has $n lines that are not a form of the command"
synopsis drths-check >"$tmp/syn-check.out"
[ "$(wc -l <"$tmp/syn-check.out")" -eq 2 ] || fail "drths-check's SYNOPSIS: $(cat "$tmp/syn-check.out")"

web=$root/usr/share/drths/web
for f in index.html app.js style.css uPlot.iife.min.js uPlot.min.css uPlot.LICENSE.txt; do
    [ -s "$web/$f" ] || fail "the monitor's page lacks $f in $web"
done
[ -f "$root/usr/share/drths/examples/three-story-elcentro.yaml" ] || fail "no examples installed"
[ -f "$root/usr/share/drths/examples/records/elcentro-1940-ns-peknold.AT2" ] || fail "no records"
[ -f "$root/usr/share/doc/drths/docs/experiment-file.md" ] || fail "no docs installed"

# The installed examples pass the installed pre-flight check.
for e in "$root"/usr/share/drths/examples/*.yaml; do
    "$bin/drths-check" "$e" >"$tmp/check.out" 2>&1 || fail "drths-check $(basename "$e"): exit $?"
done

# drths-monitor finds its installed page (../share/drths/web from bin/) and serves it.
timeout 30 "$bin/drths-monitor" --listen 127.0.0.1:0 --telemetry 127.0.0.1:0 \
    >"$tmp/monitor.out" 2>"$tmp/monitor.err" &
pids+=("$!")
for _ in $(seq 100); do
    grep -q "web files from" "$tmp/monitor.out" 2>/dev/null && break
    sleep 0.05
done
grep -q "web files from $bin/../share/drths/web" "$tmp/monitor.out" ||
    fail "drths-monitor does not use its installed page: $(cat "$tmp/monitor.out")"
url=$(sed -n 's|^drths-monitor: page \(http://[^/ ]*/\).*|\1|p' "$tmp/monitor.out")
curl -fsS --max-time 10 "${url}uPlot.iife.min.js" -o "$tmp/uplot.js" || fail "GET uPlot.iife.min.js"
cmp -s "$tmp/uplot.js" "$web/uPlot.iife.min.js" || fail "the monitor served another uPlot"

# The rehearsal, installed: its help, its version, and the commissioning check on the emulated
# comedi board (lib/drths) wired as the installed comedi example says, run from a folder of its
# own with nothing of the build folder on its paths.
emu=$root/usr/lib/drths/libdrths_comedi_emu.so
[ -f "$emu" ] || fail "the emulated comedi board is not installed in /usr/lib/drths"
"$bin/drths-rehearse" --help >"$tmp/rehearse-help.out" || fail "drths-rehearse --help failed"
grep -q '^Usage: drths-rehearse \[EXPERIMENT.yaml\]' "$tmp/rehearse-help.out" ||
    fail "drths-rehearse --help prints no usage line"
grep -q -- '--daq comedi' "$tmp/rehearse-help.out" || fail "drths-rehearse --help lacks --daq"
"$bin/drths-rehearse" --version >"$tmp/rehearse-version.out" || fail "drths-rehearse --version failed"
grep -q "^drths-rehearse (drths) $want" "$tmp/rehearse-version.out" ||
    fail "drths-rehearse --version: $(cat "$tmp/rehearse-version.out"), want $want"
MANWIDTH=100 man -l "$root/usr/share/man/man1/drths-rehearse.1" >"$tmp/man-rehearse.out" 2>/dev/null ||
    fail "man -l drths-rehearse.1 failed"
grep -q -- '--impair' "$tmp/man-rehearse.out" || fail "the drths-rehearse man page lists no options"
mkdir "$tmp/lab"
(cd "$tmp/lab" && env -u DRTHS_REHEARSE_BIN -u DRTHS_REHEARSE_EXAMPLES -u DRTHS_REHEARSE_COMEDI_EMU \
    timeout 120 "$bin/drths-rehearse" --daq comedi --io-check >"$tmp/rehearse-io.out" 2>&1) ||
    fail "installed drths-rehearse --daq comedi --io-check: exit $?"
grep -q "^drths-physical: I/O check of 'three-story-elcentro' (backend comedi)" "$tmp/rehearse-io.out" ||
    fail "drths-rehearse --io-check did not run on the emulated board"
grep -q '^verdict: ' "$tmp/rehearse-io.out" || fail "drths-rehearse --io-check gave no verdict"
recommends=$(dpkg-deb -f "$deb" Recommends)
for r in gnuplot-nox man-db; do
    grep -Eq "(^|, )$r( |,|$)" <<<"$recommends" || fail "$r is not in Recommends: $recommends"
done

# Every library the programs and the emulated board load belongs to a package the .deb depends on.
depends=$(dpkg-deb -f "$deb" Depends)
ldconfig -p >"$tmp/ldconfig.out"
for f in "$bin"/* "$emu"; do
    # drths-rehearse is a shell program: no shared libraries of its own.
    [ "$(head -c 4 "$f")" = $'\x7fELF' ] || continue
    for so in $(objdump -p "$f" | awk '/NEEDED/{print $2}'); do
        # A sanitizer build's runtime is not what a release package carries.
        case "$so" in libasan.so* | libubsan.so* | libtsan.so*) continue ;; esac
        path=$(awk -v s="$so" '$1 == s && /x86-64/ {print $NF; exit}' "$tmp/ldconfig.out")
        [ -n "$path" ] || path=$(awk -v s="$so" '$1 == s {print $NF; exit}' "$tmp/ldconfig.out")
        [ -n "$path" ] || fail "$(basename "$f") needs $so, which this machine does not have"
        # With merged /usr the same file has two names and dpkg knows one of them.
        pkg=
        for q in "$path" "$(readlink -f "$path")" "${path#/usr}"; do
            pkg=$(dpkg -S "$q" 2>/dev/null | head -n 1 | cut -d: -f1 || true)
            [ -z "$pkg" ] || break
        done
        [ -n "$pkg" ] || fail "no package owns $path ($so)"
        grep -Eq "(^|, )$pkg( |,|$)" <<<"$depends" ||
            fail "$(basename "$f") loads $so from $pkg, which is not in Depends: $depends"
    done
done
echo "package installs and runs from $root"
