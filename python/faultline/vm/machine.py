"""Machines: what to boot (MachineSpec), what came of it (WatchResult), and
the Machine base class every backend (qemu, libvirt, lava) derives from.

A backend provides the process (start, running, kill, cleanup, qmp) and
the primitives the one watch loop (run/watch.py) drives: where the guest's
streams come from, when the watchdog counts, how to ask for a task dump,
how to finish the result.  docs/launcher.md has the contract.
"""

import os
import time
from dataclasses import dataclass, field

from faultline.host import scratchdirs, stop
from faultline.vm.logtail import LogTail
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


@dataclass
class WatchResult:
    """What a finished machine reports."""
    hang: bool = False
    guest_exit: int | None = None   # the FAULTLINE-EXIT status
    faults: dict | None = None      # x-fault-query-stats at the end
    task_dump: int | None = None    # console offset where a sysrq-t dump starts
    stderr: str = ""                # QEMU/backend diagnostics, one line per problem
    backend: str = ""
    backend_info: dict = field(default_factory=dict)
    elapsed_s: float = 0.0          # time spent in run()
    # One per [[qmp]] action: when, execute, at_s (None: never sent),
    # error (None: QMP said ok).
    actions: list = field(default_factory=list)


def rule_hits(stats):
    """{rule name: hits} from x-fault-query-stats."""
    return {r["name"]: r["hits"] for r in stats.get("rules", [])}


class Machine:
    """One machine of one run: a context manager that always cleans up."""

    backend = "base"

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

    # -- what a backend provides
    def start(self):
        """Boot; SetupError with one line on failure."""
        raise NotImplementedError

    def running(self):
        raise NotImplementedError

    def qmp(self, command, **args):
        """Run one QMP command; QmpError when the machine is not reachable."""
        raise QmpError(f"backend {self.backend} has no QMP")

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

    # -- shared
    def send_sysrq(self, key):
        self.qmp("send-key", keys=[{"type": "qcode", "data": k}
                                   for k in ("alt", "sysrq", key)])

    def fault_stats(self):
        return self.qmp("x-fault-query-stats", id=self.spec.injector_id)

    # -- what the watch loop (run.watch.watch) calls; backends override these
    has_qmp = True      # rule hits, [[qmp]] actions and final statistics over qmp()

    def begin(self, timeout_s):
        """Called as the watch starts (LAVA starts its job here)."""

    def streams(self):
        """The guest's KTAP (ttyS1) and console (ttyS0) streams, as LogTails."""
        return {"ktap": LogTail(os.path.join(self.spec.rundir, "ktap.log")),
                "console": LogTail(os.path.join(self.spec.rundir, "console.log"))}

    def watchdog_armed(self):
        """Whether the guest's watchdog counts yet (it counts from here)."""
        return True

    def give_up_at(self, t0, timeout_s):
        """A monotonic time to stop watching regardless, or None."""
        return None

    def request_task_dump(self):
        """Ask the hung guest for its tasks (console loglevel 7 first: the
        task lines are KERN_INFO); False when it cannot be asked."""
        try:
            for key in ("7", "t"):
                self.send_sysrq(key)
                time.sleep(0.3)
        except QmpError:
            return False
        return True

    def finish(self, w, hang):
        """Complete WatchResult @w once the watch ended (@hang: the watchdog
        fired)."""
        spec = self.spec
        w.hang = hang
        if w.guest_exit is not None:
            self._wait_powered_off()
        # The guest powered off: the machine is paused (-no-shutdown); read the injector.
        if spec.injector_id is not None and spec.rules_file is not None and self.running():
            try:
                w.faults = self.fault_stats()
            except QmpError as e:
                w.faults = {"error": str(e)}

    def _wait_powered_off(self, timeout_s=5.0):
        """After FAULTLINE-EXIT the guest prints its last console line and
        powers off: wait for that, so the console and the final fault
        statistics are complete (and the same in every deterministic run)."""
        deadline = time.monotonic() + timeout_s
        while self.running() and time.monotonic() < deadline:
            try:
                if self.qmp("query-status").get("status") != "running":
                    return
            except QmpError:
                return
            time.sleep(0.1)
