"""Unit tests of the libvirt backend's domain XML (no libvirtd needed).

The specs come from the launcher's own make_spec, so the XML is checked for
the argv the qemu backend would run; virt-xml-validate (libvirt-clients)
checks it against libvirt's schema when it is installed."""

import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import xml.etree.ElementTree as ET

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline import cli, scenario
from faultline.build.builds import Builds
from faultline.errors import EXIT_SETUP, SetupError
from faultline.run.spec_builder import make_spec
from faultline.vm import libvirt, libvirt_xml
from faultline.vm.machine import FIXED_RTC, ICOUNT

Q = "{" + libvirt_xml.QEMU_NS + "}"
BUILDS = Builds(qemu_dir="/cache/qemu/abc", guest_dir="/cache/guest/def")


def spec_of(name, deterministic=False, cpus=None):
    sc = scenario.apply_overrides(scenario.load(name), None, cpus, None)
    return make_spec(sc, BUILDS, rundir="/runs/r1", scratch="/shm/s", seed=sc.faults.seed,
                     deterministic=deterministic, initrd="/shm/s/initramfs.cpio",
                     append="console=ttyS0 x=1")


def parse(spec, **kw):
    text = libvirt_xml.domain_xml(spec, "faultline-test-1", **kw)
    return text, ET.fromstring(text)


def qemu_args(root):
    return [a.get("value") for a in root.find(f"{Q}commandline").findall(f"{Q}arg")]


class DomainXml(unittest.TestCase):
    def validate(self, text):
        if not shutil.which("virt-xml-validate"):
            return
        with tempfile.NamedTemporaryFile("w", suffix=".xml") as f:
            f.write(text)
            f.flush()
            r = subprocess.run(["virt-xml-validate", f.name, "domain"], capture_output=True,
                               text=True)
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)

    def common(self, spec, root):
        self.assertEqual(root.tag, "domain")
        self.assertEqual(root.get("type"), "qemu")
        self.assertIsNotNone(root.find("features/acpi"), "libvirt 9.0 passes -no-acpi without it")
        self.assertEqual(root.findtext("devices/emulator"), BUILDS.qemu_binary)
        self.assertEqual(root.find("os/type").get("machine"), "q35")
        self.assertEqual(root.findtext("os/kernel"), BUILDS.kernel)
        self.assertEqual(root.findtext("os/initrd"), "/shm/s/initramfs.cpio")
        self.assertEqual(root.findtext("os/cmdline"), "console=ttyS0 x=1")
        args = qemu_args(root)
        # ttyS0 console, ttyS1 KTAP: QEMU's -serial, in this order (a libvirt
        # <serial> is an isa-serial -device, which shifts a deterministic run).
        self.assertEqual([args[i + 1] for i, a in enumerate(args) if a == "-serial"],
                         ["file:/runs/r1/console.log", "file:/runs/r1/ktap.log"])
        self.assertIsNone(root.find("devices/serial"))
        self.assertEqual(root.find("devices/controller").get("model"), "none")
        self.assertEqual(root.find("devices/memballoon").get("model"), "none")
        args = qemu_args(root)
        # Our disk, injector and device reach QEMU verbatim and in order,
        # after the firmware directories.
        self.assertEqual(args[-len(spec.device_args):], spec.device_args)
        dirs = [args[i + 1] for i, a in enumerate(args) if a == "-L"]
        self.assertEqual(dirs, BUILDS.firmware_dirs)
        self.assertNotIn("-smp", args)
        self.assertNotIn("-rtc", args)
        self.assertEqual(root.findtext("on_poweroff"), "restart")

    def test_nvme(self):
        spec = spec_of("nvme-write-error")
        text, root = parse(spec)
        self.common(spec, root)
        self.assertEqual(root.findtext("memory"), str(512 * 1024))
        self.assertEqual(root.find("memory").get("unit"), "KiB")
        self.assertEqual(root.findtext("vcpu"), "2")
        args = qemu_args(root)
        self.assertIn("nvme,serial=faultline0,drive=disk0,fault-injector=fi0", args)
        self.assertTrue(any(a.startswith("fault-injector,id=fi0,rules=/runs/r1/rules.txt,")
                            for a in args))
        self.assertNotIn("-icount", args)
        self.assertEqual(root.find("clock").get("offset"), "utc")
        self.validate(text)

    def test_syncblk(self):
        spec = spec_of("syncblk-task")
        text, root = parse(spec)
        self.common(spec, root)
        self.assertIn("syncblk-pci,drive=disk0,completion=task,fault-injector=fi0",
                      qemu_args(root))
        self.validate(text)

    def deterministic(self, spec, vcpus):
        text, root = parse(spec)
        self.common(spec, root)
        args = qemu_args(root)
        self.assertEqual(args[args.index("-icount") + 1], ICOUNT)
        self.assertEqual(root.findtext("vcpu"), str(vcpus))
        topo = root.find("cpu/topology")
        self.assertEqual((topo.get("sockets"), topo.get("cores"), topo.get("threads")),
                         ("1", str(vcpus), "1"))
        clock = root.find("clock")
        # -rtc base=2026-01-01T00:00:00,clock=vm in libvirt's words.
        self.assertEqual((clock.get("offset"), clock.get("start")), ("absolute", "1767225600"))
        self.assertEqual(FIXED_RTC, "2026-01-01T00:00:00")
        timer = clock.find("timer")
        self.assertEqual((timer.get("name"), timer.get("track")), ("rtc", "guest"))
        self.assertTrue(any(a.endswith(",deterministic=on") for a in args))
        self.validate(text)

    def test_deterministic_one_vcpu(self):
        spec = spec_of("deterministic-nvme", deterministic=True)
        self.assertIn("-smp", spec.extra_args)
        self.deterministic(spec, 1)

    def test_deterministic_n_vcpus(self):
        # icount runs N vCPUs round-robin: the spec may ask for more than one.
        spec = spec_of("deterministic-sync", deterministic=True)
        i = spec.extra_args.index("-smp")
        spec.extra_args[i + 1] = "2"
        self.deterministic(spec, 2)

    def test_by_hand_ends_on_power_off(self):
        text, root = parse(spec_of("smoke"), by_hand=True)
        self.assertEqual(root.findtext("on_poweroff"), "destroy")
        self.assertEqual(root.findtext("on_reboot"), "destroy")
        self.validate(text)

    def test_bad_machine_args_are_one_line(self):
        spec = spec_of("smoke")
        for extra, needle in ((["-rtc", "base=yesterday"], "YYYY-MM-DDTHH:MM:SS"),
                              (["-rtc", "driftfix=slew"], "no libvirt form"),
                              (["-smp", "lots"], "vCPU count")):
            spec.extra_args = extra
            with self.assertRaises(SetupError) as cm:
                libvirt_xml.domain_xml(spec, "x")
            self.assertIn(needle, str(cm.exception))
            self.assertNotIn("\n", str(cm.exception))
        spec.extra_args, spec.memory = [], "lots"
        with self.assertRaises(SetupError):
            libvirt_xml.domain_xml(spec, "x")

    def test_connect_needs_the_libvirt_backend(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            status = cli.main(["run", "smoke", "--connect", "qemu:///system"])
        self.assertEqual(status, EXIT_SETUP)
        self.assertEqual(err.getvalue().strip(),
                         "faultline: error: --connect is an option of --backend libvirt")

    def test_domain_names_are_unique(self):
        a, b = libvirt_xml.new_domain_name("smoke"), libvirt_xml.new_domain_name("smoke")
        self.assertNotEqual(a, b)
        self.assertTrue(a.startswith(f"faultline-smoke-{os.getpid()}-"))
        self.assertRegex(libvirt_xml.new_domain_name("we ird/name"), r"^faultline-we_ird_name-")


class PowerOffTest(unittest.TestCase):
    def test_final_statistics_wait_for_the_reset_pause(self):
        # dom.suspend() has paused the domain, but the event callback has
        # not yet noted the reset: the wait must not end on the status.
        m = libvirt.LibvirtMachine(spec_of("nvme-write-error"))
        m.running = lambda: True
        m.qmp = lambda cmd, **a: {"status": "paused"}
        threading.Timer(0.5, m.reset_paused.set).start()
        m.wait_powered_off(timeout_s=10.0)
        self.assertTrue(m.reset_paused.is_set())
        # No event at all: the qemu backend's wait on the status, bounded.
        m2 = libvirt.LibvirtMachine(spec_of("nvme-write-error"))
        m2.running = lambda: True
        m2.qmp = lambda cmd, **a: {"status": "paused"}
        t0 = time.monotonic()
        m2.wait_powered_off(timeout_s=0.2)
        self.assertLess(time.monotonic() - t0, 2.0)
        self.assertFalse(m2.reset_paused.is_set())


class RecountTest(unittest.TestCase):
    def test_hits_recounted_from_the_fault_log_after_the_reset(self):
        d = tempfile.mkdtemp()
        log = os.path.join(d, "faults.jsonl")
        with open(log, "w") as f:
            for rule in ("a", "b", "a", "a"):
                f.write('{"seq":0,"op":"write","rule":"%s","action":"drop"}\n' % rule)
        stats = {"digest": 7, "log-total": 4,
                 "rules": [{"name": "a", "hits": 0, "matched": 0},
                           {"name": "b", "hits": 0, "matched": 0},
                           {"name": "c", "hits": 0, "matched": 0}]}
        got = libvirt.recount_after_reset(stats, log)
        self.assertEqual([(r["name"], r["hits"]) for r in got["rules"]],
                         [("a", 3), ("b", 1), ("c", 0)])
        self.assertEqual(got["digest"], 7)
        self.assertNotIn("matched", got["rules"][0])
        self.assertEqual(libvirt.recount_after_reset(stats, os.path.join(d, "none")), stats)

if __name__ == "__main__":
    unittest.main()
