"""Unit tests of the launcher's scenario loader, KTAP parser and judging."""

import argparse
import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
from unittest import mock
import xml.etree.ElementTree as ET

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline import cli, rules, scenario as flscenario
from faultline.build.builds import Builds
from faultline.errors import SetupError
from faultline.host import scratchdirs
from faultline.judge import judge, kernlog, mutate, report
from faultline.judge.ktap import parse_ktap
from faultline.judge.report import Report
from faultline.lab import compare, libvirtxml
from faultline.run import guest, inputs, runner, spec_builder
from faultline.run.options import RunOptions
from faultline.run.progress import Progress
from faultline.run.watch import WatchResult, watch
from faultline.vm import backends, machine


def scenario(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    f.write(text)
    f.close()
    try:
        return flscenario.load(f.name)
    finally:
        os.unlink(f.name)


def assert_scenario_errors(test, cases):
    """Each (scenario text, message) case fails to load, saying that message."""
    for text, msg in cases:
        with test.assertRaises(flscenario.ScenarioError) as cm:
            scenario(text)
        test.assertIn(msg, str(cm.exception), text)


def fake_bzimage(magic=b"HdrS"):
    """A file with the x86 boot header magic where a bzImage has it."""
    f = tempfile.NamedTemporaryFile("wb", suffix=".bzImage", delete=False)
    f.write(b"\0" * 0x202 + magic + b"\0" * 64)
    f.close()
    return f.name


def cli_main(argv):
    """(exit status, stderr lines, stdout) of the CLI run in this process."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        st = cli.main(argv)
    return st, err.getvalue().strip().splitlines(), out.getvalue()


def run_report(**fields):
    return Report(scenario="s", seed=1, status=0, outcome="pass", reason="pass", **fields)


MINIMAL = '[[test]]\nrun = "swapstress"\n'


def with_rules_file(rules_text):
    """s.toml with one inline rule and rules_file r.rules holding @rules_text."""
    d = tempfile.mkdtemp()
    with open(os.path.join(d, "r.rules"), "w") as f:
        f.write(rules_text)
    path = os.path.join(d, "s.toml")
    with open(path, "w") as f:
        f.write('[faults]\nrules = "a: write nth=1 error=eio"\nrules_file = "r.rules"\n'
                + MINIMAL)
    return path


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
            ("[device]\nkind = 'scsi'\n" + MINIMAL,
             "device.kind 'scsi' (expected nvme, syncblk, virtio-blk or virtio-scsi)"),
            ("[device]\nsize = '2X'\n" + MINIMAL, "bad size '2X'"),
            ("[device]\ncompletion = 'soon'\n" + MINIMAL, "device.completion 'soon'"),
            ("timeout = 'forever'\n" + MINIMAL, "bad duration 'forever'"),
            ("[vm]\ncpus = '2'\n" + MINIMAL, "vm.cpus must be a int"),
            ("[vm]\ntools = ['vim']\n" + MINIMAL, "vm.tools ['vim'] (expected a list of: fio"),
            ("[vm]\ntools = 'fio'\n" + MINIMAL, "vm.tools must be a list"),
            ("description = 'x'\n", "no [[test]]"),
            ("[[test]]\nrun = ''\n", "needs run"),
            ("[expect]\nrule_hit_min = {}\n" + MINIMAL, "unknown key 'rule_hit_min'"),
            ("[vm\n", "Expected ']'"),
        ]
        assert_scenario_errors(self, cases)

    def test_tools_select_the_guest_image(self):
        plain = Builds("/q", "/g")
        self.assertIs(plain.for_scenario(scenario(MINIMAL)), plain)
        sc = scenario("[vm]\ntools = ['nvme-cli', 'fio']\n" + MINIMAL)
        self.assertEqual(sc.vm.tools, ["nvme-cli", "fio"])
        mine = Builds("/q", "/g", kernel_src="/k")
        with mock.patch("faultline.build.builds.guest_dir", return_value="/g-tools") as gd:
            tooled = mine.for_scenario(sc)
            self.assertEqual(tooled.guest_dir, "/g-tools")
            # Applied twice (a command, then the spec builder): one build.
            self.assertIs(tooled.for_scenario(sc), tooled)
        gd.assert_called_once_with("/k", None, ("nvme-cli", "fio"))
        # A scenario without tools on the tooled image boots the plain one.
        self.assertEqual(tooled.for_scenario(scenario(MINIMAL)).guest_dir, "/g")

    def test_every_command_boots_the_scenarios_tools(self):
        """The spec builder applies the scenario's tools: `libvirt-xml
        nvme-fio-verify` (and run, cmdline, lava, bench) boots an image
        with fio, not the plain one."""
        sc = flscenario.load(os.path.join(TOP, "scenarios", "nvme-fio-verify.toml"))
        self.assertIn("fio", sc.vm.tools)
        with tempfile.TemporaryDirectory() as d, \
                mock.patch("faultline.build.builds.guest_dir", return_value="/g-fio") as gd, \
                mock.patch("faultline.run.guest.prepare", return_value="/i") as prep:
            with mock.patch("faultline.lab.libvirtxml.validate_xml", return_value=None):
                path = libvirtxml.write_inputs(sc, Builds("/q", "/g"), d, 1, False)
            with open(path) as f:
                xml = f.read()
        gd.assert_called_once_with(None, None, tuple(sc.vm.tools))
        self.assertEqual(prep.call_args[0][1], "/g-fio")
        self.assertIn("<kernel>/g-fio/vmlinuz</kernel>", xml)

    def test_unknown_scenario_points_to_list(self):
        with self.assertRaises(flscenario.ScenarioError) as cm:
            flscenario.load("no-such-scenario")
        self.assertEqual(str(cm.exception),
                         "no scenario 'no-such-scenario': `faultline list` shows them")


class QmpActionTest(unittest.TestCase):
    def test_parsed_in_order(self):
        sc = scenario(MINIMAL + '[[qmp]]\nwhen = "ok 3"\nexecute = "device_del"\n'
                      'arguments = { id = "swapdev" }\n'
                      '[[qmp]]\nwhen = "nvme"\nexecute = "stop"\nsource = "console"\n')
        self.assertEqual([(a.when, a.execute, a.arguments, a.source) for a in sc.qmp],
                         [("ok 3", "device_del", {"id": "swapdev"}, "ktap"),
                          ("nvme", "stop", {}, "console")])

    def test_errors_are_one_line(self):
        for text, msg in (
                ('qmp = "device_del"\n', "qmp must be an array of tables"),
                ('[[qmp]]\nexecute = "stop"\n', '[[qmp]] #1 needs when = "..."'),
                ('[[qmp]]\nwhen = "x"\nexecute = ""\n', '[[qmp]] #1 needs execute'),
                ('[[qmp]]\nwhen = "x"\nexecute = "stop"\nsource = "dmesg"\n',
                 "source 'dmesg' (expected ktap or console)"),
                ('[[qmp]]\nwhen = "x"\nexecute = "stop"\narguments = "id"\n',
                 "arguments must be a table"),
                ('[[qmp]]\nwhen = "x"\nexecute = "stop"\nat = 3\n', "unknown key 'at'")):
            with self.assertRaises(flscenario.ScenarioError) as cm:
                scenario(text + MINIMAL if text.startswith("qmp") else MINIMAL + text)
            self.assertIn(msg, str(cm.exception))
            self.assertNotIn("\n", str(cm.exception))


class KtapTest(unittest.TestCase):
    def test_counts_and_diag(self):
        k = parse_ktap(
            "KTAP version 1\n1..4\nok 1 a\nnot ok 2 b\nok 3 c # SKIP no device\n"
            "not ok 4 d # XFAIL stock kernel\n# vmstat pswpout 10\n# vmstat pswpout 5\n"
            "# note without number x\n")
        self.assertEqual((k["ok"], k["not_ok"], k["skip"], k["xfail"]), (1, 1, 1, 1))
        self.assertEqual(k["diag"]["vmstat pswpout"], 15)
        self.assertEqual(k["failures"], ["not ok 2 b"])

    def test_detail_lines(self):
        # '# NAME: detail' before result NAME is its detail, not a diagnostic;
        # the same shape before another line stays a diagnostic.
        k = parse_ktap("# a: pswpout +40960\nok 1 a\n# b: 3 bad, 0 SIGBUS 5\nnot ok 2 b\n"
                       "# c: 7\nok 3 other\n# swapctx: x exited 0\n# vmstat pswpout 2\n")
        self.assertEqual([(r["name"], r["detail"]) for r in k["results"]],
                         [("a", "pswpout +40960"), ("b", "3 bad, 0 SIGBUS 5"), ("other", "")])
        self.assertEqual(k["diag"], {"c:": 7, "swapctx: x exited": 0, "vmstat pswpout": 2})
        self.assertEqual(k["failures"], ["not ok 2 b: 3 bad, 0 SIGBUS 5"])

    def test_bail_out_is_failure(self):
        k = parse_ktap("Bail out! no device\n")
        self.assertTrue(k["bail"])


class ExpectTest(unittest.TestCase):
    def test_expectations(self):
        sc = scenario(MINIMAL + '[expect]\nvmstat_min = { pswpout = 10 }\n'
                      'kernel_log = ["Write-error on swap-device"]\n'
                      'rule_hits_min = { wfail = 1 }\n')
        k = {"diag": {"vmstat pswpout": 9}}
        problems = judge.check_expectations(sc, k, "", [{"name": "wfail", "hits": 0}])
        self.assertEqual(len(problems), 3, problems)
        k = {"diag": {"vmstat pswpout": 10}}
        console = "[ 1.0] Write-error on swap-device (259:0:123)\n"
        self.assertEqual(judge.check_expectations(
            sc, k, console, {"rules": [{"name": "wfail", "hits": 3}]}), [])

    def test_fault_log_only(self):
        sc = scenario(MINIMAL + '[expect]\nfault_log_only = { sq = 2 }\n')
        k = {"diag": {}}
        good = ['{"seq":0,"ordinal":3,"op":"write","lba":8,"len":8,"sq":2,"rule":"q"}',
                '{"seq":1,"ordinal":5,"op":"write","lba":16,"len":8,"sq":2,"rule":"q"}']
        self.assertEqual(judge.check_expectations(sc, k, "", {}, good), [])
        bad = good + ['{"seq":2,"ordinal":6,"op":"write","lba":0,"len":8,"sq":1,"rule":"q"}',
                      '{"seq":3,"ordinal":7,"op":"write","lba":0,"len":8,"rule":"q"}']
        self.assertEqual(judge.check_expectations(sc, k, "", {}, bad),
                         ["fault log entry not sq=2: seq 2 has sq=1",
                          "fault log entry not sq=2: seq 3 has sq=None"])
        self.assertEqual(judge.check_expectations(sc, k, "", {}, ['{"lost":3}']),
                         ["fault log has no entry (expected only sq=2)"])
        for bad_toml in ('fault_log_only = 2\n', 'fault_log_only = {}\n',
                         'fault_log_only = { sq = true }\n'):
            with self.assertRaises(flscenario.ScenarioError, msg=bad_toml):
                scenario(MINIMAL + '[expect]\n' + bad_toml)

    def test_console_health(self):
        crash, splats = judge.console_health("Kernel panic - not syncing\n")
        self.assertTrue(crash)
        crash, splats = judge.console_health("module: loading out-of-tree module taints kernel.\n")
        self.assertEqual((crash, splats), ([], []))


class CmdlineTest(unittest.TestCase):
    def build(self, text, deterministic=False, seed=5):
        sc = scenario(text)
        spec = spec_builder.make_spec(sc, Builds("/q", "/g"), rundir="/run", scratch="/s",
                                      seed=seed, deterministic=deterministic,
                                      kernel="/k/vmlinuz", initrd="/s/initrd")
        return sc, spec.qemu_argv("/s/qmp.sock")

    def test_nvme_with_rules(self):
        sc, q = self.build('[faults]\nrules = "w: write nth=3 error=eio"\n' + MINIMAL)
        self.assertEqual(q[0], "/q/bin/qemu-system-x86_64")
        obj = q[q.index("-object") + 1]
        self.assertIn("fault-injector,id=fi0,rules=/run/rules.txt,seed=5,", obj)
        self.assertIn("log=/run/faults.jsonl", obj)
        dev = q[q.index("-device") + 1]
        self.assertEqual(dev, "nvme,serial=faultline0,drive=disk0,fault-injector=fi0")
        self.assertEqual(q[q.index("-smp") + 1], "2")
        self.assertNotIn("-icount", q)
        append = q[q.index("-append") + 1]
        self.assertIn("sysrq_always_enabled", append)
        self.assertIn("oops=panic", append)
        self.assertTrue(append.endswith("transparent_hugepage=never"))

    def test_syncblk_without_rules(self):
        sc, q = self.build('[device]\nkind = "syncblk"\ncompletion = "irq"\n'
                           'extra = "timeout-ms=500"\n' + MINIMAL)
        self.assertNotIn("-object", q)
        self.assertEqual(q[q.index("-device") + 1],
                         "syncblk-pci,drive=disk0,completion=irq,timeout-ms=500")

    def test_deterministic(self):
        sc, q = self.build('[vm]\ncpus = 1\n[device]\nkind = "syncblk"\n' + MINIMAL,
                           deterministic=True)
        self.assertEqual(q[q.index("-icount") + 1], "shift=4,sleep=off,align=off")
        self.assertEqual(q[q.index("-smp") + 1], "1")
        self.assertIn("base=2026-01-01T00:00:00,clock=vm", q)
        # No rules, still an injector: it switches the device's mode.
        self.assertEqual(q[q.index("-object") + 1],
                         "fault-injector,id=fi0,seed=5,log=/run/faults.jsonl,deterministic=on")
        self.assertTrue(q[q.index("-device") + 1].endswith(",fault-injector=fi0"))

    def test_virtio_blk_chain(self):
        sc, q = self.build('[device]\nkind = "virtio-blk"\n'
                           '[faults]\nrules = "w: write every=4 error=eio"\n' + MINIMAL)
        blockdevs = [q[i + 1] for i, a in enumerate(q) if a == "-blockdev"]
        self.assertEqual(blockdevs[1], "driver=fault-inject,node-name=fi-disk0,file=disk0,"
                                       "fault-injector=fi0")
        self.assertEqual(q[q.index("-device") + 1], "virtio-blk-pci,drive=fi-disk0,"
                         "serial=faultline0,werror=report,rerror=report")
        self.assertIn("modprobe virtio_blk", guest.make_run_sh(sc, 1))
        self.assertIn("swapdev=/dev/vda", guest.make_run_sh(sc, 1))
        # Without rules: no injector, no filter, the device on the disk.
        sc, q = self.build('[device]\nkind = "virtio-blk"\n' + MINIMAL)
        self.assertNotIn("-object", q)
        self.assertFalse([a for a in q if "fault-inject" in a])
        self.assertTrue(q[q.index("-device") + 1].startswith("virtio-blk-pci,drive=disk0,"))

    def test_hotplug_puts_the_device_on_a_root_port(self):
        sc, q = self.build('[device]\nhotplug = true\n' + MINIMAL)
        devs = [q[i + 1] for i, a in enumerate(q) if a == "-device"]
        self.assertEqual(devs, ["pcie-root-port,id=swaprp,chassis=1,slot=1",
                                "nvme,serial=faultline0,drive=disk0,bus=swaprp,id=swapdev"])
        sc, q = self.build('[device]\nkind = "virtio-blk"\nhotplug = true\n' + MINIMAL)
        self.assertTrue(q[q.index("-device") + 3].endswith(",bus=swaprp,id=swapdev"))
        with self.assertRaises(flscenario.ScenarioError) as cm:
            scenario('[device]\nkind = "virtio-scsi"\nhotplug = true\n' + MINIMAL)
        self.assertIn("not a PCI device", str(cm.exception))

    def test_hotplug_run_sh_skips_swapoff_of_a_removed_device(self):
        sc = scenario('[device]\nhotplug = true\n' + MINIMAL)
        run = guest.make_run_sh(sc, 1)
        self.assertIn("if [ -b $swapdev ]; then swapoff $swapdev || fail=1; else", run)
        self.assertNotIn("\nswapoff $swapdev || fail=1\n", run)
        self.assertIn("\nswapoff $swapdev || fail=1\n", guest.make_run_sh(scenario(MINIMAL), 1))

    def test_virtio_blk_refuses_lost_completions(self):
        kind = '[device]\nkind = "virtio-blk"\n'
        for rules, name in (("lost: write nth=3 drop", "lost"),
                            ("write every=2 error=eio\n# c\nwrite nth=9 error=timeout", "r1"),
                            ("t:write prob=0.1 drop # glued name", "t")):
            with self.assertRaises(flscenario.ScenarioError) as cm:
                scenario(kind + f'[faults]\nrules = """\n{rules}\n"""\n' + MINIMAL)
            msg = str(cm.exception)
            self.assertIn(f"rule '{name}' drops completions", msg)
            self.assertIn("virtio_blk has no request timeout", msg)
            self.assertNotIn("\n", msg)
        with self.assertRaises(flscenario.ScenarioError) as cm:
            scenario('[device]\nkind = "virtio-scsi"\n[faults]\nrules = "lost: write drop"\n'
                     + MINIMAL)
        self.assertIn("virtio_scsi re-arms the timer", str(cm.exception))
        # A rule that merely mentions drop in a comment is fine; NVMe may drop.
        scenario(kind + '[faults]\nrules = "w: write error=eio # no drop here"\n' + MINIMAL)
        scenario('[faults]\nrules = "lost: write nth=3 drop"\n' + MINIMAL)

    def test_controller_failure_nvme_only(self):
        for kind in ("syncblk", "virtio-blk", "virtio-scsi"):
            for rules, name in (("die: read nth=3 fatal", "die"),
                                ("write error=eio\nwrite nth=2 reset-fail=1", "r1")):
                with self.assertRaises(flscenario.ScenarioError) as cm:
                    scenario(f'[device]\nkind = "{kind}"\n[faults]\nrules = """\n{rules}\n"""\n'
                             + MINIMAL)
                msg = str(cm.exception)
                self.assertIn(f"rule '{name}' fails the controller", msg)
                self.assertIn('only kind = "nvme" has', msg)
                self.assertNotIn("\n", msg)
        # NVMe has a controller to fail; a comment mentioning it is no rule.
        scenario('[faults]\nrules = "die: read nth=3 fatal reset-fail=2"\n' + MINIMAL)
        scenario('[device]\nkind = "syncblk"\n[faults]\nrules = "w: write error=eio # not fatal"\n'
                 + MINIMAL)

    def test_virtio_scsi_chain(self):
        sc, q = self.build('[device]\nkind = "virtio-scsi"\n'
                           '[faults]\nrules = "w: write every=4 error=eio"\n' + MINIMAL)
        devices = [q[i + 1] for i, a in enumerate(q) if a == "-device"]
        self.assertEqual(devices, ["virtio-scsi-pci,id=scsi0",
                                   "scsi-hd,bus=scsi0.0,drive=fi-disk0,serial=faultline0,"
                                   "werror=report,rerror=report"])
        sh = guest.make_run_sh(sc, 1)
        self.assertLess(sh.index("modprobe virtio_scsi"), sh.index("modprobe sd_mod"))
        self.assertIn("swapdev=/dev/sda", sh)

    def test_deterministic_keeps_the_vcpus(self):
        # The scenario's vm.cpus (default 2), or --cpus: round-robin under icount.
        sc, q = self.build(MINIMAL, deterministic=True)
        self.assertEqual((q[q.index("-smp") + 1], q[q.index("-accel") + 1]), ("2", "tcg"))
        sc = flscenario.apply_overrides(scenario(MINIMAL), cpus=3)
        spec = spec_builder.make_spec(sc, Builds("/q", "/g"), rundir="/r", scratch="/s", seed=1,
                                      deterministic=True, accel="kvm", kernel="/k",
                                      initrd="/i", append="")
        self.assertEqual(spec.extra_args, ["-icount", "shift=4,sleep=off,align=off", "-smp",
                                           "3", "-rtc", "base=2026-01-01T00:00:00,clock=vm"])
        self.assertEqual(spec.accel, "tcg")

    def test_overrides(self):
        sc = flscenario.apply_overrides(scenario(MINIMAL), "1G", 4, "90s")
        self.assertEqual((sc.vm.memory, sc.vm.cpus, sc.timeout_s), ("1G", 4, 90))
        for bad in (("12Q", None, None), (None, 0, None), (None, None, "soon")):
            with self.assertRaises(flscenario.ScenarioError):
                flscenario.apply_overrides(scenario(MINIMAL), *bad)

    def test_run_sh(self):
        sc = scenario('[swap]\nzswap = true\n[[test]]\nrun = "a 1"\n[[test]]\nrun = "b"\n')
        sh = guest.make_run_sh(sc, 9)
        self.assertIn('echo "# seed 9"', sh)
        self.assertIn("echo Y > /sys/module/zswap/parameters/enabled", sh)
        self.assertLess(sh.index('"# test: a 1"'), sh.index('"# test: b"'))
        self.assertNotIn(sc.path, sh)   # same bytes wherever the scenario file lives
        self.assertIn("echo Y > /sys/module/zswap/parameters/shrinker_enabled", sh)
        self.assertNotIn("/zpool", sh)

    def test_run_sh_kcov(self):
        """[vm] kcov, or --kcov: the tests run with FAULTLINE_KCOV=1 (their
        coverage maps); without it, nothing changes."""
        self.assertNotIn("FAULTLINE_KCOV", guest.make_run_sh(scenario(MINIMAL), 1))
        sh = guest.make_run_sh(scenario("[vm]\nkcov = true\n" + MINIMAL), 1)
        self.assertLess(sh.index("export FAULTLINE_KCOV=1"), sh.index('"# test: '))
        sc = scenario(MINIMAL)
        with mock.patch.object(runner.scenario, "load", lambda name: sc):
            got = runner._load("x", RunOptions(kcov=True))
        self.assertTrue(got.vm.kcov)
        assert_scenario_errors(self, [('[vm]\nkcov = "yes"\n' + MINIMAL, "vm.kcov")])

    def test_run_sh_zpool_and_no_shrinker(self):
        # Pool-limit writeback on a kernel without the shrinker (6.1): the
        # pool is set before zswap is enabled, the shrinker is not touched.
        sc = scenario('[swap]\nzswap = true\nzpool = "zbud"\nshrinker = false\n' + MINIMAL)
        sh = guest.make_run_sh(sc, 1)
        self.assertLess(sh.index("echo zbud > /sys/module/zswap/parameters/zpool"),
                        sh.index("echo Y > /sys/module/zswap/parameters/enabled"))
        self.assertNotIn("shrinker_enabled", sh)

    def test_zswap_keys(self):
        assert_scenario_errors(self, [
            ('[swap]\nzpool = "zbud"\n' + MINIMAL, "swap.zpool needs swap.zswap = true"),
            ('[swap]\nzswap = true\nzpool = "z3fold"\n' + MINIMAL,
             "swap.zpool 'z3fold' is not one of zsmalloc, zbud"),
            ('[swap]\nzswap = true\nshrinker = "no"\n' + MINIMAL,
             "swap.shrinker must be a bool"),
        ])


class RulesFileAndCompareTableTest(unittest.TestCase):
    def test_rules_file_is_appended(self):
        sc = flscenario.load(with_rules_file("b: read nth=2 error=eio\n"))
        self.assertEqual(sc.faults.rules, "a: write nth=1 error=eio\nb: read nth=2 error=eio\n")

    def test_errors(self):
        cases = [
            ('[faults]\nrules_file = "nope.rules"\n' + MINIMAL, "faults.rules_file"),
            ("[compare]\nexpect = { pgrotated = 'down' }\n" + MINIMAL,
             "compare.expect.pgrotated 'down'"),
            ("[compare]\nmetrics = 'pgrotated'\n" + MINIMAL, "compare.metrics must be a list"),
            ("[compare]\nmetric = []\n" + MINIMAL, "unknown key 'metric'"),
            ("[vm]\ncpus = 0\n" + MINIMAL, "vm.cpus 0"),
            ("[device]\nsize = '1M'\n" + MINIMAL, "below 16M"),
        ]
        assert_scenario_errors(self, cases)

    def test_test_args_are_quoted(self):
        sc = scenario('[[test]]\nrun = "swaptest writeback"\nargs = ["--mem", "64M", 3, "a b"]\n')
        self.assertEqual(sc.tests, ["swaptest writeback --mem 64M 3 'a b'"])
        with self.assertRaises(flscenario.ScenarioError):
            scenario('[[test]]\nrun = "x"\nargs = "--mem"\n')

    def test_compare_table(self):
        sc = scenario(MINIMAL + '[compare]\nmetrics = ["pgrotated"]\n'
                      'expect = { pgrotated = "decrease" }\n')
        self.assertEqual(sc.compare.metrics, ["pgrotated"])
        self.assertEqual(sc.compare.expect, {"pgrotated": "decrease"})


class CliTest(unittest.TestCase):
    def test_bad_scenario_is_one_line_exit_2(self):
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write("[device]\nkind = 'scsi'\n" + MINIMAL)
        try:
            res = subprocess.run([os.path.join(TOP, "scripts", "faultline"), "run", f.name],
                                 capture_output=True, text=True, timeout=60)
        finally:
            os.unlink(f.name)
        self.assertEqual(res.returncode, 2)
        lines = res.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, res.stderr)
        self.assertIn(os.path.basename(f.name), lines[0])
        self.assertIn("device.kind 'scsi'", lines[0])

    def test_module_and_shim_are_one_cli(self):
        shim = subprocess.run([os.path.join(TOP, "scripts", "faultline"), "--help"],
                              capture_output=True, text=True, timeout=60)
        module = subprocess.run([sys.executable, "-m", "faultline", "--help"],
                                capture_output=True, text=True, timeout=60,
                                cwd=os.path.join(TOP, "python"))
        self.assertEqual((shim.returncode, module.returncode), (0, 0))
        self.assertEqual(shim.stdout, module.stdout)
        self.assertNotIn("SUPPRESS", shim.stdout)
        for cmd in ("run", "check", "repro", "compare", "show", "cmdline", "list"):
            self.assertIn(cmd, shim.stdout)
        self.assertNotIn("vm-test", shim.stdout)

    def test_unknown_guest_tool_is_one_line(self):
        res = subprocess.run([os.path.join(TOP, "scripts", "build-guest"), "--tools", "fio,vim"],
                             capture_output=True, text=True, timeout=60)
        self.assertNotEqual(res.returncode, 0)
        self.assertEqual(res.stderr.strip().splitlines(),
                         ["faultline: error: --tools: unknown tool 'vim' (known: fio,nvme-cli)"])

    def test_seeds(self):
        self.assertEqual(inputs.parse_seeds("3..5"), [3, 4, 5])
        for bad in ("5..3", "x", "1-3"):
            with self.assertRaises(SetupError):
                inputs.parse_seeds(bad)


class RulesCheckTest(unittest.TestCase):
    """Rules are checked by the engine's parser (tools/fault-rules-check)
    before anything is built."""

    def test_typo_is_file_line_col_exit_2(self):
        d = tempfile.mkdtemp()
        path = os.path.join(d, "typo.toml")
        with open(path, "w") as f:
            f.write('[faults]\nrules = """\nw: write nth=3 error=eio\nx: wrte nth=2\n"""\n'
                    + MINIMAL)
        # An empty cache: the checker is compiled there, no QEMU build needed.
        env = dict(os.environ, FAULTLINE_CACHE=os.path.join(d, "cache"))
        res = subprocess.run([os.path.join(TOP, "scripts", "faultline"), "run", path],
                             capture_output=True, text=True, timeout=120, env=env)
        self.assertEqual(res.returncode, 2, res.stderr)
        self.assertEqual(res.stderr.strip().splitlines(),
                         ["faultline: error: typo.toml: rules 2:4: unknown op 'wrte' "
                          "(expected read, write, flush, discard, write-zeroes or any)"])
        self.assertFalse(os.path.exists(os.path.join(d, "cache", "qemu")))

    def test_rules_file_lines_are_its_own(self):
        path = with_rules_file("# comment\nb: read nth=2 delay=10\n")
        with self.assertRaises(flscenario.ScenarioError) as cm:
            rules.check_scenarios([flscenario.load(path)])
        self.assertEqual(str(cm.exception),
                         "s.toml: rules_file r.rules 2:15: bad duration '10' "
                         "(expected a unit: ns, us, ms, s)")
        with open(os.path.join(os.path.dirname(path), "r.rules"), "w") as f:
            f.write("a: read nth=2 delay=10ms\n")
        with self.assertRaises(flscenario.ScenarioError) as cm:
            rules.check_scenarios([flscenario.load(path)])
        self.assertIn("rules_file r.rules 1:1: duplicate rule name 'a'", str(cm.exception))

    def test_checker_exit_codes(self):
        binary = rules.checker()
        res = subprocess.run([binary, "-"], input="a: write every=2 error=eio\n",
                             capture_output=True, text=True)
        self.assertEqual((res.returncode, res.stdout), (0, ""))
        res = subprocess.run([binary, "-"], input="a: write every=2 error=eio\na: flush error=eio\n",
                             capture_output=True, text=True)
        self.assertEqual((res.returncode, res.stdout), (1, "-: 2:1: duplicate rule name 'a'\n"))
        res = subprocess.run([binary, "-"], input="a: write\0 every=2\n",
                             capture_output=True, text=True)
        self.assertEqual((res.returncode, res.stdout), (1, "-: 1:9: NUL byte in rule text\n"))
        res = subprocess.run([binary, "/nonexistent/x.rules"], capture_output=True, text=True)
        self.assertEqual(res.returncode, 2)
        self.assertIn("No such file", res.stderr)

    def test_shipped_scenarios_rules_are_valid(self):
        scs = [flscenario.load(n[:-5]) for n in sorted(os.listdir(flscenario.SCENARIO_DIR))
               if n.endswith(".toml")]
        self.assertTrue(any(sc.faults.rules.strip() for sc in scs))
        rules.check_scenarios(scs)


class ReportTest(unittest.TestCase):
    REPORT = Report(scenario="s", seed=3, status=1, outcome="fail", reason="r",
                    elapsed_s=2.5, console_tail="x < y",
                    results=[{"suite": "swaptest", "name": "a", "kind": "ok", "line": "ok 1 a"},
                             {"suite": "swaptest", "name": "b", "kind": "fail",
                              "line": "not ok 2 b"},
                             {"suite": "swaptest", "name": "c", "kind": "xfail",
                              "line": "not ok 3 c # XFAIL"}])

    def test_junit(self):
        root = ET.fromstring(report.junit_xml([(self.REPORT, "/runs/x")]))
        suite = root.find("testsuite")
        self.assertEqual(suite.get("name"), "s.seed3")
        self.assertEqual((suite.get("tests"), suite.get("failures"), suite.get("skipped")),
                         ("4", "2", "1"))
        names = [c.get("name") for c in suite.findall("testcase")]
        self.assertEqual(names, ["a", "b", "c", "run"])

    def test_ktap_results_have_suites(self):
        k = parse_ktap("# test: swaptest x\nok 1 first one\nnot ok 2 second # XFAIL y\n")
        self.assertEqual([(r["suite"], r["name"], r["kind"]) for r in k["results"]],
                         [("swaptest x", "first one", "ok"), ("swaptest x", "second", "xfail")])

    def test_latency_points_join_fault_log(self):
        ktap = ("# io 1 write off 1048576 len 4096 res 4096 errno 0 lat_us 2100\n"
                "# io 2 write off 1052672 len 4096 res 4096 errno 0 lat_us 90\n")
        log = ['{"op":"write","lba":2048,"action":"delay=2000000ns"}\n']
        self.assertEqual(report.latency_points(ktap, log), [(2000.0, 2100.0), (0.0, 90.0)])

    def test_phase_counters(self):
        phases, series = report.phase_counters(
            {"phase fill vmstat pswpout": 5, "phase wb vmstat pswpout": 7,
             "phase wb vmstat zswpwb": 2, "vmstat pswpout": 12})
        self.assertEqual(phases, ["phase fill", "phase wb"])
        self.assertEqual(series["pswpout"], {"phase fill": 5, "phase wb": 7})

    def test_repro_options(self):
        meta = {"deterministic": True, "seed": 1, "overrides": {"memory": "1G", "cpus": None,
                                                                "timeout": None}}
        # A run.json from the launcher that forced one vCPU under --deterministic.
        old = runner.repro_options(meta, True, False)
        self.assertEqual((old.cpus, old.memory, old.backend), (1, "1G", "qemu"))
        new = runner.repro_options(dict(meta, backend="libvirt",
                                        backend_options={"uri": "qemu:///session"}), True, True)
        self.assertEqual((new.cpus, new.backend, new.backend_options, new.quiet),
                         (None, "libvirt", {"uri": "qemu:///session"}, True))

    def test_repro_verdict(self):
        d1, d2 = tempfile.mkdtemp(), tempfile.mkdtemp()
        for d, text in ((d1, "ok 1 a\n"), (d2, "ok 1 a\n")):
            with open(os.path.join(d, "ktap.log"), "w") as f:
                f.write(text)
        orig = Report(scenario="s", seed=1, outcome="pass", digest="00ff", status=0, reason="")
        crash = dataclasses.replace(orig, outcome="crash", status=3)
        with contextlib.redirect_stdout(io.StringIO()) as out:
            self.assertEqual(runner.repro_verdict(d1, orig, d2, dataclasses.replace(orig), True),
                             0)
            self.assertEqual(runner.repro_verdict(d1, orig, d2,
                                                  dataclasses.replace(orig, digest="0100"), True),
                             1)
            self.assertEqual(runner.repro_verdict(d1, crash, d2, dataclasses.replace(crash),
                                                  True), 3)
        self.assertIn("fault digest MISMATCH: 00ff -> 0100", out.getvalue())

    def test_repro_verdict_without_deterministic(self):
        """Without --deterministic the faults land on other I/Os: a rerun
        that fails the same way is reproduced whatever its digest (bugs
        said "reproducible: yes" where repro said NOT reproduced); one
        that fails another way is not."""
        d1, d2 = tempfile.mkdtemp(), tempfile.mkdtemp()
        for d, text in ((d1, "ok 1 a\nnot ok 2 b\n"), (d2, "ok 1 a\nnot ok 2 b\n")):
            with open(os.path.join(d, "ktap.log"), "w") as f:
                f.write(text)
        fail = Report(scenario="s", seed=1, outcome="fail", digest="00ff", status=1,
                      reason="guest tests failed (exit 1, 1 not ok)")
        with contextlib.redirect_stdout(io.StringIO()) as out:
            self.assertEqual(runner.repro_verdict(d1, fail, d2,
                                                  dataclasses.replace(fail, digest="0100"),
                                                  False), 1)
        self.assertIn("repro: reproduced", out.getvalue())
        self.assertIn("00ff -> 0100 (not judged", out.getvalue())
        with open(os.path.join(d2, "ktap.log"), "w") as f:
            f.write("not ok 1 a\nok 2 b\n")
        with contextlib.redirect_stdout(io.StringIO()) as out:
            runner.repro_verdict(d1, fail, d2, fail, False)
        self.assertIn("repro failure      MISMATCH", out.getvalue())
        self.assertIn("NOT reproduced", out.getvalue())


class ShellMachine(machine.Machine):
    """A backend whose "guest" is a shell script writing the serial logs:
    drives the base class's real watch loop and cleanup."""

    backend = "shell"

    def start(self):
        self.proc = subprocess.Popen(["sh", "-c", self.options["script"]],
                                     cwd=self.spec.rundir, start_new_session=True)

    def running(self):
        return self.proc.poll() is None

    def kill(self):
        if self.running():
            self.proc.kill()
        self.proc.wait()

    def cleanup(self):
        self.kill()
        super().cleanup()

    def diagnostics(self):
        return "shell: no guest here" if self.proc.returncode else ""


class MachineTest(unittest.TestCase):
    def watch(self, script, timeout=20.0):
        rundir = tempfile.mkdtemp()
        scratch = scratchdirs.new_scratch(rundir)
        self.addCleanup(scratchdirs.remove_scratch, scratch)
        sc = scenario('[faults]\nrules = "w: write nth=1 error=eio"\n' + MINIMAL)
        spec = spec_builder.make_spec(sc, Builds("/q", "/g"), rundir=rundir, scratch=scratch,
                                      seed=1, kernel="/k", initrd="/i", append="")
        with ShellMachine(spec, script=script) as m:
            with open(os.path.join(scratch, "disk.img"), "w") as f:
                f.write("the machine's disk")
            m.start()
            w = watch(m, timeout, Progress(1, quiet=True))
            proc = m.proc
        self.assertIsNotNone(proc.returncode)            # nothing left running
        # The machine's files are gone; the scratch directory and its
        # owner.json stay until the caller has written the run's report (a
        # launcher killed while judging: the next one's sweep writes it).
        self.assertEqual(os.listdir(scratch), [scratchdirs.OWNER])
        return w, judge.judge(sc, rundir, 1, False, w)

    def test_guest_exit_ends_the_run(self):
        w, r = self.watch("printf 'faultline-init\\n' > console.log; "
                          "printf '# kernel 6.12.1 x\\n1..1\\nok 1 a\\nFAULTLINE-EXIT 0\\n' > ktap.log;"
                          " exec sleep 60")
        self.assertEqual((w.guest_exit, w.hang, w.backend), (0, False, "shell"))
        self.assertLess(w.elapsed_s, 10)
        # No QMP in this backend: the final statistics say so, and the
        # scenario's rule expectations cannot be met without them.
        self.assertIn("error", w.faults)
        self.assertEqual((r.status, r.outcome, r.kernel), (0, "pass", "6.12.1"))

    def test_watchdog_is_a_hang(self):
        w, r = self.watch("exec sleep 60", timeout=1.0)
        self.assertEqual((w.hang, w.task_dump, w.guest_exit), (True, None, None))
        self.assertEqual((r.status, r.outcome), (3, "hang"))
        self.assertIn("no task dump", r.reason)

    def test_panic_ends_the_run(self):
        w, r = self.watch("printf 'faultline-init\\nKernel panic - not syncing\\n' "
                          "> console.log; exec sleep 60")
        self.assertFalse(w.hang)
        self.assertEqual((r.status, r.outcome), (3, "crash"))

    def test_backend_that_never_boots_is_a_setup_error(self):
        w, r = self.watch("exit 1")
        self.assertEqual(w.stderr, "shell: no guest here")
        self.assertEqual((r.status, r.reason), (2, "shell failed: shell: no guest here"))

    def test_garbage_exit_line_is_not_a_result(self):
        w, r = self.watch("printf 'FAULTLINE-EXIT x\\n' > ktap.log; exit 0")
        self.assertIsNone(w.guest_exit)
        self.assertEqual(r.status, 3)

    def test_qmp_action_fires_on_its_line(self):
        rundir, scratch = tempfile.mkdtemp(), tempfile.mkdtemp()
        sc = scenario(MINIMAL + '[[qmp]]\nwhen = "ok 2 half"\nexecute = "device_del"\n'
                      'arguments = { id = "swapdev" }\n'
                      '[[qmp]]\nwhen = "never printed"\nexecute = "stop"\n')
        spec = spec_builder.make_spec(sc, Builds("/q", "/g"), rundir=rundir, scratch=scratch,
                                      seed=1, kernel="/k", initrd="/i", append="")
        sent = []

        class QmpShell(ShellMachine):
            def qmp(self, command, **args):
                # What the guest had printed when the command went out.
                with open(os.path.join(rundir, "ktap.log")) as f:
                    sent.append((command, args, f.read()))
                if command == "device_del":
                    raise machine.QmpError("Device 'swapdev' not found")
                return {}

        script = ("printf '1..3\\nok 1 a\\n' > ktap.log; sleep 1; "
                  "printf 'ok 2 half done\\n' >> ktap.log; sleep 1; "
                  "printf 'ok 3 b\\nFAULTLINE-EXIT 0\\n' >> ktap.log; exec sleep 60")
        with QmpShell(spec, script=script) as m:
            m.start()
            w = watch(m, 20.0, Progress(1, quiet=True))
        # (query-status: the base class waiting for the power-off.)
        sent = [x for x in sent if x[0] != "query-status"]
        self.assertEqual([(c, a) for c, a, _ in sent], [("device_del", {"id": "swapdev"})])
        self.assertIn("ok 2 half done", sent[0][2])
        self.assertNotIn("ok 3", sent[0][2])
        self.assertEqual(w.actions[0]["error"], "Device 'swapdev' not found")
        self.assertIsNone(w.actions[1]["at_s"])
        r = judge.judge(sc, rundir, 1, False, w)
        self.assertEqual(r.status, 1)
        self.assertIn("qmp device_del failed: Device 'swapdev' not found", r.reason)
        self.assertIn("qmp stop never sent (no guest line with 'never printed')", r.reason)
        self.assertEqual(len(r.qmp_actions), 2)

    def test_backend_registry(self):
        self.assertEqual(backends.backend_class("qemu").__name__, "QemuMachine")
        self.assertEqual(list(backends.BACKENDS), ["qemu", "libvirt", "lava"])
        with self.assertRaises(SetupError) as cm:
            backends.backend_class("vmware")
        self.assertIn("unknown backend 'vmware'", str(cm.exception))


class ProgressTest(unittest.TestCase):
    def test_not_a_tty_prints_phases_and_failures_only(self):
        out = io.StringIO()
        p = Progress(2, stream=out)
        p.update("# kernel 6.12\n# test: a\nok 1 x\n", 1.0, {"w": 3})
        p.update("# kernel 6.12\n# test: a\nok 1 x\n# test: a\n# y: 3 bad\nnot ok 1 y\n"
                 "partial", 2.0, {})
        # A failure comes with its '# NAME: detail' line.
        self.assertEqual(out.getvalue(), "  [   1.0s] test 1/2\n  | # y: 3 bad\n  | not ok 1 y\n"
                                         "  [   2.0s] test 2/2\n")


class CompareMetricTest(unittest.TestCase):
    def test_metric_lookup(self):
        r = run_report(diag={"pgrotated": 5, "vmstat zswpwb": 7}, elapsed_s=3.0,
                       faults={"rules": [{"name": "a", "hits": 2}, {"name": "b", "hits": 3}]})
        self.assertEqual([compare.metric_value(m, r) for m in
                          ("pgrotated", "zswpwb", "vmstat zswpwb", "hits", "hits b",
                           "elapsed_s", "nothing")], [5, 7, 7, 5, 3, 3.0, None])

    def test_collect_and_zero(self):
        runs = {"baseline": [run_report(diag={"x": 1, "data_errors": 1}),
                             run_report(diag={"x": 2})],
                "series": [run_report(diag={"x": 3, "data_errors": 0}),
                           run_report(diag={"x": 4})]}
        rows, missing = compare.collect(["x", "data_errors", "y"], {"data_errors": "zero"},
                                          runs)
        self.assertEqual(rows[0], ("x", [1, 2], [3, 4], None))
        self.assertEqual(missing, ["y"])
        self.assertEqual(compare.zero_on_both(rows), ["data_errors"])


class PlantedJudgeTest(unittest.TestCase):
    """Issue 18: each check fails the run on the planted case it names."""

    FULL = ("# test: swaptest refault\nKTAP version 1\n1..3\nok 1 a\nok 2 b\n"
            "ok 3 c\n# totals: pass:3 fail:0\n")

    def verdict(self, ktap, sc=None, guest_exit=0):
        w = WatchResult(guest_exit=guest_exit, backend="qemu")
        return judge._verdict(sc or scenario(MINIMAL), w, "faultline-init: up\n",
                              parse_ktap(ktap))

    def test_truncated_stream_with_exit_0_fails(self):
        self.assertEqual(self.verdict(self.FULL)[0], 0)
        cut = self.FULL.split("ok 3")[0]                 # lost its last result
        status, _, reason = self.verdict(cut)
        self.assertEqual(status, 1, reason)
        self.assertIn("planned 3 results, got 2", reason)
        no_plan = self.FULL.replace("1..3\n", "")
        self.assertIn("0 KTAP plans", self.verdict(no_plan)[2])
        # a plan at the end is KTAP too; an echo test prints no KTAP at all
        last = "# test: echo x\n# x 1\n" + self.FULL.replace("1..3\n", "").replace(
            "# totals", "1..3\n# totals")
        self.assertEqual(self.verdict(last)[0], 0)
        # a wrapper (swapctx) prints its tool's document, then its own
        two = self.FULL + "KTAP version 1\n1..1\nok 1 wrapper\n"
        self.assertEqual(self.verdict(two)[0], 0)
        self.assertIn("planned 1 results, got 0", self.verdict(two[:-len("ok 1 wrapper\n")])[2])

    def test_kernel_mode_patched_fails_when_checks_do_not_judge(self):
        patched = scenario('kernel_mode = "patched"\n' + MINIMAL)
        xfail = self.FULL.replace("ok 3 c", "not ok 3 c # XFAIL stock kernel")
        status, _, reason = self.verdict(xfail + "# patch_checks_asserted 0\n", patched)
        self.assertEqual(status, 1)
        self.assertIn("XFAIL", reason)
        status, _, reason = self.verdict(self.FULL, patched)
        self.assertIn("no patch-specific check was asserted", reason)
        self.assertEqual(self.verdict(self.FULL + "# patch_checks_asserted 3\n", patched)[0],
                         0)
        # auto: a pass, with the XFAIL count in the reason
        self.assertIn("1 XFAIL", self.verdict(xfail)[2])
        stock = scenario('kernel_mode = "stock"\n' + MINIMAL)
        self.assertIn("dropbehind probe", self.verdict(
            self.FULL + "# patch_probes_found 2\n", stock)[2])

    def test_kernel_mode_is_validated(self):
        with self.assertRaises(flscenario.ScenarioError) as cm:
            scenario('kernel_mode = "patchd"\n' + MINIMAL)
        self.assertIn("kernel_mode 'patchd'", str(cm.exception))
        with self.assertRaises(flscenario.ScenarioError):
            scenario(MINIMAL + '[compare]\nkernel_modes = ["stock"]\n')
        sc = scenario('kernel_mode = "stock"\n' + MINIMAL)
        self.assertIn("export FAULTLINE_KERNEL_MODE=stock", guest.make_run_sh(sc, 1))

    def test_multi_command_test_line_fails(self):
        def run(t):
            out = subprocess.run(["sh", "-c", "fail=0\n" + guest.test_line(t) +
                                  "\necho fail=$fail"], capture_output=True, text=True)
            return out.stdout.strip().splitlines()[-1]
        self.assertEqual(run("false; true"), "fail=1")
        self.assertEqual(run("true; true"), "fail=0")
        self.assertEqual(run('echo "# x $(echo y)"'), "fail=0")

    def test_compare_fails_on_missing_metric_and_failed_runs(self):
        runs = {"baseline": [run_report(diag={"x": 1})],
                "series": [run_report(diag={"y": 1})]}
        self.assertEqual(compare.unjudged_expectations({"x": "decrease"}, runs),
                         ["x (no value in series-1)"])
        self.assertEqual(compare.unjudged_expectations({}, runs), [])
        table_runs = [{"side": "series", "run": 1, "status": 1, "outcome": "fail"},
                      {"side": "baseline", "run": 1, "status": 0, "outcome": "pass"}]
        self.assertEqual(compare.failed_runs(table_runs), ["run series-1 fail"])

    def test_selftest_crash_rejects_a_panic_at_boot(self):
        sys.path.insert(0, os.path.join(TOP, "tests", "vm"))
        import vm_test
        with open(os.path.join(TOP, "meson.build")) as f:
            meson = f.read()
        block = meson[meson.index("test('vm-selftest-crash'"):]
        block = block[:block.index("suite:")]
        args = [a.strip("'") for a in
                __import__("re").findall(r"'[^']*'", block.split("args:")[1])]
        texts = [args[i + 1] for i, a in enumerate(args) if a == "--expect-report"]
        ktap = [args[i + 1] for i, a in enumerate(args) if a == "--expect-ktap"]
        d = tempfile.mkdtemp()
        boot = ('{"reason": "kernel crash: Kernel panic", "console_tail": "Kernel panic - '
                'not syncing: VFS: Unable to mount root fs"}')
        with open(os.path.join(d, "report.json"), "w") as f:
            f.write(boot)
        self.assertTrue(vm_test.check_expected(d, 3, 3, texts, ktap))
        with open(os.path.join(d, "report.json"), "w") as f:
            f.write(boot.replace("VFS: Unable to mount root fs", "sysrq triggered crash"))
        with open(os.path.join(d, "ktap.log"), "w") as f:
            f.write("# test: echo c > /proc/sysrq-trigger\n")
        self.assertEqual(vm_test.check_expected(d, 3, 3, texts, ktap), [])


class MutateTest(unittest.TestCase):
    """--mutate: the rule it adds, and the verdict of a mutated run."""

    def test_rule_added_and_checked_by_the_engine(self):
        sc = scenario('[faults]\nrules = "a: write nth=1 error=eio"\n' + MINIMAL)
        mutate.apply(sc, "lie")
        self.assertEqual(sc.faults.rules.splitlines(),
                         ["a: write nth=1 error=eio",
                          "mutate: write after=16 count=256 lie  # --mutate lie"])
        rules.check_scenarios([sc])   # the engine's own parser accepts it
        sc = mutate.apply(scenario(MINIMAL), "corrupt")
        self.assertEqual((sc.mutate, sc.faults.rules),
                         ("corrupt", "mutate: write after=16 count=256 corrupt"
                                     "  # --mutate corrupt\n"))
        rules.check_scenarios([sc])

    def test_options_reach_run_json_and_repro(self):
        opts = RunOptions(mutate="lie")
        self.assertIn("--mutate lie", runner.run_command("/s.toml", 1, opts))
        back = runner.repro_options({"deterministic": False, "mutate": "lie"}, False, True)
        self.assertEqual(back.mutate, "lie")
        self.assertIsNone(runner.repro_options({"deterministic": False}, False, True).mutate)

    def verdict(self, status, diag, failed, hits=5):
        results = [{"name": "filled 10 pages", "kind": "ok"}] + [
            {"name": n, "kind": "fail", "detail": d} for n, d in failed]
        return mutate.verdict("lie", status, diag, results,
                              {"rules": [{"name": "mutate", "hits": hits}]})

    def test_verdicts(self):
        v = self.verdict(1, {"data_errors": 7}, [("round 1: 10 pages verified", "7 bad")])
        self.assertTrue(v["caught"])
        self.assertEqual(v["data_checks_failed"], ["round 1: 10 pages verified"])
        self.assertEqual(v["verdict"], "caught by its data check: round 1: 10 pages verified "
                                       "(7 bad; data_errors 7)")
        blind = self.verdict(0, {"data_errors": 0}, [])
        self.assertFalse(blind["caught"])
        self.assertIn("blind checker", blind["verdict"])
        other = self.verdict(1, {"data_errors": 0}, [("driver mode is irq", "mode task")])
        self.assertFalse(other["caught"])
        self.assertIn("NOT caught by a data check", other["verdict"])
        # A data check that fails with no bad page counted is not enough.
        self.assertFalse(self.verdict(1, {}, [("final verify of 9 pages", "0 bad")])
                         ["caught"])
        idle = self.verdict(1, {"data_errors": 3}, [("race: 2 threads: no bad pages", "3")],
                            hits=0)
        self.assertFalse(idle["caught"])
        self.assertIn("never fired", idle["verdict"])

    def test_judge_records_the_mutation(self):
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "ktap.log"), "w") as f:
            f.write("ok 1 filled 10 pages\n# round 1: 10 pages verified: 3 bad\n"
                    "not ok 2 round 1: 10 pages verified\n# data_errors 3\n")
        with open(os.path.join(d, "console.log"), "w") as f:
            f.write("faultline-init\n")
        sc = mutate.apply(scenario(MINIMAL), "lie")
        w = WatchResult(hang=False, guest_exit=1, backend="qemu",
                                faults={"rules": [{"name": "mutate", "hits": 256}]})
        r = judge.judge(sc, d, 1, False, w)
        self.assertEqual(r.status, 1)
        self.assertTrue(r.mutation["caught"])
        self.assertEqual(Report.from_json(r.to_json()).mutation, r.mutation)

    def test_compare_refuses_mutate(self):
        k = fake_bzimage()
        res = subprocess.run([os.path.join(TOP, "scripts", "faultline"), "compare", "smoke",
                              "--baseline", k, "--series", k,
                              "--mutate", "lie"], capture_output=True, text=True, timeout=60)
        self.assertEqual(res.returncode, 2)
        self.assertEqual(len(res.stderr.strip().splitlines()), 1, res.stderr)
        self.assertIn("compare does not take --mutate", res.stderr)

    def test_run_rejects_unknown_mutation(self):
        res = subprocess.run([os.path.join(TOP, "scripts", "faultline"), "run", "smoke",
                              "--mutate", "drop"], capture_output=True, text=True, timeout=60)
        self.assertEqual(res.returncode, 2)
        self.assertIn("invalid choice: 'drop'", res.stderr)


def _no_build(*a, **kw):
    raise AssertionError("built before the input was checked")


class InputsTest(unittest.TestCase):
    """Issue 32 defect 6: every bad value is one line, exit 2, before anything
    is built or created, in every command that takes the option."""

    BAD = [
        (["--seed", "-1"], "--seed: -1 is out of range (seeds are 0 to 2^64-1)"),
        (["--seed", str(1 << 64)], "out of range"),
        (["--seed", "x"], "--seed: 'x' is not an integer"),
        (["--memory", "0"], "--memory: 0: below 128M"),
        (["--memory", "12Q"], "--memory: bad size '12Q'"),
        (["--cpus", "0"], "--cpus: 0: expected 1-64"),
        (["--timeout", "junk"], "--timeout: bad duration 'junk'"),
        (["--out", "/proc/x"], "--out: /proc/x: cannot create directories in /proc"),
        (["--kernel", "/nonexistent/bzImage"], "--kernel: /nonexistent/bzImage: no such file"),
    ]
    # Each command with the options it takes and what it needs besides.
    COMMANDS = {
        "run": (["smoke"], {"--seed", "--memory", "--cpus", "--timeout", "--out", "--kernel"}),
        "cmdline": (["smoke"], {"--seed", "--memory", "--cpus", "--timeout", "--out",
                                "--kernel"}),
        "libvirt-xml": (["smoke"], {"--seed", "--memory", "--cpus", "--timeout", "--out",
                                    "--kernel"}),
        "compare": (["smoke", "--baseline", "B", "--series", "B"],
                    {"--seed", "--memory", "--cpus", "--timeout", "--out"}),
        "matrix": (["--scenarios", "smoke"], {"--out", "--kernel"}),
        "lava": (["smoke"], {"--seed", "--out", "--kernel"}),
        "repro": (["RUN"], {"--out"}),
    }

    def setUp(self):
        self.kernel = fake_bzimage()
        self.rundir = tempfile.mkdtemp()
        with open(os.path.join(self.rundir, "run.json"), "w") as f:
            f.write("{}")
        patches = [mock.patch("faultline.run.runner.build_all", _no_build),
                   mock.patch("faultline.cli.commands.build_all", _no_build),
                   mock.patch("faultline.lab.compare.build_all", _no_build)]
        for p in patches:
            p.start()
            self.addCleanup(p.stop)

    def test_bad_values_are_one_line_exit_2_in_every_command(self):
        for cmd, (base, takes) in self.COMMANDS.items():
            base = [self.kernel if a == "B" else self.rundir if a == "RUN" else a for a in base]
            for argv, msg in self.BAD:
                if argv[0] not in takes:
                    continue
                st, lines, _ = cli_main([cmd, *base, *argv])
                self.assertEqual(st, 2, (cmd, argv, lines))
                self.assertEqual(len(lines), 1, (cmd, argv, lines))
                self.assertIn(msg, lines[0], (cmd, argv))

    def test_kernel_must_be_a_bzimage(self):
        vmlinux = fake_bzimage(b"\x7fELF")
        for cmd in (["run", "--kernel", vmlinux], ["matrix", "--scenarios", "smoke",
                                                   "--kernel", vmlinux],
                    ["compare", "smoke", "--baseline", vmlinux, "--series", self.kernel],
                    ["lava", "smoke", "--kernel", os.path.dirname(vmlinux)]):
            st, lines, _ = cli_main(cmd)
            self.assertEqual((st, len(lines)), (2, 1), lines)
            self.assertRegex(lines[0], "not a bzImage \\(no 'HdrS' boot header at 0x202|"
                             "a directory, not a bzImage")
        self.assertEqual(inputs.kernel_image(self.kernel), self.kernel)

    def test_out_not_creatable_leaves_nothing(self):
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "file"), "w"):
            pass
        for out in (os.path.join(d, "file", "sub"), "/proc/x"):
            with self.assertRaises(Exception):
                inputs.out_dir(out)
        self.assertEqual(inputs.out_dir(os.path.join(d, "new", "deeper")),
                         os.path.join(d, "new", "deeper"))
        self.assertEqual(os.listdir(d), ["file"])   # the probe left nothing

    def test_seeds_and_counts(self):
        self.assertEqual(inputs.seed_value(str((1 << 64) - 1)), (1 << 64) - 1)
        self.assertEqual(inputs.seed_value("0x10"), 16)
        for argv, msg in ((["run", "--seeds=-1..3"], "-1 is out of range"),
                          (["run", "--repeat", "0"], "--repeat: 0: must be >= 1"),
                          (["compare", "smoke", "--baseline", self.kernel, "--series",
                            self.kernel, "--runs", "0"], "--runs: 0: must be >= 1"),
                          (["minimize", self.rundir, "--jobs", "x"], "'x' is not a number")):
            st, lines, _ = cli_main(argv)
            self.assertEqual((st, len(lines)), (2, 1), lines)
            self.assertIn(msg, lines[0])

    def test_scenario_seed_and_memory_are_checked_too(self):
        assert_scenario_errors(self, [
            ("[faults]\nseed = -1\n" + MINIMAL, "faults.seed -1 is out of range"),
            ("[vm]\nmemory = '0'\n" + MINIMAL, "vm.memory 0: below 128M"),
        ])

    def test_run_dirs(self):
        for cmd in ("repro", "minimize"):
            st, lines, _ = cli_main([cmd, "/nonexistent/run"])
            self.assertEqual((st, lines), (2, [f"faultline {cmd}: error: argument rundir: "
                                               "/nonexistent/run: no such directory"]))
            st, lines, _ = cli_main([cmd, tempfile.mkdtemp()])
            self.assertIn("not a faultline run directory (no run.json)", lines[0])

    def test_libvirt_uri_checked_before_a_run_directory(self):
        out = tempfile.mkdtemp()
        # The shim: Debian's python3, which has the libvirt binding.
        res = subprocess.run([os.path.join(TOP, "scripts", "faultline"), "run", "smoke",
                              "--backend", "libvirt", "--connect", "bogus:///x", "--out", out],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(res.returncode, 2)
        # One line with libvirt's own reason, which depends on whether a
        # libvirtd is up: "no connection driver available for bogus:///x"
        # from one, "Failed to connect socket ..." without.
        lines = res.stderr.splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertTrue(lines[0].startswith(
            "faultline: error: --connect: libvirt cannot connect to bogus:///x: "), lines)
        self.assertEqual(os.listdir(out), [])
        st, lines, _ = cli_main(["run", "smoke", "--backend", "libvirt", "--connect", "bogus"])
        self.assertIn("--connect: 'bogus' is not a libvirt URI", lines[0])

    def test_binary_rules_file_is_one_line(self):
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "r.rules"), "wb") as f:
            f.write(b"w: write\xd0\x00\xff every=3 error=eio\n")
        with open(os.path.join(d, "s.toml"), "w") as f:
            f.write('[faults]\nrules_file = "r.rules"\n' + MINIMAL)
        for argv in (["run", os.path.join(d, "s.toml")],
                     ["run", "smoke", "--rules", os.path.join(d, "r.rules")]):
            st, lines, _ = cli_main(argv)
            self.assertEqual((st, len(lines)), (2, 1), lines)
            self.assertIn("r.rules is not a text file (byte 0xd0 at offset 8)", lines[0])
            self.assertNotIn("internal error", lines[0])


class RulesOptionTest(unittest.TestCase):
    """Issue 32 defect 4: --rules gets the scenario file's checks."""

    def rules_file(self, text):
        f = tempfile.NamedTemporaryFile("w", suffix=".rules", delete=False)
        f.write(text)
        f.close()
        return f.name

    def test_device_checks_apply_to_rules_option(self):
        for name, text, msg in (
                ("latency-virtio", "lost: write nth=5 drop\n",
                 "rule 'lost' drops completions, but Linux virtio_blk has no request timeout"),
                ("syncblk-task", "f: write nth=5 fatal\n",
                 "rule 'f' fails the controller (fatal, reset-fail=), which only kind = "
                 "\"nvme\" has")):
            path = self.rules_file(text)
            with self.assertRaises(flscenario.ScenarioError) as cm:
                runner.load_scenario(name, RunOptions(rules=path))
            self.assertIn(f"--rules {path} on {name}", str(cm.exception))
            self.assertIn(msg, str(cm.exception))
            with mock.patch("faultline.run.runner.build_all", _no_build):
                st, lines, _ = cli_main(["run", name, "--rules", path])
            self.assertEqual((st, len(lines)), (2, 1), lines)
        # The same rule on NVMe is fine.
        sc = runner.load_scenario("smoke", RunOptions(rules=self.rules_file(
            "lost: write nth=5 drop\n")))
        self.assertEqual(sc.faults.rules, "lost: write nth=5 drop\n")

    def judged(self, hits, rules_option=True):
        d = tempfile.mkdtemp()
        for name, text in (("ktap.log", "KTAP version 1\n1..1\nok 1 a\n"),
                           ("console.log", "faultline-init\n")):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        sc = scenario(MINIMAL)
        if rules_option:
            flscenario.replace_rules(sc, self.rules_file(
                "w3: write every=3 error=eio\nr9: read nth=9 error=eio\n"))
        w = WatchResult(guest_exit=0, backend="qemu",
                                faults={"rules": [{"name": n, "hits": h}
                                                  for n, h in hits.items()], "digest": 255})
        return judge.judge(sc, d, 1, False, w), sc, d

    def test_rule_that_never_fired_is_a_warning(self):
        r, sc, d = self.judged({"w3": 5, "r9": 0})
        self.assertEqual(r.status, 0)
        self.assertEqual(r.warnings, [f"rule r9 (--rules {sc.rules_override}) never fired"])
        r.save(d)
        with open(os.path.join(d, "report.json")) as f:
            saved = json.load(f)
        self.assertEqual(saved["warnings"], r.warnings)
        self.assertEqual(saved["rules_option"], sc.rules_override)
        out = io.StringIO()
        report.print_report(Report.from_json(saved), d, out)
        text = out.getvalue()
        self.assertIn(f"rule hits  w3=5, r9=0  (digest 00000000000000ff; rules from --rules "
                      f"{sc.rules_override})", text)
        self.assertIn(f"warning    rule r9 (--rules {sc.rules_override}) never fired", text)
        # every rule fired, or the scenario's own rules: no warning
        self.assertIsNone(self.judged({"w3": 5, "r9": 1})[0].warnings)
        r = self.judged({"w3": 0}, rules_option=False)[0]
        self.assertIsNone(r.warnings)
        self.assertNotIn("warnings", r.to_json())

    def test_the_summary_says_what_io_the_device_saw(self):
        r = Report(scenario="s", seed=1, status=0, outcome="pass", reason="pass",
                   faults={"rules": [], "digest": 1,
                           "io": [{"op": "read", "count": 7, "lba-min": 0, "lba-max": 639},
                                  {"op": "flush", "count": 1, "lba-min": 0, "lba-max": 0}]})
        out = io.StringIO()
        with tempfile.TemporaryDirectory() as d:
            report.print_report(r, d, out)
        self.assertIn("device io  read 7 (sectors 0-639), flush 1\n", out.getvalue())
        self.assertIsNone(report.device_io({"rules": []}))
        self.assertIsNone(report.device_io(None))

    def test_digest_is_hex_in_stats_and_report(self):
        r = self.judged({"w3": 1})[0]
        self.assertEqual((r.digest, r.faults["digest"]), ("00000000000000ff",) * 2)


def console_excerpt(name):
    with open(os.path.join(TOP, "tests", "unit", "console", name)) as f:
        return f.read()


class KernelLogTest(unittest.TestCase):
    """Issue 33 item 11: the summary says what the kernel saw (consoles of
    real smoke runs with --rules 'w3: write every=3 error=eio' and the same
    rule with dnr, tests/unit/console/)."""

    def test_retried_errors_are_silent(self):
        k = kernlog.summarize(console_excerpt("w3-eio.log"),
                              ['{"seq":0,"rule":"w3","action":"error=eio"}'] * 456)
        self.assertEqual(k, {"messages": {}, "suppressed": {}, "injected_errors": 456})
        self.assertEqual(kernlog.format_line(k),
                         "no I/O error, swap error, timeout or reset message; 456 error(s) "
                         "injected, none reached the block layer (the driver retried them)")

    def test_dnr_errors_reach_swap(self):
        k = kernlog.summarize(console_excerpt("w3-eio-dnr.log"),
                              ['{"seq":0,"rule":"w3","action":"error=eio dnr"}'] * 425)
        self.assertEqual(k, {"messages": {"NVMe I/O Error DNR": 13, "I/O error (WRITE)": 12,
                                          "Write-error on swap-device": 20},
                             "suppressed": {"nvme_log_error": 34, "blk_print_req_error": 34,
                                            "__end_swap_bio_write": 2742},
                             "injected_errors": 425})
        self.assertEqual(kernlog.format_line(k),
                         "13 NVMe I/O Error DNR (+34 suppressed), 12 I/O error (WRITE) "
                         "(+34 suppressed), 20 Write-error on swap-device (+2742 suppressed); "
                         "425 error(s) injected")

    def test_nvme_timeouts_and_resets(self):
        console = (
            "[   30.1] nvme nvme0: I/O tag 17 (1011) opcode 0x1 (I/O Cmd) QID 2 timeout, "
            "aborting req_op:WRITE(1) size:4096\n"
            "[   30.2] nvme nvme0: Abort status: 0x0\n"
            "[   60.1] nvme nvme0: I/O tag 17 (1011) QID 2 timeout, reset controller\n"
            "[   60.5] nvme nvme0: 2/0/0 default/read/poll queues\n"
            "[   61.0] blk_print_req_error: 12 callbacks suppressed\n"
            "[   61.0] I/O error, dev nvme0n1, sector 8 op 0x0:(READ) flags 0x0 phys_seg 1\n")
        self.assertEqual(kernlog.count_templates(console), {"messages": {
            "NVMe timeout, aborting": 1, "NVMe abort completed": 1,
            "NVMe timeout, reset controller": 1, "NVMe controller (re)initialised": 1,
            "I/O error (READ)": 1}, "suppressed": {"blk_print_req_error": 12}})

    def test_summary_has_the_kernel_log_line(self):
        r = run_report(faults={"rules": [{"name": "w3", "hits": 3}]},
                       kernel_log={"messages": {"I/O error (WRITE)": 2}, "injected_errors": 3})
        out = io.StringIO()
        report.print_report(r, "/r", out)
        self.assertIn("\nkernel log 2 I/O error (WRITE); 3 error(s) injected\n",
                      out.getvalue())

    def test_test_line_is_not_a_metric(self):
        k = parse_ktap("# test: swapstress --mem 384M --rounds 2\nKTAP version 1\n1..1\n"
                       "ok 1 a\n# pswpout 7\n")
        self.assertEqual(k["diag"], {"pswpout": 7})


class DiscoverabilityTest(unittest.TestCase):
    """Issue 33 item 12."""

    def test_no_command_prints_usage_exit_2(self):
        res = subprocess.run([os.path.join(TOP, "scripts", "faultline")],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(res.returncode, 2)
        self.assertIn("usage: faultline", res.stderr)
        self.assertIn("exit status:", res.stderr)

    def test_top_level_help_has_exit_codes(self):
        st, _, out = cli_main(["--help"])
        self.assertEqual(st, 0)
        self.assertIn("3 kernel crash or hang", out)
        self.assertIn("minimize                       0 minimal set found", out)

    def test_every_option_has_help(self):
        p = cli.parser()
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        missing = []
        for name, sp in sub.choices.items():
            for a in sp._actions:
                if a.option_strings and a.help is None:
                    missing.append(f"{name} {a.option_strings[0]}")
        self.assertEqual(missing, [])
        help_text = sub.choices["compare"].format_help()
        self.assertNotIn("--mutate", help_text)

    def test_did_you_mean_and_toml_names(self):
        with self.assertRaises(flscenario.ScenarioError) as cm:
            flscenario.load("smok")
        self.assertEqual(str(cm.exception), "no scenario 'smok': did you mean smoke?")
        self.assertEqual(flscenario.load("smoke.toml").name, "smoke")
        with self.assertRaises(flscenario.ScenarioError) as cm:
            flscenario.load("/nonexistent/smoke.toml")
        self.assertEqual(str(cm.exception), "no scenario file /nonexistent/smoke.toml")

    def test_list_separates_selftests(self):
        st, _, out = cli_main(["list"])
        self.assertEqual(st, 0)
        user, _, selftests = out.partition("\nself-tests of faultline itself:\n")
        self.assertIn("smoke ", user)
        for name in ("selftest-crash", "selftest-hang", "minimize-selftest", "sweep-smoke"):
            self.assertNotIn(f"\n{name} ", "\n" + user)
            self.assertIn(f"{name} ", selftests)

    def test_version(self):
        res = subprocess.run([os.path.join(TOP, "scripts", "faultline"), "--version"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(res.returncode, 0, res.stderr)
        lines = res.stdout.splitlines()
        self.assertRegex(lines[0], r"^faultline \S+$")
        self.assertRegex(lines[1], r"^QEMU \S+ \(Debian \S+\)$|^QEMU source not fetched")
        if lines[1].startswith("QEMU "):
            self.assertRegex(lines[2], r"^QEMU build cache key [0-9a-f]{16} ")


if __name__ == "__main__":
    unittest.main()
