"""The explore-corpus results set without a VM: the explore directories
and sweep runs are fakes laid out as `faultline explore` and `faultline
run` leave them; everything from there on is real (explore_table's
outcome and record, the set's writer and reader, the table, `faultline
docs`), as tests/slow/explore_corpus.py uses it.

Covered: a record per (bug, scenario, side) from an explore that failed at
a trial (minimized on its --deterministic rerun), at its baseline, or not
at all, beside a sweep that failed or passed; a comparison measured again
replaces its record; the table, its caption's counts and its empty text;
`faultline docs` writes the region; a malformed record or explore
directory is one line."""

import json
import os
import shutil
import sys
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.bugs import corpus, explore_table  # noqa: E402
from faultline.errors import EXIT_FAIL, EXIT_PASS, SetupError  # noqa: E402
from faultline.judge.report import Report  # noqa: E402
from faultline.results import records  # noqa: E402
from docs_page import render_set  # noqa: E402

WRITE_BUG = "swap-write-error-drops-page"
BASELINE_BUG = "rotational-reclaim-work"
KTAP_FAIL = "KTAP version 1\n1..1\nnot ok 1 pattern intact # 5 bad pages\n"
MINIMAL = ("# minimal schedule\nf0: write nth=5 error=eio   # seq 5 ordinal 5 lba 1048\n")


def write_run(rundir, scenario, seed, status, ktap=None, digest="0123456789abcdef"):
    """A finished run directory: report.json, run.json (the fields a record
    reads) and, for a KTAP failure, ktap.log."""
    os.makedirs(rundir, exist_ok=True)
    Report(scenario=scenario, seed=seed, status=status,
           outcome={0: "pass", 1: "fail"}[status],
           reason="all passed" if status == EXIT_PASS else "guest tests failed",
           elapsed_s=40.0, digest=digest).save(rundir)
    with open(os.path.join(rundir, "run.json"), "w") as f:
        json.dump({"kernel": "/cache/kernel/entries/kbug/bzImage", "kernel_sha256": "ab" * 32,
                   "qemu_build": "q1", "guest_build": "g1-tools-t1",
                   "start_time": 1796601600.0, "faultline": "abc1234"}, f)
    if ktap:
        with open(os.path.join(rundir, "ktap.log"), "w") as f:
            f.write(ktap)


def fake_explore(out, scenario, failure=None):
    """An explore directory as `faultline explore --max-failures 1` leaves
    it: state.json, the baseline's run and, with @failure ("trial": its
    first failure at trial 0, minimized on its --deterministic rerun;
    "baseline": the baseline broke a guarantee), the failing run."""
    base = os.path.basename(scenario)
    failures, tried = [], 7
    if failure == "baseline":
        write_run(os.path.join(out, "runs", "baseline-" + base), scenario, 1, EXIT_FAIL,
                  ktap=KTAP_FAIL)
        failures.append({"trial": None, "scenario": scenario, "class": "fail",
                         "signature": "not ok:  :: not ok 1 pattern intact",
                         "rundir": "runs/baseline-" + base, "after_s": 14.2, "minimal": None})
        tried = 0
    else:
        write_run(os.path.join(out, "runs", "baseline-" + base), scenario, 1, EXIT_PASS)
    if failure == "trial":
        rundir = os.path.join("runs", "00000-" + base)
        write_run(os.path.join(out, rundir), scenario, 77, EXIT_FAIL, ktap=KTAP_FAIL,
                  digest="fedcba9876543210")
        mdir = os.path.join(out, rundir + "-deterministic", "minimize")
        os.makedirs(mdir)
        with open(os.path.join(mdir, "summary.json"), "w") as f:
            json.dump({"faults": 250, "minimal": [{"seq": 5}]}, f)
        failures.append({"trial": 0, "scenario": scenario, "class": "fail",
                         "signature": "not ok:  :: not ok 1 pattern intact", "rundir": rundir,
                         "after_s": 113.4, "deterministic": "fail", "minimal": MINIMAL})
        tried = 1
    with open(os.path.join(out, "state.json"), "w") as f:
        json.dump({"version": 1, "scenarios": [scenario], "seed": 1, "deterministic": False,
                   "tried": tried, "kept": 0, "failures": failures}, f)
    return out


class ExploreCorpusSetTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.set = os.path.join(self.tmp, "explore-corpus.jsonl")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def comparison(self, bug, scenario, start, failure, sweep_fails, side="buggy", tag="a"):
        """The record explore_corpus.py makes of one comparison."""
        ex = explore_table.explore_outcome(
            fake_explore(self.path(tag, bug, side, "explore"), start or scenario, failure),
            wall_s=420.25)
        if sweep_fails:
            rundir = self.path(tag, bug, side, "sweep", "seed2", "20261201-120000-" + scenario)
            write_run(rundir, scenario, 2, EXIT_FAIL, ktap=KTAP_FAIL)
            sw = explore_table.sweep_failure(rundir, 2, 46.04)
        else:
            sw = explore_table.sweep_passed(13)
        kernel = f"bug-{bug}" if side == "buggy" else "default"
        return explore_table.record(corpus.load(bug), scenario, start, side, kernel, 1800.0,
                                    True, ex, sw)

    def fill(self):
        return explore_table.write(self.set, [
            self.comparison(WRITE_BUG, "write-error-redirty-sync", "syncblk-task", "trial",
                            True),
            self.comparison(WRITE_BUG, "write-error-redirty-sync", "syncblk-task", None,
                            False, side="fixed"),
            self.comparison(BASELINE_BUG, "rotational-swap", None, "baseline", True)])

    def test_record_of_a_failure_found_at_a_trial(self):
        rec = self.comparison(WRITE_BUG, "write-error-redirty-sync", "syncblk-task", "trial",
                              True)
        records.check_record(rec, explore_table.RECORD_FIELDS)
        self.assertEqual(
            {k: rec[k] for k in ("subject", "kernel_key", "qemu_build", "guest_build", "seed",
                                 "verdict", "elapsed_s", "time_to_failure_s", "digest",
                                 "scenario", "start_scenario", "side", "kernel", "base",
                                 "explore_runs", "explore_trial", "explore_minimal_faults",
                                 "sweep_runs", "sweep_time_to_failure_s", "sweep_seed",
                                 "sweep_signature", "date", "faultline")},
            {"subject": WRITE_BUG, "kernel_key": "kbug", "qemu_build": "q1",
             "guest_build": "g1-tools-t1", "seed": 1, "verdict": "fail", "elapsed_s": 420.2,
             "time_to_failure_s": 113.4, "digest": "fedcba9876543210",
             "scenario": "write-error-redirty-sync", "start_scenario": "syncblk-task",
             "side": "buggy", "kernel": f"bug-{WRITE_BUG}", "base": "debian:6.12",
             "explore_runs": 1, "explore_trial": 0, "explore_minimal_faults": 1,
             "sweep_runs": 2, "sweep_time_to_failure_s": 46.0, "sweep_seed": 2,
             "sweep_signature": "not ok:  :: not ok 1 pattern intact",
             "date": "2026-12-07", "faultline": "abc1234"})
        self.assertEqual(rec["explore_minimal"], MINIMAL)

    def test_record_of_a_baseline_failure_and_of_none(self):
        base = self.comparison(BASELINE_BUG, "rotational-swap", None, "baseline", False)
        self.assertEqual((base["verdict"], base["explore_trial"], base["time_to_failure_s"],
                          base["start_scenario"], base["explore_runs"]),
                         ("fail", None, 14.2, None, 0))
        none = self.comparison(WRITE_BUG, "write-error-redirty-sync", "syncblk-task", None,
                               False, side="fixed")
        self.assertEqual((none["verdict"], none["time_to_failure_s"], none["signature"],
                          none["digest"], none["explore_minimal_faults"], none["sweep_seed"],
                          none["sweep_runs"]),
                         ("pass", None, None, None, None, None, 13))

    def test_set_holds_one_record_per_comparison(self):
        self.fill()
        again = self.comparison(BASELINE_BUG, "rotational-swap", None, "baseline", False,
                                tag="b")
        recs = explore_table.write(self.set, [again])
        self.assertEqual([(r["subject"], r["scenario"], r["side"]) for r in recs],
                         [(BASELINE_BUG, "rotational-swap", "buggy"),
                          (WRITE_BUG, "write-error-redirty-sync", "buggy"),
                          (WRITE_BUG, "write-error-redirty-sync", "fixed")])
        self.assertIsNone(explore_table.read(self.set)[0]["sweep_seed"])

    def test_table(self):
        text = explore_table.render(self.fill(), "results/explore-corpus/m.jsonl")
        self.assertIn(f"| {WRITE_BUG} | buggy | write-error-redirty-sync | syncblk-task | "
                      "113 s, trial 0 | `not ok:  :: not ok 1 pattern intact` | 1 | 46 s, "
                      "seed 2 | `not ok:  :: not ok 1 pattern intact` |", text)
        self.assertIn(f"| {WRITE_BUG} | fixed | write-error-redirty-sync | syncblk-task | "
                      "none in 7 runs | - | - | none in 13 runs | - |", text)
        self.assertIn(f"| {BASELINE_BUG} | buggy | rotational-swap | - | 14 s, baseline | "
                      "`not ok:  :: not ok 1 pattern intact` | no fault | 46 s, seed 2 |", text)
        self.assertIn("3 comparisons of explore and a seed sweep, 30 min each side, every run "
                      "from a saved guest (`--restore`); QEMU build q1; kernels (cache key, "
                      "guest build): bug-rotational-reclaim-work (kbug, g1), "
                      f"bug-{WRITE_BUG} (kbug, g1), default (kbug, g1); run 2026-12-07; "
                      "faultline abc1234. On the buggy kernels, explore found a failure for 2 "
                      "of 2 bugs, the sweep for 2. On the fixed kernels, where nothing may "
                      "fail, explore found a failure for 0 of 1 bug, the sweep for 0.", text)
        self.assertIn(f"- {WRITE_BUG} buggy (syncblk-task): `f0: write nth=5 error=eio`",
                      text)

    def test_empty_set_says_how_to_fill_it(self):
        self.assertEqual(
            explore_table.render([], "results/explore-corpus/default.jsonl"),
            "No measurement in `results/explore-corpus/default.jsonl` yet. "
            "`tests/slow/explore_corpus.py [BUG ...] --budget 30m --restore --fixed --results "
            "results/explore-corpus/default.jsonl` records one (each bug's kernel built "
            "first: `faultline kernel build BASE --patch tests/bugs/NAME/reintroduce.patch "
            "--name bug-NAME`), then `faultline docs` writes the table here.\n")

    def test_faultline_docs_renders_the_set(self):
        self.fill()
        status, err, text = render_set(self.path("repo"), "explore-corpus", self.set)
        self.assertEqual(status, 0, err)
        self.assertIn(f"| {WRITE_BUG} | buggy | write-error-redirty-sync | syncblk-task | "
                      "113 s, trial 0 |", text)
        self.assertTrue(text.endswith("<!-- end generated -->\nafter\n"))

    def test_malformed_input_is_one_line(self):
        rec = self.comparison(WRITE_BUG, "write-error-redirty-sync", "syncblk-task", "trial",
                              True)
        for change, want in (
                ({"side": "bug"}, f"explore-corpus record of {WRITE_BUG} "
                                  "write-error-redirty-sync bug: side 'bug' is not one of "
                                  "buggy, fixed"),
                ({"sweep_seed": None}, f"explore-corpus record of {WRITE_BUG} "
                                       "write-error-redirty-sync buggy: sweep_seed and "
                                       "sweep_time_to_failure_s must both be null (no "
                                       "failure) or both set")):
            with self.assertRaises(SetupError) as cm:
                explore_table.rows([{**rec, **change}])
            self.assertEqual(str(cm.exception), want)
        with open(self.set, "w") as f:
            f.write(json.dumps({k: v for k, v in rec.items() if k != "explore_trial"}) + "\n")
        with self.assertRaises(SetupError) as cm:
            explore_table.read(self.set)
        self.assertEqual(str(cm.exception), f"{self.set}:1: no field 'explore_trial'")
        os.makedirs(self.path("empty"))
        with self.assertRaises(SetupError) as cm:
            explore_table.explore_outcome(self.path("empty"), 1.0)
        self.assertNotIn("\n", str(cm.exception))
        self.assertIn("no readable explore state", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
