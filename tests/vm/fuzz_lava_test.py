#!/usr/bin/python3
"""vm test of `faultline fuzz --lava` and `fuzz merge` (meson suite 'vm'):
two shards of a few programs each, with the executor's drop-write plant
(`progexec run --plant`), are written as LAVA jobs, run by this host's real
`lava-run` (`fuzz lava-run`, both shards at once), and merged.  The merged
campaign must hold what the jobs did: every program judged (none `not
run`), LAVA's own per-program case agreeing with the merge's verdict,
corpus programs from both shards with nonzero features, the planted
`content` failure in one failure directory with a hit from each shard, and
`fuzz --resume` must go on with it.

FAULTLINE_KERNEL / FAULTLINE_MODULES select the kernel.  Exit 0 pass,
1 fail, 2 setup error.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import FAULTLINE, OUT, kernel_args  # noqa: E402

from faultline.fuzz.corpus import Corpus  # noqa: E402
from faultline.run.lava_watch import parse_lava_log  # noqa: E402

SHARDS = 2
PROGRAMS = 2
# The shards' seeds 1 and 2 draw, on Debian's kernel, in each shard one
# program that reads back what it wrote (the plant fails it) and one that
# does not (s0p0001 passes, s0p0002 fails; s1p0001 fails, s1p0002 passes).
SEED = 1
STEP_TIMEOUT_S = 900


def load(path):
    with open(path) as f:
        return json.load(f)


def run(argv, what, timings, timeout=STEP_TIMEOUT_S):
    print("$ " + " ".join(argv), flush=True)
    t0 = time.monotonic()
    res = subprocess.run(argv, timeout=timeout)
    timings[what] = time.monotonic() - t0
    return res.returncode


def lava_cases(shard):
    """{program: LAVA's `result` case (pass/fail), or None}."""
    out = {}
    for p in load(os.path.join(shard, "shard.json"))["programs"]:
        try:
            with open(os.path.join(shard, p["log"])) as f:
                _, results, _ = parse_lava_log(f.read())
        except OSError:
            results = []
        cases = [r["result"] for r in results if r.get("definition") == "faultline-program"]
        out[p["name"]] = cases[0] if cases else None
    return out


def check(base, shards, merged, problems):
    st = load(os.path.join(merged, "fuzz.json"))
    snap = st["stats"][-1]
    print(json.dumps(snap))
    if st["identity"].get("plant") != "drop-write":
        problems.append(f"merged identity {st['identity']}: no plant")
    if snap["programs"] != SHARDS * PROGRAMS:
        problems.append(f"{snap['programs']} programs judged of {SHARDS * PROGRAMS} (some not "
                        "run or lost)")
    cases = {}
    for s in shards:
        cases.update(lava_cases(s))
    print("LAVA's cases:", cases)
    fails = sum(1 for v in cases.values() if v == "fail")
    if None in cases.values():
        problems.append(f"a job without LAVA's result case: {cases}")
    if fails != snap["failed"] or SHARDS * PROGRAMS - fails != snap["passed"]:
        problems.append(f"LAVA counts {fails} failing programs, merge {snap['failed']} failed "
                        f"and {snap['passed']} passed")
    corpus = Corpus(os.path.join(merged, "corpus")).load()
    from_shard = {e.origin.split(" (")[0] for e in corpus.entries}
    print("corpus:", [(e.id, e.origin, len(e.new)) for e in corpus.entries])
    if from_shard != {f"lava shard {k}" for k in range(SHARDS)}:
        problems.append(f"corpus programs come from {sorted(from_shard)}, not from every shard")
    if snap["features"] <= 0 or snap["features"] != len(corpus.features()):
        problems.append(f"features {snap['features']} (corpus has {len(corpus.features())})")
    content = [f for f in st["failures"] if f["signature"].startswith("content ")]
    print("failures:", [(f["signature"], f["hits"]) for f in st["failures"]])
    if not content:
        problems.append("the planted content failure is not in the merged failures")
        return
    f = content[0]
    failing_shards = {name[:name.index("p")] for name, v in cases.items() if v == "fail"}
    if len(failing_shards) == SHARDS and f["hits"] < 2:
        problems.append(f"both shards failed, but the content signature has {f['hits']} hit")
    if len(failing_shards) < SHARDS:
        problems.append(f"only shards {sorted(failing_shards)} had a failing program")
    fdir = os.path.join(merged, "failures", f["dir"])
    summary = load(os.path.join(fdir, "failure.json"))
    if not summary["class"].startswith("planted (drop-write)"):
        problems.append(f"class {summary['class']!r}")
    for name in ("program.prog", "report.txt", "console.txt", "replay.sh", "result.json"):
        if not os.path.exists(os.path.join(fdir, name)):
            problems.append(f"no {name} in {fdir}")


def main():
    os.makedirs(OUT, exist_ok=True)
    base = tempfile.mkdtemp(prefix="fuzz-lava-", dir=OUT)
    out, merged = os.path.join(base, "shards"), os.path.join(base, "merged")
    timings, problems = {}, []
    try:
        rc = run([FAULTLINE, "fuzz", "--lava", str(SHARDS), "--programs", str(PROGRAMS),
                  "--plant", "drop-write", "--seed", str(SEED), "--out", out, *kernel_args()],
                 "write shards (a boot for the offers)", timings)
        if rc != 0:
            print(f"not ok: fuzz --lava exited {rc}")
            return 2
        shards = [os.path.join(out, f"shard-{k}") for k in range(SHARDS)]
        t0 = time.monotonic()
        procs = [subprocess.Popen([FAULTLINE, "fuzz", "lava-run", s]) for s in shards]
        rcs = [p.wait(timeout=STEP_TIMEOUT_S) for p in procs]
        timings[f"lava-run, {SHARDS} shards at once, {SHARDS * PROGRAMS} jobs"] = \
            time.monotonic() - t0
        if any(rcs):
            problems.append(f"fuzz lava-run exited {rcs}")
        rc = run([FAULTLINE, "fuzz", "merge", merged, *shards], "merge", timings)
        if rc != 1:
            problems.append(f"fuzz merge exited {rc}, expected 1 (failures merged)")
        if os.path.exists(os.path.join(merged, "fuzz.json")):
            check(base, shards, merged, problems)
            before = len(Corpus(os.path.join(merged, "corpus")).load().entries)
            rc = run([FAULTLINE, "fuzz", "--resume", merged, "--budget", "5s", "--plant",
                      "drop-write", "--quiet", *kernel_args()], "fuzz --resume (one boot)",
                     timings)
            st = load(os.path.join(merged, "fuzz.json"))
            if rc != 1 or len(st["sessions"]) != 2 or \
                    len(Corpus(os.path.join(merged, "corpus")).load().entries) < before:
                problems.append(f"fuzz --resume of the merged campaign: exit {rc}, "
                                f"{len(st['sessions'])} sessions")
        else:
            problems.append("merge wrote no fuzz.json")
    except subprocess.TimeoutExpired as e:
        problems.append(f"{e.cmd[1:3]} ran over {e.timeout}s")
    for what, s in timings.items():
        print(f"# time: {what}: {s:.0f}s")
    for p in problems:
        print(f"not ok: {p}")
    print(f"ok: {SHARDS} LAVA shards ran and merged" if not problems
          else f"FAIL ({len(problems)} problems)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
