"""Seeded mutations of a valid program that keep it valid, for the fuzzer.

mutate(program, rng) changes one thing: a value, an operation inserted,
deleted or duplicated, a splice with another program, a knob or a rule.
A candidate the checker refuses is dropped and another drawn (all from
RNG, so the same RNG state gives the same mutant).
"""

import random

from faultline.prog.check import Checker, replay
from faultline.faults import grammar as fault_grammar
from faultline.prog.gen import (Generator, device_space, draw_rule, generate, load_weights,
                                pages_of, pick)
from faultline.prog.lang import PAGE, VERSION_MAX, Op, ProgramError, Program, grammar, parse

KINDS = ("value", "insert", "delete", "duplicate", "splice", "knob", "rule")
ATTEMPTS = 40


def tweak(rng, kind, value):
    """Another value of KIND near VALUE (None: this kind is not tweaked)."""
    if kind in ("off", "len", "size", "size0") or kind == "limit" and value != "max":
        n = pages_of(value * rng.uniform(0.25, 2.0)) if rng.random() < 0.7 else \
            max(0, value + rng.choice((-PAGE, PAGE)))
        return n if n or kind in ("off", "size0") else PAGE
    if kind == "version":
        return rng.randint(1, VERSION_MAX)
    if isinstance(kind, tuple) and isinstance(kind[0], int):
        return rng.randint(kind[0], min(kind[1], kind[0] + 200))
    if isinstance(kind, tuple):
        return rng.choice(kind)
    return None


def change_value(rng, op):
    g = grammar(op.verb)
    slots = [("arg", i, k) for i, k in enumerate(g.args[:len(op.args)])] + \
        [("opt", i, dict(g.opts)[key]) for i, (key, _) in enumerate(op.opts)]
    if not slots:
        return None
    where, i, kind = rng.choice(slots)
    old = op.args[i] if where == "arg" else op.opts[i][1]
    new = tweak(rng, kind, old)
    if new is None or new == old:
        return None
    if where == "arg":
        return Op(op.verb, op.args[:i] + (new,) + op.args[i + 1:], op.opts, op.actor,
                  op.background)
    return Op(op.verb, op.args, op.opts[:i] + ((op.opts[i][0], new),) + op.opts[i + 1:],
              op.actor, op.background)


def generator_at(program, index, rng, weights):
    """A generator whose checker has run the header and ops[:index]."""
    c = replay(Program(program.versioned, program.header, program.ops[:index]), Checker())
    g = Generator(rng, weights, c)
    g.uses_fork = g.uses_threads = True
    g.version = rng.randint(0, VERSION_MAX - 1)
    return g


def candidate(program, kind, rng, weights):
    ops, header = list(program.ops), list(program.header)
    i = rng.randrange(len(ops) + 1)
    if kind == "value" and ops:
        i = min(i, len(ops) - 1)
        new = change_value(rng, ops[i])
        if new is None:
            return None
        ops[i] = new
    elif kind == "insert":
        op = generator_at(program, i, rng, weights).build(pick(rng, weights["operations"]))
        if op is None:
            return None
        ops.insert(i, op)
    elif kind in ("delete", "duplicate") and ops:
        i = min(i, len(ops) - 1)
        if kind == "delete":
            del ops[i]
        else:
            ops.insert(i, ops[i])
    elif kind == "splice":
        donor = generate(rng.getrandbits(32), weights)
        g = generator_at(program, i, rng, weights)
        kept = []
        for op in donor.ops[rng.randrange(len(donor.ops) + 1):]:
            g.try_op(op, kept)
        ops = ops[:i] + kept
    elif kind == "knob":
        header = change_knob(rng, header, weights)
    elif kind == "rule":
        header = change_rule(rng, header, weights)
    else:
        return None
    return Program(program.versioned, tuple(header), tuple(ops), program.path)


def change_knob(rng, header, weights):
    values = weights["knobs"]["values"]
    knobs = [i for i, st in enumerate(header) if st.verb == "knob"]
    if knobs and rng.random() < 0.3:
        del header[rng.choice(knobs)]
        return header
    key = rng.choice(list(values))
    st = Op("knob", ((key, rng.choice(values[key])),))
    same = [i for i in knobs if header[i].args[0][0] == key]
    if same:
        header[same[0]] = st
    else:
        header.insert(knobs[-1] + 1 if knobs else 0, st)
    return header


def change_rule(rng, header, weights):
    """Drop a rule, mutate one as explore mutates a schedule's rule (its
    distribution or its range), or draw a new one (faults/grammar.py)."""
    found = [i for i, st in enumerate(header) if st.verb == "rule"]
    swaps = [st for st in header if st.verb == "swap"]
    if weights["rules"]["probability"] <= 0:
        return [st for st in header if st.verb != "rule"]     # a search without faults
    if found and rng.random() < 0.3:
        del header[rng.choice(found)]
        return header
    if found and rng.random() < 0.6:
        i = rng.choice(found)
        dev, name, body = header[i].args
        swap = next((st for st in swaps if st.args[0] == dev), None)
        if swap is not None:
            rule = fault_grammar.Schedule(0, [fault_grammar.parse_rule(body, name)])
            what = "seed"
            while what == "seed":       # a program's rules have no engine seed of their own
                sched, what = fault_grammar.mutate(rng, device_space(swap, weights), rule,
                                                   max_rules=1)
            header[i] = Op("rule", (dev, name, sched.rules[0].body()))
            return header
    if not swaps:
        return header
    used = {st.args[1] for st in header if st.verb == "rule"}
    name = next(f"r{n}" for n in range(len(used) + 1) if f"r{n}" not in used)
    header.append(draw_rule(rng, swaps, weights, name))
    return header


def mutate(program, rng, weights=None):
    """A valid mutant of PROGRAM (itself when ATTEMPTS candidates were all
    refused or unchanged), with the line numbers of its text."""
    w = weights or load_weights()
    for _ in range(ATTEMPTS):
        cand = candidate(program, rng.choice(KINDS), rng, w)
        if cand is None:
            continue
        # Through its text: a knob that became the first operation is a
        # header knob there.
        cand = parse(cand.text(), program.path)
        if cand == program:
            continue
        try:
            replay(cand)
        except ProgramError:
            continue
        return cand
    return program


def mutants(program, seed, count, weights=None):
    """COUNT mutants of PROGRAM from SEED, each from the one before."""
    rng, out = random.Random(seed), []
    for _ in range(count):
        program = mutate(program, rng, weights)
        out.append(program)
    return out

