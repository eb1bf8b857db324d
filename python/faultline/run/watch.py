"""The watch loop: one for every backend.

watch() follows a started machine until the guest reports FAULTLINE-EXIT,
the kernel panics, the machine ends or the watchdog fires.  It reads the
guest's streams incrementally (logtail.LogTail), shows progress, polls rule hits and
sends the scenario's [[qmp]] actions over QMP (backends that have it), asks
a hung guest for a sysrq task dump, and returns a WatchResult.  A backend
supplies the primitives it calls (machine.Machine: streams, begin,
watchdog_armed, give_up_at, request_task_dump, finish).
"""

import os
import time

from faultline.host import stop
from faultline.vm.machine import WatchResult, rule_hits
from faultline.vm.qmp import QmpError

POLL_S = 0.2
HITS_EVERY_S = 1.0
EXIT_PREFIX = "FAULTLINE-EXIT "


def guest_exit(lines):
    """The status of the first FAULTLINE-EXIT line among @lines, or None."""
    for ln in lines:
        if ln.startswith(EXIT_PREFIX):
            try:
                return int(ln.split()[1])
            except (IndexError, ValueError):
                pass
    return None


def fire_actions(m, pending, streams, elapsed, w):
    """Send each pending [[qmp]] action (indices into spec.qmp_actions)
    whose line has appeared, in file order."""
    for i in list(pending):
        a = m.spec.qmp_actions[i]
        if not any(a.when in ln for ln in streams[a.source].lines()):
            continue
        pending.remove(i)
        w.actions[i]["at_s"] = round(elapsed, 1)
        try:
            m.qmp(a.execute, **a.arguments)
        except QmpError as e:
            w.actions[i]["error"] = (str(e).splitlines() or ["QMP error"])[0]


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


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def task_dump(m):
    """Ask machine @m's hung guest for alt-sysrq-t; the dump's offset or None."""
    console = os.path.join(m.spec.rundir, "console.log")
    size0 = _size(console)
    if not m.request_task_dump():
        return None
    return settle_task_dump(console, size0)


def watch(m, timeout_s, progress=None):
    """Watch started machine @m; returns its WatchResult."""
    spec = m.spec
    w = WatchResult(backend=m.backend)
    live = m.has_qmp
    poll = live and spec.injector_id is not None and spec.rules_file is not None
    if live:
        w.actions = [{"when": a.when, "execute": a.execute, "at_s": None, "error": None}
                     for a in spec.qmp_actions]
    pending = list(range(len(spec.qmp_actions))) if live else []
    t0 = time.monotonic()
    m.begin(timeout_s)
    streams = m.streams()
    hits, last_poll, armed_at = {}, 0.0, None
    give_up = m.give_up_at(t0, timeout_s)
    hang = False
    while True:
        time.sleep(POLL_S)
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
        if pending:
            fire_actions(m, pending, streams, now - t0, w)
        if progress:
            progress.update(streams["ktap"].text + streams["ktap"].partial, now - t0, hits)
        if w.guest_exit is None:
            w.guest_exit = guest_exit(new_ktap.splitlines() + [streams["ktap"].partial])
        if w.guest_exit is not None or not m.running():
            break
        if "Kernel panic" in new_console + streams["console"].partial:
            break
        if armed_at is None and m.watchdog_armed():
            armed_at = now
        if (armed_at is not None and now > armed_at + timeout_s) or \
                (give_up is not None and now > give_up):
            hang = True
            w.task_dump = task_dump(m) if armed_at is not None else None
            break
    if progress:
        progress.finish()
    m.finish(w, hang)
    w.elapsed_s = time.monotonic() - t0
    w.stderr = m.diagnostics()
    w.backend_info = m.info()
    return w
