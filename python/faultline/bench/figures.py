"""bench's arithmetic: rows of figures from what the measurements printed
(engine nanoseconds, device latencies, CPU per I/O, deterministic slowdown,
host cooling), each with its target and verdict."""

import re
from dataclasses import dataclass

from faultline.bench.cpu import EXITED, ROLE_ORDER, thread_cpu_between
from faultline.bench.report import Row
from faultline.bench.trace import parse_engine_bench, per_segment
from faultline.errors import SetupError
from faultline.judge.stats import (LEVEL, ci_verdict, mean, mean_interval, median, paired_ratio,
                                   ratio, tolerance_verdict)

GROUPS = ("engine", "latency", "overhead", "deterministic", "restore", "programs", "fresh")
# fresh builds everything from nothing three times (about 20 minutes and the
# network): only when asked for.
DEFAULT_GROUPS = GROUPS[:-1]
ENGINE_TARGET_NS = 30.0
DEVICE_TOLERANCE_US = 15.0
MATCH_FRACTION = 0.10   # a reference write this close to the injected one's time
OVERHEAD_TARGET = 1.01
DELAYS_US = (100, 1000, 10000)


MAX_ROUNDS = 100     # --rounds: about 35 s each


@dataclass
class Sizes:
    """How much each group measures: --quick is about 4 times less."""
    engine_iters: int
    latency_ios: dict            # DUR us (0 = baseline) -> I/Os
    latency_rounds: int          # each segment's I/Os in this many turns: a shared
                                 # host's speed drifts over seconds (a boot's baseline
                                 # guest median ranged 123-268 us between runs on the
                                 # 2-core development host)
    overhead_ios: int
    overhead_rounds: int
    det_rounds: int

    @classmethod
    def for_mode(cls, quick):
        if quick:
            return cls(2_000_000, {0: 500, 100: 500, 1000: 300, 10000: 60}, 3, 10_000, 2, 1)
        return cls(20_000_000, {0: 2000, 100: 2000, 1000: 1000, 10000: 200}, 8, 40_000, 5, 2)


def engine_rows(text):
    base, cases = parse_engine_bench(text)
    out = []
    for case, n, ns in cases:
        row = Row("engine", f"{case}, {n} rules", ns, base, "ns", ratio(ns, base),
                  target=f"<= {ENGINE_TARGET_NS:g} ns", ok=ns <= ENGINE_TARGET_NS)
        out.append(row)
    return out


def share_note(shares, seg):
    """The guest's own time after a write's interrupt in segment @seg
    against the baseline segment's (@shares: per_segment()), or '' without
    both."""
    if seg not in shares or 0 not in shares:
        return ""
    return (f"; interrupt to the guest's next submission {median(shares[seg]):.0f} us, "
            f"{median(shares[0]):.0f} us at baseline")


def waited_us(by_seg, by_gap):
    """{DUR us: what the guest waited for a write, its doorbell line to its
    interrupt} from per_segment() of the device latencies and the gaps: a
    delayed NVMe write is timed from its stamp, @gap after that line."""
    return {dur: median(by_seg[i]) + (median(by_gap[i]) if i in by_gap else 0.0)
            for i, dur in enumerate(DELAYS_US, start=1) if i in by_seg}


def latency_rows(kind, dev_lat, guest_p50_us, halt_p50_us, gaps=(), shares=(), refs=None):
    """Rows of one device's latency boots.  dev_lat: [(lba, s)] from the
    trace of the idle=poll boot; guest_p50_us: {DUR us: [fio median of
    each round]} of that boot, key 0 the baseline; halt_p50_us: the same
    from the boot with the default idle; gaps, shares: device_latencies()' (lba, s) of doorbell
    line to submission stamp, and of interrupt to next submission; refs:
    {DUR us: Reference} of stock devices that take about DUR (or None)."""
    label = "nvme" if kind == "nvme" else "syncblk-irq"
    by_seg, gaps, shares = per_segment(dev_lat), per_segment(gaps), per_segment(shares)
    if 0 not in by_seg:
        raise SetupError(f"latency {label}: no baseline writes in the device trace")
    backend = median(by_seg[0])
    waited = waited_us(by_seg, gaps)
    g_base = mean(guest_p50_us[0])
    rows = [Row("latency", f"{label} backend (no rule)", backend, backend, "us", 1.0,
                n=len(by_seg[0]), note=f"guest median {g_base:.0f} us")]
    for i, dur in enumerate(DELAYS_US, start=1):
        if i not in by_seg:
            raise SetupError(f"latency {label}: no writes for delay={dur}us in the trace")
        expect = max(dur, backend)
        dev = median(by_seg[i])
        gap = median(gaps[i]) if i in gaps else 0.0
        gap_note = (f"; timed from the submission stamp, {gap:.1f} us after "
                    f"the doorbell's trace line" if i in gaps else "")
        rows.append(Row("latency", f"{label} device delay={dur}us", dev, expect, "us",
                        ratio(dev, expect), n=len(by_seg[i]),
                        target=f"+-{DEVICE_TOLERANCE_US:g} us",
                        ok=abs(dev - expect) <= DEVICE_TOLERANCE_US,
                        note=f"error {dev - expect:+.1f} us{gap_note}"))
        # The guest pays what it pays at baseline, minus the backend time the
        # rule's delay now covers, plus the delay (counted from the stamp,
        # @gap after the doorbell's trace line: writing that line is the
        # instrument's, inside the baseline's backend time too).
        shift = gap + expect - backend
        g = mean(guest_p50_us[dur])
        tol = 0.10 if dur < 1000 else 0.05
        ref = (refs or {}).get(dur)
        raw = f"{(g - g_base - shift) / dur:+.1%} of DUR"
        idle_note = ""
        if ref is not None and abs(ref.device_us - waited[dur]) <= MATCH_FRACTION * dev:
            # What the guest pays around a DUR-long device latency beyond
            # what it pays around a short one, measured on a stock device
            # whose writes took as long (idle rows).
            shift += ref.idle_us
            idle_note = (f" with the guest's idle cost ({ref.idle_us:+.0f} us) taken out, "
                         f"{raw} with it")
        elif ref is not None:
            idle_note = (f" (idle cost not taken out: the reference's writes took "
                         f"{ref.device_us:.0f} us)")
        # Per round against that round's baseline: the rounds ran seconds
        # apart, and this host's speed drifts between them.
        err, lo, hi = mean_interval([d - b - shift for d, b in zip(guest_p50_us[dur],
                                                                   guest_p50_us[0])])
        ci = f" ({LEVEL:.0%} CI {lo / dur:+.1%}..{hi / dur:+.1%})" if lo is not None else ""
        rows.append(Row("latency", f"{label} guest delay={dur}us", g, g_base + shift, "us",
                        ratio(g, g_base + shift), n=len(guest_p50_us[dur]),
                        target=f"error <= {tol:.0%} of DUR",
                        ok=tolerance_verdict(err, lo, hi, tol * dur),
                        note=f"error {err / dur:+.1%} of DUR{ci}{idle_note}"
                             f"{share_note(shares, i)}"))
        if ref is not None:
            rows.append(Row("idle", f"{label} delay={dur}us", ref.idle_us, 0.0, "us", n=ref.n,
                            note=f"{label} on holdnbd, writes held {ref.hold_ns / 1e3:.0f} us: "
                                 f"device {ref.device_us:.0f} us (injected {dev:.0f}), guest "
                                 f"{ref.guest_us:.0f} us; not held: {ref.base_device_us:.0f} "
                                 f"and {ref.base_guest_us:.0f} us"))
        # What halting through DUR adds: back to back (the baseline) the
        # vCPU never idles, so the baselines cancel boot-to-boot drift.
        halt = mean(halt_p50_us[dur])
        wake = (halt - mean(halt_p50_us[0])) - (g - g_base)
        rows.append(Row("wakeup", f"{label} delay={dur}us", wake, 0.0, "us",
                        note=f"guest median {halt:.0f} us with HLT idle, "
                             f"{g:.0f} us with idle=poll"))
    return rows


def overhead_rows(samples, bases, level=LEVEL):
    """samples: {variant: [{"cpu_s", "ios", "boot_s"}...]}; bases: {variant:
    the variant it is compared with, None for a baseline}.  Rounds at the
    same index ran back to back."""
    per_io = {v: [r["cpu_s"] / r["ios"] * 1e6 for r in rs] for v, rs in samples.items()}
    boots = {v: [r["boot_s"] for r in rs] for v, rs in samples.items()}
    rows = []
    for group, data, unit, what in (("overhead", per_io, "us", "host CPU per I/O"),
                                    ("boot", boots, "s", "first KTAP line")):
        for v, xs in data.items():
            base = bases[v]
            threads = thread_note(samples[v]) if group == "overhead" else ""
            if base is None:
                m = mean(xs)                     # as the compared rows show it
                rows.append(Row(group, f"{v}, {what}", m, m, unit, 1.0, n=len(xs),
                                note=threads))
                continue
            r, lo, hi = paired_ratio(data[base], xs, level)
            row = Row(group, f"{v}, {what}", mean(xs), mean(data[base]), unit, r, lo, hi,
                      n=len(xs), note=f"against {base}")
            if group == "overhead":
                row.ok = ci_verdict(r, lo, hi, OVERHEAD_TARGET)
                row.target = f"<= {OVERHEAD_TARGET}"
                if row.ok is None:
                    row.note += "; the CI straddles the target"
                if threads:
                    row.note += "; " + threads
            rows.append(row)
    return rows


def deterministic_rows(plain, delayed, delay_s, hits):
    r, lo, hi = paired_ratio(plain, delayed)
    return [Row("deterministic", f"wall, write delay={delay_s * 1e3:g}ms",
                mean(delayed), mean(plain), "s", r, lo, hi,
                n=len(plain), note=f"{hits} writes delayed = {hits * delay_s:.1f} s virtual")]


COOLING_KIB = 2048


def cooling_rows(text):
    """Rows of host-cooling's output ("idle_us N median_ns M" lines)."""
    walk = {int(m[1]): int(m[2]) / 1000
            for m in re.finditer(r"^idle_us (\d+) median_ns (\d+)$", text, re.M)}
    if 0 not in walk:
        raise SetupError("host-cooling: no back-to-back figure")
    return [Row("idle", f"host, {COOLING_KIB} KiB walk after {us} us spinning", walk[us],
                walk[0], "us", ratio(walk[us], walk[0]),
                note="no QEMU, no guest: the host's caches after a wait")
            for us in DELAYS_US if us in walk]


def overhead_sample(marks, ios_small, ios_large, thread_marks=None):
    """CPU seconds and I/Os of the large run beyond the small one; with
    @thread_marks (per mark, proc_thread_cpu_seconds()), also that CPU by
    thread role.  A thread that exited during a run took its time into the
    process total only: that rest is EXITED."""
    cpu = (marks["b1"] - marks["b0"]) - (marks["a1"] - marks["a0"])
    sample = {"cpu_s": cpu, "ios": ios_large - ios_small}
    if thread_marks and all(k in thread_marks for k in ("a0", "a1", "b0", "b1")):
        small = thread_cpu_between(thread_marks["a0"], thread_marks["a1"])
        large = thread_cpu_between(thread_marks["b0"], thread_marks["b1"])
        t = {r: large.get(r, 0.0) - small.get(r, 0.0) for r in set(small) | set(large)}
        t[EXITED] = cpu - sum(t.values())
        sample["threads_s"] = t
    return sample


def thread_note(samples):
    """Mean CPU per I/O by thread role over @samples, e.g. 'vCPU 50.1, main
    loop 9.0 us per I/O', or '' when the samples have no breakdown."""
    if not samples or any("threads_s" not in r for r in samples):
        return ""
    roles = sorted(set().union(*(r["threads_s"] for r in samples)), key=ROLE_ORDER.index)
    parts = []
    for role in roles:
        if not any(r["threads_s"].get(role, 0.0) for r in samples):
            continue                            # a role that never ran says nothing
        us = sum(r["threads_s"].get(role, 0.0) / r["ios"] for r in samples) / len(samples) * 1e6
        parts.append(f"{role} {us:.1f}")
    return ", ".join(parts) + " us per I/O"
