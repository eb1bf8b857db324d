"""`faultline bench`: every performance figure of faultline as a ratio
against a baseline measured in the same run (docs/bench.md).

Rows, by group:
  engine         ns per fe_engine_decide() (tests/bench/engine-bench) against
                 an empty call through a function pointer; target <= 30 ns.
  latency        rule `write delay=DUR` at QD1, on NVMe and syncblk irq mode:
                 device side (doorbell write to interrupt, from QEMU trace
                 events) against max(DUR, backend time), target +-15 us; guest
                 side (fio median completion latency) against the guest's
                 baseline plus the same plus the guest's idle cost (idle),
                 target 10 % (100 us) / 5 %.  The baseline segment runs in
                 the same boot with the injector attached; its rules never
                 match the baseline's LBAs.  The segments take turns over
                 rounds; the error is per round against that round's
                 baseline, with its 95 % CI.  The guest idles with idle=poll
                 there (see wakeup).
  idle           what the guest pays around a device latency of DUR beyond
                 a short one, with no rule firing: the same device on
                 holdnbd, whose writes take about as long as the injected
                 ones; and, with no QEMU at all, how much slower this host
                 runs a fixed walk of its memory after spinning for DUR.
  wakeup         what the guest's idle wake-up costs: the latency boot runs
                 with idle=poll (a vCPU that never halts) and again with
                 the default idle (HLT); per DUR, the second's guest-side
                 excess over its baseline minus the first's.
  overhead       host CPU (QEMU utime+stime) per guest I/O for a fixed number
                 of fio writes: NVMe with an injector and 64 never-matching
                 rules against stock NVMe, interleaved rounds, 95 % CI.
  boot           time to the first KTAP line (same boots as overhead).
  deterministic  wall time of a swap run with 10 ms per write under
                 --deterministic against the same run without the rule.
  restore        runs per hour of a smoke sweep (20 seeds, --quick 4):
                 restored runs against cold boots (restored.bench_rows).
  programs       generated swap programs per hour per VM (many in one boot)
                 against explore's smoke runs per hour (one boot per
                 schedule), in interleaved rounds (programs.bench_rows).
  fresh          (only with --only) a first `run` from a clean clone and
                 empty caches to its PASS, 3 rounds (--quick 1), against
                 the same run again (fresh.bench_rows).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from faultline import TOP, rules, scenario
from faultline.bench import fresh, programs, restored
from faultline.bench import results as bench_results
from faultline.bench.cpu import proc_cpu_seconds, proc_thread_cpu_seconds
from faultline.bench.figures import (COOLING_KIB, DEFAULT_GROUPS, DELAYS_US, GROUPS, MAX_ROUNDS, Sizes,
                                     cooling_rows, deterministic_rows, engine_rows, latency_rows,
                                     overhead_rows, overhead_sample, waited_us)
from faultline.bench.report import compare_lines, format_rows, load_json, to_json
from faultline.bench.trace import (NVME_EVENTS, SEGMENT_MIB, SYNCBLK_EVENTS, device_latencies,
                                   per_segment)
from faultline.build.builds import build_all
from faultline.errors import EXIT_FAIL, EXIT_PASS, EXIT_SETUP, SetupError
from faultline.host import scratchdirs
from faultline.host.messages import say
from faultline.host.versions import git_describe
from faultline.judge.stats import mean, median
from faultline.run.options import BenchOptions
from faultline.run.runner import DEFAULT_OUT, new_dir, scratch_dir
from faultline.run.spec_builder import prepare_spec
from faultline.run.watch import watch
from faultline.vm.qemu import QemuMachine


# ---------------------------------------------------------------- machines

class Boot:
    """One QEMU boot of a generated scenario; as an observer of its watch
    loop (every 5 ms) it notes the first KTAP line and, at each
    `# bench-mark NAME` line, QEMU's utime+stime."""

    def __init__(self, text, name, out, builds, deterministic=False, trace=(), backend=None):
        self.dir = new_dir(out, name)
        path = os.path.join(self.dir, f"{name}.toml")
        with open(path, "w") as f:
            f.write(text)
        self.sc = scenario.load(path)
        rules.check_scenarios([self.sc])
        self.builds = builds.for_scenario(self.sc)
        self.deterministic = deterministic
        self.trace = trace
        self.backend = backend      # -blockdev options replacing the disk image's
        self.marks = {}
        self.thread_marks = {}      # mark -> {tid: (thread role, CPU seconds)}
        self.first_ktap_s = None
        self.block_writes = None
        self.watch = None
        self.poll_s = 0.005         # the watch loop looks this often (marks, first line)
        self._pid = self._clk = None

    def on_poll(self, streams, new_ktap, elapsed):
        """A watch observer: the first KTAP line's time and, at each
        `# bench-mark NAME` line, QEMU's CPU time (whole and per thread)."""
        if self.first_ktap_s is None and (new_ktap or streams["ktap"].partial):
            self.first_ktap_s = elapsed
        for ln in new_ktap.splitlines():
            if ln.startswith("# bench-mark "):
                try:
                    mark = ln.split()[2]
                    with open(f"/proc/{self._pid}/stat") as f:
                        self.marks[mark] = proc_cpu_seconds(f.read(), self._clk)
                    self.thread_marks[mark] = proc_thread_cpu_seconds(self._pid, self._clk)
                except (OSError, IndexError, ValueError):
                    pass

    def run(self):
        scratch = scratch_dir()
        seed = self.sc.faults.seed
        try:
            spec = prepare_spec(self.sc, self.builds, self.dir, scratch=scratch, seed=seed,
                                deterministic=self.deterministic, blockdev=self.backend)
            # Named threads (vCPU, worker...): CPU per I/O by thread role.
            spec.extra_args += ["-name", "bench,debug-threads=on"]
            if self.trace:
                spec.extra_args += ["-msg", "timestamp=on",
                                    "-D", os.path.join(self.dir, "trace.log")]
                for ev in self.trace:
                    spec.extra_args += ["-trace", f"enable={ev}"]
            with QemuMachine(spec) as m:
                m.start()
                self._pid, self._clk = m.pid(), os.sysconf("SC_CLK_TCK")
                self.watch = watch(m, self.sc.timeout_s, observers=[self])
                if m.running():
                    try:
                        self.block_writes = sum(b["stats"]["wr_operations"]
                                                for b in m.qmp("query-blockstats"))
                    except Exception:     # noqa: BLE001 - a missing count is reported below
                        self.block_writes = None
        finally:
            scratchdirs.remove_scratch(scratch)
        if self.watch.guest_exit != 0:
            raise SetupError(f"bench boot {os.path.basename(self.dir)} failed "
                             f"(guest exit {self.watch.guest_exit}, hang {self.watch.hang}): "
                             f"see {self.dir}")
        return self

    def ktap(self):
        with open(os.path.join(self.dir, "ktap.log"), errors="replace") as f:
            return f.read()

    def diag_after(self, mark, name):
        """The first `# NAME VALUE` after `# bench-mark MARK`."""
        text = self.ktap()
        i = text.find(f"# bench-mark {mark}\n")
        m = re.search(rf"^# {re.escape(name)} (-?\d+)", text[i:], re.M) if i >= 0 else None
        if not m:
            raise SetupError(f"{self.dir}: no '# {name}' after mark {mark}")
        return int(m.group(1))


def scenario_text(desc, kind, tools, faults, run, timeout=600, completion="task",
                  memory="512M", cpus=2, swap=False, size="1G",
                  cmdline="transparent_hugepage=never"):
    comp = f'completion = "{completion}"\n' if kind == "syncblk" else ""
    return (f'description = "{desc}"\ntimeout = "{timeout}s"\n\n[vm]\nmemory = "{memory}"\n'
            f'cpus = {cpus}\ncmdline = "{cmdline}"\n'
            f'tools = {json.dumps(tools)}\n\n'
            f'[device]\nkind = "{kind}"\n{comp}size = "{size}"\n\n'
            f'[swap]\n{"zswap = false" if swap else "enabled = false"}\n\n{faults}\n'
            f'[[test]]\nrun = "{run}"\n')


def never_rules(n):
    """n rules evaluated for every write that never match (the disk is 1 GiB)."""
    lines = [f"never{i}: write lba={100_000_000 + 16 * i}-{100_000_007 + 16 * i} "
             "error=write-fault" for i in range(n)]
    return '[faults]\nseed = 1\nrules = """\n' + "\n".join(lines) + '\n"""\n'


def bench_program(name, *args):
    """Build tests/bench/@name and run it; its standard output."""
    build = os.path.join(TOP, "build")
    if not os.path.isfile(os.path.join(build, "build.ninja")):
        subprocess.run(["meson", "setup", build, TOP], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["ninja", "-C", build, f"tests/bench/{name}"], check=True,
                   stdout=subprocess.DEVNULL)
    r = subprocess.run([os.path.join(build, "tests", "bench", name)] + [str(a) for a in args],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SetupError(f"{name} failed: {r.stderr.strip().splitlines()[-1:]}")
    return r.stdout


def run_engine(sizes):
    return engine_rows(bench_program("engine-bench", sizes.engine_iters))


def run_host_cooling():
    return cooling_rows(bench_program("host-cooling", COOLING_KIB, 0, *DELAYS_US))


def latency_script(kind, sizes):
    """Each segment's writes in sizes.latency_rounds runs, the segments taking
    turns: this host's speed drifts over seconds (measured: a boot's
    baseline guest median from 123 to 268 us), and in one run per
    segment the baseline and the delays met different drift."""
    dev = "/dev/nvme0n1" if kind == "nvme" else "/dev/syncblk0"
    parts = []
    for rnd in range(sizes.latency_rounds):
        for i, dur in enumerate((0,) + DELAYS_US):
            ios = max(sizes.latency_ios[dur] // sizes.latency_rounds, 1)
            parts.append(f"echo '# bench-mark seg{dur}-{rnd}'; fio-ktap --name=qd1 "
                         f"--filename={dev} --direct=1 --ioengine=psync --iodepth=1 "
                         f"--rw=randwrite --bs=4k --offset={i * SEGMENT_MIB}M "
                         f"--size={SEGMENT_MIB}M --number_ios={ios} --randseed={rnd + 1} "
                         f"--norandommap")
    return " && ".join(parts)


def segment_p50(boot, rounds):
    """{DUR us: [fio median of each round]} of a latency_script() boot."""
    return {dur: [boot.diag_after(f"seg{dur}-{rnd}", "fio write_clat_p50_us")
                  for rnd in range(rounds)]
            for dur in (0,) + DELAYS_US}


def latency_faults():
    sectors = (SEGMENT_MIB << 20) // 512
    lines = [f"d{dur}: write lba={i * sectors}-{(i + 1) * sectors - 1} delay={dur}us"
             for i, dur in enumerate(DELAYS_US, start=1)]
    return '[faults]\nseed = 1\nrules = """\n' + "\n".join(lines) + '\n"""\n'


def latency_boot(kind, sizes, out, builds, idle):
    """One latency boot, one vCPU; idle "poll" (idle=poll: the vCPU never
    halts, so no wake-up from HLT is in what the guest measures) or
    "halt" (the kernel's default).  Returns (device latencies, fio medians,
    device_latencies()' gaps and shares)."""
    label = "nvme" if kind == "nvme" else "syncblk-irq"
    cmdline = "transparent_hugepage=never" + (" idle=poll" if idle == "poll" else "")
    text = scenario_text(f"bench latency {label} idle={idle}", kind, ["fio"],
                         latency_faults(), latency_script(kind, sizes), completion="irq",
                         cpus=1, cmdline=cmdline)
    b = Boot(text, f"bench-latency-{label}-{idle}", out, builds,
             trace=NVME_EVENTS if kind == "nvme" else SYNCBLK_EVENTS).run()
    gaps, shares = [], []
    with open(os.path.join(b.dir, "trace.log"), errors="replace") as f:
        dev = device_latencies(f.read(), kind, gaps, shares)
    p50 = segment_p50(b, sizes.latency_rounds)
    return dev, p50, gaps, shares


@dataclass
class Reference:
    """A stock device that takes about DUR per write, and the same device
    back to back (see reference_boot)."""
    hold_ns: int
    device_us: float             # median doorbell (submit) line to interrupt
    guest_us: float              # fio median, mean over rounds
    base_device_us: float        # the same, the writes not held
    base_guest_us: float
    n: int

    @property
    def idle_us(self):
        """What the guest pays around this latency beyond what it pays
        around the unheld writes' short one."""
        return (self.guest_us - self.device_us) - (self.base_guest_us - self.base_device_us)


def reference_boot(kind, sizes, out, builds, holds):
    """The guest's idle cost at each DUR, with no rule firing: the latency
    boot's segments and idle=poll on the same device, injector attached
    with a never-matching rule, backed by holdnbd, which answers a write in
    the segment of DUR holds[DUR] ns after it arrives, and the baseline
    segment's at once.  Returns {DUR: Reference}."""
    label = "nvme" if kind == "nvme" else "syncblk-irq"
    text = scenario_text(f"bench idle reference {label}", kind, ["fio"], never_rules(1),
                         latency_script(kind, sizes), completion="irq", cpus=1,
                         cmdline="transparent_hugepage=never idle=poll")
    seg = SEGMENT_MIB << 20
    sock_dir = tempfile.mkdtemp(prefix="holdnbd-")
    sock = os.path.join(sock_dir, "sock")
    server = subprocess.Popen(
        [sys.executable, "-m", "faultline.bench.holdnbd", sock, str(1 << 30),
         os.path.join(sock_dir, "image")] +
        [f"{i * seg}-{(i + 1) * seg}={holds[dur]}" for i, dur in enumerate(DELAYS_US, 1)],
        cwd=os.path.join(TOP, "python"), stdout=subprocess.PIPE, text=True)
    try:
        if server.stdout.readline().strip() != "ready":
            raise SetupError("holdnbd did not start")
        b = Boot(text, f"bench-reference-{label}", out, builds,
                 trace=NVME_EVENTS if kind == "nvme" else SYNCBLK_EVENTS,
                 backend=f"driver=nbd,node-name=disk0,server.type=unix,server.path={sock}"
                 ).run()
    finally:
        server.kill()
        server.wait()
        server.stdout.close()
        shutil.rmtree(sock_dir, ignore_errors=True)
    with open(os.path.join(b.dir, "trace.log"), errors="replace") as f:
        by_seg = per_segment(device_latencies(f.read(), kind))
    p50 = segment_p50(b, sizes.latency_rounds)
    if any(i not in by_seg for i in range(len(DELAYS_US) + 1)):
        raise SetupError(f"{b.dir}: a segment has no writes in the device trace")
    return {dur: Reference(holds[dur], median(by_seg[i]), mean(p50[dur]), median(by_seg[0]),
                           mean(p50[0]), len(by_seg[i]))
            for i, dur in enumerate(DELAYS_US, 1)}


def matched_references(kind, sizes, out, builds, injected_us):
    """reference_boot() twice: first holding each write DUR, then shorter by
    what the first boot's writes took beyond the injected ones
    (@injected_us: {DUR: doorbell line to interrupt}), so that the guest
    waits about as long around both; the idle cost grows with the wait."""
    first = reference_boot(kind, sizes, out, builds, {d: d * 1000 for d in DELAYS_US})
    holds = {d: max(int(r.hold_ns - (r.device_us - injected_us[d]) * 1000), 0)
             for d, r in first.items()}
    return reference_boot(kind, sizes, out, builds, holds)


def run_latency(kind, sizes, out, builds):
    dev, p50, gaps, shares = latency_boot(kind, sizes, out, builds, "poll")
    _, halt_p50, _, _ = latency_boot(kind, sizes, out, builds, "halt")
    waited = waited_us(per_segment(dev), per_segment(gaps))
    if len(waited) < len(DELAYS_US):
        raise SetupError(f"latency {kind}: a delayed segment has no writes in the trace")
    refs = matched_references(kind, sizes, out, builds, waited)
    return latency_rows(kind, dev, p50, halt_p50, gaps, shares, refs)


def overhead_variants():
    """(name, device kind, faults, the variant it is compared with) of the
    no-fault overhead comparison: the injector on NVMe against stock NVMe,
    the fault-inject block filter on virtio-blk against plain virtio-blk."""
    return [("stock nvme", "nvme", "", None),
            ("nvme+injector 64 never-matching rules", "nvme", never_rules(64), "stock nvme"),
            ("stock virtio-blk", "virtio-blk", "", None),
            ("virtio-blk+filter 64 never-matching rules", "virtio-blk", never_rules(64),
             "stock virtio-blk")]


def overhead_script(dev, sizes):
    """After a warm-up, two fio runs of N/4 and N writes, each between marks: the CPU per
    I/O is the difference of the two over the difference of their I/Os,
    so fio's start-up, the marks' latency and idle time cancel out."""
    job = (f"fio-ktap --name=cpu --filename={dev} --direct=1 --ioengine=io_uring "
           f"--iodepth=32 --rw=randwrite --bs=4k --size=512M --randrepeat=1 --norandommap")
    small = sizes.overhead_ios // 4
    # A warm-up first: the first fio in a boot pays one-time costs (loading
    # fio, io_uring set-up), and the first write to a block of the sparse
    # disk image allocates host memory; both made the small run cost more
    # than the large one (measured).  One sequential pass over the range.
    warm = (f"fio-ktap --name=warm --filename={dev} --direct=1 --ioengine=psync "
            f"--rw=write --bs=1M --size=512M")
    return (f"{warm} && "
            f"echo '# bench-mark a0' && {job} --number_ios={small} && echo '# bench-mark a1' && "
            f"echo '# bench-mark b0' && {job} --number_ios={sizes.overhead_ios} && "
            f"echo '# bench-mark b1'")


def run_overhead(sizes, out, builds, log):
    variants = overhead_variants()
    samples = {v[0]: [] for v in variants}
    for rnd in range(sizes.overhead_rounds):
        order = variants if rnd % 2 == 0 else variants[::-1]   # drift hits both
        for name, kind, faults, _ in order:
            dev = "/dev/nvme0n1" if kind == "nvme" else "/dev/vda"
            text = scenario_text(f"bench overhead {name}", kind, ["fio"], faults,
                                 overhead_script(dev, sizes))
            b = Boot(text, "bench-overhead", out, builds).run()
            small = b.diag_after("a0", "fio write_kib") // 4
            large = b.diag_after("b0", "fio write_kib") // 4
            if large < sizes.overhead_ios or (b.block_writes or 0) < small + large:
                raise SetupError(f"{b.dir}: fio wrote {small}+{large} blocks, the device "
                                 f"counted {b.block_writes} (expected {sizes.overhead_ios})")
            if any(k not in b.marks for k in ("a0", "a1", "b0", "b1")):
                raise SetupError(f"{b.dir}: the bench marks were not seen")
            s = overhead_sample(b.marks, small, large, b.thread_marks)
            s.update(device_writes=b.block_writes, boot_s=b.first_ktap_s)
            samples[name].append(s)
            log(f"round {rnd + 1} {name:40} {s['cpu_s'] / s['ios'] * 1e6:6.1f} us CPU/I/O  "
                f"boot {s['boot_s']:.2f} s")
    return overhead_rows(samples, {v[0]: v[3] for v in variants}), samples


def run_deterministic(sizes, out, builds, log, delay="10ms"):
    run = "swapstress --mem 96M --memcg-max 32M --rounds 1 --seed 7"
    texts = {"plain": scenario_text("bench deterministic plain", "nvme", [], "", run,
                                    timeout=900, memory="384M", cpus=1, swap=True, size="512M"),
             "delayed": scenario_text("bench deterministic delayed", "nvme", [],
                                      f'[faults]\nrules = "slow: write delay={delay}"\n', run,
                                      timeout=900, memory="384M", cpus=1, swap=True,
                                      size="512M")}
    walls = {"plain": [], "delayed": []}
    hits = 0
    for rnd in range(sizes.det_rounds):
        for label in ("plain", "delayed"):
            b = Boot(texts[label], f"bench-det-{label}", out, builds, deterministic=True).run()
            walls[label].append(b.watch.elapsed_s)
            if label == "delayed":
                hits = sum(r["hits"] for r in (b.watch.faults or {}).get("rules", []))
            log(f"round {rnd + 1} deterministic {label:8} wall {b.watch.elapsed_s:6.1f} s")
    return deterministic_rows(walls["plain"], walls["delayed"], 0.010, hits), walls


# ---------------------------------------------------------------- command

def bench(opts: BenchOptions):
    only = DEFAULT_GROUPS if not opts.only else tuple(opts.only.split(","))
    bad = [g for g in only if g not in GROUPS]
    if bad:
        raise SetupError(f"--only {','.join(bad)}: groups are {', '.join(GROUPS)}")
    old = load_json(opts.compare) if opts.compare else None
    bench_results.check_path(opts.results)
    sizes = Sizes.for_mode(opts.quick)
    if opts.rounds is not None:
        if not 2 <= opts.rounds <= MAX_ROUNDS:
            raise SetupError(f"--rounds {opts.rounds}: between 2 (a confidence interval needs "
                             f"two) and {MAX_ROUNDS}")
        sizes.overhead_rounds = opts.rounds
    builds = build_all(quiet=True)
    ident = bench_results.builds_of(builds)
    bench_results.check(opts.results, ident)
    out = tempfile.mkdtemp(prefix="bench-", dir=_out_base(opts.out))

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    t0 = time.monotonic()
    rows, samples, failed = [], {}, []

    def group(name, fn):
        """Run one group; a failed group is reported and the others go on."""
        try:
            more, data = fn()
        except SetupError as e:
            failed.append(name)
            say(f"bench: {name} failed: {e}")
            return
        rows.extend(more)
        if data is not None:
            samples[name] = data

    if "engine" in only:
        log("engine: engine-bench")
        group("engine", lambda: (run_engine(sizes), None))
    if "latency" in only:
        log(f"latency: host-cooling ({COOLING_KIB} KiB walks after spinning for each DUR)")
        group("host-cooling", lambda: (run_host_cooling(), None))
        for kind in ("nvme", "syncblk"):
            log(f"latency: {kind} (two boots, idle=poll and HLT; QD1 segments "
                "baseline/100us/1ms/10ms; and two reference boots on holdnbd)")
            group(f"latency-{kind}", lambda: (run_latency(kind, sizes, out, builds), None))
    if "deterministic" in only:
        log(f"deterministic: {sizes.det_rounds} round(s)")
        group("deterministic", lambda: run_deterministic(sizes, out, builds, log))
    if "overhead" in only:
        log(f"overhead: {sizes.overhead_rounds} interleaved rounds")
        group("overhead", lambda: run_overhead(sizes, out, builds, log))
    if "restore" in only:
        seeds = 4 if opts.quick else 20
        log(f"restore: {seeds}-seed smoke sweep, cold boot and restored runs taking turns")
        group("restore", lambda: restored.bench_rows(seeds, out, log))
    if "programs" in only:
        rounds, per_round, runs = (2, 8, 1) if opts.quick else (3, 20, 2)
        log(f"programs: {rounds} rounds of one boot with {per_round} generated programs "
            f"and {runs} explore run(s) of {programs.EXPLORE_SCENARIO}")
        group("programs", lambda: programs.bench_rows(rounds, per_round, runs, out, log))
    if "fresh" in only:
        rounds = 1 if opts.quick else 3
        log(f"fresh: {rounds} round(s) of a first `run` from a clean clone and empty caches, "
            "then the same run again")
        group("fresh", lambda: fresh.bench_rows(rounds, out, log))
    rows.sort(key=lambda r: ("engine", "latency", "idle", "wakeup", "overhead", "boot",
                             "deterministic", "restore", "programs", "fresh").index(r.group))
    print(format_rows(rows))
    meta = {"failed": failed, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "git": git_describe(),
            "quick": bool(opts.quick), "seconds": round(time.monotonic() - t0, 1),
            "runs": out, "samples": samples}
    if old is not None:
        print()
        print(compare_lines(old, rows))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(to_json(rows, meta), f, indent=1)
        say(f"bench: {len(rows)} rows in {opts.json}; run directories in {out}")
    if opts.results and rows:
        bench_results.write(opts.results, rows, ident, meta)
        say(f"bench: {len(rows)} rows added to {opts.results} (`faultline docs` writes its table)")
    missed = [r.key for r in rows if r.ok is False]
    if missed:
        say(f"bench: {len(missed)} target(s) missed: {', '.join(missed)}")
    if failed:
        say(f"bench: failed: {', '.join(failed)} (see above)")
        return EXIT_SETUP
    return EXIT_FAIL if missed else EXIT_PASS


def _out_base(out):
    base = os.path.abspath(out or DEFAULT_OUT)
    os.makedirs(base, exist_ok=True)
    return base
