"""A run's fault schedule for minimize: the faults it logged (faults.jsonl),
its rules taken apart, and rule sets that replay a chosen subset of those
faults exactly (each kept fault pinned to its rule's ordinal)."""

import collections
import json
import re
from dataclasses import dataclass

from faultline.faults.grammar import rule_tokens


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
