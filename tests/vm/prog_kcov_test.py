#!/usr/bin/python3
"""vm test of progexec's coverage and offers (meson suite 'vm'): two
different programs in one boot of the kcov kernel (`faultline kernel build
debian:6.12 --kcov`, named debian-6.12-kcov) must pass, each with a
non-empty `cover` in its result.json, the two sets different, and run.json
must hold the guest's kcov=1 and its offers.

Skipped (exit 77) when that kernel is not built, or was built without
AF_UNIX (the executor's processes need it).  Exit 0 pass, 1 fail.
"""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import FAULTLINE, OUT  # noqa: E402

from faultline.kernel import store  # noqa: E402

KERNEL = "debian-6.12-kcov"
RUN_TIMEOUT_S = 900
SKIP = 77
# Anonymous memory pushed to an NVMe disk by its cgroup's limit and read
# back; shared memory through zswap to a syncblk disk, paged out, swapped
# off: different kernel paths, so different edges.
PROGRAMS = {
    "anon-nvme": """program v1
swap s0 nvme size=64M
cgroup g memory.max=8M
anon a 16M cgroup=g
write a 0 16M v=1
reclaim g 8M
read a 0 16M
""",
    "memfd-zswap": """program v1
swap s0 syncblk completion=irq size=64M
knob zswap.enabled=Y
cgroup g memory.max=16M
memfd m 8M map=shared cgroup=g
write m 0 8M v=1
madvise m 0 8M pageout
read m 0 8M
swapoff s0
""",
}


def skip_reason():
    entry = os.path.join(store.KCACHE, "names", KERNEL)
    try:
        with open(os.path.join(entry, "config")) as f:
            config = f.read().splitlines()
    except OSError:
        return (f"no kernel named {KERNEL} (`faultline kernel build debian:6.12 --kcov` "
                "builds it)")
    if "CONFIG_KCOV=y" not in config:
        return f"{KERNEL} has no CONFIG_KCOV"
    if "CONFIG_UNIX=y" not in config:
        return (f"{KERNEL} was built without CONFIG_UNIX (progexec needs AF_UNIX): rebuild "
                "it with `faultline kernel build debian:6.12 --kcov`")
    return None


def main():
    why = skip_reason()
    if why:
        print(f"prog_kcov_test: SKIP: {why}")
        return SKIP
    src = tempfile.mkdtemp(prefix="kcov-progs-")
    for name, text in PROGRAMS.items():
        with open(os.path.join(src, name + ".prog"), "w") as f:
            f.write(text)
    os.makedirs(OUT, exist_ok=True)
    out = tempfile.mkdtemp(prefix="prog-kcov-", dir=OUT)
    res = subprocess.run([FAULTLINE, "prog", "run", src, "--kernel", KERNEL, "--out", out],
                         stdout=subprocess.PIPE, text=True, timeout=RUN_TIMEOUT_S)
    sys.stdout.write(res.stdout)
    problems = []
    if res.returncode != 0:
        problems.append(f"prog run exited {res.returncode}, expected 0")
    dirs = [os.path.join(out, d) for d in os.listdir(out)]
    if len(dirs) != 1:
        return report(problems + ["no run directory"])
    with open(os.path.join(dirs[0], "run.json")) as f:
        meta = json.load(f)
    offers = meta.get("offers") or {}
    if meta.get("kcov") is not True:
        problems.append(f"run.json kcov is {meta.get('kcov')!r}, expected true")
    for key in ("knobs", "zswap.compressor", "thp.enabled", "cgroup.files"):
        if not offers.get(key):
            problems.append(f"run.json offers has no {key}: {sorted(offers)}")
    if not isinstance(offers.get("cpus"), int) or offers["cpus"] < 1 or \
            not isinstance(offers.get("memory"), int) or offers["memory"] < 64 << 20:
        problems.append(f"offers cpus {offers.get('cpus')!r}, memory {offers.get('memory')!r}")
    covers = {}
    for name in PROGRAMS:
        try:
            with open(os.path.join(dirs[0], "programs", name, "result.json")) as f:
                r = json.load(f)
        except OSError:
            problems.append(f"{name}: not run")
            continue
        cover = r.get("cover", [])
        print(f"{name}: {r['verdict']}, {len(cover)} edges, stats {r.get('stats')}")
        if r["verdict"] != "pass":
            problems.append(f"{name}: {r['verdict']} {r['findings'][:2]}, expected pass")
        if not cover or r.get("edges") != len(cover) or len(set(cover)) != len(cover):
            problems.append(f"{name}: cover of {len(cover)} edges (edges {r.get('edges')}), "
                            "expected a non-empty set")
        covers[name] = set(cover)
    if len(covers) == 2:
        a, b = covers.values()
        if a == b:
            problems.append("the two programs have the same cover")
        else:
            print(f"cover: {len(a & b)} edges shared, {len(a - b)} and {len(b - a)} "
                  "of one program only")
    return report(problems)


def report(problems):
    for p in problems:
        print(f"prog_kcov_test: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
