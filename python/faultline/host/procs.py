"""Child processes: started so that they die with the launcher (the
parent-death signal), stopped in order when the launcher is stopped, and
found by what their command line names (a run's scratch directory)."""

import ctypes
import glob
import os
import signal
import subprocess
import time

from faultline.host.stop import Aborted

PR_SET_PDEATHSIG = 1


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


# Runs "$@" in the background of a shell that leads its own process group,
# and passes a TERM on to the whole group.  make's recipes run sub-makes
# through `sh -c`, which does not pass a TERM on: a stopped top-level make
# leaves its sub-makes building, orphaned (seen: a kernel build went on
# after its launcher was stopped).
GROUP_WRAPPER = 'trap "trap - TERM; kill -TERM 0" TERM; "$@" & wait $!'


def run_captured(cmd, group=False, **kwargs):
    """run_child() that returns a subprocess.CompletedProcess with what the
    child wrote to pipes (stdout=/stderr= PIPE, as subprocess.run).  With
    @group, a stop (or the launcher's death) ends the child's whole process
    tree, not only the child."""
    if group:
        cmd = ["sh", "-c", GROUP_WRAPPER, "sh", *cmd]
        kwargs["process_group"] = 0
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
