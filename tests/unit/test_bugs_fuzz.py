"""`faultline bugs --fuzz` without a VM: the kernel builds and the guests
are fakes, everything between them is real (the fuzz manager, its triage,
the records, the table, `faultline docs`).  The fake buggy kernel loses a
write's data when a later read of the same pages checks it (a `content`
failure the fuzzer must find within a few seconds); the fake fixed kernel
passes every program, or, as a false alarm, fails like the buggy one.

Covered: a record per (bug, side, search seed) with the failures and the
minimized programs; resume (a recorded campaign is not run again, --rerun
and another budget run it, an interrupted campaign goes on with the budget it has left);
a set of another QEMU or guest build refused before anything runs; the
table and its empty text; `--fuzz-verdict`; bad input in one line."""

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
from unittest import mock

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.bugs import fuzz_replay, fuzz_table, recall, recall_fuzz  # noqa: E402
from faultline.build.builds import Builds  # noqa: E402
from faultline.errors import EXIT_FAIL, EXIT_PASS, EXIT_SETUP, SetupError  # noqa: E402
from faultline.execute.session import Outcome  # noqa: E402
from faultline.fuzz import command as fuzz_command  # noqa: E402
from faultline.prog.lang import read  # noqa: E402
from faultline.results import records  # noqa: E402
from faultline.run.options import BugsFuzzOptions  # noqa: E402
from docs_page import render_set  # noqa: E402

FAULTLINE = os.path.join(TOP, "scripts", "faultline")
BUG = "swap-write-error-drops-page"
BUDGET_S = 1.5


def overlaps(a, b):
    return a[0] < b[0] + b[1] and b[0] < a[0] + a[1]


class FakeGuest:
    """machines.GuestVM's interface.  On a kernel that loses writes, a read
    of pages an earlier write of the program stored fails the oracle's
    content check; anything else passes, with kcov-like edges of its verbs."""

    def __init__(self, log, rundir, loses_writes):
        self.log, self.rundir, self.loses_writes = log, rundir, loses_writes

    def start(self):
        self.log.append(("boot", self.rundir))
        return "6.12-fake"

    def run(self, prep):
        self.log.append(("run", self.rundir, prep.name))
        written = []
        for op in prep.program.ops:
            if op.actor:
                continue
            if op.verb == "write":
                written.append((op.args[0], op.args[1], op.args[2]))
            elif op.verb == "read" and self.loses_writes and any(
                    o == op.args[0] and overlaps((off, n), (op.args[1], op.args[2]))
                    for o, off, n in written):
                f = {"check": "content", "line": str(op.line), "op": op.text(), "why": "-",
                     "obj": op.args[0]}
                return Outcome(prep.name, "fail", findings=[f], report=["result x fail 1"]), \
                    "", True
        verbs = [op.verb for op in prep.program.ops]
        cover = [f"{hash((a, b)) & 0xffff:x}" for a, b in zip(verbs, verbs[1:])]
        return Outcome(prep.name, "pass", stats={"ops": str(len(verbs))},
                       report=[f"cover {len(cover)} {' '.join(cover)}"]), "", True

    def close(self):
        self.log.append(("close", self.rundir))


class Fakes:
    """The kernel cache, the QEMU and guest builds and the guests, in @tmp.
    @fixed_fails: the fixed kernel loses writes too (false alarms)."""

    def __init__(self, tmp, qemu="q1", guest_tag="", fixed_fails=False):
        self.tmp, self.qemu, self.guest_tag = tmp, qemu, guest_tag
        self.fixed_fails = fixed_fails
        self.log, self.built = [], []

    def build_kernel(self, bug, buggy, jobs=None):
        self.built.append((bug.name, buggy))
        key = ("bug-" + bug.name if buggy else "debian-6.12") + "-k1"
        entry = os.path.join(self.tmp, "kernels", "entries", key)
        os.makedirs(entry, exist_ok=True)
        with open(os.path.join(entry, "bzImage"), "w") as f:
            f.write(key)
        return os.path.join(entry, "bzImage"), os.path.join(entry, "modules")

    def build_all(self, kernel, modules, quiet=False):
        side = "buggy" if "/bug-" in kernel else "fixed"
        guest = os.path.join(self.tmp, "guests", f"g-{side}{self.guest_tag}")
        os.makedirs(guest, exist_ok=True)
        with open(os.path.join(guest, "vmlinuz"), "w") as f:
            f.write(kernel)
        return Builds(qemu_dir=os.path.join(self.tmp, "qemu", self.qemu), guest_dir=guest,
                      kernel_src=kernel, modules_src=modules)

    def guest_vm(self, sc, builds, rundir, **kw):
        buggy = os.path.basename(builds.guest_dir).startswith("g-buggy")
        return FakeGuest(self.log, rundir, buggy or self.fixed_fails)

    def campaigns_run(self):
        """The campaign directories whose guests booted."""
        return sorted({os.path.relpath(r, self.tmp).split("/vms/")[0]
                       for kind, r, *_ in self.log if kind == "boot"})


def run(fakes, seeds=(1, 2), budget_s=BUDGET_S, rerun=False, results=None, names=(BUG,)):
    """`faultline bugs BUG --fuzz` on @fakes: (status, stdout, stderr)."""
    opts = BugsFuzzOptions(names=list(names), seeds=list(seeds), out=os.path.join(fakes.tmp, "out"),
                           budget_s=budget_s, rerun=rerun,
                           results=results or os.path.join(fakes.tmp, "recall-fuzz.jsonl"))
    with mock.patch.object(recall, "build_kernel", fakes.build_kernel), \
            mock.patch.object(recall_fuzz, "build_all", fakes.build_all), \
            mock.patch.object(recall_fuzz, "qemu_key", lambda: fakes.qemu), \
            mock.patch.object(fuzz_command, "GuestVM", fakes.guest_vm), \
            redirect_stderr(io.StringIO()) as err, redirect_stdout(io.StringIO()) as out:
        status = recall_fuzz.campaign(opts)
    return status, out.getvalue(), err.getvalue()


def read_set(path):
    return records.read_set(path, fuzz_table.RECORD_FIELDS)


class CampaignTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        """One measurement (4 campaigns) that the tests below read."""
        cls.tmp = tempfile.mkdtemp()
        cls.fakes = Fakes(cls.tmp)
        cls.status, cls.stdout, cls.stderr = run(cls.fakes)
        cls.set = os.path.join(cls.tmp, "recall-fuzz.jsonl")
        cls.recs = read_set(cls.set)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_a_record_per_side_and_seed(self):
        self.assertEqual(self.status, EXIT_PASS, self.stderr)
        self.assertEqual(self.fakes.built, [(BUG, True), (BUG, False)])
        self.assertEqual([(r["subject"], r["side"], r["seed"]) for r in self.recs],
                         [(BUG, "buggy", 1), (BUG, "buggy", 2), (BUG, "fixed", 1),
                          (BUG, "fixed", 2)])
        self.assertEqual(self.fakes.campaigns_run(),
                         [f"out/{BUG}/{side}/seed{s}" for side in ("buggy", "fixed")
                          for s in (1, 2)])
        for r in self.recs:
            self.assertEqual((r["qemu_build"], r["budget_s"], r["jobs"], r["base"]),
                             ("q1", BUDGET_S, 1, "debian:6.12"))
            with open(os.path.join(self.tmp, "out", BUG, r["side"], f"seed{r['seed']}",
                                   "fuzz.json")) as f:
                st = json.load(f)
            # The search seed is the campaign's seed; the kernel is the side's.
            self.assertEqual(st["seed"], r["seed"])
            self.assertEqual(st["identity"]["kernel_key"], r["kernel_key"])
            self.assertGreater(r["programs"], 0)
            self.assertEqual(r["programs"], st["stats"][-1]["programs"])

    def test_buggy_failures_are_untriaged_with_their_minimized_program(self):
        for r in self.recs:
            if r["side"] != "buggy":
                continue
            self.assertEqual((r["kernel"], r["kernel_key"]), (f"bug-{BUG}", f"bug-{BUG}-k1"))
            self.assertEqual(r["verdict"], "fail")
            self.assertEqual(r["signature"], "content read -")
            self.assertEqual(r["failures"][0]["signature"], "content read -")
            self.assertEqual(r["time_to_failure_s"], r["failures"][0]["first_s"])
            self.assertLessEqual(r["time_to_failure_s"], BUDGET_S + 1)
            self.assertEqual(r["bug_failure"], "untriaged")
            # The minimized program: on disk, in the record, and still a write
            # and a read of the same object (what the fake kernel loses).
            self.assertEqual(r["minimized"], r["failures"][0]["minimized"])
            self.assertTrue(r["minimized"].endswith("/minimized.prog"), r["minimized"])
            self.assertEqual(read(r["minimized"]).text(), r["failures"][0]["program"])
            small = read(r["minimized"])
            self.assertEqual([op.verb for op in small.ops][-2:], ["write", "read"])

    def test_fixed_passes_without_verdict(self):
        for r in self.recs:
            if r["side"] == "fixed":
                self.assertEqual((r["kernel"], r["verdict"], r["failures"], r["bug_failure"],
                                  r["time_to_failure_s"], r["minimized"]),
                                 ("debian-6.12", "pass", [], None, None, None))

    def test_the_table(self):
        buggy = [r for r in self.recs if r["side"] == "buggy"]
        times = ", ".join(f"s{r['seed']} {r['time_to_failure_s']:.0f} s" for r in buggy)
        row = (f"| {BUG} | debian:6.12 | 2/2 | {times} | `content read -` (s1, s2) | 0/2 "
               "| s1 untriaged, s2 untriaged |")
        table = fuzz_table.render(self.recs, "results/recall-fuzz/x.jsonl")
        self.assertIn(row, table.splitlines())
        self.assertIn("4 fuzz campaigns (the fuzzer's defaults, no scenario), search seeds "
                      f"1..2, {BUDGET_S:.0f} s each, 1 job(s); QEMU build q1; kernels", table)
        self.assertIn(f"bug-{BUG} (bug-{BUG}-k1, g-buggy)", table)
        self.assertIn(BUG, self.stdout)      # the campaign prints its table too
        self.assertIn("No campaigns in `results/recall-fuzz/x.jsonl` yet",
                      fuzz_table.render([], "results/recall-fuzz/x.jsonl"))

    def test_faultline_docs_renders_the_set(self):
        status, err, text = render_set(tempfile.mkdtemp(dir=self.tmp), "recall-fuzz", self.set)
        self.assertEqual(status, 0, err)
        self.assertIn(f"| {BUG} | debian:6.12 | 2/2 |", text)
        self.assertTrue(text.endswith("<!-- end generated -->\nafter\n"))


class ResumeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.set = os.path.join(self.tmp, "recall-fuzz.jsonl")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_a_known_findings_failure_is_listed_apart_and_the_search_goes_on(self):
        fakes = Fakes(self.tmp, fixed_fails=True)
        with mock.patch.object(recall_fuzz, "known_signatures",
                               lambda: frozenset({"content read -"})):
            status, _, err = run(fakes, seeds=(1,))
        self.assertNotIn("stopping at the first failure", err)
        self.assertIn("content read -: a known kernel finding's, kept as found", err)
        self.assertIn("--until-failure goes on", err)
        recs = {r["side"]: r for r in read_set(self.set)}
        for side in ("buggy", "fixed"):
            r = recs[side]
            self.assertEqual((r["verdict"], r["time_to_failure_s"], r["known_failures"]),
                             ("pass", None, ["content read -"]), side)
            self.assertTrue(r["failures"][0]["known"])
            # Kept as found: findings/ has its minimized program already.
            self.assertTrue(r["failures"][0]["program"])
            self.assertFalse(r["failures"][0]["minimized"].endswith("minimized.prog"))
        row = fuzz_table.rows(list(recs.values()))[0]
        self.assertIn("0/1; known findings: `content read -` (s1)", fuzz_table.cells(row))
        self.assertEqual(status, EXIT_FAIL)     # the buggy kernel showed nothing else

    def test_bugs_of_one_fixed_kernel_share_its_campaigns(self):
        other = "swapoff-read-error-maps-garbage"
        fakes = Fakes(self.tmp)
        status, _, err = run(fakes, seeds=(1,), names=(BUG, other))
        self.assertEqual(status, EXIT_PASS, err)
        # Both buggy kernels first, then the fixed kernel once.
        self.assertEqual(fakes.campaigns_run(), [f"out/{BUG}/buggy/seed1", f"out/{BUG}/fixed/seed1",
                                                 f"out/{other}/buggy/seed1"])
        recs = {(r["subject"], r["side"]): r for r in read_set(self.set)}
        mine, shared = recs[(BUG, "fixed")], recs[(other, "fixed")]
        self.assertIsNone(mine["shared_from"])
        self.assertEqual(shared["shared_from"], BUG)
        self.assertEqual((shared["fuzz_out"], shared["kernel_key"], shared["programs"]),
                         (mine["fuzz_out"], mine["kernel_key"], mine["programs"]))
        self.assertTrue(recs[(other, "buggy")]["until_failure"])
        self.assertFalse(mine["until_failure"])
        self.assertIn("the same kernel's campaign of " + BUG, err)
        # Two bugs, three campaigns.
        self.assertIn("3 fuzz campaigns", fuzz_table.render(read_set(self.set), "x.jsonl"))

    def test_recorded_campaigns_are_not_run_again(self):
        first = Fakes(self.tmp)
        run(first, seeds=(1,))
        before = read_set(self.set)
        again = Fakes(self.tmp)
        status, _, err = run(again, seeds=(1,))
        self.assertEqual(status, EXIT_PASS)
        self.assertEqual(again.campaigns_run(), [])
        self.assertIn("recorded already", err)
        self.assertEqual(read_set(self.set), before)
        # A new seed runs alone; an interrupted campaign directory (no
        # record) is run anew, not refused as a campaign that exists.
        interrupted = os.path.join(self.tmp, "out", BUG, "fixed", "seed3")
        os.makedirs(interrupted)
        with open(os.path.join(interrupted, "fuzz.json"), "w") as f:
            f.write("{}")
        more = Fakes(self.tmp)
        run(more, seeds=(1, 2, 3))
        self.assertEqual(more.campaigns_run(), [f"out/{BUG}/{side}/seed{s}"
                                                for side in ("buggy", "fixed") for s in (2, 3)])
        self.assertEqual(len(read_set(self.set)), 6)

    def test_an_interrupted_campaign_goes_on_with_the_budget_it_has_left(self):
        run(Fakes(self.tmp), seeds=(2,))
        out = os.path.join(self.tmp, "out", BUG, "fixed", "seed2")
        with open(os.path.join(out, "fuzz.json")) as f:
            st = json.load(f)
        st["elapsed_s"] = 0.5       # stopped by a signal a third of the way in
        with open(os.path.join(out, "fuzz.json"), "w") as f:
            json.dump(st, f)
        kept = [r for r in read_set(self.set) if r["side"] == "buggy"]
        os.remove(self.set)
        recall_fuzz.save(self.set, kept)
        again = Fakes(self.tmp)
        _, _, err = run(again, seeds=(2,))
        self.assertIn("going on with the interrupted campaign", err)
        self.assertEqual(again.campaigns_run(), [f"out/{BUG}/fixed/seed2"])
        with open(os.path.join(out, "fuzz.json")) as f:
            st = json.load(f)
        self.assertEqual(len(st["sessions"]), 2)
        self.assertAlmostEqual(st["sessions"][1]["budget_s"], BUDGET_S - 0.5)
        fixed = recall_fuzz.find(read_set(self.set), BUG, "fixed", 2)
        self.assertGreater(fixed["elapsed_s"], 0.5)
        self.assertEqual(fixed["sessions"], 2)
        self.assertIn("; 1 of them interrupted and gone on with, with the budget left",
                      fuzz_table.render(read_set(self.set), "x.jsonl"))

    def test_rerun_and_another_budget_run_again(self):
        run(Fakes(self.tmp), seeds=(1,))
        rerun = Fakes(self.tmp)
        run(rerun, seeds=(1,), rerun=True)
        self.assertEqual(len(rerun.campaigns_run()), 2)
        longer = Fakes(self.tmp)
        run(longer, seeds=(1,), budget_s=BUDGET_S + 0.5)
        self.assertEqual(len(longer.campaigns_run()), 2)
        self.assertEqual({r["budget_s"] for r in read_set(self.set)}, {BUDGET_S + 0.5})

    def test_another_build_is_refused_before_anything_runs(self):
        run(Fakes(self.tmp), seeds=(1,))
        before = read_set(self.set)
        other_qemu = Fakes(self.tmp, qemu="q2")
        with self.assertRaises(SetupError) as e:
            run(other_qemu, seeds=(1,))
        self.assertIn("QEMU build q2 cannot join runs of QEMU build q1", str(e.exception))
        self.assertEqual(other_qemu.built, [])      # refused before any kernel build
        other_guest = Fakes(self.tmp, guest_tag="-new")
        with self.assertRaises(SetupError) as e:
            run(other_guest, seeds=(1,), rerun=True)
        self.assertIn("guest build g-buggy-new cannot join runs of guest build g-buggy",
                      str(e.exception))
        self.assertEqual(other_guest.campaigns_run(), [])
        self.assertEqual(read_set(self.set), before)

    def test_false_alarms_fail_the_campaign(self):
        fakes = Fakes(self.tmp, fixed_fails=True)
        status, _, _ = run(fakes, seeds=(1, 2))
        self.assertEqual(status, EXIT_FAIL)
        recs = read_set(self.set)
        fixed = [r for r in recs if r["side"] == "fixed"]
        self.assertEqual([(r["verdict"], r["bug_failure"]) for r in fixed],
                         [("fail", None), ("fail", None)])
        row = fuzz_table.cells(fuzz_table.rows(recs)[0])
        self.assertEqual(row[5], "2/2: `content read -` (s1, s2)")


class VersionTest(unittest.TestCase):
    def test_a_record_names_the_faultline_that_ran_it_not_the_checkout_at_its_end(self):
        tmp = tempfile.mkdtemp()
        versions = iter(["abc1234", "def5678", "def5678", "def5678", "def5678"])
        with mock.patch.object(recall_fuzz, "git_describe", lambda: next(versions)):
            run(Fakes(tmp), seeds=(1,))
        recs = read_set(os.path.join(tmp, "recall-fuzz.jsonl"))
        self.assertEqual({r["faultline"] for r in recs}, {"abc1234"})
        shutil.rmtree(tmp)


class VerdictTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.set = os.path.join(self.tmp, "recall-fuzz.jsonl")
        run(Fakes(self.tmp), seeds=(1, 2))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def verdict(self, *args):
        return subprocess.run([FAULTLINE, "bugs", "--fuzz-verdict", *args, "--results",
                               self.set], capture_output=True, text=True, timeout=60)

    def test_verdict_edits_the_record_and_shows_in_the_table(self):
        r = self.verdict(BUG, "2", "yes", "one write and a read of it: the lost page")
        self.assertEqual(r.returncode, 0, r.stderr)
        recs = read_set(self.set)
        rec = recall_fuzz.find(recs, BUG, "buggy", 2)
        self.assertEqual((rec["bug_failure"], rec["bug_failure_why"], rec["bug_failure_index"]),
                         ("yes", "one write and a read of it: the lost page", 1))
        self.assertEqual(recall_fuzz.find(recs, BUG, "buggy", 1)["bug_failure"], "untriaged")
        table = fuzz_table.render(recs, "x.jsonl")
        self.assertIn("| s1 untriaged, s2 yes |", table)
        self.assertIn(f"- {BUG} seed 2, failure 1 `content read -`: yes, one write and a read "
                      "of it: the lost page", table)
        # A rerun is another measurement: its failure is untriaged again.
        run(Fakes(self.tmp), seeds=(2,), rerun=True)
        self.assertEqual(recall_fuzz.find(read_set(self.set), BUG, "buggy", 2)["bug_failure"],
                         "untriaged")

    def test_bad_verdicts_are_one_line_and_change_nothing(self):
        with open(self.set) as f:
            before = f.read()
        for args, want in (((BUG, "1", "maybe", "x"), "expected yes or no"),
                           ((BUG, "one", "yes", "x"), "seed 'one' is not a number"),
                           ((BUG, "1", "yes", " "), "say why"),
                           ((BUG, "9", "yes", "x"), "has no campaign of"),
                           ((BUG, "1", "yes", "x", "--failure", "2"), "has failures 1 to 1"),
                           ((BUG, "1", "yes", "x", "--fuzz"), "--fuzz is not an option")):
            r = self.verdict(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn(want, r.stderr)
        with open(self.set) as f:
            self.assertEqual(f.read(), before)

    def test_the_default_verdict_is_on_the_first_failure_no_known_finding_has(self):
        recs = read_set(self.set)
        rec = recall_fuzz.find(recs, BUG, "buggy", 1)
        known = {**rec["failures"][0], "signature": "swapoff swapoff timeout", "known": True}
        two = {**rec, "failures": [known, rec["failures"][0]],
               "known_failures": ["swapoff swapoff timeout"]}
        recall_fuzz.save(self.set, [two])
        with redirect_stderr(io.StringIO()) as err:
            recall_fuzz.set_verdict(self.set, BUG, "1", "yes", "the lost write")
        self.assertIn("failure 2 (content read -): yes", err.getvalue())
        r = recall_fuzz.find(read_set(self.set), BUG, "buggy", 1)
        self.assertEqual((r["bug_failure"], r["bug_failure_index"]), ("yes", 2))
        with redirect_stderr(io.StringIO()):
            recall_fuzz.set_verdict(self.set, BUG, "1", "no", "the livelock", failure=1)
        r = recall_fuzz.find(read_set(self.set), BUG, "buggy", 1)
        self.assertEqual((r["bug_failure"], r["bug_failure_index"]), ("no", 1))

    def test_a_seed_without_failure_has_nothing_to_judge(self):
        recs = read_set(self.set)
        rec = recall_fuzz.find(recs, BUG, "buggy", 1)
        passed = {**rec, "verdict": "pass", "time_to_failure_s": None, "signature": None,
                  "failures": [], "minimized": None, "bug_failure": None}
        recall_fuzz.save(self.set, [passed])
        with redirect_stderr(io.StringIO()), self.assertRaises(SetupError) as e:
            recall_fuzz.set_verdict(self.set, BUG, "1", "no", "x")
        self.assertIn("found no failure on the buggy kernel", str(e.exception))


class ReplayTest(unittest.TestCase):
    """`--fuzz-replay`: what it replays (sequence/, the minimized program,
    else history then the program), on which kernels, into the record."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.set = os.path.join(self.tmp, "recall-fuzz.jsonl")
        self.fakes = Fakes(self.tmp)
        run(self.fakes, seeds=(1,))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def replay(self, seen, **kw):
        """The command with fake boots: @seen(target, image) -> what it saw."""
        calls = []

        def once(target, image, modules, out):
            calls.append((target, os.path.basename(os.path.dirname(image))))
            return seen(target, image)
        with mock.patch.object(recall, "build_kernel", self.fakes.build_kernel), \
                mock.patch.object(fuzz_replay, "replay_once", once), \
                redirect_stderr(io.StringIO()) as err:
            status = fuzz_replay.replay(self.set, BUG, "1", out=os.path.join(self.tmp, "r"),
                                        **kw)
        return status, calls, err.getvalue()

    def test_replays_on_both_kernels_into_the_record(self):
        status, calls, err = self.replay(
            lambda target, image: "content read -" if "/bug-" in image else "pass", times=3)
        self.assertEqual(status, EXIT_PASS)
        # The failure replayed alone in triage: its minimized program.
        self.assertTrue(all(t.endswith("/minimized.prog") for t, _ in calls))
        self.assertEqual([k for _, k in calls], [f"bug-{BUG}-k1"] * 3 + ["debian-6.12-k1"] * 3)
        rec = recall_fuzz.find(read_set(self.set), BUG, "buggy", 1)
        (r,) = rec["replays"]
        self.assertEqual((r["failure"], r["signature"], r["replayed"]),
                         (1, "content read -", "minimized.prog"))
        self.assertEqual((r["buggy"], r["fixed"]), (["content read -"] * 3, ["pass"] * 3))
        self.assertIn("the same failure on the buggy kernel 3/3, on the fixed kernel 0/3", err)
        self.assertEqual(rec["bug_failure"], "untriaged")      # evidence, not a verdict
        recall_fuzz.save(self.set, [{**rec, "bug_failure": "yes", "bug_failure_why": "lost"}])
        self.assertIn(f"- {BUG} seed 1, failure 1 `content read -`: yes, lost (replayed, "
                      "minimized.prog: the same failure on the buggy kernel 3/3, on the fixed "
                      "kernel 0/3)", fuzz_table.render(read_set(self.set), "x.jsonl"))

    def test_a_sequence_or_the_history_is_replayed_in_one_boot(self):
        fdir = tempfile.mkdtemp(dir=self.tmp)
        os.makedirs(os.path.join(fdir, "history"))
        for name, text in (("history/01-a.prog", "anon a 4K\n"),
                           ("history/02-b.prog", "anon b 4K\n"),
                           ("program.prog", "anon c 4K\n"),
                           ("failure.json", '{"replay": "no"}')):
            with open(os.path.join(fdir, name), "w") as f:
                f.write(text)
        work = os.path.join(self.tmp, "work")
        target, what = fuzz_replay.target_of(fdir, work)
        self.assertEqual((target, what), (work, "history/ then program.prog (3 programs)"))
        self.assertEqual(sorted(os.listdir(work)), ["01-a.prog", "02-b.prog", "03-failing.prog"])
        os.makedirs(os.path.join(fdir, "sequence"))
        for name in ("01-b.prog", "02-failing.prog"):
            open(os.path.join(fdir, "sequence", name), "w").close()
        self.assertEqual(fuzz_replay.target_of(fdir, work),
                         (os.path.join(fdir, "sequence"), "sequence/ (2 programs)"))

    def test_bad_input_is_one_line(self):
        for args, want in (((BUG, "one"), "seed 'one' is not a number"),
                           ((BUG, "9"), "has no campaign of"),
                           (("no-such-bug", "1"), "no corpus bug 'no-such-bug'"),
                           ((BUG, "1", "--failure", "3"), "has failures 1 to 1"),
                           ((BUG, "1", "--fuzz"), "--fuzz is not an option"),
                           ((BUG, "1", "--times", "11"), "--times 11: expected 1 to 10")):
            r = subprocess.run([FAULTLINE, "bugs", "--fuzz-replay", *args, "--results",
                                self.set], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn(want, r.stderr)


class BadInputTest(unittest.TestCase):
    """One line, exit 2, nothing built (a private cache stays absent)."""

    def test_refused(self):
        tmp = tempfile.mkdtemp()
        env = dict(os.environ, HOME=tmp, XDG_CACHE_HOME=os.path.join(tmp, "c"))
        env.pop("FAULTLINE_CACHE", None)
        for args, want in ((["--fuzz", "--budget", "40"], "expected a duration"),
                           (["--fuzz", "--deterministic"], "--deterministic is not an option "
                            "of bugs --fuzz"),
                           (["--fuzz", "--backend", "lava"], "--backend is not an option"),
                           (["--jobs", "2"], "--jobs is not an option of bugs without --fuzz"),
                           (["--budget", "30m"], "expected minimize's number of runs"),
                           (["--failure", "2"], "--failure is not an option"),
                           (["--times", "3"], "--times is not an option"),
                           (["--fuzz", "--seeds", "0..2"], "search seeds start at 1"),
                           (["--fuzz", "--jobs", "17"], "--jobs 17: expected 1 to 16"),
                           (["--fuzz", "no-such-bug"], "no corpus bug 'no-such-bug'")):
            r = subprocess.run([FAULTLINE, "bugs", *args, "--out", os.path.join(tmp, "out")],
                               capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(r.returncode, EXIT_SETUP, (args, r.stderr))
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn(want, r.stderr)
            self.assertFalse(os.path.exists(os.path.join(tmp, "c")))
        shutil.rmtree(tmp)


if __name__ == "__main__":
    sys.exit(unittest.main())
