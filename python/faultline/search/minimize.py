"""faultline minimize: shrink a failing --deterministic run to the few
injected faults that make it fail (delta debugging over its fault log).

  1. the fault log (faults.jsonl) becomes an explicit schedule: one pinned
     rule per injected fault, the firing rule's match plus nth=K, K being
     that rule's own ordinal when it fired (docs/minimize.md says why this
     identity is stable);
  2. one run with the whole schedule must fail the same way as the original;
  3. ddmin over the schedule, each step a --deterministic run of the same
     scenario, kernel and seed with a subset, until 1-minimal or --budget.

A log of more faults than the engine takes rules (RULES_MAX) is first cut
to its shortest failing prefix, by bisection: each step runs the original
rules, each capped with count= at its faults within the prefix (the same
I/Os and draws up to the prefix's end, none after), until the prefix fits.

Output: RUN_DIR/minimize/ (schedule.rules, minimal.rules, steps.jsonl,
steps/NNN/ run directories, summary.txt, repro).
"""

import json
import os
import shlex
import shutil
import threading

from faultline import rules as rules_check
from faultline.build.builds import build_all
from faultline.errors import EXIT_FAIL, EXIT_PASS, EXIT_SETUP, SetupError
from faultline.host.messages import say
from faultline.host.stop import Executor
from faultline.judge.failure import signature
from faultline.run import runner
from faultline.run.options import MinimizeOptions, RunOptions
from faultline.search.fault_schedule import (RULES_MAX, ScheduleError, build_schedule, draws,
                                             explicit_names, is_state_rule, prefix_rules,
                                             read_fault_log, rules_text_of)


# ---------------------------------------------------------------- ddmin

def split(items, n):
    """@items in @n chunks of nearly equal size, in order."""
    out, start = [], 0
    for i in range(n):
        end = start + (len(items) - start) // (n - i)
        out.append(items[start:end])
        start = end
    return [c for c in out if c]


class BudgetSpent(Exception):
    pass


def ddmin(items, fails, jobs=1, progress=None):
    """Zeller's ddmin: a 1-minimal subset of @items (a list) for which
    @fails(subset) is true; fails(items) is assumed true.

    @fails(list of lists) -> list of bools evaluates candidates (jobs at a
    time may run in parallel); the result is the same for every @jobs: the
    first failing candidate in order is taken, as one at a time would.
    Raises BudgetSpent(current) when @fails does."""
    n = 2
    while len(items) >= 2:
        chunks = split(items, n)
        # Complements first: with two or more faults needed together, a
        # subset rarely fails alone, a complement often does (measured on
        # synthetic predicates: about a quarter fewer runs).
        cands = []
        if n > 2:
            cands = [([x for x in items if x not in c], "complement") for c in chunks]
        cands += [(c, "subset") for c in chunks]
        found = None
        for i in range(0, len(cands), jobs):
            batch = cands[i:i + jobs]
            if progress:
                progress(items, n, batch)
            try:
                res = fails([c for c, _ in batch])
            except BudgetSpent:
                raise BudgetSpent(items) from None
            hit = [b for b, ok in zip(batch, res) if ok]
            if hit:
                found = hit[0]
                break
        if found:
            items = found[0]
            n = 2 if found[1] == "subset" else max(n - 1, 2)
        elif n >= len(items):
            break
        else:
            n = min(len(items), 2 * n)
    return items


# ---------------------------------------------------------------- the command

def _rule_texts(orig):
    stats = orig.faults if isinstance(orig.faults, dict) else {}
    return {r["name"]: r["text"] for r in stats.get("rules", [])
            if isinstance(r, dict) and "name" in r and "text" in r}


def _fault_key(e):
    return (e["ordinal"], e["op"], e["lba"], e["len"], e["action"])


def _differs(orig_entries, new_entries):
    """One line naming the first difference between two fault logs, or "".
    Rule names are ignored (pinned rules have their own), and so is the
    order of the entries of one I/O (they are logged in rule-key order)."""
    a = sorted(_fault_key(e) for e in orig_entries)
    b = sorted(_fault_key(e) for e in new_entries)
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return (f"fault log entry {i} differs: ordinal {x[0]} {x[1]} lba={x[2]} "
                    f"len={x[3]} {x[4]} -> ordinal {y[0]} {y[1]} lba={y[2]} len={y[3]} {y[4]}")
    if len(a) != len(b):
        return f"{len(a)} faults in the original log, {len(b)} from the schedule"
    return ""


class Minimizer:
    def __init__(self, rundir, budget, jobs, quiet=False):
        self.rundir = os.path.abspath(rundir)
        self.budget = budget
        self.jobs = jobs
        self.quiet = quiet
        self.out = os.path.join(self.rundir, "minimize")
        self.runs = 0
        self.cache = {}
        self.lock = threading.Lock()
        self.steps_log = None
        self.prefix_of = None       # the log's faults, when cut to a prefix (shorten)

    def say(self, msg):
        if not self.quiet:
            print(msg, flush=True)

    def load(self):
        meta, orig = runner.load_run(self.rundir)
        # Every reason at once: fixing one (a --deterministic rerun) must not
        # meet the other (it passes too).
        why = " and ".join((["passed"] if orig.status == EXIT_PASS else [])
                           + ([] if meta.get("deterministic") else
                              ["is not a --deterministic run"]))
        if why:
            raise SetupError(f"{self.rundir}: the run {why}: minimize needs a failing run "
                             "of faultline run SCENARIO --deterministic")
        if orig.status == EXIT_SETUP:
            raise SetupError(f"{self.rundir}: the run did not get to run ({orig.reason})")
        self.meta, self.orig = meta, orig
        self.opts = runner.repro_options(meta, True, True)
        self.opts.rules = None
        self.sig = signature(self.rundir, orig)
        try:
            with open(os.path.join(self.rundir, "rules.txt")) as f:
                self.rules_text = f.read()
        except OSError:
            raise SetupError(f"{self.rundir}: no rules.txt: the run injected no faults") \
                from None
        texts = _rule_texts(orig)
        if not texts:
            raise SetupError(f"{self.rundir}: report.json has no rule statistics")
        try:
            self.entries = read_fault_log(os.path.join(self.rundir, "faults.jsonl"))
            self.faults, self.kept = build_schedule(self.entries, texts, self.rules_text)
        except ScheduleError as e:
            raise SetupError(str(e)) from None
        if not self.faults:
            raise SetupError(f"{self.rundir}: the fault log holds no fault to minimize")

    def scenario_with(self, rules_path):
        opts = RunOptions(**{**self.opts.__dict__, "rules": rules_path})
        sc = runner.load_scenarios([os.path.join(self.rundir, "scenario.toml")], opts)[0]
        sc.name = self.meta.get("scenario", sc.name)
        return sc, opts

    def run_subset(self, subset, tag, text=None, n_faults=None):
        """One step: a deterministic run with the pinned rules of @subset
        (or the rules @text, for @n_faults faults)."""
        with self.lock:
            self.runs += 1
            n = self.runs
        d = os.path.join(self.out, "steps", f"{n:03d}")
        os.makedirs(d)
        rules_path = os.path.join(d, "schedule.rules")
        with open(rules_path, "w") as f:
            f.write(text if text is not None else
                    rules_text_of(self.kept, [self.faults[i] for i in subset]))
        sc, opts = self.scenario_with(rules_path)
        r, _ = runner.one_run(sc, self.meta["seed"], opts, self.builds, d, verbose=False)
        sig = signature(d, r)
        same = sig == self.sig
        rec = {"step": n, "what": tag, "faults": len(subset) if n_faults is None else n_faults,
               "indices": list(subset), "outcome": r.outcome, "signature": sig,
               "same_failure": same, "digest": r.digest, "elapsed_s": r.elapsed_s,
               "rundir": os.path.relpath(d, self.out)}
        with self.lock:
            self.steps_log.write(json.dumps(rec) + "\n")
            self.steps_log.flush()
        if r.status == EXIT_SETUP:
            raise SetupError(f"step {n}: {r.reason}")
        return r, sig, same, d

    def fails(self, cands, tag="ddmin"):
        todo = [c for c in cands if tuple(c) not in self.cache]
        if self.runs + len(todo) > self.budget:
            todo = todo[:max(self.budget - self.runs, 0)]
            if not todo:
                raise BudgetSpent()
        with Executor(max_workers=self.jobs) as ex:
            for c, (_, sig, same, _) in zip(todo, ex.map(
                    lambda c: self.run_subset(c, tag), todo)):
                self.cache[tuple(c)] = same
                self.say(f"  step {self.runs:3}: {len(c):5} faults -> "
                         + ("same failure" if same else (sig or "pass")))
        if any(tuple(c) not in self.cache for c in cands):
            # Budget: answer only up to the last evaluated candidate.
            res = []
            for c in cands:
                if tuple(c) not in self.cache:
                    raise BudgetSpent()
                res.append(self.cache[tuple(c)])
                if res[-1]:
                    return res + [False] * (len(cands) - len(res))
        return [self.cache[tuple(c)] for c in cands]

    def progress(self, items, n, batch):
        if all(tuple(c) in self.cache for c, _ in batch):
            return      # answered from earlier steps: no run
        self.say(f"ddmin: {len(items)} faults in {n} chunks; testing "
                 f"{', '.join(f'{k} of {len(c)}' for c, k in batch)}; "
                 f"runs {self.runs}, at most {2 * n} more at this granularity, "
                 f"{self.budget - self.runs} left in the budget")

    def shorten(self):
        """Cut a log of more faults than the engine takes rules to its
        shortest failing prefix (bisection over the prefix length, each
        step the original rules capped with count=) until its faults fit;
        raises SetupError when that cannot be done."""
        limit = RULES_MAX - len(self.kept)
        if len(self.faults) <= limit:
            return
        texts = _rule_texts(self.orig)
        named = explicit_names(self.rules_text)
        unnamed = [n for n, t in texts.items() if n not in named and draws(t)
                   and not is_state_rule(t)]
        if unnamed:
            raise SetupError(f"{self.rundir}: {len(self.faults)} faults, more than the "
                             f"{limit} rules the engine takes, and rule {unnamed[0]!r} draws "
                             "from a stream keyed by its text: name it (NAME: ...) and run "
                             "again to minimize")
        # Entries up to and including the fault that ends the prefix.
        ends = [f.seq + 1 for f in self.faults]
        lo, hi = 0, len(self.faults)      # the first hi faults fail (the whole log does)
        self.say(f"prefix: {len(self.faults)} faults, more than the {limit} rules the "
                 "engine takes: bisecting to the shortest failing prefix")
        while hi > limit and lo < hi - 1:
            mid = (lo + hi) // 2
            if self.runs >= self.budget:
                raise SetupError(f"{self.rundir}: the budget ran out cutting {len(self.faults)} "
                                 f"faults to a prefix that fits (the first {hi} fail)")
            text = prefix_rules(self.entries, ends[mid - 1], texts, named, self.kept)
            _, sig, same, _ = self.run_subset([], "prefix", text, mid)
            self.say(f"  step {self.runs:3}: the first {mid:5} faults -> "
                     + ("same failure" if same else (sig or "pass")))
            if same:
                hi = mid
            else:
                lo = mid
        if hi > limit:
            raise SetupError(f"{self.rundir}: the shortest failing prefix found holds {hi} "
                             f"faults, more than the {limit} rules the engine takes")
        self.say(f"prefix: the first {hi} of {len(self.faults)} faults fail the same way")
        self.prefix_of = len(self.faults)
        self.faults = self.faults[:hi]
        self.entries = self.entries[:ends[hi - 1]]

    def check_schedule(self):
        """The whole explicit schedule must fail as the original did."""
        self.say(f"check: the explicit schedule of {len(self.faults)} faults")
        r, sig, same, d = self.run_subset(list(range(len(self.faults))), "check")
        self.cache[tuple(range(len(self.faults)))] = same
        try:
            new_entries = read_fault_log(os.path.join(d, "faults.jsonl"))
        except ScheduleError:
            new_entries = []
        diff = _differs(self.entries, new_entries)
        if not same:
            what = f"failure {self.sig!r} -> {sig or 'pass'!r}"
            return f"{what}" + (f"; {diff}" if diff else "")
        if diff:
            self.say(f"note: same failure, but {diff}")
        return ""

    def run(self):
        self.load()
        if os.path.exists(self.out):
            shutil.rmtree(self.out)
        os.makedirs(os.path.join(self.out, "steps"))
        self.builds = build_all(self.opts.kernel, self.opts.modules, True)
        self.say(f"minimize {self.meta.get('scenario')} seed {self.meta['seed']}: "
                 f"{len(self.faults)} faults ({len(self.kept)} state rules kept); "
                 f"failure: {self.sig}; budget {self.budget} runs, {self.jobs} at a time")
        with open(os.path.join(self.out, "steps.jsonl"), "w") as self.steps_log:
            self.shorten()
            with open(os.path.join(self.out, "schedule.rules"), "w") as f:
                f.write(rules_text_of(self.kept, self.faults))
            # A pinned rule the fault-injector would refuse stops us here.
            sc, _ = self.scenario_with(os.path.join(self.out, "schedule.rules"))
            rules_check.check_scenarios([sc])
            diff = self.check_schedule()
            if diff:
                say(f"the explicit schedule does not reproduce the failure: {diff}")
                return EXIT_FAIL
            complete = True
            try:
                minimal = ddmin(list(range(len(self.faults))), self.fails, self.jobs,
                                self.progress)
            except BudgetSpent as e:
                minimal, complete = e.args[0], False
        return self.finish(minimal, complete)

    def finish(self, minimal, complete):
        faults = [self.faults[i] for i in minimal]
        path = os.path.join(self.out, "minimal.rules")
        with open(path, "w") as f:
            f.write(rules_text_of(self.kept, faults))
        cmd = [runner.FAULTLINE, "run", os.path.join(self.rundir, "scenario.toml"),
               "--rules", path, "--deterministic", "--seed", str(self.meta["seed"])]
        for k in ("kernel", "modules"):
            if getattr(self.opts, k):
                cmd += [f"--{k}", self.opts.__dict__[k]]
        for k, v in self.opts.overrides().items():
            if v is not None:
                cmd += [f"--{k}", str(v)]
        if self.opts.backend != "qemu":
            cmd += ["--backend", self.opts.backend]
        repro = shlex.join(cmd)
        with open(os.path.join(self.out, "repro"), "w") as f:
            f.write(repro + "\n")
        head = (f"{self.prefix_of or len(self.faults):,} faults -> "
                + (f"the first {len(self.faults):,} -> " if self.prefix_of else "")
                + f"{len(faults)}"
                + ("" if complete else f" (budget of {self.budget} runs spent: "
                   "smaller, not yet 1-minimal)"))
        lines = [head + ": " + ", ".join(f"{f.pinned.split(':')[0]} {f.short()}"
                                          for f in faults[:3])
                 + (f", ... ({len(faults) - 3} more)" if len(faults) > 3 else ""),
                 f"fails  {self.sig}",
                 f"steps  {self.runs} runs (schedule check included), "
                 f"{'1-minimal' if complete else 'not 1-minimal'}",
                 f"rules  {path}",
                 f"steps  {os.path.join(self.out, 'steps.jsonl')}",
                 f"repro  {repro}"]
        summary = {"faults": self.prefix_of or len(self.faults), "prefix": len(self.faults)
                   if self.prefix_of else None, "minimal": [f.__dict__ for f in faults],
                   "one_minimal": complete, "runs": self.runs, "budget": self.budget,
                   "signature": self.sig, "kept_state_rules": self.kept,
                   "repro": repro}
        with open(os.path.join(self.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
        with open(os.path.join(self.out, "summary.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
        print("\n".join(lines), flush=True)
        return EXIT_PASS


def minimize(opts: MinimizeOptions):
    """`faultline minimize`: 0 with a minimal set (1-minimal unless the
    budget ran out, the summary says which), 1 when the explicit schedule
    does not reproduce the failure, 2 when the run cannot be minimized."""
    rundir, budget, jobs, quiet = opts.rundir, opts.budget, opts.jobs, opts.quiet
    if budget < 1:
        raise SetupError("--budget must be >= 1")
    if not 1 <= jobs <= 64:
        raise SetupError("--jobs must be 1-64")
    st = Minimizer(rundir, budget, jobs, quiet).run()
    return st
