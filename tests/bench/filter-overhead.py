#!/usr/bin/python3
"""Host CPU cost of the fault-inject block filter per guest I/O.

Boots the guest on virtio-blk twice per round, interleaved: "base" is
virtio-blk-pci on the raw disk, "filter" the same chain with the
fault-inject filter and a rule that never matches (every request asks the
engine, none fires).  In the guest, iocheck --bench does random 4K writes
at queue depth 32; on the host the QEMU process's utime+stime
(/proc/PID/stat) and the device's completed operations (query-blockstats)
are sampled when the load starts and when it ends, so boot and shutdown do
not count.  Prints CPU microseconds per I/O for each run, the medians and
the ratio filter/base.

  tests/bench/filter-overhead.py [--rounds N] [--seconds S] [--qd N]

Exit 0 after printing (the ratio is a measurement, not a verdict); 2 on a
setup error.
"""

import argparse
import os
import shutil
import statistics
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline import guest, scenario  # noqa: E402
from faultline.build import build_all  # noqa: E402
from faultline.errors import SetupError  # noqa: E402
from faultline.machine import make_spec  # noqa: E402
from faultline.qemu import QemuMachine  # noqa: E402
from faultline.runner import new_dir, scratch_dir  # noqa: E402

# Matches every op but needs engine state 4294967295, which nothing sets.
NEVER = "never: any state=4294967295 error=eio\n"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of @pid (all its threads) from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def completed_ios(m):
    """Read + write + flush operations the guest's disk completed."""
    total = 0
    for dev in m.qmp("query-blockstats"):
        s = dev["stats"]
        total += s["rd_operations"] + s["wr_operations"] + s["flush_operations"]
    return total


def wait_for(path, text, m, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with open(path, errors="replace") as f:
            if text in f.read():
                return
        if not m.running():
            raise SetupError(f"QEMU exited before '{text}' (see {path})")
        time.sleep(0.01)
    raise SetupError(f"timed out waiting for '{text}' in {path}")


def one_run(sc, variant, builds, out, seconds):
    sc.faults.rules = NEVER if variant == "filter" else ""
    rundir = new_dir(out, f"{variant}")
    scratch = scratch_dir()
    try:
        initrd = guest.prepare(sc, builds.guest_dir, rundir, scratch, 1)
        spec = make_spec(sc, builds, builds.kernel, initrd, guest.kernel_cmdline(sc),
                         rundir, scratch, 1, False)
        has_filter = any("fault-inject" in a for a in spec.device_args)
        assert has_filter == (variant == "filter"), spec.device_args
        ktap = os.path.join(rundir, "ktap.log")
        with QemuMachine(spec) as m:
            m.start()
            wait_for(ktap, "# bench-start", m, 300)
            cpu0, io0 = cpu_seconds(m.proc.pid), completed_ios(m)
            wait_for(ktap, "# bench-end", m, seconds + 120)
            cpu1, io1 = cpu_seconds(m.proc.pid), completed_ios(m)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    ios = io1 - io0
    if ios <= 0:
        raise SetupError(f"{variant}: no I/O completed during the load (see {rundir})")
    return (cpu1 - cpu0) / ios * 1e6, ios


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--qd", type=int, default=32)
    args = ap.parse_args()
    try:
        sc = scenario.load("write-error-redirty-virtio")
        sc.swap = {"enabled": False}
        sc.tests = ['echo "# bench-start"',
                    f"iocheck /dev/vda --op write --len 4K --bench {args.seconds} "
                    f"--qd {args.qd} --range 512M",
                    'echo "# bench-end"']
        builds = build_all(quiet=True)
        out = new_dir(os.path.join(TOP, "runs"), "bench-filter-overhead")
        res = {"base": [], "filter": []}
        for r in range(args.rounds):
            # Alternate which goes first so a drift in host load hits both.
            order = ("base", "filter") if r % 2 == 0 else ("filter", "base")
            for v in order:
                us, ios = one_run(sc, v, builds, out, args.seconds)
                res[v].append(us)
                print(f"round {r + 1} {v:6}: {us:8.2f} us host CPU per I/O ({ios} I/Os)",
                      flush=True)
    except (SetupError, scenario.ScenarioError) as e:
        print(f"filter-overhead: {e}", file=sys.stderr)
        return 2
    base, filt = statistics.median(res["base"]), statistics.median(res["filter"])
    pairs = [f / b for f, b in zip(res["filter"], res["base"])]
    print(f"median base {base:.2f} us/IO, filter {filt:.2f} us/IO")
    print(f"ratio filter/base {filt / base:.4f} (per round: "
          f"{', '.join(f'{p:.4f}' for p in pairs)}); runs in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
