"""The qemu backend's snapshots: a stopped machine saved to a file (QEMU's
file migration), and a machine started from such a file with devices
hot-added over QMP before it runs on (RestoredMachine).  What is saved and
when is run/restore.py's to decide."""

import os
import shutil
import time

from faultline.errors import SetupError
from faultline.host import stop
from faultline.vm.qemu import QemuMachine
from faultline.vm.qmp import Qmp, QmpError

# The fw_cfg file a restored guest reads its /run.sh from.
FWCFG_NAME = "opt/faultline/run.sh"
# How long loading a saved guest and its QMP answers may take.
LOAD_TIMEOUT_S = 120


def wait_migration(m, what, timeout_s):
    """Poll query-migrate until it completes; SetupError on failure."""
    deadline = time.monotonic() + timeout_s
    while True:
        stop.check()
        st = m.qmp("query-migrate") or {}
        status = st.get("status")
        if status == "completed":
            return
        if status in ("failed", "cancelled"):
            raise SetupError(f"{what} failed: {st.get('error-desc', status)}")
        if time.monotonic() > deadline:
            raise SetupError(f"{what}: not done after {timeout_s:.0f}s (status {status})")
        time.sleep(0.05)


def keyval_dict(text):
    """-blockdev's key=value,a.b=value text as blockdev-add arguments
    (on/off are booleans there; the launcher's values hold no commas)."""
    d = {}
    for item in text.split(","):
        k, _, v = item.partition("=")
        node = d
        *path, last = k.split(".")
        for p in path:
            node = node.setdefault(p, {})
        node[last] = {"on": True, "off": False}.get(v, v)
    return d


class RestoredMachine(QemuMachine):
    """A QemuMachine that starts from a saved guest: -incoming, then the
    swap disk, injector and device over QMP, then cont."""

    def __init__(self, spec, snapshot, hotplug, **backend_options):
        super().__init__(spec, **backend_options)
        self.snapshot = snapshot
        self.hotplug = hotplug
        self.timing = {}

    def argv(self):
        q = super().argv()
        console = "file:" + os.path.join(self.spec.rundir, "console.log")
        i = q.index(console)
        # Appended to the saved guest's boot console (copied in by start()).
        q[i - 1:i + 1] = ["-chardev", f"file,id=con0,path={console[5:]},append=on",
                          "-serial", "chardev:con0"]
        return q + ["-S", "-incoming", "defer", "-fw_cfg",
                    f"name={FWCFG_NAME},file={os.path.join(self.spec.rundir, 'run.sh')}"]

    def _hmp(self, line):
        out = self.qmp("human-monitor-command", **{"command-line": line})
        if out and out.strip():
            raise QmpError(f"{line.split()[0]}: {out.strip().splitlines()[0]}")

    def start(self):
        super().start()
        shutil.copyfile(os.path.join(self.snapshot, "console.log"),
                        os.path.join(self.spec.rundir, "console.log"))
        t0 = time.monotonic()
        try:
            # QEMU loads a file: migration in its main loop, and QMP answers
            # only when it is done (over 5 s on a loaded host, seen): a
            # connection of its own with a longer timeout, closed after.
            self._qmp = Qmp(self.qmp_socket, timeout=LOAD_TIMEOUT_S)
            # After an incoming migration QEMU announces the guest's NICs
            # on a real-time timer for about a second.  Under -icount a
            # real-time deadline cuts the vCPUs' instruction slices, so
            # with two vCPUs host timing chose their interleaving: 6 of 6
            # restored 2-vCPU --deterministic runs of one seed differed
            # from the first fault on, 0 of 6 without the timer.  The
            # guest has no NIC to announce.
            self.qmp("migrate-set-parameters", **{"announce-rounds": 0})
            self.qmp("migrate-incoming", uri="file:" + os.path.join(self.snapshot, "state"))
            wait_migration(self, "--restore: loading the saved guest", LOAD_TIMEOUT_S)
            t1 = time.monotonic()
            for opt, val in self.hotplug:
                if opt == "-blockdev":
                    self.qmp("blockdev-add", **keyval_dict(val))
                elif opt == "-object":
                    self._hmp("object_add " + val)
                else:
                    self._hmp("device_add " + val)
            self.qmp("cont")
        except QmpError as e:
            raise SetupError(f"--restore: {e}") from None
        finally:
            self._close_qmp()
        self.timing = {"load_s": round(t1 - t0, 2), "hotplug_s": round(time.monotonic() - t1, 2)}

    def info(self):
        return super().info() | {"restored_from": self.snapshot, **self.timing}
