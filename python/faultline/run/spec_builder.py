"""prepare_spec(): a run's inputs written and its MachineSpec built, the one
way every command (run, cmdline, libvirt-xml, lava, bench) gets a machine
to boot."""

import os
from dataclasses import dataclass

from faultline.run import guest
from faultline.scenario import HOTPLUG_ID
from faultline.vm.machine import FIXED_RTC, ICOUNT, INJECTOR_ID, MachineSpec


def prepare_spec(sc, builds, rundir, *, seed, scratch=None, deterministic=False,
                 accel="tcg", kernel=None, blockdev=None):
    """Write scenario @sc's inputs (guest.prepare: rules and run.sh in
    @rundir, disk and initramfs in @scratch, default @rundir) and return the
    MachineSpec booting @kernel (default: the build's).  The guest image
    is @builds' image for @sc (its [vm] tools).  @blockdev replaces the swap
    disk's -blockdev (bench's I/O backends)."""
    scratch = scratch or rundir
    builds = builds.for_scenario(sc)
    initrd = guest.prepare(sc, builds.guest_dir, rundir, scratch, seed)
    return make_spec(sc, builds, rundir=rundir, scratch=scratch, seed=seed,
                     deterministic=deterministic, accel=accel, kernel=kernel, initrd=initrd,
                     blockdev=blockdev)


def machine_args(cpus, deterministic):
    """-icount/-rtc/-smp: the machine-level arguments after -accel."""
    if deterministic:
        # Under -icount TCG runs every vCPU round-robin in one thread, so
        # the interleaving of N vCPUs, and with it the run, follows from the
        # instruction count alone.
        return ["-icount", ICOUNT, "-smp", str(cpus), "-rtc", f"base={FIXED_RTC},clock=vm"]
    return ["-smp", str(cpus)]


@dataclass(frozen=True)
class Disk:
    """One swap disk of a machine: its image, frontend and fault injector.
    @injector: the fault-injector object's id (None: no injector);
    @injector_opts: its properties after the id (rules=, seed=, log=...)."""
    kind: str                   # nvme, syncblk, virtio-blk, virtio-scsi
    image: str
    node: str = "disk0"
    serial: str = "faultline0"
    completion: str = "task"    # syncblk
    injector: str | None = None
    injector_opts: str = ""
    extra: str = ""             # the frontend's own extra properties
    bus: str = ""               # ",bus=...,id=..." (hot-pluggable)


def disk_args(disk, blockdev=None, before_device=()):
    """-blockdev/-object/-device of one Disk.  @blockdev: the disk's
    -blockdev options instead of the raw image's; @before_device: arguments
    between those and the frontend's -device (its bus)."""
    q = ["-blockdev", blockdev or
         f"driver=file,filename={disk.image},node-name={disk.node},cache.direct=off"]
    fi = ""
    if disk.injector:
        q += ["-object", f"fault-injector,id={disk.injector},{disk.injector_opts}"]
        fi = f",fault-injector={disk.injector}"
    if disk.kind in ("virtio-blk", "virtio-scsi") and disk.injector:
        # QEMU's own frontends: the faults come from the fault-inject
        # filter between them and the disk.
        q += ["-blockdev", f"driver=fault-inject,node-name=fi-{disk.node},file={disk.node}{fi}"]
    q += list(before_device)
    if disk.kind == "nvme":
        q += ["-device", f"nvme,serial={disk.serial},drive={disk.node}{fi}{disk.bus}{disk.extra}"]
    elif disk.kind == "syncblk":
        q += ["-device", f"syncblk-pci,drive={disk.node},completion={disk.completion}{fi}"
              f"{disk.bus}{disk.extra}"]
    elif disk.kind in ("virtio-blk", "virtio-scsi"):
        drive = f"fi-{disk.node}" if disk.injector else disk.node
        # werror/rerror=report: the guest sees every error (the default
        # stops the VM on ENOSPC).
        opts = f"drive={drive},serial={disk.serial},werror=report,rerror=report{disk.extra}"
        if disk.kind == "virtio-blk":
            q += ["-device", "virtio-blk-pci," + opts + disk.bus]
        else:
            q += ["-device", "virtio-scsi-pci,id=scsi0",
                  "-device", "scsi-hd,bus=scsi0.0," + opts]
    return q


def device_args(sc, disk, rundir, seed, deterministic, blockdev=None):
    """-blockdev/-object/-device of the scenario's swap disk, its injector
    and device; returns (argv, injector id or None).  @blockdev: the disk's
    -blockdev options instead of the raw image's (node-name disk0)."""
    dev = sc.device
    # The devices do their I/O in the MMIO write and complete on virtual
    # timers only with an injector that says so (rules or not).
    det = ",deterministic=on" if deterministic else ""
    injector, opts = None, ""
    if sc.faults.rules.strip() or det:
        rules = f"rules={os.path.join(rundir, 'rules.txt')}," if sc.faults.rules.strip() else ""
        injector = INJECTOR_ID
        opts = f"{rules}seed={seed},log={os.path.join(rundir, 'faults.jsonl')}{det}"
    # hotplug: the device sits on a pcie-root-port (q35's root bus is not
    # hot-pluggable), so QMP device_del can take it away under the guest.
    q, bus = [], ""
    if dev.hotplug:
        q += ["-device", "pcie-root-port,id=swaprp,chassis=1,slot=1"]
        bus = f",bus=swaprp,id={HOTPLUG_ID}"
    d = Disk(dev.kind, disk, completion=dev.completion, injector=injector, injector_opts=opts,
             extra=dev.extra, bus=bus)
    return disk_args(d, blockdev, before_device=q), injector


def make_spec(sc, builds, *, rundir, scratch, seed, deterministic=False, accel="tcg",
              kernel=None, initrd=None, append=None, blockdev=None, disks=None, extra_args=()):
    """The MachineSpec of one run of scenario @sc whose inputs are written
    (commands use prepare_spec, which writes them first): @kernel, @initrd
    and @append default to the build's kernel and initramfs and the
    scenario's command line.  @disks (Disk, several): the machine's disks
    instead of the scenario's device (its spec then names no injector: the
    caller queries each Disk's own); @extra_args: more devices (a channel)."""
    kernel = kernel or builds.kernel
    initrd = initrd or builds.initramfs
    append = guest.kernel_cmdline(sc) if append is None else append
    if disks:
        disk, injector = disks[0].image, None
        devargs = [a for d in disks for a in disk_args(d)]
    else:
        disk = os.path.join(scratch, "disk.img")
        devargs, injector = device_args(sc, disk, rundir, seed, deterministic, blockdev)
    devargs += list(extra_args)
    return MachineSpec(
        scenario=sc.name, qemu_binary=builds.qemu_binary, firmware_dirs=builds.firmware_dirs,
        kernel=kernel, initrd=initrd, append=append, memory=sc.vm.memory, cpus=sc.vm.cpus,
        accel="tcg" if deterministic else accel, deterministic=deterministic,
        rundir=rundir, scratch=scratch, disk=disk, injector_id=injector,
        device_args=devargs, extra_args=machine_args(sc.vm.cpus, deterministic),
        rules_file=os.path.join(rundir, "rules.txt") if sc.faults.rules.strip() and not disks
        else None,
        qmp_actions=list(sc.qmp))
