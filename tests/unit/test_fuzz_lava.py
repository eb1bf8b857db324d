"""Unit tests of `faultline fuzz --lava N` and `faultline fuzz merge`
(python/faultline/fuzz/shards.py, merge.py): the shard's programs (distinct
seeds, none with a virtio-blk disk), its guest's /run.sh and LAVA jobs; the
merge of fake shards' LAVA logs into a campaign directory (corpus by the
fuzzer's features, failures by signature, fuzz.json) that --resume can
load; and the refusals, one line each, before any work."""

import json
import os
import random
import shutil
import sys
import tempfile
import types
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.errors import SetupError  # noqa: E402
from faultline.execute import boot, devices  # noqa: E402
from faultline.fuzz import merge, shards, state  # noqa: E402
from faultline.fuzz.corpus import Corpus  # noqa: E402
from faultline.fuzz.triage import FailureBook, prepared, signature  # noqa: E402
from faultline.prog.lang import parse  # noqa: E402
from faultline.run.spec_builder import make_spec  # noqa: E402

IDENT = {"qemu_build": "q1", "guest_build": "g1", "kernel_key": "debian:6.12", "plant": None}

PROG_A = """\
program v1
swap s0 nvme size=32M
rule s0 bad: write every=3 count=64 error=eio
anon a 1M
write a 0 1M v=1
read a 0 1M
"""
PROG_B = """\
program v1
swap s0 syncblk completion=irq size=16M
anon a 512K
write a 0 512K v=1
read a 0 512K
"""


def lava_log(target, results=(), server=False):
    """A lava-run log: one JSON entry a line, the target lines as LAVA
    writes them (double quotes escaped); @server: the lab's job log (a
    YAML list of the same entries)."""
    lines = [json.dumps({"dt": "2026-01-01T00:00:00", "lvl": "info", "msg": "start"})]
    for t in target:
        lines.append(json.dumps({"dt": "2026-01-01T00:00:01", "lvl": "target",
                                 "msg": t.replace('"', '\\"')}))
    for r in results:
        lines.append(json.dumps({"dt": "2026-01-01T00:00:02", "lvl": "results", "msg": r}))
    lines.append(json.dumps({"dt": "2026-01-01T00:00:30", "lvl": "info", "msg": "end"}))
    return "\n".join(("- " if server else "") + ln for ln in lines) + "\n"


def guest_lines(name, stat, findings=(), result="pass", console=()):
    """What a shard's guest prints on its serial ports for one program."""
    lines = ["faultline-init: up", "# kernel 6.12.0", *console, f"@pe ready {name}",
             "@pe at 5", f"@pe ops-done {name}"]
    lines += [f"@pe finding {f}" for f in findings]
    lines += [f"@pe stat {stat}", f"@pe result {name} {result} 0", "# progexec exit 0",
              "FAULTLINE-EXIT 0"]
    return lines


class FakeShard:
    """A shard directory as fuzz --lava writes it, with LAVA logs."""

    def __init__(self, root, k, programs, ident=IDENT, seed=1):
        self.dir = os.path.join(root, f"shard-{k}")
        for sub in ("programs", "logs"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        entries = []
        for i, (text, log) in enumerate(programs, 1):
            name = f"s{k}p{i:04d}"
            with open(os.path.join(self.dir, "programs", name + ".prog"), "w") as f:
                f.write(text)
            if log is not None:
                with open(os.path.join(self.dir, "logs", name + ".log"), "w") as f:
                    f.write(log(name))
            entries.append({"name": name, "file": f"programs/{name}.prog",
                            "origin": f"gen {i}", "job": f"jobs/{name}.yaml",
                            "log": f"logs/{name}.log"})
        doc = {"command": "fuzz --lava", "identity": ident, "index": k, "seed": seed + k,
               "base_seed": seed, "session": 0, "shards": 2, "from": None, "kernel": None,
               "plant": ident.get("plant"), "programs": entries, "redrawn": {}}
        with open(os.path.join(self.dir, shards.SHARD), "w") as f:
            json.dump(doc, f)


def passing(stat, server=False):
    return lambda name: lava_log(guest_lines(name, stat), server=server)


def content_failure(line):
    """A failing read: a content finding on line @line of the canonical text."""
    return lambda name: lava_log(guest_lines(
        name, "pages_written=256 swapins=4",
        [f"content line={line} proc=main obj=a page=3 expected=v1 seen=v0 word=0"],
        result="fail"))


def panicking(name):
    return lava_log(["faultline-init: up", "# kernel 6.12.0", f"@pe ready {name}", "@pe at 5",
                     "[   40.1] Kernel panic - not syncing: Fatal exception",
                     "[   40.2] ---[ end Kernel panic - not syncing: Fatal exception ]---"])


def no_guest(name):
    return lava_log([], [{"case": "job", "definition": "lava", "result": "fail"}])


class ShardTest(unittest.TestCase):
    def test_refusals_are_one_line_before_any_work(self):
        tmp = tempfile.mkdtemp()
        for n, p, want in ((0, 5, "--lava 0"), (shards.MAX_SHARDS + 1, 5, "--lava"),
                           (2, 0, "--programs 0")):
            with self.assertRaises(SetupError) as cm:
                shards.check(n, p, tmp)
            self.assertIn(want, str(cm.exception))
        FakeShard(tmp, 0, [])
        with self.assertRaises(SetupError) as cm:
            shards.check(2, 5, tmp)
        self.assertIn("holds shards", str(cm.exception))

    def test_shards_draw_distinct_programs_none_with_virtio_blk(self):
        draws = []
        for k in range(2):
            got, skipped = shards.draw_shard(random.Random(f"{1 + k}:lava:0"), None, 12,
                                             lambda i, k=k: f"s{k}p{i:04d}")
            self.assertEqual(len(got), 12)
            for prep, origin in got:
                self.assertTrue(origin.startswith("gen "))
                self.assertNotIn("virtio-blk", {d.kind for d in prep.bound.values()})
            draws.append([p.program.text() for p, _ in got])
        self.assertFalse(set(draws[0]) & set(draws[1]))
        again, _ = shards.draw_shard(random.Random("1:lava:0"), None, 12, lambda i: f"x{i}")
        self.assertEqual([p.program.text() for p, _ in again], draws[0])
        # Across the 24 draws some had a virtio-blk disk and were drawn again.
        total = {}
        for k in range(2):
            _, skipped = shards.draw_shard(random.Random(f"{1 + k}:lava:0"), None, 12,
                                           lambda i: f"y{i}")
            for why, n in skipped.items():
                total[why] = total.get(why, 0) + n
        self.assertGreater(sum(n for why, n in total.items() if why.startswith("virtio-blk")),
                           0, total)

    def test_mutants_of_a_campaign_corpus(self):
        tmp = tempfile.mkdtemp()
        corpus = Corpus(os.path.join(tmp, "corpus"))
        corpus.consider(parse(PROG_B, "b.prog"), {"stat:x:1"}, "gen 1", 0)
        got, _ = shards.draw_shard(random.Random("3:lava:1"), corpus, 10, lambda i: f"m{i}")
        self.assertTrue(any(o == "mutant of 000001" for _, o in got))

    def test_run_sh_runs_the_program_the_command_line_names(self):
        preps = [prepared("s0p0001", parse(PROG_A, "a"), "a"),
                 prepared("s0p0002", parse(PROG_B, "b"), "b")]
        text = shards.run_sh(preps, plant="drop-write")
        self.assertIn("faultline.prog=*", text)
        self.assertIn("s0p0001) set -- progexec run /pe/s0p0001 --bind s0=nvme:fl-nvme0 "
                      "--gate 1,2 --plant drop-write ;;", text)
        self.assertIn("s0p0002) set -- progexec run /pe/s0p0002 --bind s0=syncblk:irq", text)
        self.assertIn(f'echo "{shards.REPORT_MARK}$l"', text)
        self.assertNotIn("exec progexec serve", text)

    def test_a_program_job_deploys_its_disks_and_rules(self):
        tmp = tempfile.mkdtemp()
        prep = prepared("s0p0001", parse(PROG_A, "a"), "a")
        builds = types.SimpleNamespace(qemu_binary="/q/bin/qemu", firmware_dirs=["/q/share"],
                                       kernel="/k/vmlinuz", initramfs="/k/initrd")
        sc = boot.vm_scenario(boot.ProgOptions(""))
        disks = devices.vm_disks_args(tmp, tmp, 1, deterministic=True)
        rules = os.path.join(tmp, "rules-nvme0.txt")
        disk = devices.with_rules(disks[0], rules)
        spec = make_spec(sc, builds, rundir=tmp, scratch=tmp, seed=1, deterministic=True,
                         initrd="/x/initrd", disks=[disk])
        files = {disk.image: "disk0", rules: "rules0"}
        urls = {"kernel": "http://lab/vmlinuz", "initrd": "http://lab/i", "disk0":
                "http://lab/disk.img.gz", "rules0": "http://lab/r.txt"}
        job = shards.program_job(prep, spec, files, urls, {"faultline.shard": 0})
        images = job["actions"][0]["deploy"]["images"]
        self.assertEqual(set(images), {"kernel", "initrd", "disk0", "rules0"})
        self.assertIn("filename={disk0}", images["disk0"]["image_arg"])
        self.assertEqual(images["disk0"]["compression"], "gz")
        self.assertIn("rules={rules0}", images["rules0"]["image_arg"])
        self.assertIn("faultline.prog=s0p0001", images["kernel"]["image_arg"])
        extra = " ".join(job["context"]["extra_options"])
        self.assertNotIn(tmp, extra)            # no host path, no fault log
        self.assertIn("-icount", extra)         # a fresh --deterministic boot
        self.assertIn("-serial chardev:ser0 -serial chardev:ser0", extra)
        self.assertNotIn("virtserialport", extra)


class MergeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.a = FakeShard(self.tmp, 0, [
            (PROG_A, passing("pages_written=256 pages_read=64 swapins=4")),
            (PROG_B, content_failure(4)),
            (PROG_B, no_guest),
            (PROG_B, None)])
        self.b = FakeShard(self.tmp, 1, [
            (PROG_B, passing("pages_written=256 pages_read=64 swapins=4")),   # nothing new
            (PROG_B, passing("pages_written=4096 pages_read=1024 swapins=300", server=True)),
            (PROG_A, content_failure(5)),
            (PROG_A, panicking)])
        self.out = os.path.join(self.tmp, "merged")

    def test_merges_corpus_features_and_failures(self):
        res = merge.merge(self.out, [self.a.dir, self.b.dir], quiet=True)
        self.assertEqual((res["programs"], res["not_run"], res["shards"]), (6, 2, 2))
        corpus = Corpus(os.path.join(self.out, "corpus")).load()
        origins = [e.origin for e in corpus.entries]
        self.assertEqual(len(origins), 2)
        self.assertTrue(origins[0].startswith("lava shard 0 (seed 1)"))
        self.assertTrue(origins[1].startswith("lava shard 1 (seed 2)"))
        self.assertIn("stat:pages_written:5", corpus.entries[0].new)
        book = FailureBook(os.path.join(self.out, "failures")).load()
        sigs = {s: r["hits"] for s, r in book.known.items()}
        self.assertEqual(sigs.get("content read -"), 2, sigs)
        self.assertTrue(any(s.startswith(("kernel: Kernel panic", "crash")) for s in sigs), sigs)
        for r in book.known.values():
            fdir = os.path.join(self.out, "failures", r["dir"])
            for name in ("program.prog", "report.txt", "console.txt", "failure.json",
                         "replay.sh"):
                self.assertTrue(os.path.exists(os.path.join(fdir, name)), name)
            self.assertIn("not triaged", r["replay"])
        st = state.load(self.out)
        self.assertEqual(st["identity"], IDENT)
        snap = st["stats"][-1]
        self.assertEqual((snap["programs"], snap["passed"], snap["failed"], snap["corpus"]),
                         (6, 3, 3, 2))
        self.assertEqual(snap["features"], len(corpus.features()))
        self.assertEqual(len(st["failures"]), 2)
        # Campaign time: the 7 jobs with a log, 30 s each, one after another.
        self.assertEqual((snap["t"], st["elapsed_s"], st["sessions"][-1]["budget_s"]),
                         (210.0, 210.0, 210.0))
        # A campaign fuzz --resume goes on with: its own checks pass.
        state.check_same(self.out, st["identity"], dict(IDENT))
        # The same shard again is refused; a new shard merges into OUT.
        with self.assertRaises(SetupError) as cm:
            merge.merge(self.out, [self.b.dir])
        self.assertIn("merged into", str(cm.exception))
        c = FakeShard(os.path.join(self.tmp, "more"), 0,
                      [(PROG_A, passing("pages_written=9 swapins=70000"))], seed=5)
        res = merge.merge(self.out, [c.dir])
        self.assertEqual((res["added"], res["corpus"], res["programs"]), (1, 3, 7))

    def test_refusals_before_any_work(self):
        other = FakeShard(os.path.join(self.tmp, "other"), 1,
                          [(PROG_A, passing("swapins=4"))], ident={**IDENT, "qemu_build": "q2"})
        cases = [([self.a.dir, other.dir], "QEMU build q2"),
                 ([self.a.dir, self.tmp], "not a shard"),
                 ([self.a.dir, os.path.join(self.tmp, "nope")], "no such directory"),
                 ([self.a.dir, self.a.dir], "the same shard"),
                 ([], "no shard given")]
        nolog = FakeShard(os.path.join(self.tmp, "nolog"), 0, [(PROG_A, None)])
        cases.append(([nolog.dir], "no LAVA log"))
        planted = FakeShard(os.path.join(self.tmp, "pl"), 1, [(PROG_A, passing("swapins=4"))],
                            ident={**IDENT, "plant": "drop-write"})
        cases.append(([self.a.dir, planted.dir], "--plant drop-write"))
        for dirs, want in cases:
            with self.assertRaises(SetupError) as cm:
                merge.merge(self.out, dirs)
            self.assertIn(want, str(cm.exception))
            self.assertEqual(len(str(cm.exception).splitlines()), 1)
            self.assertFalse(os.path.exists(self.out), want)
        # OUT holding a campaign of another build.
        os.makedirs(self.out)
        state.save(self.out, {"command": "fuzz", "identity": {**IDENT, "kernel_key": "k2"},
                              "seed": 1, "sessions": [], "stats": []})
        with self.assertRaises(SetupError) as cm:
            merge.merge(self.out, [self.a.dir])
        self.assertIn("kernel k2", str(cm.exception))

    def test_a_job_that_ran_out_of_time_is_a_hang(self):
        prep = prepared("s0p0001", parse(PROG_A, "a"), "a")
        out, _ = merge.outcome(prep, lava_log(["# kernel 6.12.0", "@pe ready s0p0001",
                                               "@pe at 5"]))
        self.assertEqual(out.verdict, "crash")
        self.assertEqual(signature(out, "", prep.name),
                         "hang: no ops-done of PROGRAM from the guest in the LAVA job's time")
        out, _ = merge.outcome(prep, lava_log(["# kernel 6.12.0", "@pe ready s0p0001",
                                               "FAULTLINE-EXIT 139"]))
        self.assertTrue(out.reason.startswith("the guest's /run.sh ended"), out.reason)

    def test_the_serial_mux_may_put_console_bytes_before_the_mark(self):
        report, console, status = merge.split_target(
            ["[ 1.0] syncblk: hello", "[ 2.0] oops@pe ready p1", '@pe finding x why=\\"a b\\"',
             "FAULTLINE-EXIT 3"])
        self.assertEqual(report, ["ready p1", 'finding x why="a b"'])
        self.assertIn("[ 2.0] oops", console)
        self.assertEqual(status, 3)


if __name__ == "__main__":
    unittest.main()
