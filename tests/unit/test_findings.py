"""Kernel findings (docs/findings.md): every findings/NAME/finding.toml of
the repository reads with all its fields, its program passes the checker
(and `prog run`'s device set); a malformed finding is one line naming its
file; the replay loop records each kernel's replays; records of replays render as the
docs table, and the kind is one `faultline docs` knows."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.cli.commands import TABLE_KINDS
from faultline.errors import SetupError
from faultline.findings import command, finding
from faultline.prog.check import check
from faultline.prog.lang import read
from faultline.results import records

FAULTLINE = os.path.join(TOP, "scripts", "faultline")
GOOD = """title = "t"
kernel = "default"
class = "kernel-bug"
found_by = "b1-0105"
symptom = "swapoff hangs"
faults = "none"
upstream = "searched, nothing"
"""


def replay(verdict="fail", **over):
    """The fields a replay measures, as command.replay returns them."""
    rec = {"kernel_key": "debian:6.12.118+deb12-amd64", "qemu_build": "q1",
           "guest_build": "g1", "seed": 1, "deterministic": False, "verdict": verdict,
           "elapsed_s": 190.2, "time_to_failure_s": None if verdict == "pass" else 120.8,
           "signature": None if verdict == "pass" else "swapoff swapoff timeout",
           "reason": None, "kernel_release": "6.12.118+deb12-amd64", "date": "2026-12-07",
           "faultline": "abc1234", "digest": "0123456789abcdef",
           "repro_exit": 0 if verdict == "pass" else 1,
           "repro_finding": None if verdict == "pass" else "swapoff line=10 why=timeout"}
    rec.update(over)
    return rec


class RepositoryFindingsTest(unittest.TestCase):
    def test_every_finding_reads_and_checks(self):
        names = finding.names()
        self.assertTrue(names, "findings/ holds no finding")
        for f in finding.load_all():
            with self.subTest(finding=f.name):
                self.assertEqual(set(f.fields), set(finding.FIELDS))
                self.assertTrue(all(v.strip() for v in f.fields.values()))
                self.assertIn(f.fields["class"], finding.CLASSES)
                check(read(f.program))          # the prog checker
                command.check_program(f)        # and prog run's device set

    def test_the_command_checks_them_all(self):
        p = subprocess.run([FAULTLINE, "findings", "--check"], capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        p = subprocess.run([FAULTLINE, "findings", "no-such-finding", "--check"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn("no finding 'no-such-finding'", p.stderr)


class FolderCase(unittest.TestCase):
    """A findings directory with one finding x (the repository's first
    finding's program) and no finding.toml yet."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="fl-findings-")
        self.folder = os.path.join(self.dir, "x")
        os.makedirs(self.folder)
        src = finding.load_all()[0]
        shutil.copyfile(src.program, os.path.join(self.folder, "program.prog"))

    def tearDown(self):
        shutil.rmtree(self.dir)


class MalformedFindingTest(FolderCase):
    def error(self, toml):
        with open(os.path.join(self.folder, "finding.toml"), "w") as f:
            f.write(toml)
        with self.assertRaises(SetupError) as cm:
            finding.load("x", self.dir)
        msg = str(cm.exception)
        self.assertNotIn("\n", msg)
        self.assertTrue(msg.startswith(os.path.join(self.folder, "finding.toml") + ": ")
                        or msg.startswith(os.path.join(self.folder)), msg)
        return msg

    def test_good_reads(self):
        with open(os.path.join(self.folder, "finding.toml"), "w") as f:
            f.write(GOOD)
        f = finding.load("x", self.dir)
        self.assertEqual(f.kernels, ["default"])
        self.assertIsNone(finding.kernel_arg(f.kernels[0]))
        self.assertEqual(f.fields["symptom"], "swapoff hangs")
        with open(os.path.join(self.folder, "finding.toml"), "w") as fh:
            fh.write(GOOD + 'also_on = ["debian-7.2"]\n')
        f = finding.load("x", self.dir)
        self.assertEqual(f.kernels, ["default", "debian-7.2"])
        self.assertEqual(finding.record(f, "debian-7.2", replay(kernel_release="7.2.13+"))
                         ["kernel"], "debian-7.2")

    def test_each_defect_is_one_line(self):
        self.assertIn("not TOML", self.error("title = \n"))
        self.assertIn("no field 'symptom'", self.error(GOOD.replace('symptom = "swapoff hangs"\n',
                                                                   "")))
        self.assertIn("field 'faults' must be a non-empty string",
                      self.error(GOOD.replace('faults = "none"', 'faults = ""')))
        self.assertIn("unknown field 'seed'", self.error(GOOD + "seed = 3\n"))
        self.assertIn("class 'flaky'", self.error(GOOD.replace('"kernel-bug"', '"flaky"')))
        self.assertIn("not a path", self.error(GOOD.replace('"default"', '"/boot/vmlinuz"')))
        self.assertIn("also_on must be a list", self.error(GOOD + 'also_on = "debian-7.2"\n'))
        self.assertIn("named twice", self.error(GOOD + 'also_on = ["default"]\n'))
        os.remove(os.path.join(self.folder, "program.prog"))
        self.assertIn("program.prog: no such file", self.error(GOOD))
        os.remove(os.path.join(self.folder, "finding.toml"))
        with self.assertRaises(SetupError) as cm:
            finding.load("x", self.dir)
        self.assertIn("finding.toml: no such file", str(cm.exception))


class ReplayLoopTest(FolderCase):
    """command.run with the builds and the VM replaced: every kernel of a
    finding replayed and recorded, a kernel of also_on that is not built
    skipped (one line), the finding's own kernel not built refused."""

    def run_with(self, toml, qemu="q1", guest="g1"):
        with open(os.path.join(self.folder, "finding.toml"), "w") as f:
            f.write(toml)
        results = os.path.join(self.dir, "results", "findings", "s.jsonl")
        replayed = []

        def fake_replay(f, builds, image, modules, out, quiet, key):
            replayed.append(key)
            return replay(kernel_key=key, qemu_build=qemu, guest_build=guest)
        with mock.patch.object(command, "build_all", lambda *a: None), \
                mock.patch.object(command, "identity", lambda b, image: (qemu, guest, "k1")), \
                mock.patch.object(command, "replay", fake_replay):
            status = command.run(["x"], results=results, out=self.dir, quiet=True,
                                 findings_dir=self.dir)
        return status, replayed, records.read_set(results, finding.RECORD_FIELDS)

    def test_replays_are_recorded_and_a_kernel_not_built_is_skipped(self):
        status, replayed, recs = self.run_with(GOOD + 'also_on = ["no-such-kernel-x"]\n')
        self.assertEqual((status, replayed), (0, ["k1"]))
        self.assertEqual([(r["subject"], r["kernel"], r["found_on"], r["verdict"])
                          for r in recs], [("x", "default", "default", "fail")])
        self.assertEqual((recs[0]["digest"], recs[0]["repro_exit"]), ("0123456789abcdef", 1))

    def test_a_reproducer_that_passes_fails_the_command(self):
        def fake_replay(f, builds, image, modules, out, quiet, key):
            return replay(kernel_key=key, repro_exit=0, repro_finding=None)
        with open(os.path.join(self.folder, "finding.toml"), "w") as f:
            f.write(GOOD)
        with mock.patch.object(command, "build_all", lambda *a: None), \
                mock.patch.object(command, "identity", lambda b, image: ("q1", "g1", "k1")), \
                mock.patch.object(command, "replay", fake_replay):
            status = command.run(["x"], results=os.path.join(self.dir, "r", "f", "s.jsonl"),
                                 out=self.dir, quiet=True, findings_dir=self.dir)
        self.assertEqual(status, 1)

    def test_a_replay_on_another_build_replaces_the_findings_records(self):
        self.run_with(GOOD)
        _, _, recs = self.run_with(GOOD, qemu="q2", guest="g2")
        self.assertEqual([(r["subject"], r["qemu_build"], r["guest_build"]) for r in recs],
                         [("x", "q2", "g2")])

    def test_its_own_kernel_not_built_is_one_line(self):
        with self.assertRaises(SetupError) as cm:
            self.run_with(GOOD.replace('"default"', '"no-such-kernel-x"'))
        self.assertIn("finding.toml: --kernel no-such-kernel-x: no such file", str(cm.exception))


class RenderTest(unittest.TestCase):
    def records(self):
        f = finding.Finding("swapoff-x", "/nowhere", {
            "title": "swapoff | hangs", "kernel": "default", "class": "kernel-bug",
            "found_by": "program b1-0105,\nseed 1104", "symptom": "no return in 120 s",
            "faults": "none", "upstream": "no fix found"})
        g = finding.Finding("gone-y", "/nowhere", dict(f.fields, title="fixed one",
                                                       kernel="debian-7.2"))
        recs = []
        k72 = {"kernel_release": "7.2.13+", "kernel_key": "a519ac5f2c4e6967",
               "guest_build": "g72"}
        for fd, kernel, rep in ((f, "debian-7.2", replay(time_to_failure_s=121.3, **k72)),
                                (f, "default", replay()),
                                (g, "debian-7.2", replay("pass", **k72))):
            recs.append({"subject": fd.name, **rep, **fd.fields, "found_on": fd.fields["kernel"],
                         "kernel": kernel})
        for r in recs:
            records.check_record(r, finding.RECORD_FIELDS)
        return recs

    def test_the_table(self):
        text = finding.render(self.records(), "results/findings/default.jsonl")
        lines = text.splitlines()
        head = [i for i, ln in enumerate(lines) if ln.startswith("| finding |")]
        self.assertEqual(len(head), 1)
        self.assertEqual(lines[head[0]], "| finding | kernel | symptom | found by | faults "
                         "| replay | upstream |")
        rows = lines[head[0] + 2:]
        self.assertEqual(len(rows), 2)                  # a row per finding, by name
        self.assertIn("[fixed one](../findings/gone-y/) (`gone-y`)", rows[0])
        self.assertIn("| debian-7.2 (7.2.13+) |", rows[0])
        self.assertIn("debian-7.2: pass (did not show it)", rows[0])
        self.assertIn("[swapoff \\| hangs](../findings/swapoff-x/) (`swapoff-x`)", rows[1])
        # the kernel it was found on first, then the others
        self.assertIn("| default (6.12.118+deb12-amd64); debian-7.2 (7.2.13+), also |",
                      rows[1])
        self.assertIn("program b1-0105, seed 1104", rows[1])       # one line a cell
        self.assertIn("default: fail after 121 s (190 s with the boot): `swapoff swapoff "
                      "timeout`; C reproducer exit 1 (`finding swapoff line=10 why=timeout`), "
                      "2026-12-07; debian-7.2: fail after 121 s", rows[1])
        self.assertIn("pass (did not show it) in 190 s; C reproducer exit 0, ", rows[0])
        for row in rows:
            self.assertEqual(row.count(" | "), 6, row)  # seven cells, no stray |

    def test_empty_set_and_the_docs_kind(self):
        self.assertIn("No finding replayed yet", finding.render([], "results/findings/x.jsonl"))
        self.assertIs(TABLE_KINDS["findings"][1], finding.render)
        self.assertEqual(TABLE_KINDS["findings"][0], finding.RECORD_FIELDS)

    def test_a_set_of_them_is_written_and_read_back(self):
        d = tempfile.mkdtemp(prefix="fl-findings-set-")
        try:
            path = os.path.join(d, "findings", "s.jsonl")
            recs = self.records()
            records.write_set(path, recs, command.IDENTITY, finding.RECORD_FIELDS)
            back = records.read_set(path, finding.RECORD_FIELDS)
            self.assertEqual([(r["subject"], r["kernel"]) for r in back],
                             [("gone-y", "debian-7.2"), ("swapoff-x", "debian-7.2"),
                              ("swapoff-x", "default")])
            other = dict(recs[0], qemu_build="q2")
            with self.assertRaises(SetupError):
                records.write_set(path, [other], command.IDENTITY, finding.RECORD_FIELDS)
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    sys.exit(unittest.main())
