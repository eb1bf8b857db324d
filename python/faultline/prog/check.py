"""What a program's lines mean together (docs/programs.md): every name
defined before use in one namespace, ranges inside the object's current
size, protections, processes and threads alive, background operations
waited for, devices on or off.

Checker.step() checks one statement against the state the earlier ones
left and only then changes that state, so the generator and the mutator
can try a statement and drop it when it is refused.
"""

import os
import subprocess
import tempfile
from dataclasses import dataclass, field

from faultline import rules
from faultline.errors import SetupError
from faultline.prog.lang import PAGE, Bad, ProgramError, format_size

FILES = ("memfd", "tmpfs")


def article(word):
    return "an" if word[0] in "aeiou" else "a"


@dataclass
class Obj:
    name: str
    kind: str
    index: int                  # O of the pattern: objects numbered from 1
    shared: bool                # writes are seen by every process mapping it
    mapped: bool                # False: map=none, pread/pwrite only
    private_anon: bool
    file_size: int = None       # memfd, tmpfs, shared anon (its shmem object)


@dataclass
class Process:
    name: str
    # Object name -> page protections of its mapping ("rw", "ro", "none"; None:
    # unmapped page), or None for an object reached through its file only.
    maps: dict = field(default_factory=dict)
    threads: set = field(default_factory=set)


@dataclass
class Background:
    actor: str
    verb: str
    obj: str
    process: str
    line: int


class Checker:
    def __init__(self, path="<prog>"):
        self.path = path
        self.defined = {}       # name -> (what, line): one namespace
        self.objs = {}
        self.procs = {"main": Process("main")}
        self.threads = {}       # live thread -> its process
        self.ended = {}         # ended process or thread -> why
        self.devs = {}          # device -> "on", "off", "swapoff&", "either"
        self.dev_kind = {}
        self.cgroups = set()
        self.knobs = {}         # header knob -> line
        self.rule_names = {}    # (device, rule name) -> line
        self.busy = {}          # actor -> Background
        self.swapoffs = {}      # device -> line of its background swapoff

    # -- names ---------------------------------------------------------------

    def define(self, name, what, line):
        if name in self.defined:
            w, ln = self.defined[name]
            raise Bad(f"{name} is already {article(w)} {w} (line {ln}): one namespace for devices, "
                      "cgroups, objects, processes and threads")
        self.defined[name] = (what, line)

    def need(self, name, what, hint):
        if name not in self.defined:
            raise Bad(f"no {what} {name} ({hint})")
        w, ln = self.defined[name]
        if w != what:
            raise Bad(f"{name} is {article(w)} {w} (line {ln}), not {article(what)} {what}")

    def process_of(self, actor):
        """The process an operation of ACTOR (None: main) runs in."""
        if actor is None:
            return "main"
        if actor in self.ended:
            raise Bad(f"@{actor}: {actor} {self.ended[actor]}")
        if actor in self.threads:
            return self.threads[actor]
        if actor in self.procs:
            return actor
        raise Bad(f"@{actor}: no process or thread {actor} (fork or thread makes one first)")

    def mapping(self, proc, obj, verb):
        self.need(obj, "object", "anon, memfd or tmpfs makes one first")
        if obj not in self.procs[proc].maps:
            raise Bad(f"{verb} {obj}: {obj} is not in process {proc} (unmapped, or made in "
                      "another process after the fork)")
        return self.procs[proc].maps[obj]

    # -- ranges --------------------------------------------------------------

    def limit(self, o, pages, verb):
        """How far VERB may reach into O: the mapping, the file, or both."""
        if verb in ("pread", "pwrite", "punch"):
            return o.file_size
        n = len(pages) * PAGE
        if verb in ("read", "write") and o.file_size is not None:
            n = min(n, o.file_size)     # past the end of the file: SIGBUS
        return n

    def inside(self, op, size, what):
        off, length = op.args[1], op.args[2]
        if off + length > size:
            raise Bad(f"{op.verb} {op.args[0]} {format_size(off)} {format_size(length)}: "
                      f"ends at {format_size(off + length)}, past {op.args[0]}'s {what} "
                      f"{format_size(size)}")
        return off // PAGE, (off + length) // PAGE

    # -- background operations -----------------------------------------------

    def idle(self, actor, verb):
        if actor in self.busy:
            b = self.busy[actor]
            raise Bad(f"{verb}: {actor} is still running its background {b.verb} (line "
                      f"{b.line}): wait {actor} first")

    def in_use(self, obj, proc, verb):
        """A background operation on OBJ that VERB (in PROC) would race:
        only reads may run beside it (the concurrent-write relaxation)."""
        for b in self.busy.values():
            o = self.objs[b.obj] if b.obj else None
            if not o or b.obj != obj or (b.process != proc and not o.shared
                                         and o.file_size is None):
                continue
            if verb in ("read", "pread") and b.verb in ("write", "pwrite"):
                continue
            raise Bad(f"{verb} {obj}: {b.actor}'s background {b.verb} (line {b.line}) uses "
                      f"{obj}: only read and pread of it until wait {b.actor}")

    # -- statements ----------------------------------------------------------

    def header(self, st):
        try:
            getattr(self, "h_" + st.verb)(st)
        except Bad as e:
            raise ProgramError(self.path, st.line, str(e)) from None

    def step(self, op):
        try:
            self.do(op)
        except Bad as e:
            raise ProgramError(self.path, op.line, str(e)) from None

    def h_swap(self, st):
        name, kind = st.args
        if st.opt("completion") and kind != "syncblk":
            raise Bad(f"swap {name}: completion= is for syncblk only ({name} is {kind})")
        self.define(name, "device", st.line)
        self.devs[name], self.dev_kind[name] = "on", kind

    def h_cgroup(self, st):
        self.define(st.args[0], "cgroup", st.line)
        self.cgroups.add(st.args[0])

    def h_knob(self, st):
        key = st.args[0][0]
        if key in self.knobs:
            raise Bad(f"knob {key} is already set in the header (line {self.knobs[key]})")
        self.knobs[key] = st.line

    def h_rule(self, st):
        dev, name, _ = st.args
        self.need(dev, "device", "swap lines define devices")
        if (dev, name) in self.rule_names:
            raise Bad(f"rule {dev} {name}: duplicate rule name (line "
                      f"{self.rule_names[dev, name]})")
        self.rule_names[dev, name] = st.line

    def do(self, op):
        if op.verb in ("exit", "kill", "kill swapoff", "wait"):
            return getattr(self, "op_" + op.verb.replace(" ", "_"))(op)
        proc = self.process_of(op.actor)
        self.idle(op.actor or "main", op.verb)
        if op.background and op.actor is None and op.verb != "swapoff":
            raise Bad(f"{op.verb} &: main runs the program line by line; & needs @P or @T "
                      "(or is `swapoff DEV &`)")
        getattr(self, "op_" + op.verb)(op, proc)
        if op.background and op.verb != "swapoff":
            obj = op.args[0] if op.args and op.args[0] in self.objs else None
            self.busy[op.actor] = Background(op.actor, op.verb, obj, proc, op.line)

    def make_object(self, op, proc, shared, mapped):
        name, size = op.args
        cg = op.opt("cgroup")
        if cg:
            self.need(cg, "cgroup", "cgroup lines define them")
        self.define(name, "object", op.line)
        private_anon = op.verb == "anon" and not shared
        o = Obj(name, op.verb, len(self.objs) + 1, shared, mapped, private_anon,
                None if private_anon else size)
        self.objs[name] = o
        self.procs[proc].maps[name] = ["rw"] * (size // PAGE) if mapped else None

    def op_anon(self, op, proc):
        self.make_object(op, proc, bool(op.opt("shared")), True)

    def op_memfd(self, op, proc):
        m = op.opt("map", "shared")
        self.make_object(op, proc, m != "private", m != "none")

    op_tmpfs = op_memfd

    def mapped_range(self, op, proc):
        """(object, page list, first page, end page) of a range through the mapping."""
        obj = op.args[0]
        pages = self.mapping(proc, obj, op.verb)
        o = self.objs[obj]
        if pages is None:
            raise Bad(f"{op.verb} {obj}: {obj} is map=none: {op.verb} needs a mapping "
                      "(pread, pwrite reach its file)")
        limit = self.limit(o, pages, op.verb)
        a, b = self.inside(op, limit, "mapping size" if limit == len(pages) * PAGE
                           else "file size")
        holes = [i for i in range(a, b) if pages[i] is None]
        if holes and op.verb != "munmap":
            raise Bad(f"{op.verb} {obj}: page at {format_size(holes[0] * PAGE)} is unmapped "
                      "(munmap)")
        return o, pages, a, b

    def access(self, op, proc, need):
        _, pages, a, b = self.mapped_range(op, proc)
        bad = [i for i in range(a, b) if pages[i] not in need]
        if bad:
            raise Bad(f"{op.verb} {op.args[0]}: page at {format_size(bad[0] * PAGE)} is "
                      f"mprotect {pages[bad[0]]} ({op.verb} needs {' or '.join(need)})")

    def op_write(self, op, proc):
        self.in_use(op.args[0], proc, op.verb)
        self.access(op, proc, ("rw",))

    def op_read(self, op, proc):
        self.in_use(op.args[0], proc, op.verb)
        self.access(op, proc, ("rw", "ro"))

    def file_range(self, op, proc):
        obj = op.args[0]
        self.mapping(proc, obj, op.verb)
        o = self.objs[obj]
        if o.kind not in FILES:
            raise Bad(f"{op.verb} {obj}: {obj} is {o.kind}; {op.verb} needs a file (memfd, "
                      "tmpfs)")
        self.in_use(obj, proc, op.verb)
        return o, self.inside(op, o.file_size, "file size")

    def op_pwrite(self, op, proc):
        self.file_range(op, proc)

    op_pread = op_pwrite

    def op_punch(self, op, proc):
        self.file_range(op, proc)

    def op_madvise(self, op, proc):
        obj, advice = op.args[0], op.args[3]
        self.in_use(obj, proc, op.verb)
        o = self.objs.get(obj)
        if advice == "free" and o and not o.private_anon:
            raise Bad(f"madvise {obj} free: only for private anonymous memory ({obj} is "
                      f"{o.kind}{' shared' if o.shared else ''})")
        if advice == "remove" and o and (o.private_anon or not o.shared):
            raise Bad(f"madvise {obj} remove: needs a shared mapping (anon shared, "
                      "map=shared)")
        need = {"populate_read": ("rw", "ro"), "populate_write": ("rw",)}
        if advice in need:
            self.access(op, proc, need[advice])
        else:
            self.mapped_range(op, proc)

    def op_mprotect(self, op, proc):
        self.in_use(op.args[0], proc, op.verb)
        _, pages, a, b = self.mapped_range(op, proc)
        pages[a:b] = [op.args[3]] * (b - a)

    def op_uffd_wp(self, op, proc):
        self.in_use(op.args[0], proc, op.verb)
        self.mapped_range(op, proc)

    def op_mremap(self, op, proc):
        obj, size = op.args
        self.in_use(obj, proc, op.verb)
        pages = self.mapping(proc, obj, op.verb)
        if pages is None:
            raise Bad(f"mremap {obj}: {obj} is map=none (no mapping to remap)")
        if None in pages or len(set(pages)) > 1:
            raise Bad(f"mremap {obj}: its mapping is split (a partial munmap or mprotect); "
                      "mremap needs it whole, one protection")
        n = size // PAGE
        pages[:] = (pages + [pages[0]] * n)[:n]

    def op_munmap(self, op, proc):
        obj = op.args[0]
        self.in_use(obj, proc, op.verb)
        pages = self.mapping(proc, obj, op.verb)
        if len(op.args) == 1:
            del self.procs[proc].maps[obj]
            return
        if pages is None:
            raise Bad(f"munmap {obj}: {obj} is map=none: `munmap {obj}` closes its file, "
                      "no range")
        _, _, a, b = self.mapped_range(op, proc)
        pages[a:b] = [None] * (b - a)

    def op_truncate(self, op, proc):
        obj, size = op.args
        self.mapping(proc, obj, op.verb)
        o = self.objs[obj]
        if o.kind not in FILES:
            raise Bad(f"truncate {obj}: {obj} is {o.kind}; truncate needs a file (memfd, "
                      "tmpfs)")
        self.in_use(obj, proc, op.verb)
        o.file_size = size

    def op_fork(self, op, proc):
        for b in self.busy.values():
            if b.process == proc:
                raise Bad(f"fork {op.args[0]}: {b.actor}'s background {b.verb} (line "
                          f"{b.line}) runs in {proc}: wait {b.actor} first")
        self.define(op.args[0], "process", op.line)
        maps = {k: None if v is None else list(v) for k, v in self.procs[proc].maps.items()}
        self.procs[op.args[0]] = Process(op.args[0], maps)

    def op_thread(self, op, proc):
        self.define(op.args[0], "thread", op.line)
        self.threads[op.args[0]] = proc
        self.procs[proc].threads.add(op.args[0])

    def live_child(self, op):
        p = op.args[0]
        self.need(p, "process", "fork makes one first")
        if p in self.ended:
            raise Bad(f"{op.verb} {p}: {p} {self.ended[p]}")
        return p

    def end_process(self, p, why):
        for actor in (p, *self.procs[p].threads):
            self.busy.pop(actor, None)
            self.ended[actor] = why
            self.threads.pop(actor, None)
        del self.procs[p]

    def op_exit(self, op):
        p = self.live_child(op)
        for actor in (p, *self.procs[p].threads):
            self.idle(actor, f"exit {p}")
        self.end_process(p, f"exited at line {op.line}")

    def op_kill(self, op):
        p = self.live_child(op)
        self.end_process(p, f"was killed at line {op.line}")

    def op_wait(self, op):
        x = op.args[0]
        if x not in self.defined:
            raise Bad(f"wait {x}: no process, thread or device {x}")
        if x in self.swapoffs:
            del self.swapoffs[x]
            self.devs[x] = "off"
        elif x in self.busy:
            del self.busy[x]
        else:
            raise Bad(f"wait {x}: {x} has no background operation pending (& starts one)")

    def device(self, op):
        dev = op.args[0]
        self.need(dev, "device", "swap lines define devices")
        return dev

    def op_swapoff(self, op, proc):
        dev = self.device(op)
        if self.devs[dev] == "off":
            raise Bad(f"swapoff {dev}: {dev} is already off (swapon turns it on)")
        if self.devs[dev] == "swapoff&":
            raise Bad(f"swapoff {dev}: a background swapoff of {dev} (line "
                      f"{self.swapoffs[dev]}) runs: wait {dev} or kill swapoff {dev} first")
        if op.background:
            self.swapoffs[dev] = op.line
        self.devs[dev] = "swapoff&" if op.background else "off"

    def op_swapon(self, op, proc):
        dev = self.device(op)
        if self.devs[dev] == "on":
            raise Bad(f"swapon {dev}: {dev} is already on (swapoff turns it off)")
        if self.devs[dev] == "swapoff&":
            raise Bad(f"swapon {dev}: a background swapoff of {dev} (line "
                      f"{self.swapoffs[dev]}) runs: wait {dev} or kill swapoff {dev} first")
        self.devs[dev] = "on"

    def op_kill_swapoff(self, op):
        dev = self.device(op)
        if dev not in self.swapoffs:
            raise Bad(f"kill swapoff {dev}: no background swapoff of {dev} runs "
                      f"(`swapoff {dev} &` starts one)")
        del self.swapoffs[dev]
        self.devs[dev] = "either"   # killed before or after it finished

    def cgroup(self, op):
        self.need(op.args[0], "cgroup", "cgroup lines define them")

    def op_move(self, op, proc):
        self.cgroup(op)

    op_cgset = op_reclaim = op_move

    def op_knob(self, op, proc):
        pass

    def op_compact(self, op, proc):
        pass

    op_drop_caches = op_sleep = op_compact


def check_rules(program):
    """The rules' text through the engine's own parser when it is built
    (nothing is built here); without it, parse() checked their shape."""
    found = rules.built_checker()
    statements = program.of("rule")
    if not found or not statements:
        return
    with tempfile.TemporaryDirectory(prefix="faultline-prog-") as d:
        path = os.path.join(d, "prog.rules")
        with open(path, "w") as f:
            for st in statements:
                f.write(f"{st.args[1]}: {st.args[2]}\n")
        res = subprocess.run([found, path], capture_output=True, text=True)
    if res.returncode == 0:
        return
    for line in res.stdout.splitlines():
        pos, _, msg = line.partition(": ")[2].partition(": ")
        try:
            st = statements[int(pos.split(":")[0]) - 1]
        except (ValueError, IndexError):
            continue
        raise ProgramError(program.path, st.line, f"rule {st.args[0]} {st.args[1]}: {msg}")
    raise SetupError("fault-rules-check failed: " + (res.stderr.strip()
                                                      or f"exit {res.returncode}"))


def replay(program, checker=None):
    """The checker after every statement of PROGRAM (ProgramError on the
    first refused one); the rules are not run through the engine here."""
    c = checker or Checker(program.path)
    for st in program.header:
        c.header(st)
    for op in program.ops:
        c.step(op)
    return c


def check(program, engine_rules=True):
    """ProgramError `FILE:LINE: reason` on the first line the language
    refuses (docs/programs.md); None when the program is valid."""
    replay(program)
    if engine_rules:
        check_rules(program)
