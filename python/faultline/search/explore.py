"""faultline explore: search the fault space for kernel failures nobody wrote
a rule for (docs/explore.md).

Each trial runs one schedule (grammar.py) on one of the scenarios, with the
scenario's own rules removed: a fresh random schedule, or a mutation of a
schedule in the corpus.  A run whose kernel did something new
(feedback.py) joins the corpus.  A run that fails (data check, splat,
crash, hang) is kept, rerun --deterministic where the scenario allows, and
handed to minimize; the report names the minimal schedule and the command
that reproduces it.

State (OUT/state.json, corpus/, trials.jsonl, failures/) is written after
every trial, so `--resume OUT` continues a search that was stopped.
"""

import json
import os
import random
import re
import shutil
import time
from dataclasses import dataclass

from faultline import scenario
from faultline.build.builds import build_all
from faultline.errors import EXIT_CRASH, EXIT_FAIL, EXIT_PASS, EXIT_SETUP, SetupError
from faultline.host.messages import say
from faultline.host.stop import Executor
from faultline.judge import failure, judge, ktap, report
from faultline.kernel import kconfig
from faultline.run import runner
from faultline.run.options import ExploreOptions, MinimizeOptions, RunOptions
from faultline.faults import grammar
from faultline.search import feedback, minimize

STATE = "state.json"
# Fresh schedules against mutations of kept ones, once the corpus has some.
FRESH_SHARE = 0.25
MINIMIZE_BUDGET = 40
# The generic scenario of a swap device (and syncblk completion context):
# a plain swap workload that checks every byte and nothing about faults,
# where a search starts when a scenario's test checks its own faults.
GENERIC_SCENARIOS = {("nvme", "task"): "smoke", ("syncblk", "task"): "syncblk-task",
                     ("syncblk", "irq"): "syncblk-irq", ("syncblk", "thread"): "syncblk-thread"}
_BUDGET = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h)$")


def generic_scenario(sc):
    """The generic scenario for @sc's swap device (GENERIC_SCENARIOS), or
    None when its device has none."""
    d = sc.device
    return GENERIC_SCENARIOS.get((d.kind, d.completion if d.kind == "syncblk" else "task"))


def parse_budget(text):
    """--budget 30m / 90s / 2h: seconds."""
    m = _BUDGET.match(str(text).strip())
    if not m or float(m.group(1)) <= 0:
        raise SetupError(f"--budget {text!r}: expected a duration, e.g. 90s, 30m, 2h")
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]


@dataclass
class Result:
    """One schedule's run: its Report, run directory, feature set,
    failure class ("" for none, else crash, hang or fail) and whether the
    guest bailed out (its setup or test could not run)."""
    report: object
    rundir: str
    features: set
    failure: str
    elapsed_s: float
    bailed: bool = False


def failure_class(r, bailed=False):
    """"" unless the kernel or the guest's checks failed: a crash or hang
    (exit 3), a splat or a failed guest test (exit 1).  An unmet [expect]
    of the scenario is not a failure here: its expectations were written
    for its own rules, which explore removed.  Nor is a guest that bailed
    out (KTAP "Bail out!": swapon refused a swap area whose header write
    failed, say): the schedule kept the test from running, the kernel was
    never tested."""
    if r.status == EXIT_CRASH:
        return "hang" if r.outcome == "hang" else "crash"
    if r.status != EXIT_FAIL or r.reason.startswith("expectation failed"):
        return ""
    if bailed and not r.reason.startswith("kernel splat"):
        return ""
    return "fail"


def bailed_out(rundir):
    """Whether the run's KTAP has a "Bail out!"."""
    try:
        with open(os.path.join(rundir, "ktap.log"), errors="replace") as f:
            return ktap.parse_ktap(f.read())["bail"]
    except OSError:
        return False


def run_schedule(sc_name, sched, opts, builds, rundir):
    """The seam for faster runs: one schedule on scenario @sc_name into
    @rundir (a cold boot through runner.one_run today); a Result."""
    os.makedirs(rundir, exist_ok=True)
    path = os.path.join(rundir, "schedule.rules")
    with open(path, "w") as f:
        # No rule (the baseline) still attaches the fault layer, as every
        # trial's rules do: a test that arms engine states in-band
        # (swaptest --arm-state) needs it there to pass without faults.
        f.write(sched.text() or "# explore: no faults\n")
    o = RunOptions(**{**opts.__dict__, "rules": path, "quiet": True})
    sc = runner.load_scenarios([sc_name], o)[0]
    t0 = time.monotonic()
    r, _ = runner.one_run(sc, sched.seed, o, builds, rundir, verbose=False)
    if r.status == EXIT_SETUP or r.outcome == "aborted":
        raise SetupError(f"{rundir}: {r.reason}")
    bailed = bailed_out(rundir)
    return Result(r, rundir, feedback.features(rundir), failure_class(r, bailed),
                  time.monotonic() - t0, bailed)


class Explorer:
    def __init__(self, out, opts, seed=1, jobs=1, allow_lies=False, quiet=False,
                 minimize_budget=MINIMIZE_BUDGET):
        self.out, self.opts, self.seed = os.path.abspath(out), opts, seed
        self.minimize_budget = minimize_budget
        self.jobs, self.allow_lies, self.quiet = jobs, allow_lies, quiet
        self.scenarios = []         # names as given
        self.tried = self.kept = 0
        self.elapsed_s = 0.0
        self.run_s = 0.0            # in runs of schedules (not minimize's)
        self.seen = set()
        self.corpus = []            # {"id", "scenario", "seed", "rules", "new"}
        self.failures = []          # {"trial", "scenario", "class", "signature", ...}
        self.signatures = set()
        self.spaces = {}
        self.baselines = {}         # scenario: its run with no faults at all

    # ------------------------------------------------------------ state

    def save(self):
        state = {"version": 1, "scenarios": self.scenarios, "seed": self.seed,
                 "allow_lies": self.allow_lies, "kernel": self.opts.kernel,
                 "deterministic": self.opts.deterministic, "kcov": self.opts.kcov,
                 "tried": self.tried, "kept": self.kept, "elapsed_s": round(self.elapsed_s, 1),
                 "run_s": round(self.run_s, 1),
                 "baselines": self.baselines,
                 "features": sorted(self.seen), "corpus": self.corpus,
                 "failures": self.failures}
        tmp = os.path.join(self.out, STATE + ".tmp")
        with open(tmp, "w") as f:
            json.dump(state, f, indent=1)
        os.replace(tmp, os.path.join(self.out, STATE))

    def load(self):
        path = os.path.join(self.out, STATE)
        try:
            with open(path) as f:
                st = json.load(f)
            self.scenarios = list(st["scenarios"])
            self.seed, self.allow_lies = st["seed"], st["allow_lies"]
            self.tried, self.kept = st["tried"], st["kept"]
            self.elapsed_s, self.run_s = st["elapsed_s"], st.get("run_s", 0.0)
            self.seen = set(st["features"])
            self.corpus, self.failures = st["corpus"], st["failures"]
            self.baselines = st.get("baselines", {})
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SetupError(f"--resume {self.out}: not an explore directory "
                             f"({e.__class__.__name__}: {e})") from None
        self.signatures = {f["signature"] for f in self.failures}
        return st

    # ------------------------------------------------------------ setup

    def prepare(self, names):
        """Load every scenario with its rules removed and check a sample
        schedule of each through the engine's parser: bad input stops here,
        before any VM."""
        self.scenarios = list(names)
        for name in names:
            own = scenario.load(name).faults.rules
            sc = runner.load_scenarios([name], self.opts)[0]
            self.spaces[name] = grammar.Space.of(sc, own, self.allow_lies)

    def schedule_for(self, trial):
        """(scenario, schedule, origin) of trial number @trial: drawn from
        a Random seeded by (--seed, trial), so a resumed search goes on as
        an uninterrupted one would."""
        rng = random.Random(f"{self.seed}:{trial}")
        live = self.explorable()
        name = live[trial % len(live)]
        # Drawn on the I/O the device saw in the baseline (ops, sectors).
        space = self.spaces[name].with_io(self.baselines.get(name, {}).get("io"))
        mine = [c for c in self.corpus if c["scenario"] == name]
        # Drawn whether or not there is a corpus: a fresh schedule of trial
        # N is the same one with or without kept schedules before it.
        fresh = rng.random() <= FRESH_SHARE
        if mine and not fresh:
            parent = rng.choice(mine)
            sched, what = grammar.mutate(rng, space, parse_schedule(parent))
            return name, sched, f"{what} of {parent['id']}"
        return name, grammar.generate(rng, space), "fresh"

    # ------------------------------------------------------------ trials

    def trial_dir(self, trial, name):
        return os.path.join(self.out, "runs", f"{trial:05d}-{os.path.basename(name)[:40]}")

    def record(self, trial, name, sched, origin, res):
        self.tried += 1
        self.run_s += res.elapsed_s
        # A guest that bailed out (swapon refused an area whose header write
        # failed) shows what its setup did, not the kernel under test: such
        # a schedule is not kept, nor are its features counted as seen.
        new = [] if res.bailed else feedback.new_features(res.features, self.seen)
        if not res.bailed:
            self.seen |= res.features
        rec = {"trial": trial, "scenario": name, "origin": origin, "seed": sched.seed,
               "outcome": res.report.outcome, "failure": res.failure, "new": len(new),
               "features": len(res.features), "elapsed_s": round(res.elapsed_s, 1),
               "bailed": res.bailed}
        if res.failure:
            rec["kept"] = "failure"
            self.on_failure(trial, name, sched, res)
        elif new:
            self.kept += 1
            cid = f"c{self.kept:04d}"
            path = os.path.join(self.out, "corpus", cid + ".rules")
            with open(path, "w") as f:
                f.write(f"# {name} seed {sched.seed}; trial {trial} ({origin}); "
                        f"{len(new)} new features, e.g. {new[0]}\n" + sched.text())
            self.corpus.append({"id": cid, "scenario": name, "seed": sched.seed,
                                "rules": sched.text(), "new": len(new), "trial": trial})
            rec["kept"] = cid
        if not res.failure and not rec.get("kept"):
            shutil.rmtree(res.rundir, ignore_errors=True)   # nothing to learn from it
        with open(os.path.join(self.out, "trials.jsonl"), "a") as f:
            f.write(json.dumps(rec) + "\n")

    def on_failure(self, trial, name, sched, res):
        """Keep the run, reproduce it deterministically where the scenario
        allows, minimize it; one entry of failures[]."""
        sig = failure.signature(res.rundir, res.report)
        first = sig not in self.signatures
        self.signatures.add(sig)
        meta, _ = runner.load_run(res.rundir)
        entry = {"trial": trial, "scenario": name, "class": res.failure, "signature": sig,
                 "seed": sched.seed, "rundir": os.path.relpath(res.rundir, self.out),
                 "rules": sched.text(), "after_s": round(self.elapsed_s + res.elapsed_s, 1),
                 "repro": meta["run_command"], "minimal": None}
        self.failures.append(entry)
        say(f"explore: FAILURE at trial {trial} ({name}): {sig}")
        if not first:
            entry["note"] = "same signature as an earlier failure: not minimized again"
            return
        if not self.minimize_budget:
            entry["note"] = "not minimized (--minimize-budget 0)"
            return
        self.save()     # the failure is on disk before the long part
        det_dir = res.rundir
        if not self.opts.deterministic:
            sc = runner.load_scenarios([name], self.opts)[0]
            try:
                scenario.check_deterministic(sc)
            except scenario.ScenarioError as e:
                entry["note"] = f"not minimized: {e}"
                return
            # Restored too under --restore: a restored --deterministic run
            # reproduces as a cold one does.
            o = RunOptions(**{**self.opts.__dict__, "deterministic": True})
            det_dir = res.rundir + "-deterministic"
            det = run_schedule(name, sched, o, self.builds, det_dir)
            entry["deterministic"] = det.failure or "passed"
            if not det.failure:
                entry["note"] = ("the --deterministic rerun passed: not minimized; "
                                 "the run command above is the reproducer")
                return
            entry["repro"] = runner.load_run(det_dir)[0]["run_command"]
        try:
            rc = minimize.minimize(MinimizeOptions(det_dir, budget=self.minimize_budget,
                                                   jobs=self.jobs, quiet=self.quiet))
        except SetupError as e:
            # The failure stands (its run and command are above); the search goes on.
            entry["note"] = f"not minimized: {e}"
            say(f"explore: not minimized: {e}")
            return
        mdir = os.path.join(det_dir, "minimize")
        if rc == EXIT_PASS and os.path.exists(os.path.join(mdir, "repro")):
            with open(os.path.join(mdir, "minimal.rules")) as f:
                entry["minimal"] = f.read()
            with open(os.path.join(mdir, "repro")) as f:
                entry["repro"] = f.read().strip()
        else:
            entry["note"] = f"minimize exit {rc}: the run command above is the reproducer"

    def explorable(self):
        """The scenarios schedules are tried on: not those whose kernel
        already broke a guarantee with no fault at all."""
        return [n for n in self.scenarios if not self.baselines.get(n, {}).get("broken")]

    def baseline(self, name):
        """The scenario with no faults at all, once.  It must pass, or
        every failure explore found would be the scenario's (a guest test
        that checks its own faults fails without them), unless the kernel
        broke a guarantee (crash, hang, splat, lost data): that is a
        finding, the kernel's and not any schedule's, and the scenario is
        not explored further (no schedule's failure could be told from it)."""
        d = os.path.join(self.out, "runs", "baseline-" + os.path.basename(name)[:40])
        shutil.rmtree(d, ignore_errors=True)
        seed = scenario.load(name).faults.seed
        t0 = time.monotonic()
        res = run_schedule(name, grammar.Schedule(seed, []), self.opts, self.builds, d)
        failed = res.failure or (res.bailed and res.report.status != EXIT_PASS)
        broken = judge.broken_guarantee(res.report) if failed else None
        if failed and not broken:
            generic = generic_scenario(scenario.load(name))
            hint = f" (for its device: {generic})" if generic and generic != name else ""
            raise SetupError(f"{name} fails with no faults ({failure.signature(d, res.report)}"
                             f"; {d}): explore needs a scenario that passes without its "
                             f"rules{hint}")
        self.seen |= res.features
        self.baselines[name] = {"outcome": res.report.outcome, "features": len(res.features),
                                "elapsed_s": round(res.elapsed_s, 1),
                                "io": (res.report.faults or {}).get("io") or []}
        if broken:
            self.baselines[name]["broken"] = broken
            sig = failure.signature(d, res.report)
            self.signatures.add(sig)
            self.failures.append({
                "trial": None, "scenario": name, "class": res.failure, "signature": sig,
                "seed": seed, "rundir": os.path.relpath(d, self.out), "rules": "",
                "after_s": round(self.elapsed_s + time.monotonic() - t0, 1),
                "repro": runner.load_run(d)[0]["run_command"], "minimal": None,
                "note": f"{broken} with no fault at all: the kernel's, not a schedule's; "
                        "the scenario was not explored further"})
            say(f"explore: FAILURE without faults ({name}): {sig}")
        self.save()
        if not self.quiet:
            # An unmet [expect] alone is no failure here (failure_class).
            outcome = res.report.outcome if res.failure or res.report.status == EXIT_PASS \
                else "pass (its [expect], written for its own rules, not judged)"
            io = report.device_io({"io": self.baselines[name]["io"]}) or "not reported"
            print(f"explore: baseline {name} without faults: {outcome}, "
                  f"{len(res.features)} features, {res.elapsed_s:.0f}s; "
                  f"the device saw {io}", flush=True)

    def progress(self, left_s):
        if self.quiet:
            return
        m, s = divmod(int(max(left_s, 0)), 60)
        edges = feedback.kcov_edges(self.seen)
        print(f"explore: tried {self.tried}, kept {self.kept}, features {len(self.seen)}"
              + (f" ({edges} kcov edges)" if self.opts.kcov else "")
              + f", failures {len(self.failures)}, {m}m{s:02d}s left", flush=True)

    def run(self, budget_s, max_runs=None, max_failures=None):
        for d in ("runs", "corpus"):
            os.makedirs(os.path.join(self.out, d), exist_ok=True)
        self.builds = build_all(self.opts.kernel, self.opts.modules, True)
        t0 = time.monotonic()
        start_elapsed = self.elapsed_s
        runs = 0
        self.save()
        for name in self.scenarios:
            if name not in self.baselines:
                self.baseline(name)
        while self.explorable() and time.monotonic() - t0 < budget_s and \
                (max_runs is None or runs < max_runs) and \
                (max_failures is None or len(self.failures) < max_failures):
            n = min(self.jobs, max_runs - runs) if max_runs is not None else self.jobs
            batch = [(self.tried + i,) + self.schedule_for(self.tried + i) for i in range(n)]
            with Executor(max_workers=n) as ex:
                results = list(ex.map(lambda b: run_schedule(
                    b[1], b[2], self.opts, self.builds, self.trial_dir(b[0], b[1])), batch))
            for (trial, name, sched, origin), res in zip(batch, results):
                self.elapsed_s = start_elapsed + time.monotonic() - t0
                self.record(trial, name, sched, origin, res)
                runs += 1
            self.elapsed_s = start_elapsed + time.monotonic() - t0
            self.save()
            self.progress(budget_s - (time.monotonic() - t0))
        return self.finish()

    def finish(self):
        lines = [f"explore {', '.join(self.scenarios)}: {self.tried} runs, {self.kept} kept, "
                 f"{len(self.seen)} features, {len(self.failures)} failure(s) in "
                 f"{self.elapsed_s / 60:.1f} min"
                 + (f" ({self.run_s / self.tried:.0f} s a run)" if self.tried else "")]
        for f in self.failures:
            lines.append(f"failure  {'baseline' if f['trial'] is None else 'trial %d' % f['trial']}"
                         f" {f['scenario']} after "
                         f"{f['after_s']:.0f}s: {f['signature']}")
            if f.get("minimal"):
                lines += ["  minimal  " + x for x in f["minimal"].splitlines()
                          if x.strip() and not x.startswith("#")]
            if f.get("note"):
                lines.append(f"  note     {f['note']}")
            lines.append(f"  repro    {f['repro']}")
        lines.append(f"state    {os.path.join(self.out, STATE)}")
        with open(os.path.join(self.out, "summary.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
        print("\n".join(lines), flush=True)
        return EXIT_FAIL if self.failures else EXIT_PASS


def parse_schedule(entry):
    """A corpus entry back into a Schedule (its rules re-read from text)."""
    rules = [grammar.parse_rule(line) for line in entry["rules"].splitlines()
             if grammar.rule_tokens(line)]
    return grammar.Schedule(int(entry["seed"]), rules)


def explore(eo: ExploreOptions):
    """`faultline explore`: 0 nothing failed, 1 failures found (summary.txt)."""
    names, opts, jobs, out, resume = eo.scenarios, eo.run_options, eo.jobs, eo.out, eo.resume
    quiet, minimize_budget = eo.quiet, eo.minimize_budget
    max_runs, max_failures = eo.max_runs, eo.max_failures
    budget = eo.budget
    budget_s = parse_budget(budget)
    if not 1 <= jobs <= 16:
        raise SetupError("--jobs must be 1-16")
    if minimize_budget is None:
        minimize_budget = MINIMIZE_BUDGET
    if minimize_budget < 0:
        raise SetupError("--minimize-budget must be >= 0")
    if max_runs is not None and max_runs < 1:
        raise SetupError("--max-runs must be >= 1")
    if max_failures is not None and max_failures < 1:
        raise SetupError("--max-failures must be >= 1")
    if opts.rules or opts.mutate:
        raise SetupError("explore makes its own rules: --rules and --mutate do not apply")
    # Edge coverage as feedback wherever the kernel was built with --kcov.
    opts.kcov = kconfig.has_option("KCOV", opts.kernel, opts.modules)
    if opts.kcov and not quiet:
        say("explore: the kernel has kcov: the tests' kernel edges are feedback too")
    if resume:
        ex = Explorer(resume, opts, quiet=quiet, minimize_budget=minimize_budget)
        st = ex.load()
        if names and [os.path.basename(n) for n in names] != \
                [os.path.basename(n) for n in ex.scenarios]:
            raise SetupError(f"--resume {resume}: it explores {', '.join(ex.scenarios)}, "
                             f"not {', '.join(names)}")
        if (opts.kernel or None) != st.get("kernel"):
            raise SetupError(f"--resume {resume}: it ran kernel {st.get('kernel') or 'default'}"
                             f", not {opts.kernel or 'default'}")
        ex.jobs = jobs
        # The search goes on in the mode it ran in (its corpus was judged so).
        opts.deterministic = bool(st.get("deterministic")) or opts.deterministic
        ex.prepare(ex.scenarios)
        say(f"explore: resuming {resume} at trial {ex.tried} ({ex.kept} kept, "
            f"{len(ex.seen)} features)")
    else:
        if not names:
            raise SetupError("explore needs a SCENARIO (or --resume DIR)")
        if out and os.path.exists(os.path.join(out, STATE)):
            raise SetupError(f"--out {out} holds an explore already: --resume {out} continues it")
        ex = Explorer(out or runner.DEFAULT_OUT, opts, seed=eo.seed,
                      jobs=jobs, allow_lies=eo.allow_lies, quiet=quiet,
                      minimize_budget=minimize_budget)
        ex.prepare(names)
        if not out:     # named only now: bad input leaves no directory behind
            ex.out = os.path.abspath(runner.new_dir(runner.DEFAULT_OUT, "explore"))
        os.makedirs(ex.out, exist_ok=True)
    return ex.run(budget_s, max_runs, max_failures)
