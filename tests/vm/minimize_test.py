#!/usr/bin/python3
"""`faultline minimize` against a planted bug (meson suites vm and slow).

  minimize_test.py SCENARIO --expect-lba A,B [--max-runs N] [--jobs J]

1. a --deterministic run of SCENARIO must fail (its guest test fails only if
   two planted writes fail, among tens or hundreds of seeded faults);
2. `faultline minimize` of that run must end 1-minimal with exactly the
   faults on the writes at sectors A and B, in at most N runs;
3. `faultline run SCENARIO --rules minimize/minimal.rules --deterministic`
   (the CLI, as a user would) must fail with the same KTAP line, and with
   no other fault injected.

FAULTLINE_KERNEL / FAULTLINE_MODULES select the kernel.  Exit 0 pass,
1 fail, 2 setup error.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import OUT, exit_with, run_one, run_options, verdict  # noqa: E402

from faultline.errors import EXIT_FAIL, EXIT_PASS
from faultline.judge import failure
from faultline.run import runner
from faultline.run.options import MinimizeOptions
from faultline.search import minimize


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("scenario")
    p.add_argument("--expect-lba", required=True, help="sectors of the planted faults, A,B")
    p.add_argument("--max-runs", type=int, default=30)
    p.add_argument("--jobs", type=int, default=1)
    args = p.parse_args()
    want = sorted(int(x) for x in args.expect_lba.split(","))
    t0 = time.monotonic()
    status, r, rundir = run_one(args.scenario, run_options(deterministic=True, quiet=True))
    problems = []
    if status != EXIT_FAIL:
        print(f"minimize self-test: the planted run did not fail ({r.reason})")
        return EXIT_FAIL
    with open(os.path.join(rundir, "faults.jsonl")) as f:
        injected = sum(1 for _ in f)
    rc = minimize.minimize(MinimizeOptions(rundir, budget=args.max_runs, jobs=args.jobs))
    if rc != EXIT_PASS:
        print(f"minimize self-test: minimize exit {rc}")
        return EXIT_FAIL
    out = os.path.join(rundir, "minimize")
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    got = sorted(f["lba"] for f in summary["minimal"])
    if got != want:
        problems.append(f"minimal faults at sectors {got}, expected {want}")
    if not summary["one_minimal"]:
        problems.append(f"not 1-minimal within {args.max_runs} runs")
    with open(os.path.join(out, "steps.jsonl")) as f:
        steps = [json.loads(x) for x in f]
    if len(steps) != summary["runs"] or not steps[0]["same_failure"]:
        problems.append(f"steps.jsonl: {len(steps)} steps for {summary['runs']} runs")
    # The minimal rules file through the CLI, as the summary's repro line says.
    with open(os.path.join(out, "repro")) as f:
        cmd = shlex.split(f.read()) + ["--quiet", "--out", OUT]
    res = subprocess.run(cmd, capture_output=True, text=True)
    ktap_fail = [x for x in res.stdout.splitlines() if x.strip().startswith("not ok")]
    if res.returncode != EXIT_FAIL:
        problems.append(f"repro of minimal.rules: exit {res.returncode}: "
                        f"{(res.stderr.strip().splitlines() or [''])[-1]}")
    new_dir = [x.split()[-1] for x in res.stdout.splitlines() if x.startswith("run dir")]
    if new_dir:
        with open(os.path.join(new_dir[0], "faults.jsonl")) as f:
            lbas = sorted(json.loads(x)["lba"] for x in f
                          if "set-state" not in json.loads(x)["action"])
        if lbas != want:
            problems.append(f"repro injected faults at {lbas}, expected {want}")
        new = runner.load_report(new_dir[0])
        sig = failure.signature(new_dir[0], new)
        if sig != summary["signature"]:
            problems.append(f"repro failed with {sig!r}, not {summary['signature']!r}")
    else:
        problems.append(f"repro printed no run dir ({ktap_fail})")
    return verdict(f"minimize self-test: {injected} log entries -> {got} in "
                   f"{summary['runs']} runs, {time.monotonic() - t0:.0f}s wall", problems)


if __name__ == "__main__":
    exit_with("minimize self-test", main)
