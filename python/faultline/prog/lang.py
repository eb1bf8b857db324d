"""Swap programs (docs/programs.md): the model, the line parser and the
canonical text.

parse() checks the shape of every line (verb, values, options); check.py
checks what the lines mean together (names, sizes, processes).  A bad line
is a ProgramError whose text is `FILE:LINE: reason`.
"""

import re
from dataclasses import dataclass, field

from faultline.errors import SetupError

PAGE = 4096
VERSION_MAX = 65535
NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,15}\Z")
SIZE_RE = re.compile(r"(\d+)([KMG]?)\Z")
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
MIN_SWAP = 1 << 20
DEFAULT_SWAP = 64 << 20
# Rule names as the engine takes them (docs/rules.md, Syntax).
RULE_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,30}\Z")
RULE_OPS = ("read", "write", "flush", "discard", "write-zeroes", "any")

SWAP_KINDS = ("nvme", "syncblk", "virtio-blk")
COMPLETIONS = ("task", "irq", "thread")
ADVICE = ("pageout", "cold", "dontneed", "free", "willneed", "remove", "populate_read",
          "populate_write")
PROTS = ("ro", "rw", "none")
MAPS = ("shared", "private", "none")
PAGES = ("base", "huge")
TMPFS_HUGE = ("never", "always", "within_size", "advise")
FLAG = "flag"

YN = ("Y", "N")
THP_ENABLED = ("always", "madvise", "never")
THP_DEFRAG = ("always", "defer", "defer+madvise", "madvise", "never")
THP_SHMEM = ("always", "within_size", "advise", "never", "deny", "force")
MTHP_ENABLED = ("always", "inherit", "madvise", "never")
COMPRESSORS = ("lzo", "lzo-rle", "lz4", "lz4hc", "zstd", "deflate", "842")
ZPOOLS = ("zsmalloc", "zbud", "z3fold")
# Knob -> its values: a tuple of words, or (low, high) integers.
KNOBS = {
    "zswap.enabled": YN, "zswap.shrinker_enabled": YN,
    "zswap.max_pool_percent": (0, 100), "zswap.accept_threshold_percent": (0, 100),
    "zswap.compressor": COMPRESSORS, "zswap.zpool": ZPOOLS,
    "vm.page-cluster": (0, 31), "vm.swappiness": (0, 200),
    "thp.enabled": THP_ENABLED, "thp.defrag": THP_DEFRAG, "thp.shmem_enabled": THP_SHMEM,
}
# mTHP sizes as the kernel names them (hugepages-64kB): anonymous orders 2 to 9.
MTHP_SIZES = tuple(f"{1 << n}kB" for n in range(4, 12))
MTHP_RE = re.compile(r"mthp\.(\w+)\.enabled\Z")
CGROUP_LIMITS = ("memory.max", "memory.high", "memory.swap.max", "memory.zswap.max")
CGROUP_KEYS = CGROUP_LIMITS + ("memory.zswap.writeback",)


class ProgramError(SetupError):
    """One bad line: `FILE:LINE: reason`."""

    def __init__(self, path, line, reason):
        super().__init__(f"{path}:{line}: {reason}" if line is not None else f"{path}: {reason}")
        self.path, self.line, self.reason = path, line, reason


class Bad(Exception):
    """A reason without its place; parse() adds FILE:LINE."""


@dataclass(frozen=True)
class Verb:
    """One statement's grammar: positional value kinds in order, then
    options (key -> kind, FLAG for a bare word)."""
    usage: str
    args: tuple = ()
    opts: tuple = ()           # ((key, kind), ...) in canonical order
    optional_tail: int = 0     # trailing positionals that may all be left out
    background: bool = False   # may end with `&`
    prefix: bool = True        # may start with `@P` / `@T`
    header: bool = False


HEADER = {
    "swap": Verb("swap DEV KIND [size=SIZE] [prio=N] [discard] [completion=task|irq|thread] "
                 "[rotational]", ("new", SWAP_KINDS),
                 (("size", "swapsize"), ("prio", (-1, 32767)), ("discard", FLAG),
                  ("completion", COMPLETIONS), ("rotational", FLAG)), prefix=False, header=True),
    "cgroup": Verb("cgroup CG [memory.max=V] [memory.high=V] [memory.swap.max=V] "
                   "[memory.zswap.max=V] [memory.zswap.writeback=0|1]", ("new",),
                   tuple((k, "limit") for k in CGROUP_LIMITS)
                   + (("memory.zswap.writeback", ("0", "1")),), prefix=False, header=True),
    "rule": Verb("rule DEV NAME: RULE", prefix=False, header=True),
}
OBJECT_OPTS = (("cgroup", "cg"),)
OPS = {
    "anon": Verb("anon OBJ SIZE [shared|private] [pages=base|huge] [cgroup=CG]",
                 ("new", "size"), (("shared", FLAG), ("private", FLAG), ("pages", PAGES))
                 + OBJECT_OPTS),
    "memfd": Verb("memfd OBJ SIZE [map=shared|private|none] [pages=base|huge] [cgroup=CG]",
                  ("new", "size"), (("map", MAPS), ("pages", PAGES)) + OBJECT_OPTS),
    "tmpfs": Verb("tmpfs OBJ SIZE [huge=never|always|within_size|advise] "
                  "[map=shared|private|none] [cgroup=CG]", ("new", "size"),
                  (("huge", TMPFS_HUGE), ("map", MAPS)) + OBJECT_OPTS),
    "write": Verb("write OBJ OFF LEN v=N", ("obj", "off", "len"), (("v", "version"),),
                  background=True),
    "read": Verb("read OBJ OFF LEN", ("obj", "off", "len"), background=True),
    "pwrite": Verb("pwrite OBJ OFF LEN v=N", ("obj", "off", "len"), (("v", "version"),),
                   background=True),
    "pread": Verb("pread OBJ OFF LEN", ("obj", "off", "len"), background=True),
    "madvise": Verb("madvise OBJ OFF LEN ADVICE", ("obj", "off", "len", ADVICE),
                    background=True),
    "mprotect": Verb("mprotect OBJ OFF LEN ro|rw|none", ("obj", "off", "len", PROTS)),
    "mremap": Verb("mremap OBJ SIZE", ("obj", "size")),
    "munmap": Verb("munmap OBJ [OFF LEN]", ("obj", "off", "len"), optional_tail=2),
    "truncate": Verb("truncate OBJ SIZE", ("obj", "size0")),
    "punch": Verb("punch OBJ OFF LEN", ("obj", "off", "len")),
    "uffd_wp": Verb("uffd_wp OBJ OFF LEN on|off", ("obj", "off", "len", ("on", "off"))),
    "fork": Verb("fork P", ("new",)),
    "exit": Verb("exit P", ("ref",), prefix=False),
    "kill": Verb("kill P", ("ref",), prefix=False),
    "kill swapoff": Verb("kill swapoff DEV", ("ref",), prefix=False),
    "thread": Verb("thread T [cpu=N]", ("new",), (("cpu", (0, 63)),)),
    "wait": Verb("wait P|T|DEV", ("ref",), prefix=False),
    "move": Verb("move CG", ("ref",)),
    "cgset": Verb("cgset CG KEY=V", ("ref", "cgkv")),
    "reclaim": Verb("reclaim CG SIZE", ("ref", "size"), background=True),
    "swapoff": Verb("swapoff DEV [&]", ("ref",), background=True),
    "swapon": Verb("swapon DEV [prio=N] [discard]", ("ref",),
                   (("prio", (-1, 32767)), ("discard", FLAG))),
    "knob": Verb("knob KEY=VALUE", ("knob",)),
    "compact": Verb("compact", background=True),
    "drop_caches": Verb("drop_caches 1|2|3", (("1", "2", "3"),), background=True),
    "sleep": Verb("sleep MS", ((1, 10000),), background=True),
}
KNOB_VERB = Verb("knob KEY=VALUE", ("knob",), prefix=False, header=True)
KEYWORDS = {"main", "program", "swapoff", *HEADER, *OPS}


@dataclass(frozen=True)
class Op:
    """One statement (header line or operation).  args and opts hold parsed
    values (sizes in bytes); line is where it was read (not compared)."""
    verb: str
    args: tuple = ()
    opts: tuple = ()            # ((key, value), ...) in the verb's order; True for a flag
    actor: str = None           # None: main
    background: bool = False
    line: int = field(default=0, compare=False)

    def opt(self, key, default=None):
        return dict(self.opts).get(key, default)

    def text(self):
        words = [f"@{self.actor}"] if self.actor else []
        words.append(self.verb)
        if self.verb == "rule":
            words += [self.args[0], f"{self.args[1]}:", self.args[2]]
        else:
            kinds = grammar(self.verb).args
            words += [format_value(k, v) for k, v in zip(kinds, self.args)]
            kinds = dict(grammar(self.verb).opts)
            words += [k if v is True else f"{k}={format_value(kinds[k], v)}"
                      for k, v in self.opts]
        if self.background:
            words.append("&")
        return " ".join(words)


@dataclass(frozen=True)
class Program:
    versioned: bool = True      # starts with `program v1`
    header: tuple = ()          # swap, knob, cgroup, rule statements in order
    ops: tuple = ()
    path: str = field(default="<prog>", compare=False)

    def of(self, verb):
        return [s for s in self.header if s.verb == verb]

    def text(self):
        lines = ["program v1"] if self.versioned else []
        lines += [s.text() for s in self.header]
        if self.header and self.ops:
            lines.append("")
        lines += [o.text() for o in self.ops]
        return "\n".join(lines) + "\n"


def grammar(verb, header=False):
    if verb == "knob":
        return KNOB_VERB if header else OPS["knob"]
    return HEADER.get(verb) or OPS[verb]


def format_size(n):
    for unit in ("G", "M", "K"):
        if n and n % UNITS[unit] == 0:
            return f"{n // UNITS[unit]}{unit}"
    return str(n)


def format_value(kind, v):
    if kind in ("size", "size0", "off", "len", "swapsize") or kind == "limit" and v != "max":
        return format_size(v)
    if kind in ("knob", "cgkv"):
        key, value = v
        return f"{key}={format_value('limit', value) if key in CGROUP_LIMITS else value}"
    return str(v)


def parse_size(text, what="size"):
    m = SIZE_RE.match(text)
    if not m:
        raise Bad(f"bad {what} {text!r} (expected a number with an optional K, M or G "
                  "suffix, a multiple of 4K: 4K, 16M, 1G)")
    n = int(m.group(1)) * UNITS[m.group(2)]
    if n % PAGE:
        raise Bad(f"{what} {text} is not a multiple of 4K")
    return n


def parse_int(text, lo, hi, what):
    if not re.fullmatch(r"-?\d+", text):
        raise Bad(f"{what}: bad integer {text!r} (expected {lo} to {hi})")
    v = int(text)
    if not lo <= v <= hi:
        raise Bad(f"{what} {v} is out of range (expected {lo} to {hi})")
    return v


def parse_name(text, what="name"):
    if not NAME_RE.match(text):
        raise Bad(f"bad {what} {text!r} (expected a lower-case letter, then up to 15 "
                  "lower-case letters, digits or '_')")
    if text in KEYWORDS:
        raise Bad(f"{text!r} is a keyword, not a {what}")
    return text


def knob_value(key, value):
    """The value of knob KEY, checked (a string: knobs are written as text)."""
    m = MTHP_RE.match(key)
    if m:
        if m.group(1) not in MTHP_SIZES:
            raise Bad(f"knob {key}: no mTHP size {m.group(1)!r} (expected one of "
                      f"{', '.join(MTHP_SIZES)})")
        allowed = MTHP_ENABLED
    elif key in KNOBS:
        allowed = KNOBS[key]
    else:
        raise Bad(f"unknown knob {key!r} (expected one of {', '.join(KNOBS)} or "
                  "mthp.SIZE.enabled)")
    if isinstance(allowed[0], int):
        return str(parse_int(value, allowed[0], allowed[1], f"knob {key}"))
    if value not in allowed:
        raise Bad(f"knob {key}={value}: expected one of {', '.join(allowed)}")
    return value


def cgroup_value(key, value):
    if key == "memory.zswap.writeback":
        if value not in ("0", "1"):
            raise Bad(f"{key}={value}: expected 0 or 1")
        return value
    if key not in CGROUP_LIMITS:
        raise Bad(f"unknown cgroup key {key!r} (expected one of {', '.join(CGROUP_KEYS)})")
    return "max" if value == "max" else parse_size(value, f"{key} size")


def parse_value(kind, text, verb):
    """A positional or option value of KIND from TEXT."""
    if kind in ("new", "ref", "obj", "cg"):
        return parse_name(text)
    if kind in ("size", "swapsize"):
        n = parse_size(text)
        if kind == "size" and n == 0:
            raise Bad(f"{verb}: size 0 (expected at least 4K)")
        if kind == "swapsize" and n < MIN_SWAP:
            raise Bad(f"swap size {text} is below 1M")
        return n
    if kind == "size0":
        return parse_size(text)
    if kind == "off":
        return parse_size(text, "offset")
    if kind == "len":
        n = parse_size(text, "length")
        if n == 0:
            raise Bad(f"{verb}: length 0 (expected at least 4K)")
        return n
    if kind == "limit":
        return "max" if text == "max" else parse_size(text, f"{verb} size")
    if kind == "version":
        if not text.isdigit() or not 1 <= int(text) <= VERSION_MAX:
            raise Bad(f"{verb.split()[0]}: v={text} is out of range (versions are 1 to "
                      f"{VERSION_MAX}; 0 is the zero page)")
        return int(text)
    if kind in ("knob", "cgkv"):
        key, eq, value = text.partition("=")
        if not eq:
            raise Bad(f"{verb}: expected KEY=VALUE, got {text!r}")
        return (key, knob_value(key, value) if kind == "knob" else cgroup_value(key, value))
    if isinstance(kind[0], int):
        return parse_int(text, kind[0], kind[1], verb)
    if text not in kind:
        raise Bad(f"{verb}: {text!r} is not one of {', '.join(kind)}")
    return text


def parse_statement(words, header):
    """Op from the words of one line (comment stripped, at least one word)."""
    actor, prefixed = None, words[0].startswith("@")
    if prefixed:
        actor = parse_name(words[0][1:], "process or thread name") if words[0] != "@main" else None
        words = words[1:]
        if not words:
            raise Bad(f"{'@' + (actor or 'main')} with no operation after it")
    background = words[-1] == "&"
    if background:
        words = words[:-1]
        if not words:
            raise Bad("& with no operation before it")
    verb, rest = words[0], words[1:]
    if verb == "kill" and rest[:1] == ["swapoff"]:
        verb, rest = "kill swapoff", rest[1:]
    if verb == "rule":
        return parse_rule(rest)
    if verb not in OPS and verb not in HEADER:
        raise Bad(f"unknown operation {verb!r} (expected one of {', '.join(HEADER)}, "
                  f"{', '.join(OPS)})")
    g = grammar(verb, header)
    if prefixed and not g.prefix:
        raise Bad(f"{verb} takes no @ prefix (main runs it)")
    if background and not g.background:
        raise Bad(f"{verb} cannot run in the background (& is for write, read, pwrite, "
                  "pread, madvise, reclaim, swapoff, compact, drop_caches, sleep)")
    args = []
    for i, kind in enumerate(g.args):
        if i >= len(rest) or "=" in rest[i] and kind not in ("knob", "cgkv"):
            if i >= len(g.args) - g.optional_tail and i == len(g.args) - g.optional_tail:
                break
            raise Bad(f"{verb}: expected `{g.usage}` ({i} of its values given)")
        args.append(parse_value(kind, rest[i], verb))
    opts, kinds = {}, dict(g.opts)
    for w in rest[len(args):]:
        key, eq, value = w.partition("=")
        if key not in kinds or (kinds[key] == FLAG) == bool(eq):
            allowed = ", ".join(k if kd == FLAG else f"{k}=" for k, kd in g.opts) or "none"
            what = "option" if key in kinds or eq else "value"
            raise Bad(f"{verb}: unexpected {what} {w!r} (expected `{g.usage}`; options: "
                      f"{allowed})")
        if key in opts:
            raise Bad(f"{verb}: {key} given twice")
        opts[key] = True if not eq else parse_value(kinds[key], value, f"{verb} {key}")
    if "shared" in opts and "private" in opts:
        raise Bad(f"{verb}: shared or private, not both")
    for key, kind in g.opts:
        if kind == "version" and key not in opts:
            raise Bad(f"{verb}: v=N is missing (expected `{g.usage}`)")
    return Op(verb, tuple(args), tuple((k, opts[k]) for k, _ in g.opts if k in opts),
              actor, background)


def parse_rule(rest):
    """`rule DEV NAME: RULE`; the engine's checker reads RULE (check.py)."""
    if len(rest) < 3 or not rest[1].endswith(":"):
        raise Bad("rule: expected `rule DEV NAME: RULE`, e.g. `rule s0 wfail: write "
                  "every=7 count=3 error=eio`")
    name = rest[1][:-1]
    if not RULE_NAME_RE.match(name):
        raise Bad(f"rule: bad rule name {name!r} (expected a letter or '_', then letters, "
                  "digits, '_' or '-'; at most 31 characters)")
    if rest[2] not in RULE_OPS:
        raise Bad(f"rule {name}: unknown op {rest[2]!r} (expected {', '.join(RULE_OPS)})")
    if len(rest) < 4:
        raise Bad(f"rule {name}: no action (expected e.g. error=eio, delay=1ms, drop)")
    return Op("rule", (parse_name(rest[0], "device name"), name, " ".join(rest[2:])))


def parse(text, path="<prog>"):
    """Program from TEXT; ProgramError `PATH:LINE: reason` on the first
    line of bad shape.  Meaning is checked by check.check()."""
    versioned, header, ops = False, [], []
    first_op = None
    for n, raw in enumerate(text.splitlines(), 1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        try:
            if words[0] == "program":
                if header or ops or versioned:
                    raise Bad("`program v1` must be the first line")
                if words[1:] != ["v1"]:
                    raise Bad(f"program {' '.join(words[1:])!r}: this is language version 1 "
                              "(expected `program v1`)")
                versioned = True
                continue
            is_header = first_op is None and words[0] in ("knob", *HEADER)
            st = parse_statement(words, is_header)
            if st.verb in HEADER and first_op is not None:
                raise Bad(f"{st.verb} after the first operation (line {first_op}): header "
                          "lines (swap, cgroup, rule, knob) come first")
        except Bad as e:
            raise ProgramError(path, n, str(e)) from None
        st = Op(st.verb, st.args, st.opts, st.actor, st.background, n)
        if is_header:
            header.append(st)
        else:
            first_op = first_op or n
            ops.append(st)
    return Program(versioned, tuple(header), tuple(ops), path)


def read(path):
    """parse() of the file at PATH, or ProgramError `PATH:0: why`."""
    try:
        with open(path, encoding="utf-8") as f:
            return parse(f.read(), path)
    except (OSError, UnicodeDecodeError) as e:
        raise ProgramError(path, None, getattr(e, "strerror", None) or "not a UTF-8 "
                           "text file") from None
