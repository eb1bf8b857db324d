#!/usr/bin/python3
"""vm test of `faultline prog c` and `prog minimize` (meson suite 'vm'): a
program whose own rule corrupts swap writes fails `prog run` with a
`content` finding; its reproducer, built with gcc -static and booted by
the printed qemu.sh in faultline's guest image, fails the same way (exit
1, `finding content`, the rule's corrupt hits in the fault log); `prog
minimize` of the run writes minimized.prog, no bigger, that `prog run`
fails with a `content` finding again.

FAULTLINE_KERNEL / FAULTLINE_MODULES select the kernel.  Exit 0 pass,
1 fail, 2 setup error.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import FAULTLINE, OUT, kernel_args  # noqa: E402

# Half of a 32M object in a 16M cgroup goes to NVMe; its first 64 swap
# writes are corrupted by the program's own rule.  A no-op `sleep` and a
# second object give minimize something to take away.
PROGRAM = """\
program v1
swap s0 nvme size=64M
cgroup g memory.max=16M
rule s0 bad: write count=64 corrupt
anon spare 1M
write spare 0 1M v=3
sleep 10
anon a 32M cgroup=g
write a 0 32M v=1
reclaim g 16M
read a 0 32M
read spare 0 1M
munmap a
"""
RUN_TIMEOUT_S = 600
QEMU_TIMEOUT_S = 600
MINIMIZE_TIMEOUT_S = 1800


def run(argv, timeout, **kw):
    print("+", " ".join(argv), flush=True)
    res = subprocess.run(argv, stdout=subprocess.PIPE, text=True, timeout=timeout, **kw)
    sys.stdout.write(res.stdout)
    return res


def prog_run(target, out):
    res = run([FAULTLINE, "prog", "run", target, "--out", out, *kernel_args()], RUN_TIMEOUT_S)
    dirs = sorted(os.path.join(out, d) for d in os.listdir(out))
    return res.returncode, dirs[-1] if dirs else None


def result(rundir, name):
    with open(os.path.join(rundir, "programs", name, "result.json")) as f:
        return json.load(f)


def check_reproducer(prog, work, problems):
    out = os.path.join(work, "c")
    res = run([FAULTLINE, "prog", "c", prog, "--out", out, *kernel_args()], 300)
    if res.returncode != 0:
        problems.append(f"prog c exited {res.returncode}")
        return
    steps = res.stdout[res.stdout.index("# build,"):].splitlines()
    # The printed steps, as a user would paste them (the boot under a timeout).
    script = "\n".join(["set -e"] + [s.replace("./qemu.sh", f"timeout {QEMU_TIMEOUT_S} ./qemu.sh")
                                     for s in steps if s and not s.startswith(("#", "cat "))])
    if "gcc -static -O2 -pthread repro.c -o repro" not in script or "qemu.sh" not in script:
        problems.append(f"prog c printed no build or boot step: {steps}")
        return
    booted = run(["sh", "-c", script], QEMU_TIMEOUT_S + 300)
    if booted.returncode != 0:
        problems.append(f"the printed steps exited {booted.returncode}")
    try:
        with open(os.path.join(out, "ktap.log"), errors="replace") as f:
            ktap = f.read()
        with open(os.path.join(out, "faults-nvme0.jsonl")) as f:
            faults = [json.loads(ln) for ln in f if ln.strip()]
    except OSError as e:
        problems.append(f"the reproducer's boot left no log: {e}")
        return
    print("\n".join(ln for ln in ktap.splitlines() if not ln.startswith("at "))[-3000:])
    if "# repro exit 1" not in ktap or "\nfinding content " not in ktap:
        problems.append("the reproducer did not fail with a content finding (exit 1)")
    corrupted = [f for f in faults if f.get("rule") == "bad"]
    gate = [f["rule"] for f in faults if f.get("rule", "").startswith("_gate")]
    if not corrupted or gate != ["_gate_on", "_gate_off"]:
        problems.append(f"fault log: {len(corrupted)} corrupt hits, gates {gate}: expected "
                        ">0 and _gate_on, _gate_off")


def check_minimize(rundir, work, problems):
    res = run([FAULTLINE, "prog", "minimize", rundir, *kernel_args()], MINIMIZE_TIMEOUT_S)
    small = os.path.join(rundir, "programs", "corrupt", "minimized.prog")
    if res.returncode != 0 or not os.path.isfile(small):
        problems.append(f"prog minimize exited {res.returncode}, minimized.prog "
                        f"{'written' if os.path.isfile(small) else 'missing'}")
        return
    with open(small) as f:
        text = f.read()
    statements = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    if len(statements) >= len(PROGRAM.splitlines()) or "rule s0" not in text:
        problems.append(f"minimized.prog has {len(statements)} statements (of "
                        f"{len(PROGRAM.splitlines())}) or lost its rule:\n{text}")
    status, again = prog_run(small, os.path.join(work, "again"))
    r = result(again, "minimized") if again else None
    if status != 1 or not r or not any(f["check"] == "content" for f in r["findings"]):
        problems.append(f"prog run minimized.prog exited {status}, expected 1 with a "
                        "content finding")


def main():
    problems = []
    os.makedirs(OUT, exist_ok=True)
    work = tempfile.mkdtemp(prefix="prog-repro-", dir=OUT)
    prog = os.path.join(work, "corrupt.prog")
    with open(prog, "w") as f:
        f.write(PROGRAM)
    status, rundir = prog_run(prog, os.path.join(work, "run"))
    r = result(rundir, "corrupt") if rundir else None
    if status != 1 or not r or not any(f["check"] == "content" for f in r["findings"]):
        problems.append(f"prog run exited {status}, expected 1 with a content finding")
        return report(problems)
    check_reproducer(prog, work, problems)
    check_minimize(rundir, work, problems)
    if not problems:
        shutil.rmtree(work, ignore_errors=True)
    return report(problems)


def report(problems):
    for p in problems:
        print(f"prog_repro_test: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
