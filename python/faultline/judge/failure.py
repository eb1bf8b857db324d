"""What "the same failure" means: the first failing KTAP test, the crash
line (numbers blanked), a hang or the reason; minimize and explore compare
runs by it."""

import os
import re

from faultline.errors import EXIT_CRASH, EXIT_PASS
from faultline.judge.judge import CRASH_MARKERS
from faultline.judge.ktap import parse_ktap


# ---------------------------------------------------------------- failure identity

_NUM = re.compile(r"0x[0-9a-fA-F]+|\d+")


def crash_line(console):
    """The first console line naming a crash, with addresses, numbers and
    the timestamp blanked (they differ between kernels, not between faults)."""
    for line in console.splitlines():
        for m in CRASH_MARKERS:
            if m in line:
                text = line[line.index(m):]
                return _NUM.sub("N", text).strip()
    return ""


def signature(rundir, r):
    """What "the same failure" means: the first failing KTAP test (suite,
    number, name), the crash line, a hang, or the reason; None for a pass."""
    if r.status == EXIT_PASS:
        return None
    if r.outcome == "hang":
        return "hang"
    if r.status == EXIT_CRASH:
        try:
            with open(os.path.join(rundir, "console.log"), errors="replace") as f:
                line = crash_line(f.read())
        except OSError:
            line = ""
        return "crash: " + (line or r.reason)
    results = r.results
    if not results:
        # A Report loaded from report.json has no per-test results: the KTAP has.
        try:
            with open(os.path.join(rundir, "ktap.log"), errors="replace") as f:
                results = parse_ktap(f.read())["results"]
        except OSError:
            results = []
    for res in results:
        if res["kind"] == "fail":
            head = res["line"].split(" # ")[0]
            return f"not ok: {res['suite']} :: {head}"
    return f"{r.outcome}: " + _NUM.sub("N", r.reason)
