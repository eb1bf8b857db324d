#!/usr/bin/env python3
"""Progress lines of long steps (python/faultline/host/step_progress.py) and
scripts/build-qemu's build step with them (fl_build in scripts/lib.sh):
the log form (one line per interval at most, then a last one) with a slow
fake ninja, the terminal form, --qtests building into the same cache
directory later, and a SIGTERM of build-qemu, or of the launcher that runs
it, leaving no ninja, compiler or progress follower behind.

build-qemu runs for real in a scratch checkout (its own copy, lib.sh, a
copy of python/) with a scratch FAULTLINE_CACHE holding a fake QEMU source
(a `configure` that writes build.ninja), and a fake ninja and make first on
PATH: ninja prints [N/M] lines slowly, starts two "compilers" (sleep) in a
process group of their own and, as the real one, stops them on SIGTERM."""

import io
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.host import procs, step_progress, stop
from test_abort import wait_gone  # noqa: E402 - this folder's sibling


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


class ProgressLines(unittest.TestCase):
    def test_log_one_line_per_interval_then_a_last_one(self):
        out, clock = io.StringIO(), Clock()
        p = step_progress.Progress("QEMU build", out, interval=30, tty=False, clock=clock)
        for i in range(1, 101):                 # 100 s, an update a second
            clock.t += 1
            p.update(f"[{i}/100] {i}%")
        p.finish("[100/100] 100%")
        lines = out.getvalue().splitlines()
        self.assertEqual(lines, ["faultline: QEMU build: [30/100] 30%, 30s",
                                 "faultline: QEMU build: [60/100] 60%, 1m00s",
                                 "faultline: QEMU build: [90/100] 90%, 1m30s",
                                 "faultline: QEMU build: done, [100/100] 100% after 1m40s"])

    def test_short_step_in_a_log_has_the_last_line_only(self):
        out, clock = io.StringIO(), Clock()
        p = step_progress.Progress("x", out, interval=30, tty=False, clock=clock)
        clock.t += 5
        p.update("a")
        p.finish("", "stopped")
        self.assertEqual(out.getvalue(), "faultline: x: stopped after 5s\n")

    def test_interval_from_the_environment(self):
        os.environ[step_progress.INTERVAL_ENV] = "2.5"
        try:
            self.assertEqual(step_progress.Progress("x", io.StringIO(), tty=False).interval, 2.5)
        finally:
            del os.environ[step_progress.INTERVAL_ENV]
        self.assertEqual(step_progress.Progress("x", io.StringIO(), tty=False).interval, 30)

    def test_terminal_line_in_place_then_cleared(self):
        out, clock = io.StringIO(), Clock()
        p = step_progress.Progress("QEMU build", out, tty=True, clock=clock)
        for i in range(1, 5):
            clock.t += 1
            p.update(f"[{i}/4] {25 * i}%")
        p.finish("[4/4] 100%")
        text = out.getvalue()
        self.assertNotIn("\n", text)
        self.assertEqual(text.split("\r\033[K"),
                         ["", "faultline: QEMU build: [1/4] 25%, 1s",
                          "faultline: QEMU build: [2/4] 50%, 2s",
                          "faultline: QEMU build: [3/4] 75%, 3s",
                          "faultline: QEMU build: [4/4] 100%, 4s", ""])

    def test_tracker(self):
        t = step_progress.Tracker()
        self.assertEqual(t.status(), "")
        for line in ("  CC      mm/swap.o", "  LD [M]  fs/x.ko", "  CC [M]  a.o", "make[1]: x"):
            t.feed(line)
        self.assertEqual(t.status(), "3 files")
        t.estimate = 6
        self.assertEqual(t.status(), "3 of ~6 files, ~50%")
        t.feed("[12/2400] Compiling C object libqemu.a.p/x.c.o")
        self.assertEqual(t.status(), "[12/2400] 0%")
        t.feed("[2400/2400] Linking target qemu-system-x86_64")
        self.assertEqual(t.status(), "[2400/2400] 100%")

    def test_following_a_growing_log(self):
        with tempfile.TemporaryDirectory() as d:
            log, out = os.path.join(d, "log"), io.StringIO()
            out.isatty = lambda: False
            with open(log, "w") as f, step_progress.following(log, "k", stream=out) as tr:
                for i in range(5):
                    f.write(f"  CC      f{i}.o\n")
                    f.flush()
                time.sleep(0.5)
            self.assertEqual(tr.lines, 5)
            self.assertRegex(out.getvalue(), r"^faultline: k: done, 5 files after 0s\n$")


FAKE_NINJA = r'''#!/usr/bin/env python3
# A slow ninja: [N/M] lines, two "compilers" in their own process group,
# stopped on SIGTERM as ninja stops its commands; then the targets.
import os, signal, subprocess, sys, time
args = sys.argv[1:]
d = args[args.index("-C") + 1]
targets = [a for i, a in enumerate(args) if not a.startswith("-") and args[i - 1] != "-C"]
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(" ".join(targets) + "\n")
steps = int(os.environ.get("FAKE_STEPS", "20"))
delay = float(os.environ.get("FAKE_DELAY", "0.25"))
cc = [subprocess.Popen(["sleep", "300"], process_group=0) for _ in range(2)]
def on_term(sig, frame):
    for c in cc:
        os.killpg(c.pid, signal.SIGTERM)
        c.wait()
    sys.exit(128 + sig)
signal.signal(signal.SIGTERM, on_term)
with open(os.environ["FAKE_PIDS"], "w") as f:
    f.write(" ".join(str(p) for p in [os.getpid()] + [c.pid for c in cc]) + "\n")
for i in range(1, steps + 1):
    print(f"[{i}/{steps}] Compiling C object obj{i}.o", flush=True)
    time.sleep(delay)
for c in cc:
    c.kill()
    c.wait()
for t in targets:
    p = os.path.join(d, t)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(p, 0o755)
'''

FAKE_MAKE = r'''#!/bin/sh
# make -C DIR -jN TARGET...: the option ROMs.
dir=$2; shift 3
for t in "$@"; do : >"$dir/$t"; done
'''

FAKE_CONFIGURE = r'''#!/bin/sh
: >build.ninja
mkdir -p pc-bios/optionrom && : >pc-bios/optionrom/config.mak
'''


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


class FakeCheckout:
    """build-qemu in a scratch checkout and cache, with the fake tools."""

    def __init__(self, d, steps=20, delay=0.25, interval=1):
        self.d = d
        self.top = os.path.join(d, "top")
        for s in ("build-qemu", "lib.sh"):
            os.makedirs(os.path.join(self.top, "scripts"), exist_ok=True)
            shutil.copy(os.path.join(TOP, "scripts", s), os.path.join(self.top, "scripts", s))
        # A copy: faultline.TOP (the checkout that scripts are run from) is
        # where the package is, links resolved.
        shutil.copytree(os.path.join(TOP, "python"), os.path.join(self.top, "python"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        write(os.path.join(self.top, "tests", "qtest", "foo-test.c"), "/* a qtest */\n")
        self.cache = os.path.join(d, "cache")
        write(os.path.join(self.cache, "src", "download", "VERSION"),
              "1:10.0.2+ds-1 bookworm-backports\n")
        src = os.path.join(self.cache, "src", "qemu-10.0.2")
        write(os.path.join(src, ".faultline-pristine"), "")
        write(os.path.join(src, "configure"), FAKE_CONFIGURE, 0o755)
        bin_ = os.path.join(d, "bin")
        write(os.path.join(bin_, "ninja"), FAKE_NINJA, 0o755)
        write(os.path.join(bin_, "make"), FAKE_MAKE, 0o755)
        self.pids = os.path.join(d, "pids")
        self.ninja_log = os.path.join(d, "ninja-runs")
        self.env = dict(os.environ, PATH=bin_ + os.pathsep + os.environ["PATH"],
                        FAULTLINE_CACHE=self.cache, FAULTLINE_CCACHE="0",
                        FAKE_PIDS=self.pids, FAKE_LOG=self.ninja_log, FAKE_STEPS=str(steps),
                        FAKE_DELAY=str(delay), **{step_progress.INTERVAL_ENV: str(interval)})
        self.env.pop("XDG_CACHE_HOME", None)

    def build_qemu(self, *args, **kw):
        return subprocess.Popen([os.path.join(self.top, "scripts", "build-qemu"), "--jobs", "2",
                                 *args], env=self.env, text=True, **kw)

    def ninja_pids(self, timeout_s=20.0):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with open(self.pids) as f:
                    text = f.read()
                if text.endswith("\n"):
                    return [int(p) for p in text.split()]
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError("the fake ninja never started")

    def ninja_runs(self):
        with open(self.ninja_log) as f:
            return [line.split() for line in f]


class BuildQemuProgress(unittest.TestCase):
    def test_log_form_with_a_slow_build(self):
        """stderr a pipe: ninja's [N/M] at most once per interval (1 s here),
        and a last line; 20 steps in ~8 s (the follower's start-up included,
        more than 2 intervals)."""
        with tempfile.TemporaryDirectory() as d:
            fc = FakeCheckout(d, delay=0.4)
            p = fc.build_qemu("--print-dir", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            received = []

            def read_stderr():
                for line in p.stderr:
                    received.append((time.monotonic(), line.rstrip("\n")))
            t = threading.Thread(target=read_stderr)
            t.start()
            out = p.stdout.read()
            self.assertEqual(p.wait(timeout=120), 0, received)
            t.join()
            prog = [(at, line) for at, line in received
                    if line.startswith("faultline: QEMU build: ")]
            self.assertGreaterEqual(len(prog), 3, received)
            *alive, last = prog
            self.assertRegex(last[1], r"^faultline: QEMU build: done, \[20/20\] 100% after \d+s$")
            # (before ninja's first line: the elapsed time alone)
            for at, line in alive:
                self.assertRegex(line, r"^faultline: QEMU build: (\[\d+/20\] \d+%, )?\d+s$")
            self.assertTrue([line for _, line in alive if "/20] " in line], alive)
            # One line per interval at most: their elapsed times (whole
            # seconds of the follower's clock) differ, and they were not
            # written in a burst.
            secs = [int(re.search(r"(\d+)s$", line).group(1)) for _, line in alive]
            self.assertEqual(secs, sorted(set(secs)), alive)
            for (a, _), (b, _) in zip(alive, alive[1:]):
                self.assertGreater(b - a, 0.5, alive)
            self.assertLessEqual(len(alive), 9 + 1, alive)
            qdir = out.strip().splitlines()[-1]
            self.assertTrue(os.access(os.path.join(qdir, "bin", "qemu-system-x86_64"), os.X_OK))
            with open(os.path.join(fc.cache, "qemu-work", os.listdir(
                    os.path.join(fc.cache, "qemu-work"))[0].split(".")[0], "build",
                    "faultline-build.log")) as f:
                self.assertEqual(len([ln for ln in f if ln.startswith("[")]), 20)

    def test_terminal_form_with_a_slow_build(self):
        """stderr a terminal: the status line is redrawn in place (no new
        line) and cleared before the script's next message."""
        with tempfile.TemporaryDirectory() as d:
            fc = FakeCheckout(d, steps=12, delay=0.5)
            m, s = pty.openpty()
            p = fc.build_qemu(stdout=subprocess.DEVNULL, stderr=s)
            os.close(s)
            out = b""
            while True:
                try:
                    chunk = os.read(m, 4096)
                except OSError:             # EIO: the terminal's last writer is gone
                    break
                if not chunk:
                    break
                out += chunk
            os.close(m)
            self.assertEqual(p.wait(timeout=60), 0)
            text = out.decode()
            start = text.index("faultline: QEMU build: ")
            end = min(text.find(m, start) % len(text)
                      for m in ("faultline: QEMU option ROMs", "faultline: QEMU built in "))
            status = text[start:end]
            self.assertNotIn("\n", status)
            lines = [x for x in status.split("\r\033[K") if x]
            self.assertGreaterEqual(len(lines), 2, status)
            for line in lines:
                self.assertRegex(line, r"^faultline: QEMU build: (\[\d+/12\] \d+%, )?\d+s$")
            self.assertTrue([line for line in lines if "/12] " in line], lines)
            self.assertTrue(status.endswith("\r\033[K"), status)

    def test_run_builds_qemu_alone_then_qtests_join_it(self):
        """Without --qtests ninja builds qemu-system-x86_64 only; --qtests
        later builds the qtests into the same cache directory (same key);
        then both are cache hits."""
        with tempfile.TemporaryDirectory() as d:
            fc = FakeCheckout(d, steps=2, delay=0)
            r1 = fc.build_qemu("--print-dir", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            out1, err1 = r1.communicate(timeout=120)
            self.assertEqual(r1.returncode, 0, err1)
            qdir = out1.strip()
            self.assertFalse(os.path.exists(os.path.join(qdir, "qtest", "qos-test")))
            r2 = fc.build_qemu("--qtests", "--print-dir", stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
            out2, err2 = r2.communicate(timeout=120)
            self.assertEqual(r2.returncode, 0, err2)
            self.assertEqual(out2.strip(), qdir)
            for f in ("bin/qemu-system-x86_64", "qtest/qos-test", "qtest/foo-test", "share/pvh.bin"):
                self.assertTrue(os.path.exists(os.path.join(qdir, f)), f)
            runs = fc.ninja_runs()
            self.assertEqual([r[-1:] for r in runs[:1]], [["qemu-system-x86_64"]])
            self.assertEqual(runs[1], ["qemu-system-x86_64", "tests/qtest/qos-test",
                                       "tests/qtest/foo-test"])
            for args in ((), ("--qtests",)):
                r = fc.build_qemu(*args, stderr=subprocess.PIPE)
                _, err = r.communicate(timeout=60)
                self.assertIn("QEMU cache hit", err)
            self.assertEqual(len(fc.ninja_runs()), 2)


class FlBuild(unittest.TestCase):
    """fl_build's step stops with its script; with --no-forward (apt-get
    install: dpkg is not stopped halfway) it is left to finish.  Either way
    the progress follower ends with the script."""

    def run_script(self, d, *flags, status=128 + signal.SIGTERM):
        path = os.path.join(d, "s")
        write(path, f"set -euo pipefail\n. {TOP}/scripts/lib.sh\n"
                    f"fl_build {' '.join(flags)} step {d}/log "
                    f"sh -c 'echo $$ >{d}/pid; exec sleep 60'\necho after\n", 0o755)
        p = subprocess.Popen(["bash", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, preexec_fn=default_dispositions)
        fc_pid = os.path.join(d, "pid")
        deadline = time.monotonic() + 20
        while not (os.path.exists(fc_pid) and open(fc_pid).read().endswith("\n")):
            self.assertLess(time.monotonic(), deadline, "the step never started")
            time.sleep(0.05)
        step = int(open(fc_pid).read())
        deadline = time.monotonic() + 20
        while not [q for q in procs.processes_mentioning(f"{d}/log")
                   if (procs.start_ticks(q) or (0, "X"))[1] not in ("Z", "X")]:
            self.assertLess(time.monotonic(), deadline, "no progress follower")
            time.sleep(0.05)
        p.terminate()
        out, _ = p.communicate(timeout=30)
        self.assertEqual(p.returncode, status)
        self.assertNotIn("after", out)
        deadline = time.monotonic() + 10
        while [q for q in procs.processes_mentioning(f"{d}/log")
               if (procs.start_ticks(q) or (0, "X"))[1] not in ("Z", "X")]:
            self.assertLess(time.monotonic(), deadline, "the follower outlived its script")
            time.sleep(0.05)
        return step

    def test_forwarded(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertTrue(wait_gone(self.run_script(d), 10.0), "the step outlived its script")

    def test_no_forward(self):
        with tempfile.TemporaryDirectory() as d:
            # bash dies of the SIGTERM it does not trap
            step = self.run_script(d, "--no-forward", status=-signal.SIGTERM)
            try:
                self.assertFalse(wait_gone(step, 1.0), "--no-forward: the step was stopped")
            finally:
                os.kill(step, signal.SIGKILL)


class QtestsOnDemand(unittest.TestCase):
    """The qtests are built by whatever runs them: tests/run-qtest, and
    `faultline check` for its qtest suite; `run` builds QEMU alone."""

    def test_run_qtest_builds_them(self):
        with tempfile.TemporaryDirectory() as d:
            fc = FakeCheckout(d, steps=2, delay=0)
            shutil.copy(os.path.join(TOP, "tests", "run-qtest"),
                        os.path.join(fc.top, "tests", "run-qtest"))
            r = subprocess.run([os.path.join(fc.top, "tests", "run-qtest"), "foo-test"],
                               env=fc.env, capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(fc.ninja_runs(), [["qemu-system-x86_64", "tests/qtest/qos-test",
                                                "tests/qtest/foo-test"]])

    def test_check_asks_for_them_with_the_qtest_suite(self):
        from faultline.lab import check

        class Stop(Exception):
            pass
        calls = []

        def meson(*a, **kw):
            raise Stop
        saved = check.build_all, check.qemu_dir, check.subprocess.run
        check.build_all = lambda *a, **kw: calls.append("build_all")
        check.qemu_dir = lambda *a, **kw: calls.append(("qemu_dir", a, kw))
        check.subprocess.run = meson
        try:
            for suites, want in (("unit", ["build_all"]),
                                 ("unit,qtest", ["build_all", ("qemu_dir", (), {"qtests": True})])):
                calls.clear()
                with self.assertRaises(Stop):
                    check.check(suites)
                self.assertEqual(calls, want, suites)
        finally:
            check.build_all, check.qemu_dir, check.subprocess.run = saved


class BuildQemuStops(unittest.TestCase):
    """A stopped build-qemu, or a stopped launcher running it, leaves no
    ninja, compiler or progress follower running."""

    def assert_nothing_left(self, fc, pids):
        for pid in pids:
            self.assertTrue(wait_gone(pid, 10.0), f"process {pid} of the build outlived it")
        deadline = time.monotonic() + 10
        while procs.processes_mentioning(fc.d) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual([(pid, open(f"/proc/{pid}/cmdline").read().replace("\0", " "))
                          for pid in procs.processes_mentioning(fc.d)
                          if (procs.start_ticks(pid) or (0, "X"))[1] not in ("Z", "X")], [])

    def test_signal_to_build_qemu(self):
        for sig in stop.SIGNALS:
            with self.subTest(sig=sig.name), tempfile.TemporaryDirectory() as d:
                fc = FakeCheckout(d, steps=600, delay=0.5)
                p = fc.build_qemu(stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  preexec_fn=default_dispositions)
                pids = fc.ninja_pids()
                time.sleep(0.5)
                p.send_signal(sig)
                _, err = p.communicate(timeout=30)
                self.assertEqual(p.returncode, 128 + sig, err)
                self.assert_nothing_left(fc, pids)
                self.assertNotIn("QEMU built", err)

    def test_sigterm_to_the_launcher(self):
        with tempfile.TemporaryDirectory() as d:
            fc = FakeCheckout(d, steps=600, delay=0.5)
            code = textwrap.dedent(f"""
                import sys
                sys.path.insert(0, {os.path.join(TOP, 'python')!r})
                from faultline.build import builds
                from faultline.host import stop
                stop.install()
                builds.TOP = {fc.top!r}
                try:
                    builds.qemu_dir()
                except stop.Aborted as e:
                    sys.exit(128 + e.signum)
            """)
            p = subprocess.Popen([sys.executable, "-c", code], env=fc.env,
                                 stderr=subprocess.PIPE, text=True,
                                 preexec_fn=default_dispositions)
            pids = fc.ninja_pids()
            time.sleep(0.5)
            p.terminate()
            _, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
            self.assert_nothing_left(fc, pids)

    def test_sigkill_to_the_launcher(self):
        with tempfile.TemporaryDirectory() as d:
            fc = FakeCheckout(d, steps=600, delay=0.5)
            code = textwrap.dedent(f"""
                import sys
                sys.path.insert(0, {os.path.join(TOP, 'python')!r})
                from faultline.build import builds
                builds.TOP = {fc.top!r}
                builds.qemu_dir()
            """)
            p = subprocess.Popen([sys.executable, "-c", code], env=fc.env,
                                 stderr=subprocess.DEVNULL, preexec_fn=default_dispositions)
            pids = fc.ninja_pids()
            p.kill()
            p.wait()
            self.assert_nothing_left(fc, pids)


class KernelMakeStops(unittest.TestCase):
    """A stopped or killed launcher leaves no make of a kernel build behind,
    sub-makes (started through a recipe's `sh -c`) included."""

    def launcher(self, d, install_stop):
        with open(os.path.join(d, "Makefile"), "w") as f:
            # a shell runs the sub-make, as in kbuild's recipes
            f.write("all:\n\tcd . && $(MAKE) -f sub.mk\n")
        with open(os.path.join(d, "sub.mk"), "w") as f:
            f.write(f"all:\n\tsleep 300 # {d}\n")
        code = textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {os.path.join(TOP, 'python')!r})
            from faultline.host import stop
            from faultline.kernel.configure import run_make
            {'stop.install()' if install_stop else ''}
            try:
                run_make({d!r}, {os.path.join(d, 'o')!r}, "all")
            except stop.Aborted as e:
                sys.exit(128 + e.signum)
        """)
        p = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True,
                             preexec_fn=default_dispositions)
        deadline = time.monotonic() + 20
        while not any("sleep" in open(f"/proc/{pid}/cmdline").read()
                      for pid in procs.processes_mentioning(d)
                      if os.path.exists(f"/proc/{pid}/cmdline")):
            self.assertLess(time.monotonic(), deadline, "the sub-make never started")
            time.sleep(0.05)
        return p

    def assert_nothing_left(self, d):
        deadline = time.monotonic() + 10
        while procs.processes_mentioning(d) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual([open(f"/proc/{pid}/cmdline").read().replace("\0", " ")
                          for pid in procs.processes_mentioning(d)
                          if (procs.start_ticks(pid) or (0, "X"))[1] not in ("Z", "X")], [])

    def test_sigterm_to_the_launcher(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.launcher(d, install_stop=True)
            p.terminate()
            _, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
            self.assert_nothing_left(d)

    def test_sigkill_to_the_launcher(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.launcher(d, install_stop=False)
            p.kill()
            p.wait()
            self.assert_nothing_left(d)


def default_dispositions():
    for sig in stop.SIGNALS:
        signal.signal(sig, signal.SIG_DFL)


if __name__ == "__main__":
    unittest.main()
