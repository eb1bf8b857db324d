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
import json
import os
import shlex
import shutil
import signal
import subprocess
import time

from faultline.errors import SetupError
from faultline.host import procs, scratchdirs, stop
from faultline.judge.ktap import parse_ktap
from faultline.paths import CACHE
from faultline.vm import lavaqemu
from faultline.vm.lava_job import (EXIT_CASE, LAVA_MARGIN_S, MONITOR_NAME, _yaml_dump, _yaml_load,
                                   job_metadata, lava_case_id, make_job, render_device,
                                   template_dir)
from faultline.vm.logtail import LogTail
from faultline.vm.machine import Machine

# Local runs: LAVA's test timeout is this much after our watchdog, which
# asks the guest for a task dump first.
DUMP_GRACE_S = 30


# ---------------------------------------------------------------- results

def parse_lava_log(text):
    """LAVA's log -> (target output lines, result entries, errors).

    One entry a line, {"dt": ..., "lvl": ..., "msg": ...} (lava-run's
    output; the server's job log has the same lines as a YAML list)."""
    target, results, errors = [], [], []
    for line in text.splitlines():
        line = line[2:] if line.startswith("- {") else line
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            # lava-run writes JSON except for tagged values (size: ! "123").
            try:
                entry = _yaml_load(line)
            except Exception:  # noqa: BLE001 - one odd line must not lose the rest
                continue
        if not isinstance(entry, dict):
            continue
        lvl, msg = entry.get("lvl"), entry.get("msg")
        if lvl == "target" and isinstance(msg, str):
            target.append(msg)
        elif lvl == "results" and isinstance(msg, dict):
            results.append(msg)
        elif lvl in ("error", "exception") and msg:
            errors.append(str(msg))
    return target, results, errors


def _ktap_lines(lines, started=False):
    """(KTAP lines among LAVA's target @lines, whether KTAP has started):
    from '# kernel' on."""
    out = []
    for ln in lines:
        s = ln.rstrip("\r")
        started = started or s.startswith("# kernel ")
        if started:
            out.append(s + "\n")
    return out, started


def ktap_from_target(lines):
    """The ttyS1 (KTAP) stream from LAVA's target lines."""
    return "".join(_ktap_lines(lines)[0])


class LavaKtap:
    """The KTAP stream as LAVA logs it, read incrementally from lava.log (a
    LogTail of KTAP text: text, partial, poll(), lines())."""

    def __init__(self, log_path):
        self.log = LogTail(log_path)
        self.text, self.partial = "", ""
        self.started = False

    def poll(self):
        target, _, _ = parse_lava_log(self.log.poll())
        new, self.started = _ktap_lines(target, self.started)
        self.text += "".join(new)
        return "".join(new)

    def lines(self):
        return self.text.splitlines()


def case_results(results):
    """Our cases from LAVA's results: [{case, name, result}], LAVA's own
    job/boot results (suite lava) left out."""
    cases = []
    for r in results:
        if r.get("definition") != MONITOR_NAME:
            continue
        extra = r.get("extra") if isinstance(r.get("extra"), dict) else {}
        cases.append({"case": r.get("case"), "name": extra.get("test_case_id", r.get("case")),
                      "result": r.get("result")})
    return cases


def job_verdict(results, result_yaml_text):
    """LAVA's job result ('pass'/'fail'/None) and its error type and message."""
    verdict, etype, emsg = None, None, None
    for r in results:
        if r.get("definition") == "lava" and r.get("case") == "job":
            verdict = r.get("result")
            extra = r.get("extra") if isinstance(r.get("extra"), dict) else {}
            etype, emsg = extra.get("error_type"), extra.get("error_msg")
    if verdict is None and result_yaml_text:
        try:
            doc = _yaml_load(result_yaml_text)
        except Exception:  # noqa: BLE001
            doc = None
        for r in doc if isinstance(doc, list) else []:
            if isinstance(r, dict) and r.get("case") == "job":
                verdict = r.get("result")
                meta = r.get("metadata") or {}
                etype, emsg = meta.get("error_type"), meta.get("error_msg")
    return verdict, etype, emsg


def guest_exit_from(cases, ktap):
    """FAULTLINE-EXIT status: the number from the KTAP stream, else the
    LAVA case (pass -> 0, fail -> 1), else None (never reported)."""
    for ln in ktap.splitlines():
        if ln.startswith(EXIT_CASE + " "):
            try:
                return int(ln.split()[1])
            except (IndexError, ValueError):
                pass
    for c in cases:
        if c["name"] == EXIT_CASE:
            return 0 if c["result"] == "pass" else 1
    return None


def compare_cases(cases, ktap_results):
    """Disagreements between LAVA's per-case results and our KTAP parse
    (they read the same lines): list of one-line problems."""
    want = {"ok": "pass", "fail": "fail", "skip": "skip", "xfail": "pass"}
    lava = {}
    for c in cases:
        if c["name"] != EXIT_CASE:
            lava.setdefault(c["case"], []).append(c["result"])
    problems = []
    for r in ktap_results:
        case = lava_case_id(r["name"])
        got = lava.get(case)
        if not got:
            problems.append(f"LAVA has no result for {r['name']!r}")
            continue
        res = got.pop(0)
        if res != want.get(r["kind"]):
            problems.append(f"LAVA says {res} for {r['name']!r}, KTAP says {r['kind']}")
    return problems


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
    """One run as a LAVA job run by lava-run on this host.

    Backend options: cache (faultline's cache dir, for the device template),
    metadata (the job metadata), job_id.  Files in the run directory:
    lava-job.yaml, lava-device.yaml, lava.log (LAVA's log), lava-results.json
    (the converted cases), console.log (ttyS0), ktap.log (ttyS1 as LAVA saw it)."""

    backend = "lava"

    def __init__(self, spec, **backend_options):
        super().__init__(spec, **backend_options)
        self.proc = None
        self.lava_dir = os.path.join(spec.scratch, "lava")
        self.stats_path = os.path.join(spec.rundir, "lava-stats.json")
        self.log_path = os.path.join(spec.rundir, "lava.log")
        self._log = None
        self._diag = []
        self._cases = []
        self._give_up = None

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
        files = {"lava-job.yaml": _yaml_dump(job), "lava-device.yaml": device,
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
        """Check what a local LAVA run needs; run() writes the job (it needs
        the watchdog time for LAVA's timeouts) and starts lava-run."""
        spec = self.spec
        self.lava_run = lava_run_path()
        if not os.access(spec.qemu_binary, os.X_OK):
            raise SetupError(f"no QEMU at {spec.qemu_binary}")
        template_dir(self.options.get("cache") or CACHE)
        for name in ("ktap.log", "console.log"):
            open(os.path.join(spec.rundir, name), "w").close()

    def _metadata(self):
        """Job metadata from the run's run.json (written before the boot)."""
        spec = self.spec
        try:
            with open(os.path.join(spec.rundir, "run.json")) as f:
                meta = json.load(f)
        except (OSError, ValueError):
            meta = {}
        return job_metadata(spec.scenario, meta.get("seed"), meta.get("faultline", "?"),
                            meta.get("run_command", ""), meta.get("kernel"))

    def _spawn(self, timeout_s):
        spec, p = self.spec, self._paths()
        if "metadata" not in self.options:
            self.options = dict(self.options, metadata=self._metadata())
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

    def diagnostics(self):
        return "\n".join(self._diag)

    def info(self):
        return {"lava_dispatcher": lava_version(), "job": "lava-job.yaml",
                "device": "lava-device.yaml", "log": "lava.log",
                "results": "lava-results.json"}

    def _read_log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    # -- the watch loop's primitives (watch.watch): LAVA's QEMU has no QMP of
    # ours; KTAP comes from LAVA's log, as LAVA logs it.  The watchdog counts
    # from QEMU's start, as on the qemu backend; when it fires before the
    # guest reported, the QEMU wrapper asks the guest for a sysrq task dump,
    # then lava-run is stopped (LAVA's own test timeout is later).
    has_qmp = False

    def begin(self, timeout_s):
        self._spawn(timeout_s + DUMP_GRACE_S)

    def streams(self):
        return {"ktap": LavaKtap(self.log_path),
                "console": LogTail(os.path.join(self.spec.rundir, "console.log"))}

    def _wrapper_pid(self):
        return os.path.join(self.lava_dir, "qmp.sock.wrapper-pid")

    def watchdog_armed(self):
        return os.path.exists(self._wrapper_pid())

    def give_up_at(self, t0, timeout_s):
        self._give_up = t0 + timeout_s + LAVA_MARGIN_S + DUMP_GRACE_S + 60
        return self._give_up

    def request_task_dump(self):
        """SIGUSR1 to the QEMU wrapper: alt-sysrq-7, alt-sysrq-t over its QMP."""
        try:
            with open(self._wrapper_pid()) as f:
                os.kill(int(f.read()), signal.SIGUSR1)
        except (OSError, ValueError):
            return False
        return True

    def finish(self, w, hang):
        """Wait for lava-run to end (the wrapper quits QEMU once the guest
        is off), then convert LAVA's results (see convert())."""
        while not hang and self.running():
            if time.monotonic() > self._give_up:
                hang = True
                break
            time.sleep(0.5)
            stop.check()
        if hang:
            self.kill()
        self.convert(w, hang)
        if hang:
            w.hang = w.guest_exit is None

    def convert(self, w, killed=False):
        """LAVA's log and result.yaml -> ktap.log, lava-results.json and @w."""
        spec = self.spec
        target, results, errors = parse_lava_log(self._read_log())
        ktap = ktap_from_target(target)
        with open(os.path.join(spec.rundir, "ktap.log"), "w") as f:
            f.write(ktap)
        result_yaml = ""
        for path in glob.glob(os.path.join(self._paths()["out"], "**", "result.yaml"),
                              recursive=True):
            with open(path, errors="replace") as f:
                result_yaml = f.read()
        self._cases = case_results(results)
        verdict, etype, emsg = job_verdict(results, result_yaml)
        w.guest_exit = guest_exit_from(self._cases, ktap)
        timed_out = any("timed out" in e or "timeout" in e.lower() for e in errors) or \
            any("lava test monitoring has timed out" in ln for ln in target)
        log = self._read_log()
        if "lava test monitoring has timed out" in log or killed:
            timed_out = True
        if w.guest_exit is None and timed_out:
            w.hang = True
        if os.path.exists(self.stats_path):
            try:
                with open(self.stats_path) as f:
                    w.faults = json.load(f)
            except (OSError, ValueError) as e:
                w.faults = {"error": f"lava-stats.json: {e}"}
        elif spec.injector_id and spec.rules_file:
            w.faults = {"error": "the QEMU wrapper saved no fault statistics"}
        if verdict != "pass":
            self._diag.append(f"LAVA job {verdict or 'did not finish'}"
                              + (f" ({etype}: {emsg})" if etype or emsg else ""))
        for e in errors:
            if e not in self._diag:
                self._diag.append(e)
        # QEMU's own complaints reach LAVA's stream; the template's NIC
        # options (-net nic ... -net none) always cause three warnings.
        self._diag += [ln for ln in target if ln.startswith("qemu-system-x86_64:")
                       and "warning:" not in ln]
        stderr_path = os.path.join(spec.rundir, "qemu.stderr")
        with open(stderr_path, "w") as f:
            f.write(self.diagnostics() + ("\n" if self._diag else ""))
        mismatches = compare_cases(self._cases, parse_ktap(ktap)["results"])
        doc = {"job": {"result": verdict, "error_type": etype, "error_msg": emsg},
               "cases": self._cases, "hang": w.hang, "guest_exit": w.guest_exit,
               "mismatches": mismatches}
        with open(os.path.join(spec.rundir, "lava-results.json"), "w") as f:
            json.dump(doc, f, indent=1)
        w.stderr = self.diagnostics()
        return w

    @property
    def cases(self):
        return self._cases
