"""RunOptions: how to run (kernel, mode, overrides of the scenario,
backend), and its three forms in one place: the command line (from_args,
argv), run.json (meta, from_meta).  And the typed options of the commands
that run many (compare, matrix, bench, bugs): the cli layer builds them
(from_args), the domain modules never see an argparse namespace."""

import dataclasses
import os
from dataclasses import dataclass, field

from faultline.errors import SetupError
from faultline.run import inputs


def connect_options(backend, connect):
    """The backend options --connect gives (libvirt only; the URI checked
    by connecting once)."""
    if not connect:
        return {}
    if backend != "libvirt":
        raise SetupError("--connect is an option of --backend libvirt")
    return {"connect": inputs.check_libvirt_uri(connect)}


@dataclass
class RunOptions:
    """How to run: kernel, mode, overrides of the scenario, backend."""
    kernel: str | None = None
    modules: str | None = None
    deterministic: bool = False
    accel: str = "tcg"
    memory: str | None = None
    cpus: int | None = None
    timeout: str | None = None
    quiet: bool = False
    backend: str = "qemu"
    backend_options: dict = field(default_factory=dict)
    mutate: str | None = None       # lie or corrupt: mutation self-test
    rules: str | None = None    # a rules file replacing the scenario's rules
    restore: bool = False       # start from a saved guest (restore.py)
    kcov: bool = False          # the tests' kernel coverage ([vm] kcov)

    def overrides(self):
        return {k: getattr(self, k) for k in ("memory", "cpus", "timeout")}

    @classmethod
    def from_args(cls, args):
        """From a parsed command line (run, cmdline, libvirt-xml: options a
        command lacks take their defaults)."""
        backend = getattr(args, "backend", "qemu")
        backend_options = connect_options(backend, getattr(args, "connect", None))
        return cls(kernel=args.kernel, modules=args.modules,
                   deterministic=args.deterministic, accel=args.accel,
                   memory=args.memory, cpus=args.cpus, timeout=args.timeout,
                   quiet=getattr(args, "quiet", False),
                   backend=backend, backend_options=backend_options,
                   mutate=getattr(args, "mutate", None),
                   rules=getattr(args, "rules", None),
                   restore=getattr(args, "restore", False),
                   kcov=getattr(args, "kcov", False))

    def argv(self):
        """The `faultline run` options that give these options back (the
        repro command of run.json; accel is in run.json only)."""
        cmd = []
        if self.deterministic:
            cmd.append("--deterministic")
        if self.restore:
            cmd.append("--restore")
        if self.kcov:
            cmd.append("--kcov")
        if self.mutate:
            cmd += ["--mutate", self.mutate]
        if self.backend != "qemu":
            cmd += ["--backend", self.backend]
        if self.backend_options.get("connect"):
            cmd += ["--connect", self.backend_options["connect"]]
        if self.rules:
            cmd += ["--rules", os.path.abspath(self.rules)]
        if self.kernel:
            cmd += ["--kernel", os.path.abspath(self.kernel)]
        if self.modules:
            cmd += ["--modules", os.path.abspath(self.modules)]
        for opt, value in self.overrides().items():
            if value is not None:
                cmd += [f"--{opt}", str(value)]
        return cmd

    def meta(self, rules_copy=None):
        """The fields of run.json that from_meta reads back; @rules_copy: the
        run directory's copy of the --rules file."""
        return {
            "deterministic": self.deterministic, "accel": self.accel,
            "kernel": os.path.abspath(self.kernel) if self.kernel else None,
            "modules": os.path.abspath(self.modules) if self.modules else None,
            "overrides": self.overrides(),
            "backend": self.backend, "backend_options": self.backend_options,
            "mutate": self.mutate, "rules": rules_copy, "restore": self.restore,
            "kcov": self.kcov,
        }

    @classmethod
    def from_meta(cls, meta, deterministic, quiet):
        """From a run's run.json (@deterministic: the mode to rerun in)."""
        ov = dict(meta.get("overrides") or {})
        if meta["deterministic"] and ov.get("cpus") is None and "backend" not in meta:
            # Written by a launcher that forced one vCPU under --deterministic.
            ov["cpus"] = 1
        return cls(kernel=meta.get("kernel"), modules=meta.get("modules"),
                   deterministic=deterministic, accel=meta.get("accel", "tcg"),
                   memory=ov.get("memory"), cpus=ov.get("cpus"), timeout=ov.get("timeout"),
                   quiet=quiet, backend=meta.get("backend", "qemu"),
                   backend_options=meta.get("backend_options") or {},
                   mutate=meta.get("mutate"),
                   rules=meta.get("rules"), restore=meta.get("restore", False),
                   kcov=meta.get("kcov", False))


def from_args(cls, args, **given):
    """@cls (a dataclass below) from a parsed command line: each field from
    the option of the same name, except those in @given.  A field the
    command lacks is an AttributeError, not a silent default."""
    names = [f.name for f in dataclasses.fields(cls) if f.name not in given]
    return cls(**{n: getattr(args, n) for n in names}, **given)


@dataclass
class CompareOptions:
    """`faultline compare`: one scenario on two kernels."""
    scenario: str
    baseline: str
    series: str
    out: str
    run_options: RunOptions     # mode, quiet and overrides of every run
    baseline_modules: str | None = None
    series_modules: str | None = None
    runs: int = 3
    seed: int | None = None
    seeds: str | None = None    # A..B
    metrics: str | None = None  # comma-separated
    kernel_modes: str | None = None     # BASELINE,SERIES
    level: float = 0.95
    junit: str | None = None
    kcidb: str | None = None


@dataclass
class MatrixOptions:
    """`faultline matrix`: scenarios x seeds x kernels."""
    scenarios: str          # comma-separated
    out: str
    seeds: str | None = None    # A..B
    kernel: list | None = None
    modules: list | None = None     # one per kernel
    jobs: int | None = None
    backend: str = "qemu"
    run: bool = False       # lava: run the jobs here
    base_url: str | None = None
    out_jobs: str | None = None
    deterministic: bool = False
    junit: str | None = None
    kcidb: str | None = None
    results: str | None = None     # results/scenarios/SET.jsonl: each run's record


@dataclass
class BenchOptions:
    """`faultline bench`."""
    out: str
    quick: bool = False
    only: str | None = None     # comma-separated groups
    rounds: int | None = None
    json: str | None = None
    compare: str | None = None  # an earlier --json
    results: str | None = None  # a results set (bench/results.py)


@dataclass
class BugsOptions:
    """`faultline bugs`: recall on the real-bug corpus."""
    names: list
    seeds: str              # N or A..B
    out: str
    list: bool = False      # list the corpus and stop
    deterministic: bool = False
    no_faults: bool = False
    no_repro: bool = False
    budget: int = 40
    make_jobs: int | None = None    # make -jN of the kernel builds
    docs: bool = False      # then rewrite docs/ from results/ (`faultline docs`)
    backend: str = "qemu"
    connect: str | None = None  # libvirt URI
    results: str | None = None  # the results set (default results/recall/default.jsonl)
    import_dir: str | None = None   # records of an earlier campaign's --out, nothing run


@dataclass
class BugsFuzzOptions:
    """`faultline bugs --fuzz`: recall of the corpus by the fuzzer's
    defaults, no scenario (bugs/recall_fuzz.py)."""
    names: list
    seeds: list             # the search seeds
    out: str
    budget_s: float         # each campaign's wall time
    jobs: int = 1           # guests fuzzing at a time (fuzz --jobs)
    rerun: bool = False     # run again what the set has of this build
    make_jobs: int | None = None    # make -jN of the kernel builds
    results: str | None = None  # the set (default results/recall-fuzz/default.jsonl)
    docs: bool = False      # then rewrite docs/ from results/


@dataclass
class MinimizeOptions:
    """`faultline minimize`: shrink a failing --deterministic run."""
    rundir: str
    budget: int = 200       # runs, the schedule check included
    jobs: int = 1           # VMs at a time
    quiet: bool = False


@dataclass
class ExploreOptions:
    """`faultline explore`: search fault schedules of scenarios."""
    scenarios: list
    run_options: RunOptions     # kernel, mode and overrides of every run
    budget: str = "30m"         # wall time, e.g. 90s, 30m, 2h
    jobs: int = 1               # VMs at a time
    out: str | None = None
    resume: str | None = None
    seed: int = 1               # of the search
    allow_lies: bool = False
    max_runs: int | None = None
    max_failures: int | None = None
    minimize_budget: int | None = None
    quiet: bool = False
