"""`faultline bugs --fuzz-replay BUG SEED [--failure N] [--times K]`: the
evidence a person judges a recall failure by (`--fuzz-verdict`).

A failure found on a bug's buggy kernel is the bug's when it comes from
the bug, not from the stock kernel under it: the same replay, from a
fresh boot, fails so on the buggy kernel and passes on the fixed one.
This replays the failure K times on each kernel and writes what each
replay saw into the campaign's record (`replays`), without judging:

  - its `sequence/` when triage minimized it over the programs before it;
  - its minimized program when it failed alone;
  - else (it did not replay, or triage skipped it as a known finding's)
    the programs its guest ran before it, then it, in one boot.
"""

import json
import os
import shutil
import time

from faultline import TOP
from faultline.bugs import recall
from faultline.bugs import recall_fuzz
from faultline.errors import EXIT_PASS, SetupError
from faultline.execute import boot
from faultline.execute import results as program_results
from faultline.fuzz.triage import result_signature
from faultline.host.messages import say
from faultline.results import records
from faultline.run.runner import DEFAULT_OUT, new_dir

SEED = 1        # the injectors' seed of a replay (prog run's default)


def failure_dir(rec, index):
    """The failure directory of failure @index (1-based) of @rec."""
    f = rec["failures"][index - 1]
    if not f.get("minimized"):
        raise SetupError(f"failure {index} ({f['signature']}) has no program in the record")
    path = f["minimized"] if os.path.isabs(f["minimized"]) else os.path.join(TOP, f["minimized"])
    d = os.path.dirname(path)
    if not os.path.isdir(d):
        raise SetupError(f"failure {index}: no failure directory {records.display(d)} on "
                         "this machine (the campaign's --out is where it ran)")
    return d


def target_of(fdir, work):
    """(what `prog run` replays, a one-line description): see the module's
    docstring; a sequence from history/ is written into @work."""
    seq = os.path.join(fdir, "sequence")
    if os.path.isdir(seq):
        n = len([p for p in os.listdir(seq) if p.endswith(".prog")])
        return seq, f"sequence/ ({n} programs)"
    try:
        with open(os.path.join(fdir, "failure.json")) as f:
            summary = json.load(f)
    except (OSError, ValueError):
        summary = {}
    small = os.path.join(fdir, "minimized.prog")
    if summary.get("replay") == "alone" and os.path.exists(small):
        return small, "minimized.prog"
    hist = os.path.join(fdir, "history")
    names = sorted(p for p in os.listdir(hist) if p.endswith(".prog")) \
        if os.path.isdir(hist) else []
    os.makedirs(work, exist_ok=True)
    for p in names:
        shutil.copy(os.path.join(hist, p), os.path.join(work, p))
    shutil.copy(os.path.join(fdir, "program.prog"),
                os.path.join(work, f"{len(names) + 1:02d}-failing.prog"))
    return work, f"history/ then program.prog ({len(names) + 1} programs)"


def replay_once(target, image, modules, out):
    """One fresh boot of @target: the last program's signature, or
    "pass", or "earlier: SIG" when a program before it failed."""
    opts = boot.ProgOptions(target, kernel=image, modules=modules, out=out, seed=SEED,
                            quiet=True)
    _, rundir = boot.run_programs_in(opts)
    _, res = program_results.load(rundir)
    try:
        with open(os.path.join(rundir, "console.log"), errors="replace") as fh:
            console = fh.read()
    except OSError:
        console = ""
    for i, r in enumerate(res):
        sig = result_signature(r, console)
        if sig is not None:
            return sig if i == len(res) - 1 else f"earlier: {sig}"
        if r["verdict"] not in ("pass",):
            return f"not run: {r['verdict']}"
    return "pass"


def replay(results, bug_name, seed, failure=None, times=2, out=None):
    """The command: replays, the record's `replays`; its exit status."""
    if not 1 <= times <= 10:
        raise SetupError(f"--times {times}: expected 1 to 10")
    (bug,) = recall.select([bug_name])
    path, rec, failure = recall_fuzz.buggy_failure("--fuzz-replay", results, bug.name, seed,
                                                   failure)
    where, seed = records.display(path), rec["seed"]
    sig = rec["failures"][failure - 1]["signature"]
    fdir = failure_dir(rec, failure)
    out = out or new_dir(DEFAULT_OUT, f"fuzz-replay-{bug.name}-s{seed}")
    target, what = target_of(fdir, os.path.join(out, "replayed"))
    fixed_name, buggy_name = recall.kernel_names(bug)
    seen = {}
    for side, name in (("buggy", buggy_name), ("fixed", fixed_name)):
        image, modules = recall.build_kernel(bug, side == "buggy")
        seen[side] = []
        for k in range(1, times + 1):
            say(f"bugs: {bug.name} seed {seed} failure {failure}: replay {k}/{times} of "
                f"{what} on {side} kernel {name}")
            seen[side].append(replay_once(target, image, modules, out))
            say(f"bugs:   saw {seen[side][-1]}")
    replays = {"failure": failure, "signature": sig, "replayed": what,
               "buggy": seen["buggy"], "fixed": seen["fixed"],
               "date": time.strftime("%Y-%m-%d", time.gmtime()), "out": records.display(out)}
    others = [r for r in rec.get("replays", []) if r.get("failure") != failure]
    recall_fuzz.save(path, [{**rec, "replays": others + [replays]}])
    same = {s: sum(1 for x in seen[s] if x == sig) for s in seen}
    say(f"bugs: {bug.name} seed {seed} failure {failure} ({sig}): the same failure on the "
        f"buggy kernel {same['buggy']}/{times}, on the fixed kernel {same['fixed']}/{times}; "
        f"in {where} (`--fuzz-verdict {bug.name} {seed} yes|no WHY --failure {failure}` "
        "judges)")
    return EXIT_PASS
