"""Fault schedules: random rule sets drawn from what one attach point
supports (docs/rules.md), and their mutations.  `faultline explore` draws
them for a scenario's device (Space.of); the program generator draws a
program's rules for its swap devices (Space.of_program).

A schedule is an engine seed and a list of Rule; its text is a rules file
for `faultline run --rules`.  Everything is drawn from a random.Random the
caller seeds, so a search is repeatable.

Excluded unless asked for (`allow_lies`): actions that break the guest's
data by design or that the frontend cannot recover from, so that a failure
explore finds is the kernel's fault, never the device's:
  - lie, corrupt: they lose or flip data on purpose;
  - a read error (op read or any): swap-in of that page fails, the page is
    gone (SIGBUS), as it would be on a real dying disk; except where the
    scenario's own rules fail reads (its tests judge what the kernel owes
    then: SIGBUS or EIO, never a wrong byte), and then only in the engine
    states those rules were armed in;
  - reset-fail=: Linux removes an NVMe controller whose reset failed;
  - lost completions (drop, error=timeout, irq=suppress) and fatal: only on
    writes (the driver's abort fails the I/O: a write is redirtied, a read
    loses its page), only on frontends that time out (NVMe, syncblk; not
    virtio), and on NVMe only
    when the scenario's own rules already lose completions or fail the
    controller (its author judged its test to survive the aborts);
    otherwise an abort fails the reads in flight too.
"""

import dataclasses
import re
from dataclasses import dataclass, field

from faultline import scenario as scenario_mod

OPS_WRITE = ("write", "discard", "write-zeroes", "flush")
ERRORS = ("eio", "enospc", "write-fault", "internal")
# Caps on the delay a rule adds, by how often it fires: a schedule that
# slows every swap I/O by milliseconds turns a 2-minute run into a timeout
# (a "hang" that is the device's fault).
DENSE_DELAY_MAX_NS = 300_000
SPARSE_DELAY_MAX_NS = 20_000_000
# A stalled disk (a fault's latency up to a quarter second) on rules
# capped with count= so that their delays, summed over the schedule as if
# none overlapped, stay within the scenario's delay budget: a share of its
# timeout.  Some races open only when most I/Os of a kind stall that long.
HEAVY_DELAY_MAX_NS = 250_000_000
DELAY_BUDGET_SHARE = 0.25
HEAVY_SHARE = 0.3       # delay rules drawn count-capped for heavy delays
# Lost completions cost a driver timeout each (NVMe 30 s, syncblk 10 s).
LOST_COUNT_MAX = 2


@dataclass
class Space:
    """What schedules may contain for one scenario's device."""
    kind: str                       # nvme, syncblk, virtio-blk, virtio-scsi
    sectors: int                    # device size in 512-byte sectors
    cpus: int = 1
    states: tuple = ()              # engine states the scenario's tests arm
    allow_lies: bool = False
    lost_ok: bool = False           # drop / timeout / irq=suppress allowed
    fatal_ok: bool = False          # NVMe fatal allowed
    context_ok: bool = True         # complete= allowed (syncblk)
    # Read errors allowed (the scenario's own rules fail reads): in these
    # states (empty: in any); None: not allowed.
    read_error_states: tuple | None = None
    delay_budget_ns: int = 0        # what heavy delays may add to a run in all
    # The action kinds rules may take (empty: every one the space allows),
    # e.g. ("delay", "irq-delay") for a delay-only search.
    actions: tuple = ()
    # The I/Os the device saw in a run without faults (x-fault-query-stats
    # "io"): {op: (count, first sector, last sector)}; empty: not known.
    io: dict = field(default_factory=dict)

    @classmethod
    def of(cls, sc, own_rules, allow_lies=False):
        """The space of scenario @sc whose own rules were @own_rules."""
        states = sorted({int(m) for t in sc.tests
                         for m in re.findall(r"--arm-state[ =](\d+)", t)} - {0})
        toks = own_rules.split()
        lost = any(t in ("drop", "error=timeout", "irq=suppress") for t in toks)
        fatal = "fatal" in toks
        kind = sc.device.kind
        can_lose = kind not in scenario_mod.NO_TIMEOUT_KINDS
        # swapctx --expect MODE fails when a completion leaves MODE: a
        # complete= rule would fail it by the device's doing, and so would a
        # lost completion (the driver's timeout ends it elsewhere; seen on
        # the fixed kernel: one dropped write failed syncblk-task).
        asserted = any("swapctx" in t and "--expect" in t for t in sc.tests)
        return cls(kind=kind, sectors=sc.device.size_bytes // 512, cpus=sc.vm.cpus,
                   states=tuple(states), allow_lies=allow_lies, context_ok=not asserted,
                   read_error_states=_read_error_states(own_rules),
                   lost_ok=can_lose and not (asserted and not lost and not allow_lies)
                   and (kind == "syncblk" or lost or fatal or allow_lies),
                   fatal_ok=kind == "nvme" and (fatal or allow_lies),
                   delay_budget_ns=int(sc.timeout_s * DELAY_BUDGET_SHARE * 10**9))

    @classmethod
    def of_program(cls, kind, size_bytes, cpus, delay_budget_ns, actions=()):
        """The space of a program's swap device of @kind and @size_bytes.
        The program oracle relaxes what a failed read may do (its
        failed-read rule, docs/programs.md), so reads may fail in any
        state; lost completions only where the driver's abort fails the
        lost I/O alone (syncblk: the NVMe abort and reset fail the reads in
        flight, which no read rule announced; virtio never times out); no
        fatal and no lies (a failed controller or a lying device leaves
        nothing the oracle can judge).  The engine's states are the gate's
        in a run without the host: no state= matches."""
        return cls(kind=kind, sectors=max(1, size_bytes // 512), cpus=cpus,
                   read_error_states=(), lost_ok=kind == "syncblk",
                   delay_budget_ns=delay_budget_ns, actions=tuple(actions))

    def with_io(self, io):
        """This space, its rules drawn on the I/O of @io (the "io" list of
        x-fault-query-stats from a run without faults)."""
        return dataclasses.replace(self, io={
            e["op"]: (int(e["count"]), int(e["lba-min"]), min(int(e["lba-max"]), self.sectors - 1))
            for e in io or () if int(e["count"]) > 0})

    def extent(self, op):
        """The sectors rules on @op are drawn in: those the device saw @op
        touch (any op for "any"), else the whole device."""
        seen = list(self.io.values()) if op == "any" else [self.io[op]] if op in self.io else []
        if not seen:
            return 0, self.sectors - 1
        return min(lo for _, lo, _ in seen), max(hi for _, _, hi in seen)

    def heavy_count(self):
        """The most hits a rule with heavy delays may have (0: none)."""
        return self.delay_budget_ns // HEAVY_DELAY_MAX_NS


def _read_error_states(rules_text):
    """The engine states the read-error rules of @rules_text are armed in
    (() when one of them is not), or None when no rule fails reads."""
    states = set()
    for line in rules_text.splitlines():
        toks = line.split("#", 1)[0].split()
        if toks and toks[0].endswith(":"):
            toks = toks[1:]
        if not toks or toks[0] not in ("read", "any") or \
                not any(t.startswith("error=") for t in toks):
            continue
        state = next((t[len("state="):] for t in toks if t.startswith("state=")), None)
        if state is None or not state.isdigit():
            return ()
        states.add(int(state))
    return tuple(sorted(states)) if states else None


def _reads_may_fail(space, op):
    """Whether a rule on @op may fail reads in @space (in some state)."""
    return space.allow_lies or (space.read_error_states is not None and
                                op in ("read", "any"))


def read_error_ok(space, op, match):
    """A read error on @op with @match within what the scenario allows."""
    if space.allow_lies:
        return True
    if space.read_error_states is None or op not in ("read", "any"):
        return False
    return not space.read_error_states or match.get("state") in space.read_error_states


@dataclass
class Rule:
    name: str
    op: str
    match: dict = field(default_factory=dict)     # lba, len, sq, cpu, state: (a, b) or int
    trigger: dict = field(default_factory=dict)   # nth, after, every, count: int; prob: float
    action: dict = field(default_factory=dict)    # key: value (None for a flag)

    def body(self):
        """The rule's text without its name: what a program's `rule` line
        carries after `NAME:`."""
        return self.text().split(" ", 1)[1]

    def text(self):
        out = [f"{self.name}:", self.op]
        for k in ("lba", "len", "sq", "cpu", "state"):
            if k in self.match:
                v = self.match[k]
                out.append(f"{k}={v[0]}-{v[1]}" if isinstance(v, tuple) else f"{k}={v}")
        for k in ("nth", "after", "every", "count", "prob"):
            if k in self.trigger:
                v = self.trigger[k]
                out.append(f"prob={v:.4f}".rstrip("0") if k == "prob" else f"{k}={v}")
        for k, v in self.action.items():
            out.append(k if v is None else f"{k}={v}")
        return " ".join(out)

    def copy(self):
        return Rule(self.name, self.op, dict(self.match), dict(self.trigger),
                    dict(self.action))


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


def parse_rule(text, name="r"):
    """The Rule of one rule's text (`NAME: OP ...` or `OP ...` named
    @name), as text() writes it."""
    toks = rule_tokens(text)
    if toks and toks[0].endswith(":"):
        name, toks = toks[0][:-1], toks[1:]
    r = Rule(name, toks[0] if toks else "")
    for t in toks[1:]:
        k, eq, v = t.partition("=")
        if k in ("lba", "len", "sq", "cpu", "state"):
            a, _, b = v.partition("-")
            r.match[k] = (int(a), int(b)) if b else int(a)
        elif k in ("nth", "after", "every", "count"):
            r.trigger[k] = int(v)
        elif k == "prob":
            r.trigger[k] = float(v)
        else:
            r.action[k] = v if eq else None
    return r


@dataclass
class Schedule:
    seed: int
    rules: list

    def text(self):
        return "".join(r.text() + "\n" for r in self.rules)

    def copy(self):
        return Schedule(self.seed, [r.copy() for r in self.rules])

    def to_json(self):
        return {"seed": self.seed, "rules": self.text()}


# ---------------------------------------------------------------- durations

def dur(ns):
    """@ns in the largest exact unit (the engine's canonical form)."""
    for unit, f in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns % f == 0:
            return f"{ns // f}{unit}"
    return f"{ns}ns"


def _log_uniform(rng, lo, hi):
    """An integer drawn log-uniformly from [lo, hi]."""
    return int(round(lo * (hi / lo) ** rng.random()))


def _round_us(ns):
    return max(1000, ns // 1000 * 1000)


def _delay(rng, cap):
    # A rule allowed heavy delays is there for stalls: from 1 ms up.
    lo = 1_000_000 if cap >= HEAVY_DELAY_MAX_NS else 2_000
    shape = rng.choice(("fixed", "uniform", "exp"))
    if shape == "fixed":
        return dur(_round_us(_log_uniform(rng, lo, cap)))
    if shape == "exp":
        return f"exp({dur(_round_us(_log_uniform(rng, lo, cap // 3)))})"
    a = _round_us(_log_uniform(rng, lo // 2, cap // 4))
    b = _round_us(min(cap, a * rng.randint(2, 20)))
    return f"uniform({dur(a)},{dur(max(a, b))})"


def delay_cap(rule, space):
    """The longest delay @rule may add in @space: heavy within the delay
    budget, else long only for rules that fire rarely."""
    t = rule.trigger
    if "count" in t and t["count"] <= space.heavy_count():
        return HEAVY_DELAY_MAX_NS
    sparse = ("nth" in t or t.get("count", 1 << 30) <= 50 or t.get("prob", 1) <= 0.02
              or t.get("every", 1) >= 50)
    return SPARSE_DELAY_MAX_NS if sparse else DENSE_DELAY_MAX_NS


# ---------------------------------------------------------------- one rule

# An op's weight at least, once the device's I/O mix is known.
IO_SHARE_MIN = 0.05


def _ops(space):
    ops = [("write", 6), ("read", 3), ("any", 1), ("discard", 1)]
    if space.kind != "syncblk":
        ops += [("flush", 1)]
    if space.kind in ("nvme", "virtio-blk"):
        ops += [("write-zeroes", 1)]
    total = sum(c for c, _, _ in space.io.values())
    if not total:
        return ops
    # Known from a run without faults: the workload's own mix.  A rule on
    # an op it never issues never fires, and one it issues as often as
    # writes deserves as many rules.
    return [(op, 10 * max(space.io[op][0] / total, IO_SHARE_MIN) if op != "any" else w)
            for op, w in ops if op == "any" or op in space.io]


def _actions(space, op):
    """(kind, weight) of the actions a rule on @op may take."""
    data_op = op in ("write", "discard", "write-zeroes", "flush")
    acts = [("delay", 5)]
    if data_op or _reads_may_fail(space, op):
        acts.append(("error", 4))
    # A lost completion ends in the driver's abort: a failed write is
    # redirtied, a failed read loses the page (syncblk: timeouts 1, errors
    # 1, swapstress killed, in explore's first run of syncblk-task).
    lost = space.lost_ok and (data_op or space.allow_lies)
    if space.kind == "nvme":
        acts.append(("irq-delay", 2))
        if lost:
            acts.append(("suppress", 1))
        if space.fatal_ok and (data_op or space.allow_lies):
            acts.append(("fatal", 1))
    if space.kind == "syncblk" and space.context_ok:
        acts.append(("complete", 2))
    if lost:
        acts.append(("drop", 1))
    if space.allow_lies:
        if op in ("read", "write", "any"):
            acts.append(("corrupt", 1))
        acts.append(("lie", 1))
        if space.kind == "nvme":
            acts.append(("reset-fail", 1))
    return [a for a in acts if a[0] in space.actions] if space.actions else acts


def _weighted(rng, pairs):
    total = sum(w for _, w in pairs)
    x = rng.uniform(0, total)
    for v, w in pairs:
        x -= w
        if x <= 0:
            return v
    return pairs[-1][0]


def _range(rng, lo, hi):
    a = rng.randint(lo, hi)
    return (a, rng.randint(a, min(hi, a + max(1, (hi - lo) // rng.choice((2, 8, 64))))))


def _match(rng, space, op):
    m = {}
    if rng.random() < 0.3:
        m["lba"] = _range(rng, *space.extent(op))
    if rng.random() < 0.1:
        m["len"] = rng.choice([(8, 8), (1, 7), (9, 256), (8, 64)])
    if space.kind == "nvme" and space.cpus > 1 and rng.random() < 0.2:
        m["sq"] = rng.randint(1, space.cpus)
    if space.kind == "syncblk" and space.cpus > 1 and rng.random() < 0.2:
        m["cpu"] = rng.randint(0, space.cpus - 1)
    if space.states and rng.random() < 0.3:
        m["state"] = rng.choice(space.states)
    return m


def _trigger(rng, rare, heavy_count=0):
    if heavy_count and rng.random() < HEAVY_SHARE:
        # Most or every matching I/O, up to the budget's count: a stall.
        t = {"count": _log_uniform(rng, max(1, heavy_count // 8), heavy_count)}
        kind = rng.choice(("none", "none", "prob", "every"))
        if kind == "prob":
            t["prob"] = round(rng.uniform(0.2, 0.9), 2)
        elif kind == "every":
            t["every"] = rng.randint(2, 4)
        return t
    kind = rng.choice(("prob", "every", "nth", "after-every", "none") if not rare
                      else ("prob", "every", "nth", "after-every"))
    t = {}
    if kind == "prob":
        t["prob"] = round(_log_uniform(rng, 10, 3000) / 10000, 4)
    elif kind == "every":
        t["every"] = _log_uniform(rng, 2, 500)
    elif kind == "nth":
        t["nth"] = _log_uniform(rng, 1, 5000)
    elif kind == "after-every":
        t["after"] = _log_uniform(rng, 1, 5000)
        t["every"] = _log_uniform(rng, 1, 200)
    if kind != "nth" and (rare or rng.random() < 0.4):
        t["count"] = _log_uniform(rng, 1, LOST_COUNT_MAX if rare else 200)
    return t


def _action(rng, space, kind, rule):
    op = rule.op
    if kind == "delay":
        return {"delay": _delay(rng, delay_cap(rule, space))}
    if kind == "irq-delay":
        return {"irq-delay": _delay(rng, delay_cap(rule, space))}
    if kind == "error":
        a = {"error": rng.choice(ERRORS + (("read-error",) if _reads_may_fail(space, op)
                                           else ()))}
        if op == "write" and rng.random() < 0.25:
            a["when"] = "after"
        if space.kind == "nvme" and rng.random() < 0.6:
            a["dnr"] = None
        return a
    if kind == "suppress":
        return {"irq": "suppress"}
    if kind == "complete":
        return {"complete": rng.choice(("irq", "task", "thread"))}
    if kind == "corrupt":
        return {"corrupt": rng.randint(1, 16)}
    if kind == "reset-fail":
        return {"reset-fail": rng.randint(1, 3)}
    return {kind: None}         # drop, fatal, lie


RARE = ("suppress", "drop", "fatal", "reset-fail")


def gen_rule(rng, space, name):
    op = _weighted(rng, _ops(space))
    kind = _weighted(rng, _actions(space, op))
    heavy = space.heavy_count() if kind in ("delay", "irq-delay") else 0
    r = Rule(name, op, _match(rng, space, op), _trigger(rng, kind in RARE, heavy))
    r.action = _action(rng, space, kind, r)
    if op in ("read", "any") and "error" in r.action and \
            not read_error_ok(space, op, r.match):
        # allowed only in the states the scenario's own read errors use
        r.match["state"] = rng.choice(space.read_error_states)
    return r


def _fit_budget(space, sched):
    """Cut the counts of @sched's rules allowed heavy delays so that their
    worst case, together, stays within the space's delay budget."""
    heavy = [r for r in sched.rules if any(k in r.action for k in ("delay", "irq-delay"))
             and delay_cap(r, space) == HEAVY_DELAY_MAX_NS]
    total = sum(r.trigger["count"] for r in heavy)
    if total > space.heavy_count():
        for r in heavy:
            r.trigger["count"] = max(1, r.trigger["count"] * space.heavy_count() // total)
    return sched


def _fresh_name(rules):
    n = 0
    taken = {r.name for r in rules}
    while f"x{n}" in taken:
        n += 1
    return f"x{n}"


def generate(rng, space, max_rules=4):
    """A random schedule of 1..@max_rules rules."""
    rules = []
    for _ in range(rng.randint(1, max_rules)):
        rules.append(gen_rule(rng, space, _fresh_name(rules)))
    return _fit_budget(space, Schedule(rng.randrange(1 << 32), rules))


# ---------------------------------------------------------------- mutations

def _scale(rng, v, lo, hi):
    return max(lo, min(hi, int(round(v * rng.choice((0.25, 0.5, 2, 4)))) or lo))


def _mutate_distribution(rng, space, r):
    key = next((k for k in ("delay", "irq-delay") if k in r.action), None)
    if key:
        r.action[key] = _delay(rng, delay_cap(r, space))
        return True
    if "error" in r.action:
        r.action.update(_action(rng, space, "error", r))
        if "dnr" in r.action and rng.random() < 0.5:
            del r.action["dnr"]
        return True
    return False


def _mutate_range(rng, space, r):
    """Widen or narrow the rule's LBA range or trigger."""
    if "lba" in r.match and rng.random() < 0.5:
        a, b = r.match["lba"]
        lo, hi = space.extent(r.op)
        mid, half = min(max((a + b) // 2, lo), hi), max(1, (b - a) // 2)
        half = _scale(rng, half, 1, hi - lo + 1)
        r.match["lba"] = (max(lo, mid - half), min(hi, mid + half))
        return True
    t = r.trigger
    if "prob" in t:
        t["prob"] = round(min(0.5, max(0.0005, t["prob"] * rng.choice((0.25, 0.5, 2, 4)))), 4)
    elif "every" in t:
        t["every"] = _scale(rng, t["every"], 1, 5000)
    elif "nth" in t:
        t["nth"] = _scale(rng, t["nth"], 1, 20000)
    elif "count" in t:
        delays = any(k in r.action for k in ("delay", "irq-delay"))
        t["count"] = _scale(rng, t["count"], 1,
                            max(200, space.heavy_count()) if delays else 200)
    else:
        return False
    if "count" in t and any(k in r.action for k in RARE + ("irq",)):
        t["count"] = min(t["count"], LOST_COUNT_MAX)
    if any(k in r.action for k in ("delay", "irq-delay")):
        _mutate_distribution(rng, space, r)     # keep its delay within the new cap
    return True


def mutate(rng, space, sched, max_rules=6):
    """A mutated copy of @sched, never the same schedule, and what was
    done (one word)."""
    s = sched.copy()
    ops = ["distribution", "range", "seed", "add", "drop", "regen"]
    while True:
        what = rng.choice(ops)
        if what == "seed":
            s.seed = rng.randrange(1 << 32)
        elif what == "add" and len(s.rules) < max_rules:
            s.rules.append(gen_rule(rng, space, _fresh_name(s.rules)))
        elif what == "drop" and len(s.rules) > 1:
            s.rules.pop(rng.randrange(len(s.rules)))
        elif what == "regen" and s.rules:
            i = rng.randrange(len(s.rules))
            s.rules[i] = gen_rule(rng, space, s.rules[i].name)
        elif what == "distribution" and s.rules:
            if not _mutate_distribution(rng, space, rng.choice(s.rules)):
                continue
        elif what == "range" and s.rules:
            if not _mutate_range(rng, space, rng.choice(s.rules)):
                continue
        else:
            continue
        _fit_budget(space, s)
        if what != "seed" and s.text() == sched.text():
            continue        # redrew what it had: a run would repeat its parent
        return s, what


# ---------------------------------------------------------------- checks

def excluded(text, space):
    """Why rules @text break data or are not recoverable in @space (a
    one-line reason), or "".  Independent of the generator: the unit test
    holds every generated schedule to it."""
    for line in text.splitlines():
        toks = line.split("#", 1)[0].split()
        if not toks:
            continue
        op = toks[1] if toks[0].endswith(":") else toks[0]
        keys = {t.split("=", 1)[0]: t.partition("=")[2] for t in toks}
        if space.allow_lies:
            continue
        for k in ("lie", "corrupt", "reset-fail"):
            if k in keys:
                return f"{line}: {k} breaks data"
        state = int(keys["state"]) if keys.get("state", "").isdigit() else None
        if "error" in keys and op in ("read", "any") and \
                not read_error_ok(space, op, {"state": state} if state is not None else {}):
            return f"{line}: a read error loses the page"
        if "error" in keys and keys["error"] == "read-error" and op not in ("read", "any"):
            return f"{line}: read-error"
        lost = "drop" in keys or keys.get("error") == "timeout" or keys.get("irq") == "suppress"
        if lost and not space.lost_ok:
            return f"{line}: lost completion not recoverable here"
        if (lost or "fatal" in keys) and op in ("read", "any"):
            return f"{line}: the driver's abort fails the read: the page is lost"
        if "fatal" in keys and not space.fatal_ok:
            return f"{line}: fatal not allowed here"
        if "complete" in keys and not space.context_ok:
            return f"{line}: the scenario's test asserts the completion context"
    return ""


def device_problem(kind, text):
    """What the attach point of @kind refuses in @text (one line), or "":
    the match keys it does not supply (docs/rules.md), then the launcher's
    own device check (scenario.check_rules_for_device)."""
    supplies = {"nvme": {"sq"}, "syncblk": {"cpu"}}.get(kind, set())
    for line in text.splitlines():
        for t in line.split("#", 1)[0].split():
            k = t.split("=", 1)[0]
            if k in ("sq", "cpu") and k not in supplies:
                return f"{line}: '{k}' is not supplied by {kind}"
    try:
        scenario_mod.check_rules_for_device(kind, text, "explore")
    except scenario_mod.ScenarioError as e:
        return str(e)
    return ""
