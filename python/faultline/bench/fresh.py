"""bench's fresh group: a new user's first `scripts/faultline run`, from a
clean clone with an empty faultline cache and no ccache, to its PASS; then
the same command again in that clone, which must start from the cache.

What stays from this machine: the Debian packages scripts/setup installed
and apt's own download cache.  A round clones the repository's committed
HEAD (uncommitted edits are not measured: the note names the commit)."""

import os
import re
import shutil
import subprocess
import tempfile
import time

from faultline import TOP
from faultline.bench.report import Row
from faultline.errors import SetupError
from faultline.judge.stats import mean

FRESH_TARGET_S = 300.0          # issue 44: a fresh `run` to its PASS in 5 minutes
RUN_TIMEOUT_S = 3600
# The launcher's last lines (build/builds.py and cli): phase times.
PHASES = re.compile(r"^faultline: phases: build ([\d.]+)s, run ([\d.]+)s, total ([\d.]+)s$",
                    re.M)
BUILD = re.compile(r"^faultline: build: (?:setup for qemu ([\d.]+)s, )?qemu ([\d.]+)s, "
                   r"(?:setup \+ )?guest ([\d.]+)s", re.M)


def fresh_env(cache):
    return dict(os.environ, FAULTLINE_CACHE=cache, FAULTLINE_CCACHE="0", CCACHE_DISABLE="1")


def parse_phases(text):
    """{build, run, total, qemu, guest, setup} seconds of a run's output
    (the keys it printed); SetupError when it printed no phase line."""
    m = PHASES.search(text)
    if not m:
        raise SetupError("the run printed no `faultline: phases:` line")
    out = {"build": float(m.group(1)), "run": float(m.group(2)), "total": float(m.group(3))}
    b = BUILD.search(text)
    if b:
        if b.group(1):
            out["setup"] = float(b.group(1))
        out["qemu"], out["guest"] = float(b.group(2)), float(b.group(3))
    return out


def one_round(n, out, log):
    """A fresh run and the warm run after it: [the clone's commit,
    (fresh phases, wall s), (warm phases, wall s)]."""
    work = tempfile.mkdtemp(prefix=f"bench-fresh-{n}-", dir=out)
    clone, cache = os.path.join(work, "clone"), os.path.join(work, "cache")
    try:
        r = subprocess.run(["git", "clone", "-q", TOP, clone], capture_output=True, text=True)
        if r.returncode:
            raise SetupError(f"git clone {TOP}: {r.stderr.strip()}")
        res = [_commit(clone)]
        for what in ("fresh", "warm"):
            t = time.monotonic()
            log_path = os.path.join(out, f"bench-fresh-{n}-{what}.log")
            with open(log_path, "w") as f:
                p = subprocess.run([os.path.join(clone, "scripts", "faultline"), "run"],
                                   cwd=clone, env=fresh_env(cache), stdout=f,
                                   stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S)
            wall = time.monotonic() - t
            with open(log_path) as f:
                text = f.read()
            if p.returncode != 0:
                raise SetupError(f"round {n}: the {what} run exited {p.returncode} "
                                 f"(its output: {log_path})")
            phases = parse_phases(text)
            log(f"fresh: round {n} {what}: PASS after {wall:.1f} s "
                + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items()))
            res.append((phases, wall))
        return res
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _commit(clone):
    r = subprocess.run(["git", "-C", clone, "rev-parse", "--short", "HEAD"],
                       capture_output=True, text=True)
    return r.stdout.strip() or "?"


def bench_rows(rounds, out, log):
    """The fresh row: ([Row], samples).  Each round must be at most
    FRESH_TARGET_S from the clone to the PASS; the baseline is the warm run
    of the same clone and cache."""
    fresh, warm, commits = [], [], []
    for n in range(1, rounds + 1):
        commit, (fp, fw), (wp, ww) = one_round(n, out, log)
        commits.append(commit)
        fresh.append((fp, fw))
        warm.append((wp, ww))
    walls = [w for _, w in fresh]
    worst = max(walls)
    per = "; ".join(f"{w:.0f} s (QEMU {p.get('qemu', 0):.0f} s, guest {p.get('guest', 0):.0f} s "
                    f"beside it, run {p['run']:.0f} s)" for p, w in fresh)
    note = (f"commit {', '.join(dict.fromkeys(commits))}; fresh runs: {per}; warm runs: "
            + ", ".join(f"{w:.0f} s" for _, w in warm))
    row = Row("fresh", "first run to PASS from a clean clone and empty caches, vs the "
              "same run again", mean(walls), mean([w for _, w in warm]), "s",
              mean(walls) / mean([w for _, w in warm]), n=rounds,
              target=f"<= {FRESH_TARGET_S:g} s each", ok=worst <= FRESH_TARGET_S, note=note)
    return [row], {"fresh": fresh, "warm": warm, "commits": commits}
