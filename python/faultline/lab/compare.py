"""`faultline compare`: one scenario on a baseline and a series kernel,
N runs each, interleaved, and the cover-letter table (docs/compare.md).
"""

import dataclasses
import json
import os
import shlex
import sys

from faultline.build.builds import build_all
from faultline.errors import EXIT_CRASH, EXIT_FAIL, EXIT_PASS, EXIT_SETUP, SetupError
from faultline.judge import kcidb, plot, table
from faultline.judge.report import write_junit
from faultline.judge.stats import all_zero
from faultline.kernel import kconfig
from faultline.kernel.store import label
from faultline.run import inputs, runner
from faultline.run.options import CompareOptions
from faultline.scenario import KERNEL_MODES

DEFAULT_METRICS = ["vmstat pswpout", "vmstat pgrotated", "pages_verified"]


def parse_metrics(text):
    """'a,b,vmstat pgrotated' -> ['a', 'b', 'vmstat pgrotated']."""
    names = [m.strip() for m in text.split(",")] if text else []
    if text is not None and not all(names):
        raise SetupError(f"--metrics {text!r}: empty metric name")
    return names


def metric_value(name, report):
    """A metric of one run: a KTAP diagnostic ('# NAME VALUE', or the
    '# vmstat NAME DELTA' line when only that exists), rule hits
    ('hits RULE', 'hits'), or the run's wall time ('elapsed_s')."""
    diag = report.diag
    if name in diag:
        return diag[name]
    if "vmstat " + name in diag:
        return diag["vmstat " + name]
    faults = report.faults
    rules = faults.get("rules", []) if isinstance(faults, dict) else []
    if name == "hits":
        return sum(r["hits"] for r in rules)
    if name.startswith("hits "):
        for r in rules:
            if r["name"] == name[5:]:
                return r["hits"]
    if name == "elapsed_s":
        return report.elapsed_s
    return None


def collect(metrics, expect, runs):
    """Table rows from {side: [report, ...]}; metrics missing on a side are
    reported, metrics missing in some runs keep the runs that have them."""
    rows, missing = [], []
    for name in metrics:
        a = [v for v in (metric_value(name, r) for r in runs["baseline"]) if v is not None]
        b = [v for v in (metric_value(name, r) for r in runs["series"]) if v is not None]
        if not a or not b:
            missing.append(name)
            continue
        rows.append((name, a, b, expect.get(name)))
    return rows, missing


def unjudged_expectations(expect, runs):
    """An expectation cannot hold on a metric that some run lacks: each
    such metric, with the runs that have no value for it."""
    out = []
    for name in expect:
        lacking = [f"{side}-{i}" for side in ("baseline", "series")
                   for i, r in enumerate(runs[side], 1) if metric_value(name, r) is None]
        if lacking or not runs["baseline"] or not runs["series"]:
            out.append(f"{name} (no value in {', '.join(lacking) or 'any run of a side'})")
    return out


def failed_runs(table_runs):
    """Runs that did not pass (a `not ok`, a splat, an expectation): each
    one fails the comparison, its metrics are from a broken run."""
    return [f"run {t['side']}-{t['run']} {t['outcome']}" for t in table_runs
            if t["status"] != EXIT_PASS]


def zero_on_both(rows):
    """'zero' means no data error on either kernel: a baseline that corrupts
    data makes the comparison meaningless, so it fails too."""
    return [name for name, a, b, exp in rows if exp == "zero" and not all_zero(a)]


def parse_kernel_modes(text, sc):
    """--kernel-modes BASELINE,SERIES, else the scenario's [compare] kernel_modes."""
    modes = sc.compare.kernel_modes
    if text is not None:
        modes = [m.strip() for m in text.split(",")]
        if len(modes) != 2 or not all(m in KERNEL_MODES for m in modes):
            raise SetupError(f"--kernel-modes {text!r}: expected BASELINE,SERIES, each one "
                             f"of {', '.join(KERNEL_MODES)}")
    return {"baseline": modes[0], "series": modes[1]}


def plan_seeds(opts, sc):
    if opts.seed is not None and opts.seeds:
        raise SetupError("--seed and --seeds exclude each other")
    if opts.seeds:
        return inputs.parse_seeds(opts.seeds)
    if opts.runs < 1:
        raise SetupError("--runs must be >= 1")
    return [opts.seed if opts.seed is not None else sc.faults.seed] * opts.runs


def compare(opts: CompareOptions):
    """Run the comparison; exit 0 when every declared expectation holds
    and every run passed, 1 when not, 3 when a run crashed or hung."""
    base_opts = opts.run_options
    sc = runner.load_scenario(opts.scenario, base_opts)
    modes = parse_kernel_modes(opts.kernel_modes, sc)
    metrics = parse_metrics(opts.metrics) or sc.compare.metrics or DEFAULT_METRICS
    expect = {m: e for m, e in sc.compare.expect.items() if m in metrics}
    if not 0.5 <= opts.level < 1:
        raise SetupError(f"--level {opts.level}: expected e.g. 0.95")
    for k in (opts.baseline, opts.series):
        if not os.path.isfile(k):
            raise SetupError(f"no kernel image {k}")
    seeds = plan_seeds(opts, sc)
    kernels = {"baseline": (os.path.abspath(opts.baseline), opts.baseline_modules),
               "series": (os.path.abspath(opts.series), opts.series_modules)}
    for k, m in kernels.values():
        kconfig.check([sc], k, m)
    builds = {side: build_all(k, m, base_opts.quiet) for side, (k, m) in kernels.items()}
    group = runner.new_dir(opts.out, sc.name + "-compare")
    runs = {"baseline": [], "series": []}
    table_runs, worst, all_runs = [], EXIT_PASS, []
    for i, seed in enumerate(seeds, 1):
        for side in ("baseline", "series"):       # interleaved: A B A B
            kernel, modules = kernels[side]
            run_opts = dataclasses.replace(base_opts, kernel=kernel, modules=modules)
            rundir = os.path.join(group, f"{side}-{i}")
            os.makedirs(rundir)
            side_sc = dataclasses.replace(sc, kernel_mode=modes[side])
            r, meta = runner.one_run(side_sc, seed, run_opts, builds[side], rundir)
            all_runs.append((r, rundir))
            table_runs.append({"side": side, "run": i, "seed": seed, "rundir": rundir,
                               "status": r.status, "outcome": r.outcome,
                               "kernel": r.kernel, "repro": meta["repro"],
                               "command": meta["run_command"]})
            if r.status in (EXIT_CRASH, EXIT_SETUP):
                worst = max(worst, EXIT_CRASH)
                continue                        # no metrics from a dead guest
            runs[side].append(r)
    rows, missing = collect(metrics, expect, runs)
    labels = _labels(runs, kernels)
    text = table.format_table(rows, labels[0], labels[1], opts.level) if rows else ""
    failed = table.failed_expectations(table.compare_rows(rows, opts.level))
    failed += [f"{m} (baseline not zero)" for m in zero_on_both(rows)]
    failed += unjudged_expectations(expect, runs)
    failed += failed_runs(table_runs)
    report = _write(group, opts, sc, rows, labels, table_runs, missing, failed)
    _write_ci(group, opts, all_runs)
    print(f"\n{sc.name}: {labels[0]} vs {labels[1]}, {len(seeds)} run(s) each, "
          f"level {opts.level}\n")
    print(text, end="")
    for m in missing:
        print(f"  (metric {m!r}: no value in the runs; see a run's ktap.log for names)")
    bad = [t for t in table_runs if t["status"] != EXIT_PASS]
    for t in bad:
        print(f"  run {t['side']}-{t['run']} seed {t['seed']}: {t['outcome']} "
              f"({t['rundir']})")
    print(f"\nresults    {report}\nrepro      one command per run in compare.json "
          "(\"runs\"), e.g.\n           " + table_runs[0]["repro"])
    if failed:
        print(f"expectation failed: {', '.join(failed)}")
        worst = max(worst, EXIT_FAIL)
    elif expect:
        print(f"expectations hold: {', '.join(f'{m} {e}' for m, e in expect.items())}")
    if not rows:
        print("no metric had values on both kernels", file=sys.stderr)
        worst = max(worst, EXIT_FAIL)
    return worst


def _write_ci(group, opts, all_runs):
    """junit.xml and kcidb.json of every run; the metrics as numeric KCIDB tests."""
    with open(os.path.join(group, "compare.json")) as f:
        data = json.load(f)
    write_junit(os.path.join(group, "junit.xml"), all_runs)
    kcidb.write(os.path.join(group, "kcidb.json"), all_runs, compare=data)
    if opts.junit:
        write_junit(opts.junit, all_runs)
    if opts.kcidb:
        kcidb.write(opts.kcidb, all_runs, compare=data)


def _labels(runs, kernels):
    """Column titles: kernel releases when they differ, else the file names."""
    rel = [next((r.kernel for r in runs[s] if r.kernel), "") for s in
           ("baseline", "series")]
    if all(rel) and rel[0] != rel[1]:
        return rel
    names = [label(kernels[s][0]) or os.path.basename(kernels[s][0])
             for s in ("baseline", "series")]
    return names if names[0] != names[1] else ["baseline", "series"]


def _write(group, opts, sc, rows, labels, table_runs, missing, failed):
    data = table.to_json(rows, labels[0], labels[1], opts.level) if rows else {}
    data.update({"scenario": sc.name, "command": shlex.join(["faultline", *sys.argv[1:]]),
                 "baseline_kernel": os.path.abspath(opts.baseline),
                 "series_kernel": os.path.abspath(opts.series),
                 "runs": table_runs, "missing_metrics": missing,
                 "failed_expectations": failed})
    with open(os.path.join(group, "compare.json"), "w") as f:
        json.dump(data, f, indent=1)
    with open(os.path.join(group, "compare.txt"), "w") as f:
        f.write(table.format_table(rows, labels[0], labels[1], opts.level) if rows else "")
        f.write("\nruns:\n")
        for t in table_runs:
            f.write(f"  {t['side']}-{t['run']} seed {t['seed']} {t['outcome']}: {t['repro']}\n")
    if rows:
        stats = table.compare_rows(rows, opts.level)
        svg = plot.bars_svg(f"{sc.name}: {labels[0]} vs {labels[1]}",
                              [(s.metric, s.baseline, s.series) for s in stats],
                              labels[0], labels[1])
        with open(os.path.join(group, "compare.svg"), "w") as f:
            f.write(svg)
    return group
