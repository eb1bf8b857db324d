"""Restored runs (`run --restore`): boot a guest once, save it, restore it
per run with the swap device hot-added; and `--jobs N` sweeps.

QEMU 10.0's nvme and our syncblk refuse migration (.unmigratable), so the
guest is saved before its swap device exists: init finds no /run.sh in the
initramfs and waits for one on fw_cfg (guest/tools/fwcfg.c).  A saved guest
depends only on the machine (QEMU build, kernel, initramfs, command line,
memory, vCPUs and accelerator), not on the device, rules or tests,
so one save serves every scenario of that shape.  Each run restores it with
`-incoming`, then adds over QMP what the scenario's device arguments
describe (a fresh zeroed disk, the fault injector, the device on a
pcie-root-port: ACPI hot-plug, the guest probes it), hands the run's /run.sh
to the guest as fw_cfg file opt/faultline/run.sh and continues.  Under
--deterministic two restored runs of one seed are the same run, byte for
byte (not the cold run's: the guest got there another way).

docs/launcher.md ("Restored runs") is the user side.
"""

import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import time

from faultline.errors import EXIT_PASS, SetupError
from faultline.host import scratchdirs, stop
from faultline.host.messages import say
from faultline.kernel import kconfig
from faultline.paths import CACHE
from faultline.run import guest
from faultline.run.spec_builder import make_spec
from faultline.vm.qemu import QemuMachine
from faultline.vm.qmp import QmpError
from faultline.vm.snapshot import FWCFG_NAME, RestoredMachine, wait_migration

SNAPSHOTS = os.path.join(CACHE, "snapshots")
# The line init prints when it waits for /run.sh (guest/rootfs/init).
READY = "faultline-init: waiting for /run.sh on fw_cfg"
# The saved QEMU's file of that name (guest/tools/fwcfg.c has the same
# two): fwcfg reads it as "not there yet", and it fixes the file's fw_cfg
# key and the size a guest reading fw_cfg through sysfs sees (its driver
# lists the files once, at boot).
FWCFG_PLACEHOLDER = b"#faultline: no run.sh yet"
FWCFG_SIZE = 65536
ROOT_PORT = ["-device", "pcie-root-port,id=swaprp,chassis=1,slot=1"]
# Bumped when what a saved guest holds changes without its inputs changing.
FORMAT = 2
# Hot-pluggable on the root port: one PCI function carrying the disk.
KINDS = ("nvme", "syncblk", "virtio-blk")
# Boots a save may take to get a guest whose clock runs at real time.
SAVE_ATTEMPTS = 3
# guest/tools/fwcfg reads fw_cfg with ioperm(), or through the fw_cfg
# driver's sysfs in a kernel without it.
FWCFG_ACCESS = ("X86_IOPL_IOPERM", "FW_CFG_SYSFS")


def check(sc, opts):
    """One line (SetupError) when @sc cannot run restored with @opts."""
    if opts.backend != "qemu":
        raise SetupError(f"--restore runs on the qemu backend only (not {opts.backend})")
    if sc.device.kind not in KINDS:
        raise SetupError(f"--restore: scenario {sc.name}: a {sc.device.kind} device cannot be "
                         f"hot-added on one root port (restorable: {', '.join(KINDS)})")
    where, config = kconfig.find_config(opts.kernel, opts.modules)
    if config is not None and not any(config.get(o) == "y" for o in FWCFG_ACCESS):
        raise SetupError(f"--restore: kernel {opts.kernel or 'default'} ({where}) lacks both "
                         f"CONFIG_{FWCFG_ACCESS[0]}=y and CONFIG_{FWCFG_ACCESS[1]}=y: the "
                         "restored guest reads its /run.sh from fw_cfg (ioperm or sysfs)")


class PhaseClock:
    """A Progress that also notes when each phase began (seconds since the
    machine started): boot until run.sh speaks, setup until the first test,
    test until FAULTLINE-EXIT."""

    def __init__(self, progress):
        self.progress = progress
        self.begun = {}

    def update(self, ktap, elapsed, hits):
        self.progress.update(ktap, elapsed, hits)
        phase = self.progress.phase.split(" ")[0]
        self.begun.setdefault(phase, round(elapsed, 1))

    def finish(self):
        self.progress.finish()

    def phases(self, prepare_s, start_s, watch_s, total_s):
        """{prepare, boot, setup, test, teardown, judge} in seconds: prepare
        is the inputs (and a restored run's save, when it made one) before
        the machine starts, boot includes the machine's start (a restore's
        load and hot-add), teardown runs from the guest's exit to the end
        of the watch, judge after it (@total_s: the whole run)."""
        b = self.begun
        marks = [0.0, b.get("setup"), b.get("test"), b.get("done"), watch_s]
        out = {"prepare": round(prepare_s, 1)}
        for name, a, z in zip(("boot", "setup", "test", "teardown"), marks, marks[1:]):
            out[name] = round(z - a, 1) if a is not None and z is not None else None
        if out["boot"] is not None:
            out["boot"] = round(out["boot"] + start_s, 1)
        out["judge"] = round(total_s - prepare_s - start_s - watch_s, 1)
        return out


# ---------------------------------------------------------------- the save

def _stamp(path):
    st = os.stat(path)
    return [path, st.st_size, st.st_mtime_ns]


def machine_spec(sc, builds, opts, rundir, scratch, seed=0, initrd=None):
    """The run's MachineSpec with its swap device on the hot-plug root port."""
    hot = dataclasses.replace(sc, device=dataclasses.replace(sc.device, hotplug=True))
    return make_spec(hot, builds, rundir=rundir, scratch=scratch, seed=seed,
                     deterministic=opts.deterministic, accel=opts.accel, initrd=initrd,
                     append=guest.kernel_cmdline(sc))


def split_device_args(args):
    """(command-line part, hot-plug part) of MachineSpec.device_args: the
    root port stays on the command line (it is in the saved machine); the
    disk, injector and device are added after the restore, in argv order."""
    pairs = list(zip(args[::2], args[1::2]))
    if args[len(pairs) * 2:]:
        raise SetupError(f"--restore: odd device argument list {args}")
    later = [p for p in pairs if list(p) != ROOT_PORT]
    return ROOT_PORT, later


def save_spec(sc, builds, opts, rundir, scratch):
    """The machine that is saved: the run's, minus its swap device."""
    spec = machine_spec(sc, builds, opts, rundir, scratch)
    return dataclasses.replace(spec, device_args=list(ROOT_PORT), injector_id=None,
                               rules_file=None, qmp_actions=[], disk=None)


def snapshot_key(spec):
    """What a saved guest depends on, hashed (the device and rules do not count)."""
    inputs = {"format": FORMAT, "qemu": _stamp(spec.qemu_binary), "kernel": _stamp(spec.kernel),
              "initrd": _stamp(spec.initrd), "append": spec.append, "memory": spec.memory,
              "cpus": spec.cpus, "accel": spec.accel, "deterministic": spec.deterministic,
              "extra": spec.extra_args, "firmware": spec.firmware_dirs, "devices": ROOT_PORT}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def _console_has(path, text):
    try:
        with open(path, errors="replace") as f:
            return text in f.read()
    except OSError:
        return False


class BadClock(Exception):
    """The booted guest's clock does not run at real time."""


_UP = re.compile(r"^faultline-init: \S+ up ([0-9.]+)s$", re.M)


def check_clock(console_text, wall_s):
    """Under TCG the guest's TSC is the host's, but the kernel calibrates
    its rate at boot, and on a loaded host that can go wrong by several
    times ("PIT calibration deviates from PMTIMER"; seen: a clock 6.5x
    fast).  A cold run pays that once; a saved guest would pass it to every
    run.  Its uptime at init must fit the wall time since QEMU started
    (less firmware and decompression, at most a few seconds); else BadClock."""
    m = _UP.search(console_text)
    if not m:
        raise BadClock("no uptime line from init")
    up = float(m.group(1))
    if not 0.5 * wall_s - 3.0 <= up <= wall_s + 1.0:
        raise BadClock(f"guest uptime {up:.1f} s after {wall_s:.1f} s of real time")
    return up


def _save(sc, builds, opts, tmp, timeout_s):
    """Boot the guest without its swap device until init waits for /run.sh,
    stop it and migrate it to tmp/state."""
    scratch = scratchdirs.new_scratch(tmp)
    try:
        spec = save_spec(sc, builds, opts, tmp, scratch)
        placeholder = os.path.join(tmp, "run.sh.placeholder")
        with open(placeholder, "wb") as f:
            f.write(FWCFG_PLACEHOLDER.ljust(FWCFG_SIZE, b"\0"))
        spec = dataclasses.replace(spec, extra_args=list(spec.extra_args) + [
            "-fw_cfg", f"name={FWCFG_NAME},file={placeholder}"])
        with QemuMachine(spec) as m:
            t0 = time.monotonic()
            m.start()
            console = os.path.join(tmp, "console.log")
            deadline = time.monotonic() + timeout_s
            while not _console_has(console, READY):
                stop.check()
                if not m.running():
                    raise SetupError("--restore: the guest to save died while booting: "
                                     + (m.diagnostics().splitlines() or ["see " + console])[-1])
                if time.monotonic() > deadline:
                    raise SetupError(f"--restore: the guest to save did not reach init's wait "
                                     f"in {timeout_s:.0f}s ({console})")
                time.sleep(0.1)
            m.qmp("stop")
            # Under icount the guest's time is virtual: nothing to compare.
            if not spec.deterministic:
                with open(console, errors="replace") as f:
                    check_clock(f.read(), time.monotonic() - t0)
            # The default 128 MiB/s limit is for live migration; a stopped
            # guest to a file goes at disk speed.
            m.qmp("migrate-set-parameters", **{"max-bandwidth": 1 << 40})
            m.qmp("migrate", uri="file:" + os.path.join(tmp, "state"))
            wait_migration(m, "--restore: saving the booted guest", 120)
    except QmpError as e:
        raise SetupError(f"--restore: saving the booted guest: {e}") from None
    finally:
        scratchdirs.remove_scratch(scratch)


def ensure_snapshot(sc, builds, opts, timeout_s=None):
    """The directory of the saved guest for @sc's machine, saved now if
    needed (one saver at a time: parallel runs wait for it); (dir, save s or None)."""
    spec = save_spec(sc, builds, opts, "/", "/")
    key = snapshot_key(spec)
    d = os.path.join(SNAPSHOTS, key)
    os.makedirs(SNAPSHOTS, exist_ok=True)
    with open(d + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(d, "state")):
            return d, None
        t0 = time.monotonic()
        # Under the lock no one else saves this machine: any KEY.tmp.* is
        # left by a launcher killed mid-save.
        for stale in os.listdir(SNAPSHOTS):
            if stale.startswith(key + ".tmp."):
                shutil.rmtree(os.path.join(SNAPSHOTS, stale), ignore_errors=True)
        tmp = f"{d}.tmp.{os.getpid()}"
        os.makedirs(tmp)
        if not opts.quiet:
            say(f"--restore: booting and saving the guest for {sc.name}'s machine ({key})")
        for attempt in range(1, SAVE_ATTEMPTS + 1):
            try:
                _save(sc, builds, opts, tmp, timeout_s or sc.timeout_s)
                break
            except BadClock as e:
                say(f"--restore: boot {attempt} of the guest to save: {e}; "
                    + ("booting again" if attempt < SAVE_ATTEMPTS else "giving up"))
                shutil.rmtree(tmp, ignore_errors=True)
                if attempt == SAVE_ATTEMPTS:
                    raise SetupError(f"--restore: the guest's clock was miscalibrated in "
                                     f"{SAVE_ATTEMPTS} boots ({e}): host too loaded?") from None
                os.makedirs(tmp)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        with open(os.path.join(tmp, "snapshot.json"), "w") as f:
            json.dump({"key": key, "scenario": sc.name, "saved_s": round(time.monotonic() - t0, 1),
                       "state_bytes": os.path.getsize(os.path.join(tmp, "state"))}, f, indent=1)
        os.replace(tmp, d)
        return d, round(time.monotonic() - t0, 1)


# ---------------------------------------------------------------- the restore

def machine(sc, seed, opts, builds, rundir, scratch):
    """The machine of one restored run, its inputs written (disk, rules, run.sh)."""
    check(sc, opts)
    snap, saved_s = ensure_snapshot(sc, builds, opts)
    guest.prepare(sc, builds.guest_dir, rundir, scratch, seed)
    size = os.path.getsize(os.path.join(rundir, "run.sh"))
    if size > FWCFG_SIZE:
        raise SetupError(f"--restore: {sc.name}'s run.sh is {size} bytes, more than the "
                         f"{FWCFG_SIZE} a saved guest can read")
    spec = machine_spec(sc, builds, opts, rundir, scratch, seed)
    cmdline, hotplug = split_device_args(spec.device_args)
    spec.device_args = cmdline
    m = RestoredMachine(spec, snap, hotplug, **opts.backend_options)
    if saved_s is not None:
        m.timing["saved_s"] = saved_s
    return m


# ---------------------------------------------------------------- --jobs

def run_parallel(plan, opts, builds, group, jobs, keep_going, one_run):
    """A sweep's (scenario, seed, repeat) plan, @jobs runs at a time, a line
    per finished run; without @keep_going the first failure cancels the
    runs not yet started.  ([(Report, rundir)] in plan order, {rundir: repro})."""
    quiet = dataclasses.replace(opts, quiet=True)
    done, repro_cmds, stopped = {}, {}, []

    def one(i, sc, s, r):
        if stopped:
            return
        rundir = os.path.join(group, f"{sc.name}-seed{s}" + (f"-r{r}" if r else ""))
        os.makedirs(rundir)
        rep, meta = one_run(sc, s, quiet, builds, rundir, verbose=False)
        done[i] = (rep, rundir)
        repro_cmds[rundir] = meta["repro"]
        print(f"  {len(done)}/{len(plan)} {sc.name} seed {s}: {rep.outcome} "
              f"({rep.elapsed_s}s)", flush=True)
        if rep.status != EXIT_PASS and not keep_going:
            stopped.append(s)

    with stop.Executor(max_workers=jobs) as pool:
        for f in [pool.submit(one, i, *item) for i, item in enumerate(plan)]:
            f.result()
    if stopped:
        say(f"stopped after the first failure (seed {stopped[0]}); --keep-going runs the rest")
    return [done[i] for i in sorted(done)], repro_cmds
