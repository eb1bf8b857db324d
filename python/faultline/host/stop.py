"""Stopping: a launcher told to stop by a signal.

SIGTERM, SIGINT and SIGHUP (install(), called by the CLI's main) raise
Aborted in the main thread; worker threads (matrix, minimize --jobs) see
the request at their next check().  Each run then unwinds through its
machine's cleanup and its scratch removal; what an interrupted cleanup
left is kept here (the machines entered, the scratch directories made)
for run.aborted.finish(), which main() calls before it exits 128 + the
signal's number.
"""

import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from faultline.host.messages import say

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


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


def note_scratch(d, live=True):
    """Scratch directory @d was made (@live) or removed."""
    with _lock:
        (_scratch.add if live else _scratch.discard)(d)


def note_reported(rundir):
    """@rundir got an "aborted" report.json."""
    with _lock:
        _reported.append(rundir)


def leftovers():
    """(machines, scratch directories, reported run directories) not yet
    cleaned up or told: what finish() deals with."""
    with _lock:
        return list(_machines), list(_scratch), list(_reported)


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
