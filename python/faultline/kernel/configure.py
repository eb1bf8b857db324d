"""The merged .config of a kernel tree: base config plus faultline's
fragments, made with the tree's own make, checked, and the tree locked
while it is made."""

import fcntl
import glob
import os
import shutil
import tempfile

from faultline.errors import SetupError
from faultline.host.messages import say
from faultline.kernel import store
from faultline.kernel.fragments import (BASES, DEFAULT_BASE, check_config, config_error,
                                        fragment_options, fragment_paths, kconfig_symbols)
from faultline.kernel.sources import get_source, run_tool


# ---------------------------------------------------------------- config

def _lock(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        say(f"waiting for another build holding {path}")
        fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def run_make(tree, objdir, *targets, log=None, jobs=None, extra=()):
    cmd = ["make", "-C", tree, f"O={objdir}", *extra]
    if jobs:
        cmd.append(f"-j{jobs}")
    return run_tool(cmd + list(targets), log=log, group=True)


def check_base(base):
    if base not in BASES and not os.path.isfile(base):
        raise SetupError(f"--base {base}: not defconfig, tinyconfig or a config file")


def base_config_text(tree, base, scratch):
    """The base .config in @scratch (an O= directory): tinyconfig,
    defconfig, or a FILE given by the user."""
    os.makedirs(scratch, exist_ok=True)
    cfg = os.path.join(scratch, ".config")
    if base in BASES:
        r = run_make(tree, scratch, base)
        if r.returncode:
            raise SetupError(f"make {base} failed in {tree}: {_last_error(r.stdout)}")
    else:
        check_base(base)
        shutil.copyfile(base, cfg)
    with open(cfg) as f:
        return f.read()


def make_config(tree, base=DEFAULT_BASE, kasan=False, kcov=False, scratch=None):
    """The final .config text for @tree: base, then the fragments merged by
    the kernel's own scripts/kconfig/merge_config.sh, then olddefconfig.
    Refuses (SetupError) when an option did not survive Kconfig."""
    own = scratch is None
    scratch = scratch or tempfile.mkdtemp(prefix="faultline-kconfig-")
    try:
        frags = fragment_paths(kasan, kcov)
        options = fragment_options(kasan, kcov)
        base_config_text(tree, base, scratch)
        merge = os.path.join(tree, "scripts", "kconfig", "merge_config.sh")
        if not os.path.isfile(merge):
            raise SetupError(f"{tree}: no scripts/kconfig/merge_config.sh (not a kernel tree?)")
        # -m: merge only; olddefconfig then resolves dependencies with the
        # tree's own Kconfig (merge_config.sh's own olddefconfig would run
        # in the source tree, not in O=).
        r = run_tool(["sh", merge, "-m", "-O", scratch, os.path.join(scratch, ".config"), *frags],
                 cwd=scratch)
        if r.returncode:
            raise SetupError(f"merge_config.sh failed: {_last_error(r.stdout)}")
        r = run_make(tree, scratch, "olddefconfig")
        if r.returncode:
            raise SetupError(f"make olddefconfig failed in {tree}: {_last_error(r.stdout)}")
        with open(os.path.join(scratch, ".config")) as f:
            text = f.read()
        wrong, absent = check_config(options, text, kconfig_symbols(tree))
        if wrong:
            raise SetupError(config_error(wrong))
        if absent:
            say("not in this kernel's Kconfig (skipped): "
                + ", ".join(o.name for o in absent))
        return text
    finally:
        if own:
            shutil.rmtree(scratch, ignore_errors=True)


def _last_error(out):
    lines = [ln for ln in (out or "").splitlines() if ln.strip()]
    errs = [ln for ln in lines if "error" in ln.lower() or "***" in ln]
    return (errs[0] if errs else (lines[-1] if lines else "no output")).strip()


def merged_config(tree, cfg):
    """faultline kernel config: the merged .config of @tree (default: the
    newest Debian tree in the cache) and the source it came from."""
    check_base(cfg.base)
    src = get_source(tree or _default_config_tree())
    with holding_lock(os.path.join(store.KCACHE, "locks", src.family + ".lock")):
        if src.pristine:
            reset_tree(src.tree)
        text = make_config(src.tree, cfg.base, cfg.kasan, cfg.kcov,
                           scratch=os.path.join(store.KCACHE, "kconfig", src.family))
    return text, src.ident


def _default_config_tree():
    """kernel config without --src: the newest Debian tree already in the
    cache (Kconfig differs a little between versions)."""
    trees = sorted(glob.glob(os.path.join(store.KCACHE, "src", "linux-source-*_*")))
    for v in ("7.2", "6.12", "6.1"):
        if any(os.path.basename(t).startswith(f"linux-source-{v}_") for t in trees):
            return f"debian:{v}"
    raise SetupError("kernel config needs a kernel source tree: give --src TREE or "
                     "--src debian:6.12 (downloads Debian's source once)")


class holding_lock:
    def __init__(self, path):
        self.path = path

    def __enter__(self):
        self.fd = _lock(self.path)

    def __exit__(self, *a):
        os.close(self.fd)


def reset_tree(tree):
    """Back to the pristine commit; only files patches changed are rewritten
    (new mtimes), so make rebuilds only what depends on them."""
    for cmd in (["reset", "-q", "--hard", "pristine"], ["clean", "-fdxq", "-e", ".faultline-pristine"]):
        r = run_tool(["git", "-C", tree, *cmd])
        if r.returncode:
            raise SetupError(f"git {cmd[0]} in {tree} failed: {r.stdout.strip()[-200:]}")
