"""`faultline fuzz`'s front: bad input refused in one line before anything
is built or booted, then the builds, the campaign's identity, and the
guests it boots (the machine `faultline prog run` boots)."""

import dataclasses
import os

from faultline.build.builds import build_all
from faultline.execute import boot
from faultline.execute.session import Budgets
from faultline.fuzz import manager, state
from faultline.fuzz.corpus import Corpus
from faultline.fuzz.machines import GuestVM
from faultline.results import records


def builds_identity(builds, kernel):
    """What a corpus was measured on: the QEMU build, the guest build, the kernel."""
    return records.builds_identity(builds, kernel)


def run(opts, kernel=None, modules=None, memory=None, cpus=None, accel="tcg", builds=None):
    """The command; its exit status (manager.fuzz).  @builds: the QEMU
    build and guest image of @kernel when the caller has them already."""
    opts.check()
    if opts.resume:         # a bad campaign directory is one line before any build
        state.load(opts.out)
        Corpus(os.path.join(opts.out, "corpus")).load()
    builds = builds or build_all(kernel, modules, opts.quiet)
    seed = opts.seed or 1
    if opts.resume:
        seed = state.load(opts.out)["seed"]
    prog_opts = boot.ProgOptions("", kernel=kernel, modules=modules, seed=seed, memory=memory,
                                 cpus=cpus, accel=accel)
    sc = boot.vm_scenario(prog_opts)

    def make_vm(rundir, deterministic):
        return GuestVM(sc, builds, rundir, seed=seed, deterministic=deterministic, accel=accel,
                       budgets=Budgets(), plant=opts.plant)

    def replay_argv(path, deterministic):
        return dataclasses.replace(prog_opts, deterministic=deterministic).replay_argv(path)

    ident = builds_identity(builds, kernel)
    return manager.fuzz(opts, ident, make_vm, replay_argv,
                        {"builds": builds, "seed": seed, "memory": memory, "cpus": cpus})
