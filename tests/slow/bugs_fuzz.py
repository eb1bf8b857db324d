#!/usr/bin/python3
"""Slow test (meson suite 'slow', not in `faultline check`): recall from no
scenario, `faultline bugs --fuzz` (docs/bugs.md), for real on one bug.

  bugs_fuzz.py [--budget 5m] [--seeds 1..1] [NAME]

Builds (or takes from the kernel cache) the bug's buggy and fixed kernels,
runs a fuzz campaign of --budget per search seed on each with the fuzzer's
defaults, and checks what the command leaves: a record per side and seed
in the set, of this QEMU build, each pointing at a campaign directory with
its fuzz.json and, for every failure, a minimized program that parses;
the table renders a row for the bug; a second invocation runs nothing (the
campaigns are recorded); `--fuzz-verdict` records a verdict on a buggy
failure when there is one.  Whether the fuzzer finds the bug is the
measurement, not this test's verdict.  The campaigns and their set stay in
build/bugs-fuzz (not the repository's results/), so an interrupted run
resumes.  Exit 0 pass, 1 fail, 2 setup error.
"""

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import FAULTLINE, TOP, exit_with, verdict  # noqa: E402

from faultline.bugs import fuzz_table, recall, recall_fuzz  # noqa: E402
from faultline.prog.lang import read  # noqa: E402
from faultline.results import records  # noqa: E402

OUT = os.path.join(TOP, "build", "bugs-fuzz")
RESULTS = os.path.join(OUT, "recall-fuzz.jsonl")


def bugs(*args):
    cmd = [FAULTLINE, "bugs", *args]
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, stderr=subprocess.PIPE, text=True)


def check_records(recs, name, seeds, problems):
    want = sorted((side, s) for side in fuzz_table.SIDES for s in seeds)
    got = sorted((r["side"], r["seed"]) for r in recs if r["subject"] == name)
    if got != want:
        problems.append(f"records of (side, seed) {got}, expected {want}")
    for r in recs:
        where = f"{r['side']} seed {r['seed']}"
        if not os.path.exists(os.path.join(TOP, r["fuzz_out"], "fuzz.json")):
            problems.append(f"{where}: no fuzz.json in {r['fuzz_out']}")
        if r["programs"] < 1:
            problems.append(f"{where}: the campaign ran no program")
        for f in r["failures"]:
            path = f["minimized"] and os.path.join(TOP, f["minimized"])
            try:
                read(path)
            except Exception as e:  # noqa: BLE001 - any unreadable program is the problem
                problems.append(f"{where}: failure {f['signature']!r}: its program {path} "
                                f"does not read back ({e})")
        want_verdict = r["side"] == "buggy" and bool(r["failures"])
        if want_verdict != (r["bug_failure"] is not None):
            problems.append(f"{where}: bug_failure {r['bug_failure']!r} (a verdict belongs to "
                            "a buggy campaign that failed)")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--budget", default="5m")
    p.add_argument("--seeds", default="1..1")
    p.add_argument("name", nargs="?", default="swap-write-error-drops-page")
    a = p.parse_args()
    common = [a.name, "--fuzz", "--budget", a.budget, "--seeds", a.seeds, "--out", OUT,
              "--results", RESULTS]
    first = bugs(*common)
    sys.stderr.write(first.stderr)
    if first.returncode == 2:
        return 2
    problems = []
    recs = records.read_set(RESULTS, fuzz_table.RECORD_FIELDS)
    seeds = recall.parse_seeds(a.seeds)
    check_records(recs, a.name, seeds, problems)
    table = fuzz_table.render(recs, records.display(RESULTS))
    print(table)
    if f"| {a.name} |" not in table:
        problems.append("the table has no row for the bug")
    again = bugs(*common)
    ran = [ln for ln in again.stderr.splitlines() if ": fuzz " in ln]
    if again.returncode != first.returncode or ran or \
            again.stderr.count("recorded already") != len(seeds) * len(fuzz_table.SIDES):
        problems.append(f"the second invocation (exit {again.returncode}, the first's "
                        f"{first.returncode}) did not take every campaign from the set:\n"
                        f"{again.stderr}")
    if records.read_set(RESULTS, fuzz_table.RECORD_FIELDS) != recs:
        problems.append("the second invocation changed the records")
    failing = [r for r in recs if r["side"] == "buggy" and r["failures"]]
    if failing:
        r = failing[0]
        v = bugs("--fuzz-verdict", a.name, str(r["seed"]), "no",
                 "bugs_fuzz.py's check of the verdict command, not a triage",
                 "--results", RESULTS)
        after = recall_fuzz.find(records.read_set(RESULTS, fuzz_table.RECORD_FIELDS),
                                 a.name, "buggy", r["seed"])
        if v.returncode or after["bug_failure"] != "no":
            problems.append(f"--fuzz-verdict: exit {v.returncode}, bug_failure "
                            f"{after['bug_failure']!r}: {v.stderr}")
    return verdict(f"bugs --fuzz {a.name} ({len(recs)} campaigns)", problems)


if __name__ == "__main__":
    exit_with("bugs-fuzz", main)
