"""The watch loop: one for every backend, and what came of it (WatchResult).

watch() follows a started machine until the guest reports FAULTLINE-EXIT,
the kernel panics, the machine ends or the watchdog fires.  It reads the
guest's streams incrementally (vm.logtail.LogTail), polls rule hits and
sends the scenario's [[qmp]] actions over QMP (machines that have it), asks
a hung guest for a sysrq task dump, waits for the power-off and reads the
injector's final statistics, and returns a WatchResult.

How a machine's guest is read is a GuestView: the serial files and QMP of
the machine (GuestView), or a LAVA job's log (run/lava_watch.py).  What
else wants to see the streams as they grow subscribes as an observer: the
progress line (run/progress.py), bench's CPU marks (bench/bench.py).
"""

import os
import time
from dataclasses import dataclass, field

from faultline.host import stop
from faultline.vm.logtail import LogTail
from faultline.vm.qmp import QmpError

POLL_S = 0.2
HITS_EVERY_S = 1.0
EXIT_PREFIX = "FAULTLINE-EXIT "


@dataclass
class WatchResult:
    """What a watched machine came to."""
    hang: bool = False
    guest_exit: int | None = None   # the FAULTLINE-EXIT status
    faults: dict | None = None      # x-fault-query-stats at the end
    task_dump: int | None = None    # console offset where a sysrq-t dump starts
    stderr: str = ""                # QEMU/backend diagnostics, one line per problem
    backend: str = ""
    backend_info: dict = field(default_factory=dict)
    elapsed_s: float = 0.0          # time spent watching
    # One per [[qmp]] action: when, execute, at_s (None: never sent),
    # error (None: QMP said ok).
    actions: list = field(default_factory=list)


def rule_hits(stats):
    """{rule name: hits} from x-fault-query-stats."""
    return {r["name"]: r["hits"] for r in stats.get("rules", [])}


def guest_exit(lines):
    """The status of the first FAULTLINE-EXIT line among @lines, or None."""
    for ln in lines:
        if ln.startswith(EXIT_PREFIX):
            try:
                return int(ln.split()[1])
            except (IndexError, ValueError):
                pass
    return None


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class GuestView:
    """How the watch loop reads a machine's guest: its serial files in the
    run directory and its QMP.  A machine run elsewhere (LAVA) has its own
    view (run/lava_watch.py)."""

    def __init__(self, m):
        self.m = m

    @property
    def live_qmp(self):
        """Rule hits, [[qmp]] actions and final statistics over m.qmp()."""
        return self.m.has_qmp

    def begin(self, timeout_s):
        """Called as the watch starts."""

    def streams(self):
        """The guest's KTAP (ttyS1) and console (ttyS0) streams, as LogTails."""
        rundir = self.m.spec.rundir
        return {"ktap": LogTail(os.path.join(rundir, "ktap.log")),
                "console": LogTail(os.path.join(rundir, "console.log"))}

    def watchdog_armed(self):
        """Whether the guest's watchdog counts yet (it counts from here)."""
        return True

    def give_up_at(self, t0, timeout_s):
        """A monotonic time to stop watching regardless, or None."""
        return None

    def request_task_dump(self):
        """Ask the hung guest for its tasks: alt-sysrq-7 first (the task
        lines are KERN_INFO), then alt-sysrq-t; False when it cannot be
        asked."""
        try:
            for key in ("7", "t"):
                self.m.qmp("send-key", keys=[{"type": "qcode", "data": k}
                                             for k in ("alt", "sysrq", key)])
                time.sleep(0.3)
        except QmpError:
            return False
        return True

    def finish(self, w, hang):
        """Complete WatchResult @w once the watch ended (@hang: the
        watchdog fired): wait for the guest's power-off after its exit
        line, so the console and the final statistics are complete (and
        the same in every deterministic run), then read the statistics."""
        m, spec = self.m, self.m.spec
        w.hang = hang
        if w.guest_exit is not None and m.running():
            m.wait_powered_off()
        if spec.injector_id is not None and spec.rules_file is not None and m.running():
            try:
                w.faults = m.fault_stats()
            except QmpError as e:
                w.faults = {"error": str(e)}

    def diagnostics(self):
        return self.m.diagnostics()


class QmpActions:
    """The scenario's [[qmp]] actions: each sent once its line appears, in
    file order; w.actions says when and what QMP answered."""

    def __init__(self, m, w):
        self.m = m
        self.w = w
        w.actions = [{"when": a.when, "execute": a.execute, "at_s": None, "error": None}
                     for a in m.spec.qmp_actions]
        self.pending = list(range(len(m.spec.qmp_actions)))

    def update(self, streams, elapsed):
        for i in list(self.pending):
            a = self.m.spec.qmp_actions[i]
            if not any(a.when in ln for ln in streams[a.source].lines()):
                continue
            self.pending.remove(i)
            self.w.actions[i]["at_s"] = round(elapsed, 1)
            try:
                self.m.qmp(a.execute, **a.arguments)
            except QmpError as e:
                self.w.actions[i]["error"] = (str(e).splitlines() or ["QMP error"])[0]


def settle_task_dump(console_path, size0):
    """Wait for the console to stop growing after a task dump was asked
    for; the dump's console offset, or None when nothing came."""
    deadline, last = time.monotonic() + 10, -1
    while time.monotonic() < deadline:
        time.sleep(0.5)
        size = _size(console_path)
        if size == last and size > size0:
            break
        last = size
    return size0 if _size(console_path) > size0 else None


def task_dump(view):
    """Ask the hung guest for alt-sysrq-t; the dump's console offset or None."""
    console = os.path.join(view.m.spec.rundir, "console.log")
    size0 = _size(console)
    if not view.request_task_dump():
        return None
    return settle_task_dump(console, size0)


def watch(m, timeout_s, progress=None, view=None, observers=()):
    """Watch started machine @m (through @view, default GuestView); returns
    its WatchResult.  @progress: update(ktap text, elapsed, hits) and
    finish(); @observers: on_poll(streams, new ktap, elapsed) as the streams
    grow, with an optional poll_s that makes the loop look that often."""
    view = view or GuestView(m)
    spec = m.spec
    w = WatchResult(backend=m.backend)
    live = view.live_qmp
    poll = live and spec.injector_id is not None and spec.rules_file is not None
    actions = QmpActions(m, w) if live else None
    poll_s = min([POLL_S] + [o.poll_s for o in observers if getattr(o, "poll_s", None)])
    t0 = time.monotonic()
    view.begin(timeout_s)
    streams = view.streams()
    hits, last_poll, armed_at = {}, 0.0, None
    give_up = view.give_up_at(t0, timeout_s)
    hang = False
    while True:
        time.sleep(poll_s)
        stop.check()
        new_ktap = streams["ktap"].poll()
        new_console = streams["console"].poll()
        now = time.monotonic()
        if poll and now - last_poll > HITS_EVERY_S:
            last_poll = now
            try:
                hits = rule_hits(m.fault_stats())
            except QmpError:
                pass
        if actions and actions.pending:
            actions.update(streams, now - t0)
        for o in observers:
            o.on_poll(streams, new_ktap, now - t0)
        if progress:
            progress.update(streams["ktap"].text + streams["ktap"].partial, now - t0, hits)
        if w.guest_exit is None:
            w.guest_exit = guest_exit(new_ktap.splitlines() + [streams["ktap"].partial])
        if w.guest_exit is not None or not m.running():
            break
        if "Kernel panic" in new_console + streams["console"].partial:
            break
        if armed_at is None and view.watchdog_armed():
            armed_at = now
        if (armed_at is not None and now > armed_at + timeout_s) or \
                (give_up is not None and now > give_up):
            hang = True
            w.task_dump = task_dump(view) if armed_at is not None else None
            break
    if progress:
        progress.finish()
    view.finish(w, hang)
    w.elapsed_s = time.monotonic() - t0
    w.stderr = view.diagnostics()
    w.backend_info = m.info()
    return w
