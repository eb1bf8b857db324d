"""prepare_spec(): a run's inputs written and its MachineSpec built, the one
way every command (run, cmdline, libvirt-xml, lava, bench) gets a machine
to boot."""

import os

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


def device_args(sc, disk, rundir, seed, deterministic, blockdev=None):
    """-blockdev/-object/-device of the swap disk, its injector and device;
    returns (argv, injector id or None).  @blockdev: the disk's -blockdev
    options instead of the raw image's (node-name disk0)."""
    dev = sc.device
    q = ["-blockdev",
         blockdev or f"driver=file,filename={disk},node-name=disk0,cache.direct=off"]
    # The devices do their I/O in the MMIO write and complete on virtual
    # timers only with an injector that says so (rules or not).
    det = ",deterministic=on" if deterministic else ""
    fi, injector = "", None
    if sc.faults.rules.strip() or det:
        rules = f"rules={os.path.join(rundir, 'rules.txt')}," if sc.faults.rules.strip() else ""
        q += ["-object", f"fault-injector,id={INJECTOR_ID},{rules}seed={seed},"
              f"log={os.path.join(rundir, 'faults.jsonl')}{det}"]
        fi, injector = f",fault-injector={INJECTOR_ID}", INJECTOR_ID
    # hotplug: the device sits on a pcie-root-port (q35's root bus is not
    # hot-pluggable), so QMP device_del can take it away under the guest.
    hp = ""
    if dev.hotplug:
        q += ["-device", "pcie-root-port,id=swaprp,chassis=1,slot=1"]
        hp = f",bus=swaprp,id={HOTPLUG_ID}"
    if dev.kind == "nvme":
        q += ["-device", f"nvme,serial=faultline0,drive=disk0{fi}{hp}{dev.extra}"]
    elif dev.kind == "syncblk":
        q += ["-device", f"syncblk-pci,drive=disk0,completion={dev.completion}{fi}{hp}"
              f"{dev.extra}"]
    elif dev.kind in ("virtio-blk", "virtio-scsi"):
        # QEMU's own frontends: the faults come from the fault-inject
        # filter between them and the disk.
        drive = "disk0"
        if injector:
            q += ["-blockdev", f"driver=fault-inject,node-name=fi-disk0,file=disk0{fi}"]
            drive = "fi-disk0"
        # werror/rerror=report: the guest sees every error (the default
        # stops the VM on ENOSPC).
        disk = f"drive={drive},serial=faultline0,werror=report,rerror=report{dev.extra}"
        if dev.kind == "virtio-blk":
            q += ["-device", "virtio-blk-pci," + disk + hp]
        else:
            q += ["-device", "virtio-scsi-pci,id=scsi0",
                  "-device", "scsi-hd,bus=scsi0.0," + disk]
    return q, injector


def make_spec(sc, builds, *, rundir, scratch, seed, deterministic=False, accel="tcg",
              kernel=None, initrd=None, append=None, blockdev=None):
    """The MachineSpec of one run of scenario @sc whose inputs are written
    (commands use prepare_spec, which writes them first): @kernel, @initrd
    and @append default to the build's kernel and initramfs and the
    scenario's command line."""
    kernel = kernel or builds.kernel
    initrd = initrd or builds.initramfs
    append = guest.kernel_cmdline(sc) if append is None else append
    disk = os.path.join(scratch, "disk.img")
    devargs, injector = device_args(sc, disk, rundir, seed, deterministic, blockdev)
    return MachineSpec(
        scenario=sc.name, qemu_binary=builds.qemu_binary, firmware_dirs=builds.firmware_dirs,
        kernel=kernel, initrd=initrd, append=append, memory=sc.vm.memory, cpus=sc.vm.cpus,
        accel="tcg" if deterministic else accel, deterministic=deterministic,
        rundir=rundir, scratch=scratch, disk=disk, injector_id=injector,
        device_args=devargs, extra_args=machine_args(sc.vm.cpus, deterministic),
        rules_file=os.path.join(rundir, "rules.txt") if sc.faults.rules.strip() else None,
        qmp_actions=list(sc.qmp))
