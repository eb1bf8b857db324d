#!/usr/bin/python3
"""vm test of `faultline fuzz` (meson suite 'vm'): a 2-minute campaign whose
guest executor drops a store on purpose (`--plant drop-write`, passed to
`progexec serve`) must find the planted `content` failure within its budget,
triage it (a fresh boot fails alone), minimize it to a few operations that
still write and read back the same pages, and record it: its failure
directory, fuzz.json and a results record.

FAULTLINE_KERNEL / FAULTLINE_MODULES select the kernel.  Exit 0 pass,
1 fail, 2 setup error.
"""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import FAULTLINE, OUT, kernel_args  # noqa: E402

from faultline.prog.lang import read  # noqa: E402
from faultline.results import records  # noqa: E402

BUDGET_S = 120
# The budget, then the triage of what was found (boots, minimization, a
# --deterministic boot) and the program a job was running.
RUN_TIMEOUT_S = 780


def load(path):
    with open(path) as f:
        return json.load(f)


def check_failure(out, problems):
    st = load(os.path.join(out, "fuzz.json"))
    fails = st.get("failures", [])
    content = [f for f in fails if f["signature"].startswith("content ")]
    if not content:
        problems.append(f"no content failure found (failures: {[f['signature'] for f in fails]})")
        return
    f = content[0]
    if f["first_s"] > BUDGET_S:
        problems.append(f"the planted failure was found after {f['first_s']}s, over the "
                        f"{BUDGET_S}s budget")
    if not f.get("triaged"):
        problems.append("the planted failure was not triaged")
    fdir = os.path.join(out, "failures", f["dir"])
    summary = load(os.path.join(fdir, "failure.json"))
    print(json.dumps(summary, indent=1))
    if not summary.get("class", "").startswith("planted (drop-write)"):
        problems.append(f"class {summary.get('class')!r}, expected planted (drop-write)")
    if summary.get("replay") != "alone":
        problems.append(f"replay {summary.get('replay')!r}: the planted failure must fail "
                        "alone on a fresh boot")
    found, small = read(os.path.join(fdir, "program.prog")), \
        read(os.path.join(fdir, "minimized.prog"))
    if not len(small.ops) < len(found.ops):
        problems.append(f"minimized to {len(small.ops)} ops from {len(found.ops)}: no smaller")
    writes = {(op.args[0]) for op in small.ops if op.verb in ("write", "pwrite")}
    reads = {(op.args[0]) for op in small.ops if op.verb in ("read", "pread")}
    if not writes & reads:
        problems.append(f"the minimized program does not write and read one object:\n"
                        f"{small.text()}")
    print(small.text())
    if (summary.get("minimize") or {}).get("ops", [None, None])[1] != len(small.ops):
        problems.append(f"failure.json's minimize {summary.get('minimize')} does not match "
                        "minimized.prog")
    for name in ("report.txt", "console.txt", "replay.sh", "rules.txt"):
        if not os.path.exists(os.path.join(fdir, name)):
            problems.append(f"no {name} in {fdir}")
    if not st["stats"] or st["stats"][-1]["programs"] < 1:
        problems.append("fuzz.json counts no program")


def main():
    os.makedirs(OUT, exist_ok=True)
    base = tempfile.mkdtemp(prefix="fuzz-", dir=OUT)
    out, results = os.path.join(base, "campaign"), os.path.join(base, "fuzz.jsonl")
    argv = [FAULTLINE, "fuzz", "--budget", f"{BUDGET_S}s", "--plant", "drop-write",
            "--out", out, "--results", results, "--minimize-budget", "4m", *kernel_args()]
    print("$ " + " ".join(argv), flush=True)
    try:
        res = subprocess.run(argv, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"not ok: fuzz ran over {RUN_TIMEOUT_S}s")
        return 1
    problems = []
    if res.returncode != 1:
        problems.append(f"fuzz exited {res.returncode}, expected 1 (a failure found)")
    if not os.path.exists(os.path.join(out, "fuzz.json")):
        problems.append("no fuzz.json")
    else:
        check_failure(out, problems)
    try:
        recs = records.read_set(results)
        if len(recs) != 1 or recs[0]["verdict"] != "fail" or \
                not str(recs[0]["signature"]).startswith("content "):
            problems.append(f"results record {recs}: expected one failed campaign")
    except Exception as e:  # noqa: BLE001 - any unreadable record is this test's failure
        problems.append(f"results record: {e}")
    for p in problems:
        print(f"not ok: {p}")
    print("ok: fuzz found, minimized and recorded the planted failure" if not problems
          else f"FAIL ({len(problems)} problems)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
