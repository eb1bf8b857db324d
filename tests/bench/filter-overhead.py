#!/usr/bin/python3
"""Host CPU cost of the fault-inject block filter per guest I/O.

One guest, two virtio-blk disks: vda goes through the fault-inject filter
with a rule that never matches (every request asks the engine, none
fires), vdb is the same chain without the filter.  In the guest, iocheck
--bench runs random 4K writes at queue depth 32 on one disk at a time, in
interleaved phases (vda vdb, vdb vda, ...), so both see the same guest
state and the same host load.  At the start and end of each phase the host
samples the QEMU process's utime+stime (/proc/PID/stat) and the disk's
completed operations (query-blockstats); boot and shutdown do not count.
Prints CPU microseconds per I/O for each phase, the medians and the ratio
filter/base.

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

from faultline import scenario
from faultline.build.builds import build_all
from faultline.errors import SetupError
from faultline.run.runner import new_dir, scratch_dir
from faultline.run.spec_builder import prepare_spec
from faultline.vm.qemu import QemuMachine

# Matches every op but needs engine state 4294967295, which nothing sets.
NEVER = "never: any state=4294967295 error=eio\n"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of @pid (all its threads) from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def completed_ios(m, node):
    """Read + write + flush operations completed on the disk whose root
    node is @node."""
    for dev in m.qmp("query-blockstats"):
        if dev.get("node-name") == node:
            s = dev["stats"]
            return s["rd_operations"] + s["wr_operations"] + s["flush_operations"]
    raise SetupError(f"no disk with root node {node} in query-blockstats")


NODES = {"filter": "fi-disk0", "base": "disk1"}
SERIALS = {"filter": "faultline0", "base": "faultline1"}


def guest_script(rounds, seconds, qd):
    """Phases on the disk with each serial, alternating which goes first.

    One shell line without double quotes or command substitution: run.sh
    echoes each test inside double quotes before running it."""
    cmds = ["for d in /sys/block/vd*; do read s < $d/serial; eval dev_$s=/dev/${d##*/}; done"]
    for r in range(rounds):
        order = ("filter", "base") if r % 2 == 0 else ("base", "filter")
        for v in order:
            cmds += [f"echo '# phase-start {v} {r + 1}'",
                     f"iocheck $dev_{SERIALS[v]} --op write --len 4K --bench {seconds} "
                     f"--qd {qd} --range 512M >/dev/null",
                     f"echo '# phase-end {v} {r + 1}'"]
    return " && ".join(cmds)


class KtapFollower:
    """New lines of ktap.log as the guest writes them."""

    def __init__(self, path):
        self.f = open(path, errors="replace")
        self.buf = ""

    def next_line(self, m, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if "\n" in self.buf:
                line, self.buf = self.buf.split("\n", 1)
                return line
            chunk = self.f.read()
            if chunk:
                self.buf += chunk
                continue
            if not m.running():
                raise SetupError("QEMU exited before the benchmark ended")
            time.sleep(0.002)
        raise SetupError("timed out waiting for the guest")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--qd", type=int, default=32)
    args = ap.parse_args()
    res = {"filter": [], "base": []}
    try:
        sc = scenario.load("write-error-redirty-virtio")
        sc.swap = {"enabled": False}
        sc.faults.rules = NEVER
        sc.tests = [guest_script(args.rounds, args.seconds, args.qd)]
        builds = build_all(quiet=True)
        rundir = new_dir(os.path.join(TOP, "runs"), "bench-filter-overhead")
        scratch = scratch_dir()
        try:
            spec = prepare_spec(sc, builds, rundir, scratch=scratch, seed=1)
            base_disk = os.path.join(scratch, "disk-base.img")
            with open(base_disk, "wb") as f:
                f.truncate(sc.device.size_bytes)
            spec.device_args += [
                "-blockdev", f"driver=file,filename={base_disk},node-name=disk1,cache.direct=off",
                "-device", "virtio-blk-pci,drive=disk1,serial=faultline1,werror=report,"
                "rerror=report"]
            with QemuMachine(spec) as m:
                m.start()
                ktap = KtapFollower(os.path.join(rundir, "ktap.log"))
                start = None
                while len(res["filter"]) + len(res["base"]) < 2 * args.rounds:
                    line = ktap.next_line(m, 300 if start is None else args.seconds + 120)
                    if line.startswith("# phase-start "):
                        v = line.split()[2]
                        start = (cpu_seconds(m.proc.pid), completed_ios(m, NODES[v]))
                    elif line.startswith("# phase-end "):
                        v, r = line.split()[2:4]
                        cpu, ios = cpu_seconds(m.proc.pid), completed_ios(m, NODES[v])
                        n = ios - start[1]
                        if n <= 0:
                            raise SetupError(f"{v}: no I/O completed (see {rundir})")
                        res[v].append((cpu - start[0]) / n * 1e6)
                        print(f"round {r} {v:6}: {res[v][-1]:8.3f} us host CPU per I/O "
                              f"({n} I/Os)", flush=True)
                    elif line.startswith(("Bail out", "not ok")):
                        raise SetupError(f"guest: {line} (see {rundir})")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    except (SetupError, scenario.ScenarioError) as e:
        print(f"filter-overhead: {e}", file=sys.stderr)
        return 2
    base, filt = statistics.median(res["base"]), statistics.median(res["filter"])
    pairs = [f / b for f, b in zip(res["filter"], res["base"])]
    print(f"median base {base:.3f} us/IO, filter {filt:.3f} us/IO")
    print(f"ratio filter/base {filt / base:.4f} (per round: "
          f"{', '.join(f'{p:.4f}' for p in pairs)}; median {statistics.median(pairs):.4f}); "
          f"run in {rundir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
