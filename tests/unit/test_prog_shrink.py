"""`faultline prog minimize` (python/faultline/execute/shrink.py) without a VM:
what "the same failure" means (a crash again, or a finding of the same
check and why), which program of a run directory it takes, and the one-line
refusals before any build or boot.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.errors import SetupError  # noqa: E402
from faultline.execute import shrink  # noqa: E402
from faultline.execute.session import Outcome  # noqa: E402

FAULTLINE = os.path.join(TOP, "scripts", "faultline")


def fake_run(top, verdicts):
    """A prog run directory with programs NAME: (verdict, findings)."""
    rundir = os.path.join(top, "run")
    os.makedirs(rundir)
    with open(os.path.join(rundir, "run.json"), "w") as f:
        json.dump({"command": "prog run", "programs": list(verdicts), "seed": 3,
                   "mutate": None, "argv": ["faultline", "prog", "run", "x"]}, f)
    for name, (verdict, findings) in verdicts.items():
        d = os.path.join(rundir, "programs", name)
        os.makedirs(d)
        with open(os.path.join(d, "program.prog"), "w") as f:
            f.write("anon a 1M\nwrite a 0 1M v=1\nread a 0 1M\n")
        with open(os.path.join(d, "result.json"), "w") as f:
            json.dump({"name": name, "verdict": verdict, "findings": findings, "ops": 3,
                       "ops_run": 3, "faults": {}}, f)
    return rundir


class SameFailureTest(unittest.TestCase):
    def test_signature(self):
        self.assertEqual(shrink.signature({"verdict": "crash", "findings": []}), ("crash",))
        r = {"verdict": "fail", "findings": [{"check": "leak", "why": "swap-used"},
                                             {"check": "content"}]}
        self.assertEqual(shrink.signature(r), ("leak", "swap-used"))

    def test_same_failure(self):
        sig = ("content", None)
        fail = Outcome("p", "fail", findings=[{"check": "leak", "why": "shmem"},
                                              {"check": "content", "page": "3"}])
        self.assertTrue(shrink.same_failure(sig, fail))
        self.assertFalse(shrink.same_failure(("leak", "swap-used"), fail))
        self.assertFalse(shrink.same_failure(sig, Outcome("p", "pass")))
        self.assertFalse(shrink.same_failure(sig, Outcome("p", "crash", "no ops-done")))
        self.assertTrue(shrink.same_failure(("crash",), Outcome("p", "crash", "panic")))
        self.assertFalse(shrink.same_failure(("crash",), fail))

    def test_recorded_flag(self):
        argv = ["faultline", "prog", "run", "d", "--kernel", "/k/bzImage", "--seed", "2"]
        self.assertEqual(shrink.recorded_flag(argv, "--kernel"), "/k/bzImage")
        self.assertIsNone(shrink.recorded_flag(argv, "--modules"))
        self.assertIsNone(shrink.recorded_flag(["x", "--kernel"], "--kernel"))


class PickTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="prog-shrink-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_pick(self):
        rundir = fake_run(self.tmp, {"a": ("pass", []), "b": ("fail", [{"check": "content"}]),
                                     "c": ("refused", [])})
        self.assertEqual(shrink.pick(rundir, None)[1]["name"], "b")
        self.assertEqual(shrink.pick(rundir, "b")[1]["name"], "b")
        for name, why in (("a", "did not fail"), ("zz", "no program 'zz'")):
            with self.assertRaises(SetupError) as e:
                shrink.pick(rundir, name)
            self.assertIn(why, str(e.exception))

    def test_two_failures_need_a_name(self):
        rundir = fake_run(self.tmp, {"a": ("crash", []), "b": ("fail", [{"check": "content"}])})
        with self.assertRaises(SetupError) as e:
            shrink.pick(rundir, None)
        self.assertIn("failed or crashed: a, b", str(e.exception))

    def test_command_refuses_in_one_line(self):
        rundir = fake_run(self.tmp, {"a": ("pass", [])})
        for argv in ([rundir], [rundir, "a"], [os.path.join(self.tmp, "nowhere")]):
            with self.subTest(argv=argv):
                res = subprocess.run([FAULTLINE, "prog", "minimize", *argv],
                                     capture_output=True, text=True, timeout=60)
                self.assertEqual(res.returncode, 2, res.stderr)
                self.assertEqual(len(res.stderr.strip().splitlines()), 1, res.stderr)
                self.assertEqual(res.stdout, "")


if __name__ == "__main__":
    unittest.main()
