"""The fuzzer's guests: a ProgramVM with its own scratch directory and run
directory (OUT/vms/LABEL-N/: console.log, ktap.log, the injectors' fault
logs), whose run() never raises: a guest that dies on a program is that
program's `crash` outcome and a VM of no further use.

The manager and the triage know a VM only by this interface (start, run,
close), so the unit tests drive them with a fake.
"""

import os
import threading

from faultline.execute.channel import ChannelError
from faultline.execute.session import Outcome
from faultline.execute.vm import ProgramVM, read_text
from faultline.fuzz.triage import BootFailed
from faultline.host import scratchdirs, stop
from faultline.vm.qmp import QmpError


class GuestVM:
    def __init__(self, sc, builds, rundir, *, seed, deterministic, accel, budgets, plant):
        os.makedirs(rundir, exist_ok=True)
        self.rundir = rundir
        self.scratch = scratchdirs.new_scratch()
        self.vm = ProgramVM(sc, builds, rundir=rundir, scratch=self.scratch, seed=seed,
                            deterministic=deterministic, accel=accel, budgets=budgets,
                            plant=plant)
        self.console_path = os.path.join(rundir, "console.log")
        self.entered = False
        self.lock = threading.Lock()

    def start(self):
        """Boot to the executor's hello; BootFailed (one line) else."""
        self.vm.__enter__()
        self.entered = True
        try:
            return self.vm.start()
        except (ChannelError, QmpError, OSError) as e:
            self.close()
            raise BootFailed(f"the guest in {self.rundir} did not come up: {e}") from None

    def offers(self):
        """What the guest's kernel offers (Session.offers): its knobs and
        their values, mTHP sizes, cgroup files, CPUs."""
        return self.vm.facts().get("offers") or {}

    def run(self, prep):
        """(Outcome, the console while it ran, whether the VM lives on)."""
        mark = len(read_text(self.console_path))
        try:
            out, alive = self.vm.run(prep), True
        except (ChannelError, QmpError) as e:
            out = getattr(e, "outcome", None) or Outcome(prep.name, "crash", str(e))
            alive = False
        return out, read_text(self.console_path)[mark:], alive

    def close(self):
        """Power off (the job's own close, or a stop's from the main thread)."""
        with self.lock:
            try:
                if self.entered:
                    self.entered = False
                    self.vm.close()
                    self.vm.__exit__(None, None, None)
            finally:
                scratchdirs.remove_scratch(self.scratch)


class Booter:
    """Boots the campaign's VMs, each in its own OUT/vms/LABEL-N directory;
    knows every VM alive so that a stop can power them all off."""

    def __init__(self, out, make_vm):
        """@make_vm(rundir, deterministic) -> an unstarted VM."""
        self.dir = os.path.join(out, "vms")
        self.make_vm = make_vm
        self.count = 0
        self.live = set()
        self.lock = threading.Lock()

    def boot(self, label, deterministic=False):
        stop.check()            # no new guest once the launcher is told to stop
        with self.lock:
            self.count += 1
            rundir = os.path.join(self.dir, f"{self.count:04d}-{label}")
        vm = self.make_vm(rundir, deterministic)
        vm.start()
        with self.lock:
            self.live.add(vm)
        return Closing(vm, self)

    def forget(self, vm):
        with self.lock:
            self.live.discard(vm)

    def close_all(self):
        """Power off every VM still up (a stop: their jobs see their guests die)."""
        with self.lock:
            live = list(self.live)
        for vm in live:
            vm.close()


class Closing:
    """A booted VM that leaves the Booter's list when closed."""

    def __init__(self, vm, booter):
        self.vm, self.booter = vm, booter

    def run(self, prep):
        return self.vm.run(prep)

    def offers(self):
        offers = getattr(self.vm, "offers", None)
        return offers() if offers else {}

    def close(self):
        self.booter.forget(self.vm)
        self.vm.close()
