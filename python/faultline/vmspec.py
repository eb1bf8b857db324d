"""prepare_spec(): a run's inputs written and its MachineSpec built, the one
way every command (run, cmdline, libvirt-xml, lava, bench) gets a machine
to boot."""

from . import guest
from .machine import make_spec


def prepare_spec(sc, builds, rundir, *, seed, scratch=None, deterministic=False,
                 accel="tcg", kernel=None, blockdev=None):
    """Write scenario @sc's inputs (guest.prepare: rules and run.sh in
    @rundir, disk and initramfs in @scratch, default @rundir) and return the
    MachineSpec booting @kernel (default: the build's).  @blockdev replaces
    the swap disk's -blockdev (bench's I/O backends)."""
    scratch = scratch or rundir
    initrd = guest.prepare(sc, builds.guest_dir, rundir, scratch, seed)
    return make_spec(sc, builds, kernel or builds.kernel, initrd, guest.kernel_cmdline(sc),
                     rundir, scratch, seed, deterministic, accel, blockdev=blockdev)
