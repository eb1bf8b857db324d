#!/usr/bin/python3
"""Slow test (meson suite 'slow'): every scenario in scenarios/ is
reproducible.  Each runs twice under --deterministic with its own seed
(and its own vCPU count: 2 where the scenario has 2); both runs must give
the same fault digest and byte-identical KTAP.  A scenario with
`nondeterministic = "why"` is skipped with that reason.

  reproducible.py [SCENARIO ...]      default: all of scenarios/

Prints one table row per scenario (scenario | identical | wall time) and
writes the table to build/reproducible.md.  FAULTLINE_KERNEL /
FAULTLINE_MODULES select the kernel.  Exit 0 all identical, 1 otherwise.
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import TOP, exit_with, read_bytes, run_one, run_options  # noqa: E402

from faultline import scenario
from faultline.errors import EXIT_FAIL, EXIT_PASS, SetupError

OUT = os.path.join(TOP, "build", "reproducible-runs")


def twice(name, opts):
    """(identical, what differed, wall seconds, vCPUs) of two runs."""
    t0 = time.monotonic()
    (a, da), (b, db) = (run_one(name, opts, out=OUT)[1:] for _ in range(2))
    diffs = []
    if a.digest is None and a.faults is not None:
        diffs.append("no fault digest")
    if a.digest != b.digest:
        diffs.append(f"digest {a.digest} vs {b.digest}")
    ka, kb = read_bytes(da, "ktap.log") or b"", read_bytes(db, "ktap.log") or b""
    if ka != kb:
        la, lb = ka.decode(errors="replace").splitlines(), kb.decode(errors="replace").splitlines()
        i = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), min(len(la), len(lb)))
        diffs.append(f"KTAP line {i + 1}: {(la[i:] or ['(end)'])[0]!r} vs "
                     f"{(lb[i:] or ['(end)'])[0]!r}")
    if a.outcome != b.outcome:
        diffs.append(f"outcome {a.outcome} vs {b.outcome}")
    return not diffs, "; ".join(diffs), time.monotonic() - t0, a.outcome


def write_table(rows):
    # After every scenario: a long suite that is stopped keeps its table.
    os.makedirs(os.path.join(TOP, "build"), exist_ok=True)
    with open(os.path.join(TOP, "build", "reproducible.md"), "w") as f:
        f.write("\n".join(rows) + "\n")


def main():
    names = sys.argv[1:] or [n for n, _ in scenario.list_all()]
    opts = run_options(deterministic=True, quiet=True)
    rows = ["| scenario | vCPUs | identical | outcome | wall time (2 runs) |",
            "|---|---|---|---|---|"]
    bad = 0
    for name in names:
        sc = scenario.load(name)
        if sc.nondeterministic:
            rows.append(f"| {name} | {sc.vm.cpus} | skipped: {sc.nondeterministic} | | |")
            print(f"SKIP {name}: {sc.nondeterministic}", flush=True)
            continue
        try:
            scenario.check_deterministic(sc)
        except scenario.ScenarioError as e:
            # Refused, yet its file does not say why: that is a failure.
            bad += 1
            rows.append(f"| {name} | {sc.vm.cpus} | no: refused without a reason in its "
                        f"file ({e}) | | |")
            print(f"FAIL {name}: {e} (and no nondeterministic = \"...\" in its file)")
            continue
        try:
            same, diff, wall, outcome = twice(name, opts)
        except SetupError as e:
            same, diff, wall, outcome = False, f"error: {e}", 0.0, "error"
        bad += not same
        rows.append(f"| {name} | {sc.vm.cpus} | {'yes' if same else 'no: ' + diff} | "
                    f"{outcome} | {wall:.0f} s |")
        print(f"{'OK  ' if same else 'FAIL'} {name}: {diff or 'identical'} ({wall:.0f} s)",
              flush=True)
        write_table(rows)
    write_table(rows)
    print("\n".join(rows))
    print(f"{len(names) - bad} reproducible (or skipped), {bad} not")
    return EXIT_FAIL if bad else EXIT_PASS


if __name__ == "__main__":
    exit_with("reproducible", main)
