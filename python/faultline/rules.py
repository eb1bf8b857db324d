"""Scenario rules checked on the host by the engine's own parser
(tools/fault-rules-check), before anything is built or booted.

The checker is meson's build/fault-rules-check when that is up to date,
else compiled with cc straight into the cache (about a second, once per
engine source version), so it works on a machine with no QEMU build yet.
"""

import hashlib
import os
import shutil
import subprocess
import tempfile

from faultline import TOP
from faultline.errors import SetupError
from faultline.paths import CACHE
from faultline.scenario import ScenarioError

SOURCES = ["tools/fault-rules-check.c", "hw/fault/fault-rules.c", "hw/fault/fault-decide.c",
           "hw/fault/fault-span.c", "hw/fault/fault-rng.c", "hw/fault/fault-log.c",
           "hw/fault/fault-parse.c", "hw/fault/fault-cand.c", "hw/fault/fault-engine.h",
           "hw/fault/fault-engine-int.h", "hw/fault/fault-cand.h"]
MESON_BINARY = os.path.join(TOP, "build", "fault-rules-check")


def _sources():
    return [os.path.join(TOP, s) for s in SOURCES]


def _meson_binary_fresh():
    try:
        built = os.path.getmtime(MESON_BINARY)
        return all(os.path.getmtime(s) <= built for s in _sources())
    except OSError:
        return False


def _cached_binary():
    """Where the cache holds (or will hold) the checker of this engine source."""
    h = hashlib.sha256()
    try:
        for s in _sources():
            with open(s, "rb") as f:
                h.update(s.encode() + b"\0" + f.read())
    except OSError as e:
        raise SetupError(f"fault-rules-check: {e.strerror}: {e.filename}") from None
    return os.path.join(CACHE, "rules-check", h.hexdigest()[:16], "fault-rules-check")


def built_checker():
    """Path of a fault-rules-check of this checkout's engine that is already
    built, or None: for checks that must not start a build."""
    if _meson_binary_fresh():
        return MESON_BINARY
    try:
        out = _cached_binary()
    except SetupError:
        return None
    return out if os.path.exists(out) else None


def checker():
    """Path of a fault-rules-check built from this checkout's engine."""
    if _meson_binary_fresh():
        return MESON_BINARY
    out = _cached_binary()
    if os.path.exists(out):
        return out
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise SetupError("no C compiler (cc) to build fault-rules-check: "
                         "scripts/faultline setup installs one")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = f"{out}.{os.getpid()}"
    c_files = [s for s in _sources() if s.endswith(".c")]
    res = subprocess.run([cc, "-std=c11", "-O0", "-I", os.path.join(TOP, "hw", "fault"),
                          *c_files, "-o", tmp], capture_output=True, text=True)
    if res.returncode:
        msg = (res.stderr.strip().splitlines() or ["?"])[0]
        raise SetupError(f"building fault-rules-check failed: {msg}")
    os.replace(tmp, out)     # atomic: parallel launchers never run half a binary
    return out


def _where(sc, line, col):
    """'FILE: rules L:C' or, for a line from faults.rules_file, 'FILE:
    rules_file NAME L:C' with the line number inside that file."""
    name = os.path.basename(sc.path)
    if sc.rules_override:
        return f"{sc.rules_override}: {line}:{col}"
    if sc.faults.rules_file:
        rpath = os.path.join(os.path.dirname(sc.path), sc.faults.rules_file)
        try:
            with open(rpath) as f:
                file_text = f.read()
        except OSError:
            file_text = ""
        inline_lines = sc.faults.rules[:len(sc.faults.rules) - len(file_text)].count("\n")
        if line > inline_lines:
            return f"{name}: rules_file {sc.faults.rules_file} {line - inline_lines}:{col}"
    return f"{name}: rules {line}:{col}"


def check_scenarios(scs):
    """ScenarioError naming file, line and column when a scenario's rules
    would be rejected by the fault-injector."""
    with_rules = [sc for sc in scs if sc.faults.rules.strip()]
    if not with_rules:
        return
    binary = checker()
    with tempfile.TemporaryDirectory(prefix="faultline-rules-") as d:
        paths = []
        for i, sc in enumerate(with_rules):
            paths.append(os.path.join(d, f"{i}.rules"))
            with open(paths[-1], "w") as f:
                f.write(sc.faults.rules)
        res = subprocess.run([binary, *paths], capture_output=True, text=True)
    if res.returncode == 0:
        return
    errors = []
    for line in res.stdout.splitlines():
        path, _, rest = line.partition(": ")
        pos, _, msg = rest.partition(": ")
        try:
            sc = with_rules[paths.index(path)]
            ln, col = (int(x) for x in pos.split(":"))
        except ValueError:
            continue
        errors.append(f"{_where(sc, ln, col)}: {msg}")
    if not errors:
        raise SetupError("fault-rules-check failed: "
                         + (res.stderr.strip() or f"exit {res.returncode}"))
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    raise ScenarioError(errors[0] + more)
