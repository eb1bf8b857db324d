"""LAVA: scenarios as LAVA jobs (device_type qemu), and the "lava" machine
backend that runs such a job with Debian's lava-dispatcher (lava-run, local,
no server) and turns LAVA's results back into a faultline run directory.

What LAVA 2023.01 needs from us (shared/notes/lava-2023.01.md, measured):
- it runs `qemu-system-<arch>` from PATH (and probes its --version there):
  arch x86_64, and a wrapper of that name first on PATH for local runs;
- the qemu device template always adds `-net nic ... -net <netdevice>`:
  netdevice none (our build has no slirp); -nodefaults and -machine q35 in
  extra_options, else SeaBIOS stalls ~32 s;
- init writes KTAP to ttyS1: both serial ports must exist, and LAVA must
  see ttyS1 (lab jobs mux ttyS0+ttyS1 onto stdio, local runs keep ttyS0 in
  the run directory's console.log so the two streams never interleave);
- per-case results are only in the log (`lvl: results`), result.yaml has
  the job verdict; LAVA never records QEMU's exit status, so the guest's
  FAULTLINE-EXIT line is a test case of its own.
"""

import glob
import os
import shlex
import shutil
import signal
import subprocess

from faultline.errors import SetupError
from faultline.host import procs, scratchdirs
from faultline.paths import CACHE
from faultline.vm import lavaqemu
from faultline.vm.lava_job import job_metadata, make_job, render_device, template_dir, yaml_dump
from faultline.vm.machine import Machine


# ---------------------------------------------------------------- the backend

def dispatcher_config(prefix):
    # Without a default IPv4 route lava-run fails (LAVABug KeyError: 2)
    # unless the dispatcher's address is given.  The prefix keeps LAVA's
    # download directory (/var/lib/lava/dispatcher/tmp/PREFIX<job id>) apart
    # from other runs on this host.
    return f"dispatcher_ip: 127.0.0.1\nprefix: {prefix}\n"


def lava_version():
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "lava-dispatcher"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def lava_run_path():
    """lava-run, or SetupError naming what this host lacks for local runs."""
    if os.geteuid() != 0:
        raise SetupError("the lava backend runs lava-run, which needs root")
    path = shutil.which("lava-run")
    if not path:
        raise SetupError("lava-run not found: run scripts/setup (installs lava-dispatcher)")
    return path


class LavaMachine(Machine):
    """One run as a LAVA job run by lava-run on this host (the watch loop
    reads it through run/lava_watch.py: LAVA's QEMU has no QMP of ours).

    Backend options: cache (faultline's cache dir, for the device template),
    metadata (the job metadata), job_id.  Files in the run directory:
    lava-job.yaml, lava-device.yaml, lava.log (LAVA's log), lava-results.json
    (the converted cases), console.log (ttyS0), ktap.log (ttyS1 as LAVA saw it)."""

    backend = "lava"
    has_qmp = False

    def __init__(self, spec, **backend_options):
        super().__init__(spec, **backend_options)
        self.proc = None
        self.lava_dir = os.path.join(spec.scratch, "lava")
        self.stats_path = os.path.join(spec.rundir, "lava-stats.json")
        self.log_path = os.path.join(spec.rundir, "lava.log")
        self._log = None

    def _paths(self):
        d = self.lava_dir
        return {k: os.path.join(d, k) for k in ("bin", "out", "tmp")}

    def write_job(self, timeout_s):
        spec, p = self.spec, self._paths()
        for d in p.values():
            os.makedirs(d, exist_ok=True)
        urls = {"kernel": "file://" + spec.kernel, "initrd": "file://" + spec.initrd}
        if spec.rules_file:
            urls["rules"] = "file://" + spec.rules_file
        meta = self.options.get("metadata") or job_metadata(spec.scenario, None, "?", "")
        job = make_job(spec, urls, timeout_s, meta,
                       console=os.path.join(spec.rundir, "console.log"))
        tpl = template_dir(self.options.get("cache") or CACHE)
        device = render_device(tpl, job["context"])
        files = {"lava-job.yaml": yaml_dump(job), "lava-device.yaml": device,
                 "lava-dispatcher.yaml": dispatcher_config(
                     os.path.basename(spec.scratch) + "-")}
        for name, text in files.items():
            with open(os.path.join(spec.rundir, name), "w") as f:
                f.write(text)
        wrapper = os.path.join(p["bin"], "qemu-system-x86_64")
        with open(wrapper, "w") as f:
            f.write(lavaqemu.program(os.path.dirname(os.path.dirname(lavaqemu.__file__)),
                                     spec.qemu_binary, os.path.join(self.lava_dir, "qmp.sock"),
                                     self.stats_path, spec.injector_id, procs.identity()))
        os.chmod(wrapper, 0o755)
        return job

    def start(self):
        """Check what a local LAVA run needs; spawn() writes the job (it
        needs the watchdog time for LAVA's timeouts) and starts lava-run."""
        spec = self.spec
        self.lava_run = lava_run_path()
        if not os.access(spec.qemu_binary, os.X_OK):
            raise SetupError(f"no QEMU at {spec.qemu_binary}")
        template_dir(self.options.get("cache") or CACHE)
        for name in ("ktap.log", "console.log"):
            open(os.path.join(spec.rundir, name), "w").close()

    def spawn(self, timeout_s):
        """Write the job (LAVA's timeouts follow the watchdog's @timeout_s)
        and start lava-run; its log grows in rundir/lava.log."""
        spec, p = self.spec, self._paths()
        self.write_job(timeout_s)
        env = dict(os.environ, PATH=p["bin"] + os.pathsep + os.environ.get("PATH", ""),
                   TMPDIR=p["tmp"])
        cmd = [self.lava_run, "--job-id", str(self.options.get("job_id", 1)),
               "--output-dir", p["out"],
               "--dispatcher", os.path.join(spec.rundir, "lava-dispatcher.yaml"),
               "--device", os.path.join(spec.rundir, "lava-device.yaml"),
               os.path.join(spec.rundir, "lava-job.yaml")]
        with open(os.path.join(spec.rundir, "cmdline"), "w") as f:
            f.write("PATH=" + shlex.quote(p["bin"]) + ":$PATH " + shlex.join(cmd) + "\n")
        self._log = open(self.log_path, "w")
        try:
            # SIGKILL when the launcher dies: its QEMU wrapper, then QEMU,
            # die with it (lavaqemu); the next launcher removes the rest.
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log,
                                         stderr=subprocess.STDOUT, env=env, cwd=self.lava_dir,
                                         start_new_session=True,
                                         preexec_fn=procs.die_with_parent())
        except OSError as e:
            raise SetupError(f"cannot start lava-run: {e.strerror}") from None
        scratchdirs.note_process(spec.scratch, self.proc.pid)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self, grace_s=10):
        if self.running():
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()

    def cleanup(self):
        # QEMU first (the only process with our QMP socket on its command
        # line): lava-run may take seconds to stop, and it starts QEMU in a
        # session of its own.
        procs.kill_mentioning(os.path.join(self.lava_dir, "qmp.sock"))
        # Still running here only when the run is being stopped: its results
        # no longer matter, a short grace does.
        self.kill(grace_s=2)
        procs.kill_mentioning(self.spec.scratch)
        # lava-run removes its download directory, unless it was killed.
        for d in glob.glob(os.path.join(scratchdirs.LAVA_TMP,
                                        os.path.basename(self.spec.scratch) + "-*")):
            shutil.rmtree(d, ignore_errors=True)
        if self._log:
            self._log.close()
            self._log = None
        super().cleanup()

    def wrapper_pid_path(self):
        """Where the QEMU wrapper (lavaqemu) writes its pid once QEMU runs."""
        return os.path.join(self.lava_dir, "qmp.sock.wrapper-pid")

    def signal_wrapper(self):
        """SIGUSR1 to the QEMU wrapper, which then sends alt-sysrq-7 and
        alt-sysrq-t over its QMP; False when there is no wrapper yet."""
        try:
            with open(self.wrapper_pid_path()) as f:
                os.kill(int(f.read()), signal.SIGUSR1)
        except (OSError, ValueError):
            return False
        return True

    def info(self):
        return {"lava_dispatcher": lava_version(), "job": "lava-job.yaml",
                "device": "lava-device.yaml", "log": "lava.log",
                "results": "lava-results.json"}

    def read_log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""
