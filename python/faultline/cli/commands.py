"""The command front ends: each turns its parsed command line into the
typed options of a domain module and calls it (exit status back)."""

import json
import os
import shlex
import shutil
import sys

from faultline import scenario
from faultline.bench import bench
from faultline.bench import results as bench_results
from faultline.bugs import explore_table, fuzz_replay, fuzz_table, recall, recall_fuzz, recall_table
from faultline.build.builds import build_all, run_script
from faultline.errors import EXIT_FAIL, EXIT_SETUP, SetupError
from faultline.execute import boot as program_boot
from faultline.execute import repro as program_repro
from faultline.execute import results as program_results
from faultline.fuzz import command as fuzz_command
from faultline.fuzz import manager as fuzz_manager
from faultline.fuzz import merge as fuzz_merge
from faultline.fuzz import shards as fuzz_shards
from faultline.fuzz import state as fuzz_state
from faultline.fuzz import triage as fuzz_triage


from faultline.execute import shrink as program_shrink
from faultline.findings import command as findings_command
from faultline.findings import finding
from faultline.host.messages import say
from faultline.judge import report
from faultline.kernel import build, configure, fragments, store
from faultline.lab import check, compare, lavajobs, libvirtxml, matrix, matrix_results
from faultline.prog import tool as prog_tool
from faultline.results import docs
from faultline.run import inputs, runner
from faultline.run.options import (BenchOptions, BugsFuzzOptions, BugsOptions, CompareOptions,
                                   ExploreOptions, MatrixOptions, MinimizeOptions, RunOptions,
                                   from_args)
from faultline.run.runner import DEFAULT_OUT
from faultline.run.spec_builder import prepare_spec
from faultline.search import explore, minimize


def cmd_run(args):
    status, _ = runner.run_plan(args.scenarios, RunOptions.from_args(args), seed=args.seed,
                                seeds=args.seeds, repeat=args.repeat,
                                keep_going=args.keep_going, out=args.out, junit=args.junit,
                                kcidb_path=args.kcidb, jobs=args.jobs)
    return status


def cmd_matrix(args):
    return matrix.run_matrix(from_args(MatrixOptions, args))


def cmd_lava(args):
    if args.seed is not None and args.seeds:
        raise SetupError("--seed and --seeds exclude each other")
    seeds = inputs.parse_seeds(args.seeds) if args.seeds else (
        [args.seed] if args.seed is not None else None)
    if args.bug:
        if args.scenarios or args.kernel:
            raise SetupError("--bug brings its scenarios and kernels: no SCENARIO or --kernel")
        corpus = recall.select(args.bug)
    else:
        if not args.scenarios:
            raise SetupError("lava needs a SCENARIO (or --bug NAME)")
        if args.modules and len(args.modules) != len(args.kernel or []):
            raise SetupError("--modules: give one per --kernel, in the same order")
        kernels = list(zip(args.kernel, args.modules or [None] * len(args.kernel))) \
            if args.kernel else [(None, None)]
        for k, _ in kernels:
            if k and not os.path.isfile(k):
                raise SetupError(f"no kernel image {k}")
        opts = RunOptions(deterministic=args.deterministic)
        scs = [runner.load_scenario(name, opts) for name in args.scenarios]
    out = os.path.abspath(args.out or runner.new_dir(DEFAULT_OUT, "lava-jobs"))
    if args.bug:
        jobs = lavajobs.write_bug_jobs(corpus, seeds, out, args.base_url, args.deterministic)
    else:
        jobs = lavajobs.write_jobs(scs, kernels, seeds, out, args.base_url, args.deterministic)
    for j in jobs:
        print(j)
    say(f"{len(jobs)} LAVA job(s); submit with: lavacli jobs submit FILE (docs/ci.md)")
    return 0


def cmd_repro(args):
    status, _ = runner.repro(args.rundir, args.out, args.deterministic, args.quiet)
    return status


def cmd_minimize(args):
    return minimize.minimize(from_args(MinimizeOptions, args))


def cmd_explore(args):
    return explore.explore(from_args(ExploreOptions, args,
                                     run_options=RunOptions.from_args(args)))


def cmd_list(args):
    width = shutil.get_terminal_size((100, 20)).columns
    every = scenario.list_all()
    user = [(n, d) for n, d in every if not scenario.is_selftest(n, d)]
    selftests = [(n, d) for n, d in every if scenario.is_selftest(n, d)]
    for heading, group in ((None, user), ("self-tests of faultline itself:", selftests)):
        if heading and group:
            print(f"\n{heading}")
        for name, desc in group:
            line = f"{name:32} {desc}"
            print(line if args.long or not sys.stdout.isatty() else line[:width - 1])
    return 0


def cmd_cmdline(args):
    opts = RunOptions.from_args(args)
    sc = runner.load_scenario(args.scenario, opts)
    seed = args.seed if args.seed is not None else sc.faults.seed
    builds = build_all(args.kernel, args.modules, quiet=True)
    outdir = os.path.abspath(args.out or os.path.join(DEFAULT_OUT, "cmdline-" + sc.name))
    os.makedirs(outdir, exist_ok=True)
    spec = prepare_spec(sc, builds, outdir, seed=seed, deterministic=opts.deterministic,
                        accel=opts.accel)
    say(f"inputs in {outdir} (disk.img, initramfs.cpio, rules.txt); console.log and "
        "ktap.log are written there; QMP on qmp.sock")
    print(shlex.join(spec.qemu_argv(os.path.join(outdir, "qmp.sock"))))
    return 0


def cmd_libvirt_xml(args):
    opts = RunOptions.from_args(args)
    sc = runner.load_scenario(args.scenario, opts)
    seed = args.seed if args.seed is not None else sc.faults.seed
    builds = build_all(args.kernel, args.modules, quiet=True)
    outdir = os.path.abspath(args.out or os.path.join(DEFAULT_OUT, "libvirt-xml-" + sc.name))
    path = libvirtxml.write_inputs(sc, builds, outdir, seed, opts.deterministic, opts.accel)
    say(f"inputs in {outdir} (disk.img, initramfs.cpio, rules.txt); the guest writes "
        "console.log and ktap.log there; run it with")
    print(f"virsh -c qemu:///system create {shlex.quote(path)}")
    return 0


def cmd_compare(args):
    if args.mutate is not None:
        raise SetupError("compare does not take --mutate: a mutated run fails its data check "
                         "on every kernel, so there is nothing to compare (use "
                         "`faultline run SCENARIO --mutate lie`)")
    return compare.compare(compare_options(args))


def compare_options(args):
    each = RunOptions(deterministic=args.deterministic, quiet=args.quiet,
                      memory=args.memory, cpus=args.cpus, timeout=args.timeout)
    return from_args(CompareOptions, args, run_options=each)


def cmd_show(args):
    return report.show(args.rundir)


def cmd_bench(args):
    return bench.bench(from_args(BenchOptions, args))


# The tables `faultline docs` generates: {results kind: (its records'
# fields, render(records, set path) -> text)}.
TABLE_KINDS = {"recall": (recall_table.RECORD_FIELDS, recall_table.render),
               "recall-fuzz": (fuzz_table.RECORD_FIELDS, fuzz_table.render),
               "fuzz": (fuzz_state.RECORD_FIELDS, fuzz_state.render),
               "findings": (finding.RECORD_FIELDS, finding.render),
               "explore-corpus": (explore_table.RECORD_FIELDS, explore_table.render),
               "bench": (bench_results.RECORD_FIELDS, bench_results.render),
               "scenarios": (matrix_results.RECORD_FIELDS, matrix_results.render)}


def refuse(options, what):
    """SetupError naming the first of @options ([(flag, given)]) given."""
    for flag, given in options:
        if given:
            raise SetupError(f"{flag} is not an option of {what}")


def bugs_options(args):
    """The typed options of `faultline bugs`: BugsFuzzOptions with --fuzz,
    BugsOptions else; an option of the other mode is one line."""
    recall_only = [("--deterministic", args.deterministic), ("--no-faults", args.no_faults),
                   ("--no-repro", args.no_repro), ("--import", args.import_dir),
                   ("--backend", args.backend != "qemu"), ("--connect", args.connect)]
    refuse([("--failure", args.failure is not None)],
           "bugs without --fuzz-verdict or --fuzz-replay")
    refuse([("--times", args.times != 2)], "bugs without --fuzz-replay")
    if args.fuzz and not args.list:
        refuse(recall_only, "bugs --fuzz (the fuzzer's defaults, no scenario)")
        return BugsFuzzOptions(
            names=args.names, seeds=recall.parse_seeds(args.seeds or recall_fuzz.DEFAULT_SEEDS),
            out=args.out or os.path.join(DEFAULT_OUT, "bugs-fuzz"),
            budget_s=fuzz_manager.parse_budget(args.budget or recall_fuzz.DEFAULT_BUDGET),
            jobs=args.jobs or 1, rerun=args.rerun, make_jobs=args.make_jobs,
            results=args.results, docs=args.docs)
    refuse([("--jobs", args.jobs is not None), ("--rerun", args.rerun)], "bugs without --fuzz")
    try:
        budget = int(args.budget or recall.DEFAULT_BUDGET)
    except ValueError:
        raise SetupError(f"--budget {args.budget!r}: expected minimize's number of runs "
                         "(a duration is --fuzz's)") from None
    return from_args(BugsOptions, args, seeds=args.seeds or str(recall.DEFAULT_SEEDS),
                     out=args.out or os.path.join(DEFAULT_OUT, "bugs"), budget=budget)


def cmd_bugs(args):
    if args.fuzz_verdict and args.fuzz_replay:
        raise SetupError("--fuzz-verdict and --fuzz-replay exclude each other")
    if args.fuzz_verdict:
        refuse([("NAME", args.names), ("--fuzz", args.fuzz), ("--list", args.list),
                ("--seeds", args.seeds), ("--budget", args.budget), ("--jobs", args.jobs),
                ("--rerun", args.rerun), ("--out", args.out), ("--times", args.times != 2)],
               "bugs --fuzz-verdict (it runs nothing)")
        status = recall_fuzz.set_verdict(args.results, *args.fuzz_verdict,
                                         failure=args.failure)
    elif args.fuzz_replay:
        refuse([("NAME", args.names), ("--fuzz", args.fuzz), ("--list", args.list),
                ("--seeds", args.seeds), ("--budget", args.budget), ("--jobs", args.jobs),
                ("--rerun", args.rerun)], "bugs --fuzz-replay")
        status = fuzz_replay.replay(args.results, *args.fuzz_replay, failure=args.failure,
                                    times=args.times, out=args.out)
    else:
        opts = bugs_options(args)
        if isinstance(opts, BugsFuzzOptions):
            status = recall_fuzz.campaign(opts)
        else:
            status = recall.campaign(opts)
    if args.docs and not args.list:
        docs.docs(TABLE_KINDS)
    return status


def cmd_docs(args):
    return docs.docs(TABLE_KINDS, check=args.check, docs_dir=args.docs_dir,
                     results_dir=args.results_dir)


def cmd_findings(args):
    return findings_command.run(args.names, results=args.results, out=args.out,
                                check_only=args.check, quiet=args.quiet)


def cmd_kernel(args):
    if args.kernel_cmd == "list":
        return store.list_built()
    cfg = fragments.KernelConfig(base=args.base, kasan=args.kasan, kcov=args.kcov)
    if args.kernel_cmd == "build":
        return build.build(args.src, cfg, patch_files=args.patch, name=args.name,
                            jobs=args.make_jobs)
    text, ident = configure.merged_config(args.src, cfg)
    if not args.out:
        sys.stdout.write(text)
        return 0
    with open(args.out, "w") as f:
        f.write(text)
    say(f"wrote {args.out} ({len(text.splitlines())} lines, from {ident})")
    return 0


def cmd_prog(args):
    if args.prog_cmd == "check":
        return prog_tool.check_files(args.files)
    if args.prog_cmd == "show":
        return program_results.show(args.rundir)
    if args.prog_cmd == "c":
        return cmd_prog_c(args)
    if args.prog_cmd == "minimize":
        if args.modules and not args.kernel:
            raise SetupError("--modules needs --kernel")
        return program_shrink.minimize_run(
            args.rundir, args.name, kernel=args.kernel, modules=args.modules,
            deterministic=args.deterministic, max_runs=args.max_runs, memory=args.memory,
            cpus=args.cpus, accel=args.accel, quiet=args.quiet)
    if args.prog_cmd == "run":
        if args.modules and not args.kernel:
            raise SetupError("--modules needs --kernel")
        return program_boot.run_programs(program_boot.ProgOptions(
            args.target, kernel=args.kernel, modules=args.modules,
            deterministic=args.deterministic, mutate=args.mutate, out=args.out,
            seed=args.seed if args.seed is not None else 1, timeout=args.timeout,
            memory=args.memory, cpus=args.cpus, accel=args.accel, quiet=args.quiet))
    for path in prog_tool.write_programs(args.seed, args.count, args.out):
        print(path)
    return 0


def cmd_fuzz_words(args):
    """`fuzz merge OUT SHARD...`, `fuzz lava-run SHARD...`, `fuzz triage
    DIR FAILURE VERDICT WHY` and `fuzz record DIR --results FILE`."""
    verb, rest = args.words[0], args.words[1:]
    if verb not in ("merge", "lava-run", "triage", "record"):
        raise SetupError(f"fuzz {verb}: expected merge OUT SHARD_DIR..., lava-run "
                         "SHARD_DIR..., triage DIR FAILURE VERDICT WHY or record DIR")
    refuse([("--lava", args.lava is not None), ("--programs", args.programs is not None),
            ("--from", args.from_dir), ("--resume", args.resume), ("--out", args.out),
            ("--base-url", args.base_url), ("--kernel", args.kernel), ("--plant", args.plant),
            ("--faults", args.faults != "all"),
            ("--results", args.results and verb != "record")], f"fuzz {verb}")
    if verb == "triage":
        if len(rest) != 4:
            raise SetupError(f"fuzz triage DIR FAILURE VERDICT WHY: a verdict is one of "
                             f"{', '.join(fuzz_triage.VERDICTS)}, WHY one quoted argument")
        rec = fuzz_manager.triage_failure(*rest)
        say(f"fuzz triage: {rec['signature']}: {rec['verdict']}: {rec['why']}")
        return 0
    if verb == "record":
        if len(rest) != 1 or not args.results:
            raise SetupError("fuzz record DIR --results FILE: one campaign directory and the "
                             "set its record goes to")
        rec = fuzz_manager.record_campaign(rest[0], args.results)
        untriaged = [s for s in rec["signatures"] if s not in rec["verdicts"]]
        say(f"fuzz record: {rest[0]}: {rec['programs']} programs in "
            f"{fuzz_state.hours(rec['elapsed_s'])}, {rec['failures']} failure(s)"
            + (f", {len(untriaged)} not triaged yet" if untriaged else "")
            + f"; recorded in {args.results}")
        return 0
    if verb == "lava-run":
        if not rest:
            raise SetupError("fuzz lava-run SHARD_DIR...: no shard given")
        for d in rest:
            fuzz_merge.load_shard(d, need_logs=False, what="fuzz lava-run")
        failed = [n for d in rest for n in fuzz_shards.run_local(d, args.quiet)]
        if failed:
            say(f"fuzz lava-run: LAVA failed {len(failed)} job(s): {' '.join(failed)}")
        return 1 if failed else 0
    if len(rest) < 2:
        raise SetupError("fuzz merge OUT SHARD_DIR...: expected OUT and at least one shard")
    res = fuzz_merge.merge(rest[0], rest[1:], args.quiet)
    say(f"fuzz merge: {rest[0]}: {res['shards']} shard(s) merged ({res['not_run']} of their "
        f"programs not run); the campaign: {res['programs']} programs, corpus "
        f"{res['corpus']} (+{res['added']}), edges "
        f"{res['edges']}, features {res['features']}, failures {res['failures']} "
        f"(+{res['new_failures']} new)")
    return EXIT_FAIL if res["failures"] else 0


def cmd_fuzz_lava(args):
    """`fuzz --lava N`: the shards, written in --out."""
    refuse([("--resume", args.resume), ("--results", args.results),
            ("--jobs", args.jobs != 1), ("--budget", args.budget != "30m"),
            ("--until-failure", args.until_failure), ("--faults", args.faults != "all"),
            ("--accel", args.accel != "tcg")], "fuzz --lava (a fresh --deterministic boot "
           "a program, under TCG)")
    if not args.out:
        raise SetupError("fuzz --lava N: --out DIR is where the shards go")
    programs = fuzz_shards.DEFAULT_PROGRAMS if args.programs is None else args.programs
    fuzz_shards.check(args.lava, programs, args.out)
    if args.from_dir:
        fuzz_shards.load_from(args.from_dir)
    builds = build_all(args.kernel, args.modules, args.quiet)
    ident = fuzz_state.identity(fuzz_command.builds_identity(builds, args.kernel), args.plant)
    sc = program_boot.vm_scenario(program_boot.ProgOptions(
        "", kernel=args.kernel, modules=args.modules, seed=1, memory=args.memory,
        cpus=args.cpus))
    if args.from_dir:       # one line before the guest boots
        fuzz_shards.load_from(args.from_dir, ident)
    offers = fuzz_shards.guest_offers(sc, builds)
    dirs = fuzz_shards.write(args.lava, programs, args.out, ident, sc, builds, args.seed,
                             args.plant, campaign=args.from_dir, base_url=args.base_url,
                             kernel=args.kernel, offers=offers,
                             machine={"modules": args.modules, "memory": args.memory,
                                      "cpus": args.cpus})
    for d in dirs:
        with open(os.path.join(d, fuzz_shards.SHARD)) as f:
            doc = json.load(f)
        redrawn = ", ".join(f"{why}: {n}" for why, n in sorted(doc["redrawn"].items()))
        say(f"fuzz --lava: {d}: {len(doc['programs'])} programs (seed {doc['seed']})"
            + (f"; drawn again: {redrawn}" if redrawn else ""))
        print(d)
    return 0


def cmd_fuzz(args):
    if args.words:
        return cmd_fuzz_words(args)
    if args.programs is not None or args.from_dir or args.base_url:
        if args.lava is None:
            raise SetupError("--programs, --from and --base-url go with --lava N")
    if args.lava is not None:
        if args.modules and not args.kernel:
            raise SetupError("--modules needs --kernel")
        return cmd_fuzz_lava(args)
    if args.modules and not args.kernel:
        raise SetupError("--modules needs --kernel")
    if args.resume and args.out:
        raise SetupError("--resume DIR is the campaign's directory: no --out with it")
    opts = fuzz_manager.FuzzOptions(
        out=args.resume or args.out or "", budget_s=fuzz_manager.parse_budget(args.budget),
        jobs=args.jobs, seed=args.seed, resume=bool(args.resume), plant=args.plant,
        results=args.results, quiet=args.quiet, until_failure=args.until_failure,
        faults=args.faults,
        minimize_budget_s=fuzz_manager.parse_budget(args.minimize_budget, "--minimize-budget"))
    opts.check()
    opts.out = opts.out or runner.new_dir(DEFAULT_OUT, "fuzz")
    return fuzz_command.run(opts, kernel=args.kernel, modules=args.modules, memory=args.memory,
                            cpus=args.cpus, accel=args.accel)


def cmd_prog_c(args):
    if args.modules and not args.kernel:
        raise SetupError("--modules needs --kernel")
    if not os.path.isfile(args.file):
        raise SetupError(f"{args.file}: no such file")
    if args.initramfs and not os.path.isfile(args.initramfs):
        raise SetupError(f"--initramfs {args.initramfs}: no such file")
    if prog_tool.check_files([args.file]):
        return EXIT_SETUP
    program_repro.check_runnable(args.file, args.mutate)
    builds = build_all(args.kernel, args.modules, quiet=True)
    out = os.path.abspath(args.out or runner.new_dir(
        DEFAULT_OUT, "c-" + program_boot.program_name(args.file)))
    paths = program_repro.write_reproducer(
        args.file, out, kernel=args.kernel, initramfs=args.initramfs, builds=builds,
        seed=args.seed if args.seed is not None else 1, deterministic=args.deterministic,
        mutation=args.mutate, memory=args.memory, cpus=args.cpus)
    for path in paths.values():
        print(path)
    print(program_repro.instructions(out, args.initramfs or builds.initramfs))
    return 0


def resolve_kernels(args):
    """Resolve every kernel name in parsed CLI arguments in place: --kernel
    (one or a list), with its --modules, and compare's --baseline/--series."""
    k = getattr(args, "kernel", None)
    if isinstance(k, list):
        mods = getattr(args, "modules", None)
        pairs = [store.resolve(x, mods[i] if mods and i < len(mods) else None)
                 for i, x in enumerate(k)]
        args.kernel = [a for a, _ in pairs]
        if any(store.looks_like_name(x) for x in k) or mods:
            args.modules = [m for _, m in pairs]
    elif k:
        args.kernel, args.modules = store.resolve(k, getattr(args, "modules", None))
    for side in ("baseline", "series"):
        v = getattr(args, side, None)
        if v:
            img, mods = store.resolve(v, getattr(args, side + "_modules", None))
            setattr(args, side, img)
            setattr(args, side + "_modules", mods)
    return args


def cmd_check(args):
    return check.check(args.suite, args.junit, args.kernel, args.modules)


COMMANDS = {"run": cmd_run, "matrix": cmd_matrix, "lava": cmd_lava, "check": cmd_check,
            "bench": cmd_bench, "repro": cmd_repro, "list": cmd_list,
            "minimize": cmd_minimize, "bugs": cmd_bugs, "docs": cmd_docs, "explore": cmd_explore,
            "show": cmd_show, "cmdline": cmd_cmdline, "compare": cmd_compare,
            "libvirt-xml": cmd_libvirt_xml,
            "build": lambda a: build_all(a.kernel, a.modules) and 0,
            "kernel": cmd_kernel, "prog": cmd_prog, "fuzz": cmd_fuzz,
            "findings": cmd_findings,
            "setup": lambda a: run_script("setup") or 0}
