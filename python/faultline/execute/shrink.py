"""`faultline prog minimize RUNDIR [NAME]`: the smallest program that
fails the way a program of a `prog run` failed (docs/programs.md,
"Minimizing a failure").

prog/minimize.py proposes candidates (operations and rules together);
each runs here on a ProgramVM.  One VM serves many candidates (a boot
costs 20-30 s under TCG); a candidate that crashes the guest ends that VM
and the next candidate boots a fresh one.  With --deterministic every
candidate runs in a fresh boot under -icount instead: slower, but what is
kept fails from a fresh boot, as its replay command runs it.

The same failure: a `crash` again, or a finding with the same check and
`why` as the original's first finding.
"""

import os
import shlex
from dataclasses import dataclass, field

from faultline.build.builds import build_all
from faultline.errors import EXIT_FAIL, EXIT_PASS, SetupError
from faultline.execute import devices, fresh, results
from faultline.execute.boot import ProgOptions, vm_scenario
from faultline.execute.channel import ChannelError
from faultline.execute.session import Budgets, Outcome, Prepared
from faultline.execute.vm import ProgramVM
from faultline.host import scratchdirs
from faultline.host.messages import say
from faultline.prog.lang import read
from faultline.prog.minimize import minimize
from faultline.vm.qmp import QmpError

FAILED = ("fail", "crash")


def signature(result):
    """What "the same failure" means for a result.json (or Outcome as a
    dict): ("crash",) or (check, why) of its first finding."""
    if result["verdict"] == "crash":
        return ("crash",)
    first = result["findings"][0] if result["findings"] else {}
    return (first.get("check"), first.get("why"))


def same_failure(sig, out):
    """Whether Outcome @out fails as @sig says."""
    if sig == ("crash",):
        return out.verdict == "crash"
    return out.verdict == "fail" and any((f.get("check"), f.get("why")) == sig
                                         for f in out.findings)


def recorded_flag(argv, flag):
    """The value of @flag in a recorded command line, or None."""
    for i, a in enumerate(argv[:-1]):
        if a == flag:
            return argv[i + 1]
    return None


def pick(rundir, name):
    """(name, its result.json) of the program to minimize."""
    meta, rows = results.load(rundir)
    failed = [r for r in rows if r["verdict"] in FAILED]
    if name is None:
        if len(failed) != 1:
            names = ", ".join(r["name"] for r in failed) or "none"
            raise SetupError(f"{rundir}: name the program to minimize (failed or crashed: "
                             f"{names})")
        return meta, failed[0]
    for r in rows:
        if r["name"] == name:
            if r["verdict"] not in FAILED:
                raise SetupError(f"{rundir}: {name} did not fail (verdict {r['verdict']})")
            return meta, r
    raise SetupError(f"{rundir}: no program {name!r} (programs: "
                     f"{', '.join(r['name'] for r in rows)})")


@dataclass
class Candidates:
    """Runs candidates of one program on ProgramVMs (one VM for many, a
    fresh one after a crash), or with @fresh each in a fresh boot of its
    own with no host round trip (fresh.run)."""
    opts: ProgOptions
    builds: object
    workdir: str
    name: str
    sig: tuple
    fresh: bool
    max_runs: int
    log: object
    runs: int = 0
    boots: int = 0
    outcomes: list = field(default_factory=list)
    _vm: object = None
    _scratch: str = None

    def _boot(self):
        self._scratch = scratchdirs.new_scratch()
        vm = ProgramVM(vm_scenario(self.opts), self.builds, rundir=self.workdir,
                       scratch=self._scratch, seed=self.opts.seed,
                       deterministic=self.opts.deterministic, accel=self.opts.accel,
                       budgets=Budgets())
        vm.__enter__()
        self._vm = vm
        self.boots += 1
        vm.start()

    def close(self):
        if self._vm is not None:
            self._vm.close()
            self._vm.__exit__(None, None, None)
            self._vm = None
        if self._scratch:
            scratchdirs.remove_scratch(self._scratch)
            self._scratch = None

    def run(self, program):
        """The candidate's Outcome (a crash closes the VM)."""
        path = os.path.join(self.workdir, f"candidate-{self.runs + 1:04d}.prog")
        with open(path, "w") as f:
            f.write(program.text())
        try:
            prep = Prepared.of(self.name, path, program, devices.bind(program),
                               devices.rules_of(program, self.opts.mutate))
        except devices.Refusal as e:
            return Outcome(self.name, "refused", str(e))
        why = fresh.refusal(prep.bound, prep.rules) if self.fresh else None
        if why:
            return Outcome(self.name, "refused", why)
        self.runs += 1
        if self.fresh:
            self.boots += 1
            out, _ = fresh.run(prep, vm_scenario(self.opts), self.builds,
                               bootdir=os.path.join(self.workdir, "boot"), seed=self.opts.seed,
                               budgets=Budgets(), accel=self.opts.accel)
            return out
        try:
            if self._vm is None:
                self._boot()
            out = self._vm.run(prep)
        except (ChannelError, QmpError) as e:
            out = getattr(e, "outcome", None) or Outcome(self.name, "crash", str(e))
            self.close()
        return out

    def fails(self, program):
        if self.runs >= self.max_runs:
            return False
        out = self.run(program)
        same = same_failure(self.sig, out)
        self.log(f"candidate {self.runs}: {len(program.ops)} ops, {len(program.of('rule'))} "
                 f"rules: {out.verdict}{' (same failure)' if same else ''}")
        return same


def minimize_run(rundir, name=None, *, kernel=None, modules=None, deterministic=False,
                 max_runs=200, memory=None, cpus=None, accel="tcg", quiet=False):
    """The command; its exit status: 0 a smaller program fails the same
    way (or the original is already minimal), 1 the original no longer
    fails (it did not reproduce)."""
    meta, result = pick(rundir, name)
    name = result["name"]
    pdir = results.program_dir(rundir, name)
    program = read(os.path.join(pdir, "program.prog"))
    argv = meta.get("argv") or []
    kernel = kernel or recorded_flag(argv, "--kernel")
    modules = modules or recorded_flag(argv, "--modules")
    opts = ProgOptions(os.path.join(pdir, "program.prog"), kernel=kernel, modules=modules,
                       deterministic=deterministic, mutate=meta.get("mutate"),
                       seed=meta.get("seed") or 1, memory=memory, cpus=cpus, accel=accel,
                       quiet=quiet)
    sig = signature(result)
    log = (lambda msg: None) if quiet else (lambda msg: say(f"minimize {name}: {msg}"))
    builds = build_all(kernel, modules, quiet)
    workdir = os.path.join(pdir, "minimize")
    os.makedirs(workdir, exist_ok=True)
    cands = Candidates(opts, builds, workdir, name, sig, fresh=deterministic,
                       max_runs=max_runs, log=log)
    try:
        log(f"the failure: {' '.join(str(s) for s in sig)}; {len(program.ops)} ops, "
            f"{len(program.of('rule'))} rules")
        if not cands.fails(program):
            say(f"{name}: the original program does not fail the same way here "
                f"({'fresh --deterministic boot' if deterministic else 'fresh boot'}): "
                "nothing to minimize")
            return EXIT_FAIL
        small, stats = minimize(program, cands.fails)
    finally:
        cands.close()
    out_path = os.path.join(pdir, "minimized.prog")
    with open(out_path, "w") as f:
        f.write(small.text())
    print(small.text(), end="" if small.text().endswith("\n") else "\n")
    replay = ProgOptions(out_path, kernel=kernel, modules=modules, deterministic=deterministic,
                         mutate=opts.mutate, seed=opts.seed, memory=memory, cpus=cpus)
    say(f"{out_path}: {len(small.ops)} of {len(program.ops)} ops, "
        f"{len(small.of('rule'))} of {len(program.of('rule'))} rules; {stats.runs} "
        f"candidates run in {cands.boots} boot(s)" +
        (f", stopped at --max-runs {max_runs}" if cands.runs >= max_runs else ""))
    print(f"replay: {shlex.join(replay.replay_argv(out_path))}", flush=True)
    return EXIT_PASS
