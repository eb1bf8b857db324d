"""RunOptions round-trips: through the command line it writes (argv ->
the real parser -> from_args) and through run.json (meta -> JSON ->
from_meta), so a repro runs with the options of the original run.  And the
typed options of compare, matrix, bench and bugs, built from the real
parser: every field has its option."""

import json
import os
import sys
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.cli import parser
from faultline.cli.commands import bugs_options, compare_options
from faultline.run import runner
from faultline.run.options import (BenchOptions, BugsFuzzOptions, BugsOptions, CompareOptions,
                                   MatrixOptions, RunOptions, from_args)

CASES = [
    RunOptions(),
    RunOptions(deterministic=True, memory="1G", cpus=1, timeout="300s"),
    RunOptions(mutate="lie", backend="lava", cpus=2),
    RunOptions(backend="libvirt", memory="768M", mutate="corrupt"),
    RunOptions(kcov=True, restore=True),
]


class OptionsTest(unittest.TestCase):
    def test_argv_round_trip(self):
        for opts in CASES:
            args = parser().parse_args(["run", "smoke", "--seed", "1"] + opts.argv())
            self.assertEqual(RunOptions.from_args(args), opts, opts.argv())

    def test_run_command_is_argv(self):
        opts = CASES[1]
        self.assertEqual(runner.run_command("/s.toml", 3, opts),
                         f"{runner.FAULTLINE} run /s.toml --seed 3 --deterministic "
                         "--memory 1G --cpus 1 --timeout 300s")

    def test_meta_round_trip(self):
        for opts in CASES + [RunOptions(kernel="/k/bzImage", modules="/k/mod", accel="kvm",
                                        backend_options={"connect": "qemu:///system"})]:
            meta = json.loads(json.dumps(opts.meta(rules_copy="/run/rules-option.rules")))
            back = RunOptions.from_meta(meta, opts.deterministic, opts.quiet)
            self.assertEqual(back, RunOptions(**dict(vars(opts),
                                                     rules="/run/rules-option.rules")))


class CommandOptionsTest(unittest.TestCase):
    """Each command's options from the real parser: a field without its
    option (or renamed) fails here, not in the middle of a run."""

    def parse(self, *argv):
        return parser().parse_args(list(argv))

    def test_compare(self):
        k = os.path.join(self.tmp, "bzImage")
        got = compare_options(self.parse(
            "compare", "smoke", "--baseline", k, "--series", k, "--runs", "2",
            "--seeds", "3..4", "--metrics", "a,b", "--kernel-modes", "stock,patched",
            "--level", "0.9", "--deterministic", "--memory", "1G", "--cpus", "2",
            "--timeout", "60s", "--quiet", "--junit", "j.xml", "--kcidb", "k.json"))
        self.assertEqual(got, CompareOptions(
            scenario="smoke", baseline=k, series=k, out=runner.DEFAULT_OUT,
            run_options=RunOptions(deterministic=True, quiet=True, memory="1G", cpus=2,
                                   timeout="60s"),
            runs=2, seeds="3..4", metrics="a,b", kernel_modes="stock,patched", level=0.9,
            junit="j.xml", kcidb="k.json"))

    def test_matrix(self):
        got = from_args(MatrixOptions, self.parse(
            "matrix", "--scenarios", "smoke,x", "--seeds", "1..2", "--jobs", "2",
            "--backend", "lava", "--run", "--base-url", "http://h/", "--deterministic"))
        self.assertEqual(got, MatrixOptions(
            scenarios="smoke,x", out=runner.DEFAULT_OUT, seeds="1..2", jobs=2,
            backend="lava", run=True, base_url="http://h/", deterministic=True))

    def test_bench(self):
        got = from_args(BenchOptions, self.parse(
            "bench", "--quick", "--only", "engine", "--rounds", "3", "--json", "b.json"))
        self.assertEqual(got, BenchOptions(out=runner.DEFAULT_OUT, quick=True, only="engine",
                                           rounds=3, json="b.json"))

    def test_bugs(self):
        got = bugs_options(self.parse(
            "bugs", "a", "b", "--seeds", "2..3", "--no-faults", "--budget", "5", "--docs"))
        self.assertEqual(got, BugsOptions(
            names=["a", "b"], seeds="2..3", out=os.path.join(runner.DEFAULT_OUT, "bugs"),
            no_faults=True, budget=5, docs=True))
        self.assertEqual(bugs_options(self.parse("bugs")), BugsOptions(
            names=[], seeds="10", out=os.path.join(runner.DEFAULT_OUT, "bugs"), budget=40))

    def test_bugs_fuzz(self):
        got = bugs_options(self.parse("bugs", "a", "--fuzz", "--budget", "90s", "--seeds", "2",
                                      "--jobs", "2", "--rerun", "--results", "r.jsonl"))
        self.assertEqual(got, BugsFuzzOptions(
            names=["a"], seeds=[1, 2], out=os.path.join(runner.DEFAULT_OUT, "bugs-fuzz"),
            budget_s=90.0, jobs=2, rerun=True, results="r.jsonl"))
        self.assertEqual(bugs_options(self.parse("bugs", "--fuzz")), BugsFuzzOptions(
            names=[], seeds=[1, 2, 3], out=os.path.join(runner.DEFAULT_OUT, "bugs-fuzz"),
            budget_s=1800.0))

    def test_a_field_without_its_option_is_an_error(self):
        with self.assertRaises(AttributeError):
            from_args(BenchOptions, self.parse("matrix", "--scenarios", "smoke"))

    def setUp(self):
        self.tmpdir = tempfile.TemporaryDirectory()
        self.tmp = self.tmpdir.name
        # --baseline/--series are checked for the bzImage header at 0x202.
        with open(os.path.join(self.tmp, "bzImage"), "wb") as f:
            f.write(b"\0" * 0x202 + b"HdrS" + b"\0" * 64)

    def tearDown(self):
        self.tmpdir.cleanup()


if __name__ == "__main__":
    unittest.main()
