#!/usr/bin/python3
"""explore against the real-bug corpus, beside a plain seed sweep with the
same budget (meson suite slow; not part of `check`).

  explore_corpus.py [BUG ...] [--budget 30m] [--fixed] [--restore] [--results FILE]

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
on the base kernel (e.g. debian-6.1), where nothing may fail.

Prints one line per bug and side: found or not, time to the first
failure, runs, and explore's minimal schedule.  Each comparison is a
record of the results set --results FILE (default
results/explore-corpus/default.jsonl, bugs/explore_table.py), written as
soon as it is measured (the same bug, scenario and side again replaces its
record); `faultline docs` renders the set into docs/explore.md.  A set of
another QEMU build is refused before anything runs.  Exit 0 when explore
found at least half of the bugs (and, with --fixed, nothing failed on the
fixed kernels), 1 otherwise, 2 on a setup error.
"""

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import FAULTLINE, TOP, exit_with  # noqa: E402

from faultline import scenario
from faultline.bugs import corpus, explore_table
from faultline.build.builds import qemu_key
from faultline.errors import EXIT_FAIL, EXIT_PASS, SetupError
from faultline.results import records
from faultline.run import restore
from faultline.search import explore

OUT = os.path.join(TOP, "build", "explore-corpus")
DEFAULT_RESULTS = os.path.join(records.RESULTS_DIR, "explore-corpus", "default.jsonl")
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
    """explore_table.explore_outcome() of `faultline explore @name`."""
    t0 = time.monotonic()
    res = subprocess.run([FAULTLINE, "explore", name, *kernel_opt(kernel), "--budget",
                          budget, "--max-failures", "1", "--out", out, "--quiet", *extra],
                         capture_output=True, text=True)
    if res.returncode == 2 and REFUSED in res.stderr:
        raise NeedsGeneric(res.stderr.strip().splitlines()[-1])
    if res.returncode not in (EXIT_PASS, EXIT_FAIL):
        raise SetupError(f"explore {name} --kernel {kernel}: exit {res.returncode}: "
                         + (res.stderr.strip().splitlines() or [""])[-1])
    return explore_table.explore_outcome(out, time.monotonic() - t0)


def run_sweep(name, kernel, budget_s, out, extra):
    """Seeds 1, 2, ... of the scenario as written, until a failure or the
    budget: explore_table.sweep_failure() or sweep_passed()."""
    t0, seed = time.monotonic(), 0
    while time.monotonic() - t0 < budget_s:
        seed += 1
        # A directory of its own per seed: the failing run is the one run in it.
        seed_out = os.path.join(out, f"seed{seed}")
        res = subprocess.run([FAULTLINE, "run", name, *kernel_opt(kernel), "--seed",
                              str(seed), "--quiet", "--out", seed_out, *extra],
                             capture_output=True, text=True)
        if res.returncode == 2:
            raise SetupError(f"run {name} --kernel {kernel}: "
                             + (res.stderr.strip().splitlines() or [""])[-1])
        if res.returncode != EXIT_PASS:
            rundirs = [os.path.join(seed_out, d) for d in sorted(os.listdir(seed_out))]
            return explore_table.sweep_failure(rundirs[-1], seed, time.monotonic() - t0)
    return explore_table.sweep_passed(seed)


def explore_said(ex):
    first = ex["first"]
    if not first:
        return f"not found in {ex['runs']} runs"
    when = "the baseline" if first["trial"] is None else f"trial {first['trial']}"
    return f"found after {first['after_s']:.0f}s ({when}), {ex['runs']} runs"


def sweep_said(sw):
    return (f"found after {sw['time_to_failure_s']:.0f}s, seed {sw['seed']}"
            if sw["seed"] else f"not found in {sw['runs']} runs")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("bugs", nargs="*", help="corpus bug names (default: every built one)")
    p.add_argument("--budget", default="30m")
    p.add_argument("--fixed", action="store_true", help="also the fixed base kernels")
    p.add_argument("--restore", action="store_true",
                   help="both sides from a saved guest where the device allows it")
    p.add_argument("--results", metavar="FILE", default=DEFAULT_RESULTS,
                   help="the results set each comparison is recorded in (default "
                        "results/explore-corpus/default.jsonl)")
    args = p.parse_args()
    budget_s = explore.parse_budget(args.budget)
    results_path = os.path.abspath(args.results)
    # A set holds one QEMU build: refused now, not after hours of searches.
    records.check_builds(records.display(results_path), explore_table.read(results_path),
                         qemu_key())
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
    found, false_pos, made = set(), [], []
    for b in todo:
        sides = [("buggy", f"bug-{b.name}")]
        if args.fixed:
            fixed = b.base.replace(":", "-")
            sides.append(("fixed", fixed if fixed in have or b.base != "debian:6.12"
                          else "default"))
        for sc in b.scenarios:
            for side, kernel in sides:
                tag = f"{b.name}-{sc}-{side}-{int(time.time())}"
                extra = restorable(sc) if args.restore else []
                start = None
                try:
                    ex = run_explore(sc, kernel, args.budget,
                                     os.path.join(OUT, tag, "explore"), extra)
                except NeedsGeneric as e:
                    start = explore.generic_scenario(scenario.load(sc))
                    if start is None:
                        raise SetupError(f"{e}; no generic scenario for its device") from None
                    print(f"{b.name}: explore refused {sc} (its test checks its own "
                          f"faults): exploring {start}", flush=True)
                    ex = run_explore(start, kernel, args.budget,
                                     os.path.join(OUT, tag, "explore-" + start),
                                     restorable(start) if args.restore else [])
                sw = run_sweep(sc, kernel, budget_s, os.path.join(OUT, tag, "sweep"), extra)
                # Recorded now: a later comparison's setup error keeps this one.
                made.append(explore_table.record(b, sc, start, side, kernel, budget_s,
                                                 bool(extra), ex, sw))
                explore_table.write(results_path, made[-1:])
                if side == "buggy" and ex["first"]:
                    found.add(b.name)       # a bug counts once, whichever scenario
                if side == "fixed" and (ex["first"] or sw["seed"]):
                    false_pos.append(f"{b.name} {sc}")
                via = f" (from {start})" if start else ""
                print(f"{b.name:36} {side:5} {sc:24} explore{via}: {explore_said(ex)}; "
                      f"sweep: {sweep_said(sw)}", flush=True)
                if ex["first"] and ex["first"].get("minimal"):
                    print("    minimal: "
                          + "; ".join(explore_table.minimal_rules(ex["first"]["minimal"])))
    print(explore_table.text_table(explore_table.rows(made)))
    print(f"explore found {len(found)} of {len(todo)} bugs in {args.budget} each"
          + (f"; failures on fixed kernels: {', '.join(false_pos)}" if false_pos else "")
          + f"; recorded in {records.display(results_path)} (`faultline docs` renders it)")
    return EXIT_PASS if 2 * len(found) >= len(todo) and not false_pos else EXIT_FAIL


if __name__ == "__main__":
    exit_with("explore_corpus", main)
