"""`faultline kernel`: guest kernels built from source, cached.

  kernel config  the merged .config: a base (tinyconfig by default) plus
                 configs/kernel/faultline.config (+ kasan.config, kcov.config),
                 checked option by option after `make olddefconfig`
  kernel build   a kernel tree or Debian's linux-source-6.1/6.12/7.2, plus
                 patches (plain diffs or mailing-list mboxes), built with that
                 config and published into the cache under a key of (source,
                 patches, final config, compiler), with a name
  kernel list    the built names

Cache layout (under $FAULTLINE_CACHE/kernel):
  debs/             linux-source-*.deb as downloaded
  apt-sid/          the private apt configuration for unstable (7.2)
  src/ID/           one git repository per Debian source (commit "pristine");
                    patches are applied there and reset before the next build
  build/ID-CFG/     `make O=` tree per (source, config): make's mtimes make a
                    one-file change a one-file rebuild
  entries/KEY/      a published kernel: bzImage, config, System.map, patches/,
                    BUILDINFO, build.log and modules/ (the headers and
                    generated files an out-of-tree module build needs, the
                    installed modules, modules.builtin): self-contained, so a
                    later build of the same source cannot break it
  names/NAME        symlink to entries/KEY
"""

import os
import re
import shutil
import time

from faultline.errors import SetupError
from faultline.host import step_progress
from faultline.host.messages import say
from faultline.kernel import store
from faultline.kernel.configure import check_base, holding_lock, make_config, reset_tree, run_make
from faultline.kernel.fragments import KernelConfig
from faultline.kernel.patch_series import apply_patches, read_patches
from faultline.kernel.sources import debian_versions, get_source
from faultline.kernel.store import (cache_key, compiler_id, index_key, indexed_key, inputs_id,
                                    name_entry)


# ---------------------------------------------------------------- build

_CC_ERR_RE = re.compile(r"^([^\s:]+):(\d+):(?:\d+:)? (?:fatal )?error: (.*)$")


def first_error(log_text):
    """'file:line: message' of the first compiler error, else make's."""
    for ln in log_text.splitlines():
        m = _CC_ERR_RE.match(ln.strip())
        if m:
            return f"{m.group(1)}:{m.group(2)}: {m.group(3)}"
    for ln in log_text.splitlines():
        if "***" in ln or "Error " in ln:
            return ln.strip()
    return "no error message in the log"


def _copy_tree_files(src_root, rel_paths, dst_root):
    for rel in rel_paths:
        s = os.path.join(src_root, rel)
        d = os.path.join(dst_root, rel)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        if os.path.islink(s):
            if os.path.lexists(d):
                os.unlink(d)
            os.symlink(os.readlink(s), d)
        else:
            shutil.copy2(s, d)


def _files_under(root, rel_dir, skip=lambda fn: False):
    base = os.path.join(root, rel_dir)
    out = []
    for r, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if d != ".git"]
        for fn in files:
            if not skip(fn):
                out.append(os.path.relpath(os.path.join(r, fn), root))
    return out


def install_extmod_tree(srctree, objtree, dest):
    """What `make -C DEST M=dir modules` needs, copied (as Debian's
    linux-headers): the source's Makefiles, include/ and scripts/, the x86
    Makefiles and include/ dirs, and the build's generated headers, config,
    host tools and Module.symvers."""
    src = []
    for d in (".", "arch/x86"):
        src += [os.path.join(d, f) if d != "." else f for f in os.listdir(os.path.join(srctree, d))
                if f.startswith("Makefile")]
    src += _files_under(srctree, "include") + _files_under(srctree, "scripts")
    for r, dirs, files in os.walk(os.path.join(srctree, "arch/x86")):
        rel = os.path.relpath(r, srctree)
        if os.path.basename(r) in ("include", "scripts"):
            src += _files_under(srctree, rel)
            dirs[:] = []
        else:
            src += [os.path.join(rel, f) for f in files if f in ("Kbuild.platforms", "Platform")]
    _copy_tree_files(srctree, sorted(set(src)), dest)
    obj_skip = lambda fn: fn.endswith((".o", ".cmd")) or fn.startswith(".") and fn.endswith(".d")
    obj = ["Module.symvers", ".config"]
    obj += _files_under(objtree, "include", obj_skip) + _files_under(objtree, "arch/x86/include", obj_skip)
    obj += _files_under(objtree, "scripts", obj_skip)
    for t in ("tools/objtool/objtool", "tools/bpf/resolve_btfids/resolve_btfids"):
        if os.path.exists(os.path.join(objtree, t)):
            obj.append(t)
    _copy_tree_files(objtree, [p for p in obj if os.path.lexists(os.path.join(objtree, p))], dest)


def flavour(cfg):
    """What a build tree is kept for: the base config and --kasan/--kcov.
    Those change most of the kernel; anything else (faultline's fragment,
    a patch, the user's --base file) is usually a small change of one tree
    (not always: an option that reshapes a core struct, such as
    X86_IOPL_IOPERM, recompiles nearly everything)."""
    base = cfg.base if cfg.base in ("tinyconfig", "defconfig") else \
        "file-" + re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.basename(cfg.base))
    return base + ("-kasan" if cfg.kasan else "") + ("-kcov" if cfg.kcov else "")


def build_tree(family, flav, config):
    """The build tree (make O=) of @family in flavour @flav, made on first
    use.  A config that differs from the tree's last one is written over it:
    olddefconfig then marks only the options that changed, and make
    recompiles only the files that use them (kbuild's per-option
    dependencies), instead of a cold build in a new tree.  A tree from
    before flavours (named by its config's hash) is adopted, the one whose
    config is closest to @config, so its objects are not compiled again."""
    root = os.path.join(store.KCACHE, "build")
    objdir = os.path.join(root, f"{family}-{flav}")
    if not os.path.lexists(objdir):
        os.makedirs(root, exist_ok=True)
        want = set(config.splitlines())
        adopted = {os.readlink(os.path.join(root, d)) for d in os.listdir(root)
                   if os.path.islink(os.path.join(root, d))}
        legacy = []
        for d in set(os.listdir(root)) - adopted:
            cfg = os.path.join(root, d, ".config")
            if re.fullmatch(re.escape(family) + r"-[0-9a-f]{12}", d) and \
                    os.path.isfile(os.path.join(root, d, "vmlinux")) and os.path.isfile(cfg):
                with open(cfg) as f:
                    legacy.append((len(want & set(f.read().splitlines())), d))
        if legacy:
            os.symlink(max(legacy)[1], objdir)
        else:
            os.makedirs(objdir)
    return objdir


def build(tree, cfg=KernelConfig(), patch_files=None, name=None, jobs=None):
    """faultline kernel build: the whole pipeline, printing phase times.
    @tree: a kernel tree or debian:VERSION; @patch_files: applied in order;
    @name: for --kernel (default: debian-VERSION[-kasan][-kcov])."""
    t_start = time.monotonic()
    phases = {}
    jobs = jobs or os.cpu_count() or 1
    check_base(cfg.base)
    patches = read_patches(patch_files or [])
    src = get_source(tree)
    phases.update(src.phases)
    if patches and not src.pristine:
        raise SetupError(f"--patch needs a source faultline owns ({debian_versions()}); "
                         f"in your own tree {src.tree}, apply them there (git am) and build it")
    name = name or (src.family + ("-kasan" if cfg.kasan else "") +
                    ("-kcov" if cfg.kcov else ""))
    if "/" in name or name.startswith("."):
        raise SetupError(f"--name {name!r}: a name has no '/' and does not start with '.'")
    compiler = compiler_id()
    inputs = (inputs_id(src.ident, patches, cfg.base, cfg.kasan, cfg.kcov, compiler)
              if src.pristine else None)    # a user's tree can change under one identity
    hit = inputs and indexed_key(inputs)
    if hit:
        name_entry(name, hit)
        say(f"kernel cache hit: {os.path.join(store.KCACHE, 'entries', hit)} (name {name})")
        print(os.path.join(store.KCACHE, "entries", hit, "bzImage"))
        return 0
    with holding_lock(os.path.join(store.KCACHE, "locks", src.family + ".lock")):
        t = time.monotonic()
        os.makedirs(os.path.join(store.KCACHE, "logs"), exist_ok=True)
        if src.pristine:
            reset_tree(src.tree)
            with open(os.path.join(store.KCACHE, "logs", f"{src.family}-patch.log"), "w") as plog:
                apply_patches(src.tree, patches, plog)
        phases["patch"] = time.monotonic() - t
        t = time.monotonic()
        config = make_config(src.tree, cfg.base, cfg.kasan, cfg.kcov,
                             scratch=os.path.join(store.KCACHE, "kconfig", src.family))
        phases["config"] = time.monotonic() - t
        key = cache_key(src.ident, patches, config, compiler)
        entry = os.path.join(store.KCACHE, "entries", key)
        if os.path.isfile(os.path.join(entry, "bzImage")):
            if inputs:
                index_key(inputs, key)
            name_entry(name, key)
            say(f"kernel cache hit: {entry} (name {name})")
            print(os.path.join(entry, "bzImage"))
            return 0
        say(f"building {src.ident}" + (f" + {len(patches)} patch(es)" if patches else "")
            + f" (key {key}, {len(config.splitlines())} config lines, make -j{jobs})")
        objdir = build_tree(src.family, flavour(cfg), config)
        dot_config = os.path.join(objdir, ".config")
        if not os.path.exists(dot_config) or open(dot_config).read() != config:
            with open(dot_config, "w") as f:
                f.write(config)
        logpath = os.path.join(objdir, "build.log")
        # cold: nothing compiled in this build tree yet (targets: a cold
        # minimal build <= 12 min, a one-file rebuild <= 90 s on 2 cores)
        cold = not os.path.exists(os.path.join(objdir, "vmlinux"))
        load0 = os.getloadavg()[0]
        t = time.monotonic()
        make_extra = []
        if shutil.which("ccache") and os.environ.get("FAULTLINE_CCACHE", "1") != "0":
            make_extra = ["CC=ccache gcc"]
        # Progress: kbuild's CC/LD lines, of those of the last cold build
        # of this tree when this one is cold too.
        counted = os.path.join(store.KCACHE, "logs", os.path.basename(objdir) + ".lines")
        estimate = _read_count(counted) if cold else None
        with open(logpath, "w") as log, \
                step_progress.following(logpath, f"kernel {name} compile",
                                   estimate=estimate) as tracker:
            r = run_make(src.tree, objdir, "olddefconfig", "bzImage", "modules", log=log,
                      jobs=jobs, extra=make_extra)
        if cold and r.returncode == 0:
            with open(counted, "w") as f:
                f.write(f"{tracker.lines}\n")
        phases["compile"] = time.monotonic() - t
        loads = (load0, os.getloadavg()[0])
        if r.returncode:
            with open(logpath, errors="replace") as f:
                raise SetupError(f"kernel build failed: {first_error(f.read())} "
                                 f"(full log: {logpath})")
        t = time.monotonic()
        _publish(src, objdir, entry, key, patches, config, compiler, logpath, jobs,
                 make_extra, cfg)
        phases["install"] = time.monotonic() - t
        if inputs:
            index_key(inputs, key)
        name_entry(name, key)
    total = time.monotonic() - t_start
    target = "cold build, target 12 min" if cold else "rebuild, target 90 s"
    say("kernel " + name + ": " + ", ".join(f"{k} {v:.1f}s" for k, v in phases.items())
        + f"; total {total:.1f}s ({target}; host load {loads[0]:.1f} -> {loads[1]:.1f})")
    say(f"bzImage {os.path.getsize(os.path.join(entry, 'bzImage')) // 1024} KiB, "
        f".config {len(config.splitlines())} lines; use it with --kernel {name}")
    with open(os.path.join(entry, "BUILDINFO"), "a") as f:
        f.write("phases=" + " ".join(f"{k}:{v:.1f}" for k, v in phases.items())
                + f" total:{total:.1f}\ncold={int(cold)}\nload={loads[0]:.1f},{loads[1]:.1f}\n")
    print(os.path.join(entry, "bzImage"))
    return 0


def _read_count(path):
    try:
        with open(path) as f:
            return int(f.read().strip()) or None
    except (OSError, ValueError):
        return None


def _publish(src, objdir, entry, key, patches, config, compiler, logpath, jobs, make_extra,
             cfg):
    """Everything into entries/KEY.tmp.PID, then one rename: a failure (disk
    full included) leaves no entry."""
    tmp = f"{entry}.tmp.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        shutil.copy2(os.path.join(objdir, "arch/x86/boot/bzImage"), os.path.join(tmp, "bzImage"))
        shutil.copy2(os.path.join(objdir, "System.map"), os.path.join(tmp, "System.map"))
        with open(os.path.join(tmp, "config"), "w") as f:
            f.write(config)
        os.makedirs(os.path.join(tmp, "patches"))
        with open(os.path.join(tmp, "patches", "series"), "w") as series:
            for i, p in enumerate(patches, 1):
                fn = f"{i:04d}.patch"
                with open(os.path.join(tmp, "patches", fn), "w") as f:
                    f.write(p.diff)
                series.write(f"{fn}\t{p.label()}\n")
        mods = os.path.join(tmp, "modules")
        with open(os.path.join(tmp, "install.log"), "w") as log, \
                step_progress.following(log.name, "kernel modules_install"):
            r = run_make(src.tree, objdir, "modules_install", log=log, jobs=jobs,
                      extra=[*make_extra, f"INSTALL_MOD_PATH={mods}", "INSTALL_MOD_STRIP=1",
                             "DEPMOD=/bin/true"])
        if r.returncode:
            raise SetupError(f"make modules_install failed: see {tmp}/install.log")
        release = open(os.path.join(objdir, "include/config/kernel.release")).read().strip()
        moddir = os.path.join(mods, "lib", "modules", release)
        for ln in ("build", "source"):
            if os.path.islink(os.path.join(moddir, ln)):
                os.unlink(os.path.join(moddir, ln))
        install_extmod_tree(src.tree, objdir, mods)
        # build-guest reads modules.builtin beside the tree it is given.
        for fn in ("modules.builtin", "modules.builtin.modinfo", "modules.order"):
            if os.path.exists(os.path.join(moddir, fn)):
                shutil.copy2(os.path.join(moddir, fn), os.path.join(mods, fn))
        shutil.copy2(logpath, os.path.join(tmp, "build.log"))
        with open(os.path.join(tmp, "BUILDINFO"), "w") as f:
            f.write(f"key={key}\nsource={src.ident}\nrelease={release}\n"
                    f"base={cfg.base}\nkasan={int(cfg.kasan)}\nkcov={int(cfg.kcov)}\n"
                    f"compiler={compiler}\npatches={len(patches)}\n"
                    f"built={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
        shutil.rmtree(entry, ignore_errors=True)
        os.rename(tmp, entry)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
