"""The shell tests' python checks: check(cond, what) prints one "ok" or "FAIL" line and
remembers a failure; a check script ends with sys.exit(status()). Found on PYTHONPATH, which
tests/lib.sh (or the test itself) sets to this folder."""

_failed = False


def check(cond, what):
    global _failed
    print(("ok   " if cond else "FAIL ") + what)
    _failed |= not cond
    return bool(cond)


def status():
    return 1 if _failed else 0
