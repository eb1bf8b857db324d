"""Unit tests of a program run without the host (python/faultline/execute/
fresh.py, `prog run --deterministic`): the real progexec built for this
host runs a program with `--gate`, its report goes into a file as QEMU's
port would write it, and the session's reader judges that file as it
grows; a silent or dead guest; what cannot run without the host; the
guest's initramfs carries the program's canonical text unchanged."""

import gzip
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from faultline.execute import boot, devices, fresh  # noqa: E402
from faultline.execute.channel import GuestGone, GuestSilent  # noqa: E402
from faultline.execute.session import Budgets, Outcome, Prepared, read_until  # noqa: E402
from faultline.prog.lang import parse  # noqa: E402
from faultline.run import guest  # noqa: E402
from test_progexec import build  # noqa: E402

# No swap line: it runs on the build host.  Line 3 reads a page the
# program never wrote as version 1 (--plant drop-write) in the planted run.
LOCAL = """\
program v1
anon a 256K
write a 0 256K v=1
read a 0 256K
"""
WITH_RULES = """\
program v1
swap s0 nvme size=32M
swap s1 syncblk completion=irq size=16M
rule s0 bad: write every=3 count=64 corrupt
rule s1 rerr: read prob=0.1 error=eio
anon a 1M
write a 0 1M v=1
read a 0 1M
"""


def prepared(text, name="p1"):
    program = parse(text, "t.prog")
    return Prepared.of(name, "t.prog", program, devices.bind(program),
                       devices.rules_of(program))


class ProgexecGateTest(unittest.TestCase):
    """progexec run --gate's report, followed as it is written."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.progexec = build(cls.tmp)

    def run_followed(self, name, *extra, alive=lambda: None):
        """progexec run --gate 1,2 of LOCAL writing into a file the reader
        follows while it runs: (Outcome, the `result` words, exit status)."""
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write("".join(t + "\n" for t, _ in prepared(LOCAL).lines))
        transcript = os.path.join(self.tmp, name + ".transcript")
        prep = prepared(LOCAL, name)
        with open(transcript, "wb") as out:
            proc = subprocess.Popen([self.progexec, "run", path, "--gate", "1,2", *extra],
                                    stdout=out)
            try:
                reader = fresh.TranscriptFile(transcript, alive)
                o = Outcome(name)
                kinds = []
                for wanted in (("ready",), ("ops-done",), ("result",)):
                    kind, rest = read_until(reader, o, prep, wanted, 30)
                    kinds.append(kind)
            finally:
                status = proc.wait(timeout=60)
        self.assertEqual(kinds, ["ready", "ops-done", "result"])
        return o, rest, status

    def test_gated_run_reports_ready_and_ops_done(self):
        o, said, status = self.run_followed("clean")
        self.assertEqual((status, said[1], o.findings), (0, "pass", []))
        self.assertEqual(o.ops_run, 3)
        self.assertEqual(o.report[0], "ready clean")
        self.assertEqual([ln.split()[0] for ln in o.report[-3:]], ["ops-done", "stat", "result"])
        self.assertEqual(o.stats["pages_checked"], "64")

    def test_a_planted_fault_is_a_finding_with_its_file_line(self):
        o, said, status = self.run_followed("planted", "--plant", "drop-write")
        self.assertEqual((status, said[1]), (1, "fail"))
        self.assertEqual(o.findings[0]["check"], "content")
        self.assertEqual((o.findings[0]["file_line"], o.findings[0]["op"]),
                         (4, "read a 0 256K"))

    def test_bad_gate_is_usage(self):
        for bad in ("1", "1,1", "x,2", "-1,2"):
            res = subprocess.run([self.progexec, "run", "/nonexistent", "--gate", bad],
                                 capture_output=True, text=True, timeout=30)
            self.assertEqual(res.returncode, 2, bad)
            self.assertEqual(len(res.stderr.strip().splitlines()), 1, res.stderr)
            self.assertIn("--gate", res.stderr)


class TranscriptFileTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.path = os.path.join(self.tmp, "transcript.txt")

    def test_lines_written_later_are_read_then_silence_times_out(self):
        def writer():
            time.sleep(0.3)
            with open(self.path, "ab") as f:
                f.write(b"ready p1\nat 1\nfin")
                f.flush()
                time.sleep(0.3)
                f.write(b"ding content line=1 proc=main\n")
        t = threading.Thread(target=writer)
        t.start()
        reader = fresh.TranscriptFile(self.path, lambda: None)
        self.assertEqual(reader.receive(5, "ready"), "ready p1")
        self.assertEqual(reader.receive(5, "x"), "at 1")
        self.assertEqual(reader.receive(5, "x"), "finding content line=1 proc=main")
        t.join()
        t0 = time.monotonic()
        with self.assertRaises(GuestSilent) as e:
            reader.receive(1, "ops-done of p1")
        self.assertLess(time.monotonic() - t0, 3)
        self.assertIn("no ops-done of p1", str(e.exception))

    def test_a_dead_guest_ends_the_wait_after_its_last_lines(self):
        with open(self.path, "w") as f:
            f.write("ready p1\nat 1\n")
        reader = fresh.TranscriptFile(self.path, lambda: "the kernel panicked: Oops")
        o = Outcome("p1")
        with self.assertRaises(GuestGone) as e:
            read_until(reader, o, prepared(LOCAL), ("ops-done",), 60)
        self.assertIn("panicked", str(e.exception))
        self.assertEqual((o.report, o.ops_run), (["ready p1", "at 1"], 1))


class WithoutTheHostTest(unittest.TestCase):
    def test_what_cannot_run_without_the_host(self):
        self.assertIsNone(fresh.refusal(prepared(WITH_RULES).bound,
                                        prepared(WITH_RULES).rules))
        vblk = prepared("swap s0 virtio-blk\nanon a 1M\n")
        self.assertIn("virtio-blk", fresh.refusal(vblk.bound, vblk.rules))
        state = prepared(WITH_RULES.replace("rule s1 rerr: read prob=0.1 error=eio",
                                            "rule s1 rerr: read state=2 error=eio"))
        self.assertIn("engine state", fresh.refusal(state.bound, state.rules))
        tmp = tempfile.mkdtemp()
        for name, text in (("1.prog", WITH_RULES), ("2.prog", "swap s0 virtio-blk\nanon a 1M\n")):
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        entries = boot.collect(tmp)
        ready, refused = boot.prepare(entries, None, False, deterministic=True)
        self.assertEqual(([p.name for p in ready], list(refused)), (["1"], ["2"]))
        ready, refused = boot.prepare(entries, None, False)
        self.assertEqual(len(ready), 2)

    def test_run_sh_carries_the_text_and_the_gate(self):
        prep = prepared(WITH_RULES, "seeded")
        sh = fresh.run_sh(prep)
        cmd = [ln for ln in sh.splitlines() if ln.startswith("progexec run")]
        self.assertEqual(cmd, [f"progexec run /{fresh.GUEST_DIR}/seeded --bind s0=nvme:fl-nvme0 "
                               "--bind s1=syncblk:irq --allow-failed-read s1 --gate 1,2 "
                               '>"$port"'])
        # The text as the guest reads it, in a real initramfs: the same lines.
        tmp = tempfile.mkdtemp()
        with open(os.path.join(tmp, "initramfs.cpio.gz"), "wb") as f:
            f.write(gzip.compress(b""))
        initrd = guest.build_initrd(tmp, sh, tmp, files={f"{fresh.GUEST_DIR}/seeded":
                                                         fresh.program_text(prep)})
        with open(initrd, "rb") as f:
            data = f.read()
        listing = subprocess.run(["cpio", "-i", "--to-stdout", f"{fresh.GUEST_DIR}/seeded"],
                                 input=data[data.index(b"070701"):], capture_output=True,
                                 timeout=30)
        self.assertEqual(listing.stdout.decode().splitlines(), [t for t, _ in prep.lines])
        gated = devices.gated_rules(prep.bound, prep.rules)
        self.assertEqual(gated["nvme0"][0], "bad: write state=1 every=3 count=64 corrupt")
        self.assertEqual(gated["sync-irq"][1:], list(devices.GATE_RULES))


if __name__ == "__main__":
    unittest.main()
