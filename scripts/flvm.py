"""faultline VM runs: guest script, initramfs, QEMU command line, watching a
run (progress, QMP polling, watchdog) and judging its outcome.

The run directory layout is documented in docs/quickstart.md.
"""

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import flscenario

EXIT_PASS, EXIT_FAIL, EXIT_SETUP, EXIT_CRASH = 0, 1, 2, 3
OUTCOMES = {EXIT_PASS: "pass", EXIT_FAIL: "fail", EXIT_SETUP: "setup-error",
            EXIT_CRASH: "crash"}

FIRMWARE_DIRS = ["/usr/share/seabios", "/usr/lib/ipxe/qemu", "/usr/share/qemu"]
FIXED_RTC = "2026-01-01T00:00:00"
INJECTOR_ID = "fi0"

# Console lines that mean the kernel is unhealthy (tainting by our own
# out-of-tree module is expected and is not among them).
CRASH_MARKERS = ["Kernel panic", "kernel BUG at", "BUG: unable to handle",
                 "Oops:", "general protection fault"]
SPLAT_MARKERS = ["WARNING: CPU", "BUG: ", "sleeping function called from invalid context",
                 "possible circular locking dependency", "INFO: task", "Call Trace:"]


class SetupError(Exception):
    """A missing piece the user can fix; printed as one line, exit 2."""


def parse_seeds(text):
    """'A..B' (inclusive) -> [A..B]; for --seeds of run and compare."""
    try:
        a, b = (int(x) for x in text.split("..", 1))
    except ValueError:
        raise SetupError(f"--seeds {text!r}: expected A..B, e.g. 1..20") from None
    if b < a or b - a >= 100000:
        raise SetupError(f"--seeds {text!r}: B must be >= A (and at most 100000 seeds)")
    return list(range(a, b + 1))


def new_dir(base, name):
    """A fresh BASE/DATE-TIME-NAME directory (run, sweep or comparison)."""
    os.makedirs(base, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for i in range(1000):
        d = os.path.join(base, f"{stamp}-{name}" + (f"-{i}" if i else ""))
        try:
            os.makedirs(d)
            return d
        except FileExistsError:
            continue
    raise SetupError("cannot create a run directory in " + base)


# ---------------------------------------------------------------- QMP

class Qmp:
    """Minimal QMP client (one command at a time, events are skipped)."""

    def __init__(self, path, timeout=10.0):
        deadline = time.monotonic() + timeout
        while True:
            self.sock = socket.socket(socket.AF_UNIX)
            try:
                self.sock.connect(path)
                break
            except OSError:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.sock.settimeout(timeout)
        self.file = self.sock.makefile("rwb")
        self._read()
        self.cmd("qmp_capabilities")

    def _read(self):
        while True:
            line = self.file.readline()
            if not line:
                raise EOFError("QMP connection closed")
            msg = json.loads(line)
            if "event" not in msg:
                return msg

    def cmd(self, name, **args):
        self.file.write(json.dumps({"execute": name, "arguments": args}).encode() + b"\n")
        self.file.flush()
        reply = self._read()
        if "error" in reply:
            raise RuntimeError(f"QMP {name}: {reply['error'].get('desc')}")
        return reply.get("return")

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


# ---------------------------------------------------------------- KTAP

def parse_ktap(text):
    """Count KTAP results and collect '# key value' diagnostics (summed)."""
    res = {"ok": 0, "not_ok": 0, "skip": 0, "xfail": 0, "bail": False, "diag": {},
           "failures": [], "results": []}
    suite = ""
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("# test: "):
            suite = s[len("# test: "):]
        if s.startswith("ok ") or s.startswith("not ok "):
            head, _, directive = s.partition(" # ")
            directive = directive.upper()
            passed = s.startswith("ok ")
            if directive.startswith("SKIP"):
                res["skip"] += 1
                kind = "skip"
            elif directive.startswith("XFAIL"):
                res["xfail"] += 1
                kind = "xfail"
            elif passed:
                res["ok"] += 1
                kind = "ok"
            else:
                res["not_ok"] += 1
                res["failures"].append(s)
                kind = "fail"
            name = head.split(" ", 2 if passed else 3)[-1]
            res["results"].append({"suite": suite, "name": name, "kind": kind, "line": s})
        elif s.startswith("Bail out!"):
            res["bail"] = True
            res["failures"].append(s)
            res["results"].append({"suite": suite, "name": s, "kind": "fail", "line": s})
        elif s.startswith("# ") and len(s.split()) >= 3:
            parts = s[2:].split()
            key = " ".join(parts[:-1])
            try:
                res["diag"][key] = res["diag"].get(key, 0) + int(parts[-1])
            except ValueError:
                pass
    return res


def console_health(console):
    crash = [m for m in CRASH_MARKERS if m in console]
    splats = [m for m in SPLAT_MARKERS if m in console]
    return crash, splats


def tail(text, n=25):
    return "\n".join(text.splitlines()[-n:])


# ---------------------------------------------------------------- guest side

def make_run_sh(sc, seed):
    """The guest side of a scenario: device setup, then each test."""
    lines = ["#!/bin/sh", f"# generated by faultline: scenario {sc.name}",
             'echo "# kernel $(uname -r)"', f'echo "# seed {seed}"',
             "fail=0"]
    dev = sc.device
    module, swapdev = ("nvme", "/dev/nvme0n1") if dev.kind == "nvme" else \
        ("syncblk", "/dev/syncblk0")
    lines += [f'[ -d /sys/module/{module} ] || modprobe {module} || '
              f'{{ echo "Bail out! modprobe {module} failed"; exit 1; }}',
              f"swapdev={swapdev}",
              'i=0; while [ ! -b $swapdev ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done',
              '[ -b $swapdev ] || { echo "Bail out! $swapdev did not appear"; exit 1; }',
              'echo "# device $swapdev"']
    swap_on = sc.swap.get("enabled", True)
    if swap_on:
        lines += ['mkswap $swapdev >/dev/null && swapon $swapdev || '
                  '{ echo "Bail out! swapon $swapdev failed"; exit 1; }']
    if sc.swap.get("zswap", False):
        lines += ["echo Y > /sys/module/zswap/parameters/enabled",
                  "echo Y > /sys/module/zswap/parameters/shrinker_enabled"]
    else:
        lines += ["echo N > /sys/module/zswap/parameters/enabled 2>/dev/null"]
    for t in sc.tests:
        lines += [f'echo "# test: {t}"', f"{t} || fail=1"]
    if swap_on:
        lines += ["swapoff $swapdev || fail=1"]
    lines += ["exit $fail"]
    return "\n".join(lines) + "\n"


def build_initrd(guest_dir, run_sh, workdir):
    """The cached base initramfs plus a second cpio with /run.sh."""
    extra = os.path.join(workdir, "extra")
    os.makedirs(extra, exist_ok=True)
    with open(os.path.join(extra, "run.sh"), "w") as f:
        f.write(run_sh)
    os.chmod(os.path.join(extra, "run.sh"), 0o755)
    # Same scenario, same bytes: fixed mtime and inode numbers (--deterministic).
    os.utime(os.path.join(extra, "run.sh"), (0, 0))
    cpio = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet", "-R", "0:0", "--reproducible"],
                          input=b"run.sh\n", cwd=extra, stdout=subprocess.PIPE, check=True)
    initrd = os.path.join(workdir, "initramfs.cpio")
    with open(initrd, "wb") as out:
        with open(os.path.join(guest_dir, "initramfs.cpio.gz"), "rb") as base:
            shutil.copyfileobj(base, out)
        # The kernel takes an uncompressed cpio after a compressed one only at
        # a 4-byte aligned offset; NUL padding between archives is skipped.
        out.write(b"\0" * (-out.tell() % 4))
        out.write(cpio.stdout)
    shutil.rmtree(extra)
    return initrd


def kernel_cmdline(sc):
    # tsc=reliable: under TCG the TSC follows host time, so a descheduled
    # vCPU thread looks like TSC skew; the clocksource watchdog then drops
    # tsc-early with no other clocksource yet and timers stall (seen under
    # host load: RCU stalls, a hung guest).  sysrq_always_enabled: the
    # watchdog asks a hung guest for a task dump (alt-sysrq-t).
    cmdline = "console=ttyS0 panic=-1 tsc=reliable no_timer_check sysrq_always_enabled"
    if sc.vm.panic_on_oops:
        cmdline += " oops=panic"
    return (cmdline + " loglevel=6 " + sc.vm.cmdline).strip()


def qemu_cmdline(sc, qemu_dir, kernel, initrd, rundir, scratch, seed, deterministic,
                 accel="tcg"):
    """The QEMU argv for one run.  Files: console.log, ktap.log and faults.jsonl
    in @rundir; disk.img and qmp.sock in @scratch; rules.txt in @rundir."""
    q = [os.path.join(qemu_dir, "bin", "qemu-system-x86_64"),
         "-nodefaults", "-display", "none", "-no-reboot", "-no-shutdown",
         "-machine", "q35", "-m", sc.vm.memory, "-nic", "none",
         "-L", os.path.join(qemu_dir, "share")]
    for d in FIRMWARE_DIRS:
        q += ["-L", d]
    det = ""
    if deterministic:
        q += ["-accel", "tcg", "-icount", "shift=4,sleep=off,align=off", "-smp", "1",
              "-rtc", f"base={FIXED_RTC},clock=vm"]
        # The devices do their I/O in the MMIO write and complete on virtual
        # timers only with an injector that says so (rules or not).
        det = ",deterministic=on"
    else:
        q += ["-accel", accel, "-smp", str(sc.vm.cpus)]
    q += ["-kernel", kernel, "-initrd", initrd, "-append", kernel_cmdline(sc),
          "-serial", "file:" + os.path.join(rundir, "console.log"),
          "-serial", "file:" + os.path.join(rundir, "ktap.log"),
          "-qmp", "unix:" + os.path.join(scratch, "qmp.sock") + ",server=on,wait=off"]
    dev = sc.device
    disk = os.path.join(scratch, "disk.img")
    q += ["-blockdev", f"driver=file,filename={disk},node-name=disk0,cache.direct=off"]
    fi = ""
    if sc.faults.rules.strip() or det:
        rules = f"rules={os.path.join(rundir, 'rules.txt')}," if sc.faults.rules.strip() else ""
        q += ["-object", f"fault-injector,id={INJECTOR_ID},{rules}seed={seed},"
              f"log={os.path.join(rundir, 'faults.jsonl')}{det}"]
        fi = f",fault-injector={INJECTOR_ID}"
    if dev.kind == "nvme":
        q += ["-device", f"nvme,serial=faultline0,drive=disk0{fi}{dev.extra}"]
    elif dev.kind == "syncblk":
        q += ["-device", f"syncblk-pci,drive=disk0,completion={dev.completion}{fi}{dev.extra}"]
    return q


def check_deterministic(sc):
    """Only I/O done inside the MMIO handler is reproducible under icount.

    The fault-injector's deterministic=on (always set by --deterministic)
    gives that to NVMe and to every syncblk completion mode."""
    if sc.device.kind not in ("nvme", "syncblk"):
        raise SetupError(f"{sc.name}: --deterministic supports nvme and syncblk devices, "
                         f"not {sc.device.kind}")


def prepare(sc, guest_dir, rundir, scratch, seed):
    """Write the run's inputs (rules, run.sh, disk, initramfs); returns initrd."""
    with open(os.path.join(scratch, "disk.img"), "wb") as f:
        f.truncate(sc.device.size_bytes)
    if sc.faults.rules.strip():
        with open(os.path.join(rundir, "rules.txt"), "w") as f:
            f.write(sc.faults.rules)
    run_sh = make_run_sh(sc, seed)
    with open(os.path.join(rundir, "run.sh"), "w") as f:
        f.write(run_sh)
    return build_initrd(guest_dir, run_sh, scratch)


# ---------------------------------------------------------------- progress

class Progress:
    """What the user sees while a VM runs.

    On a terminal: the KTAP stream plus one status line redrawn in place
    (phase, elapsed, rule hits).  Otherwise (CI logs): one line per phase
    change and the failing KTAP lines only, so logs stay short.
    """

    def __init__(self, ntests, quiet=False, stream=None):
        self.out = stream or sys.stdout
        self.tty = self.out.isatty()
        self.quiet = quiet
        self.ntests = ntests
        self.phase = "boot"
        self.tests_started = 0
        self.shown = 0
        self.status_len = 0

    def _clear(self):
        if self.tty and self.status_len:
            self.out.write("\r" + " " * self.status_len + "\r")
            self.status_len = 0

    def update(self, ktap, elapsed, hits):
        lines = [ln for ln in ktap.splitlines(keepends=True) if ln.endswith("\n")]
        phase = self.phase
        for ln in lines[self.shown:]:
            if ln.startswith("# kernel ") and phase == "boot":
                phase = "setup"
            elif ln.startswith("# test: "):
                self.tests_started += 1
                phase = f"test {self.tests_started}/{self.ntests}"
            elif ln.startswith("FAULTLINE-EXIT"):
                phase = "done"
        new = lines[self.shown:]
        self.shown = len(lines)
        self._clear()
        if not self.quiet:
            for ln in new:
                if ln.startswith("FAULTLINE-EXIT"):
                    continue
                if self.tty or ln.startswith("not ok") or ln.startswith("Bail out"):
                    self.out.write("  | " + ln)
        if phase != self.phase and not self.tty and not self.quiet:
            self.out.write(f"  [{elapsed:6.1f}s] {phase}\n")
        self.phase = phase
        if self.tty and not self.quiet:
            hit_text = " ".join(f"{k}={v}" for k, v in hits.items()) if hits else ""
            status = f"  [{self.phase}] {elapsed:5.1f}s" + (f"  hits: {hit_text}" if hit_text
                                                            else "")
            status = status[:max(20, shutil.get_terminal_size().columns - 1)]
            self.out.write(status)
            self.status_len = len(status)
        self.out.flush()

    def finish(self):
        self._clear()
        self.out.flush()


# ---------------------------------------------------------------- one run

def run_vm(sc, qemu_dir, guest_dir, rundir, seed, deterministic=False, accel="tcg",
           quiet=False, kernel=None):
    """Boot one VM for scenario @sc; returns the report dict (also report.json)."""
    os.makedirs(rundir, exist_ok=True)
    t0 = time.monotonic()
    # Disk image, initramfs and QMP socket live in RAM: unlinking a disk file
    # with gigabytes still in writeback stalled runs for minutes (measured),
    # and a short path keeps the socket under the 108-byte sun_path limit.
    scratch = tempfile.mkdtemp(prefix="faultline-",
                               dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    try:
        initrd = prepare(sc, guest_dir, rundir, scratch, seed)
        cmd = qemu_cmdline(sc, qemu_dir, kernel or os.path.join(guest_dir, "vmlinuz"), initrd,
                           rundir, scratch, seed, deterministic, accel)
        with open(os.path.join(rundir, "cmdline"), "w") as f:
            f.write(shlex.join(cmd) + "\n")
        watch = _watch(sc, cmd, rundir, scratch, t0, quiet)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return judge(sc, rundir, seed, deterministic, watch, time.monotonic() - t0)


def _poll_hits(qmp):
    stats = qmp.cmd("x-fault-query-stats", id=INJECTOR_ID)
    return stats, {r["name"]: r["hits"] for r in stats.get("rules", [])}


def _watch(sc, cmd, rundir, scratch, t0, quiet):
    """Run QEMU until the guest reports, crashes, or the watchdog fires."""
    ktap_path = os.path.join(rundir, "ktap.log")
    console_path = os.path.join(rundir, "console.log")
    for p in (ktap_path, console_path):
        open(p, "w").close()
    has_rules = bool(sc.faults.rules.strip())
    progress = Progress(len(sc.tests), quiet)
    stderr = open(os.path.join(rundir, "qemu.stderr"), "w")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                            start_new_session=True)
    w = {"hang": False, "guest_exit": None, "faults": None, "task_dump": None}
    qmp, hits, last_poll = None, {}, 0.0
    deadline = t0 + sc.timeout_s
    try:
        while True:
            time.sleep(0.2)
            with open(ktap_path, errors="replace") as f:
                text = f.read()
            now = time.monotonic()
            if qmp is None and proc.poll() is None:
                try:
                    qmp = Qmp(os.path.join(scratch, "qmp.sock"), timeout=5.0)
                except (OSError, EOFError, ValueError):
                    qmp = None
            if qmp and has_rules and now - last_poll > 1.0:
                last_poll = now
                try:
                    _, hits = _poll_hits(qmp)
                except (OSError, EOFError, RuntimeError, ValueError):
                    pass
            progress.update(text, now - t0, hits)
            for ln in text.splitlines():
                if ln.startswith("FAULTLINE-EXIT "):
                    w["guest_exit"] = int(ln.split()[1])
            if w["guest_exit"] is not None or proc.poll() is not None:
                break
            with open(console_path, errors="replace") as f:
                if "Kernel panic" in f.read():
                    break
            if now > deadline:
                w["hang"] = True
                w["task_dump"] = _task_dump(qmp, console_path)
                break
        progress.finish()
        # The guest powered off: QEMU is paused (-no-shutdown); read the injector.
        if qmp and proc.poll() is None and has_rules:
            try:
                w["faults"], _ = _poll_hits(qmp)
            except (OSError, EOFError, RuntimeError, ValueError) as e:
                w["faults"] = {"error": str(e)}
    finally:
        if qmp:
            qmp.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        stderr.close()
    return w


def _task_dump(qmp, console_path):
    """Ask a hung guest for alt-sysrq-t and wait for the dump to settle.

    Returns the console offset where the dump starts, or None."""
    if qmp is None:
        return None
    size0 = os.path.getsize(console_path)
    try:
        # Console loglevel 7 first: the task lines are KERN_INFO.
        for key in ("7", "t"):
            qmp.cmd("send-key", keys=[{"type": "qcode", "data": k}
                                      for k in ("alt", "sysrq", key)])
            time.sleep(0.3)
    except (OSError, EOFError, RuntimeError, ValueError):
        return None
    deadline, last = time.monotonic() + 10, -1
    while time.monotonic() < deadline:
        time.sleep(0.5)
        size = os.path.getsize(console_path)
        if size == last and size > size0:
            break
        last = size
    return size0 if os.path.getsize(console_path) > size0 else None


def judge(sc, rundir, seed, deterministic, w, elapsed):
    """Outcome of a finished run from its files; writes report.json."""
    def read(name):
        try:
            with open(os.path.join(rundir, name), errors="replace") as f:
                return f.read()
        except OSError:
            return ""
    console, ktap, qemu_err = read("console.log"), read("ktap.log"), read("qemu.stderr").strip()
    crash, splats = console_health(console)
    k = parse_ktap(ktap)
    guest_exit = w["guest_exit"]
    outcome = None
    if w["hang"]:
        status, outcome = EXIT_CRASH, "hang"
        reason = (f"hang: no result after {sc.timeout_s:.0f}s, watchdog killed QEMU"
                  + (", sysrq task dump in the report" if w["task_dump"] is not None
                     else ", no task dump (guest did not answer sysrq)"))
    elif crash:
        status, reason = EXIT_CRASH, "kernel crash: " + ", ".join(crash)
    elif guest_exit is None:
        if "faultline-init" not in console and qemu_err:
            status, reason = EXIT_SETUP, "QEMU failed: " + qemu_err.splitlines()[-1]
        elif "faultline-init" not in console:
            status, reason = EXIT_CRASH, "kernel did not boot to init"
        else:
            status, reason = EXIT_CRASH, "guest stopped without reporting a result"
    elif splats:
        status, reason = EXIT_FAIL, "kernel splat: " + ", ".join(splats)
    elif any(f.startswith("Bail out! modprobe") for f in k["failures"]):
        # The kernel lacks a driver the scenario needs: fix the setup, not the code.
        status, reason = EXIT_SETUP, (next(f for f in k["failures"] if "modprobe" in f)
                                      + " (does the kernel/--modules tree have it?)")
    elif guest_exit != 0 or k["not_ok"] or k["bail"]:
        status, reason = EXIT_FAIL, (f"guest tests failed (exit {guest_exit}, "
                                     f"{k['not_ok']} not ok)")
    elif k["ok"] == 0:
        status, reason = EXIT_FAIL, "guest tests reported no result"
    else:
        status, reason = EXIT_PASS, "pass"
    faults = w["faults"]
    if status == EXIT_PASS:
        problems = flscenario.check_expectations(sc, k, console, faults)
        if problems:
            status, reason = EXIT_FAIL, "expectation failed: " + "; ".join(problems)
    release = ""
    for ln in ktap.splitlines():
        if ln.startswith("# kernel "):
            release = ln.split()[2]
    report = {
        "scenario": sc.name, "seed": seed, "status": status,
        "outcome": outcome or OUTCOMES[status], "reason": reason,
        "kernel": release, "device": sc.device.kind, "completion": sc.device.completion,
        "elapsed_s": round(elapsed, 1), "deterministic": deterministic,
        "ktap": {key: v for key, v in k.items() if key not in ("diag", "results")},
        "diag": k["diag"], "faults": faults,
    }
    if isinstance(faults, dict) and "digest" in faults:
        report["digest"] = f"{faults['digest']:016x}"
    if os.path.exists(os.path.join(rundir, "faults.jsonl")):
        report["fault_log"] = "faults.jsonl"
    if status != EXIT_PASS:
        report["console_tail"] = tail(console.encode()[:w["task_dump"]].decode(errors="replace")
                                      if w["task_dump"] is not None else console)
    if w["task_dump"] is not None:
        dump = console.encode()[w["task_dump"]:].decode(errors="replace")
        report["task_dump"] = "\n".join(dump.splitlines()[:400])
    with open(os.path.join(rundir, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    if isinstance(faults, dict) and "rules" in faults:
        with open(os.path.join(rundir, "stats.json"), "w") as f:
            json.dump(faults, f, indent=1)
    report["_results"] = k["results"]
    return report
