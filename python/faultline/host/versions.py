"""What scripts/setup resolved and whether it must run again; file hashes and
this checkout's git description."""

import functools
import hashlib
import os
import shutil
import subprocess

from faultline import TOP
from faultline.paths import VERSIONS


def setup_hash():
    """Hash of scripts/setup: a machine set up by another version of it
    (say, before lava-dispatcher was added) is set up again."""
    return sha256(os.path.join(TOP, "scripts", "setup"))[:16]


def setup_needed():
    """Why scripts/setup must run (a missing tool, a stale setup), or None."""
    missing = [t for t in ("meson", "ninja", "cpio", "busybox", "dpkg-source",
                           "fio", "nvme", "virsh", "libvirtd", "lava-run")
               if not shutil.which(t)]
    if missing:
        return f"missing {', '.join(missing)}"
    if not os.path.exists(VERSIONS):
        return "not set up yet"
    if versions().get("SETUP_HASH") != setup_hash():
        return "scripts/setup changed"
    return None


def versions():
    """The versions scripts/setup resolved (QEMU source, kernel package...)."""
    vals = {}
    try:
        with open(VERSIONS) as f:
            for line in f:
                if "=" in line and not line.startswith("#"):
                    k, v = line.strip().split("=", 1)
                    vals[k] = v
    except OSError:
        pass
    return vals


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def git_describe():
    """The checkout's version, described once a process: the code the
    process runs, even when the checkout moves on while a long command
    (a campaign, a matrix) runs."""
    try:
        return subprocess.run(["git", "-C", TOP, "describe", "--always", "--dirty", "--tags"],
                              capture_output=True, text=True, timeout=10).stdout.strip() or "?"
    except (OSError, subprocess.TimeoutExpired):
        return "?"
