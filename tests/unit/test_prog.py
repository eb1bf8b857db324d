"""Unit tests of swap programs on the host (python/faultline/prog/,
docs/programs.md): the parser's and checker's refusals line by line, the
canonical text, the page pattern's vectors, the generator and the mutator
(seeded, always valid), and `faultline prog`."""

import os
import random
import re
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.faults import grammar  # noqa: E402
from faultline.prog import check, gen, lang, mutate, pattern  # noqa: E402

FAULTLINE = os.path.join(TOP, "scripts", "faultline")
# Every case below starts after these two lines (so its lines are 3, 4, ...).
HEADER = "swap s0 nvme\ncgroup g memory.max=8M\n"
# (program after HEADER, the exact error).
BAD = [
    ('program v2\n',
     't.prog:3: `program v1` must be the first line'),
    ('anon a 4M\nprogram v1\n',
     't.prog:4: `program v1` must be the first line'),
    ('frob a\n',
     "t.prog:3: unknown operation 'frob' (expected one of swap, cgroup, rule, anon, memfd, "
     'tmpfs, write, read, pwrite, pread, madvise, mprotect, mremap, munmap, truncate, punch, '
     'uffd_wp, fork, exit, kill, kill swapoff, thread, wait, move, cgset, reclaim, swapoff, '
     'swapon, knob, compact, drop_caches, sleep)'),
    ('anon a 4M\nswap s1 nvme\n',
     't.prog:4: swap after the first operation (line 3): header lines (swap, cgroup, rule, knob) '
     'come first'),
    ('anon a 4M\nwrite a 0 4M\n',
     't.prog:4: write: v=N is missing (expected `write OBJ OFF LEN v=N`)'),
    ('anon a 4M\nwrite a 0 4M v=0\n',
     't.prog:4: write: v=0 is out of range (versions are 1 to 65535; 0 is the zero page)'),
    ('anon a 4M\nwrite a 0 4M v=65536\n',
     't.prog:4: write: v=65536 is out of range (versions are 1 to 65535; 0 is the zero page)'),
    ('anon a 4M\nwrite a 0 4M v=1 x=2\n',
     "t.prog:4: write: unexpected option 'x=2' (expected `write OBJ OFF LEN v=N`; options: v=)"),
    ('anon a 4M\nwrite a 0\n',
     't.prog:4: write: expected `write OBJ OFF LEN v=N` (2 of its values given)'),
    ('anon a 6000\n',
     't.prog:3: size 6000 is not a multiple of 4K'),
    ('anon a 4Q\n',
     "t.prog:3: bad size '4Q' (expected a number with an optional K, M or G suffix, a multiple "
     'of 4K: 4K, 16M, 1G)'),
    ('anon a 0\n',
     't.prog:3: anon: size 0 (expected at least 4K)'),
    ('anon A 4M\n',
     "t.prog:3: bad name 'A' (expected a lower-case letter, then up to 15 lower-case letters, "
     "digits or '_')"),
    ('anon main 4M\n',
     "t.prog:3: 'main' is a keyword, not a name"),
    ('anon a 4M shared private\n',
     't.prog:3: anon: shared or private, not both'),
    ('anon a 4M pages=giant\n',
     "t.prog:3: anon pages: 'giant' is not one of base, huge"),
    ('swap s9 floppy\n',
     "t.prog:3: swap: 'floppy' is not one of nvme, syncblk, virtio-blk"),
    ('swap s9 nvme size=512K\n',
     't.prog:3: swap size 512K is below 1M'),
    ('swap s9 nvme prio=-2\n',
     't.prog:3: swap prio -2 is out of range (expected -1 to 32767)'),
    ('swap s9 nvme completion=irq\n',
     't.prog:3: swap s9: completion= is for syncblk only (s9 is nvme)'),
    ('swap s9 syncblk completion=soon\n',
     "t.prog:3: swap completion: 'soon' is not one of task, irq, thread"),
    ('knob zswap.enabled=yes\n',
     't.prog:3: knob zswap.enabled=yes: expected one of Y, N'),
    ('knob vm.swappiness=201\n',
     't.prog:3: knob vm.swappiness 201 is out of range (expected 0 to 200)'),
    ('knob vm.dirty_ratio=5\n',
     "t.prog:3: unknown knob 'vm.dirty_ratio' (expected one of zswap.enabled, "
     'zswap.shrinker_enabled, zswap.max_pool_percent, zswap.accept_threshold_percent, '
     'zswap.compressor, zswap.zpool, vm.page-cluster, vm.swappiness, thp.enabled, thp.defrag, '
     'thp.shmem_enabled or mthp.SIZE.enabled)'),
    ('knob mthp.3kB.enabled=always\n',
     "t.prog:3: knob mthp.3kB.enabled: no mTHP size '3kB' (expected one of 16kB, 32kB, 64kB, "
     '128kB, 256kB, 512kB, 1024kB, 2048kB)'),
    ('knob zswap.enabled=Y\nknob zswap.enabled=N\n',
     't.prog:4: knob zswap.enabled is already set in the header (line 3)'),
    ('cgroup g2 memory.max=lots\n',
     "t.prog:3: bad cgroup memory.max size 'lots' (expected a number with an optional K, M or G "
     'suffix, a multiple of 4K: 4K, 16M, 1G)'),
    ('cgroup g2 memory.zswap.writeback=2\n',
     "t.prog:3: cgroup memory.zswap.writeback: '2' is not one of 0, 1"),
    ('cgroup g2 cpu.max=1\n',
     "t.prog:3: cgroup: unexpected option 'cpu.max=1' (expected `cgroup CG [memory.max=V] "
     '[memory.high=V] [memory.swap.max=V] [memory.zswap.max=V] [memory.zswap.writeback=0|1]`; '
     'options: memory.max=, memory.high=, memory.swap.max=, memory.zswap.max=, '
     'memory.zswap.writeback=)'),
    ('rule s9 wfail: write error=eio\n',
     't.prog:3: no device s9 (swap lines define devices)'),
    ('rule s0 wfail write error=eio\n',
     't.prog:3: rule: expected `rule DEV NAME: RULE`, e.g. `rule s0 wfail: write every=7 count=3 '
     'error=eio`'),
    ('rule s0 wfail: wrte error=eio\n',
     "t.prog:3: rule wfail: unknown op 'wrte' (expected read, write, flush, discard, "
     'write-zeroes, any)'),
    ('rule s0 wfail: write\n',
     't.prog:3: rule wfail: no action (expected e.g. error=eio, delay=1ms, drop)'),
    ('rule s0 wfail: write error=eio\nrule s0 wfail: read error=eio\n',
     't.prog:4: rule s0 wfail: duplicate rule name (line 3)'),
    ('rule s0 1bad: write error=eio\n',
     "t.prog:3: rule: bad rule name '1bad' (expected a letter or '_', then letters, digits, '_' "
     "or '-'; at most 31 characters)"),
    ('anon g 4M\n',
     't.prog:3: g is already a cgroup (line 2): one namespace for devices, cgroups, objects, '
     'processes and threads'),
    ('anon a 4M\nanon a 4M\n',
     't.prog:4: a is already an object (line 3): one namespace for devices, cgroups, objects, '
     'processes and threads'),
    ('read a 0 4K\n',
     't.prog:3: no object a (anon, memfd or tmpfs makes one first)'),
    ('anon a 4M\nread a 0 8M\n',
     "t.prog:4: read a 0 8M: ends at 8M, past a's mapping size 4M"),
    ('anon a 4M cgroup=nope\n',
     't.prog:3: no cgroup nope (cgroup lines define them)'),
    ('anon a 4M\nmprotect a 0 4K ro\nwrite a 0 8K v=1\n',
     't.prog:5: write a: page at 0 is mprotect ro (write needs rw)'),
    ('anon a 4M\nmprotect a 4K 4K none\nread a 0 8K\n',
     't.prog:5: read a: page at 4K is mprotect none (read needs rw or ro)'),
    ('anon a 4M\npread a 0 4K\n',
     't.prog:4: pread a: a is anon; pread needs a file (memfd, tmpfs)'),
    ('anon a 4M\ntruncate a 8M\n',
     't.prog:4: truncate a: a is anon; truncate needs a file (memfd, tmpfs)'),
    ('anon a 4M\npunch a 0 4K\n',
     't.prog:4: punch a: a is anon; punch needs a file (memfd, tmpfs)'),
    ('memfd m 4M map=none\nread m 0 4K\n',
     't.prog:4: read m: m is map=none: read needs a mapping (pread, pwrite reach its file)'),
    ('memfd m 4M\ntruncate m 1M\nread m 0 2M\n',
     "t.prog:5: read m 0 2M: ends at 2M, past m's file size 1M"),
    ('memfd m 4M\npwrite m 0 8M v=1\n',
     "t.prog:4: pwrite m 0 8M: ends at 8M, past m's file size 4M"),
    ('anon a 4M\nmremap a 8M\nread a 0 8M\nmunmap a 0 4K\nread a 0 4K\n',
     't.prog:7: read a: page at 0 is unmapped (munmap)'),
    ('anon a 4M\nmunmap a\nread a 0 4K\n',
     't.prog:5: read a: a is not in process main (unmapped, or made in another process after the '
     'fork)'),
    ('anon a 4M\nmunmap a 0 4K\nmremap a 8M\n',
     't.prog:5: mremap a: its mapping is split (a partial munmap or mprotect); mremap needs it '
     'whole, one protection'),
    ('anon a 4M\nmadvise a 0 4K free shared\n',
     "t.prog:4: madvise: unexpected value 'shared' (expected `madvise OBJ OFF LEN ADVICE`; "
     'options: none)'),
    ('anon a 4M shared\nmadvise a 0 4K free\n',
     't.prog:4: madvise a free: only for private anonymous memory (a is anon shared)'),
    ('anon a 4M\nmadvise a 0 4K remove\n',
     't.prog:4: madvise a remove: needs a shared mapping (anon shared, map=shared)'),
    ('anon a 4M\nmadvise a 0 4K sleep\n',
     "t.prog:4: madvise: 'sleep' is not one of pageout, cold, dontneed, free, willneed, remove, "
     'populate_read, populate_write'),
    ('anon a 4M\nmprotect a 0 4K ro\nmadvise a 0 4K populate_write\n',
     't.prog:5: madvise a: page at 0 is mprotect ro (madvise needs rw)'),
    ('@p read a 0 4K\n',
     't.prog:3: @p: no process or thread p (fork or thread makes one first)'),
    ('anon a 4M\nfork p\nexit p\n@p read a 0 4K\n',
     't.prog:6: @p: p exited at line 5'),
    ('anon a 4M\nfork p\nkill p\nexit p\n',
     't.prog:6: exit p: p was killed at line 5'),
    ('anon a 4M\nwait a\n',
     't.prog:4: wait a: a has no background operation pending (& starts one)'),
    ('anon a 4M\nfork p\nwait p\n',
     't.prog:5: wait p: p has no background operation pending (& starts one)'),
    ('anon a 4M\nread a 0 4K &\n',
     't.prog:4: read &: main runs the program line by line; & needs @P or @T (or is `swapoff DEV '
     '&`)'),
    ('anon a 4M\nfork p\n@p mprotect a 0 4K ro &\n',
     't.prog:5: mprotect cannot run in the background (& is for write, read, pwrite, pread, '
     'madvise, reclaim, swapoff, compact, drop_caches, sleep)'),
    ('anon a 4M\nfork p\n@p write a 0 4K v=1 &\n@p read a 0 4K\n',
     't.prog:6: read: p is still running its background write (line 5): wait p first'),
    ('anon a 4M\nfork p\n@p write a 0 4K v=1 &\nexit p\n',
     't.prog:6: exit p: p is still running its background write (line 5): wait p first'),
    ('anon a 4M shared\nfork p\n@p write a 0 4K v=1 &\nmunmap a\n',
     "t.prog:6: munmap a: p's background write (line 5) uses a: only read and pread of it until "
     'wait p'),
    ('anon a 4M\nthread t\n@t write a 0 4K v=1 &\nfork q\n',
     "t.prog:6: fork q: t's background write (line 5) runs in main: wait t first"),
    ('anon a 4M\n@p exit p\n',
     't.prog:4: exit takes no @ prefix (main runs it)'),
    ('anon a 4M\nfork p\n@p exit p\n',
     't.prog:5: exit takes no @ prefix (main runs it)'),
    ('anon a 4M\nfork p\nanon b 4M\n@p read b 0 4K\n',
     't.prog:6: read b: b is not in process p (unmapped, or made in another process after the '
     'fork)'),
    ('swapoff s0\nswapoff s0\n',
     't.prog:4: swapoff s0: s0 is already off (swapon turns it on)'),
    ('swapon s0\n',
     't.prog:3: swapon s0: s0 is already on (swapoff turns it off)'),
    ('swapoff s0 &\nswapon s0\n',
     't.prog:4: swapon s0: a background swapoff of s0 (line 3) runs: wait s0 or kill swapoff s0 '
     'first'),
    ('kill swapoff s0\n',
     't.prog:3: kill swapoff s0: no background swapoff of s0 runs (`swapoff s0 &` starts one)'),
    ('move nope\n',
     't.prog:3: no cgroup nope (cgroup lines define them)'),
    ('reclaim g 0\n',
     't.prog:3: reclaim: size 0 (expected at least 4K)'),
    ('cgset g memory.max=lots\n',
     "t.prog:3: bad memory.max size 'lots' (expected a number with an optional K, M or G suffix, "
     'a multiple of 4K: 4K, 16M, 1G)'),
    ('cgset g memory.min=1M\n',
     "t.prog:3: unknown cgroup key 'memory.min' (expected one of memory.max, memory.high, "
     'memory.swap.max, memory.zswap.max, memory.zswap.writeback)'),
    ('drop_caches 4\n',
     "t.prog:3: drop_caches: '4' is not one of 1, 2, 3"),
    ('sleep 0\n',
     't.prog:3: sleep 0 is out of range (expected 1 to 10000)'),
    ('sleep 10001\n',
     't.prog:3: sleep 10001 is out of range (expected 1 to 10000)'),
    ('thread t cpu=64\n',
     't.prog:3: thread cpu 64 is out of range (expected 0 to 63)'),
    ('anon a 4M\nwrite a 4K 0 v=1\n',
     't.prog:4: write: length 0 (expected at least 4K)'),
    ('@ read a 0 4K\n',
     "t.prog:3: bad process or thread name '' (expected a lower-case letter, then up to 15 "
     "lower-case letters, digits or '_')"),
    ('&\n',
     't.prog:3: & with no operation before it'),
    ('anon a 4M\nuffd_wp a 0 4K maybe\n',
     "t.prog:4: uffd_wp: 'maybe' is not one of on, off"),
    ('memfd m 4M map=none\nmunmap m 0 4K\n',
     't.prog:4: munmap m: m is map=none: `munmap m` closes its file, no range'),
    ('fork s0\n',
     't.prog:3: s0 is already a device (line 1): one namespace for devices, cgroups, objects, '
     'processes and threads'),
    ('anon a 4M\nfork p\nthread p\n',
     't.prog:5: p is already a process (line 4): one namespace for devices, cgroups, objects, '
     'processes and threads'),
]

GOOD = """program v1
swap s0 nvme size=96M prio=10
swap s1 syncblk size=32M prio=5 discard completion=irq rotational
knob zswap.enabled=Y
knob mthp.64kB.enabled=inherit
cgroup g memory.max=48M memory.high=40M memory.swap.max=max memory.zswap.writeback=0
rule s0 wfail: write every=7 count=3 error=eio

anon a 16M private pages=huge cgroup=g
memfd m 8M map=private
tmpfs f 4M huge=within_size map=none
write a 0 16M v=1
pwrite f 0 4M v=2
reclaim g 32M
read a 0 16M
fork p
@p write a 0 4M v=3 &
read a 0 4M               # the parent still reads version 1
wait p
@p thread t cpu=1
@t madvise a 0 4M pageout &
kill p
truncate m 4M
read m 0 4M
punch f 0 4K
pread f 0 4M
mprotect m 0 4K ro
read m 0 8K
mremap a 32M
munmap a 16M 4K
uffd_wp a 0 4K on
swapoff s1 &
kill swapoff s1
swapon s1 prio=3 discard
swapoff s0 &
wait s0
knob vm.swappiness=100
cgset g memory.max=max
move g
compact
drop_caches 3
sleep 10
munmap f
"""

# First three words of (object, page, version): the guest executor's C
# code must produce the same.
VECTORS = {
    (1, 0, 1): (0xd08bf4eccba8d3a1, 0xcbdcc9bfd4caf901, 0xcbaf07f172b33958),
    (2, 5, 65535): (0x091e304b6cfbbf66, 0x8754ffb10c1b44bf, 0xe70b410daeb52488),
    (65535, 1000, 7): (0x4f1d49cd077159f5, 0x00838f19ec22bb17, 0xaa7ac36b05023416),
}


def faultline(*args):
    return subprocess.run([sys.executable, FAULTLINE, *args], capture_output=True, text=True,
                          cwd=TOP, timeout=120)


class ParseTest(unittest.TestCase):
    def test_bad_lines_say_file_line_and_reason(self):
        for text, want in BAD:
            with self.subTest(text=text):
                with self.assertRaises(lang.ProgramError) as cm:
                    check.check(lang.parse(HEADER + text, "t.prog"))
                self.assertEqual(str(cm.exception), want)
                self.assertNotIn("\n", str(cm.exception))

    def test_the_docs_example_and_a_broad_program_are_valid_and_round_trip(self):
        with open(os.path.join(TOP, "docs", "programs.md")) as f:
            doc = f.read()
        example = re.search(r"```\n(program v1\n.*?)```", doc, re.S).group(1)
        for text in (example, GOOD):
            p = lang.parse(text, "x.prog")
            check.check(p)
            self.assertEqual(lang.parse(p.text()), p)
            self.assertEqual(lang.parse(p.text()).text(), p.text())

    def test_canonical_text(self):
        p = lang.parse("@main write  a 0 1024K v=7   # comment\n", "x")
        self.assertEqual(p.ops[0].text(), "write a 0 1M v=7")
        self.assertEqual(p.ops[0].line, 1)
        p = lang.parse("\n\nswap s0 syncblk rotational completion=irq size=2048K\n")
        self.assertEqual(p.text(), "swap s0 syncblk size=2M completion=irq rotational\n")
        self.assertFalse(p.versioned)
        with self.assertRaises(lang.ProgramError) as cm:
            lang.parse("# v2 soon\nprogram v2\n", "x")
        self.assertEqual(str(cm.exception), "x:2: program 'v2': this is language version 1 "
                         "(expected `program v1`)")

    def test_a_file_that_cannot_be_read_is_one_line(self):
        with self.assertRaises(lang.ProgramError) as cm:
            lang.read("/nonexistent/x.prog")
        self.assertEqual(str(cm.exception), "/nonexistent/x.prog: No such file or directory")

    def test_rules_go_through_the_engine_checker_when_it_is_built(self):
        p = lang.parse("swap s0 nvme\nrule s0 a: write error=eio\nrule s0 b: write prob=2 "
                       "error=eio\n", "r.prog")
        with tempfile.TemporaryDirectory() as d:
            fake = os.path.join(d, "fault-rules-check")
            with open(fake, "w") as f:
                f.write("#!/bin/sh\necho \"$1: 2:10: prob=2 out of range [0,1]\"\nexit 1\n")
            os.chmod(fake, 0o755)
            with mock.patch("faultline.rules.built_checker", return_value=fake):
                with self.assertRaises(lang.ProgramError) as cm:
                    check.check(p)
            self.assertEqual(str(cm.exception),
                             "r.prog:3: rule s0 b: prob=2 out of range [0,1]")
            with mock.patch("faultline.rules.built_checker", return_value=None):
                check.check(p)      # not built: the shape was checked, nothing is built


class PatternTest(unittest.TestCase):
    def test_vectors(self):
        self.assertEqual(pattern.mix64(pattern.GOLDEN), 0xe220a8397b1dcdaf)   # splitmix64(0)
        for (o, p, v), words in VECTORS.items():
            data = pattern.page_bytes(o, p, v)
            self.assertEqual(len(data), 4096)
            got = tuple(int.from_bytes(data[i * 8:i * 8 + 8], "little") for i in range(3))
            self.assertEqual(got, words, (o, p, v))

    def test_version_of(self):
        self.assertEqual(pattern.page_bytes(3, 7, 0), bytes(4096))
        self.assertEqual(pattern.version_of(bytes(4096), 3, 7), 0)
        data = pattern.page_bytes(3, 7, 42)
        self.assertEqual(pattern.version_of(data, 3, 7), 42)
        self.assertIsNone(pattern.version_of(data, 3, 8))       # another page's version
        self.assertEqual(pattern.identify(data), (3, 7, 42))
        broken = bytearray(data)
        broken[4000] ^= 1
        self.assertIsNone(pattern.version_of(bytes(broken), 3, 7))
        self.assertIsNone(pattern.identify(b"\xff" * 4096))


# Seeds the generator and mutator tests try: FAULTLINE_PROG_SEEDS=2000 for
# a longer run than check's.
SEEDS = int(os.environ.get("FAULTLINE_PROG_SEEDS", "400"))


class GeneratorTest(unittest.TestCase):
    def test_same_seed_same_program_and_every_program_is_valid(self):
        verbs = set()
        for seed in range(SEEDS):
            p = gen.generate(seed)
            check.check(p, engine_rules=False)
            self.assertEqual(lang.parse(p.text()), p)
            verbs.update(op.verb for op in p.ops)
            if seed < 30:
                self.assertEqual(gen.generate(seed).text(), p.text())
        self.assertEqual(gen.generate(1).text(), gen.generate(1).text())
        self.assertNotEqual(gen.generate(1).text(), gen.generate(2).text())
        # Breadth: every operation of the language shows up.
        self.assertEqual(sorted(set(lang.OPS) - verbs), [])

    def test_programs_swap(self):
        """A working set above its cgroup's memory.max in most programs."""
        above = 0
        for seed in range(100):
            p = gen.generate(seed)
            sizes = sum(op.args[1] for op in p.ops if op.verb in ("anon", "memfd", "tmpfs"))
            limits = [dict(st.opts).get("memory.max") for st in p.of("cgroup")]
            above += any(isinstance(m, int) and m < sizes for m in limits)
        self.assertGreater(above, 60)

    def test_weights_name_only_what_the_language_has(self):
        w = gen.load_weights()
        self.assertEqual(sorted(set(w["operations"]) - set(lang.OPS)), [])
        self.assertEqual(sorted(set(w["madvise"]) - set(lang.ADVICE)), [])
        self.assertEqual(sorted(set(w["swap"]["kinds"]) - set(lang.SWAP_KINDS)), [])
        for key, values in w["knobs"]["values"].items():
            for v in values:
                lang.knob_value(key, v)


class RulesTest(unittest.TestCase):
    """A program's rules come from the fault-schedule grammar, within what
    its device's attach point and the program oracle take."""

    def rules_of(self, programs):
        w = gen.load_weights()
        for p in programs:
            swaps = {st.args[0]: st for st in p.of("swap")}
            for st in p.of("rule"):
                space = gen.device_space(swaps[st.args[0]], w)
                yield st, space

    def test_generated_and_mutated_rules_stay_in_the_program_space(self):
        programs = []
        for seed in range(150):
            p = gen.generate(seed)
            programs += [p] + [mutate.candidate(p, "rule", random.Random(seed),
                                                gen.load_weights()) or p]
        actions, ops = set(), set()
        for st, space in self.rules_of(programs):
            text = st.args[2]
            self.assertEqual(grammar.excluded(text, space), "", text)
            self.assertEqual(grammar.device_problem(space.kind, text), "", text)
            rule = grammar.parse_rule(text, st.args[1])
            self.assertEqual(rule.body(), text)         # read back as written
            ops.add(rule.op)
            actions.update(rule.action)
            self.assertFalse({"lie", "corrupt", "fatal", "reset-fail", "state"}
                             & (set(rule.action) | set(rule.match)), text)
            if "drop" in rule.action or rule.action.get("error") == "timeout":
                self.assertEqual(space.kind, "syncblk", text)
            lo, hi = rule.match.get("lba", (0, 0))
            self.assertLess(hi, space.sectors, text)
        # Breadth: the grammar's ops and actions, not a fixed list of texts.
        self.assertLessEqual({"write", "read", "any", "discard"}, ops)
        self.assertLessEqual({"delay", "error", "irq-delay", "complete"}, actions)
        # The engine's own parser takes every one of them.
        for p in programs[:60]:
            check.check(p)

    def test_the_program_space(self):
        w = gen.load_weights()
        budget_ns = int(w["rules"]["delay_budget_s"] * 10**9)
        for kind in lang.SWAP_KINDS:
            space = grammar.Space.of_program(kind, 64 << 20, 2, budget_ns)
            self.assertEqual(space.sectors, (64 << 20) // 512)
            # Stalls within the program's delay budget (explore's _fit_budget).
            self.assertEqual(space.heavy_count(), budget_ns // grammar.HEAVY_DELAY_MAX_NS)
            self.assertEqual(space.lost_ok, kind == "syncblk")
            self.assertFalse(space.fatal_ok or space.allow_lies)
            self.assertEqual(space.read_error_states, ())


class MutateTest(unittest.TestCase):
    def test_mutants_are_valid_and_deterministic(self):
        n = changed = 0
        for seed in range(SEEDS // 25):
            p = gen.generate(seed)
            ms = mutate.mutants(p, seed, 25)
            if seed < 10:
                self.assertEqual([m.text() for m in mutate.mutants(p, seed, 25)],
                                 [m.text() for m in ms])
            for before, m in zip([p] + ms, ms):
                check.check(m, engine_rules=False)
                self.assertEqual(lang.parse(m.text()), m)
                n += 1
                changed += m != before
        self.assertEqual(n, SEEDS // 25 * 25)
        self.assertGreater(changed, n * 0.95)

    def test_each_kind_keeps_the_program_valid(self):
        w = gen.load_weights()
        p = gen.generate(3)
        for kind in mutate.KINDS:
            rng = random.Random(kind)
            for _ in range(40):
                cand = mutate.candidate(p, kind, rng, w)
                if cand is not None:
                    try:
                        check.replay(lang.parse(cand.text()))
                    except lang.ProgramError:
                        continue        # mutate() drops it and draws again
        for seed in range(50):
            check.check(mutate.mutate(p, random.Random(seed)), engine_rules=False)


class CliTest(unittest.TestCase):
    def test_help_builds_nothing(self):
        for args in (["prog", "--help"], ["prog", "check", "--help"], ["prog", "gen", "--help"]):
            r = faultline(*args)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stderr, "")

    def test_check(self):
        with tempfile.TemporaryDirectory() as d:
            good = os.path.join(d, "good.prog")
            bad = os.path.join(d, "bad.prog")
            with open(good, "w") as f:
                f.write(GOOD)
            with open(bad, "w") as f:
                f.write("anon a 4M\n\nwrite a 0 8M v=1\n")
            r = faultline("prog", "check", good)
            self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""))
            r = faultline("prog", "check", good, bad, good)
            self.assertEqual(r.returncode, 2)
            self.assertEqual(r.stderr, f"{bad}:3: write a 0 8M: ends at 8M, past a's mapping "
                             "size 4M\n")
            r = faultline("prog", "check", os.path.join(d, "none.prog"))
            self.assertEqual((r.returncode, r.stderr),
                             (2, f"{d}/none.prog: No such file or directory\n"))

    def test_gen(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "progs")
            r = faultline("prog", "gen", "--seed", "9", "--count", "3", "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            names = sorted(os.listdir(out))
            self.assertEqual(names, ["0001.prog", "0002.prog", "0003.prog"])
            with open(os.path.join(out, "0002.prog")) as f:
                self.assertEqual(f.read(), gen.generate(10, path="x").text())
            r = faultline("prog", "check", *(os.path.join(out, n) for n in names))
            self.assertEqual(r.returncode, 0, r.stderr)
            # Refused in one line, nothing written.
            r = faultline("prog", "gen", "--seed", "9", "--count", "3", "--out", out)
            self.assertEqual((r.returncode, r.stderr.count("\n")), (2, 1))
            self.assertIn("0001.prog exists", r.stderr)
            for args, what in ((["--seed", "x", "--count", "1"], "--seed"),
                               (["--seed", "-1", "--count", "1"], "--seed"),
                               (["--seed", "1", "--count", "0"], "--count"),
                               (["--seed", "1", "--count", "200000"], "--count")):
                fresh = os.path.join(d, "fresh")
                r = faultline("prog", "gen", *args, "--out", fresh)
                self.assertEqual(r.returncode, 2, args)
                self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
                self.assertIn(what, r.stderr)
                self.assertFalse(os.path.exists(fresh))
            afile = os.path.join(d, "afile")
            open(afile, "w").close()
            r = faultline("prog", "gen", "--seed", "1", "--count", "1", "--out", afile)
            self.assertEqual((r.returncode, r.stderr.count("\n")), (2, 1))


if __name__ == "__main__":
    unittest.main()
