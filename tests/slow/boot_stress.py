#!/usr/bin/python3
"""Slow test (meson suite 'slow'): boot the 2-vCPU TCG guest of the vm tests
many times under host load and count QEMU assertions.

QEMU 10.0.4+ aborted now and then in a loaded `faultline check` with
"iotlb_to_section: Assertion `section_index < d->map.sections_nb' failed":
a vCPU did MMIO through a TLB entry filled before another vCPU changed the
memory map (Linux sizing PCI BARs at boot), after the switch to the new
map but before its own TLB flush ran (patches/qemu-10.0/0012-*).

  boot_stress.py [--boots N] [--parallel P] [--hogs H] [--workload W]
                 [--seconds S] [--qemu DIR]

--workload boot (default): the guest only reaches userspace and powers off.
--workload remap: then, for --seconds, vCPU 0 toggles the memory decoding
  of the (driverless) NVMe function while vCPU 1 spins: a memory map
  change every few guest milliseconds instead of a burst at boot.
--parallel P guests boot at a time, beside --hogs H host CPU hogs; --qemu
a QEMU install directory (default: this tree's build).  Every boot must
reach the guest's exit line with status 0 and QEMU must exit cleanly.

Prints one line per boot and `N boots: K assertions, F other failures`.
Exit 0 when K = F = 0, 1 otherwise, 2 on bad options or a setup error.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import TOP, exit_with  # noqa: E402

from faultline import scenario
from faultline.build.builds import Builds, guest_dir, qemu_dir
from faultline.errors import EXIT_FAIL, EXIT_PASS
from faultline.run import guest, spec_builder

ASSERTION = "iotlb_to_section: Assertion"
# The vm tests' machine: q35, 512M, 2 vCPUs, an NVMe disk, no injector.
SCENARIO = "selftest-crash"
# The NVMe function (q35 slot 1): without the nvme module no driver uses
# its BAR, so the guest may switch its decoding on and off.
NVME_CONFIG = "/sys/bus/pci/devices/0000:00:01.0/config"

BOOT_SH = "#!/bin/sh\nexit 0\n"
# vCPU 0 writes PCI_COMMAND (config bytes 4-5; the ID dword before it is
# read-only) with memory decoding off, then on: each write is a memory
# transaction that removes or adds the NVMe BAR's 5 dispatch sections (of
# 17; `info mtree -f -d`), so a stale TLB entry of a region mapped above it
# (AHCI, IOAPIC, LPC RCRB, LAPIC) indexes past the smaller map.  Shell
# builtins only (printf, read, redirections), so the loop is fast under
# TCG.  vCPU 1 spins in guest code and takes its LAPIC timer interrupts
# there (MMIO) while vCPU 0 changes the map.
REMAP_SH = r"""#!/bin/sh
cfg={cfg}
[ -w $cfg ] || {{ echo "Bail out! $cfg not writable"; exit 1; }}
taskset -p 1 $$ >/dev/null
taskset 2 sh -c 'while :; do :; done' &
spin=$!
read up rest </proc/uptime
end=$(( ${{up%.*}} + {seconds} ))
n=0
while [ ${{up%.*}} -lt $end ]; do
    printf '\066\033\020\000\000\000' >$cfg
    printf '\066\033\020\000\002\000' >$cfg
    n=$((n + 2))
    read up rest </proc/uptime
done
# Gone before run.sh ends: init then reopens ttyS1 for its exit line (a
# closing tty gave EAGAIN once).
kill $spin; wait $spin
echo "# remap: $n memory decoding changes"
exit 0
"""


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--boots", type=int, default=40)
    p.add_argument("--parallel", type=int, default=2)
    p.add_argument("--hogs", type=int, default=2)
    p.add_argument("--workload", choices=("boot", "remap"), default="boot")
    p.add_argument("--seconds", type=int, default=30)
    p.add_argument("--qemu", help="QEMU install directory (default: this tree's build)")
    p.add_argument("--timeout", type=int, default=900, help="seconds per boot")
    a = p.parse_args()
    for name in ("boots", "parallel", "seconds", "timeout"):
        if getattr(a, name) < 1:
            p.error(f"--{name} {getattr(a, name)}: expected at least 1")
    if a.hogs < 0:
        p.error(f"--hogs {a.hogs}: expected 0 or more")
    if a.qemu and not os.access(os.path.join(a.qemu, "bin", "qemu-system-x86_64"), os.X_OK):
        p.error(f"--qemu {a.qemu}: no bin/qemu-system-x86_64 there")
    return a


def boot(i, a, builds, sc, run_sh, workdir):
    """(status, detail) of boot @i: "ok", "assertion" or "failed"."""
    d = os.path.join(workdir, f"boot{i:04d}")
    os.makedirs(d)
    initrd = guest.build_initrd(builds.guest_dir, run_sh, d)
    with open(os.path.join(d, "disk.img"), "wb") as f:
        f.truncate(sc.device.size_bytes)
    spec = spec_builder.make_spec(sc, builds, rundir=d, scratch=d, seed=1, initrd=initrd)
    # Without -no-shutdown: the guest's poweroff ends QEMU (the launcher's
    # watch loop is not here to stop it).
    argv = [x for x in spec.qemu_argv(os.path.join(d, "qmp.sock")) if x != "-no-shutdown"]
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, errors="replace",
                           timeout=a.timeout)
        rc, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, err = "timeout", (e.stderr or b"").decode(errors="replace")
    wall = time.monotonic() - t0
    try:
        with open(os.path.join(d, "ktap.log"), errors="replace") as f:
            ktap = f.read()
    except OSError:
        ktap = ""
    notes = [ln for ln in ktap.splitlines() if ln.startswith("# remap:")]
    if ASSERTION in err:
        line = next(ln for ln in err.splitlines() if ASSERTION in ln)
        status, detail = "assertion", line.strip()
    elif rc == 0 and "FAULTLINE-EXIT 0" in ktap:
        status, detail = "ok", "; ".join(notes)
        shutil.rmtree(d)
    else:
        last = (err.strip().splitlines() or ["no QEMU output"])[-1]
        status, detail = "failed", f"exit {rc}, guest {'exited' if 'FAULTLINE-EXIT' in ktap else 'did not finish'}: {last}"
    print(f"boot {i + 1}/{a.boots}: {status} ({wall:.0f}s){': ' + detail if detail else ''}",
          flush=True)
    return status, d


def main():
    a = parse_args()
    sc = scenario.load(SCENARIO)
    qemu = a.qemu or qemu_dir()
    builds = Builds(qemu_dir=qemu, guest_dir=guest_dir(
        os.environ.get("FAULTLINE_KERNEL"), os.environ.get("FAULTLINE_MODULES")))
    run_sh = BOOT_SH if a.workload == "boot" else REMAP_SH.format(cfg=NVME_CONFIG,
                                                                  seconds=a.seconds)
    print(f"# {a.boots} boots of {a.workload}, {a.parallel} at a time, {a.hogs} host CPU "
          f"hogs, QEMU {qemu}", flush=True)
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(a.hogs)]
    workdir = tempfile.mkdtemp(prefix="boot-stress-", dir=os.path.join(TOP, "build")
                               if os.path.isdir(os.path.join(TOP, "build")) else None)
    try:
        with ThreadPoolExecutor(a.parallel) as ex:
            results = list(ex.map(lambda i: boot(i, a, builds, sc, run_sh, workdir),
                                  range(a.boots)))
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    asserts = sum(s == "assertion" for s, _ in results)
    failed = sum(s == "failed" for s, _ in results)
    print(f"{a.boots} boots: {asserts} assertions, {failed} other failures"
          + (f" (kept in {workdir})" if asserts or failed else ""))
    if not asserts and not failed:
        shutil.rmtree(workdir)
    return EXIT_FAIL if asserts or failed else EXIT_PASS


if __name__ == "__main__":
    exit_with("boot_stress", main)
