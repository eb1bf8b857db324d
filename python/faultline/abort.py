"""Stopping: a launcher told to stop by a signal, and what a launcher that
could not stop left behind.

SIGTERM, SIGINT and SIGHUP (install(), called by the CLI's main) raise
Aborted in the main thread; worker threads (matrix, minimize --jobs) see
the request at their next check().  Each run then unwinds through its
machine's cleanup and its scratch removal and leaves report.json with
outcome "aborted" (tracks_run); main() cleans up what an interrupted
cleanup left (finish()) and exits 128 + the signal's number.

A launcher killed outright (SIGKILL) runs none of that.  Its QEMU dies with
it (die_with_parent(), the parent-death signal), libvirt destroys its
AUTODESTROY domain when the connection drops, and the next launcher to
start removes the rest (sweep()): every scratch directory names its owner
(pid, start time, boot), and only a directory whose owner is gone is
touched.
"""

import ctypes
import functools
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
PREFIX = "faultline-"
OWNER = "owner.json"
# Backends record here what outlives the launcher's process (libvirt.py).
LIBVIRT_RECORD = "libvirt-domain.json"
PROCESSES = "processes.json"
# lava-run's download directories: <prefix><job id>, prefix = scratch name + "-".
LAVA_TMP = "/var/lib/lava/dispatcher/tmp"
# Status of a run whose launcher died without a word (SIGKILL or a crash):
# 128 + SIGKILL, the likelier of the two (the signal itself is not known).
KILLED_STATUS = 128 + signal.SIGKILL
PR_SET_PDEATHSIG = 1


class Aborted(BaseException):
    """The launcher was told to stop.  A BaseException, like
    KeyboardInterrupt: `except Exception` must not swallow it."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self):
        return signal.Signals(self.signum).name

    def __str__(self):
        return f"aborted by {self.name}"


_requested = threading.Event()
_signum = None
_lock = threading.Lock()
_machines = set()       # entered machines whose cleanup has not completed
_scratch = set()        # scratch directories not yet removed
_reported = []          # run directories with an "aborted" report.json


# ---------------------------------------------------------------- signals

def install():
    """Turn SIGTERM, SIGINT and SIGHUP into Aborted (main thread).  A signal
    the launcher's parent ignores (nohup's SIGHUP) stays ignored."""
    for sig in SIGNALS:
        if signal.getsignal(sig) != signal.SIG_IGN:
            signal.signal(sig, _on_signal)
    sys.unraisablehook = _unraisable


def _unraisable(u, default=sys.unraisablehook):
    # Aborted raised where Python ignores exceptions (an at-fork hook of
    # Popen, a __del__) is not lost: the next check() raises it again.
    if not isinstance(u.exc_value, Aborted):
        default(u)


def _on_signal(signum, frame):
    global _signum
    if _requested.is_set():
        return          # already stopping: let the cleanup finish
    _signum = signum
    _requested.set()
    raise Aborted(signum)


def check():
    """Raise Aborted when the launcher was told to stop: worker threads call
    this where they wait (signals reach only the main thread), the main
    thread where an Aborted may have been swallowed (_unraisable)."""
    if _requested.is_set():
        raise Aborted(_signum)


def settle(status):
    """The command is done and its report written: block the stop signals
    for the rest of the exit (the interpreter's teardown restores their
    default action, which would kill the launcher mid-exit).  A signal that
    came in the meantime still makes the exit status 128+N; the report
    stands, since nothing was left to stop."""
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    check()
    pending = [s for s in SIGNALS if s in signal.sigpending()]
    if pending:
        from .build import say
        sig = signal.Signals(pending[0])
        say(f"{sig.name} after the run ended: its report stands")
        return 128 + sig
    return status


class Executor(ThreadPoolExecutor):
    """The thread pool of runs (matrix, minimize): left by an exception
    (Aborted), it cancels the runs not yet started instead of starting
    them, and waits for the running ones, which stop at their next check()."""

    def __exit__(self, exc_type, exc, tb):
        self.shutdown(wait=True, cancel_futures=exc_type is not None)
        return False


def register(machine):
    check()
    with _lock:
        _machines.add(machine)


def unregister(machine):
    with _lock:
        _machines.discard(machine)


def finish(e):
    """main()'s end after Aborted @e: every thread has unwound; clean up
    what an interrupted cleanup left.  Returns the exit status."""
    with _lock:
        machines, scratch = list(_machines), list(_scratch)
    for m in machines:
        try:
            m.cleanup()
        except Exception:  # noqa: BLE001 - the next one must still be cleaned up
            pass
        unregister(m)
    for d in scratch:
        # A run stopped before its own handler could write its report
        # (between claiming its directory and starting it): say so here.
        rundir = unreported_rundir(read_owner(d))
        if rundir:
            write_aborted(rundir, f"aborted by {e.name} during {phase(rundir)}",
                          128 + e.signum, e.name)
        remove_scratch(d)
    from .build import say
    with _lock:
        where = "; report.json says so in " + ", ".join(_reported) if _reported else ""
    say(f"aborted by {e.name}{where}")
    return 128 + e.signum


# ---------------------------------------------------------------- processes

_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                   ctypes.c_ulong]


def die_with_parent(sig=signal.SIGKILL):
    """A preexec_fn: the child gets @sig when its parent dies, SIGKILL
    included.  The kernel sends it when the *thread* that forked exits, so
    only a thread that outlives the child may start it (the main thread, or
    the pool thread that runs the whole run)."""
    parent = os.getpid()

    def preexec():
        _prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:      # the parent died before prctl
            os.kill(os.getpid(), sig)
    return preexec


def _stop_child(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def run_child(cmd, **kwargs):
    """subprocess.run() for a child that stops its own children in order on
    SIGTERM (meson test, make): a stopped launcher passes SIGTERM on and
    waits, and a killed one leaves it SIGTERM (its parent-death signal).
    Returns the exit status."""
    p = subprocess.Popen(cmd, preexec_fn=die_with_parent(signal.SIGTERM), **kwargs)
    try:
        return p.wait()
    except Aborted:
        _stop_child(p)
        raise


def run_captured(cmd, **kwargs):
    """run_child() that returns a subprocess.CompletedProcess with what the
    child wrote to pipes (stdout=/stderr= PIPE, as subprocess.run)."""
    p = subprocess.Popen(cmd, preexec_fn=die_with_parent(signal.SIGTERM), **kwargs)
    try:
        out, err = p.communicate()
    except Aborted:
        _stop_child(p)
        raise
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def _boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


def start_ticks(pid):
    """(start time in clock ticks after boot, state) of process @pid, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[19]), fields[0]


def identity(pid=None):
    """Who owns something: pid, start time and boot (pid reuse, reboots)."""
    pid = pid or os.getpid()
    st = start_ticks(pid)
    return {"pid": pid, "start": st[0] if st else None, "boot": _boot_id()}


def alive(owner):
    """Whether the process identity() described as @owner still runs (a
    zombie does not)."""
    try:
        pid = int(owner["pid"])
    except (KeyError, TypeError, ValueError):
        return False
    if owner.get("boot") != _boot_id():
        return False
    st = start_ticks(pid)
    return st is not None and st[0] == owner.get("start") and st[1] not in ("Z", "X")


def processes_mentioning(text):
    """Pids (not this process) whose command line contains @text."""
    needle = text.encode()
    pids = []
    for p in glob.glob("/proc/[0-9]*/cmdline"):
        pid = int(p.split("/")[2])
        if pid == os.getpid():
            continue
        try:
            with open(p, "rb") as f:
                if needle in f.read():
                    pids.append(pid)
        except OSError:
            continue
    return pids


def kill_mentioning(text, timeout_s=5.0):
    """SIGKILL every process whose command line contains @text (a scratch
    path: unique to one run) and wait until they are gone."""
    deadline = time.monotonic() + timeout_s
    while True:
        pids = processes_mentioning(text)
        live = [p for p in pids if (start_ticks(p) or (0, "X"))[1] not in ("Z", "X")]
        if not live or time.monotonic() > deadline:
            return
        for pid in live:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)


# ---------------------------------------------------------------- scratch

def scratch_bases():
    # RAM first: unlinking a disk image with gigabytes in writeback stalled
    # runs for minutes (measured), and a short path keeps a socket in it
    # under the 108-byte sun_path limit.
    return ["/dev/shm"] if os.access("/dev/shm", os.W_OK) else [tempfile.gettempdir()]


def new_scratch(rundir=None):
    """A scratch directory for one run, with owner.json: this process and
    the run directory (sweep() writes that run's report if nobody did)."""
    d = tempfile.mkdtemp(prefix=PREFIX, dir=scratch_bases()[0])
    with _lock:
        _scratch.add(d)
    with open(os.path.join(d, OWNER), "w") as f:
        json.dump(dict(identity(), rundir=os.path.abspath(rundir) if rundir else None), f)
    return d


def claim(d, rundir):
    """Name @rundir (it may not exist yet) in scratch @d's owner.json: the
    run directory it will hold, for sweep()."""
    owner = read_owner(d) or identity()
    owner["rundir"] = os.path.abspath(rundir)
    tmp = os.path.join(d, OWNER + ".tmp")
    with open(tmp, "w") as f:
        json.dump(owner, f)
    os.replace(tmp, os.path.join(d, OWNER))


def empty_scratch(d):
    """Remove what @d holds but its owner.json: the run's disk and sockets
    go, and the directory stays the sign that its run has no report yet
    (sweep() writes one should this launcher die before it does)."""
    for name in os.listdir(d) if os.path.isdir(d) else ():
        if name != OWNER:
            path = os.path.join(d, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    pass


def remove_scratch(d):
    shutil.rmtree(d, ignore_errors=True)
    with _lock:
        _scratch.discard(d)


def note_process(scratch, pid):
    """Record child @pid of this launcher in @scratch, for a child that does
    not name the scratch on its command line (lava-run sets its own process
    title): sweep() kills it should this launcher die first."""
    path = os.path.join(scratch, PROCESSES)
    procs = _read_json(path) or []
    with open(path + ".tmp", "w") as f:
        json.dump(procs + [identity(pid)], f)
    os.replace(path + ".tmp", path)


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_owner(d):
    owner = _read_json(os.path.join(d, OWNER))
    return owner if isinstance(owner, dict) else None


def unreported_rundir(owner):
    """The run directory @owner (owner.json's content) claimed, when it
    exists without a report.json: the run ended before writing one."""
    rundir = (owner or {}).get("rundir")
    if rundir and os.path.isdir(rundir) and \
            not os.path.exists(os.path.join(rundir, "report.json")):
        return rundir
    return None


def sweep():
    """At launcher start: clean up after launchers that died without doing
    it.  For each scratch directory whose owner is gone: kill what still
    runs from it, destroy its libvirt domain, remove lava-run's download
    directory, write its run's report.json if there is none, remove it.
    A directory without owner.json is left alone (its owner is unknown).
    Returns the directories removed."""
    removed = []
    for base in {*scratch_bases(), tempfile.gettempdir()}:
        for d in sorted(glob.glob(os.path.join(base, PREFIX + "*"))):
            if os.path.islink(d) or not os.path.isdir(d):
                continue
            owner = read_owner(d)
            if owner is None or alive(owner):
                continue
            _clean_dead(d, owner)
            removed.append(d)
    return removed


def _clean_dead(d, owner):
    for p in _read_json(os.path.join(d, PROCESSES)) or []:
        if isinstance(p, dict) and alive(p):
            try:
                os.kill(p["pid"], signal.SIGKILL)
            except OSError:
                pass
    kill_mentioning(d)
    record = os.path.join(d, LIBVIRT_RECORD)
    if os.path.exists(record):
        try:
            from . import libvirt
            libvirt.destroy_orphans_of(record)
        except Exception:  # noqa: BLE001 - libvirt gone too: nothing to destroy
            pass
    for t in glob.glob(os.path.join(LAVA_TMP, os.path.basename(d) + "-*")):
        shutil.rmtree(t, ignore_errors=True)
    rundir = unreported_rundir(owner)
    if rundir:
        reason = (f"the launcher (pid {owner.get('pid')}) ended without cleaning up "
                  f"(killed by SIGKILL, or crashed) during {phase(rundir)}; "
                  f"cleaned up by the next launcher (pid {os.getpid()})")
        write_aborted(rundir, reason, KILLED_STATUS, None)
    shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------- reports

def phase(rundir):
    """How far a run got, from its run directory: setup (inputs), boot (the
    machine started), test (the guest's KTAP began), judge (the guest
    reported its exit)."""
    if not os.path.exists(os.path.join(rundir, "console.log")):
        return "setup"
    text = ""
    # lava: the KTAP stream is in LAVA's log until the run ends.
    for name in ("ktap.log", "lava.log"):
        try:
            with open(os.path.join(rundir, name), errors="replace") as f:
                text += f.read()
        except OSError:
            pass
    if any(ln.startswith("FAULTLINE-EXIT ") or '"FAULTLINE-EXIT ' in ln
           for ln in text.splitlines()):
        return "judge"
    return "test" if "# kernel " in text else "boot"


def write_aborted(rundir, reason, status, signame, elapsed_s=None, sc=None, seed=None):
    """report.json of a run that did not finish (outcome "aborted").  The
    scenario and seed from @sc and @seed, else from the run directory;
    @elapsed_s None: from run.json's start to the run's last write."""
    from . import scenario
    from .report import Report
    try:
        with open(os.path.join(rundir, "run.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        meta = {}
    if sc is None:
        try:
            sc = scenario.load(os.path.join(rundir, "scenario.toml"))
        except Exception:  # noqa: BLE001 - the report is written without it
            pass
    if elapsed_s is None:
        last = max((os.path.getmtime(p) for p in glob.glob(os.path.join(rundir, "*"))),
                   default=0)
        elapsed_s = max(0.0, last - meta.get("start_time", last))
    r = Report(scenario=meta.get("scenario") or (sc.name if sc else "?"),
               seed=seed if seed is not None else meta.get("seed", 0), status=status,
               outcome="aborted", reason=reason, elapsed_s=round(elapsed_s, 1),
               device=sc.device.kind if sc else "",
               completion=sc.device.completion if sc else "",
               deterministic=bool(meta.get("deterministic")), signal=signame)
    tmp = os.path.join(rundir, "report.json.tmp")
    try:
        with open(tmp, "w") as f:
            json.dump(r.to_json(), f, indent=1)
        os.replace(tmp, os.path.join(rundir, "report.json"))
    except OSError:
        return
    with _lock:
        _reported.append(rundir)


def tracks_run(fn):
    """Decorates runner.one_run(sc, seed, opts, builds, rundir, ...): a run
    stopped by Aborted leaves report.json saying so, with the signal and
    the phase it reached."""
    @functools.wraps(fn)
    def one_run(sc, seed, opts, builds, rundir, *args, **kwargs):
        t0 = time.monotonic()
        try:
            check()
            return fn(sc, seed, opts, builds, rundir, *args, **kwargs)
        except Aborted as e:
            elapsed = time.monotonic() - t0
            reason = f"aborted by {e.name} during {phase(rundir)} ({elapsed:.1f}s into the run)"
            write_aborted(rundir, reason, 128 + e.signum, e.name, elapsed, sc, seed)
            raise
    return one_run
