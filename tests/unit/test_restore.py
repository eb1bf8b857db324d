"""Unit tests of restored runs (python/faultline/run/restore.py) without a VM:
what is hot-added after the restore and in which order, what the saved
guest's cache key depends on, the phase times, --jobs scheduling, and the
one-line refusals of `run --restore` (exit 2 before anything is built)."""

import io
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest
from dataclasses import dataclass, replace

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline import scenario
from faultline.bench import restored
from faultline.build.builds import Builds
from faultline.errors import EXIT_FAIL, EXIT_PASS, SetupError
from faultline.judge.report import Report
from faultline.run import restore
from faultline.vm import snapshot
from faultline.run.options import RunOptions
from faultline.run.progress import Progress

FAULTLINE = os.path.join(TOP, "scripts", "faultline")


class Tree:
    """A QEMU and a guest cache directory with the files a key stats."""

    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        os.makedirs(os.path.join(d, "q", "bin"))
        os.makedirs(os.path.join(d, "g"))
        for path in ("q/bin/qemu-system-x86_64", "g/vmlinuz", "g/initramfs.cpio.gz"):
            with open(os.path.join(d, path), "w") as f:
                f.write(path)
        self.builds = Builds(os.path.join(d, "q"), os.path.join(d, "g"))


def opts(**kw):
    return RunOptions(restore=True, **kw)


class HotplugTest(unittest.TestCase):
    def setUp(self):
        self.tree = Tree()
        self.addCleanup(self.tree.tmp.cleanup)

    def split(self, name, **kw):
        sc = scenario.load(name)
        spec = restore.machine_spec(sc, self.tree.builds, opts(**kw), "/run", "/s", 5)
        return restore.split_device_args(spec.device_args)

    def test_nvme_with_rules(self):
        cmdline, later = self.split("nvme-write-error")
        self.assertEqual(cmdline, restore.ROOT_PORT)
        self.assertEqual([o for o, _ in later], ["-blockdev", "-object", "-device"])
        self.assertTrue(later[1][1].startswith("fault-injector,id=fi0,rules=/run/rules.txt,"
                                               "seed=5,"))
        # The device goes on the saved machine's root port, under the id
        # [[qmp]] device_del uses.
        self.assertTrue(later[2][1].startswith("nvme,serial=faultline0,drive=disk0,"
                                               "fault-injector=fi0,bus=swaprp,id=swapdev"))

    def test_virtio_blk_filter_after_its_injector(self):
        _, later = self.split("write-error-redirty-virtio")
        self.assertEqual([o for o, _ in later], ["-blockdev", "-object", "-blockdev", "-device"])
        self.assertIn("driver=fault-inject", later[2][1])
        self.assertTrue(later[3][1].startswith("virtio-blk-pci,drive=fi-disk0,"))
        self.assertTrue(later[3][1].endswith(",bus=swaprp,id=swapdev"))

    def test_deterministic_injector_without_rules(self):
        _, later = self.split("smoke", deterministic=True)
        self.assertEqual([o for o, _ in later], ["-blockdev", "-object", "-device"])
        self.assertTrue(later[1][1].endswith(",deterministic=on"))

    def test_blockdev_add_arguments(self):
        self.assertEqual(
            snapshot.keyval_dict("driver=file,filename=/s/disk.img,node-name=disk0,"
                                "cache.direct=off"),
            {"driver": "file", "filename": "/s/disk.img", "node-name": "disk0",
             "cache": {"direct": False}})

    def test_saved_machine_has_no_swap_device(self):
        spec = restore.save_spec(scenario.load("nvme-write-error"), self.tree.builds, opts(),
                                 "/run", "/s")
        self.assertEqual(spec.device_args, restore.ROOT_PORT)
        self.assertIsNone(spec.injector_id)
        self.assertTrue(spec.initrd.endswith("/g/initramfs.cpio.gz"))


class KeyTest(unittest.TestCase):
    def setUp(self):
        self.tree = Tree()
        self.addCleanup(self.tree.tmp.cleanup)

    def key(self, sc, o=None, builds=None):
        return restore.snapshot_key(restore.save_spec(sc, builds or self.tree.builds,
                                                      o or opts(), "/run", "/s"))

    def test_device_rules_and_tests_do_not_count(self):
        sc = scenario.load("smoke")
        other = replace(sc, device=replace(sc.device, kind="syncblk"), tests=["true"])
        other.faults = replace(sc.faults, rules="w: write nth=1 error=eio", seed=9)
        self.assertEqual(self.key(sc), self.key(other))

    def test_machine_counts(self):
        sc = scenario.load("smoke")
        base = self.key(sc)
        self.assertNotEqual(base, self.key(replace(sc, vm=replace(sc.vm, memory="1G"))))
        self.assertNotEqual(base, self.key(replace(sc, vm=replace(sc.vm, cmdline="quiet"))))
        self.assertNotEqual(base, self.key(sc, opts(deterministic=True)))
        # A rebuilt kernel (same path, new bytes) is another machine.
        time.sleep(0.01)
        with open(os.path.join(self.tree.builds.guest_dir, "vmlinuz"), "a") as f:
            f.write("rebuilt")
        self.assertNotEqual(base, self.key(sc))


class PlaceholderTest(unittest.TestCase):
    def test_guest_and_launcher_agree(self):
        """The saved QEMU's placeholder is what guest/tools/fwcfg.c takes
        for "not there yet", and both use one size."""
        with open(os.path.join(TOP, "guest", "tools", "fwcfg.c")) as f:
            src = f.read()
        text = re.search(r'^#define PLACEHOLDER "([^"]*)"$', src, re.M).group(1)
        size = int(re.search(r"^#define FWCFG_SIZE\s+(\d+)$", src, re.M).group(1))
        self.assertEqual(text.encode(), restore.FWCFG_PLACEHOLDER)
        self.assertEqual(size, restore.FWCFG_SIZE)


class ClockTest(unittest.TestCase):
    """A saved guest whose boot miscalibrated its TSC is not kept."""

    def console(self, up):
        return ("[    0.032000] tsc: PIT calibration deviates from PMTIMER: 398637 2596341\n"
                f"faultline-init: 6.12.118+deb12-amd64 up {up}s\n{restore.READY}\n")

    def test_real_time(self):
        self.assertEqual(restore.check_clock(self.console("14.10"), 25.7), 14.1)
        self.assertEqual(restore.check_clock(self.console("4.60"), 6.0), 4.6)

    def test_fast_clock(self):
        # Seen: a guest up "115.88 s" 18 s after QEMU started.
        with self.assertRaisesRegex(restore.BadClock, "uptime 115.9 s after 18.0 s"):
            restore.check_clock(self.console("115.88"), 18.0)

    def test_slow_clock(self):
        with self.assertRaises(restore.BadClock):
            restore.check_clock(self.console("5.00"), 40.0)

    def test_no_uptime(self):
        with self.assertRaisesRegex(restore.BadClock, "no uptime"):
            restore.check_clock(restore.READY + "\n", 10.0)


class PhaseTest(unittest.TestCase):
    def test_phases(self):
        clock = restore.PhaseClock(Progress(1, quiet=True, stream=io.StringIO()))
        ktap = ""
        for t, line in ((1.0, ""), (2.0, "# kernel 6.12\n"), (5.0, "# test: swapstress\n"),
                        (30.0, "FAULTLINE-EXIT 0\n")):
            ktap += line
            clock.update(ktap, t, {})
        ph = clock.phases(prepare_s=0.5, start_s=0.7, watch_s=31.0, total_s=32.5)
        self.assertEqual(ph, {"prepare": 0.5, "boot": 2.7, "setup": 3.0, "test": 25.0,
                              "teardown": 1.0, "judge": 0.3})

    def test_hang_leaves_later_phases_open(self):
        clock = restore.PhaseClock(Progress(1, quiet=True, stream=io.StringIO()))
        clock.update("# kernel 6.12\n", 3.0, {})
        ph = clock.phases(0.1, 0.2, 300.0, 301.0)
        self.assertEqual((ph["boot"], ph["setup"], ph["test"]), (3.2, None, None))


@dataclass
class FakeReport:
    status: int
    outcome: str
    elapsed_s: float = 1.0


class JobsTest(unittest.TestCase):
    """run_parallel's scheduling, with a one_run that only records."""

    def plan(self, n):
        sc = scenario.load("smoke")
        return [(sc, s, 0) for s in range(1, n + 1)]

    def run_jobs(self, n, fail_seed=None, keep_going=False, jobs=2):
        ran = []

        def one_run(sc, seed, o, builds, rundir, verbose=True):
            self.assertTrue(o.quiet)
            self.assertFalse(verbose)
            time.sleep(0.05 * (seed % 3))
            ran.append(seed)
            st = EXIT_FAIL if seed == fail_seed else EXIT_PASS
            return FakeReport(st, "fail" if st else "pass"), {"repro": f"repro {seed}"}

        with tempfile.TemporaryDirectory() as group:
            results, repro = restore.run_parallel(self.plan(n), opts(), None, group, jobs,
                                                  keep_going, one_run)
            dirs = sorted(os.listdir(group))
        return ran, results, repro, dirs

    def test_all_in_plan_order(self):
        ran, results, repro, dirs = self.run_jobs(6)
        self.assertEqual(sorted(ran), [1, 2, 3, 4, 5, 6])
        self.assertEqual([os.path.basename(d) for _, d in results],
                         [f"smoke-seed{s}" for s in range(1, 7)])
        self.assertEqual(len(repro), 6)
        self.assertEqual(len(dirs), 6)

    def test_first_failure_stops_the_rest(self):
        ran, results, _, _ = self.run_jobs(8, fail_seed=1, jobs=1)
        self.assertEqual(ran, [1])
        self.assertEqual(len(results), 1)

    def test_keep_going(self):
        ran, results, _, _ = self.run_jobs(4, fail_seed=1, keep_going=True)
        self.assertEqual(len(results), 4)


class StartTest(unittest.TestCase):
    def test_announcements_are_off_before_the_saved_guest_loads(self):
        """Their real-time timer would cut icount slices: with two vCPUs
        host timing chose the interleaving of a restored --deterministic
        run.  Off before migrate-incoming, then the hot-add, then cont."""
        from unittest import mock
        sent = []

        class FakeQmp:
            def __init__(self, *a, **kw):
                pass

            def cmd(self, command, **args):
                sent.append((command, args))
                if command == "query-migrate":
                    return {"status": "completed"}
                if command == "human-monitor-command":
                    return ""
                return {}

            def close(self):
                pass
        with tempfile.TemporaryDirectory() as d:
            snap, rundir = os.path.join(d, "snap"), os.path.join(d, "run")
            os.makedirs(snap)
            os.makedirs(rundir)
            open(os.path.join(snap, "console.log"), "w").close()
            m = snapshot.RestoredMachine.__new__(snapshot.RestoredMachine)
            m.spec = mock.Mock(rundir=rundir)
            m.snapshot, m.qmp_socket, m._qmp = snap, os.path.join(d, "qmp.sock"), None
            m.hotplug = [("-object", "fault-injector,id=fi0,deterministic=on"),
                         ("-device", "nvme,serial=x,drive=disk0,bus=swaprp")]
            with mock.patch.object(snapshot.QemuMachine, "start", lambda self: None), \
                    mock.patch.object(snapshot, "Qmp", FakeQmp), \
                    mock.patch.object(snapshot.QemuMachine, "running", lambda self: True):
                m.start()
        names = [c for c, _ in sent]
        self.assertEqual(sent[0], ("migrate-set-parameters", {"announce-rounds": 0}))
        self.assertEqual(names[1], "migrate-incoming")
        self.assertEqual(names[-1], "cont")
        self.assertEqual([a["command-line"].split()[0] for c, a in sent
                          if c == "human-monitor-command"], ["object_add", "device_add"])


class BenchPairTest(unittest.TestCase):
    """The bench row of two restored --deterministic runs of one seed."""

    def row(self, ktaps, digests=("d1", "d1")):
        calls = iter(range(2))

        def fake_run(sc, seed, o, builds, rundir, verbose):
            i = next(calls)
            self.assertTrue(o.restore and o.deterministic and o.rules)
            self.assertEqual(seed, 1)
            for name, text in (("faults.jsonl", '{"seq":0}\n'), ("ktap.log", ktaps[i])):
                with open(os.path.join(rundir, name), "w") as f:
                    f.write(text)
            return Report(scenario=sc.name, seed=1, status=EXIT_PASS, outcome="pass",
                          reason="", digest=digests[i]), {}
        with tempfile.TemporaryDirectory() as d:
            return restored.deterministic_pair_row(None, d, lambda m: None, one_run=fake_run)

    def test_identical(self):
        r = self.row(["ok 1\n", "ok 1\n"])
        self.assertEqual((r.value, r.ok), (1.0, True))

    def test_ktap_differs(self):
        r = self.row(["ok 1\n", "ok 2\n"])
        self.assertEqual((r.value, r.ok), (0.0, False))
        self.assertIn("ktap.log differ", r.note)

    def test_digest_differs(self):
        r = self.row(["ok 1\n", "ok 1\n"], digests=("d1", "d2"))
        self.assertFalse(r.ok)
        self.assertIn("d1 / d2", r.note)


class BootFreeCeilingTest(unittest.TestCase):
    """What a restore could give at most: cold runs without their boot."""

    def test_measured_smoke(self):
        # December 2026's bench: boot about 4.6 s of a 17 s cold smoke run.
        walls = [17.2, 17.6, 16.4, 17.0]
        phases = [{"boot": 4.8, "test": 9.8}, {"boot": 4.6}, {"boot": 4.4}, {"boot": 4.4}]
        self.assertAlmostEqual(restored.boot_free_ceiling(walls, phases), 68.2 / 50.0)

    def test_unknown_phases(self):
        self.assertIsNone(restored.boot_free_ceiling([10.0], [None]))
        self.assertIsNone(restored.boot_free_ceiling([10.0], [{"test": 3}]))
        self.assertIsNone(restored.boot_free_ceiling([], []))
        self.assertIsNone(restored.boot_free_ceiling([4.0], [{"boot": 4.0}]))


class RefusalTest(unittest.TestCase):
    def test_check(self):
        with self.assertRaisesRegex(SetupError, "virtio-scsi device cannot be hot-added"):
            restore.check(scenario.load("write-error-redirty-virtio-scsi"), opts())
        with self.assertRaisesRegex(SetupError, "qemu backend only"):
            restore.check(scenario.load("smoke"), opts(backend="libvirt"))
        restore.check(scenario.load("smoke"), opts(deterministic=True))
        restore.check(scenario.load("syncblk-task"), opts())

    def test_kernel_without_ioperm(self):
        with tempfile.TemporaryDirectory() as d:
            kernel = os.path.join(d, "bzImage")
            open(kernel, "w").close()
            for val, refused in (("# CONFIG_X86_IOPL_IOPERM is not set", True),
                                 ("CONFIG_X86_IOPL_IOPERM=y", False),
                                 ("CONFIG_FW_CFG_SYSFS=y", False),
                                 ("CONFIG_FW_CFG_SYSFS=m", True)):
                with open(os.path.join(d, ".config"), "w") as f:
                    f.write(val + "\n")
                o = opts(kernel=kernel)
                if refused:
                    with self.assertRaisesRegex(SetupError, "lacks both CONFIG_X86_IOPL_IOPERM=y and CONFIG_FW_CFG_SYSFS=y"):
                        restore.check(scenario.load("smoke"), o)
                else:
                    restore.check(scenario.load("smoke"), o)

    def test_cli_one_line_before_any_work(self):
        with tempfile.TemporaryDirectory() as out:
            p = subprocess.run([FAULTLINE, "run", "write-error-redirty-virtio-scsi", "--restore",
                                "--out", out], capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertIn("--restore", p.stderr)
            self.assertEqual(os.listdir(out), [])
        p = subprocess.run([FAULTLINE, "run", "smoke", "--jobs", "0"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)


if __name__ == "__main__":
    unittest.main()
