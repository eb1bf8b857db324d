"""`faultline check`: build everything, then the meson suites (unit, qtest, vm)."""

import json
import os
import shutil
import subprocess
import time

from . import TOP
from .build import build_all, ensure_setup, say
from .errors import SetupError


def start_libvirt():
    """The libvirt vm tests need virtlogd and libvirtd; on a fresh machine
    (no systemd) nothing runs them yet.  A failure is the tests' to report."""
    from . import libvirt
    try:
        started = libvirt.ensure_daemons(libvirt.DEFAULT_URI)
    except SetupError as e:
        say(f"warning: {e}")
        return
    if started:
        say(f"started {' and '.join(started)} for the libvirt tests")


def check(suites, junit=None, kernel=None, modules=None):
    """Build, compile the meson tree, run @suites; prints phase times and
    `N passed, N failed`.  Exit status 0 only when something ran and passed."""
    t0 = time.monotonic()
    ensure_setup()
    t1 = time.monotonic()
    if kernel:
        # The vm tests read these (tests/vm/vm_test.py).
        os.environ["FAULTLINE_KERNEL"] = os.path.realpath(kernel)
        if modules:
            os.environ["FAULTLINE_MODULES"] = os.path.realpath(modules)
    build_all(kernel, modules)
    if "vm" in suites.split(","):
        start_libvirt()
    t2 = time.monotonic()
    build = os.path.join(TOP, "build")
    if not os.path.exists(os.path.join(build, "build.ninja")):
        subprocess.run(["meson", "setup", build, TOP], check=True, stdout=subprocess.DEVNULL)
    r = subprocess.run(["meson", "compile", "-C", build], stdout=subprocess.PIPE, text=True)
    if r.returncode:
        print(r.stdout)
        raise SetupError("meson compile failed")
    t3 = time.monotonic()
    cmd = ["meson", "test", "-C", build, "--print-errorlogs", "--num-processes", "2"]
    for s in suites.split(","):
        if s:
            cmd += ["--suite", s]
    subprocess.run(cmd)
    t4 = time.monotonic()
    if junit:
        shutil.copy(os.path.join(build, "meson-logs", "testlog.junit.xml"), junit)
    passed = failed = skipped = 0
    with open(os.path.join(build, "meson-logs", "testlog.json")) as f:
        for line in f:
            res = json.loads(line)["result"]
            if res in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif res == "SKIP":
                skipped += 1
            else:
                failed += 1
    print(f"phases: setup {t1 - t0:.0f}s, build {t2 - t1:.0f}s, compile {t3 - t2:.0f}s, "
          f"tests {t4 - t3:.0f}s, total {t4 - t0:.0f}s")
    print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return 0 if failed == 0 and passed > 0 else 1
