"""results/ and `faultline docs`: records are checked (a missing field, a
set mixing QEMU or guest builds: one line), the writer merges by identity
in a fixed order, a record comes from a real run directory, `faultline
bugs --import` converts an earlier campaign's run directories and refuses
runs of another build, and `faultline docs --check` finds the repository's
generated tables as their results give them and catches a hand edit
inside a region (while the text around regions is left alone)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.bugs import recall_table
from faultline.errors import EXIT_CRASH, EXIT_FAIL, EXIT_PASS, SetupError
from faultline.judge.report import Report
from faultline.lab import matrix_results
from faultline.results import records

FAULTLINE = os.path.join(TOP, "scripts", "faultline")
BUG = "rotational-reclaim-work"
SCENARIO = "rotational-swap"


def cli(*args):
    return subprocess.run([FAULTLINE, *args], capture_output=True, text=True, timeout=120)


def write_run(rundir, seed, status, qemu="q1", guest="g1", kernel_key="k1", reason=None,
              outcome=None, ktap=None):
    """A finished run directory as runner.one_run leaves it: report.json,
    run.json (the fields a record reads) and, for a KTAP failure, ktap.log."""
    os.makedirs(rundir, exist_ok=True)
    Report(scenario=SCENARIO, seed=seed, status=status,
           outcome=outcome or {0: "pass", 1: "fail", 3: "crash", 143: "aborted"}[status],
           reason=reason or ("all passed" if status == EXIT_PASS else "guest tests failed"),
           elapsed_s=30.0 + seed, diag={"data_errors": 5} if status == EXIT_FAIL else {},
           digest="0123456789abcdef").save(rundir)
    with open(os.path.join(rundir, "run.json"), "w") as f:
        json.dump({"kernel": f"/cache/kernel/entries/{kernel_key}/bzImage",
                   "kernel_sha256": "ab" * 32, "qemu_build": qemu, "guest_build": guest,
                   "start_time": 1796601600.0, "faultline": "abc1234"}, f)
    if ktap:
        with open(os.path.join(rundir, "ktap.log"), "w") as f:
            f.write(ktap)


def campaign_out(out, qemu="q1"):
    """An earlier campaign's --out for one bug: buggy seeds 1-2 (seed 2
    lost data), fixed seeds 1-2 passed, a stopped buggy seed 3, and the
    first failure's repro."""
    base = os.path.join(out, BUG, SCENARIO)
    write_run(os.path.join(base, "buggy", "seed1"), 1, EXIT_PASS, qemu, "g-bug", "kbug")
    write_run(os.path.join(base, "buggy", "seed2"), 2, EXIT_FAIL, qemu, "g-bug-tools-t1",
              "kbug", ktap="KTAP version 1\n1..1\nnot ok 1 pattern intact # 5 bad pages\n")
    write_run(os.path.join(base, "buggy", "seed3"), 3, 143, qemu, "g-bug", "kbug",
              reason="SIGTERM")
    for seed in (1, 2):
        write_run(os.path.join(base, "fixed", f"seed{seed}"), seed, EXIT_PASS, qemu, "g-fix",
                  "kfix")
    with open(os.path.join(base, "first-failure.json"), "w") as f:
        json.dump({"rundir": os.path.join(base, "buggy", "seed2"), "reproducible": True,
                   "minimal_faults": None, "minimize": "not a --deterministic run"}, f)


class RecordTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def record(self, **change):
        d = os.path.join(self.tmp, "run")
        write_run(d, 2, EXIT_FAIL, ktap="KTAP version 1\n1..1\nnot ok 1 every byte # 3\n")
        rec = records.record_of_run(d, BUG, scenario=SCENARIO, side="buggy",
                                    base="debian:6.12", broken_guarantee="data loss")
        rec.update(change)
        return rec

    def test_record_of_a_run_directory(self):
        rec = self.record()
        self.assertEqual({k: rec[k] for k in records.REQUIRED},
                         {"subject": BUG, "kernel_key": "k1", "qemu_build": "q1",
                          "guest_build": "g1", "seed": 2, "deterministic": False,
                          "verdict": "fail", "elapsed_s": 32.0, "time_to_failure_s": 32.0,
                          "signature": "not ok:  :: not ok 1 every byte",
                          "digest": "0123456789abcdef"})
        self.assertEqual((rec["date"], rec["faultline"]), ("2026-12-07", "abc1234"))
        records.check_record(rec, recall_table.RECORD_FIELDS)

    def test_verdicts(self):
        d = os.path.join(self.tmp, "r")
        write_run(d, 1, EXIT_CRASH, reason="kernel crash: Oops")
        self.assertEqual(records.record_of_run(d, BUG)["verdict"], "crash")
        write_run(d, 1, EXIT_CRASH, reason="hang", outcome="hang")
        self.assertEqual(records.record_of_run(d, BUG)["signature"], "hang")
        write_run(d, 1, 143, reason="SIGTERM")
        self.assertIsNone(records.record_of_run(d, BUG))    # a stopped run measured nothing

    def test_missing_or_mistyped_field_is_one_line(self):
        path = os.path.join(self.tmp, "s.jsonl")
        good = self.record()
        for change, want in ((("qemu_build", None), "field 'qemu_build' is None, not str"),
                             (("seed", "2"), "field 'seed' is '2', not int"),
                             (("verdict", "flaky"), "verdict 'flaky' is not one of"),
                             (("time_to_failure_s", None), "time_to_failure_s must be null exactly when")):
            bad = dict(good, **{change[0]: change[1]})
            with open(path, "w") as f:
                f.write(records.dumps(good) + "\n" + records.dumps(bad) + "\n")
            with self.assertRaisesRegex(SetupError, "s.jsonl:2: " + want):
                records.read_set(path, recall_table.RECORD_FIELDS)
        del good["kernel_key"]
        with open(path, "w") as f:
            f.write(records.dumps(good) + "\n")
        with self.assertRaises(SetupError) as e:
            records.read_set(path)
        self.assertRegex(str(e.exception), r"^\S*s\.jsonl:1: no field 'kernel_key'$")
        rec = self.record()
        del rec["side"]
        with self.assertRaisesRegex(SetupError, "no field 'side'"):
            records.check_record(rec, recall_table.RECORD_FIELDS)

    def test_a_set_of_two_builds_is_refused(self):
        path = os.path.join(self.tmp, "s.jsonl")
        a = self.record()
        with open(path, "w") as f:
            f.write(records.dumps(a) + "\n" + records.dumps(dict(a, seed=3, qemu_build="q2"))
                    + "\n")
        with self.assertRaisesRegex(SetupError, "QEMU build q2 cannot join runs of QEMU "
                                                "build q1"):
            records.read_set(path)
        # Per kernel one guest build, a scenario's tools aside; kernels differ.
        ok = [a, dict(a, seed=3, guest_build="g1-tools-t9"),
              dict(a, seed=4, kernel_key="k2", guest_build="g7")]
        records.check_builds(path, ok)
        with self.assertRaisesRegex(SetupError, "kernel k1: a run of guest build g2 cannot "
                                                "join runs of guest build g1"):
            records.check_builds(path, ok + [dict(a, seed=5, guest_build="g2")])

    def test_writer_merges_in_identity_order_and_refuses_before_writing(self):
        path = os.path.join(self.tmp, "recall", "s.jsonl")
        ident, fields = recall_table.IDENTITY, recall_table.RECORD_FIELDS
        r2, r1 = self.record(), self.record(seed=1, verdict="pass", time_to_failure_s=None,
                                            signature=None, broken_guarantee=None)
        records.write_set(path, [r2], ident, fields)
        records.write_set(path, [r1], ident, fields)
        with open(path) as f:
            text = f.read()
        self.assertEqual([json.loads(ln)["seed"] for ln in text.splitlines()], [1, 2])
        self.assertEqual(text.splitlines()[0], json.dumps(r1, sort_keys=True,
                                                          separators=(", ", ": ")))
        records.write_set(path, [dict(r2, elapsed_s=40.0)], ident, fields)  # a rerun seed
        got = records.read_set(path, fields)
        self.assertEqual([(r["seed"], r["elapsed_s"]) for r in got], [(1, 32.0), (2, 40.0)])
        with open(path) as f:
            before = f.read()
        with self.assertRaisesRegex(SetupError, "QEMU build q9 cannot join"):
            records.write_set(path, [dict(r1, seed=7, qemu_build="q9")], ident, fields)
        with open(path) as f:
            self.assertEqual(f.read(), before)

    def test_writers_sharing_a_set_keep_each_others_records(self):
        path = os.path.join(self.tmp, "recall", "s.jsonl")
        ident, fields = recall_table.IDENTITY, recall_table.RECORD_FIELDS
        rec = self.record()
        pids = []
        for w in range(4):      # four campaigns writing one set at once
            pid = os.fork()
            if pid == 0:
                try:
                    for i in range(15):
                        records.write_set(path, [dict(rec, seed=100 * w + i)], ident, fields)
                finally:
                    os._exit(0)
            pids.append(pid)
        for pid in pids:
            os.waitpid(pid, 0)
        self.assertEqual(len(records.read_set(path, fields)), 60)


class MatrixSetTest(unittest.TestCase):
    """`matrix --results`: a run's record, the set's builds, the table."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_records_of_runs_and_their_table(self):
        path = os.path.join(self.tmp, "stock.jsonl")
        for seed, status, kernel, key in ((1, EXIT_PASS, "debian-6.12", "k1"),
                                          (2, EXIT_FAIL, "debian-6.12", "k1"),
                                          (1, EXIT_PASS, "debian-7.2", "k2")):
            d = os.path.join(self.tmp, f"{kernel}-{seed}")
            write_run(d, seed, status, kernel_key=key, guest=f"g-{key}",
                      ktap="KTAP version 1\n1..1\nnot ok 1 pattern intact # 5 bad pages\n")
            meta, report = records.load_run(d)
            rec = matrix_results.record_of(d, report, meta, kernel)
            matrix_results.write(path, rec)
        recs = records.read_set(path, matrix_results.RECORD_FIELDS)
        self.assertEqual([(r["kernel"], r["seed"], r["verdict"]) for r in recs],
                         [("debian-6.12", 1, "pass"), ("debian-6.12", 2, "fail"),
                          ("debian-7.2", 1, "pass")])
        table = matrix_results.render(recs, "results/scenarios/stock.jsonl")
        row = next(ln for ln in table.splitlines() if ln.startswith(f"| `{SCENARIO}`"))
        self.assertRegex(row, r"^\| `rotational-swap` \| 1/2 pass \(fail\), 32 s \(load "
                              r"[0-9.]+\) \| 1/1 pass, 31 s \(load [0-9.]+\) \|$")
        self.assertIn("- `rotational-swap` on debian-6.12, seed 2: fail (fail): not ok", table)
        # Another QEMU build is refused before any run.
        with self.assertRaisesRegex(SetupError, "QEMU build q2 cannot join"):
            matrix_results.check(path, [{"qemu_build": "q2", "guest_build": "g-k1",
                                         "kernel_key": "k1"}])
        matrix_results.check(path, [{"qemu_build": "q1", "guest_build": "g-k1",
                                     "kernel_key": "k1"}])

    def test_bad_options_are_one_line_before_any_build(self):
        for args, want in ((("--scenarios", "all,smoke"), "--scenarios all stands alone"),
                           (("--scenarios", "smoke", "--results", "/nonexistent/s.jsonl"),
                            "--results /nonexistent/s.jsonl: no directory /nonexistent"),
                           (("--scenarios", "smoke", "--backend", "lava", "--results",
                             os.path.join(self.tmp, "s.jsonl")),
                            "--results records runs of --backend qemu")):
            r = cli("matrix", *args)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertEqual(r.stderr, f"faultline: error: {want}\n")


class ImportTest(unittest.TestCase):
    """`faultline bugs --import`: the converter of kept run directories."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.set = os.path.join(self.tmp, "recall.jsonl")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_import_then_another_build_is_refused(self):
        out = os.path.join(self.tmp, "out")
        campaign_out(out)
        r = cli("bugs", "--import", out, "--results", self.set)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("4 runs into", r.stderr)
        self.assertIn("1 unfinished or stopped runs left out", r.stderr)
        recs = records.read_set(self.set, recall_table.RECORD_FIELDS)
        self.assertEqual([(x["side"], x["seed"], x["verdict"]) for x in recs],
                         [("buggy", 1, "pass"), ("buggy", 2, "fail"),
                          ("fixed", 1, "pass"), ("fixed", 2, "pass")])
        caught = recs[1]
        self.assertEqual((caught["kernel"], caught["kernel_key"], caught["broken_guarantee"],
                          caught["reproducible"], caught["signature"]),
                         ("bug-rotational-reclaim-work", "kbug", "data loss (data_errors 5)",
                          True, "not ok:  :: not ok 1 pattern intact"))
        [row] = recall_table.rows(recs)
        self.assertEqual(recall_table.cells(row),
                         [BUG, "debian:6.12", SCENARIO, "1/2", "63 s", "2/2", "not run", "yes",
                          "not a --deterministic run"])
        with open(self.set) as f:
            before = f.read()
        other = os.path.join(self.tmp, "other")
        campaign_out(other, qemu="q2")
        r = cli("bugs", "--import", other, "--results", self.set)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("QEMU build q2 cannot join runs of QEMU build q1", r.stderr)
        with open(self.set) as f:
            self.assertEqual(f.read(), before)

    def test_campaign_of_another_qemu_build_is_refused_before_building(self):
        """The set's QEMU build is not the one this checkout builds: one
        line naming both, exit 2, before any kernel build (no log)."""
        key = subprocess.run([os.path.join(TOP, "scripts", "build-qemu"), "--print-key"],
                             capture_output=True, text=True, timeout=60).stdout.strip()
        if not key:
            self.skipTest("QEMU source not fetched: no QEMU build key to compare")
        campaign_out(os.path.join(self.tmp, "out"), qemu="0000000000000000")
        self.assertEqual(cli("bugs", "--import", os.path.join(self.tmp, "out"), "--results",
                             self.set).returncode, 0)
        r = cli("bugs", BUG, "--seeds", "1", "--results", self.set,
                "--out", os.path.join(self.tmp, "runs"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn(f"a run of QEMU build {key} cannot join runs of QEMU build "
                      "0000000000000000", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "runs")))


class DocsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.docs = os.path.join(self.tmp, "docs")
        self.results = os.path.join(self.tmp, "results")
        shutil.copytree(os.path.join(TOP, "docs"), self.docs)
        shutil.copytree(os.path.join(TOP, "results"), self.results)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def docs_cmd(self, *args):
        return cli("docs", "--docs-dir", self.docs, "--results-dir", self.results, *args)

    def read(self, name="bugs.md"):
        with open(os.path.join(self.docs, name)) as f:
            return f.read()

    def test_repository_docs_are_what_results_give(self):
        before = {}
        for d in ("docs", "results"):
            for root, _, files in os.walk(os.path.join(TOP, d)):
                for fn in files:
                    with open(os.path.join(root, fn), "rb") as f:
                        before[os.path.join(root, fn)] = f.read()
        r = cli("docs", "--check")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("generated table(s), each as its results give it", r.stderr)
        for path, data in before.items():
            with open(path, "rb") as f:
                self.assertEqual(f.read(), data, path)
        self.assertIn("<!-- generated by faultline docs: recall/default -->", self.read())

    def test_hand_edit_inside_a_region_is_caught_and_rewritten(self):
        text = self.read()
        begin = "<!-- generated by faultline docs: recall/default -->\n"
        edited = text.replace(begin, begin + "| rotational-reclaim-work | 10/10 |\n")
        # and a hand edit outside every region, which is the docs' own text
        edited = edited.replace("## Recall\n", "## Recall\n\nA hand-written line.\n")
        with open(os.path.join(self.docs, "bugs.md"), "w") as f:
            f.write(edited)
        r = self.docs_cmd("--check")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stderr.strip().splitlines(),
                         [f"faultline: {self.docs}/bugs.md: table recall/default differs from "
                          "results/recall/default.jsonl (`faultline docs` rewrites it)"])
        self.assertEqual(self.read(), edited)             # --check wrote nothing
        self.assertEqual(self.docs_cmd().returncode, 0)
        self.assertEqual(self.read(), text.replace("## Recall\n",
                                                   "## Recall\n\nA hand-written line.\n"))
        self.assertEqual(self.docs_cmd("--check").returncode, 0)

    def test_results_fill_the_region(self):
        out = os.path.join(self.tmp, "out")
        campaign_out(out)
        # The repository's set holds runs of its own builds: the fake campaign
        # (builds q1...) starts the copy's set anew.
        open(os.path.join(self.results, "recall", "default.jsonl"), "w").close()
        r = cli("bugs", "--import", out, "--results",
                os.path.join(self.results, "recall", "default.jsonl"))
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.docs_cmd("--check")
        self.assertEqual(r.returncode, 1)
        self.assertIn("table recall/default differs", r.stderr)
        self.assertEqual(self.docs_cmd().returncode, 0)
        text = self.read()
        region = text.split("recall/default -->\n", 1)[1].split("<!-- end generated -->")[0]
        self.assertTrue(region.startswith("4 runs, seeds 1..2, not --deterministic; QEMU "
                                          "build q1; kernels (cache key, guest build): "
                                          "bug-rotational-reclaim-work (kbug, g-bug), "
                                          "debian-6.12 (kfix, g-fix); run 2026-12-07; "
                                          "faultline abc1234. Columns:"), region)
        self.assertIn("| rotational-reclaim-work | debian:6.12 | rotational-swap | 1/2 | 63 s "
                      "| 2/2 | not run | yes | not a --deterministic run |\n", region)
        self.assertIn("## How the scenarios were shaped", text)   # untouched

    def test_bad_markers_and_bad_records_are_one_line(self):
        with open(os.path.join(self.docs, "x.md"), "w") as f:
            f.write("# x\n\n<!-- generated by faultline docs: recall/default -->\nold\n")
        r = self.docs_cmd("--check")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("x.md:3: the generated table recall/default has no "
                      "`<!-- end generated -->`", r.stderr)
        with open(os.path.join(self.docs, "x.md"), "w") as f:
            f.write("<!-- generated by faultline docs: recall/nosuch -->\n"
                    "<!-- end generated -->\n")
        r = self.docs_cmd("--check")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no results/recall/nosuch.jsonl", r.stderr)
        os.remove(os.path.join(self.docs, "x.md"))
        with open(os.path.join(self.results, "recall", "default.jsonl"), "w") as f:
            f.write('{"subject": "x"}\n')
        r = self.docs_cmd("--check")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("default.jsonl:1: no field 'kernel_key'", r.stderr)


if __name__ == "__main__":
    unittest.main()
