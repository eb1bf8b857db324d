#!/usr/bin/python3
"""vm test of restored runs (`run --restore`, python/faultline/run/restore.py).

  restore_test.py [SCENARIO] [--rules FILE]

1. A cold run and a restored run of SCENARIO (default smoke), side by side:
   both pass, and their KTAP logs are the same once every number is masked
   (the guest runs the same tests on the same device, only not booted).
2. A --deterministic pair, both restored, at once: one fault digest, the
   same KTAP, and the same faults and console but for virtual times
   (timeline_differences).  Before the launcher turned QEMU's network
   announcements off, the real-time timer they arm after a restore let host
   timing interleave the 2 vCPUs: this pair failed 2 of 3 CI runs.

The VMs of each step run at once (the saved guest is made once, by whichever
run gets there first; the other waits for it).  FAULTLINE_KERNEL /
FAULTLINE_MODULES select the kernel.  Exit 0 pass, 1 fail, 2 setup error.
"""

import argparse
import dataclasses
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import (OUT, exit_with, read_bytes, run_options,  # noqa: E402
                    timeline_differences, verdict)

from faultline.build.builds import build_all
from faultline.errors import EXIT_PASS
from faultline.host import stop
from faultline.run import runner

HERE = os.path.dirname(os.path.abspath(__file__))


def masked(rundir):
    ktap = (read_bytes(rundir, "ktap.log") or b"").decode(errors="replace")
    return re.sub(r"\d+(\.\d+)?", "N", ktap).splitlines()


def side_by_side(runs):
    """[(sc, seed, opts, builds, rundir)] at once: [(Report, run.json)]."""
    with stop.Executor(max_workers=len(runs)) as pool:
        futures = [pool.submit(runner.one_run, *r, verbose=False) for r in runs]
        return [f.result() for f in futures]


def first_difference(a, b):
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"line {i + 1}: {(a[i:] or ['(end)'])[0]!r} vs {(b[i:] or ['(end)'])[0]!r}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", nargs="?", default="smoke")
    ap.add_argument("--rules", default=os.path.join(HERE, "restore.rules"))
    args = ap.parse_args()
    problems = []
    cold = run_options(quiet=True)
    warm = dataclasses.replace(cold, restore=True)
    det = dataclasses.replace(warm, deterministic=True, rules=args.rules)
    sc = runner.load_scenario(args.scenario, warm)
    sc_det = runner.load_scenario(args.scenario, det)
    builds = build_all(cold.kernel, cold.modules, quiet=True).for_scenario(sc)
    group = runner.new_dir(OUT, sc.name + "-restore")
    dirs = {k: os.path.join(group, k) for k in ("cold", "restored", "det-a", "det-b")}
    for d in dirs.values():
        os.makedirs(d)
    seed = sc.faults.seed

    # 1. cold against restored
    (rc, _), (rw, mw) = side_by_side([(sc, seed, cold, builds, dirs["cold"]),
                                      (sc, seed, warm, builds, dirs["restored"])])
    for what, r in (("cold", rc), ("restored", rw)):
        if r.status != EXIT_PASS:
            problems.append(f"{what} run: {r.outcome} ({r.reason})")
    if not (mw.get("backend_info") or {}).get("restored_from"):
        problems.append("the restored run's run.json names no saved guest")
    a, b = masked(dirs["cold"]), masked(dirs["restored"])
    if a != b:
        problems.append("masked KTAP, cold vs restored, " + first_difference(a, b))
    print(f"cold {rc.elapsed_s}s, restored {rw.elapsed_s}s; phases "
          f"{(mw.get('backend_info') or {}).get('phases')}")

    # 2. a deterministic pair, both restored
    (ra, _), (rb, _) = side_by_side([(sc_det, seed, det, builds, dirs["det-a"]),
                                     (sc_det, seed, det, builds, dirs["det-b"])])
    for what, r in (("deterministic a", ra), ("deterministic b", rb)):
        if r.status != EXIT_PASS:
            problems.append(f"{what}: {r.outcome} ({r.reason})")
    if ra.digest is None or ra.digest != rb.digest:
        problems.append(f"fault digests {ra.digest} vs {rb.digest}")
    ka, kb = read_bytes(dirs["det-a"], "ktap.log"), read_bytes(dirs["det-b"], "ktap.log")
    if not ka or ka != kb:
        problems.append("deterministic KTAP " + first_difference(
            (ka or b"").decode(errors="replace").splitlines(),
            (kb or b"").decode(errors="replace").splitlines()))
    timeline, notes = timeline_differences(dirs["det-a"], dirs["det-b"])
    problems += timeline
    for n in notes:
        print(n)
    print(f"deterministic pair: digest {ra.digest} / {rb.digest}, "
          f"{ra.elapsed_s}s / {rb.elapsed_s}s")
    return verdict(f"restore {sc.name} ({group})", problems)


if __name__ == "__main__":
    exit_with("restore_test", main)
