#!/usr/bin/env python3
"""Unit tests of python/faultline/host/ (stop, procs, scratchdirs) and run/aborted.py with real processes and signals
(no QEMU): the parent-death signal, owner identity, the sweep of a dead
launcher's scratch, and a launcher-like process stopped by SIGTERM, SIGINT
and SIGHUP with a machine in a worker thread."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.host import procs, scratchdirs, stop
from faultline.lab import check
from faultline.run import aborted


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def wait_gone(pid, timeout_s=5.0):
    """True when @pid exits (or is a zombie) within @timeout_s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        st = procs.start_ticks(pid)
        if st is None or st[1] in ("Z", "X"):
            return True
        time.sleep(0.02)
    return False


def dead_identity():
    """The identity of a process that has exited."""
    p = subprocess.Popen(["sleep", "60"])
    ident = procs.identity(p.pid)
    p.kill()
    p.wait()
    return ident


class Identity(unittest.TestCase):
    def test_me_alive(self):
        self.assertTrue(procs.alive(procs.identity()))

    def test_exited_dead(self):
        self.assertFalse(procs.alive(dead_identity()))

    def test_reused_pid_dead(self):
        # Same pid, another start time: another process.
        me = procs.identity()
        self.assertFalse(procs.alive(dict(me, start=me["start"] - 1)))
        self.assertFalse(procs.alive(dict(me, boot="another-boot")))

    def test_zombie_dead(self):
        p = subprocess.Popen(["true"])
        ident = procs.identity(p.pid)
        self.assertTrue(wait_gone(p.pid))      # exited, not yet reaped
        self.assertIsNotNone(procs.start_ticks(p.pid))
        self.assertFalse(procs.alive(ident))
        p.wait()

    def test_garbage(self):
        for owner in ({}, {"pid": "x"}, {"pid": None}):
            self.assertFalse(procs.alive(owner))


class ParentDeath(unittest.TestCase):
    def test_child_dies_with_killed_parent(self):
        """A parent started with die_with_parent's child, then SIGKILLed:
        the child is gone within 5 s (it would sleep 60)."""
        code = textwrap.dedent(f"""
            import subprocess, sys, time
            sys.path.insert(0, {os.path.join(TOP, 'python')!r})
            from faultline.host import procs
            c = subprocess.Popen(["sleep", "60"], preexec_fn=procs.die_with_parent(),
                                 start_new_session=True)
            print(c.pid, flush=True)
            time.sleep(60)
        """)
        parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                  text=True)
        child = int(parent.stdout.readline())
        self.assertFalse(wait_gone(child, 0.3), "the child died before its parent")
        parent.kill()
        parent.wait()
        self.assertTrue(wait_gone(child), "the child outlived its SIGKILLed parent")

    def test_kernel_build_tools_die_with_a_killed_build(self):
        """sources.run_tool (make, git, apt of `faultline kernel build`): a
        SIGKILLed build leaves no make behind to write into the build tree
        the next build takes."""
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "log")
            code = textwrap.dedent(f"""
                import sys
                sys.path.insert(0, {os.path.join(TOP, 'python')!r})
                from faultline.kernel import sources
                with open({log!r}, "w") as f:
                    sources.run_tool(["sh", "-c", "echo $$; exec sleep 60"], log=f)
            """)
            parent = subprocess.Popen([sys.executable, "-c", code])
            deadline = time.monotonic() + 10
            text = ""
            while not text.endswith("\n") and time.monotonic() < deadline:
                time.sleep(0.05)
                text = open(log).read() if os.path.exists(log) else ""
            child = int(text)
            self.assertFalse(wait_gone(child, 0.3), "the tool died before its build")
            parent.kill()
            parent.wait()
            self.assertTrue(wait_gone(child), "the tool outlived its SIGKILLed build")

    def test_without_it_child_survives(self):
        """The control: without die_with_parent the child outlives the
        parent (what the qemu backend did before)."""
        code = ("import subprocess, time; c = subprocess.Popen(['sleep', '60'], "
                "start_new_session=True); print(c.pid, flush=True); time.sleep(60)")
        parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                  text=True)
        child = int(parent.stdout.readline())
        parent.kill()
        parent.wait()
        try:
            self.assertFalse(wait_gone(child, 1.0))
        finally:
            os.kill(child, signal.SIGKILL)


class Sweep(unittest.TestCase):
    def setUp(self):
        self.base = tempfile.mkdtemp(prefix="abort-test-")
        self.addCleanup(subprocess.run, ["rm", "-rf", self.base])
        self.bases = scratchdirs.scratch_bases
        scratchdirs.scratch_bases = lambda: [self.base]
        self.addCleanup(setattr, scratchdirs, "scratch_bases", self.bases)
        self.tmp = tempfile.gettempdir
        # sweep() also looks in the temporary directory: this test's only.
        tempfile.gettempdir = lambda: self.base
        self.addCleanup(setattr, tempfile, "gettempdir", self.tmp)

    def scratch(self, owner, rundir=None):
        d = tempfile.mkdtemp(prefix=scratchdirs.PREFIX, dir=self.base)
        with open(os.path.join(d, "disk.img"), "w") as f:
            f.write("x")
        if owner is not None:
            with open(os.path.join(d, scratchdirs.OWNER), "w") as f:
                json.dump(dict(owner, rundir=rundir), f)
        return d

    def test_only_dead_owners(self):
        rundir = os.path.join(self.base, "run")
        os.makedirs(rundir)
        with open(os.path.join(rundir, "run.json"), "w") as f:
            json.dump({"scenario": "smoke", "seed": 7, "start_time": time.time()}, f)
        dead = self.scratch(dead_identity(), rundir)
        live = self.scratch(procs.identity())
        unknown = self.scratch(None)
        # A process of the dead launcher's run (it names the scratch), and
        # one recorded in processes.json (it does not).
        named = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", dead])
        retitled = subprocess.Popen(["sleep", "60"])
        scratchdirs.note_process(dead, retitled.pid)
        removed = aborted.sweep()
        self.assertEqual(removed, [dead])
        self.assertFalse(os.path.exists(dead))
        self.assertTrue(os.path.exists(live) and os.path.exists(unknown))
        self.assertEqual(named.wait(timeout=5), -signal.SIGKILL)
        self.assertEqual(retitled.wait(timeout=5), -signal.SIGKILL)
        with open(os.path.join(rundir, "report.json")) as f:
            rep = json.load(f)
        self.assertEqual((rep["outcome"], rep["status"], rep["scenario"], rep["seed"]),
                         ("aborted", 137, "smoke", 7))
        self.assertIn("SIGKILL", rep["reason"])

    def test_killed_while_judging(self):
        """The machine is gone and its scratch emptied (disk freed), but the
        run has no report yet: a launcher SIGKILLed then is reported by the
        next one, as judging (seen in CI: SIGKILL during judge left a run
        directory without report.json when the scratch went first)."""
        rundir = os.path.join(self.base, "run")
        os.makedirs(rundir)
        with open(os.path.join(rundir, "run.json"), "w") as f:
            json.dump({"scenario": "smoke", "seed": 3, "start_time": time.time()}, f)
        for name, text in (("console.log", "boot\n"), ("ktap.log", "# kernel 6.12\n"
                                                                "FAULTLINE-EXIT 0\n")):
            with open(os.path.join(rundir, name), "w") as f:
                f.write(text)
        d = self.scratch(dead_identity(), rundir)
        os.makedirs(os.path.join(d, "sub"))
        scratchdirs.empty_scratch(d)
        self.assertEqual(os.listdir(d), [scratchdirs.OWNER])
        self.assertEqual(aborted.sweep(), [d])
        with open(os.path.join(rundir, "report.json")) as f:
            rep = json.load(f)
        self.assertEqual((rep["outcome"], rep["seed"]), ("aborted", 3))
        self.assertIn("during judge", rep["reason"])

    def test_claimed_before_the_run_directory_exists(self):
        """The owner names the run directory before it is made (claim), so
        a launcher killed as it writes the first files (CI: SIGKILL left a
        directory with scenario.toml and versions.env, no run.json, no
        owner) is reported; one killed before the directory existed leaves
        nothing to report."""
        rundir = os.path.join(self.base, "run")
        d = self.scratch(dead_identity())
        scratchdirs.claim(d, rundir)
        self.assertEqual(scratchdirs.read_owner(d)["rundir"], rundir)
        self.assertFalse(procs.alive(scratchdirs.read_owner(d)))     # the identity is kept
        self.assertEqual(aborted.sweep(), [d])                    # no directory: no report
        self.assertFalse(os.path.exists(rundir))
        os.makedirs(rundir)
        with open(os.path.join(rundir, "scenario.toml"), "w") as f:
            f.write('description = "x"\n')
        d = self.scratch(dead_identity())
        scratchdirs.claim(d, rundir)
        self.assertEqual(aborted.sweep(), [d])
        with open(os.path.join(rundir, "report.json")) as f:
            rep = json.load(f)
        self.assertEqual(rep["outcome"], "aborted")
        self.assertIn("during setup", rep["reason"])

    def test_finish_reports_a_run_its_handler_did_not(self):
        """Stopped between claiming its run directory and starting the run
        (tracks_run never ran): finish() writes the report."""
        rundir = os.path.join(self.base, "run")
        d = scratchdirs.new_scratch()
        scratchdirs.claim(d, rundir)
        os.makedirs(rundir)
        aborted.finish(stop.Aborted(signal.SIGTERM))
        self.assertFalse(os.path.exists(d))
        with open(os.path.join(rundir, "report.json")) as f:
            rep = json.load(f)
        self.assertEqual((rep["outcome"], rep["status"], rep["signal"]),
                         ("aborted", 128 + signal.SIGTERM, "SIGTERM"))

    def test_report_kept(self):
        """A run that has its report.json keeps it."""
        rundir = os.path.join(self.base, "run")
        os.makedirs(rundir)
        with open(os.path.join(rundir, "report.json"), "w") as f:
            f.write('{"outcome": "pass"}')
        self.scratch(dead_identity(), rundir)
        aborted.sweep()
        with open(os.path.join(rundir, "report.json")) as f:
            self.assertEqual(json.load(f), {"outcome": "pass"})

    def test_new_scratch_names_owner(self):
        d = scratchdirs.new_scratch("/some/run")
        try:
            owner = scratchdirs.read_owner(d)
            self.assertEqual(owner["rundir"], "/some/run")
            self.assertTrue(procs.alive(owner))
            self.assertEqual(aborted.sweep(), [])
        finally:
            scratchdirs.remove_scratch(d)
        self.assertFalse(os.path.exists(d))


# A launcher in miniature: main() as the CLI's, a run in a worker thread of
# stop.Executor (matrix, minimize) with a machine whose cleanup is logged,
# a queued second run that must never start.
LAUNCHER = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {python!r})
    from faultline.host import stop
    from faultline.run import aborted
    LOG = {log!r}

    def log(text):
        with open(LOG, "a") as f:
            f.write(text + "\\n")

    class Machine:
        def __init__(self, name):
            self.name = name
        def cleanup(self):
            log("cleanup " + self.name)

    def run(name):
        m = Machine(name)
        stop.register(m)
        # Logged once registered: a stop that comes before (register's
        # check) has no machine to clean up, and the test waits for this.
        log("start " + name)
        try:
            while True:             # the watch loop
                time.sleep(0.05)
                stop.check()
        finally:
            m.cleanup()
            stop.unregister(m)

    def main():
        try:
            stop.install()
            with stop.Executor(max_workers=1) as pool:
                futures = [pool.submit(run, "a"), pool.submit(run, "b")]
                log("ready")
                for f in futures:
                    f.result()
        except stop.Aborted as e:
            return aborted.finish(e)
        return 0

    sys.exit(main())
""")


def default_dispositions():
    """The launcher under test starts with default signal dispositions: under
    nohup (or a harness that ignores SIGINT) it would rightly keep them
    ignored, and this test is about the signals it handles."""
    for sig in stop.SIGNALS:
        signal.signal(sig, signal.SIG_DFL)


def wait_for_pid(path, timeout_s=10.0):
    """The pid a step wrote to @path, once it is there."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = read(path)
        if text.endswith("\n"):
            return int(text)
        time.sleep(0.02)
    raise AssertionError(f"no pid in {path}")


# A build script's long step: it writes its pid, then would run 60 s.
STEP = "sh -c 'echo $$ > {pidfile}; exec sleep 60'"


class ScriptSteps(unittest.TestCase):
    """The build scripts' long steps (ninja, make) stop with the script
    and with the launcher that runs it (scripts/lib.sh fl_forward,
    build.run_script), whatever the stop signal."""

    def script(self, d, forward=True):
        """A script like build-qemu: sources lib.sh, runs one long step."""
        path = os.path.join(d, "scripts", "step")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        step = STEP.format(pidfile=os.path.join(d, "pid"))
        with open(path, "w") as f:
            f.write(f"#!/bin/bash\nset -euo pipefail\n. {TOP}/scripts/lib.sh\n"
                    f"{'fl_forward ' if forward else ''}{step}\necho after\n")
        os.chmod(path, 0o755)
        return path

    def test_step_stops_with_its_script(self):
        for sig in stop.SIGNALS:
            with self.subTest(sig=sig.name), tempfile.TemporaryDirectory() as d:
                p = subprocess.Popen([self.script(d)], stdout=subprocess.PIPE, text=True,
                                     preexec_fn=default_dispositions)
                step = wait_for_pid(os.path.join(d, "pid"))
                p.send_signal(sig)
                out, _ = p.communicate(timeout=10)
                self.assertTrue(wait_gone(step), "the step outlived its stopped script")
                self.assertEqual(p.returncode, 128 + sig)
                self.assertNotIn("after", out, "the script went on after its signal")

    def test_step_status_is_returned(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s")
            with open(path, "w") as f:
                f.write(f". {TOP}/scripts/lib.sh\nfl_forward sh -c 'exit 3' || echo \"rc $?\"\n"
                        "fl_forward true && echo ok\n")
            r = subprocess.run(["bash", path], capture_output=True, text=True, timeout=10)
            self.assertEqual(r.stdout.split("\n")[:2], ["rc 3", "ok"])

    def test_without_it_step_survives(self):
        """The control: bash runs its trap only after the foreground step,
        so a plain step outlives its script's SIGTERM."""
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.Popen([self.script(d, forward=False)], stdout=subprocess.DEVNULL,
                                 preexec_fn=default_dispositions)
            step = wait_for_pid(os.path.join(d, "pid"))
            try:
                p.terminate()
                self.assertFalse(wait_gone(step, 1.0))
            finally:
                os.kill(step, signal.SIGKILL)
                p.wait()

    def launcher(self, d):
        """A launcher running scripts/step through build.run_script."""
        code = textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {os.path.join(TOP, 'python')!r})
            from faultline.build import builds
            from faultline.host import stop
            stop.install()
            builds.TOP = {d!r}
            try:
                builds.run_script("step")
            except stop.Aborted as e:
                sys.exit(128 + e.signum)
        """)
        self.script(d)
        return subprocess.Popen([sys.executable, "-c", code], preexec_fn=default_dispositions)

    def test_step_stops_with_a_stopped_launcher(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.launcher(d)
            step = wait_for_pid(os.path.join(d, "pid"))
            p.terminate()
            self.assertEqual(p.wait(timeout=40), 128 + signal.SIGTERM)
            self.assertTrue(wait_gone(step), "the step outlived its stopped launcher")

    def test_step_stops_with_a_killed_launcher(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.launcher(d)
            step = wait_for_pid(os.path.join(d, "pid"))
            p.kill()
            p.wait()
            self.assertTrue(wait_gone(step), "the step outlived its SIGKILLed launcher")


class CheckLeftovers(unittest.TestCase):
    """check's final gate: what the tests left behind is reported and
    removed; what a next launcher cleans up, or a live run owns, is not a
    leak."""

    def test_marked_process_and_ownerless_scratch_are_leaks(self):
        marker = f"{check.CHECK_MARKER}=unit-{os.getpid()}-{time.time_ns()}"
        before = check.scratch_dirs()
        child = subprocess.Popen(["sleep", "60"],
                                 env=dict(os.environ, **dict([marker.split("=", 1)])))
        bystander = subprocess.Popen(["sleep", "60"])
        ownerless = tempfile.mkdtemp(prefix=scratchdirs.PREFIX, dir=scratchdirs.scratch_bases()[0])
        owned = scratchdirs.new_scratch()
        try:
            found = check.leftovers(before, marker, grace_s=0.5)
            self.assertEqual(len(found), 2, found)
            self.assertIn(f"process {child.pid} (sleep) still runs", found)
            self.assertIn(f"scratch directory {ownerless} has no owner.json", found)
            self.assertEqual(child.wait(timeout=5), -signal.SIGKILL)
            self.assertFalse(os.path.exists(ownerless))
            self.assertTrue(os.path.isdir(owned), "a live launcher's scratch was removed")
            self.assertIsNone(bystander.poll(), "an unmarked process was killed")
        finally:
            for p in (child, bystander):
                p.kill()
                p.wait()
            scratchdirs.remove_scratch(owned)
            subprocess.run(["rm", "-rf", ownerless])

    def test_nothing_left_is_no_leak(self):
        marker = f"{check.CHECK_MARKER}=unit-{os.getpid()}-{time.time_ns()}"
        r = subprocess.run(["true"], env=dict(os.environ, **dict([marker.split("=", 1)])))
        self.assertEqual(r.returncode, 0)
        self.assertEqual(check.leftovers(check.scratch_dirs(), marker, grace_s=0.5), [])


class Signals(unittest.TestCase):
    def stop(self, sig):
        d = tempfile.mkdtemp(prefix="abort-test-")
        self.addCleanup(subprocess.run, ["rm", "-rf", d])
        log = os.path.join(d, "log")
        p = subprocess.Popen([sys.executable, "-c", LAUNCHER.format(
            python=os.path.join(TOP, "python"), log=log)], stderr=subprocess.PIPE, text=True,
            preexec_fn=default_dispositions)
        self.addCleanup(p.kill)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if "start a" in read(log):
                break
            time.sleep(0.02)
        p.send_signal(sig)
        _, err = p.communicate(timeout=10)
        return p.returncode, read(log).split("\n"), err

    def test_signals(self):
        for sig in stop.SIGNALS:
            with self.subTest(sig=sig.name):
                status, log, err = self.stop(sig)
                self.assertEqual(status, 128 + sig)
                self.assertIn("cleanup a", log)
                # The queued run was cancelled, not started.
                self.assertNotIn("start b", log)
                self.assertIn(f"aborted by {sig.name}", err)
                self.assertNotIn("Traceback", err)


if __name__ == "__main__":
    unittest.main()
