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
  OUT/corpus.json, OUT/corpus.md, OUT/kcidb.json        the table

Resume: a run directory whose report.json exists, whose run was not
stopped, and whose kernel image is the one built now is reused.
"""

import json
import os
import shutil
import time

from faultline import TOP, scenario
from faultline.bugs import corpus
from faultline.build.builds import build_all
from faultline.errors import EXIT_CRASH, EXIT_FAIL, EXIT_PASS, EXIT_SETUP, SetupError
from faultline.host.messages import say
from faultline.host.versions import sha256
from faultline.judge import failure, judge, kcidb
from faultline.judge.report import load_report
from faultline.kernel import build, fragments, store
from faultline.run import inputs, runner
from faultline.run.options import BugsOptions, MinimizeOptions, RunOptions, connect_options
from faultline.search import minimize
from faultline.vm.backends import backend_class
from faultline.vm.lava import lava_run_path

DEFAULT_SEEDS = 10
SIDES = ("buggy", "fixed", "nofaults")
DOCS_MD = os.path.join(TOP, "docs", "corpus.md")
# docs/corpus.md keeps its hand-written part; the command replaces what
# follows this heading.
RECALL_HEADING = "## Recall"
COLUMNS = ("bug", "base", "scenario", "buggy failed/N", "time to first failure",
           "fixed passed/N", "no-faults buggy failed/N", "reproducible", "minimal faults")


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


def reusable(rundir, image, scenario_path=None, backend="qemu"):
    """The Report of a finished run in @rundir on @image (of the scenario
    file @scenario_path as it is now, on @backend), or None."""
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
    return r


def run_seed(scname, seed, side, kern, opts_base, rundir, builds_of, no_rules):
    """One run (or its earlier result): (Report, reused).  @no_rules: an
    empty rules file, the "nofaults" side's --rules."""
    image, modules = kern
    r = reusable(rundir, image, scenario.find(scname), opts_base.backend)
    if r is not None:
        return r, True
    shutil.rmtree(rundir, ignore_errors=True)
    os.makedirs(rundir)
    opts = RunOptions(**{**opts_base.__dict__, "kernel": image, "modules": modules,
                         "rules": no_rules if side == "nofaults" else None})
    sc = runner.load_scenario(scname, opts)
    if image not in builds_of:
        builds_of[image] = build_all(image, modules, True)
    r, _ = runner.one_run(sc, seed, opts, builds_of[image], rundir, verbose=False)
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


# ---------------------------------------------------------------- table

def caught(r):
    """A run that broke a guarantee (crash, hang, splat, data loss):
    judge.broken_guarantee() of its report, recomputed so that runs kept
    from before the field existed count the same way."""
    return judge.broken_guarantee(r) is not None


def row_of(bug, scname, seeds, runs, first, det_note=None):
    """One table row (a dict) from @runs {side: [(seed, Report, rundir)]}.
    A buggy or no-faults run counts as a catch only when it broke a
    guarantee; one that failed only a workload check (the run did not do
    what the scenario needs) is counted apart.  A fixed run counts as
    failed whatever it failed."""
    def failed(side):
        return [x for x in runs.get(side, []) if x[1].status != EXIT_PASS]

    def catches(side):
        return [x for x in runs.get(side, []) if caught(x[1])]

    buggy = runs.get("buggy", [])
    t, ttff = 0.0, None
    for _, r, _ in buggy:           # seed order: what a user waits for
        t += r.elapsed_s
        if caught(r):
            ttff = t
            break
    fail_b = catches("buggy")
    row = {"bug": bug.name, "base": bug.base + (" +KASAN" if bug.kasan else ""),
           "fix": bug.fix, "scenario": scname, "seeds": seeds,
           "buggy": {"n": len(buggy), "failed": len(fail_b),
                     "failed_seeds": [s for s, _, _ in fail_b],
                     "workload_misses": [{"seed": s, "reason": r.reason}
                                         for s, r, _ in failed("buggy") if not caught(r)]},
           "time_to_first_failure_s": None if ttff is None else round(ttff, 1),
           "first_failure": None if not fail_b else {
               "seed": fail_b[0][0], "outcome": fail_b[0][1].outcome,
               "broken_guarantee": judge.broken_guarantee(fail_b[0][1]),
               "reason": fail_b[0][1].reason, "rundir": fail_b[0][2]},
           "deterministic_note": det_note}
    for side in ("fixed", "nofaults"):
        rs = runs.get(side)
        if rs is None:
            row[side] = None
            continue
        bad = failed(side) if side == "fixed" else catches(side)
        row[side] = {"n": len(rs), "failed": len(bad), "passed": len(rs) - len(failed(side)),
                     "failed_seeds": [s for s, _, _ in bad],
                     "reasons": [r.reason for _, r, _ in bad][:3],
                     # failed without a broken guarantee (a test that wants its faults)
                     "workload": len(failed(side)) - len(bad)}
    row["runs"] = {side: [{"seed": s, "status": r.status, "outcome": r.outcome,
                           "broken_guarantee": judge.broken_guarantee(r),
                           "elapsed_s": round(r.elapsed_s, 1), "rundir": d}
                          for s, r, d in rs] for side, rs in runs.items()}
    row["repro"] = first
    return row


def cells(row):
    """The table's cells of @row, as text."""
    def frac(side, key):
        s = row.get(side)
        return "not run" if not s else f"{s[key]}/{s['n']}"
    ttff = row["time_to_first_failure_s"]
    first = row.get("repro") or {}
    if not row["buggy"]["failed"]:
        repro = minimal = "-"
    else:
        repro = ("yes" if first.get("reproducible") else
                 "no" if "reproducible" in first else "not run")
        minimal = (str(first["minimal_faults"]) if first.get("minimal_faults") is not None
                   else (first.get("minimize") or "not run"))
    misses = len(row["buggy"].get("workload_misses") or ())

    def workload(side):
        n = (row.get(side) or {}).get("workload")
        return f" (+{n} workload)" if n else ""
    return [row["bug"], row["base"], row["scenario"],
            f"{row['buggy']['failed']}/{row['buggy']['n']}"
            + (f" (+{misses} workload)" if misses else ""),
            "-" if ttff is None else f"{ttff:.0f} s",
            frac("fixed", "passed"), frac("nofaults", "failed") + workload("nofaults"),
            repro, minimal]


def markdown(rows, seeds_text, deterministic):
    lines = [f"Seeds {seeds_text}, " + ("--deterministic" if deterministic else
                                         "not --deterministic") + ".", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cells(r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def text_table(rows):
    table = [list(COLUMNS)] + [cells(r) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                     for r in table)


def update_docs(md, path=DOCS_MD):
    """Replace everything after RECALL_HEADING in docs/corpus.md with @md."""
    with open(path) as f:
        text = f.read()
    head = text.split(RECALL_HEADING, 1)[0]
    with open(path, "w") as f:
        f.write(head + RECALL_HEADING + "\n\n"
                "Measured by `faultline bugs --docs` (columns: seeds on which the buggy "
                "kernel broke a guarantee, with workload-only failures apart; wall time of "
                "its runs in seed order up to the first such failure; passed seeds on the "
                "fixed kernel; the same count on the buggy kernel with "
                "the scenario's rules removed, i.e. without the fault device's help; "
                "whether `repro` of the first failure fails the same way; the faults "
                "`minimize` leaves).\n\n" + md)


def write_outputs(out, rows, all_runs, seeds_text, deterministic, docs):
    with open(os.path.join(out, "corpus.json"), "w") as f:
        json.dump({"seeds": seeds_text, "deterministic": deterministic, "rows": rows},
                  f, indent=1)
    md = markdown(rows, seeds_text, deterministic)
    with open(os.path.join(out, "corpus.md"), "w") as f:
        f.write("# faultline bugs\n\n" + md)
    if all_runs:
        kcidb.write(os.path.join(out, "kcidb.json"), all_runs)
    if docs:
        update_docs(md)


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


def campaign(args: BugsOptions):
    """`faultline bugs`: 0 when every buggy kernel failed at least once and
    every fixed kernel passed every seed, 1 otherwise."""
    if args.list:
        for b in select(args.names):
            print(f"{b.name:32} {b.base + (' +KASAN' if b.kasan else ''):20} "
                  f"{b.fix} {','.join(b.scenarios)}")
        return 0
    seeds = parse_seeds(args.seeds)
    corpus = select(args.names)
    if args.budget < 1:
        raise SetupError("--budget must be >= 1")
    backend_options = check_backend(args.backend, args.connect)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    seeds_text = f"{seeds[0]}..{seeds[-1]}"
    # `--rules /dev/null`, as a file a run directory can keep a copy of.
    no_rules = os.path.join(out, "no-faults.rules")
    with open(no_rules, "w") as f:
        f.write("# faultline bugs: the scenario's rules removed\n")
    opts_base = RunOptions(deterministic=args.deterministic, quiet=True, backend=args.backend,
                           backend_options=backend_options)
    rows, all_runs, builds_of = [], [], {}
    t0 = time.monotonic()
    for bug in corpus:
        kern = {"fixed": build_kernel(bug, False, args.make_jobs),
                "buggy": build_kernel(bug, True, args.make_jobs)}
        kern["nofaults"] = kern["buggy"]
        for scname in bug.scenarios:
            det_note = why_not_deterministic(scname) if args.deterministic else None
            o = RunOptions(**{**opts_base.__dict__,
                              "deterministic": args.deterministic and not det_note})
            if det_note:
                say(f"bugs: {bug.name}: {scname} runs without --deterministic: {det_note}")
            sides = ["buggy", "fixed"] + (["nofaults"] if args.no_faults else [])
            runs = {s: [] for s in sides}
            base = os.path.join(out, bug.name, scname)
            for side in sides:
                for seed in seeds:
                    d = os.path.join(base, side, f"seed{seed}")
                    r, reused = run_seed(scname, seed, side, kern[side], o, d, builds_of,
                                         no_rules)
                    runs[side].append((seed, r, d))
                    all_runs.append((r, d))
                    say(f"bugs: {bug.name} {scname} {side:8} seed {seed}: "
                        f"{'PASS' if r.status == EXIT_PASS else r.outcome.upper()}"
                        f" ({r.elapsed_s:.0f} s{', earlier run' if reused else ''})"
                        + ("" if r.status == EXIT_PASS else f": {r.reason[:100]}")
                        + f"  [{time.monotonic() - t0:.0f} s]")
            first = None
            failing = [x for x in runs["buggy"] if caught(x[1])]
            if failing and not args.no_repro:
                first = first_failure(failing[0][2], base, args.budget, True)
            rows.append(row_of(bug, scname, seeds_text, runs, first, det_note))
            write_outputs(out, rows, all_runs, seeds_text, args.deterministic, False)
    write_outputs(out, rows, all_runs, seeds_text, args.deterministic, args.docs)
    print(text_table(rows), flush=True)
    say(f"bugs: {os.path.join(out, 'corpus.json')}, corpus.md, kcidb.json"
        + (f"; {os.path.relpath(DOCS_MD, TOP)} updated" if args.docs else ""))
    ok = all(r["buggy"]["failed"] > 0 and r["fixed"]["failed"] == 0 for r in rows)
    return EXIT_PASS if ok else EXIT_FAIL
