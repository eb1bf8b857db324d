"""faultline bugs: recall of the real-bug corpus (tests/bugs/, corpus.py).

For each bug: the fixed kernel (its Debian base, +KASAN when the bug needs
it) and the buggy one (the base + reintroduce.patch, named bug-NAME), both
built or taken from `faultline kernel`'s cache; each of the bug's
scenarios on both for the seeds, with runner.one_run (what `run` and its
sweeps use: the usual run directories, report.json, the kernel-config
check); optionally the same seeds on the buggy kernel with the scenario's
rules removed (what the fault device adds); then `repro` and `minimize`
of the first failing buggy seed.

  OUT/NAME/SCENARIO/{buggy,fixed,nofaults}/seedN/   run directories
  OUT/NAME/SCENARIO/first-failure.json              repro and minimize
  OUT/corpus.json, OUT/corpus.md, OUT/kcidb.json    this campaign's table
  results/recall/SET.jsonl (--results)              a record of every run

Resume: a run directory whose report.json exists, whose run was not
stopped, and whose kernel image, QEMU build and guest image are the ones
built now is reused.  The results set takes runs of one QEMU build (and one
guest build per kernel): a campaign of another build is refused before its
first kernel is built.  --import DIR turns the run directories of an
earlier campaign's OUT into records, running nothing.
"""

import json
import os
import shutil
import time

from faultline import scenario
from faultline.bugs import corpus, recall_table
from faultline.bugs.recall_table import IDENTITY, RECORD_FIELDS
from faultline.build.builds import build_all, qemu_key
from faultline.errors import EXIT_CRASH, EXIT_FAIL, EXIT_PASS, EXIT_SETUP, SetupError
from faultline.host.messages import say
from faultline.host.versions import sha256
from faultline.judge import failure, judge, kcidb
from faultline.judge.report import load_report
from faultline.kernel import build, fragments, store
from faultline.results import records
from faultline.run import inputs, runner
from faultline.run.options import BugsOptions, MinimizeOptions, RunOptions, connect_options
from faultline.search import minimize
from faultline.vm.backends import backend_class
from faultline.vm.lava import lava_run_path

DEFAULT_SEEDS = 10
DEFAULT_BUDGET = 40     # minimize's runs
SIDES = recall_table.SIDES


def parse_seeds(text):
    """--seeds N (1..N) or A..B: the seed list; SetupError (one line) else."""
    text = str(text).strip()
    if ".." in text:
        return inputs.parse_seeds(text)
    try:
        n = int(text)
    except ValueError:
        raise SetupError(f"--seeds {text!r}: expected N (seeds 1..N) or A..B") from None
    if not 1 <= n <= 1000:
        raise SetupError(f"--seeds {text!r}: N must be 1 to 1000")
    return list(range(1, n + 1))


def select(names):
    """The Bugs named (all of the corpus when none), each loaded and
    checked; an unknown name is one line, before anything is built."""
    known = corpus.list_all()
    for n in names:
        if n not in known:
            raise SetupError(f"no corpus bug {n!r} (known: {', '.join(known)})")
    try:
        return [corpus.load(n) for n in (names or known)]
    except corpus.BugError as e:
        raise SetupError(str(e)) from None


# ---------------------------------------------------------------- kernels

def kernel_names(bug):
    """(fixed name, buggy name) of @bug's kernels."""
    family = "debian-" + bug.base.split(":", 1)[1]
    return family + ("-kasan" if bug.kasan else ""), "bug-" + bug.name


def build_kernel(bug, buggy, jobs=None):
    """Build (or take from the cache) one of @bug's kernels: (image, modules)."""
    fixed_name, buggy_name = kernel_names(bug)
    name = buggy_name if buggy else fixed_name
    say(f"bugs: {bug.name}: {'buggy' if buggy else 'fixed'} kernel {name}")
    build.build(bug.base, fragments.KernelConfig(kasan=bug.kasan),
                 patch_files=[bug.patch] if buggy else None, name=name, jobs=jobs)
    return store.resolve(name)


# ---------------------------------------------------------------- runs

def _same_file(a, b):
    try:
        with open(a, "rb") as fa, open(b, "rb") as fb:
            return fa.read() == fb.read()
    except OSError:
        return False


def reusable(rundir, image, scenario_path=None, backend="qemu", builds=None):
    """The Report of a finished run in @rundir on @image (of the scenario
    file @scenario_path as it is now, on @backend, of the QEMU build and
    guest image of @builds), or None."""
    try:
        r = load_report(rundir)
        with open(os.path.join(rundir, "run.json")) as f:
            meta = json.load(f)
    except (SetupError, OSError, ValueError):
        return None
    if r.status > EXIT_CRASH or r.status == EXIT_SETUP:
        return None             # stopped or never ran: run it again
    if meta.get("kernel_sha256") != sha256(image):
        return None             # an older build of that kernel
    if meta.get("backend", "qemu") != backend:
        return None             # a lab's campaign wants its own runs
    if scenario_path and not _same_file(scenario_path, os.path.join(rundir, "scenario.toml")):
        return None             # the scenario changed since
    if builds and (meta.get("qemu_build") != os.path.basename(builds.qemu_dir) or
                   records.guest_base(meta.get("guest_build") or "")
                   != os.path.basename(builds.guest_dir)):
        return None             # another QEMU or guest build: its numbers are another set's
    return r


def run_seed(scname, seed, side, kern, opts_base, rundir, builds, no_rules):
    """One run (or its earlier result): (Report, reused).  @builds: the
    QEMU build and guest image of @kern; @no_rules: an empty rules file,
    the "nofaults" side's --rules."""
    image, modules = kern
    r = reusable(rundir, image, scenario.find(scname), opts_base.backend, builds)
    if r is not None:
        return r, True
    shutil.rmtree(rundir, ignore_errors=True)
    os.makedirs(rundir)
    opts = RunOptions(**{**opts_base.__dict__, "kernel": image, "modules": modules,
                         "rules": no_rules if side == "nofaults" else None})
    sc = runner.load_scenario(scname, opts)
    r, _ = runner.one_run(sc, seed, opts, builds, rundir, verbose=False)
    return r, False


def why_not_deterministic(scname):
    """Why @scname cannot run --deterministic, or None when it can."""
    sc = scenario.load(scname)
    try:
        scenario.check_deterministic(sc)
    except scenario.ScenarioError as e:
        return str(e)
    return None


# ---------------------------------------------------------------- first failure

def first_failure(rundir, out, budget, quiet):
    """repro and minimize of the failing run @rundir: a dict, kept in
    @out/first-failure.json so a resumed campaign does not redo them."""
    path = os.path.join(out, "first-failure.json")
    try:
        with open(path) as f:
            got = json.load(f)
        if got.get("rundir") == rundir:
            return got
    except (OSError, ValueError):
        pass
    orig = load_report(rundir)
    sig = failure.signature(rundir, orig)
    res = {"rundir": rundir, "signature": sig}
    say(f"bugs: repro {rundir}")
    _, new = runner.repro(rundir, os.path.join(out, "repro"), None, True)
    rr = load_report(new)
    res.update(repro_dir=new, repro_signature=failure.signature(new, rr),
               repro_digest_same=rr.digest == orig.digest)
    res["reproducible"] = res["repro_signature"] == sig
    if not orig.deterministic:
        res["minimal_faults"] = None
        res["minimize"] = "not a --deterministic run"
    else:
        say(f"bugs: minimize {rundir} (budget {budget} runs)")
        try:
            st = minimize.minimize(MinimizeOptions(rundir, budget=budget, quiet=quiet))
        except SetupError as e:
            st, res["minimize"] = EXIT_SETUP, str(e)
        if st == EXIT_PASS:
            with open(os.path.join(rundir, "minimize", "summary.json")) as f:
                summ = json.load(f)
            res.update(minimal_faults=len(summ["minimal"]), minimize_faults=summ["faults"],
                       one_minimal=summ["one_minimal"], minimize_runs=summ["runs"],
                       minimize="1-minimal" if summ["one_minimal"] else "budget spent")
        else:
            res["minimal_faults"] = None
            res.setdefault("minimize", "the explicit schedule did not fail the same way")
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    return res


# ---------------------------------------------------------------- records

def default_results(deterministic):
    """The set `faultline bugs` adds its runs to without --results."""
    return os.path.join(records.RESULTS_DIR, "recall",
                        "deterministic.jsonl" if deterministic else "default.jsonl")


def read_results(path):
    """The records already in the set @path ([] when it does not exist)."""
    return records.read_set(path, RECORD_FIELDS) if os.path.exists(path) else []


def record(bug, scname, side, rundir, report=None):
    """The results record of one of @bug's runs (None: the run measured nothing)."""
    fixed_name, buggy_name = kernel_names(bug)
    meta = None
    if report is not None:
        meta, _ = records.load_run(rundir)
    return records.record_of_run(
        rundir, bug.name, meta, report, scenario=scname, side=side,
        kernel=fixed_name if side == "fixed" else buggy_name,
        base=bug.base + (" +KASAN" if bug.kasan else ""),
        broken_guarantee=judge.broken_guarantee(report or load_report(rundir)))


def with_repro(rec, first):
    """@rec (the repro'd buggy run's record) with what repro and minimize found."""
    return {**rec, "reproducible": bool(first.get("reproducible")),
            "minimal_faults": first.get("minimal_faults"),
            "minimize": first.get("minimize")}


def save(path, recs):
    return records.write_set(path, recs, IDENTITY, RECORD_FIELDS)


def import_runs(out, path):
    """--import OUT: a record of every finished run directory of an earlier
    campaign's OUT (NAME/SCENARIO/SIDE/seedN), with first-failure.json's
    repro and minimize; added to the set @path, nothing run.  0."""
    if not os.path.isdir(out):
        raise SetupError(f"--import {out}: no such directory")
    known, recs, skipped = corpus.list_all(), [], []
    for name in sorted(os.listdir(out)):
        if name not in known or not os.path.isdir(os.path.join(out, name)):
            continue
        bug = corpus.load(name)
        for scname in sorted(os.listdir(os.path.join(out, name))):
            base = os.path.join(out, name, scname)
            first = {}
            try:
                with open(os.path.join(base, "first-failure.json")) as f:
                    first = json.load(f)
            except (OSError, ValueError):
                pass
            for side in SIDES:
                d = os.path.join(base, side)
                seeds = sorted(os.listdir(d)) if os.path.isdir(d) else []
                for seed_dir in seeds:
                    rundir = os.path.join(d, seed_dir)
                    try:
                        rec = record(bug, scname, side, rundir)
                    except SetupError:
                        rec = None
                    if rec is None:
                        skipped.append(rundir)
                        continue
                    if first.get("rundir") == rundir and "reproducible" in first:
                        rec = with_repro(rec, first)
                    recs.append(rec)
    if not recs:
        raise SetupError(f"--import {out}: no finished run of a corpus bug under it "
                         "(NAME/SCENARIO/buggy|fixed|nofaults/seedN)")
    got = save(path, recs)
    say(f"bugs: {len(recs)} runs into {records.display(path)} ({len(got)} in the set)"
        + (f"; {len(skipped)} unfinished or stopped runs left out" if skipped else ""))
    return EXIT_PASS


# ---------------------------------------------------------------- command

def check_backend(backend, connect):
    """The backend options of every run, checked before any kernel is
    built: the backend exists, its host tools are there, --connect
    belongs to libvirt and answers."""
    backend_class(backend)
    options = connect_options(backend, connect)
    if backend == "lava":
        lava_run_path()
    return options


def write_outputs(out, recs, all_runs, seeds_text, deterministic, results_path):
    rows = recall_table.rows(recs)
    with open(os.path.join(out, "corpus.json"), "w") as f:
        json.dump({"seeds": seeds_text, "deterministic": deterministic,
                   "results": os.path.abspath(results_path), "rows": rows}, f, indent=1)
    with open(os.path.join(out, "corpus.md"), "w") as f:
        f.write("# faultline bugs\n\n" + recall_table.caption(recs) + "\n\n"
                + recall_table.markdown(rows))
    if all_runs:
        kcidb.write(os.path.join(out, "kcidb.json"), all_runs)
    return rows


def kernel_builds(bug, kern, results_path, existing):
    """The QEMU build and guest image of each of @bug's kernels, checked
    against the set's runs: {side: Builds}."""
    got, of_image = {}, {}
    for side, (image, modules) in kern.items():
        if image not in of_image:
            of_image[image] = build_all(image, modules, True)
        b = got[side] = of_image[image]
        records.check_builds(records.display(results_path), existing,
                             os.path.basename(b.qemu_dir),
                             {store.key_of(image) or "sha256:" + sha256(image)[:16]:
                              os.path.basename(b.guest_dir)})
    return got


def campaign(args: BugsOptions):
    """`faultline bugs`: 0 when every buggy kernel failed at least once and
    every fixed kernel passed every seed, 1 otherwise."""
    if args.list:
        for b in select(args.names):
            print(f"{b.name:32} {b.base + (' +KASAN' if b.kasan else ''):20} "
                  f"{b.fix} {','.join(b.scenarios)}")
        return 0
    results_path = os.path.abspath(args.results or default_results(args.deterministic))
    if args.import_dir:
        return import_runs(args.import_dir, results_path)
    seeds = parse_seeds(args.seeds)
    bugs = select(args.names)
    if args.budget < 1:
        raise SetupError("--budget must be >= 1")
    backend_options = check_backend(args.backend, args.connect)
    # A set holds one QEMU build: refused now, not after hours of kernel builds.
    existing = read_results(results_path)
    records.check_builds(records.display(results_path), existing, qemu_key())
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    seeds_text = f"{seeds[0]}..{seeds[-1]}"
    # `--rules /dev/null`, as a file a run directory can keep a copy of.
    no_rules = os.path.join(out, "no-faults.rules")
    with open(no_rules, "w") as f:
        f.write("# faultline bugs: the scenario's rules removed\n")
    opts_base = RunOptions(deterministic=args.deterministic, quiet=True, backend=args.backend,
                           backend_options=backend_options)
    recs, all_runs = [], []
    t0 = time.monotonic()
    for bug in bugs:
        kern = {"fixed": build_kernel(bug, False, args.make_jobs),
                "buggy": build_kernel(bug, True, args.make_jobs)}
        kern["nofaults"] = kern["buggy"]
        builds_of = kernel_builds(bug, kern, results_path, existing)
        for scname in bug.scenarios:
            det_note = why_not_deterministic(scname) if args.deterministic else None
            o = RunOptions(**{**opts_base.__dict__,
                              "deterministic": args.deterministic and not det_note})
            if det_note:
                say(f"bugs: {bug.name}: {scname} runs without --deterministic: {det_note}")
            sides = ["buggy", "fixed"] + (["nofaults"] if args.no_faults else [])
            base = os.path.join(out, bug.name, scname)
            first_caught = None
            for side in sides:
                for seed in seeds:
                    d = os.path.join(base, side, f"seed{seed}")
                    r, reused = run_seed(scname, seed, side, kern[side], o, d,
                                         builds_of[side], no_rules)
                    all_runs.append((r, d))
                    rec = record(bug, scname, side, d, r)
                    if rec is None:
                        say(f"bugs: {d}: the run did not finish ({r.outcome}): no record")
                    else:
                        recs.append(rec)
                        existing = save(results_path, [rec])
                        if side == "buggy" and first_caught is None and \
                                rec["broken_guarantee"] is not None:
                            first_caught = (len(recs) - 1, d)
                    say(f"bugs: {bug.name} {scname} {side:8} seed {seed}: "
                        f"{'PASS' if r.status == EXIT_PASS else r.outcome.upper()}"
                        f" ({r.elapsed_s:.0f} s{', earlier run' if reused else ''})"
                        + ("" if r.status == EXIT_PASS else f": {r.reason[:100]}")
                        + f"  [{time.monotonic() - t0:.0f} s]")
            if first_caught and not args.no_repro:
                i, d = first_caught
                recs[i] = with_repro(recs[i], first_failure(d, base, args.budget, True))
                existing = save(results_path, [recs[i]])
            write_outputs(out, recs, all_runs, seeds_text, args.deterministic, results_path)
    rows = write_outputs(out, recs, all_runs, seeds_text, args.deterministic, results_path)
    print(recall_table.text_table(rows), flush=True)
    say(f"bugs: {os.path.join(out, 'corpus.json')}, corpus.md, kcidb.json; "
        f"records in {records.display(results_path)}")
    ok = all(r["buggy"]["failed"] > 0 and r["fixed"] and r["fixed"]["failed"] == 0
             for r in rows)
    return EXIT_PASS if ok else EXIT_FAIL
