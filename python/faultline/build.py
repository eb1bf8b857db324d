"""Building what a run needs: QEMU and the guest image (scripts/build-qemu,
scripts/build-guest, both cached by input hash), and the machine setup."""

import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, replace

from . import TOP
from .errors import SetupError

CACHE = os.environ.get("FAULTLINE_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "faultline")
VERSIONS = os.path.join(CACHE, "versions.env")
# -L directories after our own share/ (option ROMs built with QEMU):
# SeaBIOS and iPXE from Debian.  Nothing comes from /usr/share/qemu.
FIRMWARE_DIRS = ["/usr/share/seabios", "/usr/lib/ipxe/qemu"]


def say(msg):
    print(f"faultline: {msg}", file=sys.stderr, flush=True)


@dataclass
class Builds:
    """One QEMU build and one guest image, both directories in the cache."""
    qemu_dir: str
    guest_dir: str

    @property
    def qemu_binary(self):
        return os.path.join(self.qemu_dir, "bin", "qemu-system-x86_64")

    @property
    def firmware_dirs(self):
        return [os.path.join(self.qemu_dir, "share"), *FIRMWARE_DIRS]

    @property
    def kernel(self):
        return os.path.join(self.guest_dir, "vmlinuz")

    @property
    def initramfs(self):
        return os.path.join(self.guest_dir, "initramfs.cpio.gz")

    def for_scenario(self, sc, kernel=None, modules=None):
        """The guest image with the scenario's optional tools ([vm] tools)."""
        if not sc.vm.tools:
            return self
        return replace(self, guest_dir=guest_dir(kernel, modules, sc.vm.tools))


def run_script(name, *args, capture=False):
    """Run scripts/NAME; its errors are already one-line messages."""
    cmd = [os.path.join(TOP, "scripts", name), *args]
    res = subprocess.run(cmd, stdout=subprocess.PIPE if capture else None, text=True)
    if res.returncode != 0:
        raise SetupError(f"{name} failed (exit {res.returncode})")
    return res.stdout.strip().splitlines()[-1] if capture else None


def setup_hash():
    """Hash of scripts/setup: a machine set up by another version of it
    (say, before lava-dispatcher was added) is set up again."""
    return sha256(os.path.join(TOP, "scripts", "setup"))[:16]


def ensure_setup():
    """Bootstrap: run scripts/setup when its recorded versions or tools are
    missing, or when scripts/setup changed since it ran."""
    missing = [t for t in ("meson", "ninja", "cpio", "busybox", "dpkg-source",
                           "fio", "nvme", "virsh", "libvirtd", "lava-run")
               if not shutil.which(t)]
    stale = versions().get("SETUP_HASH") != setup_hash()
    if os.path.exists(VERSIONS) and not missing and not stale:
        return
    say("setting up this machine (scripts/setup)" +
        (f": missing {', '.join(missing)}" if missing else
         ": scripts/setup changed" if stale and os.path.exists(VERSIONS) else ""))
    run_script("setup")


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


def qemu_dir():
    return run_script("build-qemu", "--print-dir", capture=True)


def guest_dir(kernel=None, modules=None, tools=()):
    """The guest image for @kernel and @modules (or Debian's), with @tools."""
    gargs = ["--print-dir"]
    if kernel:
        gargs += ["--kernel", kernel]
        if modules:
            gargs += ["--modules", modules]
    if tools:
        gargs += ["--tools", ",".join(tools)]
    return run_script("build-guest", *gargs, capture=True)


def build_all(kernel=None, modules=None, quiet=False):
    """QEMU and the guest image (for @kernel and @modules, or Debian's)."""
    ensure_setup()
    t0 = time.monotonic()
    qemu = qemu_dir()
    t1 = time.monotonic()
    guest = guest_dir(kernel, modules)
    t2 = time.monotonic()
    if not quiet:
        say(f"build: qemu {t1 - t0:.1f}s, guest {t2 - t1:.1f}s")
    return Builds(qemu, guest)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def git_describe():
    try:
        return subprocess.run(["git", "-C", TOP, "describe", "--always", "--dirty", "--tags"],
                              capture_output=True, text=True, timeout=10).stdout.strip() or "?"
    except (OSError, subprocess.TimeoutExpired):
        return "?"
