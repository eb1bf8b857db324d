"""Kernel sources: Debian's linux-source packages (apt, in the kernel cache)
and a local kernel tree, each named by a family and a version."""

import glob
import hashlib
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field

from faultline.errors import SetupError
from faultline.host import procs, step_progress
from faultline.host.messages import say
from faultline.kernel import store
from faultline.kernel.fragments import DEBIAN


# ---------------------------------------------------------------- sources

@dataclass
class Source:
    ident: str          # identity in the key, e.g. linux-source-6.1=6.1.192-3
    tree: str           # the source tree (a git repo for Debian's)
    family: str         # build-tree prefix and default name, e.g. debian-6.1
    pristine: bool      # a cache-owned git tree patches may be applied to
    phases: dict = field(default_factory=dict)


def run_tool(cmd, log=None, **kw):
    """The build's tools (make, git, apt), output into @log or .stdout.  They
    end with the launcher: a make left running by a killed build would
    write into the tree the next build takes (seen: two makes, one object
    file, "fixdep: error opening file")."""
    return procs.run_captured(cmd, stdout=log or subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, **kw)


def _apt_opts(suite):
    """A private apt configuration for @suite (never the system's sources)."""
    d = os.path.join(store.KCACHE, f"apt-{suite}")
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
            r = run_tool(["apt-get", *opts, "update", "-qq"])
            if r.returncode != 0:
                raise SetupError(f"apt-get update ({suite}) failed: "
                                 f"{(r.stdout or '').strip().splitlines()[-1:]}")
            open(stamp, "w").close()
    r = run_tool(["apt-cache", *opts, "policy", pkg])
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
        have = sorted(run_tool(["apt-cache", "pkgnames", "linux-source-"]).stdout.split())
        extra = f"; this machine's apt sources list {', '.join(have)}" if have else ""
        raise SetupError(f"debian:{version}: faultline builds {debian_versions()}{extra}")
    pkg, where, suite = DEBIAN[version]
    debs = os.path.join(store.KCACHE, "debs")
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
        with step_progress.ticking(f"downloading {pkg}"):
            r = run_tool(["apt-get", *opts, "download", "-qq", f"{pkg}={ver}"], cwd=debs)
        have = sorted(glob.glob(os.path.join(debs, f"{pkg}_*.deb")))
        if r.returncode != 0 or not have:
            raise SetupError(f"apt-get download {pkg}={ver} failed: "
                             f"{(r.stdout or '').strip().splitlines()[-1:]}")
        deb = have[-1]
    ver = os.path.basename(deb)[len(pkg) + 1:].rsplit("_", 1)[0].replace("%3a", ":")
    ident = f"{pkg}={ver}"
    tree = os.path.join(store.KCACHE, "src", f"{pkg}_{ver}")
    t1 = time.monotonic()
    if not os.path.exists(os.path.join(tree, ".faultline-pristine")):
        with step_progress.ticking(f"extracting {pkg}"):
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
        r = run_tool(git + cmd)
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
        head = run_tool(["git", "-C", tree, "rev-parse", "HEAD"]).stdout.strip()
        diff = subprocess.run(["git", "-C", tree, "diff", "HEAD", "--binary"],
                              capture_output=True).stdout
        h.update(head.encode() + diff)
        # untracked sources count too (a new file added by hand)
        h.update(run_tool(["git", "-C", tree, "ls-files", "-o", "--exclude-standard"]).stdout.encode())
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
