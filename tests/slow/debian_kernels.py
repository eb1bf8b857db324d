#!/usr/bin/python3
"""Slow test (meson suite 'slow', not in `faultline check`): the guest side
on Debian's binary kernels other than the default 6.12.

- 6.1 (bookworm): smoke, syncblk-task, syncblk-irq and nvme-write-error
  pass (the syncblk module built against Debian's headers, unpacked with
  dpkg-deb -x, not installed); write-error-redirty-sync is refused before
  boot: 6.1 has no zswap shrinker.
- 7.2 (unstable): smoke and nvme-write-error pass; syncblk-task is refused
  before boot: its modules need the gcc-16 it was built with.

The packages are downloaded once into the faultline cache (apt-get
download; 7.2 through a private apt list of unstable).  Exit 77 (skip) when
the archive cannot be reached.
"""

import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import FAULTLINE, TOP, verdict  # noqa: E402

from faultline.paths import CACHE

OUT = os.path.join(TOP, "build", "debian-kernel-runs")
ROOT = os.path.join(CACHE, "debian-kernels")


def apt(args, cwd=None, lists=None):
    """apt-get/apt-cache with the host's sources, or with a private
    configuration in directory @lists (no binary cache: the host's stays
    the host's)."""
    opts = []
    if lists:
        opts = ["-o", f"Dir::Etc::sourcelist={lists}/sources.list",
                "-o", "Dir::Etc::sourceparts=/nonexistent",
                "-o", f"Dir::State::Lists={lists}/lists",
                "-o", "Dir::Cache::pkgcache=", "-o", "Dir::Cache::srcpkgcache="]
    return subprocess.run([args[0], *opts, *args[1:]], cwd=cwd, capture_output=True,
                          text=True)


def newest(pattern, lists=None):
    res = apt(["apt-cache", "search", "--names-only", pattern], lists=lists)
    names = sorted((ln.split()[0] for ln in res.stdout.splitlines()),
                   key=lambda n: [int(x) if x.isdigit() else x
                                  for x in n.replace("-", ".").replace("+", ".").split(".")])
    return names[-1] if names else None


def unpack(name, packages, lists=None):
    """Download @packages and unpack them into ROOT/@name (once)."""
    dest = os.path.join(ROOT, name)
    if os.path.exists(os.path.join(dest, ".done")):
        return dest
    os.makedirs(os.path.join(dest, "debs"), exist_ok=True)
    res = apt(["apt-get", "download", *packages], cwd=os.path.join(dest, "debs"), lists=lists)
    if res.returncode != 0:
        return None
    for deb in glob.glob(os.path.join(dest, "debs", "*.deb")):
        subprocess.run(["dpkg-deb", "-x", deb, dest], check=True)
    open(os.path.join(dest, ".done"), "w").close()
    return dest


def debian_61():
    img = newest(r"^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$")
    if not img:
        return None
    abi = img[len("linux-image-"):-len("-unsigned")]
    common = abi[:-len("-amd64")] + "-common"
    dest = unpack("6.1-" + abi, [img, f"linux-headers-{abi}", f"linux-headers-{common}",
                                 "linux-kbuild-6.1"])
    if not dest:
        return None
    return (os.path.join(dest, "boot", f"vmlinuz-{abi}"),
            os.path.join(dest, "lib", "modules", abi))


def debian_72():
    lists = os.path.join(ROOT, "apt-unstable")
    os.makedirs(os.path.join(lists, "lists", "partial"), exist_ok=True)
    with open(os.path.join(lists, "sources.list"), "w") as f:
        f.write("deb http://deb.debian.org/debian unstable main\n")
    if apt(["apt-get", "update", "-qq"], lists=lists).returncode != 0:
        return None
    img = newest(r"^linux-image-7\.2\.[0-9]+\+deb[0-9]+-amd64$", lists)
    if not img:
        return None
    abi = img[len("linux-image-"):]
    ver = abi[:-len("-amd64")]
    dest = unpack("7.2-" + abi, [f"linux-binary-{abi}", f"linux-modules-{abi}",
                                 f"linux-headers-{abi}", f"linux-headers-{ver}-common",
                                 f"linux-kbuild-{ver}"], lists)
    if not dest:
        return None
    mods = os.path.join(dest, "usr", "lib", "modules", abi)
    return os.path.join(mods, "vmlinuz"), mods


def run(scenario, kernel, modules):
    # A loaded host slows TCG several times over (syncblk-task on 6.1: 301 s
    # beside a busy CI, 50 s idle): the scenarios' own timeouts are for idle.
    cmd = [FAULTLINE, "run", scenario, "--kernel", kernel, "--modules", modules,
           "--out", OUT, "--quiet", "--timeout", "900s"]
    print("+", " ".join(cmd), flush=True)
    res = subprocess.run(cmd, capture_output=True, text=True)
    print(res.stdout + res.stderr, flush=True)
    return res


def main():
    os.makedirs(OUT, exist_ok=True)
    kernels = {"6.1": debian_61(), "7.2": debian_72()}
    if not all(kernels.values()):
        print(f"SKIP: Debian kernel packages not reachable: {kernels}")
        return 77
    plan = {
        "6.1": {"smoke": 0, "syncblk-task": 0, "syncblk-irq": 0, "nvme-write-error": 0,
                "write-error-redirty-sync": "CONFIG_ZSWAP_SHRINKER_DEFAULT_ON unknown"},
        "7.2": {"smoke": 0, "nvme-write-error": 0, "syncblk-task": "built with gcc-16"},
    }
    problems = []
    for ver, scenarios in plan.items():
        kernel, modules = kernels[ver]
        for sc, want in scenarios.items():
            res = run(sc, kernel, modules)
            if want == 0 and res.returncode != 0:
                problems.append(f"{ver} {sc}: exit {res.returncode}")
            elif want != 0 and (res.returncode != 2 or want not in res.stderr
                                or "running" in res.stderr):
                problems.append(f"{ver} {sc}: not refused before boot with {want!r} "
                                f"(exit {res.returncode})")
    return verdict("debian kernels", problems)


if __name__ == "__main__":
    sys.exit(main())
