"""`faultline check`: build everything, then the meson suites (unit, qtest,
asan, vm)."""

import glob
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from faultline import TOP
from faultline.build.builds import build_all, qemu_dir
from faultline.errors import SetupError
from faultline.host import procs, scratchdirs
from faultline.host.messages import say
from faultline.run import aborted
from faultline.vm import libvirt


def start_libvirt():
    """The libvirt vm tests need virtlogd and libvirtd; on a fresh machine
    (no systemd) nothing runs them yet.  A failure is the tests' to report."""
    try:
        started = libvirt.ensure_daemons(libvirt.DEFAULT_URI)
    except SetupError as e:
        say(f"warning: {e}")
        return
    if started:
        say(f"started {' and '.join(started)} for the libvirt tests")


# meson.build's suites (check runs the first four by default).
SUITES = ("unit", "qtest", "asan", "vm", "slow", "fuzz")
CHECK_MARKER = "FAULTLINE_CHECK"
# Started once for the libvirt tests and meant to stay.
DAEMONS = {"libvirtd", "virtlogd", "virtlockd", "virtqemud"}


def scratch_dirs():
    return {d for base in {*scratchdirs.scratch_bases(), tempfile.gettempdir()}
            for d in glob.glob(os.path.join(base, scratchdirs.PREFIX + "*"))}


def _marked(marker):
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{entry}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if marker.encode() in env and comm not in DAEMONS and \
                (procs.start_ticks(int(entry)) or (0, "X"))[1] not in ("Z", "X"):
            pids.append((int(entry), comm))
    return pids


def leftovers(scratch_before, marker, grace_s=5.0):
    """What the tests left: processes still carrying @marker (after
    @grace_s for a QEMU that is still exiting), and scratch directories made
    since @scratch_before that the next launcher's sweep would not remove
    (no owner.json: nobody ever will).  Both are removed once reported."""
    deadline = time.monotonic() + grace_s
    while (running := _marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.5)
    found = [f"process {pid} ({comm}) still runs" for pid, comm in running]
    for pid, _ in running:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    aborted.sweep()
    for d in sorted(scratch_dirs() - scratch_before):
        if os.path.isdir(d) and scratchdirs.read_owner(d) is None:
            found.append(f"scratch directory {d} has no owner.json")
            shutil.rmtree(d, ignore_errors=True)
    return found


def check(suites, junit=None, kernel=None, modules=None):
    """Build, compile the meson tree, run @suites; prints phase times and
    `N passed, N failed`.  Exit status 0 only when something ran and passed."""
    unknown = [s for s in suites.split(",") if s and s not in SUITES]
    if unknown or not suites.strip(","):
        raise SetupError(f"--suite {suites!r}: choose from {','.join(SUITES)}")
    t0 = time.monotonic()
    if kernel:
        # The vm tests read these (tests/vm/vm_test.py).
        os.environ["FAULTLINE_KERNEL"] = os.path.realpath(kernel)
        if modules:
            os.environ["FAULTLINE_MODULES"] = os.path.realpath(modules)
    build_all(kernel, modules)
    if "qtest" in suites.split(","):
        # `run` builds QEMU alone; the qtests are check's (tests/run-qtest
        # would build them too, with every qtest of the suite waiting on it).
        qemu_dir(qtests=True)
    t1 = time.monotonic()
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
    wanted = [x for x in suites.split(",") if x]
    # The ASAN build takes minutes of one core while the vm tests, one TCG
    # guest at a time, leave the other mostly idle: build it beside them and
    # run the asan suite last (its asan-build test is then a cache hit).
    asan_build = None
    if "asan" in wanted and len(wanted) > 1:
        log = open(os.path.join(build, "asan-build.log"), "w")
        asan_build = subprocess.Popen(
            ["nice", "-n", "19", os.path.join(TOP, "scripts", "build-qemu"),
             "--variant", "asan", "--qtests"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        runs = [[x for x in wanted if x != "asan"], ["asan"]]
    else:
        runs = [wanted]
    passed = failed = skipped = 0
    junits = []
    scratch_before = scratch_dirs()
    # Every process the tests start inherits it: whatever still carries it
    # once meson is done was left behind (libvirt's QEMUs do not inherit it:
    # the libvirt tests look for their domains themselves).
    marker = f"{CHECK_MARKER}={os.getpid()}-{time.time_ns()}"
    env = dict(os.environ, **dict([marker.split("=", 1)]))
    for i, group in enumerate(runs):
        if group == ["asan"] and asan_build is not None:
            say("waiting for the ASAN build (log: build/asan-build.log)")
            asan_build.wait()
        logbase = "testlog" if i == 0 else "testlog-" + "-".join(group)
        cmd = ["meson", "test", "-C", build, "--print-errorlogs", "--num-processes", "2",
               "--logbase", logbase]
        for s in group:
            cmd += ["--suite", s]
        # meson stops its tests on SIGTERM: passed on if the launcher is stopped.
        procs.run_child(cmd, env=env)
        junits.append(os.path.join(build, "meson-logs", logbase + ".junit.xml"))
        with open(os.path.join(build, "meson-logs", logbase + ".json")) as f:
            for line in f:
                res = json.loads(line)["result"]
                if res in ("OK", "EXPECTEDFAIL"):
                    passed += 1
                elif res == "SKIP":
                    skipped += 1
                else:
                    failed += 1
    t4 = time.monotonic()
    leaks = leftovers(scratch_before, marker)
    for line in leaks:
        print(f"leak: {line}")
    if leaks:
        failed += 1
    else:
        passed += 1
    print(f"{'not ok' if leaks else 'ok'} - the tests left no process and no scratch "
          f"directory behind")
    if junit:
        shutil.copy(junits[0], junit)
        if len(junits) > 1:
            base, ext = os.path.splitext(junit)
            shutil.copy(junits[1], base + "-asan" + ext)
    asan = ""
    if asan_build is not None:
        with open(os.path.join(build, "asan-build.log")) as f:
            built = [ln for ln in f if "QEMU built in" in ln or "cache hit" in ln]
        asan = f" (ASAN build beside them: {built[-1].split(': ', 1)[1].strip()})" if built else ""
    print(f"phases: setup and build {t1 - t0:.0f}s, libvirt {t2 - t1:.0f}s, compile {t3 - t2:.0f}s, "
          f"tests {t4 - t3:.0f}s{asan}, total {t4 - t0:.0f}s")
    print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return 0 if failed == 0 and passed > 0 else 1
