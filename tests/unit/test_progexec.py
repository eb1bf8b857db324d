"""progexec (guest/tools/progexec/, docs/programs.md) built for this host and
run on it: generated programs without their swap, knob and cgroup lines, and
hand-written ones covering every memory operation, must pass (the kernel
here owes what the model says); each --plant must be caught by its check;
bad text and bad usage are refused with exit 2.  No swap device is needed.

FAULTLINE_PROGEXEC_SEEDS sets how many generated programs run (default 60).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.execute.channel import parse_message  # noqa: E402
from faultline.execute.session import offer_value  # noqa: E402
from faultline.prog import gen, lang  # noqa: E402

SEEDS = int(os.environ.get("FAULTLINE_PROGEXEC_SEEDS", "60"))
# Statements that change this host (devices, knobs, cgroups, caches): dropped.
HOST_ONLY = {"swap", "knob", "cgroup", "rule", "swapoff", "swapon", "kill swapoff", "move",
             "cgset", "reclaim", "compact", "drop_caches"}

# Every memory operation at least once; what the kernel owes is in the comments.
COVER = """\
program v1
anon a 1M private
write a 0 1M v=1
fork p
@p write a 0 256K v=2
@p read a 0 256K          # the child's own copy
read a 0 256K             # the parent still holds v=1: copy on write
anon s 256K shared
write s 0 256K v=3
exit p
madvise a 512K 128K dontneed
read a 512K 128K          # zeros
madvise a 0 64K free
read a 0 64K              # v=1 or zeros (madv-free)
write a 0 64K v=4
madvise a 0 1M pageout
madvise a 0 1M cold
madvise a 0 1M willneed
madvise a 0 1M populate_read
madvise a 0 1M populate_write
read a 0 64K
mprotect a 0 64K ro
read a 0 64K
mprotect a 0 64K rw
mremap a 2M
read a 1M 1M              # grown private anon: zeros
mremap a 512K
munmap a 256K 64K
read a 0 256K
memfd m 512K map=private
pwrite m 0 512K v=5
read m 0 512K             # not yet written here: the file
write m 0 64K v=6         # a COW copy
pwrite m 0 128K v=7
read m 0 128K             # v=6 then v=7
madvise m 0 64K dontneed  # the copy goes: the file again
read m 0 128K
madvise m 128K 64K populate_write
pwrite m 128K 64K v=8
read m 128K 64K           # the copy populate_write made: v=5, not the later v=8
truncate m 64K
truncate m 512K
read m 0 512K             # past 64K: zeros
pread m 0 512K
tmpfs t 256K map=shared huge=never
write t 0 256K v=9
punch t 0 64K
pread t 0 256K
madvise t 0 64K remove
madvise t 0 256K pageout
read t 0 256K
uffd_wp t 0 128K on
write t 0 128K v=10       # waits for the handler to lift the protection
uffd_wp t 0 128K off
read t 0 256K
memfd n 128K map=none
pwrite n 0 128K v=11
pread n 0 128K
munmap n
anon h 2M pages=huge
write h 0 2M v=12
uffd_wp h 0 64K on
write h 0 64K v=13
read h 0 2M
fork q
thread t1 cpu=0
@t1 write s 0 128K v=14 &
@q read s 128K 128K
wait t1
@q read s 0 256K          # shared: the thread's write
@q write s 0 4K v=15 &
read s 4K 4K
wait q
read s 0 4K
kill q
sleep 5
munmap a
"""


def build(outdir):
    """progexec for this host, as guest/tools/Makefile builds it for the guest."""
    res = subprocess.run(["make", "-s", "-C", os.path.join(TOP, "guest", "tools"), f"O={outdir}",
                          f"{outdir}/progexec"], capture_output=True, text=True)
    if res.returncode:
        raise AssertionError(f"make progexec failed:\n{res.stdout}{res.stderr}")
    return os.path.join(outdir, "progexec")


def host_text(program):
    """PROGRAM's canonical text without what would change this host."""
    ops, dropped = [], set()    # actors whose background operation was dropped
    for o in program.ops:
        if o.verb in HOST_ONLY:
            if o.background:
                dropped.add(o.args[0] if o.verb == "swapoff" else o.actor)
            continue
        if o.verb == "wait" and o.args[0] in dropped:
            dropped.discard(o.args[0])
            continue
        ops.append(lang.Op(o.verb, o.args, tuple(kv for kv in o.opts if kv[0] != "cgroup"),
                           o.actor, o.background))
    return lang.Program(True, (), tuple(ops)).text()


class Progexec(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="test-progexec-")
        cls.exe = build(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_text(self, text, *args, name="t.prog"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return subprocess.run([self.exe, "run", path, *args], capture_output=True, text=True,
                              timeout=120)

    def assert_pass(self, res, what):
        self.assertEqual(res.returncode, 0, f"{what}:\n{res.stdout}{res.stderr}")
        self.assertRegex(res.stdout, r"(?m)^result \S+ pass 0$")
        self.assertNotIn("finding", res.stdout)

    def test_cover_passes(self):
        res = self.run_text(COVER, name="cover.prog")
        self.assert_pass(res, "cover")
        # An `at` line for every operation, in order.
        lines = [int(m) for m in re.findall(r"(?m)^at (\d+)$", res.stdout)]
        ops = [n for n, line in enumerate(COVER.splitlines(), 1)
               if line.split("#")[0].strip() and not line.startswith("program")]
        self.assertEqual(lines, ops)
        self.assertRegex(res.stdout, r"(?m)^stat pages_written=\d+ pages_read=\d+ ")

    def test_generated_programs_pass(self):
        for seed in range(1, SEEDS + 1):
            text = host_text(gen.generate(seed))
            with self.subTest(seed=seed):
                self.assert_pass(self.run_text(text, name=f"{seed:04}.prog"), f"seed {seed}\n{text}")

    def test_plants_are_caught(self):
        text = "anon a 64K\nwrite a 0 64K v=1\nwrite a 0 64K v=2\nread a 0 64K\n"
        self.assert_pass(self.run_text(text), "unplanted")
        # The planted write is line 3's (line 2's is written over before any
        # read): page 0 keeps v1, the read at line 4 names it.
        for plant in ("drop-write", "stale-page"):
            res = self.run_text(text, "--plant", plant)
            self.assertEqual(res.returncode, 1, f"{plant}: {res.stdout}")
            self.assertRegex(res.stdout, r"(?m)^finding content line=4 proc=main obj=a page=0 "
                             r"expected=v2 seen=v1 word=0 got=[0-9a-f]{16} want=[0-9a-f]{16}$")
            self.assertEqual(len(re.findall("(?m)^finding", res.stdout)), 1, res.stdout)
            self.assertRegex(res.stdout, r"(?m)^result t.prog fail 1$")

    def test_plants_in_shared_memory(self):
        # Through a shared file mapping, read back by another process.
        text = ("memfd m 16K map=shared\nfork p\nwrite m 0 16K v=1\n@p read m 0 16K\n"
                "read m 0 16K\n")
        self.assert_pass(self.run_text(text), "unplanted")
        res = self.run_text(text, "--plant", "drop-write")
        self.assertIn("finding content line=4 proc=p obj=m page=0 expected=v1 seen=v0", res.stdout)
        # The stale copy is private to the writer: only its own read sees it.
        res = self.run_text(text, "--plant", "stale-page")
        self.assertIn("finding content line=5 proc=main obj=m page=0 expected=v1 seen=v0",
                      res.stdout)
        self.assertNotIn("line=4", res.stdout)

    def test_refusals(self):
        for text, why in (("anon a 4K\nread a 4K 4K\n", "refused t.prog 2: read: range ends"),
                          ("anon a 4K\nfrob a\n", "refused t.prog 2: unknown operation frob"),
                          ("anon a 4Q\n", "refused t.prog 1: bad size 4Q"),
                          ("thread t cpu=63\n", "cpu=63: this machine has")):
            res = self.run_text(text)
            self.assertEqual(res.returncode, 2, res.stdout)
            self.assertIn(why, res.stdout)
            self.assertNotIn("result", res.stdout)

    def test_runtime_knob_the_kernel_lacks_is_refused(self):
        # A `knob` operation is checked with the header's, before anything
        # runs: a refusal naming it, not a finding halfway through.
        lacking = [(key, value, path) for key, value, path in (
            ("zswap.zpool", "zbud", "/sys/module/zswap/parameters/zpool"),
            ("mthp.16kB.enabled", "never", "/sys/kernel/mm/transparent_hugepage/hugepages-16kB"),
            ("mthp.64kB.enabled", "never", "/sys/kernel/mm/transparent_hugepage/hugepages-64kB"))
            if not os.path.exists(path)]
        if not lacking:
            self.skipTest("this kernel has every knob the test could name")
        key, value, _ = lacking[0]
        res = self.run_text(f"anon a 4K\nwrite a 0 4K v=1\nknob {key}={value}\nread a 0 4K\n")
        self.assertEqual(res.returncode, 2, res.stdout)
        self.assertRegex(res.stdout, rf"(?m)^refused t.prog line 3: knob {key}: this kernel lacks ")
        self.assertNotIn("at 1", res.stdout)
        self.assertNotIn("result", res.stdout)

    def test_bad_usage_is_one_line(self):
        for args in ([], ["run"], ["run", "x.prog", "--plant", "nope"], ["frob"],
                     ["run", "x.prog", "--bind", "s0"]):
            res = subprocess.run([self.exe, *args], capture_output=True, text=True)
            self.assertEqual(res.returncode, 2, args)
            self.assertEqual(res.stdout, "")
            self.assertEqual(len(res.stderr.splitlines()), 1, res.stderr)

    def test_offers_are_this_kernel(self):
        """`progexec offers` on the build host: the lines the host parses,
        saying what this kernel's files say."""
        res = subprocess.run([self.exe, "offers"], capture_output=True, text=True, timeout=60)
        self.assertEqual(res.returncode, 0, res.stderr)
        offers = {}
        for line in res.stdout.splitlines():
            kind, rest = parse_message(line)
            self.assertEqual(kind, "offers")
            self.assertNotIn(rest[0], offers)
            offers[rest[0]] = offer_value(rest[0], rest[1:])
        self.assertEqual(offers["cpus"], os.sysconf("SC_NPROCESSORS_ONLN"))
        with open("/proc/meminfo") as f:
            total = int(f.readline().split()[1]) * 1024
        self.assertEqual(offers["memory"], total)
        self.assertIn("vm.swappiness", offers["knobs"])
        thp = "/sys/kernel/mm/transparent_hugepage"
        if os.path.exists(f"{thp}/enabled"):
            with open(f"{thp}/enabled") as f:
                self.assertEqual(offers["thp.enabled"], f.read().replace("[", "").replace(
                    "]", "").split())
        sizes = sorted((d[len("hugepages-"):] for d in os.listdir(thp) if
                        os.path.exists(f"{thp}/{d}/enabled")), key=lambda s: int(s[:-2])) \
            if os.path.isdir(thp) else []
        self.assertEqual(offers.get("mthp.sizes", []), sizes)
        self.assertEqual([k for k in offers["knobs"] if k.startswith("mthp.")],
                         [f"mthp.{s}.enabled" for s in sizes])
        for value in offers.get("zswap.compressor", []):
            self.assertIn(value, lang.COMPRESSORS)


if __name__ == "__main__":
    unittest.main()
