"""Kernel config: faultline's fragments (configs/kernel/), the bases they
apply to, and checking a merged .config against them."""

import os
import re
from dataclasses import dataclass

from faultline import TOP
from faultline.errors import SetupError

CONFIG_DIR = os.path.join(TOP, "configs", "kernel")
FRAGMENTS = {"faultline": "faultline.config", "kasan": "kasan.config", "kcov": "kcov.config"}
BASES = ("tinyconfig", "defconfig")
DEFAULT_BASE = "tinyconfig"


@dataclass(frozen=True)
class KernelConfig:
    """Which config a kernel is built with: the base config (defconfig,
    tinyconfig or a file) and the KASAN/KCOV fragments."""
    base: str = DEFAULT_BASE
    kasan: bool = False
    kcov: bool = False


# debian:X -> (package, where it comes from, the apt suite for a private
# configuration or None for the system's own sources).
DEBIAN = {
    "6.1": ("linux-source-6.1", "bookworm", None),
    "6.12": ("linux-source-6.12", "bookworm-backports", None),
    "7.2": ("linux-source-7.2", "unstable", "sid"),
}

_OPT_RE = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_NOTSET_RE = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")


# ---------------------------------------------------------------- fragments

@dataclass
class Option:
    name: str           # CONFIG_FOO
    value: str          # y, m, n, or a string/int as written
    why: str            # the comment block above it
    where: str          # file:line


def parse_fragment(path):
    """A Kconfig fragment -> [Option].  Each option must follow a comment
    saying why (a comment block covers the options right after it); a line
    that is neither comment, blank nor option is an error."""
    opts, why, why_open = [], "", False
    with open(path) as f:
        lines = f.read().splitlines()
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        where = f"{os.path.basename(path)}:{n}"
        m = _OPT_RE.match(line) or _NOTSET_RE.match(line)
        if m:
            value = m.group(2) if m.re is _OPT_RE else "n"
            if not why:
                raise SetupError(f"{where}: {m.group(1)} has no comment saying why")
            if any(o.name == m.group(1) for o in opts):
                raise SetupError(f"{where}: {m.group(1)} given twice")
            opts.append(Option(m.group(1), value, why, where))
            why_open = False
        elif line.startswith("#"):
            text = line.lstrip("#").strip()
            why = (why + " " + text).strip() if why_open else text
            why_open = True
        elif not line:
            # A blank line ends a comment block that no option followed
            # (the file's header), so it explains nothing.
            if why_open:
                why = ""
            why_open = False
        else:
            raise SetupError(f"{where}: not a Kconfig line: {line!r}")
    return opts


def fragment_options(kasan=False, kcov=False):
    """The options faultline's fragments ask for, in file order (for checks
    of a kernel's config elsewhere, e.g. before booting it)."""
    return [o for fp in fragment_paths(kasan, kcov) for o in parse_fragment(fp)]


def fragment_paths(kasan=False, kcov=False):
    names = ["faultline"] + (["kasan"] if kasan else []) + (["kcov"] if kcov else [])
    return [os.path.join(CONFIG_DIR, FRAGMENTS[n]) for n in names]


def parse_config(text):
    """A .config's text -> {CONFIG_X: value} ('n' for "is not set")."""
    vals = {}
    for line in text.splitlines():
        m = _OPT_RE.match(line.strip())
        if m:
            vals[m.group(1)] = m.group(2)
            continue
        m = _NOTSET_RE.match(line.strip())
        if m:
            vals[m.group(1)] = "n"
    return vals


def check_config(options, config_text, known=None):
    """Every fragment option against the final .config.

    Returns (wrong, absent): wrong = [(Option, got)] for options this kernel
    has (in @known, the symbols its Kconfig defines; None = all) whose value
    differs ('n' when Kconfig dropped it, e.g. an unmet dependency); absent =
    the options this kernel version does not define at all."""
    vals = parse_config(config_text)
    wrong, absent = [], []
    for o in options:
        sym = o.name[len("CONFIG_"):]
        if known is not None and sym not in known:
            absent.append(o)
            continue
        got = vals.get(o.name, "n")
        if o.value.strip('"') != got.strip('"'):
            wrong.append((o, got))
    return wrong, absent


def config_error(wrong):
    """One line naming what olddefconfig dropped or changed."""
    parts = [f"{o.name}={got} (want {o.value}, {o.where})" for o, got in wrong]
    return ("the kernel's Kconfig did not keep " + str(len(wrong)) + " fragment option(s): "
            + "; ".join(parts) + " (a dependency missing from the fragment?)")


def kconfig_symbols(tree):
    """The symbols a source tree's Kconfig files define."""
    syms = set()
    sym_re = re.compile(r"^\s*(?:menu)?config\s+([A-Za-z0-9_]+)\s*$", re.M)
    for root, dirs, files in os.walk(tree):
        dirs[:] = [d for d in dirs if d not in (".git", "Documentation", "tools", "samples")]
        for fn in files:
            if fn.startswith("Kconfig"):
                try:
                    with open(os.path.join(root, fn), errors="replace") as f:
                        syms.update(sym_re.findall(f.read()))
                except OSError:
                    pass
    return syms
