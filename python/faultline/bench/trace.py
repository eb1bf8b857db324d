"""bench: parsing what the measurements print: engine-bench's output and
QEMU's trace log (device latencies per write, per LBA segment)."""

import re

from faultline.errors import SetupError

SEGMENT_MIB = 64                      # each latency segment's LBA range


ENGINE_LINE = re.compile(r"^(?P<case>\S.*?)\s+(?P<rules>\d+) rules:\s+(?P<ns>[\d.]+) ns/decision")
ENGINE_BASE = re.compile(r"^baseline.*?:\s+(?P<ns>[\d.]+) ns")


def parse_engine_bench(text):
    """engine-bench output -> (baseline ns, [(case, rules, ns)])."""
    base, cases = None, []
    for ln in text.splitlines():
        m = ENGINE_BASE.match(ln)
        if m:
            base = float(m["ns"])
            continue
        m = ENGINE_LINE.match(ln)
        if m:
            cases.append((m["case"], int(m["rules"]), float(m["ns"])))
    if base is None or not cases:
        raise SetupError("engine-bench printed no baseline or no cases")
    return base, cases


# Trace lines of QEMU's log backend with -msg timestamp=on:
#   PID@SECONDS.MICROS:event args...
TRACE_LINE = re.compile(r"^\d+@(?P<sec>\d+)\.(?P<us>\d{6}):(?P<ev>\w+) ?(?P<args>.*)$")
NVME_EVENTS = ("pci_nvme_mmio_doorbell_sq", "pci_nvme_write", "pci_nvme_fault_delay",
               "pci_nvme_irq_msix")
# pci_nvme_fault_delay: the held command's delay, timer wait and early margin.
FAULT_DELAY_ARGS = re.compile(r"delay (?P<delay>\d+)ns from submission, "
                              r"timer in (?P<wait>-?\d+)ns \((?P<early>-?\d+)ns early")
SYNCBLK_EVENTS = ("syncblk_submit", "syncblk_complete")


def _args(text):
    """'sqid 1 new_tail 3' -> {'sqid': '1', 'new_tail': '3'}"""
    words = text.replace("'", "").split()
    return dict(zip(words[0::2], words[1::2]))


def _seconds(m):
    """Seconds since the first trace line's second, exact to the microsecond
    (a float of the whole epoch time keeps only about 0.2 us)."""
    return (int(m["sec"]) % 100000) + int(m["us"]) * 1e-6


def device_latencies(trace_text, kind, gaps=None, shares=None):
    """[(first LBA, seconds from doorbell to interrupt)] of the writes in a
    trace of one QD1 run.  NVMe: an I/O queue's SQ doorbell, the write it
    carries (its LBA), the next I/O-queue MSI-X.  A delayed NVMe write is
    timed from the submission stamp its delay counts from (its doorbell's,
    recovered from pci_nvme_fault_delay), not from the doorbell's trace
    line: writing that line took 4-17 us (more when the writes come 10 ms
    apart), which no untraced run pays; @gaps, if given, gets (LBA, seconds
    from doorbell line to stamp) of those.  syncblk: submit to complete of
    the same slot (complete is where the MSI-X is raised).  @shares, if
    given, gets (LBA, seconds) of the guest's own time after each write:
    from its interrupt to the next submission (doorbell or submit line)."""
    out = []
    after = None            # (lba, time) of the last write's interrupt

    def next_submission(t):
        nonlocal after
        if after is not None and shares is not None:
            shares.append((after[0], t - after[1]))
        after = None

    if kind == "nvme":
        t0 = lba = start = None
        for ln in trace_text.splitlines():
            m = TRACE_LINE.match(ln)
            if not m:
                continue
            ev, a, t = m["ev"], _args(m["args"]), _seconds(m)
            if ev == "pci_nvme_mmio_doorbell_sq" and a.get("sqid", "0") != "0":
                next_submission(t)
                if t0 is None:
                    t0, lba, start = t, None, None
            elif ev == "pci_nvme_write" and t0 is not None and lba is None:
                lba = int(a["lba"], 16)
            elif ev == "pci_nvme_fault_delay" and t0 is not None and start is None:
                d = FAULT_DELAY_ARGS.search(m["args"])
                # A timer armed for now (wait 0) may have been due earlier:
                # its deadline is unknown, keep the doorbell.
                if d and int(d["wait"]) > 0:
                    start = t + (int(d["wait"]) + int(d["early"]) - int(d["delay"])) * 1e-9
            elif ev == "pci_nvme_irq_msix" and t0 is not None and \
                    not m["args"].endswith(" vector 0"):
                if lba is not None:
                    out.append((lba, t - (t0 if start is None else start)))
                    if start is not None and gaps is not None:
                        gaps.append((lba, start - t0))
                    after = (lba, t)
                t0 = lba = start = None
        return out
    started = {}
    for ln in trace_text.splitlines():
        m = TRACE_LINE.match(ln)
        if not m:
            continue
        ev, a, t = m["ev"], _args(m["args"]), _seconds(m)
        if ev == "syncblk_submit":
            next_submission(t)
            if a.get("op") == "1":
                started[a["slot"]] = (int(a["lba"]), t)
        elif ev == "syncblk_complete" and a.get("slot") in started:
            lba, t0 = started.pop(a["slot"])
            out.append((lba, t - t0))
            after = (lba, t)
    return out


def segment_of(lba):
    return lba * 512 // (SEGMENT_MIB << 20)


def per_segment(pairs):
    """{segment: [microseconds]} of device_latencies()' (lba, seconds)."""
    out = {}
    for lba, s in pairs:
        out.setdefault(segment_of(lba), []).append(s * 1e6)
    return out
