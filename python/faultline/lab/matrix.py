"""`faultline matrix`: scenarios x seeds x kernels.  Locally the runs go
--jobs at a time; with --backend lava the jobs are written for a lab (and
run with lava-run when --run is given).  A progress line per finished run,
then a table (scenario x kernel: passes and failures over the seeds, each
failing seed with its repro command), junit.xml and kcidb.json of all.
"""

import json
import os
import shlex
import sys
import threading

from faultline.build.builds import build_all
from faultline.errors import EXIT_CRASH, EXIT_FAIL, EXIT_PASS, EXIT_SETUP, SetupError
from faultline.host.messages import say
from faultline.host.stop import Executor
from faultline.judge import kcidb
from faultline.judge.report import status_word, write_junit
from faultline import scenario
from faultline.kernel import kconfig
from faultline.kernel.store import label
from faultline.lab import lavajobs, matrix_results
from faultline.results import records
from faultline.run import inputs, runner
from faultline.run.options import MatrixOptions, RunOptions


def default_jobs(scenarios, ncpu=None):
    """As many VMs as the cores allow: each takes its vCPUs' worth (TCG)."""
    ncpu = ncpu or os.cpu_count() or 1
    return max(1, ncpu // max(sc.vm.cpus for sc in scenarios))


def plan(scenarios, seeds, kernels, refused=frozenset()):
    """Every (scenario, kernel index, seed) but the (scenario name, kernel
    index) pairs @refused: scenario-major, then kernel."""
    return [(sc, ki, s) for sc in scenarios for ki in range(len(kernels))
            if (sc.name, ki) not in refused for s in (seeds or [sc.faults.seed])]


def refusals(scs, kernels, every):
    """{(scenario name, kernel index): why} of the scenarios a kernel's
    config cannot run.  A list the user named is refused whole (one line,
    before anything is built); with --scenarios all (@every) each such
    pair is left out and said."""
    if not every:
        for k, m in kernels:
            kconfig.check(scs, k, m)
        return {}
    out = {}
    for ki, (k, m) in enumerate(kernels):
        for sc in scs:
            try:
                kconfig.check([sc], k, m)
            except SetupError as e:
                out[sc.name, ki] = str(e)
    return out


def summarize(results, kernel_names):
    """Rows of the matrix table from [(scenario, kernel index, Report, repro)]:
    [{scenario, kernel, passed, failed, crashed, setup, failing: [(seed, word, repro)]}]."""
    rows = {}
    for name, ki, r, repro in results:
        row = rows.setdefault((name, ki), {"scenario": name, "kernel": kernel_names[ki],
                                           "passed": 0, "failed": 0, "crashed": 0,
                                           "setup": 0, "failing": []})
        key = {EXIT_PASS: "passed", EXIT_FAIL: "failed", EXIT_CRASH: "crashed",
               EXIT_SETUP: "setup"}.get(r.status, "setup")
        row[key] += 1
        if r.status != EXIT_PASS:
            row["failing"].append((r.seed, r.outcome, repro))
    for row in rows.values():
        row["failing"].sort()
    return [rows[k] for k in sorted(rows, key=lambda k: (k[0], k[1]))]


def matrix_status(results):
    """0 all pass, 1 any failure, 3 any crash or hang (2: a run could not be set up)."""
    statuses = {r.status for _, _, r, _ in results}
    for s in (EXIT_CRASH, EXIT_SETUP, EXIT_FAIL):
        if s in statuses:
            return s
    return EXIT_PASS


def format_table(rows):
    w = max([len("scenario")] + [len(r["scenario"]) for r in rows])
    kw = max([len("kernel")] + [len(r["kernel"]) for r in rows])
    lines = [f"{'scenario':{w}}  {'kernel':{kw}}  {'pass':>4} {'fail':>4} {'crash':>5} "
             f"{'setup':>5}"]
    for r in rows:
        lines.append(f"{r['scenario']:{w}}  {r['kernel']:{kw}}  {r['passed']:>4} "
                     f"{r['failed']:>4} {r['crashed']:>5} {r['setup']:>5}")
        for seed, outcome, repro in r["failing"]:
            lines.append(f"{'':{w}}    seed {seed} {outcome}: {repro}")
    return "\n".join(lines) + "\n"


def kernel_label(kernel):
    """A kernel's column name: its tree's directory, or the image's name."""
    if not kernel:
        return "debian"
    if label(kernel):
        return label(kernel)        # built by `faultline kernel build`: its name
    tree = kcidb.kernel_tree(kernel)
    return os.path.basename(tree) if tree else os.path.basename(kernel)


def scenario_names(text):
    """--scenarios A,B,... as names; `all`: every scenario that tests the
    kernel (not faultline's self-tests)."""
    names = [s for s in text.split(",") if s]
    if not names:
        raise SetupError("--scenarios A,B,...: at least one scenario")
    if "all" in names:
        if names != ["all"]:
            raise SetupError("--scenarios all stands alone")
        names = [n for n, d in scenario.list_all() if not scenario.is_selftest(n, d)]
    return names


def run_matrix(opts: MatrixOptions):
    names_given = scenario_names(opts.scenarios)
    kernels = [(k, None) for k in opts.kernel] if opts.kernel else [(None, None)]
    if opts.modules:
        if len(opts.modules) != len(kernels) or not opts.kernel:
            raise SetupError("--modules: give one per --kernel, in the same order")
        kernels = [(k, m) for (k, _), m in zip(kernels, opts.modules)]
    if opts.results and opts.backend != "qemu":
        raise SetupError("--results records runs of --backend qemu")
    matrix_results.check_path(opts.results)
    for k, _ in kernels:
        if k and not os.path.isfile(k):
            raise SetupError(f"no kernel image {k}")
    seeds = inputs.parse_seeds(opts.seeds) if opts.seeds else None
    load_opts = RunOptions(deterministic=opts.deterministic, backend=opts.backend,
                                  quiet=True)
    scs = runner.load_scenarios(names_given, load_opts)
    refused = refusals(scs, kernels, opts.scenarios == "all"
                       and not (opts.backend == "lava" and not opts.run))
    if opts.backend == "lava" and not opts.run:
        out = opts.out_jobs or runner.new_dir(opts.out, "matrix-lava")
        jobs = lavajobs.write_jobs(scs, kernels, seeds, out, opts.base_url,
                                   opts.deterministic)
        print(f"{len(jobs)} LAVA jobs in {os.path.join(out, 'jobs')} "
              "(submit: lavacli jobs submit FILE; --run runs them here with lava-run)")
        return EXIT_PASS
    if opts.jobs is not None and opts.jobs < 1:
        raise SetupError("--jobs must be >= 1")
    jobs = opts.jobs or default_jobs(scs)
    builds = [build_all(k, m, quiet=True) for k, m in kernels]
    matrix_results.check(opts.results, [records.builds_identity(b, k)
                                        for b, (k, _) in zip(builds, kernels)])
    # Guest images with a scenario's optional tools, built here once rather
    # than by several runs at a time.
    for sc in scs:
        for (k, m), b in zip(kernels, builds):
            b.for_scenario(sc)
    group = runner.new_dir(opts.out, "matrix")
    todo = plan(scs, seeds, kernels, refused)
    names = [kernel_label(k) for k, _ in kernels]
    if len(set(names)) != len(names):
        names = [f"{n}#{i}" for i, n in enumerate(names)]
    for (name, ki), why in sorted(refused.items()):
        say(f"matrix: {name} on {names[ki]}: not run: {why}")
    say(f"matrix: {len(scs)} scenario(s) x {len(seeds or [None])} seed(s) x "
        f"{len(kernels)} kernel(s) = {len(todo)} runs, {jobs} at a time, in {group}")
    lock = threading.Lock()
    done, results = [0], []

    def one(index, item):
        sc, ki, seed = item
        kernel, modules = kernels[ki]
        o = RunOptions(kernel=kernel, modules=modules, deterministic=opts.deterministic,
                              backend=opts.backend, quiet=True)
        rundir = os.path.join(group, f"{sc.name}-kernel{ki}-seed{seed}")
        os.makedirs(rundir)
        r, meta = runner.one_run(sc, seed, o, builds[ki], rundir, verbose=False)
        rec = matrix_results.record_of(rundir, r, meta, names[ki]) if opts.results else None
        with lock:
            if rec is not None:
                matrix_results.write(opts.results, rec)
            done[0] += 1
            results.append((index, (sc.name, ki, r, meta["repro"]), (r, rundir)))
            counts = [sum(1 for _, (_, _, x, _), _ in results if x.status == s)
                      for s in (EXIT_PASS, EXIT_FAIL, EXIT_CRASH)]
            print(f"[{done[0]}/{len(todo)}] {sc.name} {names[ki]} seed {seed}: "
                  f"{status_word(r.status)}  (pass {counts[0]}, fail {counts[1]}, "
                  f"crash {counts[2]})", flush=True)
        return r

    with Executor(max_workers=jobs) as pool:
        for f in [pool.submit(one, i, item) for i, item in enumerate(todo)]:
            f.result()
    results.sort(key=lambda x: x[0])
    runs = [run for _, _, run in results]
    results = [res for _, res, _ in results]
    rows = summarize(results, names)
    table = format_table(rows)
    print("\n" + table, end="")
    write_junit(os.path.join(group, "junit.xml"), runs)
    kcidb.write(os.path.join(group, "kcidb.json"), runs)
    if opts.junit:
        write_junit(opts.junit, runs)
    if opts.kcidb:
        kcidb.write(opts.kcidb, runs)
    with open(os.path.join(group, "matrix.json"), "w") as f:
        json.dump({"command": shlex.join(["faultline", *sys.argv[1:]]), "kernels": names,
                   "rows": rows}, f, indent=1)
    with open(os.path.join(group, "matrix.txt"), "w") as f:
        f.write(table)
    status = matrix_status(results)
    passed = sum(1 for _, _, r, _ in results if r.status == EXIT_PASS)
    print(f"results    {group}\n{passed} passed, {len(results) - passed} failed")
    return status

