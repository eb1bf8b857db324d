#!/usr/bin/python3
"""One vm test (meson suite 'vm'): run a scenario through the launcher
package and check what a user would check.

  vm_test.py SCENARIO                      the run passes
  vm_test.py SCENARIO --deterministic --repro [--cpus N]
                                           then `repro` it: same outcome,
                                           fault digest and KTAP, and a
                                           byte-identical console and fault log
  vm_test.py SCENARIO --sweep A..B         one directory per seed, a summary,
                                           a distinct digest per seed
  vm_test.py SCENARIO --backend lava      the run passes through lava-run, with
                                           the same per-case verdicts as the qemu
                                           backend's run (and LAVA's own results
                                           agree with its KTAP)
  vm_test.py --matrix A,B --sweep 1..2     `faultline matrix`: table, JUnit, KCIDB
  vm_test.py SCENARIO --mutate lie|corrupt the mutation self-test: the run FAILS
                                           (exit 1) on a data-verification KTAP
                                           test, with data_errors > 0 and the
                                           mutation rule's hits > 0
  vm_test.py SCENARIO [--backend B] --expect-status N --expect-report TEXT ...
                                           the launcher's own verdicts
                                           (crash, hang)

FAULTLINE_KERNEL / FAULTLINE_MODULES (set by `faultline check --kernel`)
select the kernel.  Exit 0 pass, 1 fail, 2 setup error.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import (FAULTLINE, OUT, exit_with, kernel_args, read_bytes,  # noqa: E402
                    run_one, run_options, timeline_differences, verdict)

from faultline.errors import EXIT_FAIL, EXIT_PASS
from faultline.judge import mutate
from faultline.run import inputs, runner


def check_sweep(seeds, status, results):
    """A seed sweep makes one directory per seed and a summary of all."""
    groups = sorted({os.path.dirname(d) for _, d in results})
    problems = []
    if len(groups) != 1:
        return [f"expected one sweep directory, got {groups}"]
    g = groups[0]
    runs = sorted(d for d in os.listdir(g) if os.path.isdir(os.path.join(g, d)))
    with open(os.path.join(g, "summary.json")) as f:
        summary = json.load(f)
    if len(runs) != len(seeds) or len(summary) != len(seeds):
        problems.append(f"{len(runs)} run dirs, {len(summary)} summary rows for "
                        f"{len(seeds)} seeds")
    if sorted(x["seed"] for x in summary) != seeds:
        problems.append(f"summary seeds {[x['seed'] for x in summary]}")
    digests = [x["digest"] for x in summary]
    if None in digests or len(set(digests)) != len(digests):
        problems.append(f"expected a distinct fault digest per seed: {digests}")
    for d in runs:
        for f in ("report.json", "run.json", "cmdline", "ktap.log", "console.log",
                  "junit.xml"):
            if not os.path.exists(os.path.join(g, d, f)):
                problems.append(f"{d} lacks {f}")
    if status != EXIT_PASS:
        problems.append(f"sweep exit status {status}")
    return problems


def check_expected(rundir, status, want_status, want_texts, want_ktap=()):
    """The run must end with exactly this status, its report say why, and
    its KTAP log show how far the guest got (a crash at boot is not the
    crash a test provoked)."""
    with open(os.path.join(rundir, "report.json")) as f:
        text = f.read()
    ktap = (read_bytes(rundir, "ktap.log") or b"").decode(errors="replace")
    problems = [f"ktap.log lacks {t!r}" for t in want_ktap if t not in ktap]
    if status != want_status:
        problems.append(f"status {status}, expected {want_status}")
    for t in want_texts:
        if t not in text:
            problems.append(f"report.json lacks {t!r}")
    return problems


def case_verdicts(results):
    """[(suite, kind)] of a run's KTAP results, in order (names carry counts
    that differ from run to run)."""
    return [(r["suite"], r["kind"]) for r in results]


def check_mutation(kind, status, r):
    """A mutated run must fail, and fail on its data check."""
    problems = []
    if status != EXIT_FAIL:
        problems.append(f"exit status {status}, expected {EXIT_FAIL} (FAIL)")
    failed = [x["name"] for x in r.results if x["kind"] == "fail"]
    data = [n for n in failed if mutate.DATA_CHECK.search(n)]
    if not data:
        problems.append(f"no data-verification test failed (failed: {failed})")
    if r.diag.get("data_errors", 0) <= 0:
        problems.append(f"data_errors {r.diag.get('data_errors')}")
    m = r.mutation or {}
    if m.get("action") != kind or not m.get("hits"):
        problems.append(f"mutation rule did not fire: {m}")
    if not m.get("caught"):
        problems.append(f"report: {m.get('verdict')}")
    if not problems:
        print(f"mutation {kind}: caught by {data[0]!r}, data_errors "
              f"{r.diag['data_errors']}, {m['hits']} writes mutated")
    return problems


def check_lava(rundir, status, qemu_results, lava_results):
    problems = []
    if status != EXIT_PASS:
        problems.append(f"lava run status {status}")
    if case_verdicts(qemu_results) != case_verdicts(lava_results):
        problems.append(f"per-case verdicts differ: qemu {case_verdicts(qemu_results)}, "
                        f"lava {case_verdicts(lava_results)}")
    with open(os.path.join(rundir, "lava-results.json")) as f:
        doc = json.load(f)
    if doc["job"]["result"] != "pass":
        problems.append(f"LAVA job result {doc['job']}")
    problems += doc["mismatches"]
    exit_case = [c for c in doc["cases"] if c["name"] == "FAULTLINE-EXIT"]
    if [c["result"] for c in exit_case] != ["pass"]:
        problems.append(f"FAULTLINE-EXIT case {exit_case}")
    if len(doc["cases"]) != len(lava_results) + 1:
        problems.append(f"LAVA has {len(doc['cases'])} cases for {len(lava_results)} KTAP "
                        "results + FAULTLINE-EXIT")
    return problems


def check_matrix(scenarios, seeds):
    """`faultline matrix` end to end: exit 0, one run per cell, the table,
    JUnit and KCIDB for all of them."""
    cmd = [FAULTLINE, "matrix", "--scenarios", scenarios, "--seeds", seeds, "--out", OUT]
    res = subprocess.run(cmd + kernel_args(), stdout=subprocess.PIPE, text=True)
    print(res.stdout, end="")
    problems = [] if res.returncode == 0 else [f"matrix exit {res.returncode}"]
    group = next((ln.split()[1] for ln in res.stdout.splitlines()
                  if ln.startswith("results ")), None)
    if not group:
        return problems + ["no results line"]
    names, nseeds = scenarios.split(","), len(inputs.parse_seeds(seeds))
    progress = [ln for ln in res.stdout.splitlines() if re.match(r"\[\d+/\d+\] ", ln)]
    if len(progress) != len(names) * nseeds:
        problems.append(f"{len(progress)} progress lines")
    with open(os.path.join(group, "matrix.json")) as f:
        rows = json.load(f)["rows"]
    if sorted(r["scenario"] for r in rows) != sorted(names) or \
            any(r["passed"] != nseeds for r in rows):
        problems.append(f"matrix rows {rows}")
    suites = ET.parse(os.path.join(group, "junit.xml")).getroot().findall("testsuite")
    if len(suites) != len(names) * nseeds:
        problems.append(f"{len(suites)} JUnit suites")
    with open(os.path.join(group, "kcidb.json")) as f:
        doc = json.load(f)
    run_tests = [t for t in doc["tests"] if t["path"].count(".") == 1]
    if doc["version"]["major"] != 5 or len(run_tests) != len(names) * nseeds or \
            any(t["status"] != "PASS" for t in run_tests):
        problems.append(f"kcidb run tests {[(t['path'], t['status']) for t in run_tests]}")
    return problems


def ktap_results(rundir):
    """The KTAP of a run without its diagnostics: plan, results, bail-out."""
    text = read_bytes(rundir, "ktap.log").decode(errors="replace")
    return [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("scenario", nargs="?")
    p.add_argument("--matrix", metavar="A,B", help="run `faultline matrix` over these")
    p.add_argument("--deterministic", action="store_true")
    p.add_argument("--cpus", type=int)
    p.add_argument("--repro", action="store_true",
                   help="then repro the run: outcome, digest and KTAP must match")
    p.add_argument("--sweep", metavar="A..B", help="seed sweep: one dir per seed + summary")
    p.add_argument("--backend", default="qemu", help="machine backend (default qemu)")
    p.add_argument("--mutate", choices=mutate.KINDS,
                   help="mutation self-test: the run must fail on its data check")
    p.add_argument("--expect-status", type=int)
    p.add_argument("--expect-report", action="append", default=[],
                   help="text report.json must contain")
    p.add_argument("--expect-ktap", action="append", default=[],
                   help="text ktap.log must contain")
    args = p.parse_args()
    if args.matrix:
        return verdict("matrix self-test", check_matrix(args.matrix, args.sweep or "1..2"))
    if args.backend == "lava":
        _, qemu, _ = run_one(args.scenario, run_options())
        status, lava, lava_dir = run_one(args.scenario, run_options(backend="lava"))
        problems = [] if qemu.status == EXIT_PASS else ["qemu run did not pass"]
        problems += check_lava(lava_dir, status, qemu.results, lava.results)
        return verdict("lava backend self-test", problems)
    opts = run_options(deterministic=args.deterministic, cpus=args.cpus,
                       backend=args.backend, mutate=args.mutate)
    status, results = runner.run_plan([args.scenario], opts, seeds=args.sweep,
                                      keep_going=True, out=OUT)
    rundir = results[0][1]
    if args.sweep:
        return verdict("sweep self-test",
                       check_sweep(inputs.parse_seeds(args.sweep), status, results))
    if args.mutate:
        return verdict("mutation self-test", check_mutation(args.mutate, status, results[0][0]))
    if args.expect_status is not None:
        return verdict("launcher self-test",
                       check_expected(rundir, status, args.expect_status, args.expect_report,
                                      args.expect_ktap))
    if args.repro:
        rc, new = runner.repro(rundir, OUT)
        problems = []
        if args.deterministic:
            # Beyond what `repro` compares: the whole fault log and console.
            problems, notes = timeline_differences(rundir, new)
            if rc != EXIT_PASS and notes and not problems and \
                    ktap_results(rundir) == ktap_results(new) and \
                    runner.load_run(rundir)[1].digest == runner.load_run(new)[1].digest:
                # The known leak (docs/launcher.md, "Exact reproduction"): a
                # drift of virtual time, seen about once in eight CI runs of
                # this test on a loaded host, can move a vmstat count the
                # KTAP reports; every fault and every test result held.
                notes.append("repro said NOT reproduced on KTAP diagnostics alone")
                rc = EXIT_PASS
            print("deterministic self-test: "
                  + ("; ".join(problems + notes) or "console and fault log identical"))
        ok = status == EXIT_PASS and rc == EXIT_PASS and not problems
        return EXIT_PASS if ok else EXIT_FAIL
    return EXIT_PASS if status == EXIT_PASS else EXIT_FAIL


if __name__ == "__main__":
    exit_with("vm test", main)
