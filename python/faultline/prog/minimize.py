"""Minimization of a failing program: a smaller program, operations and
fault rules together, that still fails the same way.  `faultline prog
minimize` and the fuzzer call it; beside gen.py and mutate.py as
syzkaller keeps generation, mutation and minimization side by side.

minimize(program, fails) never runs a candidate the checker refuses;
fails(candidate) is the caller's (a VM run) and says whether the
candidate failed the same way.  The passes, repeated until a round
changes nothing:

 1. statements (header lines and operations alike), in chunks from half
    the program down to one, each removed with every later statement that
    uses a name it defines (an object's operations, a process's lines, a
    device's swapoff and its rules);
 2. values: a range's length halved, a background `&` dropped.

A candidate the checker refuses only because a `wait` lost what it waited
for is repaired by dropping that line, so that single removals succeed.
"""

import dataclasses

from faultline.prog.check import check
from faultline.prog.lang import PAGE, ProgramError, Program, grammar

# Repairs of one candidate (each drops one refused `wait`).
MAX_REPAIRS = 4


@dataclasses.dataclass
class Stats:
    runs: int = 0               # calls of fails()
    refused: int = 0            # candidates the checker refused (not run)


def defined_name(st):
    """The name statement @st defines (an object, process, thread, device,
    cgroup), or None."""
    if st.verb in ("rule", "knob"):
        return None
    g = grammar(st.verb)
    if g.args and g.args[0] == "new" and st.args:
        return st.args[0]
    return None


def used_names(st):
    """The names statement @st refers to (its actor, objects, processes,
    devices, cgroups)."""
    names = set()
    if st.actor:
        names.add(st.actor)
    if st.verb == "rule":
        names.add(st.args[0])
        return names
    if st.verb == "knob":
        return names
    g = grammar(st.verb)
    for kind, value in zip(g.args, st.args):
        if kind in ("ref", "obj"):
            names.add(value)
    for key, value in st.opts:
        if dict(g.opts).get(key) == "cg":
            names.add(value)
    return names


def statements(program):
    """(in the header?, statement) of every line, in order."""
    return [(True, st) for st in program.header] + [(False, st) for st in program.ops]


def assemble(program, items):
    """The program of @items, each statement numbered by its index + 1 so
    that a ProgramError names the item."""
    numbered = [(h, dataclasses.replace(st, line=i + 1)) for i, (h, st) in enumerate(items)]
    return Program(program.versioned, tuple(st for h, st in numbered if h),
                   tuple(st for h, st in numbered if not h), path=program.path)


def closure(items, drop):
    """@drop (indices) with every later item that uses a name a dropped
    item defines, transitively."""
    drop = set(drop)
    gone = {defined_name(items[i][1]) for i in drop} - {None}
    for i, (_, st) in enumerate(items):
        if i in drop:
            continue
        if used_names(st) & gone:
            drop.add(i)
            name = defined_name(st)
            if name:
                gone.add(name)
    return drop


def valid(program, items, stats):
    """The checked program of @items, repaired if a `wait` is all that is
    wrong; None when the checker refuses it."""
    for _ in range(MAX_REPAIRS + 1):
        candidate = assemble(program, items)
        try:
            check(candidate, engine_rules=False)
            return candidate
        except ProgramError as e:
            bad = (e.line or 0) - 1
            if not 0 <= bad < len(items) or items[bad][1].verb != "wait":
                break
            items = items[:bad] + items[bad + 1:]
    stats.refused += 1
    return None


def try_candidate(program, items, fails, stats):
    candidate = valid(program, items, stats)
    if candidate is None:
        return None
    stats.runs += 1
    return candidate if fails(candidate) else None


def remove_chunks(program, fails, stats):
    """Pass 1: the program without as many statements as can go."""
    items = statements(program)
    chunk = max(1, len(items) // 2)
    while chunk >= 1:
        i = 0
        while i < len(items):
            drop = closure(items, range(i, min(i + chunk, len(items))))
            rest = [st for j, st in enumerate(items) if j not in drop]
            smaller = try_candidate(program, rest, fails, stats) if rest else None
            if smaller is not None:
                program, items = smaller, statements(smaller)
            else:
                i += chunk
        chunk //= 2
    return program


def simpler_values(st):
    """Variants of one operation with one value simpler."""
    if st.verb in ("rule", "knob"):
        return []
    g = grammar(st.verb)
    out = []
    for i, kind in enumerate(g.args[:len(st.args)]):
        if kind == "len" and st.args[i] > PAGE:
            half = max(PAGE, st.args[i] // 2 // PAGE * PAGE)
            out.append(dataclasses.replace(st, args=st.args[:i] + (half,) + st.args[i + 1:]))
    if st.background:
        out.append(dataclasses.replace(st, background=False))
    return out


def simplify_values(program, fails, stats):
    """Pass 2: each value made simpler while the program still fails."""
    items = statements(program)
    for i in range(len(items)):
        for variant in simpler_values(items[i][1]):
            trial = items[:i] + [(items[i][0], variant)] + items[i + 1:]
            smaller = try_candidate(program, trial, fails, stats)
            if smaller is not None:
                program, items = smaller, statements(smaller)
                break
    return program


def minimize(program, fails, max_rounds=4):
    """The smallest program found that fails(); (program, Stats).  @program
    itself is assumed to fail (the caller saw it)."""
    stats = Stats()
    program = assemble(program, statements(program))
    for _ in range(max_rounds):
        before = program.text()
        program = remove_chunks(program, fails, stats)
        program = simplify_values(program, fails, stats)
        if program.text() == before:
            break
    return program, stats

