"""Building what a run needs: QEMU and the guest image (scripts/build-qemu,
scripts/build-guest, both cached by input hash), and the machine setup."""

import concurrent.futures
import os
import subprocess
import time
from dataclasses import dataclass, replace

from faultline import TOP
from faultline.errors import SetupError
from faultline.host import procs
from faultline.host.messages import say
from faultline.host.versions import git_describe, setup_needed
from faultline.paths import CACHE, FIRMWARE_DIRS


@dataclass
class Builds:
    """One QEMU build and one guest image, both directories in the cache;
    the kernel and modules the image was built for (None: Debian's), and
    the image without a scenario's extra tools."""
    qemu_dir: str
    guest_dir: str
    kernel_src: str | None = None
    modules_src: str | None = None
    base_guest_dir: str | None = None
    tools: tuple = ()

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

    def for_scenario(self, sc):
        """The guest image for scenario @sc: this one with the scenario's
        optional tools ([vm] tools), for the same kernel and modules.  The
        spec builder applies it, so every command boots what the scenario
        needs."""
        tools = tuple(sc.vm.tools)
        if tools == self.tools:
            return self
        base = self.base_guest_dir or self.guest_dir
        if not tools:
            return replace(self, guest_dir=base, base_guest_dir=base, tools=())
        return replace(self, base_guest_dir=base, tools=tools,
                       guest_dir=guest_dir(self.kernel_src, self.modules_src, tools))


def run_script(name, *args, capture=False):
    """Run scripts/NAME; its errors are already one-line messages.  A
    stopped launcher passes SIGTERM on and waits, a killed one leaves it
    SIGTERM; the scripts stop their long steps with it (fl_forward)."""
    cmd = [os.path.join(TOP, "scripts", name), *args]
    res = procs.run_captured(cmd, stdout=subprocess.PIPE if capture else None, text=True)
    if res.returncode != 0:
        raise SetupError(f"{name} failed (exit {res.returncode})")
    return res.stdout.strip().splitlines()[-1] if capture else None


def qemu_dir(variant="default", qtests=False):
    """The cached QEMU install directory (built if needed); @variant "asan"
    is the clang ASAN+UBSAN build (scripts/build-qemu --variant).  With
    @qtests its qtest/ holds the qtest binaries too (built now if missing,
    into the same directory: a run needs only qemu-system-x86_64)."""
    vargs = ["--variant", variant] if variant != "default" else []
    if qtests:
        vargs.append("--qtests")
    return run_script("build-qemu", *vargs, "--print-dir", capture=True)


def qemu_key():
    """The cache key of the QEMU build this checkout makes (its directory's
    name, run.json's qemu_build), without building; "" when the QEMU
    source is not fetched yet."""
    try:
        return subprocess.run([os.path.join(TOP, "scripts", "build-qemu"), "--print-key"],
                              capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


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
    """Set the machine up if needed, then QEMU and the guest image (for
    @kernel and @modules, or Debian's).

    On a fresh machine the QEMU build starts as soon as its own prerequisites
    are in (scripts/setup --only qemu); the rest of the setup (libvirt, LAVA,
    kernel headers) and then the guest image run beside its compile."""
    t0 = time.monotonic()
    why = setup_needed()
    if why:
        say(f"setting up this machine (scripts/setup): {why}")
        run_script("setup", "--only", "qemu")
    t_pre = time.monotonic() - t0
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        guest_job = pool.submit(_timed, _setup_then_guest, bool(why), kernel, modules)
        qemu, t_qemu = _timed(qemu_dir)
        guest, t_guest = guest_job.result()
    if not quiet:
        pre = f"setup for qemu {t_pre:.1f}s, " if why else ""
        say(f"build: {pre}qemu {t_qemu:.1f}s, {'setup + ' if why else ''}guest "
            f"{t_guest:.1f}s (side by side), wall {time.monotonic() - t0:.1f}s")
    return Builds(qemu, guest, kernel, modules)


def _setup_then_guest(setup, kernel, modules):
    if setup:
        run_script("setup")
    return guest_dir(kernel, modules)


def _timed(fn, *args):
    t0 = time.monotonic()
    return fn(*args), time.monotonic() - t0


def version_lines():
    """`faultline --version`: this checkout, the QEMU source and the key of
    its build in the cache (nothing is built)."""
    lines = [f"faultline {git_describe()}"]
    try:
        with open(os.path.join(CACHE, "src", "download", "VERSION")) as f:
            ver, suite = (f.read().split() + ["?", "?"])[:2]
        lines.append(f"QEMU {ver} (Debian {suite})")
        key = qemu_key()
        built = key and os.path.exists(os.path.join(CACHE, "qemu", key, "bin",
                                                     "qemu-system-x86_64"))
        lines.append(f"QEMU build cache key {key or '?'} "
                     f"({'built' if built else 'not built yet'}, in {CACHE}/qemu)")
    except (OSError, subprocess.TimeoutExpired):
        lines.append("QEMU source not fetched yet (scripts/faultline setup)")
    return lines
