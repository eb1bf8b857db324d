#!/usr/bin/python3
"""`faultline explore` against a planted bug (meson suite vm).

  explore_test.py SCENARIO [--max-runs N] [--seed S]
  explore_test.py --unfit SCENARIO

1. `faultline explore SCENARIO --deterministic --max-runs N` must stop with
   exit 1 and a failure of the guest's test, found by a schedule explore
   made (the scenario has no rules: none names the bug), minimized to
   faults that all fail writes;
2. the reproducer it prints (`faultline run SCENARIO --rules minimal.rules
   --deterministic --seed ...`) must fail with the same KTAP line;
3. `faultline explore --resume DIR --max-runs 1` must go on at the next
   trial with the corpus and features it had.

--unfit: SCENARIO's guest test checks its own faults, so it fails without
them: explore's baseline run (no faults) must refuse it, one line, exit 2,
before any schedule is tried.

FAULTLINE_KERNEL / FAULTLINE_MODULES select the kernel.  Exit 0 pass,
1 fail, 2 setup error.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import FAULTLINE, OUT, exit_with, kernel_args, verdict  # noqa: E402

from faultline import scenario
from faultline.errors import EXIT_FAIL
from faultline.judge import failure
from faultline.run import runner


def state(d):
    with open(os.path.join(d, "state.json")) as f:
        return json.load(f)


def unfit(name):
    out = os.path.join(OUT, f"explore-unfit-{name}-{os.getpid()}")
    shutil.rmtree(out, ignore_errors=True)
    res = subprocess.run([FAULTLINE, "explore", name, "--max-runs", "3", "--out", out,
                          *kernel_args()], capture_output=True, text=True)
    problems = []
    err = res.stderr.strip().splitlines()
    if res.returncode != 2 or not err or "fails with no faults" not in err[-1]:
        problems.append(f"exit {res.returncode}: {err[-1] if err else ''}")
    if os.path.exists(os.path.join(out, "trials.jsonl")) or state(out)["tried"]:
        problems.append("schedules were tried")
    return verdict(f"explore refuses {name} (fails without faults)", problems)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("scenario")
    p.add_argument("--max-runs", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--unfit", action="store_true")
    args = p.parse_args()
    if args.unfit:
        return unfit(args.scenario)
    if scenario.load(args.scenario).faults.rules.strip():
        print(f"explore self-test: {args.scenario} has rules of its own")
        return EXIT_FAIL
    out = os.path.join(OUT, f"explore-{args.scenario}-{os.getpid()}")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [FAULTLINE, "explore", args.scenario, "--deterministic", "--seed", str(args.seed),
           "--max-runs", str(args.max_runs), "--out", out, *kernel_args()]
    res = subprocess.run(cmd, capture_output=True, text=True)
    print(res.stdout[-3000:])
    problems = []
    if res.returncode != EXIT_FAIL:
        print(f"explore self-test: explore exit {res.returncode}, expected 1: "
              f"{(res.stderr.strip().splitlines() or [''])[-1]}")
        return EXIT_FAIL
    st = state(out)
    if not st["failures"]:
        return verdict("explore self-test", ["exit 1 but no failure in state.json"])
    if st.get("baselines", {}).get(args.scenario, {}).get("outcome") != "pass":
        problems.append(f"no passing baseline run: {st.get('baselines')}")
    f = st["failures"][0]
    if f["class"] != "fail" or not f["signature"].startswith("not ok: iocheck"):
        problems.append(f"failure {f['class']}: {f['signature']}")
    names = {line.split(":")[0] for line in f["rules"].splitlines() if line.strip()}
    if not names or not all(re.fullmatch(r"x\d+", n) for n in names):
        problems.append(f"the failing schedule's rules are not explore's: {names}")
    if not f.get("minimal"):
        problems.append(f"not minimized: {f.get('note')}")
    else:
        faults = [x for x in f["minimal"].splitlines() if x.strip() and not x.startswith("#")]
        if not faults or not all(" write " in x and "error=" in x for x in faults):
            problems.append(f"minimal schedule is not failed writes: {faults}")
    if st["tried"] > args.max_runs or len(st["failures"]) < 1:
        problems.append(f"tried {st['tried']} runs, at most {args.max_runs} expected")
    # The reproducer, through the CLI, as the summary prints it.
    rep = subprocess.run(shlex.split(f["repro"]) + ["--quiet", "--out", OUT],
                         capture_output=True, text=True)
    new_dir = [x.split()[-1] for x in rep.stdout.splitlines() if x.startswith("run dir")]
    sig = (failure.signature(new_dir[0], runner.load_report(new_dir[0])) if new_dir
           else None)
    if rep.returncode != EXIT_FAIL or sig != f["signature"]:
        problems.append(f"repro exit {rep.returncode}, failure {sig!r}")
    # Resume: one more trial, numbered after the others, state carried over.
    before = st
    res = subprocess.run([FAULTLINE, "explore", "--resume", out, "--max-runs", "1",
                          *kernel_args()], capture_output=True, text=True)
    after = state(out)
    with open(os.path.join(out, "trials.jsonl")) as fh:
        trials = [json.loads(x)["trial"] for x in fh]
    if res.returncode not in (0, 1) or after["tried"] != before["tried"] + 1:
        problems.append(f"resume: exit {res.returncode}, tried {before['tried']} -> "
                        f"{after['tried']}: {(res.stderr.strip().splitlines() or [''])[-1]}")
    if trials != list(range(len(trials))):
        problems.append(f"resume: trials numbered {trials}")
    if not set(before["features"]) <= set(after["features"]) or \
            len(after["corpus"]) < len(before["corpus"]):
        problems.append("resume lost features or corpus entries")
    print(f"explore self-test: found at trial {f['trial']} after {f['after_s']:.0f}s; "
          f"{before['tried']} runs, {before['kept']} kept, {len(before['features'])} features")
    return verdict("explore self-test", problems)


if __name__ == "__main__":
    exit_with("explore_test", main)
