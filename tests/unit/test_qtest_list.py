"""The qtest suite runs every qtest scripts/build-qemu builds: the tests
meson registers in suites qtest and asan are the tests/qtest/*-test.c files
(plus upstream's qos tests), as configured in the build directory argv[1]."""

import glob
import json
import os
import subprocess
import sys
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(TOP, "build")


class QtestListTest(unittest.TestCase):
    def test_every_qtest_file_is_a_test(self):
        files = {os.path.basename(p)[:-2]
                 for p in glob.glob(os.path.join(TOP, "tests", "qtest", "*-test.c"))}
        self.assertTrue(files)
        out = subprocess.run(["meson", "introspect", "--tests", BUILD], capture_output=True,
                             text=True, check=True).stdout
        tests = json.loads(out)
        for suite, prefix in (("qtest", ""), ("asan", "asan-")):
            names = {t["name"][len(prefix):] for t in tests
                     if any(s.endswith(":" + suite) for s in t["suite"])
                     and t["name"].startswith(prefix)}
            names = {n for n in names if not n.startswith("qos-") and n != "build"}
            self.assertEqual(names, files, suite)


if __name__ == "__main__":
    unittest.main()
