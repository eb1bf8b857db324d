"""`faultline prog c` (python/faultline/execute/repro.py) on this host: the
reproducer of a program without swap lines builds with `gcc -static -O2
-pthread` from repro.c alone, passes, and fails with a `content` finding
(exit 1) under each --plant that corrupts data; the rules it writes are
gated on the injector's state, and fault-rules-check accepts them when it
is built; a program whose rules use states, or the VM cannot run, is one
line (exit 2) before anything is written.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.errors import SetupError  # noqa: E402
from faultline.execute import repro  # noqa: E402

FAULTLINE = os.path.join(TOP, "scripts", "faultline")

# Runs anywhere (no swap, knob, cgroup or rule): forks, shared and file memory.
HOST_PROGRAM = """\
program v1
anon a 1M private
write a 0 1M v=1
fork p
@p write a 0 256K v=2
@p read a 0 256K          # the child's copy
read a 0 256K             # the parent's v=1
exit p
memfd m 512K map=shared
pwrite m 0 512K v=5
read m 0 512K
madvise a 0 1M pageout
read a 0 1M
"""

WITH_RULES = """\
program v1
swap s0 nvme size=64M
swap s1 syncblk completion=irq size=32M
rule s0 bad: write every=3 count=64 corrupt
rule s1 rerr: read prob=0.1 error=eio
anon a 8M
write a 0 8M v=1
madvise a 0 8M pageout
read a 0 8M
"""


def write(dirname, name, text):
    path = os.path.join(dirname, name)
    with open(path, "w") as f:
        f.write(text)
    return path


class ReproTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="prog-repro-")
        prog = write(cls.tmp, "host-ops.prog", HOST_PROGRAM)
        cls.out = os.path.join(cls.tmp, "c")
        cls.paths = repro.write_reproducer(prog, cls.out)
        # A stranger's build: repro.c alone, in a directory of its own.
        cls.build_dir = os.path.join(cls.tmp, "stranger")
        os.makedirs(cls.build_dir)
        shutil.copy(cls.paths["repro.c"], cls.build_dir)
        res = subprocess.run(["gcc", "-static", "-O2", "-pthread", "repro.c", "-o", "repro"],
                             cwd=cls.build_dir, capture_output=True, text=True, timeout=240)
        if res.returncode:
            raise AssertionError(f"gcc failed:\n{res.stderr[-3000:]}")
        cls.exe = os.path.join(cls.build_dir, "repro")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_repro(self, *args):
        return subprocess.run([self.exe, *args], capture_output=True, text=True, timeout=120)

    def test_passes(self):
        res = self.run_repro()
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertIn("result host-ops pass 0", res.stdout)
        self.assertNotIn("finding", res.stdout)
        # Every operation ran: `at` of the last line sent (13 statements).
        self.assertIn("at 13\n", res.stdout)

    def test_plants_fail_with_content(self):
        for plant in ("drop-write", "stale-page"):
            with self.subTest(plant=plant):
                res = self.run_repro("--plant", plant)
                self.assertEqual(res.returncode, 1, res.stdout + res.stderr)
                self.assertRegex(res.stdout, r"(?m)^finding content line=\d+ ")
                self.assertRegex(res.stdout, r"(?m)^result host-ops fail [1-9]")

    def test_bad_usage(self):
        for args in (["--plant", "nope"], ["--plant"], ["extra"]):
            with self.subTest(args=args):
                res = self.run_repro(*args)
                self.assertEqual(res.returncode, 2)
                self.assertIn("usage:", res.stderr)
                self.assertEqual(res.stdout, "")

    def test_program_text_embedded(self):
        with open(self.paths["repro.c"]) as f:
            src = f.read()
        self.assertIn('"@p write a 0 256K v=2\\n"', src)
        self.assertFalse('#include "' in src, "a local header is not inlined")
        self.assertFalse("---- progexec/serve.c" in src, "serve.c is in")
        self.assertTrue("---- progexec/run.c" in src and "---- lib/guestlib.c" in src)

    def test_rules_gated(self):
        prog = write(self.tmp, "rules.prog", WITH_RULES)
        out = os.path.join(self.tmp, "rules-c")
        repro.write_reproducer(prog, out)
        with open(os.path.join(out, "rules-nvme0.txt")) as f:
            nvme = f.read().splitlines()
        with open(os.path.join(out, "rules-sync-irq.txt")) as f:
            irq = f.read().splitlines()
        self.assertEqual(nvme[0], "bad: write state=1 every=3 count=64 corrupt")
        self.assertEqual(irq[0], "rerr: read state=1 prob=0.1 error=eio")
        for lines in (nvme, irq):
            self.assertEqual(lines[1:], list(repro.GATE_RULES))
        with open(os.path.join(out, "repro.c")) as f:
            src = f.read()
        self.assertIn('{ "s0", "nvme:fl-nvme0" }', src)
        self.assertIn('{ "s1", "syncblk:irq" }', src)
        self.assertIn('repro_failed_read[] = { "s1", NULL }', src)
        checker = shutil.which("fault-rules-check") or self.rules_checker()
        if checker:
            for name in ("rules-nvme0.txt", "rules-sync-irq.txt"):
                res = subprocess.run([checker, os.path.join(out, name)], capture_output=True,
                                     text=True, timeout=30)
                self.assertEqual(res.returncode, 0, res.stdout + res.stderr)

    @staticmethod
    def rules_checker():
        base = os.path.expanduser("~/.cache/faultline/rules-check")
        for root, _, files in os.walk(base):
            if "fault-rules-check" in files:
                return os.path.join(root, "fault-rules-check")
        return None

    def test_refusals_before_writing(self):
        stateful = write(self.tmp, "state.prog", WITH_RULES.replace(
            "rule s1 rerr: read prob=0.1 error=eio", "rule s1 rerr: read state=3 error=eio"))
        too_many = write(self.tmp, "many.prog", WITH_RULES.replace(
            "swap s1 syncblk completion=irq size=32M",
            "swap s1 syncblk completion=irq size=32M\nswap s2 syncblk completion=irq"))
        for path, why in ((stateful, "engine state"), (too_many, "completion=irq device")):
            with self.subTest(path=path):
                out = os.path.join(self.tmp, "refused-" + os.path.basename(path))
                with self.assertRaises(SetupError) as e:
                    repro.write_reproducer(path, out)
                self.assertIn(why, str(e.exception))
                self.assertFalse(os.path.exists(out))
        # The command: one line, exit 2, for a bad program and a refused one.
        bad = write(self.tmp, "bad.prog", "anon a 1M\nwrite a 0 2M v=1\n")
        for path in (bad, stateful):
            res = subprocess.run([FAULTLINE, "prog", "c", path, "--out",
                                  os.path.join(self.tmp, "cli-out")],
                                 capture_output=True, text=True, timeout=60)
            self.assertEqual(res.returncode, 2, res.stderr)
            self.assertEqual(len(res.stderr.strip().splitlines()), 1, res.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "cli-out")))


    def boot_dir(self, qemu_sh):
        """A reproducer directory with a tiny repro.c and @qemu_sh standing
        in for QEMU (it gets the initramfs the steps made)."""
        d = tempfile.mkdtemp(dir=self.tmp)
        write(d, "repro.c", "int main(void) { return 1; }\n")
        write(d, "run.sh", "#!/bin/sh\n")
        write(d, "qemu.sh", "#!/bin/sh\n" + qemu_sh)
        os.chmod(os.path.join(d, "qemu.sh"), 0o755)
        return d, write(self.tmp, "base.img", "base initramfs\n")

    def test_boot_reproducer_runs_the_printed_steps(self):
        # The guest's side: what qemu.sh's boot writes into ktap.log.
        d, img = self.boot_dir(
            'test -x repro && cpio -it < "$INITRAMFS" 2>/dev/null | grep -qx run.sh\n'
            'printf \'at 5\\nfinding swapoff line=10 why=timeout\\n# repro exit 1\\n\' '
            '> ktap.log\n')
        status, ktap = repro.boot_reproducer(d, img, 60)
        self.assertEqual(status, 1)
        self.assertIn("finding swapoff line=10", ktap)
        # Each printed step (its boot without a timeout) is one that ran.
        printed = repro.instructions(d, img)
        for step in repro.BUILD_AND_BOOT:
            self.assertIn(step.format(initramfs=img, timeout=""), printed)

    def test_boot_reproducer_failures_are_one_line(self):
        d, img = self.boot_dir("sleep 30\n")
        with self.assertRaises(SetupError) as e:
            repro.boot_reproducer(d, img, 1)
        self.assertIn("did not end in 1s", str(e.exception))
        d, img = self.boot_dir("echo qemu: no such device >&2; exit 1\n")
        with self.assertRaises(SetupError) as e:
            repro.boot_reproducer(d, img, 60)
        self.assertIn("qemu: no such device", str(e.exception))
        self.assertNotIn("\n", str(e.exception))


if __name__ == "__main__":
    unittest.main()
