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

import collections
import json
import os
import re
import shlex
import shutil
import threading
from dataclasses import dataclass

from . import rules as rules_check
from . import runner
from .abort import Executor
from .build import build_all, say
from .errors import EXIT_CRASH, EXIT_FAIL, EXIT_PASS, EXIT_SETUP, SetupError
from .judge import CRASH_MARKERS
from .ktap import parse_ktap

# Match keys kept in a pinned rule: the I/Os the original rule counted.
MATCH_KEYS = ("lba", "len", "sq", "cpu", "state")
# Trigger keys dropped from it: nth=K replaces them.
TRIGGER_KEYS = ("nth", "after", "every", "count", "prob")
OPS = ("read", "write", "flush", "discard", "write-zeroes", "any")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,30}$")
# The fault-injector's limit on rules (FE_RULES_MAX).
RULES_MAX = 4096


class ScheduleError(Exception):
    """The fault log cannot be turned into a schedule (one line)."""


@dataclass
class Fault:
    """One injected fault of the log and its pinned rule."""
    index: int          # position in the schedule, from 0
    seq: int
    ordinal: int
    op: str
    lba: int
    len: int
    rule: str           # the firing rule's name
    nth: int            # that rule's ordinal when it fired
    action: str
    pinned: str         # the pinned rule line (with its name)

    def short(self):
        return (f"{self.op} lba={self.lba} len={self.len} ({self.rule} "
                f"nth={self.nth}) {self.action}")


def rule_tokens(text):
    """Tokens of one rule line (spaces inside (...) kept); no comments."""
    text = text.split("#", 1)[0]
    out, cur, depth = [], "", 0
    for ch in text:
        if ch in " \t\r" and depth == 0:
            if cur:
                out.append(cur)
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")" and depth > 0
        cur += ch
    if cur:
        out.append(cur)
    return out


def explicit_names(rules_text):
    """Names given in the rules text (unnamed rules are keyed by their text)."""
    names = set()
    for line in rules_text.splitlines():
        toks = rule_tokens(line)
        if toks and ":" in toks[0]:
            names.add(toks[0].split(":", 1)[0])
    return names


def split_canonical(text):
    """(op, {key: value-or-None}) of a rule's canonical text (from the stats)."""
    toks = rule_tokens(text)
    if not toks or toks[0] not in OPS:
        raise ScheduleError(f"unexpected rule text {text!r}")
    keys = {}
    for t in toks[1:]:
        k, eq, v = t.partition("=")
        keys[k] = v if eq else None
    return toks[0], keys


def is_state_rule(text):
    return "set-state" in split_canonical(text)[1]


def pinned_rule(name, rule_text, nth, action):
    """The rule that fires exactly when @rule_text fired at its ordinal @nth,
    with the action it took then (drawn delays fixed to their values)."""
    op, keys = split_canonical(rule_text)
    match = [f"{k}={keys[k]}" for k in MATCH_KEYS if k in keys]
    return " ".join([f"{name}:", op, *match, f"nth={nth}", action])


def kept_rule(name, text, named):
    """A set-state rule as it was: its name only if it had one (an unnamed
    rule's seeded draws are keyed by its text, a named one's by its name)."""
    return f"{name}: {text}" if named else text


def read_fault_log(path):
    """The JSON lines of a fault log, checked: complete (seq 0, 1, ...) and
    carrying the per-rule ordinal."""
    entries = []
    try:
        with open(path) as f:
            for i, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    e = json.loads(line)
                except ValueError:
                    raise ScheduleError(f"{path}:{i}: not a JSON line") from None
                for k in ("seq", "ordinal", "op", "lba", "len", "rule", "action"):
                    if k not in e:
                        raise ScheduleError(f"{path}:{i}: no {k!r}")
                if "nth" not in e:
                    raise ScheduleError(
                        f"{path}:{i}: no per-rule ordinal 'nth' (the run was made by a "
                        "fault-injector older than minimize; run it again)")
                if e["seq"] != len(entries):
                    raise ScheduleError(f"{path}:{i}: seq {e['seq']}, expected "
                                        f"{len(entries)} (the log is incomplete)")
                entries.append(e)
    except OSError as e:
        raise ScheduleError(f"no fault log: {e.strerror}: {path}") from None
    return entries


def build_schedule(entries, rule_texts, rules_text):
    """(faults, kept rule lines) from a fault log.

    @rule_texts: {name: canonical text} of the run's rules (its stats);
    @rules_text: the run's rules file (to tell named rules from unnamed).
    Rules with set-state are kept whole, so the engine state (and every
    state= match) follows the same path; their log entries are not faults
    to minimise.  Every other entry becomes one pinned rule."""
    named = explicit_names(rules_text)
    kept, kept_names = [], set()
    for name, text in rule_texts.items():
        if is_state_rule(text):
            kept.append(kept_rule(name, text, name in named))
            kept_names.add(name)
    taken = set(rule_texts)
    faults = []
    for e in entries:
        if e["rule"] in kept_names:
            continue
        if e["rule"] not in rule_texts:
            raise ScheduleError(f"fault log seq {e['seq']}: rule {e['rule']!r} is not "
                                "among the run's rules")
        name = f"f{len(faults)}"
        while name in taken:
            name = "_" + name
        taken.add(name)
        faults.append(Fault(index=len(faults), seq=e["seq"], ordinal=e["ordinal"],
                            op=e["op"], lba=e["lba"], len=e["len"], rule=e["rule"],
                            nth=e["nth"], action=e["action"],
                            pinned=pinned_rule(name, rule_texts[e["rule"]], e["nth"],
                                               e["action"])))
    return faults, kept


def capped_rule(name, text, named, cap):
    """Rule @text that fires at most @cap times (count=, or a smaller one it
    has): as long as it fires, it fires where the original did."""
    own = split_canonical(text)[1].get("count")
    if own is not None and int(own) <= cap:
        return kept_rule(name, text, named)
    toks = [t for t in rule_tokens(text) if not t.startswith("count=")]
    return kept_rule(name, " ".join(toks[:1] + [f"count={cap}"] + toks[1:]), named)


def draws(text):
    """Whether a rule draws from its seeded stream (prob=, a delay
    distribution): an unnamed one's stream is keyed by its text."""
    _, keys = split_canonical(text)
    return "prob" in keys or any(v and "(" in v for v in keys.values())


def prefix_rules(entries, n, rule_texts, named, kept):
    """The rules text of the first @n fault log entries: the state rules as
    kept, every other rule capped at its entries among the @n (rules with
    none left out)."""
    fired = collections.Counter(e["rule"] for e in entries[:n])
    lines = ["# faultline minimize: the first %d faults of the log" % n] + list(kept)
    state = {name for name, text in rule_texts.items() if is_state_rule(text)}
    for name, text in rule_texts.items():
        if name not in state and fired.get(name):
            lines.append(capped_rule(name, text, name in named, fired[name]))
    return "\n".join(lines) + "\n"


def rules_text_of(kept, faults):
    lines = ["# faultline minimize: state rules kept as they were"] + kept if kept else []
    lines += [f.pinned + f"   # seq {f.seq} ordinal {f.ordinal} lba {f.lba}" for f in faults]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- failure identity

_NUM = re.compile(r"0x[0-9a-fA-F]+|\d+")


def crash_line(console):
    """The first console line naming a crash, with addresses, numbers and
    the timestamp blanked (they differ between kernels, not between faults)."""
    for line in console.splitlines():
        for m in CRASH_MARKERS:
            if m in line:
                text = line[line.index(m):]
                return _NUM.sub("N", text).strip()
    return ""


def signature(rundir, r):
    """What "the same failure" means: the first failing KTAP test (suite,
    number, name), the crash line, a hang, or the reason; None for a pass."""
    if r.status == EXIT_PASS:
        return None
    if r.outcome == "hang":
        return "hang"
    if r.status == EXIT_CRASH:
        try:
            with open(os.path.join(rundir, "console.log"), errors="replace") as f:
                line = crash_line(f.read())
        except OSError:
            line = ""
        return "crash: " + (line or r.reason)
    results = r.results
    if not results:
        # A Report loaded from report.json has no per-test results: the KTAP has.
        try:
            with open(os.path.join(rundir, "ktap.log"), errors="replace") as f:
                results = parse_ktap(f.read())["results"]
        except OSError:
            results = []
    for res in results:
        if res["kind"] == "fail":
            head = res["line"].split(" # ")[0]
            return f"not ok: {res['suite']} :: {head}"
    return f"{r.outcome}: " + _NUM.sub("N", r.reason)


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
        opts = runner.RunOptions(**{**self.opts.__dict__, "rules": rules_path})
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


def minimize(rundir, budget=200, jobs=1, quiet=False):
    """`faultline minimize`: 0 with a minimal set (1-minimal unless the
    budget ran out, the summary says which), 1 when the explicit schedule
    does not reproduce the failure, 2 when the run cannot be minimized."""
    if budget < 1:
        raise SetupError("--budget must be >= 1")
    if not 1 <= jobs <= 64:
        raise SetupError("--jobs must be 1-64")
    st = Minimizer(rundir, budget, jobs, quiet).run()
    return st
