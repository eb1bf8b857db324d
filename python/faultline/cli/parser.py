"""faultline: boot fault-injecting swap stress VMs, run the test suites.

  faultline run [SCENARIO ...] [--kernel BZIMAGE --modules DIR]
                [--seed N | --seeds A..B] [--repeat N] [--keep-going]
                [--memory M] [--cpus N] [--timeout S] [--deterministic]
                [--rules FILE] [--backend qemu|libvirt|lava] [--connect URI]
                [--out DIR] [--junit FILE] [--quiet] [--mutate lie|corrupt]
  faultline list                      scenarios with one-line descriptions
  faultline show RUN_DIR              summary of a past run or sweep
  faultline repro RUN_DIR             rerun exactly, compare outcome and digest
  faultline minimize RUN_DIR [--budget N] [--jobs J]
                                      shrink a failing --deterministic run to
                                      the few faults that make it fail
  faultline explore SCENARIO... [--kernel K] [--budget 30m] [--jobs N] [--out DIR]
                    [--resume DIR] [--seed S] [--max-runs N] [--max-failures N]
                    [--minimize-budget N] [--allow-lies] [--restore]
                                      search fault schedules for kernel failures
  faultline cmdline SCENARIO          print the QEMU command line
  faultline libvirt-xml SCENARIO      write a domain XML for `virsh create`
  faultline compare SCENARIO --baseline BZIMAGE --series BZIMAGE [--runs N]
  faultline matrix --scenarios A,B --seeds A..B [--kernel K ...] [--jobs N]
                   [--backend qemu|libvirt|lava [--run]]
  faultline lava SCENARIO ... [--kernel K [--modules M]] [--seed N | --seeds A..B]
                 [--out DIR] [--base-url URL]   LAVA jobs and their artefacts
  faultline lava --bug NAME ... [--seeds A..B]  the real-bug corpus as LAVA jobs
  faultline check [--suite unit,qtest,asan,vm] [--junit FILE]
  faultline bench [--quick] [--only GROUPS] [--rounds N] [--json FILE] [--compare OLD.json]
                  [--results FILE]
  faultline kernel config|build|list  guest kernels from source (docs/kernels.md)
  faultline prog check FILE... | prog gen --seed S --count N --out DIR
  faultline prog run FILE|DIR [--kernel K] [--mutate lie|corrupt] [--deterministic]
  faultline prog show RUNDIR          swap programs (docs/programs.md)
  faultline fuzz [--kernel K] [--budget 30m] [--jobs N] [--out DIR] [--resume DIR]
                 [--seed S] [--results FILE]   search programs and faults (docs/fuzz.md)
  faultline fuzz --lava N [--programs P] [--from CAMPAIGN] --out DIR   LAVA shards
  faultline fuzz lava-run SHARD_DIR...  run shards' jobs with this host's lava-run
  faultline fuzz merge OUT SHARD_DIR... shards' corpora and failures into a campaign
  faultline prog c FILE [--out DIR]   a standalone C reproducer and its QEMU command line
  faultline prog minimize RUNDIR [NAME] [--deterministic]
                                      shrink a failing program of a prog run
  faultline bugs [NAME ...] [--seeds N|A..B] [--deterministic] [--no-faults] [--list]
                 [--backend qemu|libvirt|lava] [--results FILE] [--import DIR]
                                      recall on the real-bug corpus (docs/bugs.md)
  faultline bugs [NAME ...] --fuzz [--budget 30m] [--seeds 1..3] [--jobs N] [--rerun]
                                      recall from no scenario: the fuzzer's defaults
  faultline bugs --fuzz-replay BUG SEED [--failure N] [--times K]
                                      replay it on the buggy and the fixed kernel
  faultline bugs --fuzz-verdict BUG SEED yes|no WHY [--failure N]
                                      a person's verdict: is that failure the bug's?
  faultline findings [NAME ...] [--results FILE] [--check]
                                      replay the kernel findings of findings/ (docs/findings.md)
  faultline docs [--check]            rewrite docs/' generated tables from results/
  faultline build | setup

Exit status of run/repro: 0 pass, 1 test failure, 2 setup or usage error,
3 kernel crash or hang (report.json says which: outcome "crash" / "hang"),
128+N stopped by signal N (SIGTERM 143, SIGINT 130, SIGHUP 129; outcome "aborted").
matrix: 0 all pass, 1 any failure, 3 any crash or hang.  git bisect run:
docs/ci.md maps these (a setup error is "skip", not "bad").
"""

import argparse
import os

from faultline import TOP
from faultline.bench.figures import GROUPS as BENCH_GROUPS
from faultline.bugs import recall, recall_fuzz
from faultline.build.builds import version_lines
from faultline.judge import mutate
from faultline.kernel import fragments
from faultline.run import inputs
from faultline.run.runner import DEFAULT_OUT
from faultline.vm.backends import BACKENDS

EXIT_CODES = """exit status:
  run, repro, compare            0 pass, 1 test or expectation failed,
                                 2 setup or usage error (one line says what),
                                 3 kernel crash or hang
  minimize                       0 minimal set found, 1 the failure did not
                                 reproduce, 2 the run cannot be minimized
  matrix                         0 all pass, 1 any failure, 2 a run could not be
                                 set up, 3 any crash or hang
  check                          0 every suite passed, 1 otherwise
  fuzz                           0 no failure found, 1 a failure found, 2 setup error
`faultline COMMAND --help` for a command's options; docs/launcher.md."""


class VersionAction(argparse.Action):
    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        print("\n".join(version_lines()), flush=True)
        parser.exit(0)


class OneLineParser(argparse.ArgumentParser):
    """A bad flag is one line on stderr (exit 2), as every other bad input:
    no usage block in front of it (-h has that)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def kernel_options():
    """--kernel and --modules: a parent parser for every command that boots
    (or builds for) a guest kernel of the user's."""
    k = argparse.ArgumentParser(add_help=False)
    k.add_argument("--kernel", type=inputs.kernel_image,
                   help="your own bzImage instead of Debian's 6.12")
    k.add_argument("--modules", type=inputs.modules_dir,
                   help="its build tree or lib/modules/VERSION directory")
    return k


def vm_options():
    """One run's machine: seed, memory, vCPUs, watchdog, mode, accelerator;
    a parent parser of run, cmdline and libvirt-xml."""
    v = argparse.ArgumentParser(add_help=False)
    v.add_argument("--seed", type=inputs.seed_value,
                   help="fault seed, 0 to 2^64-1 (default: the scenario's)")
    v.add_argument("--memory", type=inputs.memory_size,
                   help="guest RAM, e.g. 1G (overrides vm.memory)")
    v.add_argument("--cpus", type=inputs.cpu_count, help="vCPUs (overrides vm.cpus)")
    v.add_argument("--timeout", type=inputs.duration,
                   help="watchdog, e.g. 300s (overrides timeout)")
    v.add_argument("--deterministic", action="store_true",
                   help="icount (vCPUs round-robin in one thread), fixed RTC: "
                        "same seed gives the same run")
    v.add_argument("--accel", default="tcg", choices=["tcg", "kvm"],
                   help="tcg (default, works everywhere) or kvm (needs /dev/kvm)")
    return v


def parser():
    p = OneLineParser(prog="faultline", description=__doc__.split("\n")[0],
                      epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=VersionAction,
                   help="faultline's version, the QEMU source version and build cache key")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    kernel = kernel_options()
    vm = vm_options()

    r = sub.add_parser("run", parents=[kernel, vm], help="boot and run scenarios (default: smoke)")
    r.add_argument("scenarios", nargs="*", help="scenario name or .toml path")
    r.add_argument("--seeds", metavar="A..B", type=inputs.seed_range,
                   help="sweep seeds A to B (inclusive)")
    r.add_argument("--repeat", type=inputs.positive_int, default=1,
                   help="run each seed N times")
    r.add_argument("--keep-going", action="store_true",
                   help="in a sweep, record failures and go on (default: stop)")
    r.add_argument("--rules", metavar="FILE",
                   help="fault rules from FILE instead of the scenario's "
                        "(e.g. minimize/minimal.rules)")
    r.add_argument("--backend", default="qemu", choices=BACKENDS,
                   help="how to run the machine (default: qemu, started here)")
    r.add_argument("--connect", metavar="URI", type=inputs.libvirt_uri,
                   help="libvirt URI for --backend libvirt (default: qemu:///system)")
    r.add_argument("--out", default=DEFAULT_OUT, type=inputs.out_dir,
                   help="run directories go here")
    r.add_argument("--junit", metavar="FILE", help="also write JUnit XML of all runs")
    r.add_argument("--kcidb", metavar="FILE", help="also write KCIDB v5 JSON of all runs")
    r.add_argument("--quiet", action="store_true", help="no progress, no KTAP stream")
    r.add_argument("--restore", action="store_true",
                   help="start from a guest booted and saved once per machine (cached), "
                        "the swap device hot-added: no boot per run")
    r.add_argument("--jobs", type=inputs.positive_int, default=1,
                   help="with --seeds/--repeat: run N at a time (default 1)")
    r.add_argument("--kcov", action="store_true",
                   help="the tests' kernel coverage in their KTAP ([vm] kcov; needs a kernel "
                        "built with --kcov)")
    r.add_argument("--mutate", choices=mutate.KINDS,
                   help="self-test of the data check: add a rule that lies about "
                        "(or corrupts) some swap writes; the run must FAIL on its data check")
    mx = sub.add_parser("matrix", help="scenarios x seeds x kernels, in parallel")
    mx.add_argument("--scenarios", required=True, metavar="A,B,...",
                    help="comma-separated scenario names or .toml paths; `all`: every "
                         "scenario but faultline's self-tests")
    mx.add_argument("--seeds", metavar="A..B", type=inputs.seed_range,
                    help="default: each scenario's own seed")
    mx.add_argument("--kernel", action="append", metavar="BZIMAGE", type=inputs.kernel_image,
                    help="a kernel (repeat for more; default: Debian's 6.12)")
    mx.add_argument("--modules", action="append", metavar="DIR", type=inputs.modules_dir,
                    help="modules of each --kernel, in the same order")
    mx.add_argument("--jobs", type=inputs.positive_int,
                    help="VMs at a time (default: what the cores allow)")
    mx.add_argument("--backend", default="qemu", choices=BACKENDS,
                    help="how to run the machines (default: qemu, started here)")
    mx.add_argument("--run", action="store_true",
                    help="with --backend lava: run the jobs here with lava-run")
    mx.add_argument("--base-url", help="with --backend lava: artefact URL prefix")
    mx.add_argument("--out-jobs", metavar="DIR", type=inputs.out_dir,
                    help="with --backend lava: job directory")
    mx.add_argument("--deterministic", action="store_true",
                    help="every run --deterministic (icount, same seed same run)")
    mx.add_argument("--results", metavar="FILE",
                    help="add each run's record to this results set "
                         "(results/scenarios/SET.jsonl; runs of another QEMU or guest build "
                         "are refused before any run; docs/results.md)")
    mx.add_argument("--out", default=DEFAULT_OUT, type=inputs.out_dir,
                    help="the matrix directory goes here")
    mx.add_argument("--junit", metavar="FILE", help="also copy the JUnit XML here")
    mx.add_argument("--kcidb", metavar="FILE", help="also copy the KCIDB JSON here")
    lv = sub.add_parser("lava", help="write LAVA jobs (device_type qemu) and artefacts")
    lv.add_argument("scenarios", nargs="*", help="scenario name or .toml path")
    lv.add_argument("--bug", action="append", metavar="NAME",
                    help="instead of scenarios: a corpus bug's scenarios on its fixed and "
                         "buggy kernels (repeat for more; docs/bugs.md)")
    lv.add_argument("--kernel", action="append", metavar="BZIMAGE", type=inputs.kernel_image,
                    help="a kernel (repeat for more; default: Debian's 6.12)")
    lv.add_argument("--modules", action="append", metavar="DIR", type=inputs.modules_dir,
                    help="modules of each --kernel, in the same order")
    lv.add_argument("--seed", type=inputs.seed_value, help="fault seed (default: the scenario's)")
    lv.add_argument("--seeds", metavar="A..B", type=inputs.seed_range,
                    help="one job per seed A to B")
    lv.add_argument("--deterministic", action="store_true",
                    help="jobs run --deterministic (icount)")
    lv.add_argument("--out", type=inputs.out_dir, help="directory for jobs/ and artefacts")
    lv.add_argument("--base-url", help="URL the out directory is served at "
                    "(default: file:// URLs)")
    sub.add_parser("list", help="scenarios and what they test").add_argument(
        "--long", action="store_true", help="do not cut descriptions to the terminal")
    sh = sub.add_parser("show", help="summary of a past run or sweep directory")
    sh.add_argument("rundir", type=inputs.existing_dir)
    rp = sub.add_parser("repro", help="rerun a run directory exactly, compare the outcome")
    rp.add_argument("rundir", type=inputs.run_dir)
    rp.add_argument("--deterministic", action=argparse.BooleanOptionalAction, default=None,
                    help="default: as the original run")
    rp.add_argument("--out", default=DEFAULT_OUT, type=inputs.out_dir,
                    help="the rerun's directory goes here (default: runs/)")
    rp.add_argument("--quiet", action="store_true", help="no progress, no KTAP stream")
    mn = sub.add_parser("minimize", help="shrink a failing --deterministic run to the "
                        "faults that make it fail (delta debugging)")
    mn.add_argument("rundir", type=inputs.run_dir)
    mn.add_argument("--budget", type=inputs.positive_int, default=200,
                    help="at most N runs, the schedule check included (default 200)")
    mn.add_argument("--jobs", type=inputs.positive_int, default=1,
                    help="runs at a time (default 1; each run is one VM)")
    mn.add_argument("--quiet", action="store_true", help="only the summary")
    ex = sub.add_parser("explore", parents=[kernel],
                        help="search fault schedules for kernel failures "
                        "(feedback-driven; docs/explore.md)")
    ex.add_argument("scenarios", nargs="*", help="scenario names or .toml paths")
    ex.add_argument("--budget", default="30m", help="wall time, e.g. 90s, 30m, 2h (default 30m)")
    ex.add_argument("--max-runs", type=inputs.positive_int, help="stop after N runs")
    ex.add_argument("--max-failures", type=inputs.positive_int, metavar="N",
                    help="stop after N failures (default: search the whole budget)")
    ex.add_argument("--minimize-budget", type=int, metavar="N",
                    help="runs to minimize a failure with (default 40; 0: do not)")
    ex.add_argument("--jobs", type=inputs.positive_int, default=1,
                    help="runs at a time (default 1; each run is one VM)")
    ex.add_argument("--out", type=inputs.out_dir,
                    help="the explore directory (default: runs/DATE-explore)")
    ex.add_argument("--resume", metavar="DIR", type=inputs.existing_dir,
                    help="continue the explore in DIR")
    ex.add_argument("--seed", type=inputs.seed_value, default=1,
                    help="seed of the search (default 1)")
    ex.add_argument("--allow-lies", action="store_true",
                    help="also lie, corrupt, read errors and unrecoverable faults")
    ex.add_argument("--deterministic", action="store_true",
                    help="every run --deterministic (icount)")
    ex.add_argument("--restore", action="store_true",
                    help="every run from a guest booted and saved once, the swap device "
                         "hot-added (no boot per run)")
    ex.add_argument("--memory", type=inputs.memory_size, help="guest RAM (overrides vm.memory)")
    ex.add_argument("--cpus", type=inputs.cpu_count, help="vCPUs (overrides vm.cpus)")
    ex.add_argument("--timeout", type=inputs.duration, help="watchdog per run")
    ex.add_argument("--accel", default="tcg", choices=["tcg", "kvm"],
                    help="tcg (default) or kvm (needs /dev/kvm)")
    ex.add_argument("--quiet", action="store_true", help="only failures and the summary")
    cl = sub.add_parser("cmdline", parents=[kernel, vm],
                        help="print the QEMU command line of a scenario")
    cl.add_argument("scenario")
    cl.add_argument("--out", type=inputs.out_dir,
                    help="directory for its disk image and initramfs")
    lx = sub.add_parser("libvirt-xml", parents=[kernel, vm],
                        help="write a scenario's inputs and domain XML for `virsh create`")
    lx.add_argument("scenario")
    lx.add_argument("--out", type=inputs.out_dir,
                    help="directory for the inputs and domain.xml")
    cp = sub.add_parser("compare", help="A/B: one scenario on two kernels, statistics")
    cp.add_argument("scenario")
    cp.add_argument("--baseline", required=True, metavar="BZIMAGE", type=inputs.kernel_image,
                    help="the kernel without the change")
    cp.add_argument("--baseline-modules", metavar="DIR", type=inputs.modules_dir,
                    help="its build tree or lib/modules/VERSION directory")
    cp.add_argument("--series", required=True, metavar="BZIMAGE", type=inputs.kernel_image,
                    help="the kernel with the change (the patch series)")
    cp.add_argument("--series-modules", metavar="DIR", type=inputs.modules_dir,
                    help="its build tree or lib/modules/VERSION directory")
    cp.add_argument("--runs", type=inputs.positive_int, default=3,
                    help="runs per kernel (default 3)")
    cp.add_argument("--seed", type=inputs.seed_value, help="one seed for every run")
    cp.add_argument("--seeds", metavar="A..B", type=inputs.seed_range,
                    help="run i uses the i-th seed")
    cp.add_argument("--metrics", help="comma-separated metric names (default: [compare])")
    cp.add_argument("--kernel-modes", metavar="BASELINE,SERIES",
                    help="kernel_mode of each side, e.g. stock,patched "
                         "(default: [compare] kernel_modes)")
    cp.add_argument("--level", type=float, default=0.95, help="confidence level")
    cp.add_argument("--deterministic", action="store_true",
                    help="icount runs: samples differ only by seed (use --seeds)")
    cp.add_argument("--out", default=DEFAULT_OUT, type=inputs.out_dir,
                    help="the comparison directory goes here (default: runs/)")
    cp.add_argument("--memory", type=inputs.memory_size,
                    help="guest RAM, e.g. 1G (overrides vm.memory)")
    cp.add_argument("--cpus", type=inputs.cpu_count, help="vCPUs (overrides vm.cpus)")
    cp.add_argument("--timeout", type=inputs.duration,
                    help="watchdog per run, e.g. 300s (overrides timeout)")
    cp.add_argument("--quiet", action="store_true", help="no progress, no KTAP stream")
    # Not in --help: a mutated run fails on both kernels; the refusal says so.
    cp.add_argument("--mutate", metavar="KIND", help=argparse.SUPPRESS)
    cp.add_argument("--junit", metavar="FILE", help="also write JUnit XML of all runs")
    cp.add_argument("--kcidb", metavar="FILE",
                    help="also write KCIDB v5 JSON (runs and metrics)")
    c = sub.add_parser("check", parents=[kernel],
                       help="build everything and run the test suites")
    c.add_argument("--suite", default="unit,qtest,asan,vm",
                   help="comma-separated meson suites (default: unit,qtest,asan,vm)")
    c.add_argument("--junit", metavar="FILE", help="copy meson's JUnit XML here")
    bn = sub.add_parser("bench", help="performance figures as ratios against baselines "
                        "measured in the same run (docs/bench.md)")
    bn.add_argument("--quick", action="store_true", help="fewer I/Os and rounds (about 4x less)")
    bn.add_argument("--only", metavar="GROUPS",
                    help=f"comma-separated: {','.join(BENCH_GROUPS)} (default: all but fresh)")
    bn.add_argument("--rounds", metavar="N", type=int,
                    help="interleaved rounds of the overhead group (default 5, --quick 2): "
                    "more narrow its confidence interval")
    bn.add_argument("--json", metavar="FILE", help="write rows and samples as JSON")
    bn.add_argument("--compare", metavar="OLD.json", help="also print changes against a "
                    "previous --json")
    bn.add_argument("--results", metavar="FILE", help="also add each row to this results set "
                    "(e.g. results/bench/default.jsonl; rows of another QEMU or guest build "
                    "are refused before anything runs)")
    bn.add_argument("--out", default=DEFAULT_OUT, type=inputs.out_dir,
                    help="its run directories go here")
    bugs_parser(sub)
    findings_parser(sub)
    dc = sub.add_parser("docs", help="rewrite the generated tables of docs/ from results/ "
                        "(docs/results.md)")
    dc.add_argument("--check", action="store_true",
                    help="rewrite nothing; exit 1 naming each table that differs")
    dc.add_argument("--docs-dir", default=os.path.join(TOP, "docs"), metavar="DIR",
                    help="the docs (default: the repository's docs/)")
    dc.add_argument("--results-dir", default=os.path.join(TOP, "results"), metavar="DIR",
                    help="the results (default: the repository's results/)")
    kernel_parser(sub)
    prog_parser(sub, kernel, vm)
    fuzz_parser(sub, kernel)
    sub.add_parser("build", parents=[kernel], help="build QEMU and the guest image")
    sub.add_parser("setup", help="install dependencies (root)")
    return p


def bugs_parser(sub):
    """`faultline bugs` (recall.py)."""
    bp = sub.add_parser("bugs", help="recall on the real-bug corpus: buggy and fixed "
                        "kernels, seeds, repro and minimize (docs/bugs.md)")
    bp.add_argument("names", nargs="*", metavar="NAME", help="corpus bugs (default: all)")
    bp.add_argument("--list", action="store_true", help="list the corpus and stop")
    bp.add_argument("--seeds", metavar="N|A..B",
                    help=f"seeds 1..N or A..B (default {recall.DEFAULT_SEEDS}; --fuzz: search "
                         f"seeds {recall_fuzz.DEFAULT_SEEDS})")
    bp.add_argument("--deterministic", action="store_true",
                    help="runs --deterministic where the scenario allows (needed by minimize)")
    bp.add_argument("--no-faults", action="store_true",
                    help="also run the buggy kernel's seeds with the scenario's rules "
                         "removed (--rules /dev/null): what the fault device adds")
    bp.add_argument("--no-repro", action="store_true",
                    help="skip repro and minimize of the first failure")
    bp.add_argument("--budget", metavar="RUNS|DURATION",
                    help="minimize's run budget (default 40); --fuzz: each campaign's wall "
                         f"time, e.g. 90s, 30m, 4h (default {recall_fuzz.DEFAULT_BUDGET})")
    bp.add_argument("--make-jobs", type=inputs.positive_int, metavar="N",
                    help="make -jN for kernel builds (default: every core)")
    bp.add_argument("--out", type=inputs.out_dir,
                    help="run directories and this campaign's table (default runs/bugs, "
                         "--fuzz: runs/bugs-fuzz; reused on the next run: resume)")
    bp.add_argument("--results", metavar="FILE",
                    help="the results set the runs' records go to (default "
                         "results/recall/default.jsonl, --deterministic: "
                         "results/recall/deterministic.jsonl, --fuzz: "
                         "results/recall-fuzz/default.jsonl); runs of another QEMU or "
                         "guest build are refused (docs/results.md)")
    bp.add_argument("--import", dest="import_dir", metavar="DIR",
                    help="run nothing: add the finished runs of an earlier campaign's "
                         "--out DIR to --results")
    bp.add_argument("--docs", action="store_true",
                    help="then rewrite the generated tables of docs/ from results/ "
                         "(as `faultline docs`)")
    bp.add_argument("--backend", default="qemu", choices=BACKENDS,
                    help="run each seed as `run --backend` does (default qemu; lava: "
                         "through lava-run)")
    bp.add_argument("--connect", type=inputs.libvirt_uri,
                    help="libvirt URI for --backend libvirt (default: qemu:///system)")
    fz = bp.add_argument_group("recall from no scenario (docs/bugs.md)")
    fz.add_argument("--fuzz", action="store_true",
                    help="instead of the bug's scenarios, `faultline fuzz` with its defaults "
                         "on the buggy and the fixed kernel, a campaign per search seed")
    fz.add_argument("--jobs", type=inputs.positive_int, metavar="N",
                    help="--fuzz: guests fuzzing at a time in each campaign (default 1)")
    fz.add_argument("--rerun", action="store_true",
                    help="--fuzz: run again the campaigns the set has of this build")
    fz.add_argument("--fuzz-verdict", nargs=4, metavar=("BUG", "SEED", "yes|no", "WHY"),
                    help="run nothing: record whether the failure of BUG's buggy kernel "
                         "with search seed SEED is the bug's, and why")
    fz.add_argument("--fuzz-replay", nargs=2, metavar=("BUG", "SEED"),
                    help="replay the failure of BUG's buggy kernel with search seed SEED "
                         "from fresh boots on its buggy and its fixed kernel, and record "
                         "what each saw: the evidence --fuzz-verdict judges by")
    fz.add_argument("--times", type=inputs.positive_int, default=2, metavar="K",
                    help="--fuzz-replay: replays on each kernel (default 2)")
    fz.add_argument("--failure", type=inputs.positive_int, metavar="N",
                    help="--fuzz-verdict, --fuzz-replay: the campaign's Nth failure found "
                         "(default: the first that is no known finding's, the one its "
                         "table shows)")
    return bp


def findings_parser(sub):
    """`faultline findings` (findings/command.py)."""
    fd = sub.add_parser("findings", help="replay the kernel findings of findings/ on their "
                        "kernels, each in a fresh boot, and record them (docs/findings.md)")
    fd.add_argument("names", nargs="*", metavar="NAME", help="findings (default: all)")
    fd.add_argument("--results", metavar="FILE",
                    help="the results set the replays' records go to (default "
                         "results/findings/default.jsonl; docs/results.md)")
    fd.add_argument("--out", type=inputs.out_dir,
                    help="the replays' run directories (default runs/DATE-findings)")
    fd.add_argument("--check", action="store_true",
                    help="run nothing: check each finding.toml, program and reproducer")
    fd.add_argument("--quiet", action="store_true", help="no progress, no KTAP stream")
    return fd


def kernel_parser(sub):
    """The `kernel` subcommand (config, build, list; kernel.py)."""
    k = sub.add_parser("kernel", help="guest kernels from source (config, build, list)")
    ks = k.add_subparsers(dest="kernel_cmd", required=True)

    def common(sp):
        sp.add_argument("--kasan", action="store_true", help="add configs/kernel/kasan.config")
        sp.add_argument("--kcov", action="store_true", help="add configs/kernel/kcov.config")
        sp.add_argument("--base", default=fragments.DEFAULT_BASE,
                        help="defconfig, tinyconfig (default) or a config FILE")

    c = ks.add_parser("config", help="print (or --out FILE) the merged .config")
    c.add_argument("--src", help="kernel tree or debian:6.1|6.12|7.2 whose Kconfig to use "
                   "(default: the newest Debian tree in the cache)")
    c.add_argument("--out", metavar="FILE")
    common(c)
    b = ks.add_parser("build", help="build and cache a kernel; prints its bzImage")
    b.add_argument("src", help="kernel tree, or debian:6.1, debian:6.12, debian:7.2")
    b.add_argument("--patch", action="append", metavar="FILE",
                   help="a diff or an mbox of patches, applied in order (repeatable)")
    b.add_argument("--name", help="name for --kernel (default: debian-VERSION[-kasan] "
                   "or the tree's directory name)")
    b.add_argument("--make-jobs", type=inputs.positive_int, metavar="N",
                   help="make -jN (default: every core)")
    common(b)
    ks.add_parser("list", help="built kernels and their names")
    return k


def prog_parser(sub, kernel, vm):
    """The `prog` subcommand: swap programs (check, gen, run, show;
    docs/programs.md); @kernel, @vm: the parent parsers of a boot."""
    pp = sub.add_parser("prog", help="swap programs: check, generate, run them "
                        "(docs/programs.md)")
    ps = pp.add_subparsers(dest="prog_cmd", required=True)
    c = ps.add_parser("check", help="check programs: exit 0, or 2 and FILE:LINE: reason")
    c.add_argument("files", nargs="+", metavar="FILE")
    g = ps.add_parser("gen", help="write N generated programs DIR/0001.prog ...")
    g.add_argument("--seed", type=inputs.seed_value, required=True,
                   help="seed of the first program (the next ones take SEED+1, ...)")
    g.add_argument("--count", type=inputs.positive_int, required=True, metavar="N",
                   help="how many programs (1 to 100000)")
    g.add_argument("--out", type=inputs.out_dir, required=True, metavar="DIR",
                   help="directory for the programs (new or without them)")
    r = ps.add_parser("run", parents=[kernel, vm],
                      help="run a program, or every DIR/*.prog in name order, in one boot: "
                      "exit 0 all passed, 1 a program failed, 2 setup error, 3 crash or hang")
    r.add_argument("target", metavar="FILE|DIR")
    r.add_argument("--mutate", choices=mutate.KINDS,
                   help="self-test of the oracle: a rule that lies about (or corrupts) swap "
                        "writes on every device of every program; they must fail")
    r.add_argument("--out", default=DEFAULT_OUT, type=inputs.out_dir,
                   help="the run directory goes here (default: runs/)")
    r.add_argument("--quiet", action="store_true", help="only the summary")
    s = ps.add_parser("show", help="a program run: a line per program, then its findings")
    s.add_argument("rundir", type=inputs.existing_dir)
    c = ps.add_parser("c", parents=[kernel],
                      help="a standalone C reproducer of a program: repro.c, rules.txt, "
                      "run.sh and qemu.sh (the VM of prog run)")
    c.add_argument("file", metavar="FILE")
    c.add_argument("--out", type=inputs.out_dir, metavar="DIR",
                   help="where to write them (default: runs/c-NAME-DATE)")
    c.add_argument("--initramfs",
                   help="the initramfs qemu.sh boots by default (default: faultline's guest "
                   "image)")
    c.add_argument("--seed", type=inputs.seed_value, help="the injectors' seed (default 1)")
    c.add_argument("--memory", type=inputs.memory_size, help="guest RAM, e.g. 1G")
    c.add_argument("--cpus", type=inputs.cpu_count, help="vCPUs")
    c.add_argument("--deterministic", action="store_true",
                   help="qemu.sh runs under -icount, as prog run --deterministic")
    c.add_argument("--mutate", choices=mutate.KINDS,
                   help="add prog run --mutate's rule to every device")
    m = ps.add_parser("minimize", parents=[kernel, vm],
                      help="shrink a failing program of a prog run directory (operations and "
                      "faults together): RUNDIR/programs/NAME/minimized.prog")
    m.add_argument("rundir", type=inputs.existing_dir, metavar="RUNDIR")
    m.add_argument("name", nargs="?", metavar="NAME",
                   help="the program (default: the run's only failed or crashed one)")
    m.add_argument("--max-runs", type=inputs.positive_int, default=200, metavar="N",
                   help="at most N candidate runs (default 200)")
    m.add_argument("--quiet", action="store_true", help="only the result")
    return pp


def fuzz_parser(sub, kernel):
    """`faultline fuzz` (fuzz/manager.py; docs/fuzz.md)."""
    fz = sub.add_parser("fuzz", parents=[kernel],
                        help="search swap programs, their fault rules and knobs for kernel "
                        "failures: exit 0 none found, 1 found (docs/fuzz.md)")
    fz.add_argument("words", nargs="*", metavar="merge OUT SHARD_DIR... | lava-run SHARD_DIR... | triage DIR FAILURE VERDICT WHY | record DIR",
                    help="merge: LAVA shards' corpora, coverage and failures into the "
                    "campaign OUT; lava-run: run shards' jobs with this host's lava-run; "
                    "triage: a person's verdict on a failure (kernel-bug, faultline-defect, "
                    "oracle-error) and why; record: the campaign's results record (--results)")
    fz.add_argument("--budget", default="30m",
                    help="wall time of the campaign, e.g. 90s, 30m, 4h (default 30m)")
    fz.add_argument("--faults", choices=["all", "delay", "none"], default="all",
                    help="the fault rules programs may carry: every kind the grammar draws "
                    "(default), delays only, or none (soundness runs)")
    fz.add_argument("--until-failure", action="store_true",
                    help="stop when the first new failure is triaged (minimized, its "
                    "reproducer written) instead of at --budget")
    fz.add_argument("--lava", type=int, metavar="N",
                    help="write N shards of LAVA jobs (one fresh boot per program) in --out "
                    "instead of fuzzing here")
    fz.add_argument("--programs", type=int, metavar="P",
                    help="--lava: programs per shard (default 20)")
    fz.add_argument("--from", dest="from_dir", metavar="CAMPAIGN", type=inputs.existing_dir,
                    help="--lava: start from this campaign's corpus and seed")
    fz.add_argument("--base-url", metavar="URL",
                    help="--lava: where a lab downloads --out's files (default file://)")
    fz.add_argument("--jobs", type=inputs.positive_int, default=1,
                    help="guests fuzzing at a time (default 1)")
    fz.add_argument("--out", type=inputs.out_dir,
                    help="the campaign directory (default: runs/DATE-fuzz)")
    fz.add_argument("--resume", metavar="DIR", type=inputs.existing_dir,
                    help="go on with the campaign in DIR (its corpus and failures)")
    fz.add_argument("--seed", type=inputs.seed_value,
                    help="seed of the campaign (default 1)")
    fz.add_argument("--results", metavar="FILE",
                    help="add the campaign's record to this results set, e.g. "
                    "results/fuzz/default.jsonl (docs/results.md)")
    fz.add_argument("--minimize-budget", default="10m", metavar="DURATION",
                    help="wall time to minimize each new failure (default 10m)")
    fz.add_argument("--plant", choices=["drop-write", "stale-page", "leak-slot"],
                    help="self-test: the guest's executor is wrong on purpose "
                    "(progexec serve --plant); fuzz must find it")
    fz.add_argument("--memory", type=inputs.memory_size, help="guest RAM, e.g. 1G")
    fz.add_argument("--cpus", type=inputs.cpu_count, help="vCPUs")
    fz.add_argument("--accel", default="tcg", choices=["tcg", "kvm"],
                    help="tcg (default) or kvm (needs /dev/kvm)")
    fz.add_argument("--quiet", action="store_true", help="no progress line")
    return fz
