"""Seeded generator of valid swap programs (docs/programs.md, Tools).

generate(seed) draws everything from random.Random(seed) and the weights
in weights.toml, so the same seed writes the same program byte for byte.
Every statement is tried on the checker before it is kept: a program the
generator writes is one the checker accepts.  With a guest's `offers`
(docs/programs.md, "The executor and its channel"; Session.offers) it
writes only knob values, mTHP sizes and cgroup files that guest's kernel
offers.
"""

import copy

import math
import os
import random
import tomllib

from faultline.faults import grammar
from faultline.prog.check import Checker
from faultline.prog.lang import (CGROUP_LIMITS, MTHP_RE, OPS, PAGE, Op, ProgramError, Program,
                                 parse)

WEIGHTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "weights.toml")
MIB = 1 << 20
DEFAULT_CPUS = 2    # the program VM's vCPUs when no guest's offers say
ATTEMPTS = 12       # tries to find a statement the checker takes, then skip it


def offered_weights(weights, offers):
    """@weights without what @offers ({KEY: [VALUE...]} from the guest)
    says the kernel lacks: knobs it has no file for (`knobs`), values a
    knob does not take, mTHP sizes it has not (`mthp.sizes`), cgroup
    limit files a new cgroup has not (`cgroup.files`).  A key @offers does
    not name is left as it is."""
    w = copy.deepcopy(weights)
    values = w["knobs"]["values"]
    for key in list(values):
        size = MTHP_RE.match(key)
        kept = [v for v in values[key] if v in offers.get(key, values[key])]
        if not kept or key not in offers.get("knobs", [key]) or \
                size and size.group(1) not in offers.get("mthp.sizes", [size.group(1)]):
            del values[key]
        else:
            values[key] = kept
    files = offers.get("cgroup.files")
    if files is not None:
        cg = w["cgroup"]
        for key, table in (("memory.swap.max", "swap_max"), ("memory.zswap.max", "zswap_max"),
                           ("memory.zswap.writeback", "zswap_writeback")):
            if key not in files:
                cg[table] = {"absent": 1}
        if "memory.high" not in files:
            cg["high"] = 0.0
    return w


def offered_cpus(offers):
    """The guest's online CPUs (DEFAULT_CPUS when @offers does not say)."""
    cpus = (offers or {}).get("cpus")
    return cpus if isinstance(cpus, int) and cpus > 0 else DEFAULT_CPUS


def offered_limits(offers):
    """The limit files `cgset` may change (CGROUP_LIMITS unless @offers
    leaves some out)."""
    files = (offers or {}).get("cgroup.files")
    return CGROUP_LIMITS if files is None else tuple(k for k in CGROUP_LIMITS if k in files)


# What rules a search may draw (fuzz --faults): every action, delays only
# (the soundness runs: a slow device owes the same bytes), or none.
FAULTS = ("all", "delay", "none")
DELAY_ACTIONS = ("delay", "irq-delay")


def fault_weights(weights, faults):
    """@weights for programs with @faults (FAULTS) only."""
    if faults not in FAULTS:
        raise ValueError(f"faults {faults!r}: expected one of {', '.join(FAULTS)}")
    w = copy.deepcopy(weights)
    if faults == "none":
        w["rules"]["probability"] = 0.0
    elif faults == "delay":
        w["rules"]["actions"] = list(DELAY_ACTIONS)
    return w


def device_space(swap, weights, cpus=DEFAULT_CPUS):
    """The fault-schedule space (faults/grammar.py) of the program's
    `swap` statement @swap."""
    rules = weights["rules"]
    return grammar.Space.of_program(swap.args[1], swap.opt("size", 64 * MIB), cpus,
                                    int(rules["delay_budget_s"] * 10**9),
                                    rules.get("actions", ()))


def draw_rule(rng, swaps, weights, name, cpus=DEFAULT_CPUS):
    """A `rule` statement named @name on one of @swaps (the program's
    `swap` statements), drawn by the fault-schedule grammar."""
    swap = rng.choice(swaps)
    body = grammar.gen_rule(rng, device_space(swap, weights, cpus), name).body()
    return Op("rule", (swap.args[0], name, body))


def load_weights(path=WEIGHTS):
    with open(path, "rb") as f:
        return tomllib.load(f)


def pick(rng, table):
    """A key of {choice: weight} in proportion to its weight."""
    keys = list(table)
    return rng.choices(keys, weights=[table[k] for k in keys])[0]


def between(rng, bounds):
    lo, hi = bounds
    return rng.randint(lo, hi) if isinstance(lo, int) else rng.uniform(lo, hi)


def pages_of(n):
    """N bytes rounded to whole pages, at least one."""
    return max(PAGE, int(n) // PAGE * PAGE)


def option(op_opts, **kw):
    """Options in the verb's order, those given a value (True: a flag)."""
    return tuple((k, kw[k]) for k, _ in op_opts if kw.get(k) is not None)


class Generator:
    """Builds statements from the checker's state: what exists now."""

    def __init__(self, rng, weights, checker, limits=CGROUP_LIMITS, cpus=DEFAULT_CPUS):
        self.rng, self.w, self.c = rng, weights, checker
        self.cgset_keys, self.cpus = limits, cpus
        self.version = 0
        self.uses_fork = rng.random() < weights["program"]["fork"]
        self.uses_threads = rng.random() < weights["program"]["threads"]

    def chance(self, p):
        return self.rng.random() < p

    def fresh(self, prefix):
        n = 1
        while f"{prefix}{n}" in self.c.defined:
            n += 1
        return f"{prefix}{n}"

    def next_version(self):
        self.version = self.version % 65535 + 1
        return self.version

    def working_set(self):
        return sum(o.file_size or 0 for o in self.c.objs.values()) + sum(
            len(p) * PAGE for proc in self.c.procs.values() for p in proc.maps.values() if p)

    def make(self, verb, args=(), actor=None, background=False, **opts):
        return Op(verb, tuple(args), option(OPS[verb].opts, **opts), actor, background)

    # -- the header ----------------------------------------------------------

    def header(self, working_set):
        w, rng, out = self.w, self.rng, []
        for i in range(int(pick(rng, w["swap"]["count"]))):
            kind = pick(rng, w["swap"]["kinds"])
            size = -(-int(working_set * between(rng, w["swap"]["room"])) // MIB) * MIB
            completion = pick(rng, w["swap"]["completion"]) if kind == "syncblk" else "default"
            out.append(Op("swap", (f"s{i}", kind), tuple(
                (k, v) for k, v in (("size", max(size, MIB)),
                                    ("prio", rng.randint(-1, 100) if self.chance(
                                        w["swap"]["prio"]) else None),
                                    ("discard", self.chance(w["swap"]["discard"]) or None),
                                    ("completion", None if completion == "default"
                                     else completion),
                                    ("rotational", self.chance(w["swap"]["rotational"])
                                     or None)) if v is not None)))
        values = w["knobs"]["values"]
        for key in rng.sample(list(values), min(len(values), between(rng, w["knobs"]["count"]))):
            out.append(Op("knob", ((key, rng.choice(values[key])),)))
        for i in range(between(rng, w["cgroup"]["count"])):
            out.append(Op("cgroup", (f"g{i}",), self.limits(working_set)))
        if self.chance(w["rules"]["probability"]):
            swaps = [st for st in out if st.verb == "swap"]
            for i in range(between(rng, w["rules"]["count"])):
                out.append(draw_rule(rng, swaps, w, f"r{i}", self.cpus))
        return out

    def limits(self, working_set):
        w, rng = self.w["cgroup"], self.rng
        top = pages_of(max(working_set * between(rng, w["memory_max"]),
                           w["memory_max_floor_kb"] * 1024))
        lim = {"memory.max": top}
        if self.chance(w["high"]):
            lim["memory.high"] = pages_of(top * 0.9)
        swap = pick(rng, w["swap_max"])
        if swap != "absent":
            lim["memory.swap.max"] = "max" if swap == "max" else pages_of(working_set * 2)
        zs = pick(rng, w["zswap_max"])
        if zs != "absent":
            lim["memory.zswap.max"] = {"max": "max", "0": 0}.get(zs, pages_of(top / 4))
        wb = pick(rng, w["zswap_writeback"])
        if wb != "absent":
            lim["memory.zswap.writeback"] = wb
        return tuple((k, lim[k]) for k in (*CGROUP_LIMITS, "memory.zswap.writeback")
                     if k in lim)

    # -- objects -------------------------------------------------------------

    def object_sizes(self):
        lo, hi = self.w["objects"]["size_kb"]
        return [pages_of(math.exp(self.rng.uniform(math.log(lo), math.log(hi))) * 1024)
                for _ in range(between(self.rng, self.w["program"]["objects"]))]

    def make_object(self, size):
        w, rng = self.w["objects"], self.rng
        kind = pick(rng, w["kinds"])
        cgs = sorted(self.c.cgroups)
        cg = rng.choice(cgs) if cgs and self.chance(w["in_cgroup"]) else None
        pages = pick(rng, w["pages"])
        pages = None if pages == "default" else pages
        name = self.fresh("o")
        if kind == "anon":
            return self.make("anon", (name, size), shared=self.chance(w["anon_shared"]) or None,
                             pages=pages, cgroup=cg)
        mapping = pick(rng, w["map"])
        if kind == "memfd":
            return self.make("memfd", (name, size), map=mapping, pages=pages, cgroup=cg)
        huge = pick(rng, w["tmpfs_huge"])
        return self.make("tmpfs", (name, size), huge=None if huge == "default" else huge,
                         map=mapping, cgroup=cg)

    # -- operations ----------------------------------------------------------

    def actor(self):
        """None (main), or a live process or thread."""
        others = sorted(p for p in self.c.procs if p != "main") + sorted(self.c.threads)
        if not others or self.chance(0.5):
            return None
        return self.rng.choice(others)

    def object_range(self, proc, verb, file_op=False):
        """(object, off, len) inside what VERB may reach, or None."""
        maps = self.c.procs[proc].maps
        names = sorted(n for n, m in maps.items() if file_op or m)
        if file_op:
            names = [n for n in names if self.c.objs[n].kind in ("memfd", "tmpfs")]
        if not names:
            return None
        name = self.rng.choice(names)
        limit = self.c.limit(self.c.objs[name], maps[name] or [], verb) or 0
        n = limit // PAGE
        if n == 0:
            return None
        if self.chance(self.w["program"]["whole_range"]):
            return name, 0, n * PAGE
        a = self.rng.randrange(n)
        b = self.rng.randint(a + 1, min(n, a + max(1, n // 2)))
        return name, a * PAGE, (b - a) * PAGE

    def build(self, verb):
        """A statement of VERB that may pass the checker, or None."""
        rng, actor = self.rng, self.actor()
        proc = self.c.threads.get(actor, actor or "main")
        bg = actor is not None and OPS[verb].background and self.chance(
            self.w["program"]["background"])
        if verb in ("write", "read", "madvise", "mprotect", "uffd_wp", "munmap", "pwrite",
                    "pread", "punch"):
            r = self.object_range(proc, verb, file_op=verb in ("pwrite", "pread", "punch"))
            if r is None:
                return None
            if verb == "munmap" and self.chance(0.5):
                return self.make(verb, r[:1], actor)
            extra = {"madvise": lambda: (pick(rng, self.w["madvise"]),),
                     "mprotect": lambda: (pick(rng, self.w["mprotect"]),),
                     "uffd_wp": lambda: (pick(rng, self.w["uffd_wp"]),)}.get(verb, tuple)()
            v = self.next_version() if verb in ("write", "pwrite") else None
            return self.make(verb, r + extra, actor, bg, v=v)
        if verb in ("mremap", "truncate"):
            maps = self.c.procs[proc].maps
            names = sorted(n for n in maps if verb == "truncate" or maps[n])
            if not names:
                return None
            name = rng.choice(names)
            now = self.c.objs[name].file_size if verb == "truncate" else len(maps[name]) * PAGE
            return self.make(verb, (name, pages_of((now or PAGE) * rng.uniform(0.5, 1.6))),
                             actor)
        if verb in ("fork", "thread"):
            if not (self.uses_fork if verb == "fork" else self.uses_threads):
                return None
            cpu = rng.randint(0, 1) if verb == "thread" and self.chance(0.5) else None
            return self.make(verb, (self.fresh("p" if verb == "fork" else "t"),), actor,
                             cpu=cpu)
        if verb in ("exit", "kill"):
            live = sorted(p for p in self.c.procs if p != "main")
            return self.make(verb, (rng.choice(live),)) if live else None
        if verb == "wait":
            pending = sorted(self.c.busy) + sorted(self.c.swapoffs)
            return self.make(verb, (rng.choice(pending),)) if pending else None
        if verb in ("move", "cgset", "reclaim"):
            cgs = sorted(self.c.cgroups)
            if not cgs:
                return None
            cg, ws = rng.choice(cgs), max(self.working_set(), PAGE)
            if verb == "move":
                return self.make(verb, (cg,), actor)
            if verb == "reclaim":
                return self.make(verb, (cg, pages_of(ws * rng.uniform(0.1, 1.0))), actor, bg)
            if not self.cgset_keys:
                return None
            key = rng.choice(self.cgset_keys)
            floor = self.w["cgroup"]["memory_max_floor_kb"] * 1024
            return self.make(verb, (cg, (key, "max" if self.chance(0.2) else pages_of(
                max(floor, ws * rng.uniform(0.2, 1.2))))), actor)
        if verb in ("swapoff", "swapon", "kill swapoff"):
            want = {"swapoff": ("on", "either"), "swapon": ("off", "either"),
                    "kill swapoff": ("swapoff&",)}[verb]
            devs = sorted(d for d, s in self.c.devs.items() if s in want)
            if not devs:
                return None
            dev = rng.choice(devs)
            if verb == "swapoff":
                return self.make(verb, (dev,), actor, self.chance(self.w["program"]["background"]))
            return self.make(verb, (dev,), prio=rng.randint(-1, 100) if verb == "swapon" and
                             self.chance(0.5) else None)
        if verb == "knob":
            values = self.w["knobs"]["values"]
            if not values:
                return None
            key = rng.choice(list(values))
            return self.make(verb, ((key, rng.choice(values[key])),), actor)
        if verb == "drop_caches":
            return self.make(verb, (rng.choice(("1", "2", "3")),), actor, bg)
        if verb == "sleep":
            return self.make(verb, (rng.randint(1, 200),), actor, bg)
        return self.make(verb, (), actor, bg)

    def try_op(self, op, out):
        """Keep OP when the checker takes it."""
        if op is None:
            return False
        try:
            self.c.step(op)
        except ProgramError:
            return False
        out.append(op)
        return True

    def random_op(self, out):
        for _ in range(ATTEMPTS):
            if self.try_op(self.build(pick(self.rng, self.w["operations"])), out):
                return True
        return False

    def finish(self, out):
        """Wait for what runs in the background, then read everything back."""
        for x in sorted(self.c.busy) + sorted(self.c.swapoffs):
            self.try_op(self.make("wait", (x,)), out)
        if not self.chance(self.w["program"]["final_read"]):
            return
        for name, pages in sorted(self.c.procs["main"].maps.items()):
            o = self.c.objs[name]
            verb = "read" if pages else "pread"
            limit = self.c.limit(o, pages or [], verb) or 0
            if limit:
                self.try_op(self.make(verb, (name, 0, limit)), out)


def generate(seed, weights=None, path="<gen>", offers=None):
    """The program of SEED: same seed, same weights, same offers, same
    text.  @offers: a guest's Session.offers (None: the language's every
    value)."""
    rng = random.Random(seed)
    w = weights or load_weights()
    if offers:
        w = offered_weights(w, offers)
    c = Checker(path)
    g = Generator(rng, w, c, offered_limits(offers), offered_cpus(offers))
    sizes = g.object_sizes()
    header = g.header(sum(sizes))
    for st in header:
        c.header(st)
    ops = []
    for size in sizes:
        g.try_op(g.make_object(size), ops)
    for name, pages in sorted(c.procs["main"].maps.items()):
        v = g.next_version()
        if pages:
            g.try_op(g.make("write", (name, 0, len(pages) * PAGE), v=v), ops)
        else:
            g.try_op(g.make("pwrite", (name, 0, c.objs[name].file_size), v=v), ops)
    for _ in range(between(rng, w["program"]["operations"])):
        g.random_op(ops)
    g.finish(ops)
    program = Program(g.chance(w["program"]["versioned"]), tuple(header), tuple(ops), path)
    return parse(program.text(), path)     # the line numbers of its text
