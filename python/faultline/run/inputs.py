"""Command-line values checked before anything is built or created.

One function per kind of option, used as the argparse `type=` of every
command that takes it, so `run`, `repro`, `compare`, `matrix`, `lava`,
`cmdline`, `libvirt-xml` and `minimize` refuse the same bad value with the
same line (exit 2, through the parser) and nothing is built first.
"""

import argparse
import os
import tempfile

from faultline import scenario
from faultline.errors import SetupError
from faultline.kernel.store import looks_like_name
from faultline.scenario import SEED_MAX
from faultline.vm import libvirt

# A bzImage carries the x86 boot protocol's header magic here
# (Documentation/arch/x86/boot.rst: "HdrS" at 0x202).
BZIMAGE_MAGIC_OFFSET = 0x202
BZIMAGE_MAGIC = b"HdrS"


def parse_seeds(text):
    """'A..B' (inclusive) -> [A..B]; for --seeds of run and compare."""
    try:
        a, b = (int(x) for x in text.split("..", 1))
    except ValueError:
        raise SetupError(f"--seeds {text!r}: expected A..B, e.g. 1..20") from None
    if b < a or b - a >= 100000:
        raise SetupError(f"--seeds {text!r}: B must be >= A (and at most 100000 seeds)")
    return list(range(a, b + 1))


def _bad(msg):
    return argparse.ArgumentTypeError(msg)


def seed_value(text):
    """A seed: an integer the fault-injector takes (0 to 2^64-1)."""
    try:
        v = int(text, 0) if str(text).lower().startswith("0x") else int(text)
    except ValueError:
        raise _bad(f"{text!r} is not an integer") from None
    if not 0 <= v <= SEED_MAX:
        raise _bad(f"{text} is out of range (seeds are 0 to 2^64-1)")
    return v


def seed_range(text):
    """--seeds A..B: the text, checked (parse_seeds() expands it)."""
    try:
        seeds = parse_seeds(text)
    except SetupError as e:
        raise _bad(str(e).split(": ", 1)[-1]) from None
    for s in (seeds[0], seeds[-1]):
        if not 0 <= s <= SEED_MAX:
            raise _bad(f"{text}: {s} is out of range (seeds are 0 to 2^64-1)")
    return text


def memory_size(text):
    """--memory: a size as in vm.memory, at least scenario.MIN_MEMORY."""
    try:
        scenario.check_memory(text, "")
    except scenario.ScenarioError as e:
        raise _bad(str(e).lstrip(": ")) from None
    return text


def cpu_count(text):
    try:
        v = int(text)
    except ValueError:
        raise _bad(f"{text!r} is not a number of vCPUs (1-64)") from None
    if not 1 <= v <= 64:
        raise _bad(f"{text}: expected 1-64")
    return v


def duration(text):
    """--timeout: a duration as the scenario's timeout (180s, 3m, 500ms)."""
    try:
        scenario.parse_duration(text, "")
    except scenario.ScenarioError:
        raise _bad(f"bad duration {text!r} (expected e.g. 300s, 5m)") from None
    return text


def positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise _bad(f"{text!r} is not a number") from None
    if v < 1:
        raise _bad(f"{text}: must be >= 1")
    return v


def check_bzimage(path, what="--kernel"):
    """SetupError unless @path is a readable x86 bzImage."""
    if not os.path.exists(path):
        raise SetupError(f"{what} {path}: no such file")
    if os.path.isdir(path):
        raise SetupError(f"{what} {path}: a directory, not a bzImage "
                         "(give arch/x86/boot/bzImage)")
    try:
        with open(path, "rb") as f:
            f.seek(BZIMAGE_MAGIC_OFFSET)
            magic = f.read(len(BZIMAGE_MAGIC))
    except OSError as e:
        raise SetupError(f"{what} {path}: cannot read it ({e.strerror.lower()})") from None
    if magic != BZIMAGE_MAGIC:
        raise SetupError(f"{what} {path}: not a bzImage (no 'HdrS' boot header at 0x202; "
                         "give arch/x86/boot/bzImage)")
    return path


def kernel_image(text):
    """--kernel, --baseline, --series: an x86 bzImage, or the name of a
    kernel built by `faultline kernel build` (resolved after parsing)."""
    if looks_like_name(text):
        return text
    try:
        return check_bzimage(text, "")
    except SetupError as e:
        raise _bad(str(e).strip()) from None


def modules_dir(text):
    """--modules: a kernel build tree or a lib/modules/VERSION directory."""
    if not os.path.isdir(text):
        raise _bad(f"{text}: no such directory (give the kernel's build tree or "
                   "lib/modules/VERSION)")
    return text


def _deepest_existing(path):
    p = os.path.abspath(path)
    while not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return p


def out_dir(text):
    """--out: a directory that exists or can be created, and is writable.

    Tried for real (a temporary directory made and removed where it would
    go): access(2) says yes to root on /proc and on full file systems."""
    base = _deepest_existing(text)
    if not os.path.isdir(base):
        raise _bad(f"{text}: {base} is not a directory")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".faultline-probe-", dir=base))
    except OSError:
        raise _bad(f"{text}: cannot create directories in {base}") from None
    return text


def run_dir(text):
    """A run directory (repro, minimize): it has run.json."""
    if not os.path.isdir(text):
        raise _bad(f"{text}: no such directory")
    if not os.path.isfile(os.path.join(text, "run.json")):
        raise _bad(f"{text}: not a faultline run directory (no run.json)")
    return text


def existing_dir(text):
    """show: a run, sweep or comparison directory."""
    if not os.path.isdir(text):
        raise _bad(f"{text}: no such directory")
    return text


def libvirt_uri(text):
    """--connect: a URI in form; check_libvirt_uri() connects once the
    backend is known to be libvirt."""
    if "://" not in text:
        raise _bad(f"{text!r} is not a libvirt URI (e.g. qemu:///system)")
    return text


def check_libvirt_uri(uri):
    """SetupError unless libvirt connects to @uri (its daemons started if
    needed): before a run directory exists."""
    try:
        libvirt.check_uri(uri)
    except SetupError as e:
        raise SetupError(f"--connect: {e}") from None
    return uri
