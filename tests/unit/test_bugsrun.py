"""`faultline bugs` without a VM: bad input is one line (exit 2) before any
kernel is built, --list lists the corpus, finished runs are reused on a
resumed campaign (and stopped or stale ones, or those of another QEMU or
guest build, are not), and the table's cells come from the runs' records
(tests/unit/test_results.py: the records and docs/ from them)."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline import scenario as flscenario
from faultline.bugs import corpus, recall, recall_table
from faultline.build.builds import Builds
from faultline.errors import EXIT_CRASH, EXIT_FAIL, EXIT_PASS, SetupError
from faultline.host.versions import sha256
from faultline.judge.report import Report
from faultline.lab import lavajobs
from faultline.results import records
from faultline.run.options import RunOptions

FAULTLINE = os.path.join(TOP, "scripts", "faultline")


def cli(*args, env=None):
    return subprocess.run([FAULTLINE, "bugs", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def report(seed, status, elapsed, reason="", outcome=None, diag=None):
    """A Report; a failure with no reason given lost data (data_errors 3)."""
    if diag is None:
        diag = {"data_errors": 3} if status == EXIT_FAIL and not reason else {}
    return Report(scenario="s", seed=seed, status=status,
                  outcome=outcome or {0: "pass", 1: "fail", 2: "setup-error", 3: "crash"}[status],
                  reason=reason or ("all passed" if status == 0 else "data_errors 3 > 0"),
                  elapsed_s=elapsed, diag=diag)


class BadInputTest(unittest.TestCase):
    """One line, exit 2, and no kernel build started: the kernel cache's
    logs must not change (a build writes its patch log first)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        # A private HOME: any kernel build would create its cache there.
        self.env = dict(os.environ, HOME=self.tmp, XDG_CACHE_HOME=os.path.join(self.tmp, "c"))
        self.env.pop("FAULTLINE_CACHE", None)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def refused(self, *args, want):
        r = cli(*args, "--out", os.path.join(self.tmp, "out"), env=self.env)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn(want, r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, ".cache")))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "c")))

    def test_unknown_bug(self):
        self.refused("rotational-reclaim-work", "no-such-bug", want="no corpus bug 'no-such-bug'")

    def test_bad_seeds(self):
        self.refused("--seeds", "zero", want="expected N (seeds 1..N) or A..B")
        self.refused("--seeds", "0", want="N must be 1 to 1000")
        self.refused("--seeds", "5..2", want="B must be >= A")

    def test_bad_budget(self):
        self.refused("--budget", "0", want="--budget must be >= 1")

    def test_bad_backend_options(self):
        self.refused("--connect", "qemu:///system",
                     want="--connect is an option of --backend libvirt")
        self.refused("--backend", "lava", "--connect", "qemu:///system",
                     want="--connect is an option of --backend libvirt")

    def test_lava_jobs_of_bugs_bad_input(self):
        """`faultline lava --bug`: checked before any kernel is built."""
        for args, want in ((["--bug", "no-such-bug"], "no corpus bug 'no-such-bug'"),
                           (["smoke", "--bug", "rotational-reclaim-work"],
                            "--bug brings its scenarios and kernels"),
                           (["--bug", "rotational-reclaim-work", "--seed", "1", "--seeds",
                             "1..2"], "--seed and --seeds exclude each other"),
                           ([], "lava needs a SCENARIO (or --bug NAME)")):
            r = subprocess.run([sys.executable, "-m", "faultline", "lava", *args, "--out",
                                os.path.join(self.tmp, "jobs")], cwd=os.path.join(TOP, "python"),
                               env=self.env, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn(want, r.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "c")))

    def test_lava_jobs_of_bugs_copy_each_kernel_once_per_mode(self):
        """`faultline lava --bug`: one write_jobs per (kernel, mode) with
        all the bug's scenarios of that mode; --deterministic only where a
        scenario allows it (virtio-scsi does not)."""
        from unittest import mock
        bug = dataclasses.replace(corpus.load("swap-write-error-drops-page"), scenarios=[
            "write-error-redirty-sync", "rotational-swap", "write-error-redirty-nvme"])
        calls = []

        def fake_write_jobs(scs, kernels, seeds, out, base_url, det, quiet, labels):
            calls.append((labels[0], kernels[0][0], det, [sc.name for sc in scs]))
            return [f"{labels[0]}-{det}-{len(scs)}"]
        with mock.patch.object(recall, "build_kernel",
                               lambda b, buggy: ("/k/" + ("bug" if buggy else "fixed"), None)), \
                mock.patch.object(lavajobs, "write_jobs", fake_write_jobs), \
                mock.patch.object(lavajobs.runner, "load_scenario",
                                  lambda n, opts: flscenario.load(n)):
            jobs = lavajobs.write_bug_jobs([bug], [1, 2], self.tmp, deterministic=True)
        name = bug.name
        self.assertEqual(calls, [
            (f"{name}-fixed", "/k/fixed", True, ["write-error-redirty-sync",
                                                 "write-error-redirty-nvme"]),
            (f"{name}-fixed", "/k/fixed", False, ["rotational-swap"]),
            (f"{name}-buggy", "/k/bug", True, ["write-error-redirty-sync",
                                               "write-error-redirty-nvme"]),
            (f"{name}-buggy", "/k/bug", False, ["rotational-swap"])])
        self.assertEqual(len(jobs), 4)

    def test_list(self):
        r = cli("--list", env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        names = [ln.split()[0] for ln in r.stdout.splitlines()]
        self.assertEqual(names, corpus.list_all())
        self.assertIn("+KASAN", r.stdout)

    def test_seeds(self):
        self.assertEqual(recall.parse_seeds("3"), [1, 2, 3])
        self.assertEqual(recall.parse_seeds("4..6"), [4, 5, 6])
        with self.assertRaises(SetupError):
            recall.parse_seeds("1..x")


class ResumeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.image = os.path.join(self.tmp, "bzImage")
        with open(self.image, "wb") as f:
            f.write(b"kernel one")
        self.run = os.path.join(self.tmp, "seed1")
        os.makedirs(self.run)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def write(self, status, image_sha=None):
        report(1, status, 30.0).save(self.run) if status <= 3 else Report(
            scenario="s", seed=1, status=status, outcome="aborted", reason="SIGTERM").save(
            self.run)
        with open(os.path.join(self.run, "run.json"), "w") as f:
            json.dump({"kernel_sha256": image_sha or sha256(self.image),
                       "qemu_build": "q1", "guest_build": "g1-tools-t1"}, f)

    def test_finished_run_is_reused(self):
        self.write(EXIT_FAIL)
        r = recall.reusable(self.run, self.image)
        self.assertEqual((r.status, r.seed), (EXIT_FAIL, 1))
        # run_seed does not boot anything for it (same scenario text).
        shutil.copy(flscenario.find("smoke"), os.path.join(self.run, "scenario.toml"))
        got, reused = recall.run_seed("smoke", 1, "buggy", (self.image, None), RunOptions(),
                                       self.run, Builds("/c/qemu/q1", "/c/guest/g1"), None)
        self.assertTrue(reused)
        self.assertEqual(got.status, EXIT_FAIL)

    def test_stopped_run_is_not(self):
        self.write(143)
        self.assertIsNone(recall.reusable(self.run, self.image))

    def test_run_on_another_backend_is_not(self):
        """A lab's campaign (--backend lava) runs its own seeds."""
        self.write(EXIT_PASS)
        self.assertIsNotNone(recall.reusable(self.run, self.image))
        self.assertIsNone(recall.reusable(self.run, self.image, backend="lava"))

    def test_run_of_another_build_is_not(self):
        self.write(EXIT_PASS, image_sha="0" * 64)
        self.assertIsNone(recall.reusable(self.run, self.image))

    def test_run_of_another_qemu_or_guest_build_is_not(self):
        """A resumed campaign reruns what an older QEMU or guest image ran:
        its numbers would belong to another results set."""
        self.write(EXIT_PASS)
        same = Builds("/c/qemu/q1", "/c/guest/g1")     # the tools suffix is the scenario's
        self.assertIsNotNone(recall.reusable(self.run, self.image, builds=same))
        self.assertIsNone(recall.reusable(self.run, self.image,
                                          builds=Builds("/c/qemu/q2", "/c/guest/g1")))
        self.assertIsNone(recall.reusable(self.run, self.image,
                                          builds=Builds("/c/qemu/q1", "/c/guest/g2")))

    def test_run_of_another_scenario_text_is_not(self):
        self.write(EXIT_PASS)
        sc = os.path.join(self.tmp, "s.toml")
        with open(sc, "w") as f:
            f.write("description = 'now'\n")
        with open(os.path.join(self.run, "scenario.toml"), "w") as f:
            f.write("description = 'then'\n")
        self.assertIsNone(recall.reusable(self.run, self.image, sc))
        with open(os.path.join(self.run, "scenario.toml"), "w") as f:
            f.write("description = 'now'\n")
        self.assertIsNotNone(recall.reusable(self.run, self.image, sc))

    def test_unfinished_run_is_not(self):
        self.assertIsNone(recall.reusable(self.run, self.image))

    def test_first_failure_is_reused(self):
        with open(os.path.join(self.tmp, "first-failure.json"), "w") as f:
            json.dump({"rundir": self.run, "reproducible": True, "minimal_faults": 2}, f)
        got = recall.first_failure(self.run, self.tmp, 10, True)
        self.assertEqual(got["minimal_faults"], 2)


class TableTest(unittest.TestCase):
    """Rows from records made as the campaign makes them (recall.record's
    fields on records.record_of_run)."""
    META = {"kernel": None, "kernel_sha256": "ab" * 32, "qemu_build": "q1",
            "guest_build": "g1", "versions": {"KERNEL_ABI": "6.12.118+deb12-amd64"}}

    def setUp(self):
        self.bug = corpus.load("rotational-reclaim-work")

    def rec(self, side, r, first=None):
        rec = records.record_of_run("/no/run/dir", self.bug.name, self.META, r,
                                    scenario="rotational-swap", side=side,
                                    base="debian:6.12",
                                    broken_guarantee=recall.judge.broken_guarantee(r))
        return recall.with_repro(rec, first) if first else rec

    def row(self, buggy, fixed, nofaults=None, first=None):
        recs = [self.rec("buggy", r, first if r.status and first else None) for r in buggy]
        recs += [self.rec("fixed", r) for r in fixed]
        recs += [self.rec("nofaults", r) for r in nofaults or ()]
        for x in recs:
            records.check_record(x, recall_table.RECORD_FIELDS)
        [row] = recall_table.rows(recs)
        return row

    def test_counts_and_time_to_first_failure(self):
        row = self.row([report(1, EXIT_PASS, 40), report(2, EXIT_PASS, 41.5),
                        report(3, EXIT_CRASH, 12, "Oops: general protection fault")],
                       [report(s, EXIT_PASS, 40) for s in (1, 2, 3)],
                       [report(1, EXIT_PASS, 40), report(2, EXIT_FAIL, 30),
                        report(3, EXIT_PASS, 40)],
                       {"rundir": "/r/b2", "reproducible": True, "minimal_faults": None,
                        "minimize": "not a --deterministic run"})
        self.assertEqual(row["buggy"]["failed_seeds"], [3])
        self.assertEqual(row["time_to_first_failure_s"], 93.5)     # 40 + 41.5 + 12
        self.assertEqual(row["first_failure"]["verdict"], "crash")
        self.assertEqual(recall_table.cells(row),
                         ["rotational-reclaim-work", "debian:6.12", "rotational-swap", "1/3",
                          "94 s", "3/3", "1/3", "yes", "not a --deterministic run"])
        json.dumps(row)

    def test_no_failure_and_sides_not_run(self):
        row = self.row([report(s, EXIT_PASS, 40) for s in (1, 2)],
                       [report(1, EXIT_PASS, 40), report(2, EXIT_FAIL, 40)])
        self.assertIsNone(row["time_to_first_failure_s"])
        self.assertEqual(recall_table.cells(row)[3:],
                         ["0/2", "-", "1/2", "not run", "-", "-"])
        self.assertEqual(row["fixed"]["failed_seeds"], [2])

    def test_a_workload_miss_is_not_a_catch(self):
        """A buggy run that failed only its workload check (less writeback
        than the scenario needs) says nothing about the kernel: it is not
        counted as caught, not timed as the first failure, not repro'd;
        the cell shows it apart.  A fixed run failing the same way still
        counts against the fixed kernel."""
        miss = report(1, EXIT_FAIL, 200, "expectation failed: vmstat zswpwb 58 < 100")
        lost = report(2, EXIT_FAIL, 100, "guest tests failed (exit 1, 1 not ok)",
                      diag={"data_errors": 2, "lost_increments": 29})
        row = self.row([miss, lost],
                       [report(1, EXIT_PASS, 20), dataclasses.replace(miss, seed=2)],
                       [miss, report(2, EXIT_PASS, 20)])
        self.assertEqual(row["buggy"]["failed_seeds"], [2])
        self.assertEqual(row["buggy"]["workload_misses"],
                         [{"seed": 1, "reason": miss.reason}])
        self.assertEqual(row["time_to_first_failure_s"], 300)
        self.assertEqual(row["first_failure"]["seed"], 2)
        self.assertEqual(row["first_failure"]["broken_guarantee"],
                         "data loss (data_errors 2, lost_increments 29)")
        self.assertEqual(row["nofaults"]["failed"], 0)
        self.assertEqual(row["fixed"]["failed_seeds"], [2])
        # The no-faults run that failed only its workload is shown apart too.
        self.assertEqual(recall_table.cells(row)[3:7],
                         ["1/2 (+1 workload)", "300 s", "1/2", "0/2 (+1 workload)"])

    def test_broken_guarantee(self):
        bg = recall.judge.broken_guarantee
        self.assertIsNone(bg(report(1, EXIT_PASS, 1)))
        self.assertIsNone(bg(report(1, 2, 1, "QEMU failed: no such file")))
        self.assertIsNone(bg(report(1, EXIT_FAIL, 1, "interrupted", outcome="aborted")))
        self.assertIsNone(bg(report(1, EXIT_FAIL, 1, "expectation failed: rule slow hit 3 < 10")))
        self.assertIsNone(bg(report(1, EXIT_FAIL, 1, "guest tests failed (exit 1, 1 not ok)",
                                    diag={"data_errors": 0})))
        self.assertEqual(bg(report(1, EXIT_CRASH, 1, "kernel crash: Oops")), "crash")
        self.assertEqual(bg(report(1, EXIT_CRASH, 1, "hang: no result", outcome="hang")), "hang")
        self.assertEqual(bg(report(1, EXIT_FAIL, 1, "kernel splat: WARNING: at mm/x.c")), "splat")
        self.assertEqual(bg(report(1, EXIT_FAIL, 1, "guest tests failed",
                                   diag={"sigbus_pages_parent": 4})),
                         "data loss (sigbus_pages_parent 4)")
        self.assertEqual(bg(report(1, EXIT_FAIL, 1, "guest tests failed",
                                   diag={"lru_left_pages": 12})), "leak (lru_left_pages 12)")
        # a swapoff the guest had to kill is a hang, whatever else it saw
        self.assertEqual(bg(report(1, EXIT_FAIL, 1, "guest tests failed",
                                   diag={"swapoff_stuck": 1, "data_errors": 0})),
                         "hang (swapoff_stuck 1)")
        self.assertIsNone(bg(report(1, EXIT_FAIL, 1, "guest tests failed",
                                    diag={"swapoff_stuck": 0, "sigbus_pages_swapoff": 40})))

    def test_markdown_and_caption(self):
        det = [dataclasses.replace(report(1, EXIT_FAIL, 20), deterministic=True, digest="d" * 16)]
        row = self.row(det, [dataclasses.replace(report(1, EXIT_PASS, 20), deterministic=True)],
                       first={"reproducible": False, "minimal_faults": 3})
        lines = recall_table.markdown([row]).splitlines()
        self.assertEqual(lines[0], "| " + " | ".join(recall_table.COLUMNS) + " |")
        self.assertEqual(lines[2], "| rotational-reclaim-work | debian:6.12 | rotational-swap "
                         "| 1/1 | 20 s | 1/1 | not run | no | 3 |")
        self.assertEqual(row["first_failure"]["digest"], "d" * 16)
        recs = [self.rec("fixed", report(2, EXIT_PASS, 20))]
        self.assertEqual(recall_table.caption(recs),
                         "1 run, seeds 2..2, not --deterministic; QEMU build q1; kernels "
                         "(cache key, guest build): debian:6.12.118+deb12-amd64 "
                         "(debian:6.12.118+deb12-amd64, g1).")

    def test_kernel_names(self):
        self.assertEqual(recall.kernel_names(self.bug), ("debian-6.12", "bug-rotational-reclaim-work"))
        self.assertEqual(recall.kernel_names(corpus.load("free-swap-swapoff-race")),
                         ("debian-6.12-kasan", "bug-free-swap-swapoff-race"))


if __name__ == "__main__":
    unittest.main()
