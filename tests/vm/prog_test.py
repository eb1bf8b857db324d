#!/usr/bin/python3
"""vm test of `faultline prog run` (meson suite 'vm'): the hand-written
programs of tests/vm/programs/ in one boot of the default guest must all
pass; then the first of them under --mutate corrupt must fail (exit 1) with
a `content` finding, and `prog show` must name it.

It needs progexec in the guest image (guest/tools/progexec).
FAULTLINE_KERNEL / FAULTLINE_MODULES select the kernel.  Exit 0 pass,
1 fail, 2 setup error.
"""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import FAULTLINE, OUT, kernel_args  # noqa: E402

PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")
# Per boot: the build (cached), the boot, three short programs.
RUN_TIMEOUT_S = 600


def prog_run(target, *extra):
    """(exit status, run directory, stdout) of `faultline prog run`."""
    os.makedirs(OUT, exist_ok=True)
    out = tempfile.mkdtemp(prefix="prog-", dir=OUT)
    res = subprocess.run([FAULTLINE, "prog", "run", target, "--out", out, *kernel_args(),
                          *extra], stdout=subprocess.PIPE, text=True, timeout=RUN_TIMEOUT_S)
    sys.stdout.write(res.stdout)
    dirs = [os.path.join(out, d) for d in os.listdir(out)]
    return res.returncode, (dirs[0] if len(dirs) == 1 else None), res.stdout


def result(rundir, name):
    """The program's result.json, or None when it was not run."""
    try:
        with open(os.path.join(rundir, "programs", name, "result.json")) as f:
            return json.load(f)
    except OSError:
        return None


def main():
    problems = []
    names = sorted(f[:-len(".prog")] for f in os.listdir(PROGRAMS) if f.endswith(".prog"))
    status, rundir, _ = prog_run(PROGRAMS)
    if status != 0:
        problems.append(f"the programs' run exited {status}, expected 0")
    if rundir:
        with open(os.path.join(rundir, "run.json")) as f:
            meta = json.load(f)
        if meta.get("programs") != names:
            problems.append(f"run.json programs {meta.get('programs')}, expected {names}")
        for n in names:
            r = result(rundir, n)
            if r is None:
                problems.append(f"{n}: not run")
            elif r["verdict"] != "pass" or r["ops_run"] != r["ops"]:
                problems.append(f"{n}: {r['verdict']} ({r['ops_run']}/{r['ops']} ops, "
                                f"{r['findings'][:2]}), expected pass with every op run")
    else:
        problems.append("no run directory")

    if status == 3:
        problems.append("the guest crashed or never ran a program: no mutation run")
        return report(problems)
    first = os.path.join(PROGRAMS, names[0] + ".prog")
    status, rundir, _ = prog_run(first, "--mutate", "corrupt")
    if status != 1:
        problems.append(f"--mutate corrupt exited {status}, expected 1 (a failed program)")
    r = result(rundir, names[0]) if rundir else None
    if r:
        hits = sum(f["hits"].get("mutate", 0) for f in r["faults"].values())
        content = [f for f in r["findings"] if f["check"] == "content"]
        if r["verdict"] != "fail" or not content or not hits:
            problems.append(f"--mutate corrupt: verdict {r['verdict']}, {len(content)} content "
                            f"findings, {hits} mutated writes: expected fail, >0, >0")
        shown = subprocess.run([FAULTLINE, "prog", "show", rundir], stdout=subprocess.PIPE,
                               text=True, timeout=60).stdout
        print(shown)
        if "content" not in shown or names[0] not in shown:
            problems.append("prog show does not name the program and its content finding")
    else:
        problems.append("--mutate corrupt: no result")
    return report(problems)


def report(problems):
    for p in problems:
        print(f"prog_test: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
