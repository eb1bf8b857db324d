"""Machines: what to boot (MachineSpec) and the Machine base class every
backend (qemu, libvirt, lava) derives from.

A machine runs a process and nothing more: start, QMP and its events,
kill, cleanup, info.  What to watch while it runs, and when a run is over,
belongs to the caller (run/watch.py).  docs/launcher.md has the contract.
"""

import os
import time
from dataclasses import dataclass, field

from faultline.host import scratchdirs, stop
from faultline.vm.qmp import QmpError

FIXED_RTC = "2026-01-01T00:00:00"
INJECTOR_ID = "fi0"
ICOUNT = "shift=4,sleep=off,align=off"


@dataclass
class MachineSpec:
    """What to boot, the same for every backend."""
    scenario: str
    qemu_binary: str
    firmware_dirs: list
    kernel: str
    initrd: str
    append: str
    memory: str
    cpus: int
    accel: str
    deterministic: bool
    rundir: str
    scratch: str
    disk: str
    injector_id: str | None
    device_args: list
    extra_args: list
    # rules.txt in rundir when the scenario has rules (then rule hits are
    # polled and the final statistics read), else None.
    rules_file: str | None = None
    # [[qmp]] actions (scenario.QmpAction): sent by the watch loop.
    qmp_actions: list = field(default_factory=list)

    def qemu_argv(self, qmp_socket):
        """The full QEMU argv of the qemu backend."""
        q = [self.qemu_binary, "-nodefaults", "-display", "none", "-no-reboot",
             "-no-shutdown", "-machine", "q35", "-m", self.memory, "-nic", "none"]
        for d in self.firmware_dirs:
            q += ["-L", d]
        q += ["-accel", self.accel, *self.extra_args,
              "-kernel", self.kernel, "-initrd", self.initrd, "-append", self.append,
              "-serial", "file:" + os.path.join(self.rundir, "console.log"),
              "-serial", "file:" + os.path.join(self.rundir, "ktap.log"),
              "-qmp", "unix:" + qmp_socket + ",server=on,wait=off"]
        return q + self.device_args


class Machine:
    """One machine of one run: a context manager that always cleans up."""

    backend = "base"
    # Whether qmp() reaches the machine while it runs (rule hits, [[qmp]]
    # actions, a task dump and the final statistics go through it).
    has_qmp = True

    def __init__(self, spec, **backend_options):
        self.spec = spec
        self.options = backend_options

    def __enter__(self):
        # Known to aborted.finish() until cleaned up: a signal may interrupt
        # this machine's cleanup.
        stop.register(self)
        return self

    def __exit__(self, *exc):
        self.cleanup()
        stop.unregister(self)
        return False

    def start(self):
        """Boot; SetupError with one line on failure.  The guest's ttyS0
        lands in rundir/console.log and ttyS1 in rundir/ktap.log."""
        raise NotImplementedError

    def running(self):
        """The process still exists (a paused, powered-off guest counts)."""
        raise NotImplementedError

    def qmp(self, command, /, **args):
        """Run one QMP command; QmpError when the machine is not reachable."""
        raise QmpError(f"backend {self.backend} has no QMP")

    def wait_powered_off(self, timeout_s=5.0):
        """Wait until the guest has powered off (the machine then stays,
        paused, as -no-shutdown keeps it); False when it had not after
        @timeout_s.  The base class asks QMP's status."""
        deadline = time.monotonic() + timeout_s
        while self.running() and time.monotonic() < deadline:
            try:
                if self.qmp("query-status").get("status") != "running":
                    return True
            except QmpError:
                return True
            time.sleep(0.1)
        return not self.running()

    def fault_stats(self):
        """x-fault-query-stats of the machine's fault injector."""
        return self.qmp("x-fault-query-stats", id=self.spec.injector_id)

    def pid(self):
        """The QEMU process id when it runs here, else None."""
        return None

    def kill(self):
        raise NotImplementedError

    def cleanup(self):
        """Kill if needed and remove what the backend created (subclasses
        call this too): the scratch directory's files.  The directory and
        its owner.json stay: they belong to the caller, and tell the next
        launcher's aborted.sweep() that this run has no report yet."""
        scratchdirs.empty_scratch(self.spec.scratch)

    def info(self):
        """Backend facts for run.json."""
        return {}

    def diagnostics(self):
        """The backend's own error output (QEMU stderr, a libvirt error...)."""
        return ""
