#!/usr/bin/env python3
"""Compares two OpenSees node records (columns: time, then one displacement per recorded DOF) of
the examples in this folder: prints the steps, max |u_site - u_reference| / max |u_reference|
over every DOF (and per DOF when there are several) and exits 1 when it exceeds the bound
(default 1e-6) or the records differ in length, times or DOF."""
import sys


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if parts:
                rows.append(tuple(float(p) for p in parts))
    return rows


def main():
    if len(sys.argv) < 3:
        print("usage: compare.py SITE.out REFERENCE.out [BOUND]", file=sys.stderr)
        return 2
    try:
        site, ref = load(sys.argv[1]), load(sys.argv[2])
    except OSError as e:
        # OpenSees that crashed or was killed before its recorder opened the file.
        print(f"no record: {e.filename}: {e.strerror}")
        return 1
    bound = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-6
    if len(site) != len(ref) or not ref:
        print(f"records differ in length: {len(site)} against {len(ref)} steps")
        return 1
    if any(abs(a[0] - b[0]) > 1e-9 for a, b in zip(site, ref)):
        print("records differ in their times")
        return 1
    ndof = len(ref[0]) - 1
    if ndof < 1 or any(len(r) != ndof + 1 for r in site + ref):
        print("records differ in their columns (DOF)")
        return 1
    peaks = [max(abs(b[1 + i]) for b in ref) for i in range(ndof)]
    errs = [max(abs(a[1 + i] - b[1 + i]) for a, b in zip(site, ref)) for i in range(ndof)]
    peak, err = max(peaks), max(errs)
    rel = err / peak if peak > 0 else err
    print(f"steps {len(ref)}, peak |u_ref| {peak:.6g} m, max |u_site - u_ref| {err:.3g} m, "
          f"relative {rel:.3g} (bound {bound:g})")
    if ndof > 1:
        for i in range(ndof):
            r = errs[i] / peaks[i] if peaks[i] > 0 else errs[i]
            print(f"  DOF {i + 1}: peak |u_ref| {peaks[i]:.6g} m, max |u_site - u_ref| "
                  f"{errs[i]:.3g} m, relative {r:.3g}")
    return 0 if rel <= bound else 1


if __name__ == "__main__":
    sys.exit(main())
