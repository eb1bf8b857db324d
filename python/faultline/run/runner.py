"""Runs: one run of a scenario on a machine backend, run plans (scenarios x
seeds x repeats, sweeps) and repro.  Used by run, repro and compare.

The run directory layout is documented in docs/launcher.md.
"""

import json
import os
import shlex
import shutil
import sys
import time

from faultline import TOP, rules, scenario
from faultline.build.builds import build_all
from faultline.errors import EXIT_FAIL, EXIT_PASS, SetupError
from faultline.host import scratchdirs, stop
from faultline.host.messages import say
from faultline.host.versions import git_describe, sha256, versions
from faultline.judge import kcidb, mutate, report
from faultline.judge.failure import signature
from faultline.judge.judge import judge
from faultline.judge.report import load_report
from faultline.kernel import kconfig
from faultline.paths import VERSIONS
from faultline.run import aborted, restore
from faultline.run.inputs import parse_seeds
from faultline.run.options import RunOptions
from faultline.run.progress import Progress
from faultline.run.spec_builder import prepare_spec
from faultline.run.lava_watch import LavaView
from faultline.run.watch import GuestView, watch
from faultline.vm.backends import backend_class

DEFAULT_SCENARIO = "smoke"
# How the watch loop reads a backend's guest, where not GuestView.
VIEWS = {"lava": LavaView}
DEFAULT_OUT = os.path.join(TOP, "runs")
FAULTLINE = os.path.join(TOP, "scripts", "faultline")


def new_dir(base, name, claim=None):
    """A fresh BASE/DATE-TIME-NAME directory (run, sweep or comparison);
    @claim(path) is called before each try to create it."""
    os.makedirs(base, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for i in range(1000):
        d = os.path.join(base, f"{stamp}-{name}" + (f"-{i}" if i else ""))
        if claim:
            claim(d)
        try:
            os.makedirs(d)
            return d
        except FileExistsError:
            continue
    raise SetupError("cannot create a run directory in " + base)


def _load(name, opts):
    sc = scenario.apply_overrides(scenario.load(name), opts.memory, opts.cpus, opts.timeout)
    if opts.rules:
        scenario.replace_rules(sc, opts.rules)
    if opts.kcov:
        sc.vm.kcov = True
    if opts.deterministic:
        scenario.check_deterministic(sc)
    if opts.mutate:
        mutate.apply(sc, opts.mutate)
    if opts.restore:
        restore.check(sc, opts)
    return sc


def load_scenarios(names, opts):
    """Load and validate every scenario, its rules by the engine's parser,
    before anything is built."""
    backend_class(opts.backend)
    scs = [_load(name, opts) for name in names or [DEFAULT_SCENARIO]]
    rules.check_scenarios(scs)
    kconfig.check(scs, opts.kernel, opts.modules)
    return scs


def load_scenario(name, opts):
    """One scenario with the options' overrides, validated for the mode."""
    return load_scenarios([name], opts)[0]


def run_command(sc_path, seed, opts):
    """The `faultline run` line that repeats this run (with the same inputs)."""
    return shlex.join([FAULTLINE, "run", sc_path, "--seed", str(seed)] + opts.argv())


def write_run_meta(rundir, sc, opts, seed, builds, backend_info=None, start_time=None):
    shutil.copy(sc.path, os.path.join(rundir, "scenario.toml"))
    if sc.faults.rules_file:
        # repro reads the copy; keep the rules file beside it under its name.
        dst = os.path.join(rundir, sc.faults.rules_file)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy(os.path.join(os.path.dirname(sc.path), sc.faults.rules_file), dst)
    rules_copy = None
    if opts.rules:
        # --rules: the rules this run used, for repro (rules.txt is the same text).
        rules_copy = os.path.join(rundir, "rules-option.rules")
        if os.path.abspath(opts.rules) != rules_copy:
            shutil.copy(opts.rules, rules_copy)
    if os.path.exists(VERSIONS):
        shutil.copy(VERSIONS, os.path.join(rundir, "versions.env"))
    meta = {
        "scenario": sc.name, "scenario_file": sc.path, "seed": seed,
        "kernel_mode": sc.kernel_mode,
        **opts.meta(rules_copy),
        "kernel_image": builds.kernel,
        "kernel_sha256": sha256(builds.kernel),
        "initramfs_sha256": sha256(builds.initramfs),
        "qemu_build": os.path.basename(builds.qemu_dir),
        "guest_build": os.path.basename(builds.guest_dir),
        "qemu": builds.qemu_dir, "guest": builds.guest_dir, "versions": versions(),
        "faultline": git_describe(), "argv": sys.argv,
        "run_command": run_command(sc.path, seed, opts),
        "repro": shlex.join([FAULTLINE, "repro", rundir]),
    }
    if opts.mutate:
        meta["mutate_rule"] = mutate.rule(opts.mutate).split("  #")[0]
    if backend_info is not None:
        meta["backend_info"] = backend_info
    if start_time is not None:
        meta["start_time"] = start_time
    with open(os.path.join(rundir, "run.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def scratch_dir(rundir=None):
    """Disk image, initramfs and QMP socket: in RAM, owned by this process
    (scratchdirs.new_scratch: a killed launcher's is removed by the next one)."""
    return scratchdirs.new_scratch(rundir)


def boot_and_judge(sc, seed, opts, builds, rundir, scratch):
    """Prepare the inputs in @scratch, boot the machine, watch it, judge
    it: a Report.  @scratch is emptied, not removed: see one_run."""
    t0 = time.monotonic()
    clock = restore.PhaseClock(Progress(len(sc.tests), opts.quiet))
    try:
        if opts.restore:
            m = restore.machine(sc, seed, opts, builds, rundir, scratch)
        else:
            spec = prepare_spec(sc, builds, rundir, scratch=scratch, seed=seed,
                                deterministic=opts.deterministic, accel=opts.accel)
            m = backend_class(opts.backend)(spec, **opts.backend_options)
        t_start = time.monotonic()
        with m:
            m.start()
            t_run = time.monotonic()
            result = watch(m, sc.timeout_s, clock, view=VIEWS.get(m.backend, GuestView)(m))
    finally:
        scratchdirs.empty_scratch(scratch)
    r = judge(sc, rundir, seed, opts.deterministic, result, time.monotonic() - t0)
    result.backend_info["phases"] = clock.phases(t_start - t0, t_run - t_start, result.elapsed_s,
                                                 time.monotonic() - t0)
    return r, result


@aborted.tracks_run
def one_run(sc, seed, opts, builds, rundir, verbose=True, scratch=None):
    """One run into @rundir: run.json, the machine's files, report.json,
    stats.json, plots, junit.xml, kcidb.json; prints the summary unless
    not @verbose (matrix).  @scratch: its scratch directory, if the caller
    made it before the run directory.  (Report, run.json)"""
    # The scratch directory (its owner.json names @rundir) exists before
    # anything is written into the run directory and outlives the machine
    # until report.json is: a launcher killed at any point in between
    # leaves the next launcher's sweep() what it needs to write the report.
    scratch = scratch or scratch_dir(rundir)
    try:
        builds = builds.for_scenario(sc)
        kconfig.check_image(sc, builds.guest_dir)
        start = time.time()
        meta = write_run_meta(rundir, sc, opts, seed, builds, start_time=start)
        if not opts.quiet:
            say(f"running {sc.name} seed {seed}: {sc.description}")
        r, result = boot_and_judge(sc, seed, opts, builds, rundir, scratch)
        meta = write_run_meta(rundir, sc, opts, seed, builds, result.backend_info, start)
        if isinstance(r.faults, dict) and "rules" in r.faults:
            with open(os.path.join(rundir, "stats.json"), "w") as f:
                json.dump(r.faults, f, indent=1)
        r.plots = report.write_plots(rundir, r)
        r.save(rundir)
    except stop.Aborted:
        raise       # tracks_run writes the report, then aborted.finish() removes the scratch
    except BaseException:
        scratchdirs.remove_scratch(scratch)
        raise
    scratchdirs.remove_scratch(scratch)
    report.write_junit(os.path.join(rundir, "junit.xml"), [(r, rundir)])
    kcidb.write(os.path.join(rundir, "kcidb.json"), [(r, rundir)])
    if not verbose:
        return r, meta
    report.print_report(r, rundir)
    if r.status != EXIT_PASS:
        print(f"repro      {meta['repro']}\n           {meta['run_command']}", flush=True)
    return r, meta


def run_plan(names, opts, seed=None, seeds=None, repeat=1, keep_going=False,
             out=DEFAULT_OUT, junit=None, name=None, kcidb_path=None, jobs=1):
    """Every (scenario, seed, repeat); (worst status, [(Report, rundir)]).

    @name renames the scenario in run directories and reports (repro)."""
    scs = load_scenarios(names, opts)
    if seed is not None and seeds:
        raise SetupError("--seed and --seeds exclude each other")
    if repeat < 1:
        raise SetupError("--repeat must be >= 1")
    seed_list = parse_seeds(seeds) if seeds else None
    t0 = time.monotonic()
    builds = build_all(opts.kernel, opts.modules, opts.quiet)
    build_s = time.monotonic() - t0
    plan = []
    for sc in scs:
        if name:
            sc.name = name
        for s in seed_list or [seed if seed is not None else sc.faults.seed]:
            plan += [(sc, s, i) for i in range(repeat)]
    os.makedirs(out, exist_ok=True)
    group = None
    if len(plan) > 1:
        group = new_dir(out, (scs[0].name if len(scs) == 1 else "multi") + "-sweep")
    results, repro_cmds = [], {}
    if group and jobs > 1:
        results, repro_cmds = restore.run_parallel(plan, opts, builds, group, jobs, keep_going,
                                                   one_run)
    for sc, s, i in ([] if group and jobs > 1 else plan):
        # The scratch's owner.json names the run directory before it exists
        # (scratchdirs.claim): no moment leaves a run directory nobody owns.
        scratch = scratch_dir()
        try:
            if group:
                rundir = os.path.join(group, f"{sc.name}-seed{s}" + (f"-r{i}" if i else ""))
                scratchdirs.claim(scratch, rundir)
                os.makedirs(rundir)
            else:
                rundir = new_dir(out, sc.name, claim=lambda d: scratchdirs.claim(scratch, d))
        except Exception:
            scratchdirs.remove_scratch(scratch)
            raise
        r, meta = one_run(sc, s, opts, builds, rundir, scratch=scratch)
        results.append((r, rundir))
        repro_cmds[rundir] = meta["repro"]
        if r.status != EXIT_PASS and not keep_going and len(plan) > 1:
            say(f"stopping at the first failure (seed {s}); --keep-going runs the rest")
            break
    if junit:
        report.write_junit(junit, results)
    if kcidb_path:
        kcidb.write(kcidb_path, results)
    if group:
        report.write_junit(os.path.join(group, "junit.xml"), results)
        kcidb.write(os.path.join(group, "kcidb.json"), results)
        report.write_summary(os.path.join(group, "summary"), results, repro_cmds)
        print("\nsummary (" + os.path.join(group, "summary.txt") + "):")
        print("\n".join("  " + x for x in report.summary_lines(results)))
        failing = [(r, d) for r, d in results if r.status != EXIT_PASS]
        for r, d in failing:
            print(f"  repro seed {r.seed}: {repro_cmds[d]}")
        print(f"{len(results) - len(failing)} passed, {len(failing)} failed"
              + (f", {len(plan) - len(results)} not run" if len(plan) > len(results) else ""))
    if not opts.quiet:
        total = time.monotonic() - t0
        say(f"phases: build {build_s:.1f}s, run{'s' if len(results) > 1 else ''} "
            f"{total - build_s:.1f}s, total {total:.1f}s")
    return max(r.status for r, _ in results), results


# ---------------------------------------------------------------- repro

def load_run(rundir):
    """(run.json, Report) of a run directory."""
    try:
        with open(os.path.join(rundir, "run.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        raise SetupError(f"{rundir} is not a faultline run directory ({e})") from None
    return meta, load_report(rundir)


def repro_options(meta, deterministic, quiet):
    """The RunOptions of a run's run.json (@deterministic: the mode to rerun in)."""
    return RunOptions.from_meta(meta, deterministic, quiet)


def repro(rundir, out=DEFAULT_OUT, deterministic=None, quiet=False):
    """Run @rundir again with its inputs and compare; (status, new rundir)."""
    meta, orig = load_run(rundir)
    if deterministic is None:
        deterministic = meta["deterministic"]
    if not meta["deterministic"]:
        say("note: the original run was not deterministic (--deterministic); "
            "its digest and KTAP need not match")
    opts = repro_options(meta, deterministic, quiet)
    if opts.rules:
        # The run's copy of its --rules file, wherever the directory is now.
        opts.rules = os.path.join(rundir, os.path.basename(opts.rules))
    sc = load_scenarios([os.path.join(rundir, "scenario.toml")], opts)[0]
    if opts.kernel and not os.path.exists(opts.kernel):
        raise SetupError(f"the run's kernel {opts.kernel} is gone")
    builds = build_all(opts.kernel, opts.modules, quiet).for_scenario(sc)
    differs = []
    if os.path.basename(builds.qemu_dir) != meta.get("qemu_build"):
        differs.append(f"QEMU build {os.path.basename(builds.qemu_dir)} "
                       f"(run: {meta.get('qemu_build')})")
    for key, path in (("kernel_sha256", builds.kernel), ("initramfs_sha256", builds.initramfs)):
        if meta.get(key) and sha256(path) != meta[key]:
            differs.append(f"{os.path.basename(path)} differs from the run's")
    for d in differs:
        say(f"warning: input changed since the run: {d}")
    sc.name = meta.get("scenario", sc.name)
    sc.kernel_mode = meta.get("kernel_mode", sc.kernel_mode)   # compare sets it per side
    new = new_dir(out, sc.name + "-repro")
    r, _ = one_run(sc, meta["seed"], opts, builds, new)
    return repro_verdict(rundir, orig, new, r, deterministic), new


def repro_verdict(orig_dir, orig, new_dir_, new, deterministic):
    """Compare a rerun with its original (Reports): outcome, the failure,
    and under --deterministic the fault digest and KTAP.  Without it the
    faults land on other I/Os: the digest is shown, not judged."""

    def ktap(d):
        with open(os.path.join(d, "ktap.log"), errors="replace") as f:
            return f.read()
    checks = [("outcome", orig.outcome, new.outcome)]
    if orig.status != EXIT_PASS:
        checks.append(("failure", signature(orig_dir, orig), signature(new_dir_, new)))
    if deterministic:
        checks += [("fault digest", orig.digest, new.digest),
                   ("KTAP", "identical", "identical" if ktap(orig_dir) == ktap(new_dir_)
                    else "differs")]
    ok = True
    for what, a, b in checks:
        same = a == b
        ok &= same
        print(f"repro {what:12} {'match' if same else 'MISMATCH'}: {a} -> {b}")
    if not deterministic:
        print(f"repro fault digest  {orig.digest} -> {new.digest} (not judged: without "
              "--deterministic the faults land on other I/Os)")
    print(f"repro: {'reproduced' if ok else 'NOT reproduced'} ({orig_dir} -> {new_dir_})")
    if not ok and new.status == EXIT_PASS:
        return EXIT_FAIL
    return new.status
