"""Unit tests of the launcher's scenario loader, KTAP parser and judging."""

import importlib.machinery
import importlib.util
import os
import sys
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "scripts"))

import flscenario  # noqa: E402
import flvm  # noqa: E402

loader = importlib.machinery.SourceFileLoader("faultline", os.path.join(TOP, "scripts", "faultline"))
spec = importlib.util.spec_from_loader("faultline", loader)
faultline = importlib.util.module_from_spec(spec)
loader.exec_module(faultline)


def scenario(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    f.write(text)
    f.close()
    try:
        return flscenario.load(f.name)
    finally:
        os.unlink(f.name)


MINIMAL = '[[test]]\nrun = "swapstress"\n'


class ScenarioTest(unittest.TestCase):
    def test_every_shipped_scenario_loads(self):
        for name in os.listdir(flscenario.SCENARIO_DIR):
            if name.endswith(".toml"):
                sc = flscenario.load(name[:-5])
                self.assertTrue(sc.tests, name)
                self.assertTrue(sc.description, name)

    def test_defaults(self):
        sc = scenario(MINIMAL)
        self.assertEqual(sc.device.kind, "nvme")
        self.assertEqual(sc.device.size_bytes, 1 << 30)
        self.assertEqual(sc.timeout_s, 300)

    def test_errors_name_the_key(self):
        cases = [
            ("[vm]\nmemroy = '1G'\n" + MINIMAL, "unknown key 'memroy'"),
            ("[device]\nkind = 'scsi'\n" + MINIMAL, "device.kind 'scsi'"),
            ("[device]\nsize = '2X'\n" + MINIMAL, "bad size '2X'"),
            ("[device]\ncompletion = 'soon'\n" + MINIMAL, "device.completion 'soon'"),
            ("timeout = 'forever'\n" + MINIMAL, "bad duration 'forever'"),
            ("[vm]\ncpus = '2'\n" + MINIMAL, "vm.cpus must be a int"),
            ("description = 'x'\n", "no [[test]]"),
            ("[[test]]\nrun = ''\n", "needs run"),
            ("[expect]\nrule_hit_min = {}\n" + MINIMAL, "unknown key 'rule_hit_min'"),
            ("[vm\n", "Expected ']'"),
        ]
        for text, msg in cases:
            with self.assertRaises(flscenario.ScenarioError) as cm:
                scenario(text)
            self.assertIn(msg, str(cm.exception), text)

    def test_unknown_scenario_lists_known(self):
        with self.assertRaises(flscenario.ScenarioError) as cm:
            flscenario.load("no-such-scenario")
        self.assertIn("smoke", str(cm.exception))


class KtapTest(unittest.TestCase):
    def test_counts_and_diag(self):
        k = flvm.parse_ktap(
            "KTAP version 1\n1..4\nok 1 a\nnot ok 2 b\nok 3 c # SKIP no device\n"
            "not ok 4 d # XFAIL stock kernel\n# vmstat pswpout 10\n# vmstat pswpout 5\n"
            "# note without number x\n")
        self.assertEqual((k["ok"], k["not_ok"], k["skip"], k["xfail"]), (1, 1, 1, 1))
        self.assertEqual(k["diag"]["vmstat pswpout"], 15)
        self.assertEqual(k["failures"], ["not ok 2 b"])

    def test_bail_out_is_failure(self):
        k = flvm.parse_ktap("Bail out! no device\n")
        self.assertTrue(k["bail"])


class ExpectTest(unittest.TestCase):
    def test_expectations(self):
        sc = scenario(MINIMAL + '[expect]\nvmstat_min = { pswpout = 10 }\n'
                      'kernel_log = ["Write-error on swap-device"]\n'
                      'rule_hits_min = { wfail = 1 }\n')
        k = {"diag": {"vmstat pswpout": 9}}
        problems = flscenario.check_expectations(sc, k, "", [{"name": "wfail", "hits": 0}])
        self.assertEqual(len(problems), 3, problems)
        k = {"diag": {"vmstat pswpout": 10}}
        console = "[ 1.0] Write-error on swap-device (259:0:123)\n"
        self.assertEqual(flscenario.check_expectations(
            sc, k, console, {"rules": [{"name": "wfail", "hits": 3}]}), [])

    def test_console_health(self):
        crash, splats = flvm.console_health("Kernel panic - not syncing\n")
        self.assertTrue(crash)
        crash, splats = flvm.console_health("module: loading out-of-tree module taints kernel.\n")
        self.assertEqual((crash, splats), ([], []))


if __name__ == "__main__":
    unittest.main()
