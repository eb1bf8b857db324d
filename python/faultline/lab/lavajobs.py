"""`faultline lava` (and `matrix --backend lava` without --run): scenarios
as LAVA jobs for a lab, with the artefacts they deploy.  The jobs
themselves are made by lava.make_job, as the lava backend's are."""

import os
import shutil

from faultline.bugs import recall
from faultline.build.builds import build_all
from faultline.host.versions import git_describe
from faultline.run import runner
from faultline.run.options import RunOptions
from faultline.run.spec_builder import prepare_spec
from faultline.vm.lava_job import job_metadata, make_job, yaml_dump


def _url(base_url, out, path):
    if base_url:
        return base_url.rstrip("/") + "/" + os.path.relpath(path, out).replace(os.sep, "/")
    return "file://" + os.path.abspath(path)


def _zero_disk_gz(path, size):
    """A gzip of @size zero bytes (what the guest sees as an empty disk):
    a lab downloads a few MB instead of the whole image."""
    import gzip
    block = bytes(1 << 20)
    with gzip.open(path + ".tmp", "wb", compresslevel=1) as f:
        left = size
        while left > 0:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
    os.replace(path + ".tmp", path)


def write_jobs(scenarios, kernels, seeds, out, base_url=None, deterministic=False,
               quiet=False, labels=None):
    """One LAVA job per (kernel, scenario, seed) in @out/jobs/, with the
    artefacts it deploys beside it: per kernel the image, per job the
    initramfs (with its run.sh) and rules, per disk size one compressed
    empty disk.  @scenarios: loaded Scenarios; @kernels: [(bzImage or None,
    modules or None)]; @seeds: list or None (each scenario's own seed);
    @labels: a name per kernel for its directory and jobs (default
    kernelN).  Returns the job files."""
    os.makedirs(os.path.join(out, "jobs"), exist_ok=True)
    version = git_describe()
    jobs, disks = [], {}
    for ki, (kernel, modules) in enumerate(kernels):
        builds = build_all(kernel, modules, quiet)
        label = labels[ki] if labels else f"kernel{ki}"
        kdir = os.path.join(out, label)
        os.makedirs(kdir, exist_ok=True)
        kimage = os.path.join(kdir, "vmlinuz")
        shutil.copyfile(builds.kernel, kimage)
        for sc in scenarios:
            sc_builds = builds.for_scenario(sc)
            size = sc.device.size_bytes
            if size not in disks:
                disks[size] = os.path.join(out, f"disk-{size}.img.gz")
                _zero_disk_gz(disks[size], size)
            for seed in seeds or [sc.faults.seed]:
                name = f"{sc.name}-seed{seed}-{label}"
                jdir = os.path.join(out, name)
                os.makedirs(jdir, exist_ok=True)
                spec = prepare_spec(sc, sc_builds, jdir, seed=seed,
                                    deterministic=deterministic, kernel=kimage)
                os.unlink(os.path.join(jdir, "disk.img"))   # the shared one serves
                opts = RunOptions(kernel=kernel, modules=modules,
                                         deterministic=deterministic)
                meta = job_metadata(sc.name, seed, version,
                                    runner.run_command(sc.path, seed, opts),
                                    os.path.abspath(kernel) if kernel else None)
                urls = {"kernel": _url(base_url, out, kimage),
                        "initrd": _url(base_url, out, spec.initrd),
                        "disk": _url(base_url, out, disks[size])}
                if spec.rules_file:
                    urls["rules"] = _url(base_url, out, spec.rules_file)
                job = make_job(spec, urls, sc.timeout_s, meta,
                               name=f"faultline {sc.name} seed {seed} {label}")
                path = os.path.join(out, "jobs", name + ".yaml")
                with open(path, "w") as f:
                    f.write(yaml_dump(job))
                jobs.append(path)
    return jobs


def write_bug_jobs(corpus, seeds, out, base_url=None, deterministic=False, quiet=False):
    """`faultline lava --bug`: each corpus bug's scenarios on its fixed and
    its buggy kernel (built or taken from the kernel cache), one job per
    (bug, kernel, scenario, seed); --deterministic where the scenario
    allows it, as `faultline bugs` runs them."""
    jobs = []
    for bug in corpus:
        # One write_jobs per mode: the kernel is copied once per mode, not
        # once per scenario.
        modes = {}
        for name in bug.scenarios:
            det = deterministic and not recall.why_not_deterministic(name)
            modes.setdefault(det, []).append(name)
        for side in ("fixed", "buggy"):
            image, modules = recall.build_kernel(bug, side == "buggy")
            for det, names in modes.items():
                opts = RunOptions(kernel=image, modules=modules, deterministic=det)
                scs = [runner.load_scenario(n, opts) for n in names]
                jobs += write_jobs(scs, [(image, modules)], seeds, out, base_url, det, quiet,
                                   labels=[f"{bug.name}-{side}"])
    return jobs
