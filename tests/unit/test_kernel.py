"""Unit tests of `faultline kernel` (python/faultline/kernel/): the config
fragments, the config check, the cache key, patch splitting and application
(on real git trees made here), --kernel NAME resolution, and the build
pipeline through the CLI around a stand-in for make.  No kernel source
needed; the real builds are in the slow suite (tests/slow/kernel_build.py)."""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.cli.commands import resolve_kernels
from faultline.errors import SetupError
from faultline.kernel import build, configure, fragments, patch_series, sources, store
from faultline.lab import matrix

FRAGS = [os.path.join(TOP, "configs", "kernel", f) for f in fragments.FRAGMENTS.values()]


def git(tree, *args):
    subprocess.run(["git", "-C", tree, "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True)


def make_tree(tmp):
    """A tiny git tree: mm/swapfile.c with 30 numbered lines, include/x.h."""
    tree = os.path.join(tmp, "tree")
    os.makedirs(os.path.join(tree, "mm"))
    os.makedirs(os.path.join(tree, "include"))
    with open(os.path.join(tree, "mm", "swapfile.c"), "w") as f:
        f.write("".join(f"line {i}\n" for i in range(1, 31)))
    with open(os.path.join(tree, "include", "x.h"), "w") as f:
        f.write("#define X 1\n")
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "pristine")
    return tree


def diff_of(tree, path, new_text):
    """The git diff that turns @path into @new_text (the tree is left as is)."""
    full = os.path.join(tree, path)
    old = open(full).read()
    with open(full, "w") as f:
        f.write(new_text)
    d = subprocess.run(["git", "-C", tree, "diff"], capture_output=True, text=True).stdout
    with open(full, "w") as f:
        f.write(old)
    return d


def read(tree, path):
    with open(os.path.join(tree, path)) as f:
        return f.read()


class Fragments(unittest.TestCase):
    def test_fragments_parse_and_every_option_has_a_reason(self):
        for fp in FRAGS:
            opts = fragments.parse_fragment(fp)
            self.assertTrue(opts, fp)
            for o in opts:
                self.assertTrue(o.why.strip(), f"{o.where}: {o.name} without a reason")
                self.assertRegex(o.name, r"^CONFIG_[A-Z0-9_]+$")

    def test_what_the_guest_needs_is_in_the_fragment(self):
        names = {o.name: o.value for o in fragments.parse_fragment(FRAGS[0])}
        for need in ("SWAP", "ZSWAP", "ZSMALLOC", "MEMCG", "BLK_DEV_NVME", "VIRTIO_BLK",
                     "SCSI_VIRTIO", "VIRTIO_PCI", "PCI_MSI", "KPROBES", "KRETPROBES",
                     "KPROBE_EVENTS", "DEBUG_FS", "IKCONFIG_PROC", "DEVTMPFS",
                     "BLK_DEV_INITRD", "RD_GZIP", "SERIAL_8250_CONSOLE", "MODULES",
                     "TRANSPARENT_HUGEPAGE", "MAGIC_SYSRQ"):
            self.assertEqual(names.get("CONFIG_" + need), "y", need)
        kasan = {o.name for o in fragments.parse_fragment(FRAGS[1])}
        kcov = {o.name for o in fragments.parse_fragment(FRAGS[2])}
        self.assertIn("CONFIG_KASAN", kasan)
        self.assertIn("CONFIG_KCOV", kcov)

    def test_every_option_is_documented(self):
        with open(os.path.join(TOP, "docs", "kernels.md")) as f:
            doc = f.read()
        for fp in FRAGS:
            for o in fragments.parse_fragment(fp):
                self.assertRegex(doc, r"\b" + o.name + r"\b",
                                 f"{o.name} ({o.where}) is not in docs/kernels.md")

    def test_bad_fragments(self):
        with tempfile.TemporaryDirectory() as tmp:
            fp = os.path.join(tmp, "f.config")
            for text, msg in (("CONFIG_A=y\n", "no comment"),
                              ("# header\n\nCONFIG_A=y\n", "no comment"),
                              ("# why\nCONFIG_A=y\nCONFIG A=y\n", "not a Kconfig line"),
                              ("# why\nCONFIG_A=y\n# why\nCONFIG_A=n\n", "given twice")):
                with open(fp, "w") as f:
                    f.write(text)
                with self.assertRaisesRegex(SetupError, msg):
                    fragments.parse_fragment(fp)
            with open(fp, "w") as f:
                f.write("# header\n\n# why a\nCONFIG_A=y\n# CONFIG_B is not set\n"
                        "# why c\n# and more\nCONFIG_C=\"x\"\n")
            got = [(o.name, o.value, o.why) for o in fragments.parse_fragment(fp)]
            self.assertEqual(got, [("CONFIG_A", "y", "why a"), ("CONFIG_B", "n", "why a"),
                                   ("CONFIG_C", '"x"', "why c and more")])


class ConfigCheck(unittest.TestCase):
    def setUp(self):
        self.opts = fragments.parse_fragment(FRAGS[0])
        self.known = {o.name[7:] for o in self.opts}

    def config_from(self, opts, drop=None):
        lines = ["#", "# Automatically generated file; DO NOT EDIT.", "#"]
        for o in opts:
            if o.name == drop or o.value == "n":
                lines.append(f"# {o.name} is not set")
            else:
                lines.append(f"{o.name}={o.value}")
        return "\n".join(lines) + "\n"

    def test_a_complete_config_passes(self):
        self.assertEqual(fragments.check_config(self.opts, self.config_from(self.opts), self.known),
                         ([], []))

    def test_each_dropped_option_is_named(self):
        for o in self.opts:
            if o.value == "n":
                continue
            wrong, absent = fragments.check_config(self.opts, self.config_from(self.opts, o.name),
                                                self.known)
            self.assertEqual([(w.name, got) for w, got in wrong], [(o.name, "n")])
            self.assertEqual(absent, [])
            line = fragments.config_error(wrong)
            self.assertIn(o.name + "=n", line)
            self.assertNotIn("\n", line)

    def test_an_option_set_that_should_be_off_is_named(self):
        off = [o for o in self.opts if o.value == "n"][0]
        text = self.config_from(self.opts).replace(f"# {off.name} is not set", f"{off.name}=y")
        wrong, _ = fragments.check_config(self.opts, text, self.known)
        self.assertEqual([(w.name, got) for w, got in wrong], [(off.name, "y")])

    def test_module_instead_of_builtin_is_wrong(self):
        text = self.config_from(self.opts).replace("CONFIG_BLK_DEV_NVME=y", "CONFIG_BLK_DEV_NVME=m")
        wrong, _ = fragments.check_config(self.opts, text, self.known)
        self.assertEqual([(w.name, got) for w, got in wrong], [("CONFIG_BLK_DEV_NVME", "m")])

    def test_an_option_this_kernel_lacks_is_reported_not_refused(self):
        known = self.known - {"ZSWAP_ZPOOL_DEFAULT_ZSMALLOC"}
        text = self.config_from(self.opts, "CONFIG_ZSWAP_ZPOOL_DEFAULT_ZSMALLOC")
        wrong, absent = fragments.check_config(self.opts, text, known)
        self.assertEqual(wrong, [])
        self.assertEqual([o.name for o in absent], ["CONFIG_ZSWAP_ZPOOL_DEFAULT_ZSMALLOC"])

    def test_kconfig_symbols(self):
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "mm"))
            with open(os.path.join(tmp, "mm", "Kconfig"), "w") as f:
                f.write("menuconfig SWAP\n\tbool \"x\"\nconfig ZSWAP\n\tbool\n"
                        "\thelp\n\t  config NOT_A_SYMBOL in help text\n")
            self.assertEqual(fragments.kconfig_symbols(tmp), {"SWAP", "ZSWAP"})


class CacheKey(unittest.TestCase):
    CFG = "CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=\"lzo\"\n"

    def key(self, src="linux-source-6.1=6.1.192-3", patches=(), cfg=CFG, cc="gcc 12.2.0 | ld 2.40"):
        return store.cache_key(src, list(patches), cfg, cc)

    def p(self, diff, path="a.patch", subject=""):
        return patch_series.Patch(path, 1, 1, subject, diff)

    def test_each_input_changes_the_key(self):
        base = self.key()
        self.assertNotEqual(self.key(src="linux-source-6.12=6.12.118-1~deb12u1"), base)
        self.assertNotEqual(self.key(patches=[self.p("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")]),
                            base)
        self.assertNotEqual(self.key(cfg=self.CFG.replace("CONFIG_A=y", "CONFIG_A=m")), base)
        self.assertNotEqual(self.key(cfg=self.CFG + "CONFIG_KASAN=y\n"), base)
        self.assertNotEqual(self.key(cc="gcc 13.1.0 | ld 2.40"), base)
        p1, p2 = self.p("diff one\n"), self.p("diff two\n")
        self.assertNotEqual(self.key(patches=[p1]), self.key(patches=[p2]))
        # order matters: patches are applied in order
        self.assertNotEqual(self.key(patches=[p1, p2]), self.key(patches=[p2, p1]))

    def test_nothing_else_changes_it(self):
        base = self.key(patches=[self.p("d\n")])
        # the patch's file name, subject and place do not count, only its text
        self.assertEqual(self.key(patches=[self.p("d\n", "/elsewhere/b.mbox", "subj")]), base)
        # comments, blank lines and the order of lines in the .config do not
        reordered = "# generated\n\nCONFIG_C=\"lzo\"\nCONFIG_A=y\n# CONFIG_B is not set\n"
        self.assertEqual(self.key(patches=[self.p("d\n")], cfg=reordered), base)
        self.assertEqual(len(base), 16)


class Patches(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.tree = make_tree(self.tmp.name)
        self.orig = read(self.tree, "mm/swapfile.c")

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def edit(self, line, new):
        return self.orig.replace(f"line {line}\n", f"{new}\n")

    def test_plain_diff_applies(self):
        d = diff_of(self.tree, "mm/swapfile.c", self.edit(5, "five"))
        ps = patch_series.read_patches([self.write("one.diff", d)])
        self.assertEqual(len(ps), 1)
        self.assertEqual(ps[0].label(), os.path.join(self.tmp.name, "one.diff"))
        patch_series.apply_patches(self.tree, ps)
        self.assertIn("five\n", read(self.tree, "mm/swapfile.c"))

    def mbox(self):
        """A series as saved from a list: cover letter, patch 1, a reply
        quoting it, patch 2 (which needs patch 1), each with a signature."""
        d1 = diff_of(self.tree, "mm/swapfile.c", self.edit(5, "five"))
        after1 = self.edit(5, "five")
        # patch 2 edits the line patch 1 wrote: it applies only after patch 1
        with open(os.path.join(self.tree, "mm/swapfile.c"), "w") as f:
            f.write(after1)
        git(self.tree, "add", "-A")     # git diff compares against the index
        d2 = diff_of(self.tree, "mm/swapfile.c", after1.replace("five\n", "FIVE\n"))
        git(self.tree, "reset", "-q", "--hard")
        quoted = "".join("> " + ln + "\n" for ln in d1.splitlines())
        return (
            "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
            "From: A Developer <a@example.org>\nDate: Wed, 19 Aug 2026 00:34:00 +0000\n"
            "Subject: [PATCH v3 0/2] mm: swap: two changes\n\nThe cover letter.\n\n"
            "From 0000000000000000000000000000000000000001 Mon Sep 17 00:00:00 2001\n"
            "From: A Developer <a@example.org>\n"
            "Subject: [PATCH v3 1/2] mm: swap: first\n\nWhy.\n\n"
            "Signed-off-by: A Developer <a@example.org>\n---\n" + d1 + "-- \n2.43.0\n\n"
            "From 0000000000000000000000000000000000000003 Mon Sep 17 00:00:00 2001\n"
            "From: A Reviewer <r@example.org>\n"
            "Subject: Re: [PATCH v3 1/2] mm: swap: first\n\nOn Wed, A wrote:\n" + quoted +
            "\nLooks fine.\n\n"
            "From 0000000000000000000000000000000000000002 Mon Sep 17 00:00:00 2001\n"
            "From: A Developer <a@example.org>\n"
            "Subject: [PATCH v3 2/2] mm: swap: second\n\nWhy too.\n---\n" + d2 + "-- \n2.43.0\n")

    def test_mbox_series_applies_in_order(self):
        path = self.write("series.mbox", self.mbox())
        ps = patch_series.read_patches([path])
        self.assertEqual([p.subject for p in ps], ["mm: swap: first", "mm: swap: second"])
        self.assertEqual([p.label() for p in ps],
                         [f"{path} [1/2 'mm: swap: first']", f"{path} [2/2 'mm: swap: second']"])
        patch_series.apply_patches(self.tree, ps)
        self.assertIn("FIVE\n", read(self.tree, "mm/swapfile.c"))
        self.assertNotIn("five\n", read(self.tree, "mm/swapfile.c"))

    def test_saved_thread_text_without_mbox_headers(self):
        """The form a thread takes when copied from a list archive: each
        message starts at its "[PATCH ...]" subject line."""
        text = self.mbox()
        text = re.sub(r"^(From .*|From: .*|Date: .*)\n", "", text, flags=re.M)
        text = text.replace("Subject: ", "")
        ps = patch_series.read_patches([self.write("thread.txt", text)])
        self.assertEqual([p.subject for p in ps], ["mm: swap: first", "mm: swap: second"])
        patch_series.apply_patches(self.tree, ps)
        self.assertIn("FIVE\n", read(self.tree, "mm/swapfile.c"))

    def test_series_out_of_order_names_the_patch_file_and_hunk(self):
        ps = patch_series.read_patches([self.write("series.mbox", self.mbox())])
        with self.assertRaises(SetupError) as cm:
            patch_series.apply_patches(self.tree, [ps[1], ps[0]])
        msg = str(cm.exception)
        self.assertIn("[2/2 'mm: swap: second'] does not apply: mm/swapfile.c, hunk #1 (@@ -2,7 +2,7 @@)",
                      msg)
        self.assertNotIn("\n", msg)

    def test_failing_second_hunk_is_named(self):
        new = self.edit(3, "three").replace("line 25\n", "twenty-five\n")
        d = diff_of(self.tree, "mm/swapfile.c", new)
        self.assertEqual(d.count("\n@@ "), 2)
        # the tree moves under hunk 2 only
        with open(os.path.join(self.tree, "mm/swapfile.c"), "w") as f:
            f.write(self.orig.replace("line 24\n", "changed 24\n"))
        git(self.tree, "commit", "-qam", "moved")
        with self.assertRaisesRegex(SetupError, r"does not apply: mm/swapfile.c, hunk #2 "
                                                r"\(@@ -22,7 \+22,7 @@\)"):
            patch_series.apply_patches(self.tree, patch_series.read_patches([self.write("p.diff", d)]))

    def test_patch_for_a_missing_file(self):
        d = diff_of(self.tree, "include/x.h", "#define X 2\n").replace("include/x.h", "include/y.h")
        with self.assertRaisesRegex(SetupError, r"p.diff does not apply: include/y.h: "):
            patch_series.apply_patches(self.tree, patch_series.read_patches([self.write("p.diff", d)]))

    def test_not_a_patch(self):
        for text in ("just some notes\n", "", "[PATCH v2 0/3] cover letter only\n\ntext\n",
                     "Re: [PATCH 1/1] x\n> diff --git a/x b/x\n> --- a/x\n> +++ b/x\n> @@ -1 +1 @@\n"):
            path = self.write("notes.txt", text)
            with self.assertRaisesRegex(SetupError, r"^--patch .*notes.txt: not a patch"):
                patch_series.read_patches([path])
        with self.assertRaisesRegex(SetupError, "--patch /nonexistent.diff: No such file"):
            patch_series.read_patches(["/nonexistent.diff"])


class Names(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.saved = store.KCACHE
        store.KCACHE = self.tmp.name
        self.cwd = os.getcwd()
        os.chdir(self.tmp.name)

    def tearDown(self):
        os.chdir(self.cwd)
        store.KCACHE = self.saved
        self.tmp.cleanup()

    def entry(self, key, name):
        e = os.path.join(self.tmp.name, "entries", key)
        os.makedirs(os.path.join(e, "modules"))
        open(os.path.join(e, "bzImage"), "w").close()
        store.name_entry(name, key)
        return e

    def test_unknown_name_lists_the_built_ones(self):
        with self.assertRaisesRegex(SetupError, r"--kernel debian-6\.1: no such file and no "
                                                r"kernel of that name \(built: none;"):
            store.resolve("debian-6.1")
        self.entry("k1", "debian-6.12")
        self.entry("k2", "debian-7.2")
        with self.assertRaisesRegex(SetupError, r"\(built: debian-6\.12, debian-7\.2;"):
            store.resolve("debian-6.1")

    def test_a_name_resolves_to_its_entry(self):
        e = self.entry("k1", "debian-6.1")
        self.assertEqual(store.resolve("debian-6.1"),
                         (os.path.join(e, "bzImage"), os.path.join(e, "modules")))
        # an explicit --modules wins
        self.assertEqual(store.resolve("debian-6.1", "/m"), (os.path.join(e, "bzImage"), "/m"))
        # renaming to another key moves the name
        e2 = self.entry("k2", "debian-6.1")
        self.assertEqual(store.resolve("debian-6.1")[0], os.path.join(e2, "bzImage"))

    def test_paths_and_existing_files_pass_through(self):
        self.entry("k1", "bzImage")
        self.assertEqual(store.resolve("arch/x86/boot/bzImage", "."),
                         ("arch/x86/boot/bzImage", "."))
        open("bzImage", "w").close()    # a file in the current directory wins
        self.assertEqual(store.resolve("bzImage"), ("bzImage", None))
        self.assertEqual(store.resolve(None), (None, None))

    def test_a_built_image_is_labelled_with_its_name(self):
        e = self.entry("k1", "stock-7.2")
        self.entry("k2", "dropbehind-7.2")
        image = store.resolve("stock-7.2")[0]
        self.assertEqual(store.label(image), "stock-7.2")
        self.assertEqual(matrix.kernel_label(image), "stock-7.2")
        self.assertEqual(matrix.kernel_label(store.resolve("dropbehind-7.2")[0]),
                         "dropbehind-7.2")
        self.assertIsNone(store.label(os.path.join(self.tmp.name, "bzImage")))
        self.assertEqual(store.label(os.path.join(e, "bzImage")), "stock-7.2")

    def test_resolve_kernels_for_every_command_shape(self):
        e1 = self.entry("k1", "a")
        e2 = self.entry("k2", "b")
        run = resolve_kernels(argparse.Namespace(kernel="a", modules=None))
        self.assertEqual((run.kernel, run.modules),
                         (os.path.join(e1, "bzImage"), os.path.join(e1, "modules")))
        mx = resolve_kernels(argparse.Namespace(kernel=["a", "/x/bzImage"], modules=None))
        self.assertEqual(mx.kernel, [os.path.join(e1, "bzImage"), "/x/bzImage"])
        self.assertEqual(mx.modules, [os.path.join(e1, "modules"), None])
        cp = resolve_kernels(argparse.Namespace(baseline="a", baseline_modules=None,
                                                series="b", series_modules=None))
        self.assertEqual((cp.baseline, cp.series_modules),
                         (os.path.join(e1, "bzImage"), os.path.join(e2, "modules")))
        none = resolve_kernels(argparse.Namespace(kernel=None, modules=None))
        self.assertIsNone(none.kernel)


class InputsIndex(unittest.TestCase):
    """A cached build is found from its inputs without the family lock."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.saved = store.KCACHE, fragments.CONFIG_DIR
        store.KCACHE = os.path.join(self.tmp.name, "cache")
        fragments.CONFIG_DIR = os.path.join(self.tmp.name, "configs")
        os.makedirs(fragments.CONFIG_DIR)
        for name in fragments.FRAGMENTS.values():
            with open(os.path.join(fragments.CONFIG_DIR, name), "w") as f:
                f.write(f"# {name}\nCONFIG_X=y\n")

    def tearDown(self):
        store.KCACHE, fragments.CONFIG_DIR = self.saved
        self.tmp.cleanup()

    def ident(self, src="linux-source-6.1=6.1.192-3", patches=(), base="tinyconfig",
              kasan=False, kcov=False, cc="gcc 12.2.0 | ld 2.40"):
        return store.inputs_id(src, list(patches), base, kasan, kcov, cc)

    def test_each_input_changes_it(self):
        base = self.ident()
        self.assertEqual(self.ident(), base)
        others = [self.ident(src="linux-source-6.12=6.12.118-1~deb12u1"),
                  self.ident(patches=["--- a/x\n+++ b/x\n"]), self.ident(base="defconfig"),
                  self.ident(kasan=True), self.ident(kcov=True), self.ident(cc="gcc 13")]
        self.assertEqual(len({base, *others}), 7)
        with open(os.path.join(fragments.CONFIG_DIR, fragments.FRAGMENTS["faultline"]), "a") as f:
            f.write("CONFIG_Y=y\n")
        self.assertNotEqual(self.ident(), base)      # the fragment's text counts
        cfg = os.path.join(self.tmp.name, "my.config")
        with open(cfg, "w") as f:
            f.write("CONFIG_A=y\n")
        one = self.ident(base=cfg)
        with open(cfg, "w") as f:
            f.write("CONFIG_A=m\n")
        self.assertNotEqual(self.ident(base=cfg), one)   # a base FILE's text counts

    def test_index_points_at_an_entry_that_exists(self):
        ident = self.ident()
        self.assertIsNone(store.indexed_key(ident))
        store.index_key(ident, "0123456789abcdef")
        self.assertIsNone(store.indexed_key(ident))         # no such entry (any more)
        entry = os.path.join(store.KCACHE, "entries", "0123456789abcdef")
        os.makedirs(entry)
        open(os.path.join(entry, "bzImage"), "w").close()
        self.assertEqual(store.indexed_key(ident), "0123456789abcdef")


class CacheSafety(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.saved = store.KCACHE
        store.KCACHE = self.tmp.name

    def tearDown(self):
        store.KCACHE = self.saved
        self.tmp.cleanup()

    def test_a_failed_publish_leaves_no_entry(self):
        """A build dir without its bzImage (as after a failure or a full
        disk mid-copy): the entry does not appear, nor its temporary."""
        objdir = os.path.join(self.tmp.name, "build", "x")
        os.makedirs(objdir)
        entry = os.path.join(self.tmp.name, "entries", "0123456789abcdef")
        src = sources.Source("linux-source-6.1=1", "/nonexistent", "debian-6.1", True)
        with self.assertRaises(OSError):
            build._publish(src, objdir, entry, "0123456789abcdef", [], "CONFIG_A=y\n", "gcc",
                            os.path.join(objdir, "build.log"), 1, [], fragments.KernelConfig())
        self.assertEqual(os.listdir(os.path.join(self.tmp.name, "entries")), [])

    def test_one_build_tree_per_flavour_and_legacy_trees_are_adopted(self):
        """A config change (the fragment, a patch's Kconfig) keeps its build
        tree: only --base, --kasan and --kcov get trees of their own.  A
        tree named by its config's hash (before flavours) is taken over by
        the flavour whose config is closest, once."""
        root = os.path.join(self.tmp.name, "build")
        for d, cfg in (("debian-6.12-0123456789ab", "CONFIG_A=y\nCONFIG_KASAN=y\n"),
                       ("debian-6.12-ba9876543210", "CONFIG_A=y\nCONFIG_B=y\n"),
                       ("debian-6.1-aaaaaaaaaaaa", "CONFIG_A=y\nCONFIG_B=y\n")):
            os.makedirs(os.path.join(root, d))
            for name, text in ((".config", cfg), ("vmlinux", "")):
                with open(os.path.join(root, d, name), "w") as f:
                    f.write(text)

        cfg = fragments.KernelConfig
        plain = build.build_tree("debian-6.12", build.flavour(cfg()),
                                  "CONFIG_A=y\nCONFIG_B=y\nCONFIG_C=y\n")
        self.assertEqual(os.path.basename(plain), "debian-6.12-tinyconfig")
        self.assertEqual(os.path.realpath(plain),
                         os.path.realpath(os.path.join(root, "debian-6.12-ba9876543210")))
        kasan = build.build_tree("debian-6.12", build.flavour(cfg(kasan=True)),
                                  "CONFIG_A=y\nCONFIG_B=y\n")
        self.assertEqual(os.path.basename(kasan), "debian-6.12-tinyconfig-kasan")
        self.assertEqual(os.path.realpath(kasan),
                         os.path.realpath(os.path.join(root, "debian-6.12-0123456789ab")))
        # Same flavour, another config: the same tree.
        self.assertEqual(build.build_tree("debian-6.12", "tinyconfig", "CONFIG_Z=y\n"), plain)
        # No legacy tree left: a new one.
        kcov = build.build_tree("debian-6.12", build.flavour(cfg(kcov=True)), "CONFIG_A=y\n")
        self.assertTrue(os.path.isdir(kcov) and not os.path.islink(kcov))
        self.assertEqual(build.flavour(cfg(base="/home/me/my config")), "file-my_config")
        self.assertEqual(build.flavour(cfg(base="defconfig", kasan=True, kcov=True)),
                         "defconfig-kasan-kcov")

    def test_the_second_build_of_a_source_waits_for_the_first(self):
        lock = os.path.join(self.tmp.name, "locks", "debian-6.1.lock")
        os.makedirs(os.path.dirname(lock))
        holder = subprocess.Popen(
            [sys.executable, "-c", "import fcntl, os, sys, time\n"
             f"fd = os.open({lock!r}, os.O_RDWR | os.O_CREAT)\n"
             "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(1.5)"],
            stdout=subprocess.PIPE, text=True)
        self.assertEqual(holder.stdout.readline().strip(), "held")
        t0 = time.monotonic()
        with configure.holding_lock(lock):
            waited = time.monotonic() - t0
        holder.wait()
        self.assertGreater(waited, 0.8)


class BuildErrors(unittest.TestCase):
    def test_first_compiler_error(self):
        log = ("  CC      mm/swap.o\n"
               "mm/swapfile.c: In function 'swap_writepage':\n"
               "mm/swapfile.c:123:5: warning: unused variable 'x'\n"
               "mm/swapfile.c:130:9: error: 'foo' undeclared (first use in this function)\n"
               "mm/zswap.c:7:1: error: later\n"
               "make[3]: *** [scripts/Makefile.build:250: mm/swapfile.o] Error 1\n")
        self.assertEqual(build.first_error(log),
                         "mm/swapfile.c:130: 'foo' undeclared (first use in this function)")
        self.assertEqual(build.first_error("ld: x\nmake: *** [Makefile:1250: vmlinux] Error 1\n"),
                         "make: *** [Makefile:1250: vmlinux] Error 1")

    def cli(self, *args, cache):
        env = dict(os.environ, FAULTLINE_CACHE=cache)
        return subprocess.run([sys.executable, "-m", "faultline", *args], cwd=TOP,
                              env=dict(env, PYTHONPATH=os.path.join(TOP, "python")),
                              capture_output=True, text=True, timeout=120)

    def test_bad_input_is_one_line_before_any_work(self):
        with tempfile.TemporaryDirectory() as tmp:
            notes = os.path.join(tmp, "notes.txt")
            with open(notes, "w") as f:
                f.write("not a diff\n")
            for args, want in ((["kernel", "build", "debian:5.10"],
                                r"debian:5\.10: faultline builds debian:6\.1 \(bookworm\), "
                                r"debian:6\.12 \(bookworm-backports\), debian:7\.2 \(unstable\)"),
                               (["kernel", "build", "debian:6.1", "--patch", notes],
                                r"--patch .*notes\.txt: not a patch"),
                               (["kernel", "build", tmp], r"not a kernel tree"),
                               (["kernel", "build", "/nonexistent"], r"no such kernel tree"),
                               (["kernel", "build", "debian:6.1", "--base", "/nonexistent"],
                                r"--base /nonexistent: not defconfig, tinyconfig or a config"),
                               (["kernel", "config"], r"kernel config needs a kernel source "
                                                      r"tree: give --src TREE"),
                               (["run", "smoke", "--kernel", "nosuchname"],
                                r"--kernel nosuchname: no such file and no kernel of that name "
                                r"\(built: none;")):
                r = self.cli(*args, cache=tmp)
                self.assertEqual(r.returncode, 2, (args, r.stderr))
                self.assertEqual(len(r.stderr.strip().splitlines()), 1, (args, r.stderr))
                self.assertRegex(r.stderr, want)
            # nothing was downloaded or created for the refused builds
            self.assertFalse(os.path.exists(os.path.join(tmp, "kernel", "debs")))


# A stand-in for kbuild: the build pipeline (config, key, compile, publish,
# name, cache hit) runs for real around it; the real compilers run in the
# slow suite (tests/slow/kernel_build.py).
FAKE_MAKE = r"""#!/usr/bin/python3
import os, sys
args = sys.argv[1:]
objdir = next(a[2:] for a in args if a.startswith("O="))
mods = next((a.split("=", 1)[1] for a in args if a.startswith("INSTALL_MOD_PATH=")), None)
targets = [a for a in args if not a.startswith("-") and "=" not in a and not os.path.isdir(a)]
def put(rel, text):
    path = os.path.join(objdir, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
with open(os.path.join(os.environ["FAKE_MAKE_LOG"]), "a") as log:
    log.write(" ".join(targets) + "\n")
for t in targets:
    if t == "tinyconfig":
        put(".config", "CONFIG_TINY=y\n")
    elif t == "bzImage":
        put("arch/x86/boot/bzImage", "kernel image")
        put("System.map", "ffffffff81000000 T _text\n")
        put("vmlinux", "elf")
        put("include/config/kernel.release", "6.99.0-test\n")
        put("Module.symvers", "")
    elif t == "modules_install":
        d = os.path.join(mods, "lib", "modules", "6.99.0-test")
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, "modules.builtin"), "w").close()
"""

# merge_config.sh -m -O DIR BASE FRAGMENT...: the fragments appended
FAKE_MERGE = """#!/bin/sh
shift; shift; out=$1; base=$2; shift; shift
cat "$@" >> "$out/.config"
"""


class Pipeline(unittest.TestCase):
    """`faultline kernel build TREE` end to end through the CLI: a build
    publishes an entry under its name, the same inputs are a cache hit, a
    one-file change rebuilds in the same build tree."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        t = self.tmp.name
        self.tree = os.path.join(t, "linux")
        for d in ("arch/x86/include", "include/linux", "scripts/kconfig", "mm"):
            os.makedirs(os.path.join(self.tree, d))
        options = fragments.fragment_options()
        with open(os.path.join(self.tree, "Kconfig"), "w") as f:
            f.write("".join(f"config {o.name[len('CONFIG_'):]}\n" for o in options))
        for rel, text in (("Makefile", "all:\n"), ("arch/x86/Makefile", ""),
                          ("include/linux/swap.h", ""), ("mm/swapfile.c", "int x;\n"),
                          ("scripts/kconfig/merge_config.sh", FAKE_MERGE)):
            with open(os.path.join(self.tree, rel), "w") as f:
                f.write(text)
        bindir = os.path.join(t, "bin")
        os.makedirs(bindir)
        with open(os.path.join(bindir, "make"), "w") as f:
            f.write(FAKE_MAKE)
        os.chmod(os.path.join(bindir, "make"), 0o755)
        self.makelog = os.path.join(t, "make.log")
        self.env = dict(os.environ, FAULTLINE_CACHE=os.path.join(t, "cache"),
                        PATH=bindir + os.pathsep + os.environ["PATH"], FAULTLINE_CCACHE="0",
                        FAKE_MAKE_LOG=self.makelog, PYTHONPATH=os.path.join(TOP, "python"))

    def tearDown(self):
        self.tmp.cleanup()

    def build(self):
        r = subprocess.run([sys.executable, "-m", "faultline", "kernel", "build", self.tree,
                            "--name", "mine"], cwd=TOP, env=self.env, capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def test_build_publish_hit_and_rebuild(self):
        r = self.build()
        image = r.stdout.strip().splitlines()[-1]
        self.assertTrue(image.endswith("/bzImage"), r.stdout)
        entry = os.path.dirname(image)
        info = read(entry, "BUILDINFO")
        self.assertIn("release=6.99.0-test", info)
        self.assertIn("cold=1", info)
        self.assertIn("CONFIG_SWAP=y", read(entry, "config"))
        self.assertTrue(os.path.isfile(os.path.join(entry, "modules", "modules.builtin")))
        names = os.path.join(self.env["FAULTLINE_CACHE"], "kernel", "names", "mine")
        self.assertEqual(os.path.realpath(names), os.path.realpath(entry))
        self.assertRegex(r.stderr, r"kernel mine: .*total [0-9.]+s \(cold build")
        # stderr is a pipe: the compile's progress in its log form, a last line
        self.assertRegex(r.stderr, r"(?m)^faultline: kernel mine compile: done(, .*)? after \d+s$")

        r = self.build()
        self.assertIn("kernel cache hit", r.stderr)
        self.assertEqual(r.stdout.strip().splitlines()[-1], image)

        with open(os.path.join(self.tree, "mm", "swapfile.c"), "a") as f:
            f.write("int y;\n")
        r = self.build()
        image2 = r.stdout.strip().splitlines()[-1]
        self.assertNotEqual(image2, image)
        self.assertIn("cold=0", read(os.path.dirname(image2), "BUILDINFO"))
        self.assertRegex(r.stderr, r"\(rebuild, target 90 s")
        # both entries stay; the name follows the newest build
        self.assertTrue(os.path.isfile(image))
        self.assertEqual(os.path.realpath(names), os.path.realpath(os.path.dirname(image2)))


if __name__ == "__main__":
    unittest.main(verbosity=2)
