#!/usr/bin/python3
"""Slow test (meson suite 'slow', not in `faultline check`): the real-bug
corpus with `faultline bugs` (docs/bugs.md).

  bugs_corpus.py [--seeds N] [--backend lava] [NAME ...]

Builds each bug's fixed and buggy kernel from Debian's source, runs its
scenarios on both for the seeds --deterministic where the scenario allows
it, with the no-faults side, repro and minimize, and checks the issue's
acceptance on the table it writes: every fixed kernel passes every seed;
every buggy kernel fails at least one seed (a bug.toml with
recall_expectation = "low: ..." is reported, not required); a
deterministic first failure reproduces.  Hours on 2 cores: the results
stay in build/bugs-corpus (the records in its recall.jsonl, not in the
repository's results/), so an interrupted run resumes.  --backend lava
runs every seed through lava-run (build/bugs-corpus-lava) and also checks
that `faultline lava --bug` writes a job per (bug, kernel, scenario, seed).
Exit 0 pass, 1 fail, 2 setup error.
"""

import argparse
import json
import os
import glob
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import FAULTLINE, TOP, exit_with, verdict  # noqa: E402

from faultline.bugs import corpus

OUT = os.path.join(TOP, "build", "bugs-corpus")


def lava_checks(out, rows, names):
    """Every run went through lava-run; `faultline lava --bug` writes the
    same campaign as jobs."""
    problems = []
    for run_json in glob.glob(os.path.join(out, "*", "*", "*", "seed*", "run.json")):
        with open(run_json) as f:
            if json.load(f).get("backend") != "lava":
                problems.append(f"{run_json}: not a lava run")
    with tempfile.TemporaryDirectory() as jobs:
        r = subprocess.run([FAULTLINE, "lava", *sum((["--bug", n] for n in names), []),
                            "--seeds", "1..1", "--out", jobs], capture_output=True, text=True)
        files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(jobs, "jobs", "*")))
        want = sorted(f"{row['scenario']}-seed1-{row['bug']}-{side}.yaml"
                      for row in rows for side in ("fixed", "buggy"))
        if r.returncode or files != want:
            problems.append(f"faultline lava --bug: exit {r.returncode}, jobs {files}, "
                            f"expected {want}")
    return problems


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", default="10")
    p.add_argument("--backend", default="qemu", choices=["qemu", "lava"])
    p.add_argument("names", nargs="*")
    a = p.parse_args()
    out = OUT + ("-lava" if a.backend == "lava" else "")
    cmd = [FAULTLINE, "bugs", *a.names, "--seeds", a.seeds, "--deterministic",
           "--no-faults", "--out", out, "--backend", a.backend,
           "--results", os.path.join(out, "recall.jsonl")]
    print("+", " ".join(cmd), flush=True)
    st = subprocess.run(cmd).returncode
    if st == 2:
        return 2
    with open(os.path.join(out, "corpus.json")) as f:
        rows = json.load(f)["rows"]
    problems = []
    if a.backend == "lava":
        problems += lava_checks(out, rows, a.names)
    for row in rows:
        low = corpus.load(row["bug"]).data.get("recall_expectation", "").startswith("low")
        where = f"{row['bug']} ({row['scenario']})"
        if row["fixed"]["failed"]:
            problems.append(f"{where}: fixed kernel failed seeds {row['fixed']['failed_seeds']}"
                            f" ({'; '.join(row['fixed']['reasons'])})")
        if not row["buggy"]["failed"] and not low:
            problems.append(f"{where}: buggy kernel passed all {row['buggy']['n']} seeds")
        first = row.get("first_failure") or {}
        if row["deterministic"] and first and not first.get("reproducible"):
            problems.append(f"{where}: deterministic first failure (seed {first.get('seed')}, "
                            f"{first.get('signature')}) did not reproduce")
    return verdict(f"bugs corpus ({len(rows)} rows)", problems)


if __name__ == "__main__":
    exit_with("bugs-corpus", main)
