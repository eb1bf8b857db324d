"""The qemu backend: faultline's qemu-system-x86_64 as a child process."""

import os
import shlex
import signal
import subprocess

from faultline.errors import SetupError
from faultline.host import procs
from faultline.vm.machine import Machine
from faultline.vm.qmp import Qmp, QmpError


class QemuMachine(Machine):
    """QEMU started here; QMP on scratch/qmp.sock, stderr in rundir/qemu.stderr."""

    backend = "qemu"

    def __init__(self, spec, **backend_options):
        super().__init__(spec, **backend_options)
        self.qmp_socket = os.path.join(spec.scratch, "qmp.sock")
        self.proc = None
        self._qmp = None
        self._stderr = None

    def argv(self):
        return self.spec.qemu_argv(self.qmp_socket)

    def start(self):
        spec = self.spec
        cmd = self.argv()
        with open(os.path.join(spec.rundir, "cmdline"), "w") as f:
            f.write(shlex.join(cmd) + "\n")
        for name in ("ktap.log", "console.log"):
            open(os.path.join(spec.rundir, name), "w").close()
        self._stderr = open(os.path.join(spec.rundir, "qemu.stderr"), "w")
        try:
            # Its own session: a terminal's ^C reaches the launcher only, which
            # stops QEMU in order.  The parent-death signal: a launcher killed
            # outright (SIGKILL) takes QEMU with it.
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._stderr,
                                         stderr=self._stderr, start_new_session=True,
                                         preexec_fn=procs.die_with_parent())
        except OSError as e:
            raise SetupError(f"cannot start {cmd[0]}: {e.strerror}") from None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def qmp(self, command, /, **args):
        if self._qmp is None:
            if not self.running():
                raise QmpError("QEMU is not running")
            self._qmp = Qmp(self.qmp_socket, timeout=5.0)
        try:
            return self._qmp.cmd(command, **args)
        except QmpError:
            if not self.running():
                self._close_qmp()
            raise

    def wait_powered_off(self, timeout_s=5.0):
        """QMP's SHUTDOWN (and -no-shutdown's STOP) event."""
        try:
            if self.qmp("query-status").get("status") != "running":
                return True
            # Running at the reply: what was kept before it is stale.
            self._qmp.events.clear()
            return self._qmp.wait_event(("SHUTDOWN", "STOP"), timeout_s) is not None
        except QmpError:
            return not self.running()

    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def _close_qmp(self):
        if self._qmp:
            self._qmp.close()
            self._qmp = None

    def kill(self):
        if self.running():
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()

    def cleanup(self):
        self._close_qmp()
        self.kill()
        if self._stderr:
            self._stderr.close()
            self._stderr = None
        super().cleanup()

    def diagnostics(self):
        try:
            with open(os.path.join(self.spec.rundir, "qemu.stderr"), errors="replace") as f:
                return f.read().strip()
        except OSError:
            return ""

    def info(self):
        return {"qemu_binary": self.spec.qemu_binary}
