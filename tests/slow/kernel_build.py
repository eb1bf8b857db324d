#!/usr/bin/python3
"""Slow test (meson suite 'slow', not in `faultline check`): guest kernels
built from source by `faultline kernel build`.

  kernel_build.py boot [SRC]     build SRC (default debian:6.1), then run
                                 smoke, syncblk-task, syncblk-irq,
                                 nvme-write-error and write-error-redirty-sync
                                 on it (--kernel NAME; a scenario the kernel
                                 lacks a feature for must be refused before
                                 boot, one line), and smoke --restore
  kernel_build.py rebuild [SRC]  after SRC is built, build it again with a
                                 patch touching one mm/ file; prints the time
                                 and checks only that file was compiled again

A real kernel from real source, booted by a real QEMU: a cold build takes
about 10 minutes on 2 idle cores.  Exit 0 pass, 1 fail, 2 setup error.
"""

import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import FAULTLINE, OUT, exit_with, verdict  # noqa: E402

from faultline.kernel import sources, store


def build(src, *extra):
    """(exit status, bzImage path, stderr, seconds) of one kernel build."""
    cmd = [FAULTLINE, "kernel", "build", src, *extra]
    print("+", " ".join(cmd), flush=True)
    t0 = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(r.stderr)
    return r.returncode, r.stdout.strip(), r.stderr, time.monotonic() - t0


def name_of(src):
    return "debian-" + src.split(":", 1)[1] if src.startswith("debian:") else \
        os.path.basename(os.path.realpath(src))


def boot(src):
    problems = []
    rc, image, _, secs = build(src)
    if rc != 0:
        return verdict(f"kernel build {src}", [f"exit {rc}"])
    print(f"# {src}: built in {secs:.0f}s: {image}")
    name = name_of(src)
    # --kernel NAME resolves to the entry's image and modules tree
    if store.resolve(name)[0] != image:
        problems.append(f"--kernel {name} resolves to {store.resolve(name)[0]}, not {image}")
    passed, refused = [], []
    for sc, extra in (("smoke", []), ("syncblk-task", []), ("syncblk-irq", []),
                      ("nvme-write-error", []), ("write-error-redirty-sync", []),
                      ("smoke", ["--restore"])):
        cmd = [FAULTLINE, "run", sc, "--kernel", name, "--out", OUT, "--quiet", *extra]
        print("+", " ".join(cmd), flush=True)
        r = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
        sys.stderr.write(r.stderr)
        what = " ".join([sc, *extra])
        err = r.stderr.strip().splitlines()
        if r.returncode == 0:
            passed.append(what)
        elif r.returncode == 2 and len(err) == 1 and "lacks what the scenario needs" in err[0]:
            refused.append(what)        # before boot, naming the missing option
        else:
            problems.append(f"{what} on {name}: exit {r.returncode}")
    print(f"# {name}: passed: {', '.join(passed) or '-'}; refused before boot: "
          f"{', '.join(refused) or '-'}")
    return verdict(f"kernel {name}: {len(passed)} passed, {len(refused)} refused", problems)


def rebuild(src):
    rc, image, _, _ = build(src)          # the base build (a cache hit when done)
    if rc != 0:
        return verdict(f"kernel build {src}", [f"exit {rc}"])
    tree = sources.get_source(src).tree
    with open(os.path.join(tree, "mm", "swapfile.c")) as f:
        text = f.read()
    with tempfile.TemporaryDirectory() as tmp:
        # a one-line change of mm/swapfile.c, as a patch (the key changes, so
        # it is built; the build tree is the one the base build left)
        stamp = f"/* faultline rebuild test {time.time_ns()} */\n"
        a, b = os.path.join(tmp, "a", "mm"), os.path.join(tmp, "b", "mm")
        os.makedirs(a)
        os.makedirs(b)
        with open(os.path.join(a, "swapfile.c"), "w") as f:
            f.write(text)
        with open(os.path.join(b, "swapfile.c"), "w") as f:
            f.write(stamp + text)
        diff = subprocess.run(["diff", "-u", "a/mm/swapfile.c", "b/mm/swapfile.c"], cwd=tmp,
                              capture_output=True, text=True).stdout
        patch = os.path.join(tmp, "touch.diff")
        with open(patch, "w") as f:
            f.write(diff)
        name = name_of(src) + "-touched"
        rc, image2, err, secs = build(src, "--patch", patch, "--name", name)
    problems = []
    if rc != 0:
        return verdict(f"rebuild {src}", [f"exit {rc}"])
    print(f"# {src}: rebuild after touching mm/swapfile.c: {secs:.0f}s (target 90s)")
    if image2 == image:
        problems.append("the touched build has the same entry as the base build")
    with open(os.path.join(os.path.dirname(image2), "build.log")) as f:
        compiled = re.findall(r"^\s+CC\s+(\S+\.o)$", f.read(), re.M)
    print(f"# compiled again: {' '.join(compiled)}")
    if "mm/swapfile.o" not in compiled:
        problems.append("mm/swapfile.o was not compiled again")
    # swapfile.o, and the objects every link regenerates (version, kallsyms)
    others = [o for o in compiled if o != "mm/swapfile.o" and not o.startswith(
        ("init/version", ".tmp_", "kernel/configs", "arch/x86/boot/", "usr/"))]
    if len(others) > 3:
        problems.append(f"{len(others)} other objects compiled again: {' '.join(others[:10])}")
    return verdict(f"rebuild {src} after one mm/ file ({secs:.0f}s)", problems)


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "boot"
    src = sys.argv[2] if len(sys.argv) > 2 else "debian:6.1"
    return {"boot": boot, "rebuild": rebuild}[what](src)


if __name__ == "__main__":
    exit_with("kernel_build", main)
