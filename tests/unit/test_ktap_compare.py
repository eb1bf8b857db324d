"""scripts/ktap-compare: two sets of run directories compared with every
number masked; what differs besides numbers (a result, a name, a line) is
reported and fails; bad input is one line and exit 2."""

import json
import os
import subprocess
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(TOP, "scripts", "ktap-compare")

KTAP = """KTAP version 1
1..2
# swaptest heal mem=100663296 seed=5
ok 1 memcg swaptest created and joined (memory.max 50331648)
# heal pass 1 redirtied_written 27 memory.current 1363968
# heal pass 2 redirtied_written 30 memory.current 1363000
# elapsed 41.3s
ok 2 filled 24576 pages and reclaimed
"""


def write_run(top, scenario, seed, ktap):
    run = os.path.join(top, f"20261203-120000-{scenario}-{seed}")
    os.makedirs(run)
    with open(os.path.join(run, "run.json"), "w") as f:
        json.dump({"scenario": scenario, "seed": seed}, f)
    with open(os.path.join(run, "ktap.log"), "w") as f:
        f.write(ktap)


def compare(a, b):
    return subprocess.run([SCRIPT, a, b], capture_output=True, text=True)


class KtapCompare(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.a = os.path.join(self.tmp.name, "a")
        self.b = os.path.join(self.tmp.name, "b")
        write_run(self.a, "heal", 1, KTAP)

    def tearDown(self):
        self.tmp.cleanup()

    def test_numbers_and_repeats_masked(self):
        # Other values, a hex number, one heal pass less: the same shape.
        other = KTAP.replace("27", "0x1b").replace("41.3", "9.0").replace("24576", "12")
        other = other.replace("# heal pass 2 redirtied_written 30 memory.current 1363000\n", "")
        write_run(self.b, "heal", 1, other)
        r = compare(self.a, self.b)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("1 same, 0 differ", r.stdout)

    def test_result_change_differs(self):
        write_run(self.b, "heal", 1, KTAP.replace("ok 2 filled", "not ok 2 filled"))
        r = compare(self.a, self.b)
        self.assertEqual(r.returncode, 1)
        self.assertIn("-ok N filled N pages and reclaimed", r.stdout)
        self.assertIn("+not ok N filled N pages and reclaimed", r.stdout)

    def test_renamed_diagnostic_differs(self):
        write_run(self.b, "heal", 1, KTAP.replace("# elapsed", "# took"))
        self.assertEqual(compare(self.a, self.b).returncode, 1)

    def test_unpaired_run_differs(self):
        write_run(self.b, "heal", 1, KTAP)
        write_run(self.b, "heal", 2, KTAP)
        r = compare(self.a, self.b)
        self.assertEqual(r.returncode, 1)
        self.assertIn("only after: heal seed 2", r.stdout)

    def test_bad_input(self):
        r = compare(self.a, os.path.join(self.tmp.name, "missing"))
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        os.makedirs(self.b)
        r = compare(self.a, self.b)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no runs", r.stderr)
        self.assertEqual(subprocess.run([SCRIPT], capture_output=True).returncode, 2)


if __name__ == "__main__":
    unittest.main()
