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

import fcntl
import glob
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from . import TOP, abort
from .build import CACHE, say
from .errors import SetupError

KCACHE = os.path.join(CACHE, "kernel")
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


# ---------------------------------------------------------------- patches

@dataclass
class Patch:
    path: str           # the file given with --patch
    index: int          # 1-based within that file
    count: int          # patches in that file
    subject: str        # the mail's subject, or "" for a plain diff
    diff: str

    def label(self):
        if self.count == 1 and not self.subject:
            return self.path
        s = f" {self.subject!r}" if self.subject else ""
        return f"{self.path} [{self.index}/{self.count}{s}]"


_SUBJ_RE = re.compile(r"^(?:Subject:\s*)?((?:(?:Re|RE|Fwd):\s*)*)(\[(?:[^\]]*\s)?PATCH[^\]]*\].*)$")
_MBOX_FROM_RE = re.compile(r"^From \S+ .*\d$")


def split_patches(path, text):
    """A --patch file -> [Patch].  A plain diff is one patch; a mailbox or a
    saved list thread gives one patch per message that carries a diff, in
    file order.  A message starts at an mbox "From " line (its Subject:
    header names it) or at a "[PATCH ...] subject" / "Subject: [PATCH" line;
    replies ("Re: [PATCH") are skipped, cover letters carry no diff, and a
    diff ends at the "-- " signature."""
    msgs = [{"subject": "", "reply": False, "lines": [], "headers": False}]
    for ln in text.splitlines(keepends=True):
        s = ln.rstrip("\n")
        cur = msgs[-1]
        if _MBOX_FROM_RE.match(s):
            msgs.append({"subject": "", "reply": False, "lines": [], "headers": True})
            continue
        if cur["headers"]:
            if not s.strip():
                cur["headers"] = False
            elif s.startswith("Subject:"):
                m = _SUBJ_RE.match(s)
                cur["subject"] = (m.group(2) if m else s[8:]).strip()
                cur["reply"] = bool(m and m.group(1)) or s[8:].strip().startswith("Re:")
            continue
        m = _SUBJ_RE.match(s)
        if m:
            msgs.append({"subject": m.group(2).strip(), "reply": bool(m.group(1)),
                         "lines": [], "headers": False})
            continue
        cur["lines"].append(ln)
    patches = []
    for msg in msgs:
        if msg["reply"]:
            continue
        diff = _extract_diff(msg["lines"])
        if diff:
            patches.append((_clean_subject(msg["subject"]), diff))
    return [Patch(path, i + 1, len(patches), subj, d) for i, (subj, d) in enumerate(patches)]


def _clean_subject(s):
    return re.sub(r"^\[[^\]]*PATCH[^\]]*\]\s*", "", s).strip()


def _extract_diff(lines):
    """The diff in a message: from its first diff header to the signature
    ("-- ") or the end; "---" file headers need a "+++" line after them."""
    start = None
    for i, ln in enumerate(lines):
        if ln.startswith("diff --git ") or ln.startswith("Index: "):
            start = i
            break
        if ln.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            start = i
            break
    if start is None:
        return ""
    out = []
    for ln in lines[start:]:
        if ln.rstrip("\n") == "-- ":
            break
        out.append(ln)
    d = "".join(out)
    return d if ("\n@@ " in d or d.startswith("@@ ") or "GIT binary patch" in d) else ""


def read_patches(paths):
    """--patch FILE... -> [Patch] in order; a file with no diff is one line."""
    out = []
    for p in paths:
        try:
            with open(p, errors="replace") as f:
                text = f.read()
        except OSError as e:
            raise SetupError(f"--patch {p}: {e.strerror}") from None
        got = split_patches(p, text)
        if not got:
            raise SetupError(f"--patch {p}: not a patch (no diff in it: a plain diff, "
                             "or a mailbox of patches as saved from the list)")
        out.extend(got)
    return out


def apply_patches(tree, patches, log=None):
    """Apply @patches in order to the git work tree @tree (git apply).  The
    first that does not apply is one line: the patch, its first failing
    file and hunk."""
    for p in patches:
        res = subprocess.run(["git", "-C", tree, "apply", "--whitespace=nowarn", "-"],
                             input=p.diff, capture_output=True, text=True)
        if log:
            log.write(f"git apply {p.label()}: exit {res.returncode}\n{res.stderr}")
        if res.returncode != 0:
            raise SetupError(f"--patch {p.label()} does not apply: " + _apply_failure(p, res.stderr))


def _apply_failure(p, stderr):
    m = re.search(r"patch failed: (.+):(\d+)", stderr)
    if m:
        fname, line = m.group(1), int(m.group(2))
        hunk = _hunk_at(p.diff, fname, line)
        return f"{fname}, hunk {hunk}" if hunk else f"{fname}:{line}"
    m = re.search(r"error: (.+?): (No such file or directory|does not exist in index|"
                  r"already exists in working directory)", stderr)
    if m:
        return f"{m.group(1)}: {m.group(2)}"
    first = next((ln for ln in stderr.splitlines() if ln.startswith("error:")),
                 stderr.strip().splitlines()[0] if stderr.strip() else "git apply failed")
    return first.replace("error: ", "", 1)


def _hunk_at(diff, fname, line):
    """'#N (@@ -a,b +c,d @@)' for the hunk of @fname starting at old line @line."""
    cur, n = None, 0
    for ln in diff.splitlines():
        if ln.startswith("+++ "):
            cur = ln[4:].split("\t")[0]
            cur = cur[2:] if cur.startswith(("a/", "b/")) else cur
            n = 0
        elif ln.startswith("@@ ") and cur == fname:
            n += 1
            m = re.match(r"@@ -(\d+)", ln)
            if m and int(m.group(1)) == line:
                hdr = ln.split("@@")[1].strip()
                return f"#{n} (@@ {hdr} @@)"
    return None


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


def _indexed(inputs):
    """The key built from @inputs before, if its entry is still there."""
    try:
        with open(os.path.join(KCACHE, "inputs", inputs)) as f:
            key = f.read().strip()
    except OSError:
        return None
    return key if os.path.isfile(os.path.join(KCACHE, "entries", key, "bzImage")) else None


def _index(inputs, key):
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


# ---------------------------------------------------------------- sources

@dataclass
class Source:
    ident: str          # identity in the key, e.g. linux-source-6.1=6.1.192-3
    tree: str           # the source tree (a git repo for Debian's)
    family: str         # build-tree prefix and default name, e.g. debian-6.1
    pristine: bool      # a cache-owned git tree patches may be applied to
    phases: dict = field(default_factory=dict)


def _run(cmd, log=None, **kw):
    """The build's tools (make, git, apt), output into @log or .stdout.  They
    end with the launcher: a make left running by a killed build would
    write into the tree the next build takes (seen: two makes, one object
    file, "fixdep: error opening file")."""
    return abort.run_captured(cmd, stdout=log or subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, **kw)


def _apt_opts(suite):
    """A private apt configuration for @suite (never the system's sources)."""
    d = os.path.join(KCACHE, f"apt-{suite}")
    os.makedirs(os.path.join(d, "lists", "partial"), exist_ok=True)
    src = os.path.join(d, "sources.list")
    line = f"deb http://deb.debian.org/debian {suite} main\n"
    if not os.path.exists(src) or open(src).read() != line:
        with open(src, "w") as f:
            f.write(line)
    # no binary caches: the system's /var/cache/apt stays the system's own
    return ["-o", f"Dir::Etc::sourcelist={src}", "-o", "Dir::Etc::sourceparts=/nonexistent",
            "-o", f"Dir::State::Lists={d}/lists", "-o", "Dir::Cache::pkgcache=",
            "-o", "Dir::Cache::srcpkgcache="], d


def _apt_candidate(pkg, suite):
    opts = []
    if suite:
        opts, d = _apt_opts(suite)
        stamp = os.path.join(d, "updated")
        if not os.path.exists(stamp) or time.time() - os.path.getmtime(stamp) > 12 * 3600:
            r = _run(["apt-get", *opts, "update", "-qq"])
            if r.returncode != 0:
                raise SetupError(f"apt-get update ({suite}) failed: "
                                 f"{(r.stdout or '').strip().splitlines()[-1:]}")
            open(stamp, "w").close()
    r = _run(["apt-cache", *opts, "policy", pkg])
    m = re.search(r"Candidate:\s*(\S+)", r.stdout or "")
    if not m or m.group(1) == "(none)":
        return None, opts
    return m.group(1), opts


def debian_versions():
    """'6.1 (bookworm), ...': what faultline fetches from Debian."""
    return ", ".join(f"debian:{v} ({DEBIAN[v][1]})" for v in DEBIAN)


def debian_source(version):
    """debian:X -> Source: the .deb downloaded once, extracted once into a git
    repository with one commit, "pristine"."""
    if version not in DEBIAN:
        have = sorted(_run(["apt-cache", "pkgnames", "linux-source-"]).stdout.split())
        extra = f"; this machine's apt sources list {', '.join(have)}" if have else ""
        raise SetupError(f"debian:{version}: faultline builds {debian_versions()}{extra}")
    pkg, where, suite = DEBIAN[version]
    debs = os.path.join(KCACHE, "debs")
    os.makedirs(debs, exist_ok=True)
    t0 = time.monotonic()
    have = sorted(glob.glob(os.path.join(debs, f"{pkg}_*.deb")))
    if have:
        deb = have[-1]
    else:
        ver, opts = _apt_candidate(pkg, suite)
        if not ver:
            raise SetupError(f"debian:{version}: {pkg} is not in Debian {where} any more "
                             "(apt-cache policy has no candidate)")
        say(f"downloading {pkg}={ver} ({where})")
        r = _run(["apt-get", *opts, "download", "-qq", f"{pkg}={ver}"], cwd=debs)
        have = sorted(glob.glob(os.path.join(debs, f"{pkg}_*.deb")))
        if r.returncode != 0 or not have:
            raise SetupError(f"apt-get download {pkg}={ver} failed: "
                             f"{(r.stdout or '').strip().splitlines()[-1:]}")
        deb = have[-1]
    ver = os.path.basename(deb)[len(pkg) + 1:].rsplit("_", 1)[0].replace("%3a", ":")
    ident = f"{pkg}={ver}"
    tree = os.path.join(KCACHE, "src", f"{pkg}_{ver}")
    t1 = time.monotonic()
    if not os.path.exists(os.path.join(tree, ".faultline-pristine")):
        _extract_deb(deb, pkg, tree)
    return Source(ident, tree, f"debian-{version}", True,
                  {"fetch": t1 - t0, "extract": time.monotonic() - t1})


def _extract_deb(deb, pkg, tree):
    say(f"extracting {os.path.basename(deb)} into {tree} (once)")
    tmp = tree + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    member = f"./usr/src/{pkg}.tar.xz"
    p1 = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", deb], stdout=subprocess.PIPE)
    p2 = subprocess.Popen(["tar", "-xO", member], stdin=p1.stdout, stdout=subprocess.PIPE)
    p1.stdout.close()
    p3 = subprocess.run(["tar", "-xJ", "--strip-components=1", "-C", tmp], stdin=p2.stdout)
    p2.stdout.close()
    if p3.returncode or p2.wait() or p1.wait():
        shutil.rmtree(tmp, ignore_errors=True)
        raise SetupError(f"{deb}: cannot extract {member}")
    git = ["git", "-C", tmp, "-c", "user.name=faultline", "-c", "user.email=faultline@localhost",
           "-c", "core.autocrlf=false"]
    for cmd in (["init", "-q"], ["add", "-A", "-f"], ["commit", "-q", "--no-verify", "-m", "pristine"],
                ["tag", "pristine"]):
        r = _run(git + cmd)
        if r.returncode:
            raise SetupError(f"git {cmd[0]} in {tmp} failed: {r.stdout.strip()[-200:]}")
    open(os.path.join(tmp, ".git", "faultline-pristine"), "w").close()
    # git ignores dotfiles we write; the marker sits beside the tree's files
    open(os.path.join(tmp, ".faultline-pristine"), "w").close()
    shutil.rmtree(tree, ignore_errors=True)
    os.rename(tmp, tree)


def tree_source(path):
    """A user's kernel tree: built in place with O= into the cache; its
    identity is its HEAD and uncommitted changes (git) or its files' sizes
    and mtimes."""
    tree = os.path.realpath(path)
    if not os.path.isfile(os.path.join(tree, "Makefile")) or \
            not os.path.isdir(os.path.join(tree, "arch", "x86")):
        raise SetupError(f"{path}: not a kernel tree (no Makefile and arch/x86) "
                         f"and not one of {debian_versions()}")
    h = hashlib.sha256(tree.encode())
    if os.path.isdir(os.path.join(tree, ".git")):
        head = _run(["git", "-C", tree, "rev-parse", "HEAD"]).stdout.strip()
        diff = subprocess.run(["git", "-C", tree, "diff", "HEAD", "--binary"],
                              capture_output=True).stdout
        h.update(head.encode() + diff)
        # untracked sources count too (a new file added by hand)
        h.update(_run(["git", "-C", tree, "ls-files", "-o", "--exclude-standard"]).stdout.encode())
    else:
        for root, dirs, files in os.walk(tree):
            dirs.sort()
            for fn in sorted(files):
                st = os.stat(os.path.join(root, fn))
                h.update(f"{root}/{fn} {st.st_size} {st.st_mtime_ns}\n".encode())
    name = os.path.basename(tree)
    return Source(f"tree:{tree}:{h.hexdigest()[:16]}", tree, name, False)


def get_source(spec):
    if spec.startswith("debian:"):
        return debian_source(spec[len("debian:"):])
    if not os.path.isdir(spec):
        raise SetupError(f"{spec}: no such kernel tree (a directory, or one of "
                         f"{debian_versions()})")
    return tree_source(spec)


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


def _make(tree, objdir, *targets, log=None, jobs=None, extra=()):
    cmd = ["make", "-C", tree, f"O={objdir}", *extra]
    if jobs:
        cmd.append(f"-j{jobs}")
    return _run(cmd + list(targets), log=log)


def check_base(base):
    if base not in BASES and not os.path.isfile(base):
        raise SetupError(f"--base {base}: not defconfig, tinyconfig or a config file")


def base_config_text(tree, base, scratch):
    """The base .config in @scratch (an O= directory): tinyconfig,
    defconfig, or a FILE given by the user."""
    os.makedirs(scratch, exist_ok=True)
    cfg = os.path.join(scratch, ".config")
    if base in BASES:
        r = _make(tree, scratch, base)
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
        r = _run(["sh", merge, "-m", "-O", scratch, os.path.join(scratch, ".config"), *frags],
                 cwd=scratch)
        if r.returncode:
            raise SetupError(f"merge_config.sh failed: {_last_error(r.stdout)}")
        r = _make(tree, scratch, "olddefconfig")
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
    with _holding(os.path.join(KCACHE, "locks", src.family + ".lock")):
        if src.pristine:
            _reset(src.tree)
        text = make_config(src.tree, cfg.base, cfg.kasan, cfg.kcov,
                           scratch=os.path.join(KCACHE, "kconfig", src.family))
    return text, src.ident


def _default_config_tree():
    """kernel config without --src: the newest Debian tree already in the
    cache (Kconfig differs a little between versions)."""
    trees = sorted(glob.glob(os.path.join(KCACHE, "src", "linux-source-*_*")))
    for v in ("7.2", "6.12", "6.1"):
        if any(os.path.basename(t).startswith(f"linux-source-{v}_") for t in trees):
            return f"debian:{v}"
    raise SetupError("kernel config needs a kernel source tree: give --src TREE or "
                     "--src debian:6.12 (downloads Debian's source once)")


class _holding:
    def __init__(self, path):
        self.path = path

    def __enter__(self):
        self.fd = _lock(self.path)

    def __exit__(self, *a):
        os.close(self.fd)


def _reset(tree):
    """Back to the pristine commit; only files patches changed are rewritten
    (new mtimes), so make rebuilds only what depends on them."""
    for cmd in (["reset", "-q", "--hard", "pristine"], ["clean", "-fdxq", "-e", ".faultline-pristine"]):
        r = _run(["git", "-C", tree, *cmd])
        if r.returncode:
            raise SetupError(f"git {cmd[0]} in {tree} failed: {r.stdout.strip()[-200:]}")


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
    root = os.path.join(KCACHE, "build")
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
    hit = inputs and _indexed(inputs)
    if hit:
        _name(name, hit)
        say(f"kernel cache hit: {os.path.join(KCACHE, 'entries', hit)} (name {name})")
        print(os.path.join(KCACHE, "entries", hit, "bzImage"))
        return 0
    with _holding(os.path.join(KCACHE, "locks", src.family + ".lock")):
        t = time.monotonic()
        os.makedirs(os.path.join(KCACHE, "logs"), exist_ok=True)
        if src.pristine:
            _reset(src.tree)
            with open(os.path.join(KCACHE, "logs", f"{src.family}-patch.log"), "w") as plog:
                apply_patches(src.tree, patches, plog)
        phases["patch"] = time.monotonic() - t
        t = time.monotonic()
        config = make_config(src.tree, cfg.base, cfg.kasan, cfg.kcov,
                             scratch=os.path.join(KCACHE, "kconfig", src.family))
        phases["config"] = time.monotonic() - t
        key = cache_key(src.ident, patches, config, compiler)
        entry = os.path.join(KCACHE, "entries", key)
        if os.path.isfile(os.path.join(entry, "bzImage")):
            if inputs:
                _index(inputs, key)
            _name(name, key)
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
        with open(logpath, "w") as log:
            r = _make(src.tree, objdir, "olddefconfig", "bzImage", "modules", log=log,
                      jobs=jobs, extra=make_extra)
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
            _index(inputs, key)
        _name(name, key)
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
        with open(os.path.join(tmp, "install.log"), "w") as log:
            r = _make(src.tree, objdir, "modules_install", log=log, jobs=jobs,
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


def _name(name, key):
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
