"""The program VM's devices: a fixed set of swap disks, each with its own
fault injector, and the binding of a program's `swap` lines to them.

A program's devices are bound by kind (syncblk by its completion); the
guest makes a disk rotational when the program asks.  What the VM cannot
give a program (more devices of a kind than it has, a size over a disk's,
a rule the disk's attach point refuses) is one line, before anything is
sent.
"""

import dataclasses
import os
import re
from dataclasses import dataclass

from faultline.judge import mutate
from faultline.run.spec_builder import Disk

CHANNEL_ID = "prog0"
CHANNEL_PORT = "org.faultline.prog.0"
DISK_SIZE = 512 << 20
# The budget of a program's mutation rule: swap writes after `ready` (the
# swap areas are made by then, so every write is a swap-out).
MUTATED_WRITES = 256


@dataclass(frozen=True)
class VmDisk:
    key: str            # names its image, log and injector
    kind: str
    target: str         # as `bind` names it
    completion: str = "task"

    @property
    def injector(self):
        return f"fi-{self.key}"


VM_DISKS = (
    VmDisk("nvme0", "nvme", "nvme:fl-nvme0"),
    VmDisk("nvme1", "nvme", "nvme:fl-nvme1"),
    VmDisk("sync-task", "syncblk", "syncblk:task", "task"),
    VmDisk("sync-irq", "syncblk", "syncblk:irq", "irq"),
    VmDisk("sync-thread", "syncblk", "syncblk:thread", "thread"),
    VmDisk("vblk0", "virtio-blk", "virtio-blk:fl-vblk0"),
)

# What each attach point refuses in a rule (docs/devices.md, Attaching).
REFUSED_KEYS = {
    "nvme": ("cpu=",),
    "syncblk": ("sq=", "fatal", "reset-fail="),
    "virtio-blk": ("sq=", "cpu=", "fatal", "reset-fail="),
}
# The gate of a run without the host (prog c, prog run --deterministic;
# guest/tools/progexec/gate.c): the rules are loaded at QEMU start, each
# matching in engine state 1 only; the guest's one-sector read of sector
# GATE_ON_SECTOR of each swap device sets it once the swap areas are on, of
# GATE_OFF_SECTOR ends it after the last operation.  Both sectors lie in the
# swap header's page, which the kernel never reads in one-sector pieces.
GATE_ON_SECTOR, GATE_OFF_SECTOR = 1, 2
GATE_RULES = (f"_gate_on: read lba={GATE_ON_SECTOR} len=1 set-state=1",
              f"_gate_off: read lba={GATE_OFF_SECTOR} len=1 set-state=2")
# Rule actions that can fail a read the guest sees (failed-read relaxation).
READ_FAILING = re.compile(r"(^|\s)(error=\S+|drop|fatal|reset-fail=\S+)(\s|$)")


class Refusal(Exception):
    """The VM cannot run the program: one line."""


def vm_disks_args(scratch, rundir, seed, deterministic):
    """Every disk's sparse image (in @scratch) and its Disk for the spec
    builder: the injectors start without rules, log to rundir/faults-KEY.jsonl."""
    disks = []
    det = ",deterministic=on" if deterministic else ""
    for d in VM_DISKS:
        image = os.path.join(scratch, f"{d.key}.img")
        with open(image, "wb") as f:
            f.truncate(DISK_SIZE)
        serial = d.target.split(":", 1)[1] if d.kind != "syncblk" else f"fl-{d.key}"
        disks.append(Disk(d.kind, image, node=f"disk-{d.key}", serial=serial,
                          completion=d.completion, injector=d.injector,
                          injector_opts=f"seed={seed},log="
                          f"{os.path.join(rundir, f'faults-{d.key}.jsonl')}{det}"))
    return disks


def with_rules(disk, rules_path):
    """@disk (a Disk of vm_disks_args) whose injector loads @rules_path at
    start."""
    return dataclasses.replace(disk, injector_opts=f"rules={rules_path}," + disk.injector_opts)


# ioeventfd=off: the guest's notifications are handled in the vCPU's own
# write, not later in QEMU's main loop, whose moment host timing decides
# (under -icount that moved the guest's virtual time: boots differed by
# microseconds with the port, were identical without it or with this).
SERIAL_DEVICE = "virtio-serial-pci,ioeventfd=off"


def channel_args(socket_path):
    """The virtio-serial port the executor reads (the host connects to the
    chardev's socket as a client)."""
    return ["-device", SERIAL_DEVICE,
            "-chardev", f"socket,id={CHANNEL_ID},path={socket_path},server=on,wait=off",
            "-device", f"virtserialport,chardev={CHANNEL_ID},name={CHANNEL_PORT}"]


def transcript_args(path):
    """The same port, written by the guest only, into the file @path on the
    host (a run without the host: execute/fresh.py)."""
    return ["-device", SERIAL_DEVICE,
            "-chardev", f"file,id={CHANNEL_ID},path={path}",
            "-device", f"virtserialport,chardev={CHANNEL_ID},name={CHANNEL_PORT}"]


def bind(program):
    """{program device: VmDisk} in header order; Refusal when the VM has
    no disk left of a kind, or none big enough, or a rule its attach point
    refuses."""
    free = list(VM_DISKS)
    bound = {}
    for st in program.of("swap"):
        dev, kind = st.args
        completion = st.opt("completion", "task")
        fit = [d for d in free if d.kind == kind and (kind != "syncblk" or
                                                       d.completion == completion)]
        if not fit:
            have = [d for d in VM_DISKS if d.kind == kind and (kind != "syncblk" or
                                                               d.completion == completion)]
            what = f"{kind} completion={completion}" if kind == "syncblk" else kind
            raise Refusal(f"line {st.line}: swap {dev}: the VM has {len(have)} {what} "
                          f"device{'s' if len(have) != 1 else ''}, all bound to the program's "
                          "earlier swap lines")
        size = st.opt("size", 64 << 20)
        if size > DISK_SIZE:
            raise Refusal(f"line {st.line}: swap {dev}: size {size >> 20}M is over the VM's "
                          f"{DISK_SIZE >> 20}M disks")
        free.remove(fit[0])
        bound[dev] = fit[0]
    for st in program.of("rule"):
        dev, name, text = st.args
        kind = bound[dev].kind
        for key in REFUSED_KEYS[kind]:
            if any(w == key or key.endswith("=") and w.startswith(key) for w in text.split()):
                raise Refusal(f"line {st.line}: rule {dev} {name}: {key.rstrip('=')} is "
                              f"not supported on {kind}")
    return bound


def rules_of(program, mutation=None):
    """{program device: [(rule name, rule text)]}: the program's rules,
    and with @mutation (mutate.KINDS) one more on every device."""
    rules = {}
    for st in program.of("rule"):
        rules.setdefault(st.args[0], []).append((st.args[1], st.args[2]))
    if mutation:
        for st in program.of("swap"):
            dev = st.args[0]
            if any(name == mutate.RULE_NAME for name, _ in rules.get(dev, [])):
                raise Refusal(f"line {st.line}: swap {dev}: it has a rule named "
                              f"{mutate.RULE_NAME!r}, the name --mutate takes")
            rules.setdefault(dev, []).append(
                (mutate.RULE_NAME, f"write count={MUTATED_WRITES} {mutation}"))
    return rules


def fails_reads(rule_text):
    """Whether a rule can fail a read the guest sees."""
    op = rule_text.split()[0] if rule_text.split() else ""
    return op in ("read", "any") and bool(READ_FAILING.search(rule_text))


def gated(text):
    """Rule @text matching only in the gate's state 1; Refusal when the
    rule has its own states (the gate takes the engine's state)."""
    words = text.split()
    if any(w.startswith(("state=", "set-state=")) for w in words):
        raise Refusal(f"rule {text!r}: a run without the host (prog c, prog run "
                      "--deterministic) cannot gate a rule that uses the engine state "
                      "(state=, set-state=)")
    return " ".join(words[:1] + ["state=1"] + words[1:])


def gated_rules(bound, rules):
    """{VmDisk key: [rule line]} the injectors load at start: each device's
    rules gated, then the gate's own."""
    out = {}
    for dev, disk in bound.items():
        own = [f"{name}: {gated(text)}" for name, text in rules.get(dev, [])]
        if own:
            out[disk.key] = own + list(GATE_RULES)
    return out
