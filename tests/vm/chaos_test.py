#!/usr/bin/python3
"""The chaos test (meson suite 'vm'): start `faultline run` of a short
scenario and stop the launcher with SIGTERM, SIGINT, SIGHUP or SIGKILL at a
seeded random point of a phase, then check what it left.

  chaos_test.py BACKEND [--runs N] [--seed S]     BACKEND: qemu, libvirt, lava

Phases, told from outside as a user would see them: build (the launcher's
build-qemu/build-guest child runs, no run directory yet), setup (run.json,
no console.log), boot (console.log, no KTAP yet), test (KTAP "# kernel"),
judge (the guest's FAULTLINE-EXIT line, no report.json yet).  N runs go
through the (signal, phase) pairs in a seeded order (qemu, 20: each pair
once; libvirt and lava: the phases with a machine, boot, test and judge).

After each stop:
- no process of the run (its command line names the run's --out directory,
  or it was the launcher's child: QEMU, lava-run; not the build scripts'
  cache checks) is alive 5 s after the signal (libvirt and SIGKILL: if
  libvirtd was still starting the domain, after the next launcher start);
- exit status 128 + the signal (SIGKILL: killed);
- the run directory's report.json says outcome "aborted" with the signal
  (SIGKILL: once the next launcher has started, `faultline list`, its
  sweep wrote it), and `faultline show` prints ABORTED; a stop in the build
  phase may come before any run directory exists;
- no scratch directory of the run is left (SIGKILL: after the next start);
- libvirt: no domain of the launcher (`virsh list --all`); lava: no
  lava-run download directory of the run's scratch.

Needs root (libvirtd, lava-run).  Exit 0 pass, 1 fail, 2 setup error.
"""

import argparse
import ctypes
import glob
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import FAULTLINE, OUT, TOP, exit_with, kernel_args, verdict  # noqa: E402

SCENARIO = os.path.join(TOP, "tests", "vm", "chaos", "short.toml")
SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGKILL]
PHASES = ["build", "setup", "boot", "test", "judge"]
# Random delay after a phase is seen, in seconds (boot and test last long
# enough for more; judge lasts about the guest's power-off).
DELAY = {"build": 0.2, "setup": 0.05, "boot": 2.0, "test": 3.0, "judge": 0.3}
PHASE_TIMEOUT_S = 900       # a loaded host boots slowly; the scenario's watchdog is 240 s
GONE_WITHIN_S = 5.0
SCRATCH_RE = re.compile(rb"/dev/shm/faultline-[A-Za-z0-9_]+")
LAVA_TMP = "/var/lib/lava/dispatcher/tmp"
LIBC = ctypes.CDLL(None)


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def stat(pid):
    """(ppid, start ticks, state) of @pid, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    fields = s[s.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[19]), fields[0]


def pids():
    return [int(p.split("/")[2]) for p in glob.glob("/proc/[0-9]*")]


def alive(pid, start):
    st = stat(pid)
    return st is not None and st[1] == start and st[2] not in ("Z", "X")


def children(pid, builds=True):
    """{pid: start ticks} of @pid's live children (not @builds: without the
    build-qemu/build-guest cache checks, which are no machine and finish
    on their own)."""
    out = {}
    for p in pids():
        st = stat(p)
        if st and st[0] == pid and st[2] not in ("Z", "X") and \
                (builds or b"/scripts/build-" not in cmdline(p)):
            out[p] = st[1]
    return out


def mentioning(text, exclude=()):
    needle = text.encode()
    return [p for p in pids() if p != os.getpid() and p not in exclude
            and needle in cmdline(p) and (stat(p) or (0, 0, "X"))[2] not in ("Z", "X")]


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def ktap_text(rundir):
    # lava: the KTAP stream is in LAVA's log until the run ends.
    return read(os.path.join(rundir, "ktap.log")) + read(os.path.join(rundir, "lava.log"))


def has_exit_line(text):
    return re.search(rb"(^|\n|\")FAULTLINE-EXIT \d", text) is not None


def rundirs(out):
    return sorted(d for d in glob.glob(os.path.join(out, "*")) if os.path.isdir(d))


def phase_now(launcher, out):
    """The phase a run is in, as seen from outside, or None (not started)."""
    dirs = rundirs(out)
    if not dirs:
        building = any(b"build-qemu" in cmdline(p) or b"build-guest" in cmdline(p)
                       for p in children(launcher))
        return "build" if building else None
    d = dirs[0]
    if os.path.exists(os.path.join(d, "report.json")):
        return "done"
    if not os.path.exists(os.path.join(d, "run.json")):
        return None
    if not os.path.exists(os.path.join(d, "console.log")):
        return "setup"
    text = ktap_text(d)
    if has_exit_line(text):
        return "judge"
    if b"# kernel " in text:
        return "test"
    return "boot"


def scratch_of(out, rundir):
    """Scratch directories of a run: named by owner.json, or in the run's files."""
    found = set()
    for d in glob.glob("/dev/shm/faultline-*"):
        try:
            with open(os.path.join(d, "owner.json")) as f:
                owner = json.load(f)
        except (OSError, ValueError):
            continue
        if (owner.get("rundir") or "").startswith(out + "/"):
            found.add(d)
    if rundir:
        for name in ("cmdline", "domain.xml", "lava-job.yaml", "run.json"):
            for m in SCRATCH_RE.findall(read(os.path.join(rundir, name))):
                found.add(m.decode())
    return found


def start(backend, out, log):
    me = os.getpid()

    def preexec():
        # Default dispositions (a test harness may ignore SIGINT or SIGHUP),
        # and the launcher stops in order should this test die
        # (PR_SET_PDEATHSIG).
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        LIBC.prctl(1, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != me:
            os._exit(1)
    return subprocess.Popen([FAULTLINE, "run", SCENARIO, "--backend", backend, "--out", out,
                             "--quiet"] + kernel_args(),
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=preexec)


def wait_phase(proc, out, want, seen_children):
    """Poll until the run reaches @want (or a later phase); returns the phase
    seen.  Records the launcher's children (QEMU, lava-run) as it goes."""
    order = PHASES + ["done"]
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        ph = phase_now(proc.pid, out)
        if ph is not None and order.index(ph) >= order.index(want):
            return ph
        seen_children.update(children(proc.pid, builds=False))
        time.sleep(0.01)
    return None


def judged_status(out):
    dirs = rundirs(out)
    try:
        with open(os.path.join(dirs[0], "report.json")) as f:
            return json.load(f).get("status")
    except (IndexError, OSError, ValueError):
        return None


def domains_of(pid):
    r = subprocess.run(["virsh", "-c", "qemu:///system", "list", "--all", "--name"],
                       capture_output=True, text=True)
    return [n for n in r.stdout.split() if n.startswith("faultline-") and f"-{pid}-" in n]


def one(i, backend, sig, want, delay, base):
    """Run i: start, stop with @sig in phase @want after @delay; a row of
    facts and a list of problems."""
    out = os.path.join(base, f"{i:02d}")
    os.makedirs(out)
    row = {"run": i, "signal": sig.name, "planned": want}
    problems = []
    with open(out + ".log", "w") as log:
        proc = start(backend, out, log)
        kids = {}
        seen = wait_phase(proc, out, want, kids)
        if seen is None:
            proc.kill()
            proc.wait()
            return row, [f"run {i}: the launcher never reached {want} (exit {proc.returncode}; "
                         f"{out}.log)"]
        # (The launcher's children were recorded while waiting: another
        # scan of /proc here would take the setup phase's few tenths of a
        # second on a loaded host.)
        time.sleep(delay)
        dirs = rundirs(out)
        judged = bool(dirs) and os.path.exists(os.path.join(dirs[0], "report.json"))
        row["at"] = phase_now(proc.pid, out) or seen
        t_sig = time.monotonic()
        if proc.poll() is not None:
            row["verdict"] = "finished before the signal"
            return row, []
        proc.send_signal(sig)
        # No process of the run within 5 s of the signal.
        left = None
        while time.monotonic() < t_sig + GONE_WITHIN_S:
            left = mentioning(out, exclude=(proc.pid,)) + \
                [p for p, st in kids.items() if alive(p, st)]
            if not left:
                break
            time.sleep(0.05)
        row["gone_s"] = round(time.monotonic() - t_sig, 2)
        # libvirt: a SIGKILL while libvirtd still starts the domain (its
        # autodestroy is armed only when the start ends) leaves it running;
        # the next launcher start destroys it (its owner is gone).
        deferred = left if backend == "libvirt" and sig == signal.SIGKILL else []
        if left and not deferred:
            problems.append(f"run {i} ({sig.name} in {row['at']}): processes of the run alive "
                            f"{GONE_WITHIN_S:.0f}s after the signal: "
                            + ", ".join(f"{p} {cmdline(p)[:80]!r}" for p in sorted(set(left))))
            for p in set(left):         # a failed run must not load the host
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            problems.append(f"run {i}: the launcher did not exit within 120 s of {sig.name}")
    row["exit"] = proc.returncode
    want_exit = {-signal.SIGKILL if sig == signal.SIGKILL else 128 + sig}
    if judged and sig != signal.SIGKILL:
        # Signalled on its way out: 128+N, or (the signal came after the
        # launcher blocked it for its exit) the status its report gives.
        want_exit.add(judged_status(out))
    if proc.returncode not in want_exit:
        problems.append(f"run {i} ({sig.name}): exit {proc.returncode}, expected "
                        + " or ".join(str(w) for w in sorted(want_exit, key=str)))
    text = read(out + ".log").decode(errors="replace")
    if "Traceback" in text:
        problems.append(f"run {i} ({sig.name}): a traceback ({out}.log)")
    dirs = rundirs(out)
    rundir = dirs[0] if dirs else None
    scratch = scratch_of(out, rundir)
    if sig == signal.SIGKILL:
        # The next launcher start cleans up (and writes the report).
        subprocess.run([FAULTLINE, "list"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=120)
    if deferred:
        row["gone_s"] = "next start"
        deadline = time.monotonic() + GONE_WITHIN_S
        while time.monotonic() < deadline:
            left = mentioning(out) + [p for p, st in kids.items() if alive(p, st)]
            if not left:
                break
            time.sleep(0.05)
        if left:
            problems.append(f"run {i} ({sig.name} in {row['at']}): processes of the run alive "
                            "after the next launcher start: "
                            + ", ".join(f"{p} {cmdline(p)[:80]!r}" for p in sorted(set(left))))
            for p in set(left):
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
    if backend == "libvirt":
        # libvirtd destroys an AUTODESTROY domain when its connection closes
        # (SIGKILL: perhaps only the next launcher start, see above).
        deadline = time.monotonic() + GONE_WITHIN_S
        while domains_of(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        doms = domains_of(proc.pid)
        if doms:
            problems.append(f"run {i} ({sig.name}): libvirt domains left: {doms}")
            for d in doms:
                subprocess.run(["virsh", "-c", "qemu:///system", "destroy", d],
                               capture_output=True)
    left = sorted(d for d in scratch if os.path.exists(d))
    if left:
        problems.append(f"run {i} ({sig.name}): scratch left: {left}")
    lava_tmp = [t for d in scratch for t in glob.glob(os.path.join(
        LAVA_TMP, os.path.basename(d) + "-*"))]
    if lava_tmp:
        problems.append(f"run {i} ({sig.name}): lava-run download directories left: {lava_tmp}")
    for d in left + lava_tmp:
        shutil.rmtree(d, ignore_errors=True)
    if rundir is None:
        row["report"] = "no run directory"
        if row["at"] != "build":
            problems.append(f"run {i} ({sig.name} in {row['at']}): no run directory")
        return row, problems
    try:
        with open(os.path.join(rundir, "report.json")) as f:
            rep = json.load(f)
    except (OSError, ValueError) as e:
        return row, problems + [f"run {i} ({sig.name}): no report.json in {rundir} ({e})"]
    row["report"] = f"{rep.get('outcome')}: {rep.get('reason')}"
    if judged:
        row["verdict"] = "judged before the signal"     # its report stands
        return row, problems
    want_status = 128 + signal.SIGKILL if sig == signal.SIGKILL else 128 + sig
    if rep.get("outcome") != "aborted" or rep.get("status") != want_status:
        problems.append(f"run {i} ({sig.name}): report.json says {rep.get('outcome')} "
                        f"(status {rep.get('status')}): {rep.get('reason')}")
    elif sig != signal.SIGKILL and (rep.get("signal") != sig.name
                                    or sig.name not in rep.get("reason", "")):
        problems.append(f"run {i} ({sig.name}): report.json names signal "
                        f"{rep.get('signal')!r}: {rep.get('reason')}")
    elif sig == signal.SIGKILL and "SIGKILL" not in rep.get("reason", ""):
        problems.append(f"run {i}: the sweep's report.json: {rep.get('reason')}")
    shown = subprocess.run([FAULTLINE, "show", rundir], capture_output=True, text=True)
    if "ABORTED (aborted)" not in shown.stdout:
        problems.append(f"run {i} ({sig.name}): `faultline show` does not say ABORTED: "
                        f"{shown.stdout.strip()[-200:]} {shown.stderr.strip()[-200:]}")
    return row, problems


def plan(runs, rng, phases):
    """(signal, phase, delay) for each run: the (signal, phase) pairs in a
    seeded order, repeated or cut to @runs (fewer runs: every signal still
    comes first)."""
    pairs = [(s, p) for p in phases for s in SIGNALS]
    rng.shuffle(pairs)
    # Each signal within the first four runs.
    firsts = [next(x for x in pairs if x[0] == s) for s in SIGNALS]
    pairs = firsts + [x for x in pairs if x not in firsts]
    return [(s, p, round(rng.uniform(0, DELAY[p]), 3))
            for s, p in (pairs * (runs // len(pairs) + 1))[:runs]]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("backend", choices=["qemu", "libvirt", "lava"])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    rng = random.Random(f"{args.backend}-{args.seed}")
    os.makedirs(OUT, exist_ok=True)
    base = os.path.join(OUT, f"chaos-{args.backend}-{time.strftime('%Y%m%d-%H%M%S')}-"
                        f"{os.getpid()}")
    print(f"chaos: {args.runs} runs of {SCENARIO} on {args.backend}, seed {args.seed}, in {base}")
    problems, rows = [], []
    t0 = time.monotonic()
    # Build and setup come before any machine: the same on every backend.
    phases = PHASES if args.backend == "qemu" else ["boot", "test", "judge"]
    runs = plan(args.runs, rng, phases)
    if args.backend != "qemu":
        # Its SIGKILL in the test phase: the machine (lava: lava-run, its
        # QEMU wrapper and QEMU) surely runs, the parent-death chain is tried.
        runs = [(s, "test" if s == signal.SIGKILL else p, d) for s, p, d in runs]
    for i, (sig, want, delay) in enumerate(runs):
        row, probs = one(i, args.backend, sig, want, delay, base)
        row["delay"] = delay
        rows.append(row)
        problems += probs
        print(f"  run {i:2}: {sig.name:7} planned {want:5} +{delay:.2f}s, at {row.get('at', '?'):5}"
              f" exit {row.get('exit', '?')!s:4} gone {row.get('gone_s', '-')!s:5}s  "
              f"{row.get('verdict') or row.get('report', '')}"
              + ("  PROBLEM" if probs else ""), flush=True)
    hit = sorted({r.get("at") for r in rows if r.get("at")})
    print(f"chaos: phases hit {hit}; slowest cleanup "
          f"{max((r.get('gone_s', 0) for r in rows), default=0)}s; "
          f"{time.monotonic() - t0:.0f}s")
    return verdict(f"chaos {args.backend}", problems)


if __name__ == "__main__":
    exit_with("chaos test", main)
