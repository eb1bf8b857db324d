"""Unit tests of the pre-boot kernel config check (python/faultline/kernel/kconfig.py):
what each scenario needs, where a kernel's config is found (beside the
image, in a tree, in Debian packages unpacked anywhere, embedded), and the
one-line refusal."""

import gzip
import lzma
import os
import random
import subprocess
import sys
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline import scenario
from faultline.errors import SetupError
from faultline.kernel import kconfig

# One scenario of each kind of need: NVMe, syncblk, both virtio frontends,
# zswap, probes.
SCENARIOS = ["smoke", "syncblk-task", "syncblk-irq", "nvme-write-error",
             "write-error-redirty-sync", "write-error-redirty-virtio",
             "write-error-redirty-virtio-scsi", "zswap-lru-writeback"]


def full_config(scs):
    """A config meeting every need of @scs, all options =y."""
    return {spec.lstrip("?").split("=")[0]: "y"
            for sc in scs for _, specs in kconfig.needs(sc) for spec in specs}


def config_text(vals):
    return "".join(f"CONFIG_{k}={v}\n" if v != "n" else f"# CONFIG_{k} is not set\n"
                   for k, v in vals.items())


class Tree:
    """A scratch directory with files in it."""

    def __init__(self):
        self.dir = tempfile.mkdtemp()

    def write(self, rel, data=b""):
        path = os.path.join(self.dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        return path


def load(name):
    return scenario.load(name)


class NeedsTest(unittest.TestCase):
    def test_needs_follow_the_scenario_data(self):
        opts = {n: {o for _, specs in kconfig.needs(load(n)) for o in specs}
                for n in SCENARIOS}
        self.assertIn("BLK_DEV_NVME", opts["smoke"])
        self.assertNotIn("ZSWAP=y", opts["smoke"])             # zswap = false
        self.assertNotIn("KPROBES=y", opts["smoke"])           # swapstress only
        self.assertIn("KPROBES=y", opts["syncblk-task"])       # swapctx
        self.assertIn("MODULES", opts["syncblk-task"])
        self.assertNotIn("BLK_DEV_NVME", opts["syncblk-task"])
        self.assertIn("ZSWAP=y", opts["write-error-redirty-sync"])
        self.assertIn("?ZSWAP_SHRINKER_DEFAULT_ON", opts["write-error-redirty-sync"])
        self.assertIn("VIRTIO_BLK", opts["write-error-redirty-virtio"])
        self.assertIn("SCSI_VIRTIO", opts["write-error-redirty-virtio-scsi"])
        # The same scenario data with another device kind needs another driver.
        sc = load("smoke")
        sc.device.kind = "virtio-blk"
        got = {o for _, specs in kconfig.needs(sc) for o in specs}
        self.assertIn("VIRTIO_BLK", got)
        self.assertNotIn("BLK_DEV_NVME", got)

    def test_metrics_alone_need_probes(self):
        sc = load("smoke")
        sc.expect = {"diag_min": {"kprobe end_swap_bio_write": 1}}
        self.assertIn("KPROBE_EVENTS=y",
                      {o for _, specs in kconfig.needs(sc) for o in specs})


class CheckTest(unittest.TestCase):
    def kernel_with(self, vals):
        """A kernel image file with @vals as the .config beside it."""
        t = Tree()
        t.write(".config", config_text(vals))
        return t.write("bzImage", b"not really a kernel")

    def refusal(self, name, vals, modules=None):
        with self.assertRaises(SetupError) as cm:
            kconfig.check([load(name)], self.kernel_with(vals), modules)
        msg = str(cm.exception)
        self.assertNotIn("\n", msg)
        return msg

    def test_each_missing_option_is_named(self):
        for name in SCENARIOS:
            sc = load(name)
            full = full_config([sc])
            mods = tempfile.mkdtemp()
            kconfig.check([sc], self.kernel_with(full), mods)     # all there: no refusal
            for spec in {s for _, specs in kconfig.needs(sc) for s in specs}:
                opt = spec.lstrip("?").split("=")[0]
                with self.subTest(scenario=name, option=opt):
                    vals = dict(full)
                    del vals[opt]
                    msg = self.refusal(name, vals, mods)
                    self.assertIn(f"CONFIG_{opt} ", msg)
                    self.assertIn(name + ":", msg)
                    # Only that option is missing.
                    self.assertEqual(msg.count("CONFIG_"), 1, msg)

    def test_not_set_is_missing(self):
        vals = full_config([load("write-error-redirty-sync")])
        vals["ZSWAP"] = "n"
        msg = self.refusal("write-error-redirty-sync", vals, tempfile.mkdtemp())
        self.assertIn("CONFIG_ZSWAP not set, needs =y (zswap", msg)

    def test_known_option_marks_the_kernel_version(self):
        # 6.12 lists the shrinker option as not set: the shrinker exists.
        vals = full_config([load("write-error-redirty-sync")])
        vals["ZSWAP_SHRINKER_DEFAULT_ON"] = "n"
        kconfig.check([load("write-error-redirty-sync")], self.kernel_with(vals),
                      tempfile.mkdtemp())
        # 6.1 does not know it at all.
        del vals["ZSWAP_SHRINKER_DEFAULT_ON"]
        msg = self.refusal("write-error-redirty-sync", vals, tempfile.mkdtemp())
        self.assertIn("CONFIG_ZSWAP_SHRINKER_DEFAULT_ON unknown to this kernel", msg)

    def test_pool_limit_writeback_runs_without_the_shrinker(self):
        # Linux 6.1: no shrinker option at all, zbud built in.  A scenario
        # writing back at zswap's pool limit runs; one using the shrinker
        # does not.
        scs = [load("zswap-writeback-reuse"), load("zswap-lru-writeback")]
        vals = full_config(scs)
        del vals["ZSWAP_SHRINKER_DEFAULT_ON"]
        kconfig.check([scs[0]], self.kernel_with(vals), tempfile.mkdtemp())
        msg = self.refusal("zswap-lru-writeback", vals, tempfile.mkdtemp())
        self.assertIn("CONFIG_ZSWAP_SHRINKER_DEFAULT_ON unknown to this kernel", msg)
        # Its zbud pool is a need of its own.
        vals["ZBUD"] = "n"
        msg = self.refusal("zswap-writeback-reuse", vals, tempfile.mkdtemp())
        self.assertIn("CONFIG_ZBUD not set", msg)

    def test_wp_toggle_needs_userfaultfd(self):
        # A kernel without userfaultfd ran zswap-swapin-race with no toggler
        # at all (ENOSYS in the guest): it is refused before boot instead.
        vals = full_config([load("zswap-swapin-race")])
        self.assertEqual(vals.get("USERFAULTFD"), "y")
        kconfig.check([load("zswap-swapin-race")], self.kernel_with(vals), tempfile.mkdtemp())
        vals["USERFAULTFD"] = "n"
        msg = self.refusal("zswap-swapin-race", vals, tempfile.mkdtemp())
        self.assertIn("CONFIG_USERFAULTFD not set, needs =y (userfaultfd write-protect", msg)
        # A swaprace without the toggler does not need it.
        kconfig.check([load("swapin-race-sync")], self.kernel_with(vals), tempfile.mkdtemp())

    def test_preempt_on_the_cmdline_needs_a_dynamic_preemption_kernel(self):
        sc = load("swapin-race-sync")
        sc.vm.cmdline += " preempt=full"
        vals = full_config([load("swapin-race-sync")])
        vals["PREEMPT_DYNAMIC"] = "n"
        with self.assertRaises(SetupError) as cm:
            kconfig.check([sc], self.kernel_with(vals), tempfile.mkdtemp())
        self.assertIn("CONFIG_PREEMPT_DYNAMIC not set, needs =y (preemption model", str(cm.exception))
        vals["PREEMPT_DYNAMIC"] = "y"
        kconfig.check([sc], self.kernel_with(vals), tempfile.mkdtemp())
        # Without preempt= nothing is asked of the kernel's preemption.
        vals["PREEMPT_DYNAMIC"] = "n"
        kconfig.check([load("swapin-race-sync")], self.kernel_with(vals), tempfile.mkdtemp())

    def test_kcov_needs_a_kcov_kernel(self):
        sc = load("smoke")
        sc.vm.kcov = True
        vals = full_config([load("smoke")])
        with self.assertRaises(SetupError) as cm:
            kconfig.check([sc], self.kernel_with(vals), tempfile.mkdtemp())
        self.assertIn("CONFIG_KCOV not set, needs =y (kernel coverage", str(cm.exception))
        vals.update(KCOV="y", DEBUG_FS="y")
        kconfig.check([sc], self.kernel_with(vals), tempfile.mkdtemp())

    def test_nvme_module_needs_modules(self):
        vals = full_config([load("nvme-write-error")])
        vals["BLK_DEV_NVME"] = "m"
        msg = self.refusal("nvme-write-error", vals)
        self.assertIn("CONFIG_BLK_DEV_NVME=m but no --modules", msg)
        kconfig.check([load("nvme-write-error")], self.kernel_with(vals), tempfile.mkdtemp())

    def test_strict_options_take_no_module(self):
        vals = full_config([load("write-error-redirty-virtio")])
        vals["VIRTIO_PCI"] = "m"
        msg = self.refusal("write-error-redirty-virtio", vals, tempfile.mkdtemp())
        self.assertIn("CONFIG_VIRTIO_PCI=m, needs =y (virtio-blk", msg)

    def test_syncblk_needs_modules_dir(self):
        vals = full_config([load("syncblk-task")])
        msg = self.refusal("syncblk-task", vals)
        self.assertIn("syncblk-task: --modules DIR", msg)

    def test_every_scenario_listed_in_one_line(self):
        vals = full_config([load("smoke")])
        vals["MEMCG"] = "n"
        with self.assertRaises(SetupError) as cm:
            kconfig.check([load("smoke"), load("nvme-write-error")], self.kernel_with(vals),
                          tempfile.mkdtemp())
        msg = str(cm.exception)
        self.assertNotIn("\n", msg)
        self.assertIn("smoke: CONFIG_MEMCG", msg)
        self.assertIn("nvme-write-error: CONFIG_MEMCG", msg)

    def test_missing_kernel_or_modules(self):
        with self.assertRaisesRegex(SetupError, r"^--kernel /nonexistent/bzImage: no such file$"):
            kconfig.check([load("smoke")], "/nonexistent/bzImage", None)
        with self.assertRaisesRegex(SetupError, r"^--modules /nonexistent: no such directory$"):
            kconfig.check([load("smoke")], self.kernel_with({}), "/nonexistent")

    def test_no_config_warns_and_goes_on(self):
        t = Tree()
        kernel = t.write("bzImage", b"\0" * 4096)
        kconfig.check([load("smoke")], kernel, tempfile.mkdtemp())


class FindConfigTest(unittest.TestCase):
    VALS = {"SWAP": "y", "ZSWAP": "n", "BLK_DEV_NVME": "m"}

    def test_beside_the_image(self):
        t = Tree()
        t.write(".config", config_text(self.VALS))
        where, vals = kconfig.find_config(t.write("bzImage"), None)
        self.assertEqual(where, os.path.join(t.dir, ".config"))
        self.assertEqual(vals, self.VALS)

    def test_debian_boot_config(self):
        t = Tree()
        t.write("boot/config-6.1.0-57-amd64", config_text(self.VALS))
        where, vals = kconfig.find_config(t.write("boot/vmlinuz-6.1.0-57-amd64"), None)
        self.assertTrue(where.endswith("boot/config-6.1.0-57-amd64"))
        self.assertEqual(vals, self.VALS)

    def test_tree_of_arch_boot_bzimage(self):
        t = Tree()
        t.write(".config", config_text(self.VALS))
        where, _ = kconfig.find_config(t.write("arch/x86/boot/bzImage"), None)
        self.assertEqual(where, os.path.join(t.dir, ".config"))

    def test_debian_headers_unpacked_elsewhere(self):
        # dpkg-deb -x of the image and headers packages: lib/modules/V/build
        # points at /usr/src/... of the host, which lacks it.
        t = Tree()
        rel = "usr/src/linux-headers-6.1.0-99-faultline-test"
        t.write(rel + "/.config", config_text(self.VALS))
        mods = os.path.join(t.dir, "lib/modules/6.1.0-99-faultline-test")
        os.makedirs(mods)
        os.symlink("/" + rel, os.path.join(mods, "build"))
        self.assertFalse(os.path.exists("/" + rel))
        where, vals = kconfig.find_config(t.write("vmlinuz"), mods)
        self.assertEqual(where, os.path.join(t.dir, rel, ".config"))
        self.assertEqual(vals, self.VALS)

    def embedded(self, compress):
        """An image whose compressed payload holds an IKCONFIG blob."""
        rnd = random.Random(7)
        blob = b"IKCFG_ST" + gzip.compress(config_text(self.VALS).encode()) + b"IKCFG_ED"
        payload = bytes(rnd.getrandbits(8) for _ in range(20000)) + blob + b"\0" * 100
        t = Tree()
        # A setup header, the payload, then data after it as in a bzImage.
        return t.write("bzImage", b"MZ" + b"\0" * 1000 + compress(payload) + b"\xff" * 64)

    def test_embedded_gzip(self):
        where, vals = kconfig.find_config(self.embedded(gzip.compress), None)
        self.assertTrue(where.endswith("(embedded)"))
        self.assertEqual(vals, self.VALS)

    def test_embedded_xz(self):
        where, vals = kconfig.find_config(
            self.embedded(lambda d: lzma.compress(d, check=lzma.CHECK_CRC32)), None)
        self.assertEqual(vals, self.VALS)

    def test_none(self):
        t = Tree()
        self.assertEqual(kconfig.find_config(t.write("bzImage", b"\0" * 100), None),
                         (None, None))


class GuestImageTest(unittest.TestCase):
    def test_syncblk_module_missing(self):
        t = Tree()
        t.write("guest-modules", "# the kernel in /x was built with gcc-16, which this "
                                 "host lacks\n")
        with self.assertRaises(SetupError) as cm:
            kconfig.check_image(load("syncblk-task"), t.dir)
        self.assertIn("built with gcc-16", str(cm.exception))
        kconfig.check_image(load("smoke"), t.dir)       # NVMe needs no project module
        t.write("guest-modules", "syncblk\n")
        kconfig.check_image(load("syncblk-task"), t.dir)


class DocsTest(unittest.TestCase):
    """docs/scenarios.md's kernel requirement tables follow NEEDS."""
    LABELS = ["init", "NVMe", "syncblk", "virtio-blk", "virtio-scsi", "zswap",
              "zswap shrinker", "zbud", "probes", "kcov", "userfaultfd", "preemption"]

    def test_tables_match_the_table(self):
        with open(os.path.join(TOP, "docs", "scenarios.md")) as f:
            doc = f.read()
        doc = doc[doc.index("## Kernel requirements"):doc.index("## File format")]
        self.assertEqual(len(self.LABELS), len(kconfig.NEEDS))
        for _, _, opts in kconfig.NEEDS:
            for o in opts:
                self.assertIn(f"`{o.lstrip('?').split('=')[0]}`", doc)
        label = {feature: lab for (feature, _, _), lab in zip(kconfig.NEEDS, self.LABELS)}
        listed = {}
        for ln in doc.splitlines():
            cells = [c.strip() for c in ln.strip("|").split("|")]
            if len(cells) == 2 and cells[0].startswith("`"):
                for name in cells[0].replace("`", "").split(", "):
                    self.assertNotIn(name, listed)
                    listed[name] = cells[1].split(", ")
        for name, _ in scenario.list_all():
            with self.subTest(scenario=name):
                self.assertEqual(listed.get(name),
                                 [label[f] for f, _ in kconfig.needs(load(name))])


class CommandLineTest(unittest.TestCase):
    def test_run_refuses_before_building(self):
        t = Tree()
        vals = full_config([load("write-error-redirty-sync")])
        vals["ZSWAP"] = "n"
        t.write(".config", config_text(vals))
        # A bzImage as far as the launcher's input check reads one.
        kernel = t.write("bzImage", b"\0" * 0x202 + b"HdrS" + b"\0" * 64)
        res = subprocess.run([os.path.join(TOP, "scripts", "faultline"), "run",
                              "write-error-redirty-sync", "--kernel", kernel,
                              "--modules", t.dir, "--out", t.dir],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(res.returncode, 2, res.stderr)
        lines = res.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, res.stderr)
        self.assertIn("CONFIG_ZSWAP not set", lines[0])
        self.assertNotIn("build", res.stderr)


if __name__ == "__main__":
    unittest.main()
