"""The cache of built kernels: cache keys of a build's inputs, the index from
inputs to entries, names given with --name, and --kernel NAME resolved to
an entry's bzImage and modules."""

import hashlib
import os
import subprocess

from faultline.errors import SetupError
from faultline.kernel.fragments import BASES, fragment_paths, parse_config
from faultline.kernel.patch_series import Patch
from faultline.paths import CACHE

# Built kernels, their sources and build trees; one attribute that tests
# point elsewhere.
KCACHE = os.path.join(CACHE, "kernel")


# ---------------------------------------------------------------- cache key

def compiler_id(cc="gcc"):
    """What the compiler contributes to the key: gcc's and ld's versions."""
    out = []
    for cmd in ([cc, "--version"], ["ld", "--version"]):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True)
            out.append(r.stdout.splitlines()[0] if r.stdout else "")
        except OSError:
            out.append(f"{cmd[0]} missing")
    return " | ".join(out)


def cache_key(source_id, patches, config_text, compiler):
    """The published kernel's key: the source's identity, the patches'
    contents in order, the final .config (comments and order ignored) and
    the compiler.  Nothing else: not paths, names or times."""
    h = hashlib.sha256()
    h.update(f"source {source_id}\n".encode())
    for p in patches:
        d = p.diff if isinstance(p, Patch) else p
        h.update(f"patch {len(d)}\n".encode() + d.encode())
    cfg = parse_config(config_text)
    for k in sorted(cfg):
        h.update(f"{k}={cfg[k]}\n".encode())
    h.update(f"compiler {compiler}\n".encode())
    return h.hexdigest()[:16]


def inputs_id(source_id, patches, base, kasan, kcov, compiler):
    """What a build of a source faultline owns follows from, hashed: the
    source's identity, the patches, the base config and the fragments as
    text, the compiler.  Known before the family lock (the key itself
    needs the patched tree's olddefconfig), so that a build already in
    the cache is not kept waiting by another one of the same family."""
    h = hashlib.sha256(f"source {source_id}\ncompiler {compiler}\n".encode())
    for p in patches:
        d = p.diff if isinstance(p, Patch) else p
        h.update(f"patch {len(d)}\n".encode() + d.encode())
    texts = [base] if base in BASES else [_read(base)]
    for path in fragment_paths(kasan, kcov):
        texts.append(_read(path))
    for t in texts:
        h.update(f"text {len(t)}\n".encode() + t.encode())
    return h.hexdigest()[:24]


def _read(path):
    with open(path, errors="replace") as f:
        return f.read()


def indexed_key(inputs):
    """The key built from @inputs before, if its entry is still there."""
    try:
        with open(os.path.join(KCACHE, "inputs", inputs)) as f:
            key = f.read().strip()
    except OSError:
        return None
    return key if os.path.isfile(os.path.join(KCACHE, "entries", key, "bzImage")) else None


def index_key(inputs, key):
    d = os.path.join(KCACHE, "inputs")
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, f"{inputs}.tmp.{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(key + "\n")
    os.replace(tmp, os.path.join(d, inputs))


# ---------------------------------------------------------------- names

def _names_dir():
    return os.path.join(KCACHE, "names")


def built_names():
    d = _names_dir()
    try:
        return sorted(n for n in os.listdir(d)
                      if os.path.isfile(os.path.join(d, n, "bzImage")))
    except OSError:
        return []


def looks_like_name(value):
    """A --kernel value that is a name: no '/', and not an existing file."""
    return bool(value) and "/" not in value and not os.path.exists(value)


def resolve(kernel, modules=None):
    """--kernel VALUE [--modules DIR] -> (bzImage, modules dir).  A name
    (see looks_like_name) is a built kernel; anything else passes through."""
    if not looks_like_name(kernel):
        return kernel, modules
    entry = os.path.join(_names_dir(), kernel)
    image = os.path.join(entry, "bzImage")
    if not os.path.isfile(image):
        names = built_names()
        raise SetupError(f"--kernel {kernel}: no such file and no kernel of that name "
                         f"(built: {', '.join(names) if names else 'none'}; "
                         "`faultline kernel build` makes one)")
    return os.path.realpath(image), modules or os.path.realpath(os.path.join(entry, "modules"))


def key_of(image):
    """The cache key of a built kernel's image (.../entries/KEY/bzImage,
    as --kernel NAME resolves it), else None."""
    if not image:
        return None
    entry = os.path.dirname(os.path.realpath(image))
    if os.path.basename(os.path.dirname(entry)) != "entries":
        return None
    return os.path.basename(entry)


def label(image):
    """The name of a built kernel's image (for table columns), else None:
    the first name, sorted, that links to the image's entry."""
    if not image:
        return None
    entry = os.path.dirname(os.path.realpath(image))
    if os.path.dirname(entry) != os.path.realpath(os.path.join(KCACHE, "entries")):
        return None
    for n in built_names():
        if os.path.realpath(os.path.join(_names_dir(), n)) == entry:
            return n
    return os.path.basename(entry)


def name_entry(name, key):
    """names/NAME -> ../entries/KEY, replaced atomically."""
    d = _names_dir()
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, f".{name}.{os.getpid()}")
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(os.path.join("..", "entries", key), tmp)
    os.replace(tmp, os.path.join(d, name))


def list_built():
    """faultline kernel list: the built names, one line each."""
    for n in built_names():
        info = {}
        try:
            with open(os.path.join(_names_dir(), n, "BUILDINFO")) as f:
                info = dict(ln.rstrip("\n").split("=", 1) for ln in f if "=" in ln)
        except OSError:
            pass
        print(f"{n:24} {info.get('release', '?'):28} {info.get('source', '?')} "
              f"patches={info.get('patches', '?')} key={info.get('key', '?')}")
    return 0
