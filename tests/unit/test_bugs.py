"""The real-kernel-bug corpus (tests/bugs/*/bug.toml) is complete and
consistent, and the judge turns kernel splats in the console into failures
that name the splat's first line."""

import os
import shutil
import sys
import tempfile
import types
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline import scenario as flscenario
from faultline.bugs import corpus
from faultline.errors import EXIT_CRASH, EXIT_FAIL, EXIT_PASS
from faultline.judge import judge


def read(path):
    with open(path) as f:
        return f.read()


class CorpusTest(unittest.TestCase):
    def test_every_bug_loads(self):
        names = corpus.list_all()
        self.assertGreaterEqual(len(names), 6)
        for n in names:
            with self.subTest(bug=n):
                b = corpus.load(n)
                self.assertIn(b.base, corpus.BASES)
                self.assertRegex(b.fix, r"^[0-9a-f]{12,40}$")
                for s in b.scenarios:
                    sc = flscenario.load(s)
                    # A scenario names what it stresses, never the bug.
                    self.assertNotIn(b.fix, read(flscenario.find(s)))
                    self.assertNotIn(n, sc.name)
                self.assertIn(b.fix, read(b.patch), "the edit's comment names the fix")

    def test_scenarios_do_not_look_for_the_kernel(self):
        # Nothing in a corpus scenario may check the kernel version or grep
        # for the fixed code.
        for n in corpus.list_all():
            for s in corpus.load(n).scenarios:
                text = read(flscenario.find(s))
                for bad in ("uname", "/proc/version", "kallsyms"):
                    self.assertNotIn(bad, text, f"{s} ({n})")


class CorpusErrorsTest(unittest.TestCase):
    """Each broken entry gives one line naming the file and the problem."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        src = os.path.join(corpus.BUGS_DIR, "rotational-reclaim-work")
        self.dir = os.path.join(self.tmp, "rotational-reclaim-work")
        shutil.copytree(src, self.dir)
        with open(os.path.join(self.dir, "bug.toml")) as f:
            self.text = f.read()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def broken(self, text=None, patch=None):
        if text is not None:
            with open(os.path.join(self.dir, "bug.toml"), "w") as f:
                f.write(text)
        if patch is not None:
            with open(os.path.join(self.dir, "reintroduce.patch"), "w") as f:
                f.write(patch)
        with self.assertRaises(corpus.BugError) as cm:
            corpus.load(self.dir)
        msg = str(cm.exception)
        self.assertNotIn("\n", msg)
        return msg

    def test_good_copy_loads(self):
        self.assertEqual(corpus.load(self.dir).name, "rotational-reclaim-work")

    def test_short_commit(self):
        self.assertIn("not a commit id",
                      self.broken(self.text.replace('fix = "dcf32ea7eced"', 'fix = "dcf32"')))

    def test_bad_base(self):
        self.assertIn("base 'debian:7.2' is not one of",
                      self.broken(self.text.replace('"debian:6.12"', '"debian:7.2"')))

    def test_missing_key(self):
        text = "\n".join(ln for ln in self.text.splitlines() if not ln.startswith("kasan"))
        self.assertIn("missing key 'kasan'", self.broken(text))

    def test_wrong_type(self):
        self.assertIn("kasan must be a bool",
                      self.broken(self.text.replace("kasan = false", 'kasan = "no"')))

    def test_unknown_key(self):
        self.assertIn("unknown key 'kasn'", self.broken(self.text + "kasn = true\n"))

    def test_unknown_scenario(self):
        self.assertIn("scenario 'no-such-scenario'",
                      self.broken(self.text.replace('["rotational-swap"]',
                                                    '["no-such-scenario"]')))

    def test_bad_release(self):
        self.assertIn("is not a release",
                      self.broken(self.text.replace('fixed_in = "v6.12"', 'fixed_in = "6.12"')))

    def test_three_part_release(self):
        # a bug older than git's history is dated by a 2.6.x release
        with open(os.path.join(self.dir, "bug.toml"), "w") as f:
            f.write(self.text.replace('introduced_in = "v6.12-rc1"', 'introduced_in = "v2.6.16"'))
        self.assertEqual(corpus.load(self.dir).data["introduced_in"], "v2.6.16")
        self.assertIn("is not a release", self.broken(self.text.replace(
            'introduced_in = "v6.12-rc1"', 'introduced_in = "v2.6.16.1.2"')))

    def test_three_number_releases_only_for_2_6(self):
        # Fixes from the 2.6 era name releases like v2.6.19; a stable
        # point release (v6.12.3) is not what fixed_in/introduced_in mean.
        text = self.text.replace('fixed_in = "v6.12"', 'fixed_in = "v2.6.19"')
        with open(os.path.join(self.dir, "bug.toml"), "w") as f:
            f.write(text.replace('introduced_in = "v6.12-rc1"',
                                 'introduced_in = "v2.6.12-rc2"'))
        self.assertEqual(corpus.load(self.dir).data["fixed_in"], "v2.6.19")
        self.assertIn("is not a release",
                      self.broken(self.text.replace('fixed_in = "v6.12"',
                                                    'fixed_in = "v6.12.3"')))

    def test_patch_not_a_diff(self):
        self.assertIn("not a unified diff", self.broken(patch="just some text\n"))

    def test_patch_paths_not_p1(self):
        with open(os.path.join(self.dir, "reintroduce.patch")) as f:
            p = f.read()
        self.assertIn("is not a/... or b/...",
                      self.broken(patch=p.replace("--- a/mm/", "--- mm/")))

    def test_patch_without_comment(self):
        with open(os.path.join(self.dir, "reintroduce.patch")) as f:
            p = f.read()
        self.assertIn("no comment naming the fix",
                      self.broken(patch=p.replace("faultline bug corpus", "bug")))

    def test_missing_patch(self):
        os.unlink(os.path.join(self.dir, "reintroduce.patch"))
        self.assertIn("is missing", self.broken())


# Console excerpts, as a Debian 6.12 guest prints them (timestamps kept).
KASAN = """[   41.201733] faultline-init: test
[   52.883012] ==================================================================
[   52.883391] BUG: KASAN: vmalloc-out-of-bounds in free_swap_and_cache_nr+0x2d1/0x360
[   52.883702] Read of size 1 at addr ffffc90000a1f00a by task swaprace/212
[   52.884410] Call Trace:
"""
WARN = """[   30.100000] ------------[ cut here ]------------
[   30.100120] WARNING: CPU: 1 PID: 88 at mm/swapfile.c:1305 get_swap_pages+0x3a1/0x3f0
[   30.100300] Call Trace:
"""
HUNG = """[  245.011000] INFO: task swapoff:201 blocked for more than 122 seconds.
[  245.011100]       Not tainted 6.12.118+deb12-amd64 #1
"""
SOFTLOCKUP = "[   80.5] watchdog: BUG: soft lockup - CPU#0 stuck for 26s! [kworker/0:1:31]\n"
RCU = ("[   99.1] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:\n"
       "[   99.1] rcu: \t1-...!: (0 ticks this GP)\n")
OOPS = """[   61.000001] BUG: kernel NULL pointer dereference, address: 0000000000000008
[   61.000100] #PF: supervisor write access in kernel mode
[   61.000200] Oops: Oops: 0002 [#1] PREEMPT SMP NOPTI
[   61.000300] Workqueue: events swap_reclaim_work
[   61.002000] Kernel panic - not syncing: Fatal exception
"""
TAINT = "[    3.2] syncblk: loading out-of-tree module taints kernel.\n"
OOM = """[   82.036468] swaprace invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0
[   82.144628] CPU: 1 UID: 0 PID: 160 Comm: swaprace Not tainted 6.12.118+deb12-amd64 #1
[   82.155123] Hardware name: QEMU Standard PC (Q35 + ICH9, 2009), BIOS 1.16.2-debian-1.16.2-1
[   82.155290] Call Trace:
[   82.155952]  <TASK>
"""


def verdict(console, guest_exit=0):
    w = types.SimpleNamespace(backend="qemu", hang=False, guest_exit=guest_exit, stderr="",
                              task_dump=None)
    k = {"failures": [], "not_ok": 0, "bail": 0, "ok": 3, "plan_errors": [], "xfail": 0,
         "diag": {}}
    sc = types.SimpleNamespace(timeout_s=100, kernel_mode="auto")
    return judge._verdict(sc, w, "faultline-init\n" + console, k)


class SplatTest(unittest.TestCase):
    def test_clean_console_passes(self):
        self.assertEqual(verdict(TAINT)[0], EXIT_PASS)
        self.assertIsNone(judge.splat_line(TAINT))

    def test_splats_fail_with_their_first_line(self):
        for console, line in ((KASAN, "BUG: KASAN: vmalloc-out-of-bounds in "
                                      "free_swap_and_cache_nr+0x2d1/0x360"),
                              (WARN, "WARNING: CPU: 1 PID: 88 at mm/swapfile.c:1305 "
                                     "get_swap_pages+0x3a1/0x3f0"),
                              (HUNG, "INFO: task swapoff:201 blocked for more than 122 seconds."),
                              (SOFTLOCKUP, "BUG: soft lockup - CPU#0 stuck for 26s! "
                                           "[kworker/0:1:31]"),
                              (RCU, "rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:"),
                              (OOM, "swaprace invoked oom-killer: "
                                    "gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0")):
            with self.subTest(line=line):
                status, _, reason = verdict(TAINT + console)
                self.assertEqual(status, EXIT_FAIL)
                self.assertEqual(reason, "kernel splat: " + line)

    def test_crash_names_the_panic_and_the_first_line(self):
        status, _, reason = verdict(OOPS, guest_exit=None)
        self.assertEqual(status, EXIT_CRASH)
        self.assertTrue(reason.startswith("kernel crash: Kernel panic - not syncing: "
                                          "Fatal exception"), reason)
        self.assertIn("(first: BUG: kernel NULL pointer dereference, address: "
                      "0000000000000008)", reason)


if __name__ == "__main__":
    unittest.main()
