#!/usr/bin/python3
"""vm test of swap programs' determinism (meson suite 'vm'):

1. a program with seeded rules (random delays, corrupted writes) run twice
   with `prog run --deterministic`, each from a fresh boot, gives the same
   oracle results (the findings: check, line, object, page, expected, seen)
   and the same fault digest and rule hits per device in result.json;
2. a program that crashes a long-lived VM (the guest goes silent past its
   budget, after another program ran in the same boot) is marked `crash`,
   exit 3, and the replay command the run prints reproduces the crash
   from a fresh boot.

FAULTLINE_KERNEL / FAULTLINE_MODULES select the kernel.  Exit 0 pass,
1 fail, 2 setup error.
"""

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import FAULTLINE, OUT, kernel_args  # noqa: E402

# Equal priorities: swap-outs alternate between the two devices.
SEEDED = """\
program v1
swap s0 nvme size=64M prio=5
swap s1 syncblk completion=irq size=64M prio=5
cgroup g memory.max=12M
rule s0 jitter: write prob=0.3 delay=uniform(50us,2ms)
rule s0 bad: write prob=0.2 count=40 corrupt
rule s1 slow: any prob=0.5 delay=200us
anon a 24M cgroup=g
write a 0 24M v=1
reclaim g 12M
read a 0 24M
write a 0 8M v=2
madvise a 0 8M pageout
read a 0 24M
munmap a
"""
PASSING = """\
program v1
swap s0 nvme size=32M
anon a 4M
write a 0 4M v=1
madvise a 0 4M pageout
read a 0 4M
"""
# Silent past --timeout: three 10 s sleeps against a 5 s budget.
SILENT = """\
program v1
swap s0 syncblk size=32M
anon a 1M
write a 0 1M v=1
sleep 10000
sleep 10000
sleep 10000
read a 0 1M
"""
RUN_TIMEOUT_S = 900


def prog_run(argv, out):
    """(exit status, run directory, stdout) of `faultline prog run ARGV --out OUT`."""
    os.makedirs(out, exist_ok=True)
    cmd = [*argv, "--out", out]
    print("+", shlex.join(cmd), flush=True)
    res = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=RUN_TIMEOUT_S)
    sys.stdout.write(res.stdout)
    dirs = sorted(os.path.join(out, d) for d in os.listdir(out))
    return res.returncode, dirs[-1] if dirs else None, res.stdout


def result(rundir, name):
    try:
        with open(os.path.join(rundir, "programs", name, "result.json")) as f:
            return json.load(f)
    except (OSError, TypeError):
        return None


def oracle(r):
    """What must repeat: the verdict, the findings, each device's digest
    and rule hits."""
    keys = ("check", "line", "obj", "page", "expected", "seen", "why")
    return {"verdict": r["verdict"],
            "findings": [{k: f.get(k) for k in keys} for f in r["findings"]],
            "faults": {dev: (f["digest"], f["hits"]) for dev, f in r["faults"].items()}}


def check_deterministic(work, problems):
    prog = os.path.join(work, "seeded.prog")
    with open(prog, "w") as f:
        f.write(SEEDED)
    runs = []
    for i in (1, 2):
        status, rundir, _ = prog_run([FAULTLINE, "prog", "run", prog, "--deterministic",
                                      "--seed", "7", *kernel_args()],
                                     os.path.join(work, f"det{i}"))
        r = result(rundir, "seeded")
        if r is None or r["verdict"] not in ("pass", "fail"):
            problems.append(f"--deterministic run {i}: exit {status}, "
                            f"verdict {r and r['verdict']}")
            return
        runs.append(oracle(r))
    a, b = runs
    hits = sum(sum(h.values()) for _, h in a["faults"].values())
    print(f"run 1: {a['verdict']}, {len(a['findings'])} findings, {hits} rule hits, digests "
          f"{[d for d, _ in a['faults'].values()]}")
    if not hits:
        problems.append("no rule fired: nothing to compare")
    for key in ("verdict", "findings", "faults"):
        if a[key] != b[key]:
            problems.append(f"--deterministic runs differ in {key}: {a[key]} / {b[key]}")


def check_replay(work, problems):
    progs = os.path.join(work, "progs")
    os.makedirs(progs)
    for name, text in (("1-passing", PASSING), ("2-silent", SILENT)):
        with open(os.path.join(progs, name + ".prog"), "w") as f:
            f.write(text)
    status, rundir, out = prog_run([FAULTLINE, "prog", "run", progs, "--timeout", "5s",
                                    *kernel_args()], os.path.join(work, "long"))
    first, crashed = result(rundir, "1-passing"), result(rundir, "2-silent")
    replay = [ln[len("replay: "):] for ln in out.splitlines() if ln.startswith("replay: ")]
    if status != 3 or not first or first["verdict"] != "pass" or not crashed or \
            crashed["verdict"] != "crash" or len(replay) != 1:
        problems.append(f"the long-lived run: exit {status}, 1-passing "
                        f"{first and first['verdict']}, 2-silent {crashed and crashed['verdict']}, "
                        f"{len(replay)} replay lines: expected 3, pass, crash, 1")
        return
    status, rundir, _ = prog_run(shlex.split(replay[0]), os.path.join(work, "replay"))
    again = result(rundir, "program")
    if status != 3 or not again or again["verdict"] != "crash" or \
            "no ops-done" not in again.get("reason", ""):
        problems.append(f"the replay: exit {status}, verdict {again and again['verdict']} "
                        f"({again and again.get('reason')}): expected 3, crash (no ops-done)")


def main():
    problems = []
    os.makedirs(OUT, exist_ok=True)
    work = tempfile.mkdtemp(prefix="prog-det-", dir=OUT)
    check_deterministic(work, problems)
    check_replay(work, problems)
    for p in problems:
        print(f"prog_determinism_test: {p}", file=sys.stderr)
    if not problems:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
