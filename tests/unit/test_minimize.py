"""Unit tests of `faultline minimize`: ddmin on synthetic predicates, the
fault log -> explicit schedule conversion, failure signatures, refusals."""

import contextlib
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline import cli, rules, scenario
from faultline.errors import SetupError
from faultline.judge import failure
from faultline.judge.report import Report
from faultline.faults import grammar
from faultline.search import fault_schedule, minimize


class Predicate:
    """fails(subset) of ddmin: true when @needed are all in the subset."""

    def __init__(self, needed, budget=None):
        self.needed, self.budget = set(needed), budget
        self.runs, self.seen = 0, {}

    def __call__(self, cands):
        out = []
        for c in cands:
            if tuple(c) not in self.seen:
                if self.budget is not None and self.runs >= self.budget:
                    raise minimize.BudgetSpent()
                self.runs += 1
                self.seen[tuple(c)] = self.needed <= set(c)
            out.append(self.seen[tuple(c)])
        return out


class DdminTest(unittest.TestCase):
    def test_finds_exactly_the_needed_elements(self):
        for n, needed in ((20, (2, 13)), (35, (0, 34)), (300, (2, 199)), (300, (5, 77, 250)),
                          (1, (0,)), (8, (3,))):
            p = Predicate(needed)
            got = minimize.ddmin(list(range(n)), p)
            self.assertEqual(sorted(got), sorted(needed), (n, needed))
            # 1-minimal: without any one element it no longer fails.
            for x in got:
                self.assertFalse(p.needed <= set(got) - {x})

    def test_run_count_is_bounded(self):
        # ddmin's worst case for k needed elements is O(k^2 log n); measured
        # with complements first: at most 21 runs for 2 in 20, 44 for 2 in 300.
        rng = random.Random(1)
        for n, k, bound in ((20, 2, 24), (300, 2, 50)):
            for _ in range(20):
                p = Predicate(rng.sample(range(n), k))
                minimize.ddmin(list(range(n)), p)
                self.assertLessEqual(p.runs, bound, (n, p.needed))

    def test_jobs_do_not_change_the_result(self):
        rng = random.Random(2)
        for _ in range(20):
            needed = rng.sample(range(60), 3)
            a = minimize.ddmin(list(range(60)), Predicate(needed), jobs=1)
            b = minimize.ddmin(list(range(60)), Predicate(needed), jobs=3)
            self.assertEqual(a, b)

    def test_budget_returns_the_smallest_failing_set_so_far(self):
        p = Predicate((4, 90), budget=6)
        with self.assertRaises(minimize.BudgetSpent) as cm:
            minimize.ddmin(list(range(100)), p)
        current = cm.exception.args[0]
        self.assertLess(len(current), 100)
        self.assertTrue(p.needed <= set(current))

    def test_not_monotone_still_ends_on_a_failing_set(self):
        # Fails with an odd number of elements from {1, 2, 3}: no unique answer,
        # but whatever ddmin returns must fail.
        def fails(cands):
            return [len({1, 2, 3} & set(c)) % 2 == 1 for c in cands]
        got = minimize.ddmin(list(range(16)), fails)
        self.assertEqual(fails([got]), [True])
        self.assertEqual(len(got), 1)

    def test_split(self):
        self.assertEqual(minimize.split(list(range(7)), 3), [[0, 1], [2, 3], [4, 5, 6]])
        self.assertEqual(minimize.split([1, 2], 4), [[1], [2]])


RULES_TEXT = """\
arm: write lba=100-199 nth=5 set-state=1
noise: write lba=100-199 prob=0.3 error=eio dnr   # seeded
late: write lba=100-199 state=1 every=2 error=write-fault when=after
write len=8 prob=0.1 delay=uniform(10us, 200us)
any after=3 set-state=2
"""
# What x-fault-query-stats reports for them (canonical texts, rN names).
RULE_TEXTS = {
    "arm": "write lba=100-199 nth=5 set-state=1",
    "noise": "write lba=100-199 prob=0.3 error=eio dnr",
    "late": "write lba=100-199 state=1 every=2 error=write-fault when=after",
    "r3": "write len=8 prob=0.1 delay=uniform(10us,200us)",
    "r4": "any after=3 set-state=2",
}


def entry(seq, rule, nth, action, ordinal=None, lba=100):
    return {"seq": seq, "ordinal": ordinal or 10 + seq, "vns": 1000 * seq, "op": "write",
            "lba": lba, "len": 8, "rule": rule, "nth": nth, "action": action}


LOG = [entry(0, "noise", 2, "error=eio dnr"),
       entry(1, "r3", 2, "delay=123456ns"),
       entry(2, "arm", 5, "set-state=1"),
       entry(3, "r4", 4, "set-state=2", lba=5000),
       entry(4, "late", 2, "error=write-fault when=after"),
       entry(5, "noise", 7, "error=eio dnr")]


def write_log(d, entries):
    path = os.path.join(d, "faults.jsonl")
    with open(path, "w") as f:
        for e in entries:
            f.write(json.dumps(e) + "\n")
    return path


class ScheduleTest(unittest.TestCase):
    def test_one_pinned_rule_per_fault(self):
        faults, kept = fault_schedule.build_schedule(LOG, RULE_TEXTS, RULES_TEXT)
        self.assertEqual([f.pinned for f in faults], [
            "f0: write lba=100-199 nth=2 error=eio dnr",
            "f1: write len=8 nth=2 delay=123456ns",
            "f2: write lba=100-199 state=1 nth=2 error=write-fault when=after",
            "f3: write lba=100-199 nth=7 error=eio dnr"])
        self.assertEqual([f.seq for f in faults], [0, 1, 4, 5])
        # State rules stay as they were; the unnamed one keeps no name (its
        # seeded draws are keyed by its text), the named one its name.
        self.assertEqual(kept, ["arm: write lba=100-199 nth=5 set-state=1",
                                "any after=3 set-state=2"])

    def test_pinned_rule_keeps_sq_and_cpu(self):
        # A pinned rule counts the same I/Os: sq= and cpu= are match keys.
        self.assertEqual(fault_schedule.pinned_rule("f0", "write lba=0-9 sq=2 cpu=1 every=3 error=eio",
                                        6, "error=eio"),
                         "f0: write lba=0-9 sq=2 cpu=1 nth=6 error=eio")

    def test_pinned_rules_pass_the_engines_parser(self):
        faults, kept = fault_schedule.build_schedule(LOG, RULE_TEXTS, RULES_TEXT)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.rules")
            with open(path, "w") as f:
                f.write(fault_schedule.rules_text_of(kept, faults))
            res = subprocess.run([rules.checker(), path], capture_output=True, text=True)
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)

    def test_names_do_not_clash_with_the_runs_rules(self):
        texts = dict(RULE_TEXTS, f0="write lba=1 error=eio")
        faults, _ = fault_schedule.build_schedule([entry(0, "f0", 1, "error=eio")], texts, "")
        self.assertEqual(faults[0].pinned, "_f0: write lba=1 nth=1 error=eio")

    def test_log_checks(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(fault_schedule.read_fault_log(write_log(d, LOG)), LOG)
            for bad, msg in ((LOG[:1] + LOG[2:], "seq 2, expected 1"),
                             ([{k: v for k, v in LOG[0].items() if k != "nth"}],
                              "no per-rule ordinal")):
                with self.assertRaisesRegex(fault_schedule.ScheduleError, msg):
                    fault_schedule.read_fault_log(write_log(d, bad))
        with self.assertRaisesRegex(fault_schedule.ScheduleError, "not among the run's rules"):
            fault_schedule.build_schedule([entry(0, "gone", 1, "drop")], RULE_TEXTS, RULES_TEXT)

    def test_tokens_keep_parentheses(self):
        self.assertEqual(grammar.rule_tokens("a: write delay=uniform(1us, 2us) # x y"),
                         ["a:", "write", "delay=uniform(1us, 2us)"])
        self.assertEqual(fault_schedule.explicit_names(RULES_TEXT), {"arm", "noise", "late"})

    def test_what_differed(self):
        new = [dict(e) for e in LOG]
        self.assertEqual(minimize._differs(LOG, new), "")
        new[4]["ordinal"] = 99
        self.assertIn("entry 4 differs: ordinal 14", minimize._differs(LOG, new))
        self.assertIn("6 faults in the original log, 5", minimize._differs(LOG, LOG[:5]))


def report(status, outcome, reason="", results=()):
    return Report(scenario="s", seed=1, status=status, outcome=outcome, reason=reason,
                  results=list(results))


class PrefixTest(unittest.TestCase):
    """A log of more faults than the engine takes rules: bisected to the
    shortest failing prefix of the original rules, capped with count=."""

    def test_prefix_rules_cap_each_rule_at_its_faults(self):
        named = fault_schedule.explicit_names(RULES_TEXT)
        _, kept = fault_schedule.build_schedule(LOG, RULE_TEXTS, RULES_TEXT)
        text = fault_schedule.prefix_rules(LOG, 5, RULE_TEXTS, named, kept)
        lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
        self.assertEqual(lines, kept + [
            "noise: write count=1 lba=100-199 prob=0.3 error=eio dnr",
            "late: write count=1 lba=100-199 state=1 every=2 error=write-fault when=after",
            "write count=1 len=8 prob=0.1 delay=uniform(10us,200us)"])
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.rules")
            with open(path, "w") as f:
                f.write(text)
            res = subprocess.run([rules.checker(), path], capture_output=True, text=True)
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        # A smaller count= of its own stays.
        self.assertEqual(fault_schedule.capped_rule("w", "write every=2 count=3 error=eio", True, 9),
                         "w: write every=2 count=3 error=eio")
        self.assertEqual(fault_schedule.capped_rule("w", "write every=2 count=30 error=eio", True, 9),
                         "w: write count=9 every=2 error=eio")
        self.assertTrue(fault_schedule.draws(RULE_TEXTS["r3"]))
        self.assertFalse(fault_schedule.draws(RULE_TEXTS["late"]))

    def minimizer(self, n, rules_text="x0: write every=2 error=eio\n",
                  texts=None, fails_from=3000):
        m = minimize.Minimizer(tempfile.mkdtemp(), budget=40, jobs=1, quiet=True)
        texts = texts or {"x0": "write every=2 error=eio"}
        rule = next(iter(texts))
        m.rules_text = rules_text
        m.orig = Report(scenario="s", seed=1, status=1, outcome="fail", reason="x",
                        faults={"rules": [{"name": k, "text": t} for k, t in texts.items()]})
        m.entries = [entry(i, rule, 2 * (i + 1), "error=eio") for i in range(n)]
        m.faults, m.kept = fault_schedule.build_schedule(m.entries, texts, rules_text)
        m.texts_run = []

        def run_subset(subset, tag, text=None, n_faults=None):
            m.runs += 1
            m.texts_run.append(text)
            cap = int(text.split("count=")[1].split()[0])
            same = cap >= fails_from
            return None, "sig" if same else "", same, None
        m.run_subset = run_subset
        return m

    def test_bisects_to_a_prefix_that_fits(self):
        m = self.minimizer(10000)
        m.shorten()
        self.assertEqual(m.prefix_of, 10000)
        self.assertLessEqual(len(m.faults), fault_schedule.RULES_MAX)
        self.assertGreaterEqual(len(m.faults), 3000)
        self.assertEqual(len(m.entries), len(m.faults))
        self.assertLessEqual(m.runs, 3)
        self.assertTrue(all("x0: write count=" in t for t in m.texts_run))

    def test_a_log_that_fits_is_left_alone(self):
        m = self.minimizer(100)
        m.shorten()
        self.assertEqual((m.prefix_of, len(m.faults), m.runs), (None, 100, 0))

    def test_refusals_are_one_line(self):
        # Every prefix that fits passes: the failure needs more faults.
        m = self.minimizer(10000, fails_from=9000)
        with self.assertRaisesRegex(SetupError, "shortest failing prefix found holds"):
            m.shorten()
        # An unnamed rule that draws: capping it would change its draws.
        m = self.minimizer(5000, rules_text="write prob=0.5 error=eio\n",
                           texts={"r0": "write prob=0.5 error=eio"})
        with self.assertRaisesRegex(SetupError, "rule 'r0' draws from a stream"):
            m.shorten()


class SignatureTest(unittest.TestCase):
    def test_first_failing_ktap_test(self):
        r = report(1, "fail", "guest tests failed", [
            {"suite": "iocheck", "name": "a", "kind": "ok", "line": "ok 1 a"},
            {"suite": "iocheck", "name": "b", "kind": "fail", "line": "not ok 2 b # x"},
            {"suite": "iocheck", "name": "c", "kind": "fail", "line": "not ok 3 c"}])
        self.assertEqual(failure.signature("/nonexistent", r), "not ok: iocheck :: not ok 2 b")
        self.assertIsNone(failure.signature("/nonexistent", report(0, "pass")))
        # A loaded report.json has no results: they come from ktap.log.
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "ktap.log"), "w") as f:
                f.write("# test: iocheck x\nKTAP version 1\n1..2\nok 1 a\nnot ok 2 b\n")
            self.assertEqual(failure.signature(d, report(1, "fail", "guest tests failed")),
                             "not ok: iocheck x :: not ok 2 b")
        self.assertEqual(failure.signature("/nonexistent", report(3, "hang")), "hang")

    def test_crash_line_ignores_addresses_and_time(self):
        a = "[   12.5] BUG: unable to handle page fault for address: ffff8880123\n"
        b = "[   99.1] BUG: unable to handle page fault for address: ffff8880999\n"
        self.assertEqual(failure.crash_line(a), failure.crash_line(b))
        self.assertNotEqual(failure.crash_line(a), failure.crash_line("Kernel panic - not syncing"))


def run_dir(d, deterministic=True, status=1, outcome="fail"):
    with open(os.path.join(d, "run.json"), "w") as f:
        json.dump({"scenario": "s", "seed": 1, "deterministic": deterministic}, f)
    with open(os.path.join(d, "report.json"), "w") as f:
        json.dump(report(status, outcome, "why").to_json(), f)


class RefusalTest(unittest.TestCase):
    def refuse(self, d):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            st = cli.main(["minimize", d])
        return st, err.getvalue().strip().splitlines()

    def test_not_deterministic_or_passed_is_one_line_exit_2(self):
        with tempfile.TemporaryDirectory() as d:
            for kw, text in (({"deterministic": False}, "not a --deterministic run"),
                             ({"status": 0, "outcome": "pass"}, "the run passed")):
                run_dir(d, **kw)
                st, lines = self.refuse(d)
                self.assertEqual(st, 2)
                self.assertEqual(len(lines), 1, lines)
                self.assertIn(text, lines[0])
            st, lines = self.refuse(os.path.join(d, "nope"))
            self.assertEqual((st, len(lines)), (2, 1))

    def test_passing_nondeterministic_run_gives_both_reasons(self):
        # Issue 32 defect 6: "not deterministic" alone sent the user to a
        # --deterministic rerun that minimize would then refuse as passing.
        with tempfile.TemporaryDirectory() as d:
            run_dir(d, deterministic=False, status=0, outcome="pass")
            st, lines = self.refuse(d)
            self.assertEqual((st, lines), (2, [
                f"faultline: error: {d}: the run passed and is not a --deterministic run: "
                "minimize needs a failing run of faultline run SCENARIO --deterministic"]))

    def test_budget_and_jobs_are_checked(self):
        with tempfile.TemporaryDirectory() as d:
            run_dir(d)
            for args in (["--budget", "0"], ["--jobs", "0"]):
                err = io.StringIO()
                with contextlib.redirect_stderr(err):
                    self.assertEqual(cli.main(["minimize", d] + args), 2)
                self.assertIn(args[0], err.getvalue())


class ScenarioKeysTest(unittest.TestCase):
    def load(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write(text + '[[test]]\nrun = "swapstress"\n')
        try:
            return scenario.load(f.name)
        finally:
            os.unlink(f.name)

    def test_nondeterministic_says_why(self):
        sc = self.load('nondeterministic = "reads host time"\n')
        with self.assertRaisesRegex(scenario.ScenarioError, "cannot run --deterministic: "
                                    "reads host time"):
            scenario.check_deterministic(sc)
        for bad in ('nondeterministic = ""\n', "nondeterministic = true\n"):
            with self.assertRaisesRegex(scenario.ScenarioError, "must say why"):
                self.load(bad)
        scenario.check_deterministic(self.load(""))

    def test_rules_option_replaces_the_rules(self):
        sc = self.load('[faults]\nrules = "a: write nth=1 error=eio"\n'
                       '[expect]\nrule_hits_min = { a = 1 }\nvmstat_min = { pswpout = 1 }\n')
        with tempfile.NamedTemporaryFile("w", suffix=".rules") as f:
            f.write("b: read nth=2 drop\n")
            f.flush()
            scenario.replace_rules(sc, f.name)
        self.assertEqual(sc.faults.rules, "b: read nth=2 drop\n")
        self.assertEqual(sc.expect, {"vmstat_min": {"pswpout": 1}})
        with self.assertRaisesRegex(scenario.ScenarioError, "--rules: No such file"):
            scenario.replace_rules(sc, "/nonexistent.rules")


if __name__ == "__main__":
    unittest.main()
