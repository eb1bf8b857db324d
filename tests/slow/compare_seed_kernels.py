#!/usr/bin/python3
"""Slow test (meson suite 'slow', not in `faultline check`): `faultline
compare` tells the stock 7.2 kernel from the zswap dropbehind v3 series,
and finds no significant change between a kernel and itself.

The kernels come from `faultline kernel build debian:7.2`, stock and with
the series' mailbox applied: FAULTLINE_SEED_MBOX=FILE (the thread of
"[PATCH v3 0/3] mm: zswap: free cold writeback folios promptly" as saved
from the list).  Exit 77 (skip) without it.
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import FAULTLINE, TOP, verdict  # noqa: E402

SCENARIO = "writeback-dropbehind-nvme"
RUNS = os.environ.get("FAULTLINE_COMPARE_RUNS", "3")


def compare(baseline, series, out, *extra):
    cmd = [FAULTLINE, "compare", SCENARIO,
           "--baseline", baseline, "--series", series, "--runs", RUNS, "--out", out,
           "--quiet", *extra]
    print("+", " ".join(cmd), flush=True)
    rc = subprocess.run(cmd).returncode
    groups = sorted(d for d in os.listdir(out) if d.endswith("-compare"))
    with open(os.path.join(out, groups[-1], "compare.json")) as f:
        return rc, json.load(f)


def main():
    mbox = os.environ.get("FAULTLINE_SEED_MBOX")
    if not mbox:
        print("SKIP: set FAULTLINE_SEED_MBOX to the dropbehind v3 series' mailbox")
        return 77
    stock, v3 = "stock-7.2", "dropbehind-v3-7.2"
    for name, extra in ((stock, []), (v3, ["--patch", mbox])):
        cmd = [FAULTLINE, "kernel", "build", "debian:7.2", "--name", name, *extra]
        print("+", " ".join(cmd), flush=True)
        if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode != 0:
            return verdict("compare seed kernels", [f"kernel build {name} failed"])
    out = os.path.join(TOP, "build", "compare-runs")
    os.makedirs(out, exist_ok=True)
    problems = []

    rc, data = compare(stock, v3, out)
    rows = {m["metric"]: m for m in data["metrics"]}
    if rc != 0:
        problems.append(f"stock vs v3: exit {rc}, failed {data['failed_expectations']}")
    for metric in ("pgrotated", "nr_swapcached_after_writeback"):
        m = rows.get(metric)
        if not m or m["direction"] != "-" or not m["changed"]:
            problems.append(f"stock vs v3: {metric} did not decrease: {m and m['verdict']}")
    errors = rows.get("data_errors")
    if not errors or any(errors[s]["samples"] != [0] * errors[s]["n"]
                         for s in ("baseline", "series")):
        problems.append(f"data_errors not zero on both: {errors}")

    # the scenario declares its series patched: a kernel against itself is stock twice
    rc, data = compare(stock, stock, out, "--level", "0.99", "--kernel-modes", "stock,stock")
    changed = [m["metric"] for m in data["metrics"] if m["changed"]]
    if changed:
        problems.append(f"stock vs stock: significant change in {changed}")
    if data["missing_metrics"] or data.get("failed_expectations") is None:
        problems.append(f"stock vs stock: missing metrics {data['missing_metrics']}")

    return verdict("compare seed kernels", problems)


if __name__ == "__main__":
    sys.exit(main())
