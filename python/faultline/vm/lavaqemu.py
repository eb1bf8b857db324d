"""The qemu-system-x86_64 a local LAVA job runs (first on lava-run's PATH).

It runs faultline's QEMU with a QMP socket and -no-shutdown.  When the guest
powers off (or resets: -no-reboot) it saves the fault injector's statistics
into the run directory and quits QEMU, so LAVA sees the end of the stream.
SIGUSR1 from the launcher's watchdog asks the guest for a task dump over
the same QMP.

It dies with lava-run and QEMU dies with it (the parent-death signal):
lava-run dies with the launcher, so a killed launcher leaves no QEMU.

lava.LavaMachine writes the program LAVA runs (program()): a few lines that
call main() with the run's settings.
"""

import json
import os
import signal
import subprocess
import sys
import time

from faultline.host import procs
from faultline.vm.qmp import Qmp, QmpError

# QEMU's events for a guest that stopped on its own (-no-shutdown pauses it).
END_EVENTS = ("SHUTDOWN", "GUEST_PANICKED")


def program(python_dir, qemu, sock, stats, injector, launcher):
    """The text of the wrapper: runs main() of this module from @python_dir
    (LAVA's environment has no faultline on sys.path)."""
    settings = {"qemu": qemu, "sock": sock, "stats": stats, "injector": injector,
                "launcher": launcher}
    return ("#!/usr/bin/python3\n"
            "# faultline: the QEMU of a local LAVA run (python/faultline/vm/lavaqemu.py)\n"
            "import sys\n"
            f"sys.path.insert(0, {python_dir!r})\n"
            "from faultline import lavaqemu\n"
            f"sys.exit(lavaqemu.main({settings!r}, sys.argv[1:]))\n")


def _die_with_parent():
    """This process gets SIGKILL when lava-run dies; False when it already has."""
    parent = os.getppid()
    procs._prctl(procs.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    return os.getppid() == parent


def _save_stats(qmp, injector, path):
    st = qmp.cmd("x-fault-query-stats", id=injector)
    with open(path + ".tmp", "w") as out:
        json.dump(st, out)
    os.rename(path + ".tmp", path)


def main(settings, args):
    """Run QEMU with @args; returns its exit status."""
    qemu = settings["qemu"]
    # lava-run may have died (with the launcher) before the prctl.
    if not _die_with_parent() or not procs.alive(settings["launcher"]):
        return 1
    if args == ["--version"] or not args:
        os.execv(qemu, [qemu] + args)   # LAVA's probe
    sock = settings["sock"]
    proc = subprocess.Popen([qemu] + args + ["-no-shutdown", "-qmp",
                            "unix:" + sock + ",server=on,wait=off"],
                            preexec_fn=procs.die_with_parent())
    qmp = None

    def task_dump(signum, frame):
        # Console loglevel 7, then the task dump; the main loop below is
        # blocked reading events and skips the replies.  Before QMP is up
        # there is no way to ask: the signal is dropped.
        if qmp is None:
            return
        for key in ("7", "t"):
            qmp.send("send-key", keys=[{"type": "qcode", "data": k}
                                       for k in ("alt", "sysrq", key)])
            time.sleep(0.3)
    # Before the pid file: the watchdog signals the pid it reads there, and
    # SIGUSR1's default action would kill the wrapper (and QEMU with it).
    signal.signal(signal.SIGUSR1, task_dump)
    with open(sock + ".wrapper-pid", "w") as p:
        p.write(str(os.getpid()))
    try:
        qmp = Qmp(sock, alive=lambda: proc.poll() is None)
    except QmpError:
        return proc.wait()
    try:
        qmp.wait_event(END_EVENTS)
        if settings["injector"]:
            _save_stats(qmp, settings["injector"], settings["stats"])
        qmp.cmd("quit")
    except QmpError:
        pass   # QEMU went away first: LAVA reports what it saw
    finally:
        qmp.close()
    return proc.wait()


if __name__ == "__main__":
    sys.exit("run by the program lava.LavaMachine writes (lavaqemu.program())")
