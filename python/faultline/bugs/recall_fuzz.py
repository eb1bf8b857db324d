"""faultline bugs --fuzz: recall of the real-bug corpus from no scenario.

For each bug: its buggy and fixed kernels, built (or taken from the kernel
cache) exactly as `faultline bugs` builds them (recall.build_kernel), then
one `faultline fuzz` campaign (fuzz/command.py) per search seed on each,
with the fuzzer's defaults: no scenario, no rule, weight or knob of the
bug's, the same options for every kernel.  A failure on the buggy kernel
may or may not be the bug's: a person reads its minimized program and
says so (`--fuzz-verdict`); a failure on the fixed kernel is a false
alarm.

  OUT/NAME/{buggy,fixed}/seedN/     each campaign's --out (docs/fuzz.md)
  results/recall-fuzz/SET.jsonl     a record per campaign (fuzz_table.py)

A buggy kernel's campaign stops at its first failure (fuzz --until-failure):
the table wants the time to it, and a person judges that failure.  A fixed
kernel's campaign runs its whole budget: every failure there is a false
alarm.  Bugs whose fixed kernel is one kernel (the same cache key: every
6.12 bug's is stock debian-6.12) share its campaigns, one per seed; a
shared record names the bug whose run it is (shared_from).

Resume: a campaign whose record is in the set, of this QEMU build, guest
build and kernel, with this budget and jobs, is not run again (--rerun
runs it again).  An interrupted campaign (stopped by a signal, its
directory and fuzz.json kept) goes on from where it stopped with the
budget it has left: its corpus, failures and campaign time are kept, so
its time to failure is campaign time as in one session.  Any other
campaign directory without a record (another build's, a buggy kernel's
that found its failure) is removed and run anew.  The set
takes campaigns of one QEMU build (and one guest build per kernel): a run
of another build is refused before its first kernel is built.
"""

import os
import shutil
import time

from faultline.bugs import fuzz_table, recall
from faultline.build.builds import build_all, qemu_key
from faultline.errors import EXIT_FAIL, EXIT_PASS, EXIT_SETUP, SetupError
from faultline.fuzz import command as fuzz_command
from faultline.fuzz import manager as fuzz_manager
from faultline.fuzz import state as fuzz_state
from faultline.host.messages import say
from faultline.host.versions import git_describe
from faultline.results import records

DEFAULT_SEEDS = "1..3"
DEFAULT_BUDGET = "30m"
SIDES = fuzz_table.SIDES


def default_results():
    return os.path.join(records.RESULTS_DIR, "recall-fuzz", "default.jsonl")


def read_results(path):
    """The records already in the set @path ([] when it does not exist)."""
    return records.read_set(path, fuzz_table.RECORD_FIELDS) if os.path.exists(path) else []


def save(path, recs):
    return records.write_set(path, recs, fuzz_table.IDENTITY, fuzz_table.RECORD_FIELDS)


def find(existing, bug, side, seed):
    return next((r for r in existing if (r["subject"], r["side"], r["seed"]) == (bug, side, seed)),
                None)


def shared_run(existing, bug, seed, ident, budget_s, jobs):
    """Another bug's fixed-kernel campaign of this very kernel and seed
    (None when there is none): it measured what this one would."""
    return next((r for r in existing
                 if r["side"] == "fixed" and r["seed"] == seed and r["subject"] != bug
                 and r["shared_from"] is None and recorded(r, ident, budget_s, jobs)), None)


def recorded(rec, ident, budget_s, jobs):
    """Does @rec measure what this campaign would: the same builds of the
    same kernel, the same budget and jobs?"""
    return (rec is not None and rec["qemu_build"] == ident["qemu_build"]
            and records.guest_base(rec["guest_build"]) == records.guest_base(ident["guest_build"])
            and rec["kernel_key"] == ident["kernel_key"]
            and rec["budget_s"] == budget_s and rec["jobs"] == jobs)


# ---------------------------------------------------------------- one campaign

def known_signatures(path=None):
    """The failure signatures of the kernel findings replayed into the
    findings set @path (results/findings/default.jsonl): failures the
    fuzzer may meet on any kernel, not a bug's."""
    path = path or os.path.join(records.RESULTS_DIR, "findings", "default.jsonl")
    if not os.path.exists(path):
        return frozenset()
    return frozenset(r["signature"] for r in records.read_set(path) if r.get("signature"))


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def failures_of(out, st):
    """The failures of the campaign in @out (its fuzz.json @st), first
    found first: signature, campaign time, hits, class, the minimized
    program's path and text (the program as found when triage could not
    minimize it)."""
    got = []
    for f in sorted(st.get("failures", []), key=lambda f: f["first_s"]):
        fdir = os.path.join(out, "failures", f["dir"])
        path = next((p for p in (os.path.join(fdir, n) for n in ("minimized.prog",
                                                                  "program.prog"))
                     if os.path.exists(p)), None)
        got.append({"signature": f["signature"], "first_s": f["first_s"],
                    "hits": f.get("hits", 1), "class": f.get("class"),
                    "replay": f.get("replay"), "deterministic": f.get("deterministic"),
                    "minimized": records.display(path) if path else None,
                    "program": read_text(path) if path else None})
    return got


def bug_base(bug):
    return bug.base + (" +KASAN" if bug.kasan else "")


def record(bug, side, seed, kernel_name, out, opts, known=frozenset(), version=None):
    """The results record of the finished campaign in @out; a failure
    with a signature of @known (known_signatures) is listed, marked known,
    and is not the campaign's first failure.  @version: the faultline that
    ran it (git_describe() when the campaign started; the checkout may have
    moved since)."""
    st = fuzz_state.load(out)
    ident, last = st["identity"], (st["stats"] or [{}])[-1]
    failures = [{**f, "known": f["signature"] in known} for f in failures_of(out, st)]
    first = next((f for f in failures if not f["known"]), None)
    rec = {"subject": bug.name, "kernel_key": ident["kernel_key"],
           "qemu_build": ident["qemu_build"], "guest_build": ident["guest_build"],
           "seed": seed, "deterministic": False,
           "verdict": "fail" if first else "pass",
           "elapsed_s": round(float(st.get("elapsed_s", 0.0)), 1),
           "time_to_failure_s": first["first_s"] if first else None,
           "signature": first["signature"] if first else None, "digest": None,
           "side": side, "kernel": kernel_name,
           "base": bug_base(bug),
           "budget_s": opts.budget_s, "jobs": opts.jobs, "programs": last.get("programs", 0),
           "fuzz_out": records.display(out), "failures": failures,
           "minimized": first["minimized"] if first else None,
           # Only a person can say whether a buggy kernel's failure is the bug's.
           "bug_failure": "untriaged" if first and side == "buggy" else None,
           "bug_failure_why": None, "bug_failure_index": None,
           "until_failure": side == "buggy", "shared_from": None,
           "known_failures": [f["signature"] for f in failures if f["known"]],
           "sessions": len(st.get("sessions") or [None]),
           "date": time.strftime("%Y-%m-%d", time.gmtime()), "faultline": version or git_describe()}
    return rec


# An interrupted campaign with less than this left is run anew: a boot
# and a few programs would be all its last session measured.
MIN_LEFT_S = 120.0


def interrupted_s(out, side, seed, opts, known):
    """The campaign time of an interrupted campaign in @out that this one
    goes on with (the same seed and jobs, budget left, and on the buggy
    side no failure of its own found yet), else None."""
    try:
        st = fuzz_state.load(out)
    except SetupError:
        return None
    elapsed = float(st.get("elapsed_s", 0.0))
    sessions = st.get("sessions") or [{}]
    if st.get("seed") != seed or sessions[0].get("jobs") != opts.jobs \
            or not 0 < elapsed <= opts.budget_s - min(MIN_LEFT_S, opts.budget_s / 10):
        return None
    if side == "buggy" and any(f["signature"] not in known for f in st.get("failures", [])):
        return None     # it found its failure; its triage may not have ended
    return elapsed


def run_campaign(bug, side, seed, kern, builds, opts, out, version=None):
    """One fuzz campaign in @out: an interrupted one goes on with the budget
    it has left (its corpus and campaign time kept), else it runs from
    scratch; its record."""
    image, modules = kern
    known = known_signatures()
    prior = interrupted_s(out, side, seed, opts, known)
    if prior is not None:
        say(f"bugs: {bug.name} {side} seed {seed}: going on with the interrupted campaign "
            f"in {out} after {fuzz_table.duration(prior)}")
        fopts = fuzz_manager.FuzzOptions(out=out, budget_s=opts.budget_s - prior,
                                         jobs=opts.jobs, resume=True,
                                         until_failure=side == "buggy", known=known)
        try:
            fopts.check()
            fuzz_command.run(fopts, kernel=image, modules=modules, builds=builds)
        except SetupError as e:     # another build's campaign: measured nothing of ours
            say(f"bugs: {bug.name} {side} seed {seed}: not going on with it ({e}); anew")
            prior = None
    if prior is None:
        shutil.rmtree(out, ignore_errors=True)
        fopts = fuzz_manager.FuzzOptions(out=out, budget_s=opts.budget_s, jobs=opts.jobs,
                                         seed=seed, until_failure=side == "buggy",
                                         known=known)
        fopts.check()
        fuzz_command.run(fopts, kernel=image, modules=modules, builds=builds)
    fixed_name, buggy_name = recall.kernel_names(bug)
    return record(bug, side, seed, buggy_name if side == "buggy" else fixed_name, out, opts,
                  known, version)


# ---------------------------------------------------------------- the command

def check_options(opts):
    if opts.budget_s <= 0:
        raise SetupError("--budget must be > 0")
    if min(opts.seeds) < 1:
        raise SetupError("--seeds: search seeds start at 1 (fuzz --seed 0 is seed 1)")
    if not 1 <= opts.jobs <= fuzz_manager.MAX_JOBS:
        raise SetupError(f"--jobs {opts.jobs}: expected 1 to {fuzz_manager.MAX_JOBS}")


def summary_line(rec):
    if rec["verdict"] == "pass":
        return "no failure"
    more = len(rec["failures"]) - 1
    return (f"first failure after {fuzz_table.duration(rec['time_to_failure_s'])}: "
            f"{rec['signature']}" + (f" (+{more} more)" if more else ""))


def campaign(opts):
    """`faultline bugs --fuzz`: 0 when every buggy kernel failed on a seed
    and no fixed kernel did, 1 otherwise, 2 when a campaign could not run
    (the others still ran)."""
    check_options(opts)
    version = git_describe()        # the code this process runs, whatever the checkout does
    bugs = recall.select(opts.names)
    results_path = os.path.abspath(opts.results or default_results())
    existing = read_results(results_path)
    # A set holds one QEMU build: refused now, not after hours of kernel builds.
    records.check_builds(records.display(results_path), existing, qemu_key())
    out = os.path.abspath(opts.out)
    os.makedirs(out, exist_ok=True)
    recs, errors, t0 = [], [], time.monotonic()
    kern, builds, ident = {}, {}, {}
    for bug in bugs:        # every kernel first: a build that fails stops before hours of fuzz
        for side in SIDES:
            k = (bug.name, side)
            kern[k] = recall.build_kernel(bug, side == "buggy", opts.make_jobs)
            image, modules = kern[k]
            builds[k] = build_all(image, modules, True)
            ident[k] = fuzz_command.builds_identity(builds[k], image)
            records.check_builds(records.display(results_path), existing,
                                 ident[k]["qemu_build"],
                                 {ident[k]["kernel_key"]: ident[k]["guest_build"]})
    # Every buggy kernel before the fixed ones: the recall is known first.
    for side, bug, seed in ((s, b, n) for s in SIDES for b in bugs for n in opts.seeds):
        k = (bug.name, side)
        where = f"bugs: {bug.name} {side:5} seed {seed}"
        old = find(existing, bug.name, side, seed)
        if not opts.rerun and recorded(old, ident[k], opts.budget_s, opts.jobs):
            recs.append(old)
            say(f"{where}: recorded already ({summary_line(old)}; --rerun runs it again)")
            continue
        other = None if opts.rerun or side != "fixed" else shared_run(
            existing, bug.name, seed, ident[k], opts.budget_s, opts.jobs)
        if other is not None:
            rec = {**other, "subject": bug.name, "base": bug_base(bug),
                   "shared_from": other["subject"]}
            recs.append(rec)
            existing = save(results_path, [rec])
            say(f"{where}: the same kernel's campaign of {other['subject']} "
                f"({summary_line(other)})")
            continue
        d = os.path.join(out, bug.name, side, f"seed{seed}")
        say(f"{where}: fuzz {fuzz_table.duration(opts.budget_s)} in {d}")
        try:
            rec = run_campaign(bug, side, seed, kern[k], builds[k], opts, d, version)
        except SetupError as e:
            errors.append(f"{where}: {e}")
            say(f"{where}: the campaign did not run to its end: {e}")
            continue
        recs.append(rec)
        existing = save(results_path, [rec])
        say(f"{where}: {summary_line(rec)}  [{time.monotonic() - t0:.0f} s]")
    rows = fuzz_table.rows(recs)
    if rows:
        print(fuzz_table.text_table(rows), flush=True)
    say(f"bugs: records in {records.display(results_path)}; `faultline bugs --fuzz-verdict "
        "BUG SEED yes|no WHY` says whether a buggy kernel's failure is the bug's")
    if errors:
        for e in errors:
            say(e)
        return EXIT_SETUP
    ok = all(any(r["verdict"] != "pass" for r in row["buggy"])
             and all(r["verdict"] == "pass" for r in row["fixed"]) for row in rows)
    return EXIT_PASS if ok else EXIT_FAIL


# ---------------------------------------------------------------- the verdict

def buggy_failure(flag, results, bug, seed, failure=None):
    """(the set's path, the record of @bug's buggy-kernel campaign with
    search seed @seed, the failure's index): failure @failure (1: the first
    found; None: the first that is no known finding's, the record's own
    first failure); SetupError (one line, naming @flag) when there is none."""
    path = os.path.abspath(results or default_results())
    where = records.display(path)
    try:
        seed = int(seed)
    except ValueError:
        raise SetupError(f"{flag}: seed {seed!r} is not a number") from None
    if not os.path.exists(path):
        raise SetupError(f"{flag}: no results set {where}")
    rec = find(read_results(path), bug, "buggy", seed)
    if rec is None:
        raise SetupError(f"{flag}: {where} has no campaign of {bug!r} on its buggy "
                         f"kernel with seed {seed}")
    n = len(rec["failures"])
    if not n:
        raise SetupError(f"{flag}: {bug} seed {seed} found no failure on the buggy "
                         "kernel: nothing to judge")
    if failure is None:
        failure = next((i for i, f in enumerate(rec["failures"], 1) if not f.get("known")), 1)
    if not 1 <= failure <= n:
        raise SetupError(f"--failure {failure}: {bug} seed {seed} has failures 1 to {n}")
    return path, rec, failure


def set_verdict(results, bug, seed, verdict, why, failure=None):
    """`faultline bugs --fuzz-verdict BUG SEED yes|no WHY [--failure N]`:
    a person's verdict on whether failure N (1: the first found; None: the
    first that is no known finding's, the record's own first failure) of
    the buggy kernel's campaign of seed SEED is the bug's, into its record."""
    if verdict not in ("yes", "no"):
        raise SetupError(f"--fuzz-verdict: verdict {verdict!r}: expected yes or no")
    if not why.strip():
        raise SetupError("--fuzz-verdict: say why (the symptom the minimized program "
                         "shows, or does not)")
    path, rec, failure = buggy_failure("--fuzz-verdict", results, bug, seed, failure)
    where, seed = records.display(path), rec["seed"]
    rec = {**rec, "bug_failure": verdict, "bug_failure_why": why.strip(),
           "bug_failure_index": failure}
    save(path, [rec])
    say(f"bugs: {bug} seed {seed}, failure {failure} ({rec['failures'][failure - 1]['signature']}):"
        f" {verdict}, in {where}")
    return EXIT_PASS
