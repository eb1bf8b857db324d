#!/usr/bin/python3
"""explore against the real-bug corpus, beside a plain seed sweep with the
same budget (meson suite slow; not part of `check`).

  explore_corpus.py [BUG ...] [--budget 30m] [--fixed] [--restore]

For each bug of tests/bugs/ whose buggy kernel is built (`faultline kernel
build BASE --patch tests/bugs/NAME/reintroduce.patch --name bug-NAME`), on
each of the bug's scenarios:
  - `faultline explore SCENARIO --kernel bug-NAME --budget B` (the
    scenario's own rules removed: no bug-specific rule anywhere);
  - a seed sweep of the scenario as written, seeds 1, 2, ... one run at a
    time until the first failure or the same budget.
Each side stops at its first failure.  A bug scenario whose guest test checks
its own faults (swaptest write-error expects I/O errors) fails without
them, and explore refuses it: explore then starts from the generic scenario
of the same device and completion context (smoke, syncblk-task, ...), as
a user without the bug's scenario would.  --restore runs both sides from a
saved guest (run --restore) where the scenario's device can be hot-added,
so the two compare searches, not boot costs.  --fixed runs the same two
on the base kernel (e.g. debian-6.1), where nothing may fail.  Prints one line per bug and side: found or not, time to
the first failure, runs, and explore's minimal schedule; writes
build/explore-corpus/results.json.  Exit 0 when explore found at least
half of the bugs (and, with --fixed, nothing failed on the fixed kernels),
1 otherwise, 2 on a setup error.
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import FAULTLINE, TOP, exit_with  # noqa: E402

from faultline import scenario
from faultline.bugs import corpus
from faultline.errors import EXIT_FAIL, EXIT_PASS, SetupError
from faultline.run import restore
from faultline.search import explore

OUT = os.path.join(TOP, "build", "explore-corpus")
REFUSED = "fails with no faults"


class NeedsGeneric(Exception):
    """explore refused the scenario: its test fails without its own faults."""


def kernels():
    """Names of the kernels `faultline kernel list` shows."""
    res = subprocess.run([FAULTLINE, "kernel", "list"], capture_output=True, text=True)
    return {line.split()[0] for line in res.stdout.splitlines() if line.strip()}


def kernel_opt(kernel):
    """--kernel NAME; none for Debian's 6.12 binary kernel (the default)."""
    return [] if kernel == "default" else ["--kernel", kernel]


def restorable(name):
    """--restore where the scenario's device can be hot-added."""
    return ["--restore"] if scenario.load(name).device.kind in restore.KINDS else []


def run_explore(name, kernel, budget, out, extra):
    t0 = time.monotonic()
    res = subprocess.run([FAULTLINE, "explore", name, *kernel_opt(kernel), "--budget",
                          budget, "--max-failures", "1", "--out", out, "--quiet", *extra],
                         capture_output=True, text=True)
    if res.returncode == 2 and REFUSED in res.stderr:
        raise NeedsGeneric(res.stderr.strip().splitlines()[-1])
    if res.returncode not in (EXIT_PASS, EXIT_FAIL):
        raise SetupError(f"explore {name} --kernel {kernel}: exit {res.returncode}: "
                         + (res.stderr.strip().splitlines() or [""])[-1])
    with open(os.path.join(out, "state.json")) as f:
        st = json.load(f)
    first = st["failures"][0] if st["failures"] else None
    return {"found": bool(first), "runs": st["tried"], "kept": st["kept"],
            "features": len(st["features"]), "wall_s": round(time.monotonic() - t0),
            "first_failure_s": first["after_s"] if first else None,
            "signature": first["signature"] if first else None,
            "minimal": first.get("minimal") if first else None,
            "repro": first.get("repro") if first else None}


def run_sweep(name, kernel, budget_s, out, extra):
    """Seeds 1, 2, ... of the scenario as written, until a failure or the budget."""
    t0, seed = time.monotonic(), 0
    while time.monotonic() - t0 < budget_s:
        seed += 1
        res = subprocess.run([FAULTLINE, "run", name, *kernel_opt(kernel), "--seed",
                              str(seed), "--quiet", "--out", out, *extra], capture_output=True,
                             text=True)
        if res.returncode == 2:
            raise SetupError(f"run {name} --kernel {kernel}: "
                             + (res.stderr.strip().splitlines() or [""])[-1])
        if res.returncode != EXIT_PASS:
            return {"found": True, "runs": seed, "first_failure_s":
                    round(time.monotonic() - t0), "seed": seed}
    return {"found": False, "runs": seed, "first_failure_s": None}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("bugs", nargs="*", help="corpus bug names (default: every built one)")
    p.add_argument("--budget", default="30m")
    p.add_argument("--fixed", action="store_true", help="also the fixed base kernels")
    p.add_argument("--restore", action="store_true",
                   help="both sides from a saved guest where the device allows it")
    args = p.parse_args()
    budget_s = explore.parse_budget(args.budget)
    have = kernels()
    names = args.bugs or corpus.list_all()
    try:
        todo = [corpus.load(n) for n in names if args.bugs or f"bug-{n}" in have]
    except corpus.BugError as e:
        raise SetupError(str(e)) from None
    for b in todo:
        if f"bug-{b.name}" not in have:
            raise SetupError(f"no kernel bug-{b.name}: faultline kernel build {b.base} "
                             f"--patch {b.patch} --name bug-{b.name}")
    if not todo:
        raise SetupError("no corpus bug has its kernel built (faultline kernel list)")
    os.makedirs(OUT, exist_ok=True)
    results, found, false_pos = [], set(), []
    for b in todo:
        sides = [("bug", f"bug-{b.name}")]
        if args.fixed:
            fixed = b.base.replace(":", "-")
            sides.append(("fixed", fixed if fixed in have or b.base != "debian:6.12"
                          else "default"))
        for sc in b.scenarios:
            for side, kernel in sides:
                tag = f"{b.name}-{sc}-{side}-{int(time.time())}"
                extra = restorable(sc) if args.restore else []
                explored = sc
                try:
                    ex = run_explore(sc, kernel, args.budget,
                                     os.path.join(OUT, tag, "explore"), extra)
                except NeedsGeneric as e:
                    explored = explore.generic_scenario(scenario.load(sc))
                    if explored is None:
                        raise SetupError(f"{e}; no generic scenario for its device") from None
                    print(f"{b.name}: explore refused {sc} (its test checks its own "
                          f"faults): exploring {explored}", flush=True)
                    ex = run_explore(explored, kernel, args.budget,
                                     os.path.join(OUT, tag, "explore-" + explored),
                                     restorable(explored) if args.restore else [])
                sw = run_sweep(sc, kernel, budget_s, os.path.join(OUT, tag, "sweep"), extra)
                results.append({"bug": b.name, "scenario": sc, "explored": explored,
                                "kernel": kernel, "side": side, "restore": bool(extra),
                                "explore": ex, "sweep": sw})
                if side == "bug" and ex["found"]:
                    found.add(b.name)       # a bug counts once, whichever scenario
                if side == "fixed" and (ex["found"] or sw["found"]):
                    false_pos.append(f"{b.name} {sc}")

                def when(r):
                    return (f"found after {r['first_failure_s']}s, {r['runs']} runs"
                            if r["found"] else f"not found in {r['runs']} runs")
                via = f" (from {explored})" if explored != sc else ""
                print(f"{b.name:36} {side:5} {sc:24} explore{via}: {when(ex)}; "
                      f"sweep: {when(sw)}", flush=True)
                if ex["minimal"]:
                    print("    minimal: " + "; ".join(
                        x.split("#")[0].strip() for x in ex["minimal"].splitlines()
                        if x.strip() and not x.startswith("#")))
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"explore found {len(found)} of {len(todo)} bugs in {args.budget} each"
          + (f"; failures on fixed kernels: {', '.join(false_pos)}" if false_pos else ""))
    return EXIT_PASS if 2 * len(found) >= len(todo) and not false_pos else EXIT_FAIL


if __name__ == "__main__":
    exit_with("explore_corpus", main)
