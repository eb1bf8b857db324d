"""`faultline prog run FILE|DIR`: every program in one boot, in name order,
or with --deterministic each in a fresh boot of its own (fresh.py)
(docs/programs.md, "Running programs").

Exit status: 0 every program that ran passed, 1 a program failed (the
oracle or the kernel check), 2 a setup error (a bad program, before any
VM starts), 3 the guest crashed or went silent (the running program is
marked crash and its replay command printed).
"""

import os
import re
import shlex
import sys
from dataclasses import dataclass

from faultline import scenario
from faultline.build.builds import build_all
from faultline.errors import EXIT_CRASH, EXIT_FAIL, EXIT_PASS, EXIT_SETUP, SetupError
from faultline.execute import devices, fresh, results
from faultline.execute.channel import ChannelError
from faultline.execute.session import Budgets, Outcome, Prepared
from faultline.execute.vm import ProgramVM
from faultline.host import scratchdirs
from faultline.host.messages import say
from faultline.host.versions import git_describe, sha256, versions
from faultline.prog.check import check
from faultline.prog.lang import ProgramError, read
from faultline.run.runner import DEFAULT_OUT, FAULTLINE, new_dir
from faultline.vm.qmp import QmpError

NAME_BAD = re.compile(r"[^A-Za-z0-9._-]")
PROGRAM_SUFFIX = ".prog"


@dataclass
class ProgOptions:
    target: str
    kernel: str | None = None
    modules: str | None = None
    deterministic: bool = False
    mutate: str | None = None
    out: str = DEFAULT_OUT
    seed: int = 1
    timeout: str | None = None      # the program's ops budget
    memory: str | None = None
    cpus: int | None = None
    accel: str = "tcg"
    quiet: bool = False

    def replay_argv(self, path):
        """`faultline prog run PATH` with this run's options."""
        argv = [FAULTLINE, "prog", "run", path, "--seed", str(self.seed)]
        for flag, v in (("--kernel", self.kernel), ("--modules", self.modules),
                        ("--mutate", self.mutate), ("--timeout", self.timeout),
                        ("--memory", self.memory), ("--cpus", self.cpus)):
            if v:
                argv += [flag, str(v)]
        return argv + (["--deterministic"] if self.deterministic else [])


def program_name(path):
    base = os.path.basename(path)
    base = base[:-len(PROGRAM_SUFFIX)] if base.endswith(PROGRAM_SUFFIX) else base
    return (NAME_BAD.sub("_", base) or "program")[:64]


def collect(target):
    """[(name, path)]: FILE, or DIR's *.prog in name order."""
    if os.path.isdir(target):
        files = sorted(f for f in os.listdir(target) if f.endswith(PROGRAM_SUFFIX))
        if not files:
            raise SetupError(f"{target}: no *{PROGRAM_SUFFIX} files")
        return [(program_name(f), os.path.join(target, f)) for f in files]
    if not os.path.isfile(target):
        raise SetupError(f"{target}: no such file or directory")
    return [(program_name(target), target)]


def prepare(entries, mutation, one_file, deterministic=False):
    """(Prepared programs, {name: (path, reason, ops)} refused by the VM's
    device set, or with @deterministic by a run without the host).  A bad
    program raises ProgramError (FILE:LINE: reason); with @one_file a
    refusal is a SetupError (one line) too."""
    ready, refused = [], {}
    for name, path in entries:
        program = read(path)
        check(program)
        try:
            bound = devices.bind(program)
            rules = devices.rules_of(program, mutation)
            why = fresh.refusal(bound, rules) if deterministic else None
            if why:
                raise devices.Refusal(why)
        except devices.Refusal as e:
            if one_file:
                raise SetupError(f"{path}: {e}") from None
            refused[name] = (path, str(e), len(program.ops))
            continue
        ready.append(Prepared.of(name, path, program, bound, rules))
    return ready, refused


def vm_scenario(opts):
    """The machine's settings as the spec builder reads them.  THP is the
    kernel's default (the thp knobs change it); zswap starts off on every
    kernel, so a program's swap-outs reach its devices unless it sets
    zswap.enabled=Y."""
    sc = scenario.Scenario(name="prog", path="", description="swap programs",
                           timeout_s=0, vm=scenario.Vm(cmdline="zswap.enabled=0"), device=scenario.Device(),
                           faults=scenario.Faults(seed=opts.seed), swap={}, tests=[])
    return scenario.apply_overrides(sc, opts.memory, opts.cpus, None)


def run_meta(opts, builds, order, status=None, guest=None, replay=None):
    """run.json; @guest: ProgramVM.facts() (kernel release, kcov, offers)."""
    meta = {"command": "prog run", "target": os.path.abspath(opts.target),
            "kernel_release": None, **(guest or {}), "kernel_image": builds.kernel,
            "kernel_sha256": sha256(builds.kernel),
            "initramfs_sha256": sha256(builds.initramfs),
            "qemu_build": os.path.basename(builds.qemu_dir),
            "guest_build": os.path.basename(builds.guest_dir),
            "qemu": builds.qemu_dir, "guest": builds.guest_dir, "versions": versions(),
            "faultline": git_describe(), "argv": sys.argv, "seed": opts.seed,
            "deterministic": opts.deterministic, "mutate": opts.mutate,
            "devices": {d.key: d.target for d in devices.VM_DISKS},
            "programs": order, "status": status}
    if replay:
        meta["replay"] = replay
    return meta


def status_of(outcomes):
    verdicts = {o["verdict"] for o in outcomes}
    if "crash" in verdicts:
        return EXIT_CRASH
    return EXIT_FAIL if "fail" in verdicts else EXIT_PASS


def run_programs(opts):
    """The whole command; its exit status."""
    return run_programs_in(opts)[0]


def run_programs_in(opts):
    """run_programs: (exit status, the run directory it wrote, None when a
    program was refused before any was made)."""
    entries = collect(opts.target)
    try:
        ready, refused = prepare(entries, opts.mutate, not os.path.isdir(opts.target),
                                 opts.deterministic)
    except ProgramError as e:
        print(e, file=sys.stderr, flush=True)
        return EXIT_SETUP, None
    budgets = Budgets()
    if opts.timeout:
        budgets.ops = scenario.parse_duration(opts.timeout, "--timeout")
    builds = build_all(opts.kernel, opts.modules, opts.quiet)
    os.makedirs(opts.out, exist_ok=True)
    rundir = new_dir(opts.out, "prog-" + program_name(os.path.abspath(opts.target)))
    order = [name for name, _ in entries]
    written = {}
    for name, (path, reason, ops) in refused.items():
        written[name] = results.write_program(rundir, name, path,
                                              Outcome(name, "refused", reason), ops)
        say(f"{name}: refused ({reason})")
    results.write_run_json(rundir, run_meta(opts, builds, order))
    if opts.deterministic:
        status, release, replay = fresh_boots(opts, builds, rundir, ready, budgets, written)
        guest = {"kernel_release": release}
    else:
        scratch = scratchdirs.new_scratch()
        try:
            status, guest, replay = boot(opts, builds, rundir, scratch, ready, budgets,
                                         written)
        finally:
            scratchdirs.remove_scratch(scratch)
    outcomes = [written[n] for n in order if n in written]
    status = max(status, status_of(outcomes))
    results.write_run_json(rundir, run_meta(opts, builds, order, status, guest, replay))
    counts = {v: sum(o["verdict"] == v for o in outcomes) for v in results.VERDICTS}
    counts["not run"] = len(order) - len(outcomes)
    print(f"{rundir}: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n), flush=True)
    if replay:
        print(f"replay: {replay}", flush=True)
    return status, rundir


def say_outcome(out):
    say(f"{out.name}: {out.verdict}" + (f" ({out.reason})" if out.reason else
                                        f" ({len(out.findings)} findings, {out.elapsed_s:.1f}s)"))


def replay_command(opts, rundir, name):
    return shlex.join(opts.replay_argv(os.path.join(results.program_dir(rundir, name),
                                                    "program.prog")))


def fresh_boots(opts, builds, rundir, ready, budgets, written):
    """--deterministic: each of @ready in a fresh boot of its own, its
    boot's logs in its program directory; (status, kernel release, replay
    command of the last program that crashed or None)."""
    release = replay = None
    sc = vm_scenario(opts)
    for prep in ready:
        out, rel = fresh.run(prep, sc, builds, bootdir=results.program_dir(rundir, prep.name),
                             seed=opts.seed, budgets=budgets, accel=opts.accel)
        release = release or rel
        written[prep.name] = results.write_program(rundir, prep.name, prep.path, out,
                                                   len(prep.program.ops))
        say_outcome(out)
        if out.verdict == "crash":
            replay = replay_command(opts, rundir, prep.name)
    return EXIT_PASS, release, replay


def boot(opts, builds, rundir, scratch, ready, budgets, written):
    """Boot once and run @ready in order; (status, the guest's facts
    (ProgramVM.facts), replay command or None).  Each program's result
    goes into @written."""
    if not ready:
        return EXIT_PASS, None, None
    current = None
    with ProgramVM(vm_scenario(opts), builds, rundir=rundir, scratch=scratch, seed=opts.seed,
                   deterministic=opts.deterministic, accel=opts.accel, budgets=budgets) as vm:
        try:
            vm.start()
            if not opts.quiet:
                say(f"guest up: progexec on kernel {vm.release}"
                    f"{' with kcov' if vm.session.kcov else ''}; {len(ready)} program(s)")
            for prep in ready:
                current = prep
                out = vm.run(prep)
                written[prep.name] = results.write_program(rundir, prep.name, prep.path, out,
                                                           len(prep.program.ops))
                say_outcome(out)
            current = None
            vm.close()
        except (ChannelError, QmpError) as e:
            out = getattr(e, "outcome", None)
            if current is None:
                say(f"the guest never ran a program: {e}")
                return EXIT_CRASH, vm.facts(), None
            out = out or Outcome(current.name, "crash", str(e))
            written[current.name] = results.write_program(rundir, current.name, current.path,
                                                          out, len(current.program.ops))
            replay = replay_command(opts, rundir, current.name)
            say(f"{current.name}: crash ({out.reason})")
            return EXIT_CRASH, vm.facts(), replay
    return EXIT_PASS, vm.facts(), None
