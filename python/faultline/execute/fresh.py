"""One program in a fresh boot with no host round trip: `prog run
--deterministic` and `prog minimize --deterministic` (docs/programs.md,
"Determinism and replay").

Under `-icount ... sleep=off` a guest that waits for the host lets its
virtual clock jump from timer to timer for as long as the host takes, so a
program that waits for `start` and `teardown` runs at another virtual time
each run.  Here the guest never waits for the host:

- the VM has the program's own disks only (it boots faster, and the
  firmware and kernel probe no virtio-blk disk, whose filter completes on
  host I/O and so moved the boot's virtual time), each injector loading the
  program's rules at start, gated on the engine state (devices.gated_rules);
- the initramfs holds the program's canonical text (a file there, not in
  the guest's /tmp: a tmpfs file would count in the Shmem the leak check
  compares) and a /run.sh that runs `progexec run --gate`: the guest opens
  and closes the gate itself;
- the report goes to the virtio-serial port, which QEMU writes into a file
  (transcript.txt) that the host follows with the session's reader;
- the injectors' statistics are read once the guest has powered off (QEMU
  stays, paused, under -no-shutdown).

virtio-blk's faults come from a block filter that completes on host AIO,
so a program with a virtio-blk disk cannot run this way (refusal()).
"""

import os
import shlex
import time

from faultline.execute import devices
from faultline.execute.channel import MAX_LINE, POLL_S, BadLine, ChannelError, GuestGone, \
    GuestSilent, take_line
from faultline.execute.session import Outcome, device_faults, kernel_check, mapped_reason, \
    read_until, settle
from faultline.execute.vm import guest_alive, program_run_sh, read_text
from faultline.host import scratchdirs
from faultline.run import guest
from faultline.run.spec_builder import make_spec
from faultline.vm.qemu import QemuMachine
from faultline.vm.qmp import QmpError

TRANSCRIPT = "transcript.txt"
GUEST_DIR = "pe"                # the program's text in the initramfs: /pe/NAME
KERNEL_PREFIX = "# kernel "     # run.sh's first line


def refusal(bound, rules):
    """Why the program cannot run without the host (one line), or None."""
    for dev, disk in bound.items():
        if disk.kind == "virtio-blk":
            return (f"swap {dev}: virtio-blk's faults come from a block filter that completes "
                    "on host I/O, not on the virtual clock: it cannot run --deterministic")
    try:
        devices.gated_rules(bound, rules)
    except devices.Refusal as e:
        return str(e)
    return None


def drivers_sh():
    """The lines of the long-lived guest's /run.sh before it starts the
    executor: the drivers a fresh boot loads too."""
    return [ln for ln in program_run_sh().splitlines() if not ln.startswith("exec progexec")]


def gated_argv(prep):
    """`progexec run --gate` of @prep's text in the initramfs, its devices
    bound, failed reads allowed where its rules fail them."""
    argv = ["progexec", "run", f"/{GUEST_DIR}/{prep.name}"]
    for dev, disk in prep.bound.items():
        argv += ["--bind", f"{dev}={disk.target}"]
    for dev, rules in prep.rules.items():
        if any(devices.fails_reads(text) for _, text in rules):
            argv += ["--allow-failed-read", dev]
    return argv + ["--gate", f"{devices.GATE_ON_SECTOR},{devices.GATE_OFF_SECTOR}"]


def run_sh(prep):
    """The guest's /run.sh: the drivers, the port, then `progexec run --gate`
    with its report on the port."""
    keep, argv = drivers_sh(), gated_argv(prep)
    return "\n".join(keep + [
        "port=",
        "for p in /sys/class/virtio-ports/*; do",
        f'    [ "$(cat $p/name 2>/dev/null)" = {devices.CHANNEL_PORT} ] && port=/dev/${{p##*/}}',
        "done",
        f'[ -n "$port" ] || {{ echo "Bail out! no virtio port {devices.CHANNEL_PORT}"; exit 1; }}',
        shlex.join(argv) + ' >"$port"',
        'echo "# progexec exit $?"', ""])


def program_text(prep):
    """The canonical text as the guest reads it: its line N is prep.lines[N-1]."""
    return "".join(text + "\n" for text, _ in prep.lines).encode()


class TranscriptFile:
    """The guest's report lines from the file QEMU writes, as they come:
    Channel.receive's contract (GuestSilent, GuestGone, BadLine)."""

    def __init__(self, path, alive):
        self.path = path
        self.alive = alive
        self._at = 0
        self._buf = b""

    def _read(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self._at)
                chunk = f.read()
        except FileNotFoundError:
            return b""
        self._at += len(chunk)
        return chunk

    def receive(self, timeout, waiting_for):
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            if len(self._buf) >= MAX_LINE:
                raise BadLine(f"the guest sent a line over {MAX_LINE} bytes: "
                              f"{self._buf[:80]!r}...")
            chunk = self._read()
            if chunk:
                self._buf += chunk
                continue
            why = self.alive()
            if why:
                # What the guest wrote before it went is read first.
                chunk = self._read()
                if chunk:
                    self._buf += chunk
                    continue
                raise GuestGone(why)
            if time.monotonic() > deadline:
                raise GuestSilent(f"no {waiting_for} from the guest in {timeout:.0f}s")
            time.sleep(POLL_S)
        line, self._buf = take_line(self._buf)
        return line


def kernel_release(bootdir):
    for ln in read_text(os.path.join(bootdir, "ktap.log")).splitlines():
        if ln.startswith(KERNEL_PREFIX):
            return ln[len(KERNEL_PREFIX):].strip()
    return None


def machine_spec(prep, sc, builds, *, bootdir, scratch, seed, accel):
    """The VM of one program: its disks (the rules in bootdir/rules-KEY.txt),
    the initramfs with its text and /run.sh, the port into TRANSCRIPT."""
    by_disk = devices.gated_rules(prep.bound, prep.rules)
    keys = {disk.key for disk in prep.bound.values()}
    disks = []
    for vm_disk, disk in zip(devices.VM_DISKS, devices.vm_disks_args(scratch, bootdir, seed,
                                                                      deterministic=True)):
        if vm_disk.key not in keys:
            os.unlink(disk.image)
            continue
        if vm_disk.key in by_disk:
            rules = os.path.join(bootdir, f"rules-{vm_disk.key}.txt")
            with open(rules, "w") as f:
                f.write("\n".join(by_disk[vm_disk.key]) + "\n")
            disk = devices.with_rules(disk, rules)
        disks.append(disk)
    initrd = guest.build_initrd(builds.guest_dir, run_sh(prep), scratch,
                                files={f"{GUEST_DIR}/{prep.name}": program_text(prep)})
    return make_spec(sc, builds, rundir=bootdir, scratch=scratch, seed=seed, deterministic=True,
                     accel=accel, initrd=initrd, disks=disks,
                     extra_args=devices.transcript_args(os.path.join(bootdir, TRANSCRIPT)))


def run(prep, sc, builds, *, bootdir, seed, budgets, accel="tcg"):
    """Boot a fresh VM for @prep alone (its logs in @bootdir); (Outcome,
    the guest's kernel release or None).  A guest that dies or goes silent
    is a `crash` outcome, not an exception."""
    os.makedirs(bootdir, exist_ok=True)
    transcript = os.path.join(bootdir, TRANSCRIPT)
    if os.path.exists(transcript):
        os.unlink(transcript)       # QEMU's file chardev appends
    out = Outcome(prep.name)
    said = None
    t0 = time.monotonic()
    scratch = scratchdirs.new_scratch()
    try:
        spec = machine_spec(prep, sc, builds, bootdir=bootdir, scratch=scratch, seed=seed,
                            accel=accel)
        with QemuMachine(spec) as machine:
            try:
                machine.start()
                said = _follow(prep, out, TranscriptFile(transcript, guest_alive(machine)),
                               budgets)
                if said and not machine.wait_powered_off(budgets.result):
                    raise GuestSilent(f"the guest did not power off in {budgets.result:.0f}s "
                                      "after its result")
            except (ChannelError, QmpError) as e:
                out.verdict, out.reason, said = "crash", str(e), None
            if out.verdict != "refused":
                _faults(prep, out, machine)
            machine.cleanup()
    finally:
        scratchdirs.remove_scratch(scratch)
    if out.verdict != "refused":
        kernel_check(out, read_text(os.path.join(bootdir, "console.log")))
    if said:
        settle(out, said)
    out.elapsed_s = time.monotonic() - t0
    return out, kernel_release(bootdir)


def _follow(prep, out, transcript, budgets):
    """The report, phase by phase, with the session's budgets: the
    `result` line's words, or None when the guest refused the program."""
    kind, rest = read_until(transcript, out, prep, ("ready",), budgets.hello + budgets.ready)
    if kind == "refused":
        out.verdict = "refused"
        out.reason = mapped_reason(prep, " ".join(rest[1:])) or "refused"
        return None
    if kind == "result":
        raise BadLine(f"the guest sent result for {prep.name} before ready")
    kind, rest = read_until(transcript, out, prep, ("ops-done",), budgets.ops)
    if kind != "result":
        kind, rest = read_until(transcript, out, prep, ("result",), budgets.result)
    if kind == "refused":
        raise BadLine(f"the guest refused {prep.name} after ready")
    return rest


def _faults(prep, out, machine):
    """Each device's digest, rule hits and I/O, read from the stopped
    machine (a machine gone leaves them out)."""
    for dev, disk in prep.bound.items():
        try:
            out.faults[dev] = device_faults(machine.qmp, disk.injector)
        except QmpError:
            return
