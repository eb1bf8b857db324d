"""Progress of a long step (a QEMU or kernel build, a download) on one line.

On a terminal (the stream is a TTY) a status line updated in place (``\\r``)
and cleared at the end; in a log (CI, a pipe, a file) one line at most every
FAULTLINE_PROGRESS_INTERVAL seconds (30 by default), so a log shows the step
is alive without being flooded, then a last line.

What the line says comes from the step's output (``Tracker``): ninja's
``[N/M]`` status, kbuild's ``CC``/``LD``/... lines counted (against an
estimate when there is one), otherwise the elapsed time alone.  The shell
scripts use it through ``fl_build`` (scripts/lib.sh), which runs
``python3 -m faultline.host.step_progress LABEL LOG``: it follows the step's log
as it grows; the Python side uses ``following()`` around a step that
writes a log, or ``ticking()`` around one that does not."""

import argparse
import contextlib
import ctypes
import os
import re
import signal
import sys
import threading
import time

INTERVAL_ENV = "FAULTLINE_PROGRESS_INTERVAL"
DEFAULT_INTERVAL_S = 30.0
TTY_REPAINT_S = 0.5
NINJA = re.compile(r"^\[(\d+)/(\d+)\]")
# kbuild's quiet lines: "  CC      mm/swap.o", "  LD [M]  fs/x.ko".
KBUILD = re.compile(r"^  (CC|LD|AR|AS|HOSTCC|HOSTLD|CC \[M\]|LD \[M\]|OBJCOPY|GEN|"
                    r"BTF|BTF \[M\]|MODPOST|SYNC|UPD|CPP|ZSTD|GZIP|XZKERN|LDS|"
                    r"VDSO|RELOCS|MKPIGGY|CHK|INSTALL|DEPMOD|STRIP|SIGN)\s")


def elapsed(seconds):
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


def interval_s():
    try:
        return float(os.environ.get(INTERVAL_ENV, DEFAULT_INTERVAL_S))
    except ValueError:
        return DEFAULT_INTERVAL_S


class Tracker:
    """What a step's output says of its progress: ninja's last [N/M], or
    the number of kbuild lines (of ~@estimate), or nothing."""

    def __init__(self, estimate=None):
        self.estimate = estimate
        self.done = self.total = None
        self.lines = 0

    def feed(self, line):
        m = NINJA.match(line)
        if m:
            self.done, self.total = int(m.group(1)), int(m.group(2))
        elif KBUILD.match(line):
            self.lines += 1

    def status(self):
        if self.total:
            return f"[{self.done}/{self.total}] {100 * self.done // self.total}%"
        if self.lines:
            if self.estimate:
                pct = min(99, 100 * self.lines // self.estimate)
                return f"{self.lines} of ~{self.estimate} files, ~{pct}%"
            return f"{self.lines} files"
        return ""


class Progress:
    """One step's status line on @stream (stderr), labelled @label."""

    def __init__(self, label, stream=None, interval=None, tty=None, clock=time.monotonic):
        self.label = label
        self.stream = stream or sys.stderr
        if tty is None:
            try:
                tty = self.stream.isatty()
            except (AttributeError, ValueError):
                tty = False
        self.tty = tty
        self.interval = interval_s() if interval is None else interval
        self.clock = clock
        self.t0 = self.last = clock()
        self.shown = False
        self.lock = threading.Lock()

    def _line(self, text, now):
        return f"faultline: {self.label}: {text + ', ' if text else ''}{elapsed(now - self.t0)}"

    def update(self, text=""):
        """Show @text (and the elapsed time) if it is time to."""
        with self.lock:
            now = self.clock()
            if self.tty:
                if self.shown and now - self.last < TTY_REPAINT_S:
                    return
                self._write("\r\033[K" + self._line(text, now))
            else:
                if now - self.last < self.interval:
                    return
                self._write(self._line(text, now) + "\n")
            self.last = now
            self.shown = True

    def finish(self, text="", how="done"):
        """The end: the terminal's line is cleared; a log gets a last line."""
        with self.lock:
            now = self.clock()
            if self.tty:
                if self.shown:
                    self._write("\r\033[K")
            else:
                self._write(f"faultline: {self.label}: {how}{', ' + text if text else ''}"
                            f" after {elapsed(now - self.t0)}\n")
            self.shown = False

    def _write(self, s):
        try:
            self.stream.write(s)
            self.stream.flush()
        except (OSError, ValueError):
            pass


def _follow(path, progress, tracker, stop, poll_s=0.2, done_file=None):
    """Read @path as it grows into @tracker until @stop is set or
    @done_file exists (then to its end), updating @progress."""
    f = None
    buf = ""
    while True:
        if done_file and os.path.exists(done_file):
            stop.set()
        stopping = stop.is_set()
        if f is None and path and os.path.exists(path):
            f = open(path, errors="replace")
        chunk = f.read() if f else ""
        if chunk:
            buf += chunk
            *lines, buf = buf.split("\n")
            for line in lines:
                # ninja rewrites its status line on a terminal only.
                for part in line.split("\r"):
                    tracker.feed(part)
        if stopping:
            break
        progress.update(tracker.status())
        if not chunk:
            stop.wait(poll_s)
    if buf:
        tracker.feed(buf)
    if f:
        f.close()


@contextlib.contextmanager
def following(path, label, estimate=None, stream=None):
    """Around a step that writes its output to @path: a progress line from
    it (a thread follows the file).  Yields the Tracker."""
    progress = Progress(label, stream)
    tracker = Tracker(estimate)
    stop = threading.Event()
    t = threading.Thread(target=_follow, args=(path, progress, tracker, stop), daemon=True)
    t.start()
    how = "stopped"
    try:
        yield tracker
        how = "done"
    finally:
        stop.set()
        t.join()
        progress.finish(tracker.status(), how)


def ticking(label, stream=None):
    """Around a step with no log to read (a download): the phase and the
    elapsed time."""
    return following(None, label, stream=stream)


# ---------------------------------------------------------------- fl_build

PR_SET_PDEATHSIG = 1


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m faultline.host.step_progress",
                                 description="Follow a build log, show its progress on stderr "
                                             "until --done exists (SIGTERM, SIGHUP or the --parent's death: stopped).")
    ap.add_argument("--parent", type=int, help="end with this process (parent-death signal)")
    ap.add_argument("--estimate", type=int, help="kbuild lines expected")
    ap.add_argument("--start", type=float, help="when the step started (epoch seconds)")
    ap.add_argument("--done", help="the step is over once this file exists")
    ap.add_argument("label")
    ap.add_argument("log")
    a = ap.parse_args(argv)
    stop = threading.Event()
    how = ["done"]

    def on_signal(signum, frame):
        how[0] = "stopped"
        stop.set()
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_signal)
    if a.parent:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGHUP, 0, 0, 0)
        if os.getppid() != a.parent:            # the parent died before prctl
            return 0
    progress = Progress(a.label)
    if a.start:
        # Python's start-up is part of the step's time (seconds, on a loaded host).
        progress.t0 = progress.last = progress.t0 - max(0.0, time.time() - a.start)
    tracker = Tracker(a.estimate)
    _follow(a.log, progress, tracker, stop, done_file=a.done)
    progress.finish(tracker.status(), how[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
