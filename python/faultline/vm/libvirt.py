"""Backend "libvirt": one run as a transient domain of a real libvirtd.

The domain boots faultline's QEMU build (<emulator>) with direct kernel boot;
the swap disk, the fault-injector and our device reach QEMU verbatim through
<qemu:commandline> (spec.device_args, the same argv as the qemu backend), so
libvirt knows nothing about them and cannot rewrite them.  QMP goes through
libvirt (virDomainQemuMonitorCommand).

Two libvirt behaviours are bent back to what the qemu backend does:
- libvirt kills QEMU on a guest power-off (its on_poweroff has no "preserve"
  for QEMU), which loses the injector's final statistics.  The domain uses
  on_poweroff/on_reboot "restart" and an event callback pauses the domain
  on that reset, so it stays like `-no-shutdown -no-reboot`: paused, QMP
  answering.  The reset restarts the engine's per-rule counters (its log
  and digest go on), so the hits are recounted from the fault log.
- The domain is started with AUTODESTROY: libvirtd destroys it when our
  connection closes, so a killed launcher (even SIGKILL) leaves nothing
  running; a signal the launcher handles destroys it on the way out
  (abort.py).  The domain also names its owner (<metadata>: pid, start
  time, boot): a launcher destroys a faultline domain whose owner is gone
  (destroy_orphans), whatever happened to that connection.
Four of libvirt's own QEMU arguments change what the guest sees and are
undone in <qemu:commandline> (domain_xml, docs/launcher.md): a deterministic
run then has the qemu backend's digest.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET

from faultline.errors import SetupError
from faultline.host import procs, scratchdirs, stop
from faultline.vm.libvirt_xml import OWNER_NS, domain_xml, new_domain_name
from faultline.vm.machine import Machine
from faultline.vm.qmp import QmpError

DEFAULT_URI = "qemu:///system"
SYSTEM_SOCKET = "/run/libvirt/libvirt-sock"
VIRTLOGD_SOCKET = "/run/libvirt/virtlogd-sock"
DAEMON_LOG = "/var/log/libvirt/faultline-daemons.log"
DOMAIN_LOG_DIR = "/var/log/libvirt/qemu"
START_TIMEOUT_S = 20
# Domain log lines: libvirt's own ("2026-12-01 08:00:09.600+0000: ..."), QEMU's
# with -msg timestamp=on ("2026-12-01T08:00:49.260585Z qemu-system-x86_64: ...").
LIBVIRT_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+[+-]\d{4}: ")
QEMU_MSG_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z ")
QEMU_MSG_STAMP_ANYWHERE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z ")
OUR_DESTROY = re.compile(r"terminating on signal 15 from pid \d+ \(libvirtd\)")


def import_libvirt():
    """The Debian binding (python3-libvirt), or a one-line SetupError."""
    try:
        import libvirt as lv
        import libvirt_qemu as lvq
    except ImportError:
        if os.path.exists("/usr/lib/python3/dist-packages/libvirt.py") and \
                os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
            raise SetupError(f"libvirt backend: python3-libvirt is installed for "
                             f"/usr/bin/python3, not for {sys.executable}") from None
        raise SetupError("libvirt backend: python3-libvirt is not installed "
                         "(scripts/setup installs it with libvirt-daemon)") from None
    return lv, lvq


# ---------------------------------------------------------------- daemons

def _socket_alive(path):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def _is_local_system(uri):
    return uri in ("qemu:///system", "qemu+unix:///system")


def ensure_daemons(uri):
    """Start virtlogd and libvirtd for a local system URI when they are not
    running (no systemd here); running daemons are left alone."""
    if not _is_local_system(uri) or _socket_alive(SYSTEM_SOCKET):
        return []
    if os.geteuid() != 0:
        raise SetupError(f"libvirtd is not running ({SYSTEM_SOCKET}) and starting it needs root")
    started = []
    os.makedirs(os.path.dirname(DAEMON_LOG), exist_ok=True)
    os.makedirs(DOMAIN_LOG_DIR, exist_ok=True)
    with open(DAEMON_LOG, "a") as log:
        for daemon, sock in (("virtlogd", VIRTLOGD_SOCKET), ("libvirtd", SYSTEM_SOCKET)):
            if _socket_alive(sock):
                continue
            exe = shutil.which(daemon) or shutil.which(daemon, path="/usr/sbin:/sbin")
            if not exe:
                raise SetupError(f"libvirt is not installed ({daemon} not found): "
                                 "run scripts/setup")
            # -d forks into the background in its own session: the daemon
            # outlives this launcher and is shared with other users.
            r = subprocess.run([exe, "-d"], stdin=subprocess.DEVNULL, stdout=log,
                               stderr=log, start_new_session=True)
            deadline = time.monotonic() + START_TIMEOUT_S
            while not _socket_alive(sock):
                if r.returncode != 0 or time.monotonic() > deadline:
                    raise SetupError(f"{daemon} did not start (exit {r.returncode}); "
                                     f"its messages are in {DAEMON_LOG}")
                time.sleep(0.1)
            started.append(daemon)
    return started


def check_uri(uri):
    """SetupError unless libvirt connects to @uri (its daemons started as a
    run would start them): before any run directory exists."""
    lv, _ = import_libvirt()
    ensure_daemons(uri)
    lv.registerErrorHandler(lambda ctx, err: None, None)
    try:
        lv.open(uri).close()
    except lv.libvirtError as e:
        raise SetupError(f"libvirt cannot connect to {uri}: {_one_line(e)}") from None


# ---------------------------------------------------------------- events

_event_loop_lock = threading.Lock()
_event_loop_started = False


def _start_event_loop(lv):
    """libvirt delivers domain events only to a running event loop; one
    daemon thread per process (it must exist before the connection)."""
    global _event_loop_started
    with _event_loop_lock:
        if _event_loop_started:
            return
        lv.virEventRegisterDefaultImpl()

        def loop():
            while True:
                lv.virEventRunDefaultImpl()
        threading.Thread(target=loop, name="libvirt-events", daemon=True).start()
        _event_loop_started = True


# ---------------------------------------------------------------- machine

def recount_after_reset(stats, log_path):
    """libvirt's power-off is a machine reset, which restarts the engine's
    per-rule counters (docs/rules.md) while the log and digest go on.  Every
    fired rule has its line in the fault log, flushed as it fires, so the
    hits are counted again from there; "matched" cannot be, so it is dropped."""
    counts = {}
    try:
        with open(log_path) as f:
            for line in f:
                try:
                    rule = json.loads(line)["rule"]
                except (ValueError, KeyError):
                    continue
                counts[rule] = counts.get(rule, 0) + 1
    except OSError:
        return stats
    stats = dict(stats)
    stats["rules"] = [dict({k: v for k, v in r.items() if k != "matched"},
                           hits=counts.get(r.get("name"), 0))
                      for r in stats.get("rules", [])]
    stats["hits_from"] = "faults.jsonl (libvirt power-off reset the counters)"
    return stats


class LibvirtMachine(Machine):
    backend = "libvirt"

    def __init__(self, spec, connect=None, name=None, **backend_options):
        super().__init__(spec, **backend_options)
        self.uri = connect or DEFAULT_URI
        self.name = name or new_domain_name(spec.scenario)
        self.conn = None
        self.dom = None
        self.started_daemons = []
        self.libvirt_version = None
        self.xml_path = os.path.join(spec.rundir, "domain.xml")
        self.log_path = None
        self.reset_paused = threading.Event()
        self._lv = self._lvq = None

    # -- start

    def _connect(self):
        lv = self._lv
        try:
            return lv.open(self.uri)
        except lv.libvirtError as e:
            raise SetupError(f"libvirt: cannot connect to {self.uri}: "
                             f"{_one_line(e)}") from None

    def _probe_emulator(self):
        """libvirt's capability probe of our QEMU: it refuses a binary it
        cannot use before any domain exists."""
        lv = self._lv
        try:
            self.conn.getDomainCapabilities(self.spec.qemu_binary, "x86_64", "q35",
                                            "kvm" if self.spec.accel == "kvm" else "qemu")
        except lv.libvirtError as e:
            raise SetupError(f"libvirt rejects {self.spec.qemu_binary}: {_one_line(e)}") from None

    def start(self):
        self._lv, self._lvq = import_libvirt()
        lv = self._lv
        self.started_daemons = ensure_daemons(self.uri)
        _start_event_loop(lv)
        # libvirt prints every error to stderr by default; ours are one line.
        lv.registerErrorHandler(lambda ctx, err: None, None)
        self.conn = self._connect()
        try:
            self.libvirt_version = _version(self.conn.getLibVersion())
        except lv.libvirtError:
            self.libvirt_version = None
        self._probe_emulator()
        destroy_orphans(self.conn, lv)
        if self.name in self._domain_names():
            raise SetupError(f"libvirt: a domain named {self.name!r} already exists on "
                             f"{self.uri}")
        owner = procs.identity()
        xml = domain_xml(self.spec, self.name, owner=owner)
        with open(self.xml_path, "w") as f:
            f.write(xml)
        # For the next launcher's aborted.sweep(), should this one be killed
        # and libvirtd keep the domain.
        with open(os.path.join(self.spec.scratch, scratchdirs.LIBVIRT_RECORD), "w") as f:
            json.dump({"uri": self.uri, "domain": self.name}, f)
        # QEMU truncates them too; empty before the watch loop reads them.
        for log in ("ktap.log", "console.log"):
            open(os.path.join(self.spec.rundir, log), "w").close()
        try:
            self.dom = self._create(xml)
        except lv.libvirtError as e:
            if e.get_error_code() in (lv.VIR_ERR_OPERATION_FAILED, lv.VIR_ERR_DOM_EXIST) and \
                    "already exists" in str(e):
                raise SetupError(f"libvirt: a domain named {self.name!r} already exists on "
                                 f"{self.uri}") from None
            raise SetupError(f"libvirt could not start the domain: {_one_line(e)}") from None
        try:
            self.conn.domainEventRegisterAny(self.dom, lv.VIR_DOMAIN_EVENT_ID_REBOOT,
                                             self._on_reset, None)
        except lv.libvirtError as e:
            # Without it a powered-off guest loses its final statistics.
            raise SetupError(f"libvirt: no reboot events from {self.uri}: "
                             f"{_one_line(e)}") from None
        local = os.path.join(DOMAIN_LOG_DIR, self.name + ".log")
        self.log_path = local if _is_local_system(self.uri) else None

    def _create(self, xml):
        """createXML, stoppable: it blocks while QEMU starts (4 s seen on a
        loaded host), and a signal is handled only when it returns.  So it
        runs in a thread; a launcher stopped meanwhile destroys the starting
        domain (libvirt kills its QEMU) and waits for the call to end."""
        lv, res = self._lv, {}

        def create():
            try:
                res["dom"] = self.conn.createXML(xml, lv.VIR_DOMAIN_START_AUTODESTROY)
            except lv.libvirtError as e:
                res["error"] = e
        t = threading.Thread(target=create, name="libvirt-create", daemon=True)
        t.start()
        try:
            while t.is_alive():
                t.join(0.1)
                stop.check()
        except stop.Aborted:
            try:
                self.conn.lookupByName(self.name).destroy()
            except lv.libvirtError:
                pass
            t.join()
            self.dom = res.get("dom")
            raise
        if "error" in res:
            raise res["error"]
        return res["dom"]

    def _domain_names(self):
        try:
            return {d.name() for d in self.conn.listAllDomains()}
        except self._lv.libvirtError:
            return set()

    def _on_reset(self, conn, dom, opaque):
        # The guest powered off or rebooted (module docstring): pause it, as
        # QEMU's -no-shutdown -no-reboot would.
        try:
            dom.suspend()
        except self._lv.libvirtError:
            pass
        self.reset_paused.set()

    # -- the Machine contract

    def wait_powered_off(self, timeout_s=30.0):
        """The guest's power-off comes back as a reset that _on_reset pauses
        (module docstring).  Wait for that pause: the rebooting guest shows
        "running" again until the event callback has run, and statistics
        read then miss the recount (seen with two runs at a time on 2
        cores: every hit read 0).  Without the event, QMP's status."""
        if self.reset_paused.wait(timeout_s):
            return True
        return super().wait_powered_off(min(timeout_s, 5.0))

    def fault_stats(self):
        """The engine's statistics; after the power-off's reset its per-rule
        counters start again, so the hits are recounted from the fault log."""
        stats = super().fault_stats()
        if self.reset_paused.is_set() and isinstance(stats, dict):
            stats = recount_after_reset(stats, os.path.join(self.spec.rundir, "faults.jsonl"))
        return stats

    def running(self):
        if self.dom is None:
            return False
        try:
            return bool(self.dom.isActive())
        except self._lv.libvirtError:
            return False

    def qmp(self, command, /, **args):
        if self.dom is None:
            raise QmpError(f"QMP {command}: no domain")
        cmd = json.dumps({"execute": command, "arguments": args})
        try:
            reply = json.loads(self._lvq.qemuMonitorCommand(self.dom, cmd, 0))
        except self._lv.libvirtError as e:
            raise QmpError(f"QMP {command} via libvirt: {_one_line(e)}") from None
        except ValueError as e:
            raise QmpError(f"QMP {command} via libvirt: bad reply ({e})") from None
        if "error" in reply:
            raise QmpError(f"QMP {command}: {reply['error'].get('desc')}")
        return reply.get("return")

    def kill(self):
        dom = self.dom
        if dom is None:
            return
        try:
            if dom.isActive():
                dom.destroy()
        except self._lv.libvirtError:
            pass

    def cleanup(self):
        self.kill()
        self._save_domain_log()
        if self.conn is not None:
            try:
                self.conn.close()
            except self._lv.libvirtError:
                pass
        self.conn = self.dom = None
        super().cleanup()

    def _domain_log(self):
        if not self.log_path:
            return []
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read().splitlines()
        except OSError:
            return []

    def _argv_block(self, lines):
        """(start, end) of the last QEMU command line libvirt logged."""
        starts = [i for i, ln in enumerate(lines) if ln.startswith("LC_ALL=")]
        if not starts:
            return 0, 0
        end = starts[-1]
        while end < len(lines) and lines[end].endswith("\\"):
            end += 1
        return starts[-1], min(end + 1, len(lines))

    def _save_domain_log(self):
        """libvirt's per-domain log into the run directory, and the QEMU
        command line it ran as `cmdline` (as the qemu backend writes it)."""
        lines = self._domain_log()
        if not lines:
            return
        with open(os.path.join(self.spec.rundir, "libvirt-qemu.log"), "w") as f:
            f.write("\n".join(lines) + "\n")
        start, end = self._argv_block(lines)
        if end > start:
            with open(os.path.join(self.spec.rundir, "cmdline"), "w") as f:
                f.write("\n".join(lines[start:end]) + "\n")

    def diagnostics(self):
        """QEMU's own messages from the domain log of this run, one a line
        (libvirt's lines and the SIGTERM of our own destroy left out)."""
        lines = self._domain_log()
        out = []
        for ln in lines[self._argv_block(lines)[1]:]:
            if LIBVIRT_LOG_LINE.match(ln):
                continue
            ln = QEMU_MSG_STAMP.sub("", ln)
            if ln.strip() and not OUR_DESTROY.search(ln):
                out.append(ln)
        return "\n".join(out)

    def info(self):
        return {"backend": self.backend, "uri": self.uri, "domain": self.name,
                "libvirt_version": self.libvirt_version,
                "domain_xml": os.path.basename(self.xml_path),
                "domain_log": "libvirt-qemu.log" if self.log_path else None,
                "started_daemons": self.started_daemons}


def domain_owner(dom):
    """The procs.identity() in a domain's <metadata>, or None (not ours)."""
    try:
        root = ET.fromstring(dom.XMLDesc(0))
    except Exception:  # noqa: BLE001 - libvirtError (gone meanwhile) or bad XML
        return None
    el = root.find(f"metadata/{{{OWNER_NS}}}owner")
    if el is None:
        return None
    try:
        return {"pid": int(el.get("pid")), "start": int(el.get("start")),
                "boot": el.get("boot")}
    except (TypeError, ValueError):
        return None


def destroy_orphans(conn, lv):
    """Destroy every faultline domain on @conn whose owner (a launcher) is
    gone; returns their names.  libvirtd's AUTODESTROY does it when the
    owner's connection drops: this is for a daemon that did not."""
    gone = []
    try:
        doms = conn.listAllDomains()
    except lv.libvirtError:
        return gone
    for dom in doms:
        try:
            if not dom.name().startswith("faultline-"):
                continue
            owner = domain_owner(dom)
            if owner and not procs.alive(owner):
                dom.destroy()
                gone.append(dom.name())
        except lv.libvirtError:
            continue
    return gone


def destroy_orphans_of(record):
    """aborted.sweep(): the orphans on the connection a dead launcher's
    scratch directory names (its LIBVIRT_RECORD)."""
    with open(record) as f:
        uri = json.load(f)["uri"]
    lv, _ = import_libvirt()
    lv.registerErrorHandler(lambda ctx, err: None, None)
    conn = lv.open(uri)
    try:
        return destroy_orphans(conn, lv)
    finally:
        conn.close()


def _version(n):
    return f"{n // 1000000}.{n // 1000 % 1000}.{n % 1000}"


def _one_line(e):
    """A libvirt error in one line, without QEMU's -msg timestamps."""
    return " ".join(QEMU_MSG_STAMP_ANYWHERE.sub("", str(e)).split())
