"""lavaqemu, the qemu-system-x86_64 a local LAVA job runs, against the
cached QEMU build: it adds its QMP socket and -no-shutdown, survives the
watchdog's SIGUSR1 (sysrq keys over its QMP), saves the injector's
statistics when the machine shuts down, quits QEMU, and refuses to start
for a launcher that is gone."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.build.builds import qemu_dir
from faultline.host import procs
from faultline.vm import lavaqemu
from faultline.vm.qmp import Qmp

QEMU = os.path.join(qemu_dir(), "bin", "qemu-system-x86_64")


class LavaQemuTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.stats = os.path.join(self.dir, "lava-stats.json")
        self.sock = os.path.join(self.dir, "qmp.sock")

    def wrapper(self, launcher):
        path = os.path.join(self.dir, "qemu-system-x86_64")
        with open(path, "w") as f:
            f.write(lavaqemu.program(os.path.join(TOP, "python"), QEMU, self.sock,
                                     self.stats, "fi0", launcher))
        os.chmod(path, 0o755)
        return path

    def start(self, mine):
        """The wrapper on a machine with injector fi0 and a QMP socket @mine
        of the test's own; returns the process and its pid file's path."""
        proc = subprocess.Popen([self.wrapper(procs.identity()), "-machine", "none",
                                 "-nodefaults", "-display", "none", "-no-reboot",
                                 "-object", "fault-injector,id=fi0,seed=7",
                                 "-qmp", f"unix:{mine},server=on,wait=off"])
        return proc, self.sock + ".wrapper-pid"

    def pid_in(self, pid_file):
        """The pid the wrapper wrote into @pid_file, read as soon as it is there."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with open(pid_file) as f:
                    text = f.read()
                if text:
                    return int(text)
            except FileNotFoundError:
                pass
            time.sleep(0.001)
        self.fail(f"no pid in {pid_file} within 60 s")

    def test_shutdown_saves_stats_and_quits(self):
        mine = os.path.join(self.dir, "test.sock")
        proc, pid_file = self.start(mine)
        try:
            self.assertEqual(self.pid_in(pid_file), proc.pid)
            q = Qmp(mine, timeout=60)
            # The watchdog's task dump: keys into a machine without a
            # keyboard are refused, and the wrapper carries on.
            os.kill(proc.pid, 10)   # SIGUSR1
            time.sleep(1)
            self.assertIsNone(proc.poll())
            self.assertEqual(q.cmd("query-status")["status"], "running")
            q.cmd("system_reset")   # -no-reboot: a reset is a SHUTDOWN
            q.close()
            self.assertEqual(proc.wait(timeout=60), 0)
        finally:
            proc.kill()
            proc.wait()
        with open(self.stats) as f:
            stats = json.load(f)
        self.assertEqual(stats["seed"], 7)

    def test_watchdog_signal_before_qmp_is_up(self):
        """The watchdog may signal the pid as soon as the pid file exists,
        before the wrapper reached QEMU's QMP: the wrapper lives on."""
        mine = os.path.join(self.dir, "test.sock")
        proc, pid_file = self.start(mine)
        try:
            os.kill(self.pid_in(pid_file), 10)   # SIGUSR1, at once
            time.sleep(1)
            self.assertIsNone(proc.poll())
            q = Qmp(mine, timeout=60)
            q.cmd("system_reset")
            q.close()
            self.assertEqual(proc.wait(timeout=60), 0)
        finally:
            proc.kill()
            proc.wait()

    def test_version_is_qemus(self):
        out = subprocess.run([self.wrapper(procs.identity()), "--version"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0)
        self.assertIn("QEMU emulator version 10.0", out.stdout)

    def test_gone_launcher_starts_nothing(self):
        gone = dict(procs.identity(), start=-1)
        out = subprocess.run([self.wrapper(gone), "--version"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual((out.returncode, out.stdout), (1, ""))
        self.assertFalse(os.path.exists(self.sock + ".wrapper-pid"))


if __name__ == "__main__":
    unittest.main()
