"""bench's restore group: runs per hour of restored against cold runs of
one scenario, and a restored --deterministic pair that must be one run."""

import os
import time

from faultline.bench.report import Row
from faultline.build.builds import build_all
from faultline.errors import EXIT_PASS, SetupError
from faultline.judge.stats import mean, paired_ratio
from faultline.run import runner
from faultline.run.options import RunOptions
from faultline.run.restore import ensure_snapshot


# ---------------------------------------------------------------- bench

BENCH_SCENARIO = "smoke"
RESTORE_TARGET = 3.0     # issue 31: restored runs at least 3x the runs per hour


def bench_rows(seeds, out, log):
    """`faultline bench` row: runs per hour of a @seeds-seed smoke sweep,
    cold boots against restored runs.  The two take turns per seed, so each
    pair shares the host's load of that moment; the ratio is the mean of the
    per-seed wall ratios with its 95 % interval.  The save is made (or found)
    first and reported apart: it is paid once per machine, not per run.
    ([Row], samples)."""
    opts = {m: RunOptions(quiet=True, restore=m == "restore") for m in ("cold", "restore")}
    sc = runner.load_scenario(BENCH_SCENARIO, opts["restore"])
    builds = build_all(quiet=True)
    t0 = time.monotonic()
    _, saved_s = ensure_snapshot(sc, builds, opts["restore"])
    walls = {"cold": [], "restore": []}
    phases = {"cold": [], "restore": []}
    failed = []
    for seed in range(1, seeds + 1):
        for mode in ("cold", "restore"):
            rundir = runner.new_dir(out, f"bench-{mode}-seed{seed}")
            t = time.monotonic()
            r, meta = runner.one_run(sc, seed, opts[mode], builds, rundir, verbose=False)
            walls[mode].append(time.monotonic() - t)
            phases[mode].append(meta.get("backend_info", {}).get("phases"))
            if r.status != EXIT_PASS:
                failed.append(f"{mode} seed {seed}: {r.outcome}")
            log(f"restore: seed {seed} {mode:7} {walls[mode][-1]:6.1f} s  {r.outcome}")
    if failed:
        raise SetupError("runs failed: " + "; ".join(failed))
    # runs/hour restored over cold = cold wall / restored wall, per seed.
    r, lo, hi = paired_ratio(walls["restore"], walls["cold"])
    # The target is a floor: met when the whole interval is at or above it.
    if lo is None:
        ok = r >= RESTORE_TARGET
    else:
        ok = True if lo >= RESTORE_TARGET else False if hi < RESTORE_TARGET else None
    note = (f"{seeds} seeds; save {saved_s if saved_s is not None else 'cached'}"
            f"{' s' if saved_s is not None else ''}, not per run")
    ceiling = boot_free_ceiling(walls["cold"], phases["cold"])
    if ceiling is not None:
        # What restoring can win at most: the boot, nothing after it.
        note += f"; ceiling with a boot that cost nothing: {ceiling:.2f}x"
    if ok is None:
        note += "; undecided on this host: the interval straddles the target"
    row = Row("restore", f"{BENCH_SCENARIO} runs per hour, restored vs cold boot",
              3600.0 / mean(walls["restore"]), 3600.0 / mean(walls["cold"]), "runs/h",
              r, lo, hi, n=seeds, target=f">= {RESTORE_TARGET:g}x", ok=ok, note=note)
    pair_row = deterministic_pair_row(builds, out, log)
    return [row, pair_row], {"walls": walls, "phases": phases,
                             "seconds": round(time.monotonic() - t0, 1)}


def boot_free_ceiling(cold_walls, cold_phases):
    """The most a restore could give over cold boots whose walls were
    @cold_walls: each run without its boot phase (from @cold_phases) at all.
    None when a run has no phase times."""
    boots = [(p or {}).get("boot") for p in cold_phases]
    if not cold_walls or None in boots:
        return None
    rest = sum(cold_walls) - sum(boots)
    return sum(cold_walls) / rest if rest > 0 else None


# Seeded delays, so that a deterministic pair has faults to compare.
BENCH_DET_RULES = "jitter: write prob=0.1 delay=uniform(10us,200us)\n"


def deterministic_pair_row(builds, out, log, one_run=None):
    """`faultline bench` row: two restored --deterministic runs of seed 1
    of BENCH_SCENARIO (with BENCH_DET_RULES) must be one run: both pass,
    one fault digest, byte-identical faults.jsonl and ktap.log."""
    one_run = one_run or runner.one_run
    rules = os.path.join(out, "bench-deterministic.rules")
    os.makedirs(out, exist_ok=True)
    with open(rules, "w") as f:
        f.write(BENCH_DET_RULES)
    opts = RunOptions(quiet=True, restore=True, deterministic=True, rules=rules)
    sc = runner.load_scenario(BENCH_SCENARIO, opts)
    runs = []
    for i in range(2):
        rundir = runner.new_dir(out, f"bench-restore-deterministic-{i}")
        r, _ = one_run(sc, 1, opts, builds, rundir, verbose=False)
        log(f"restore: --deterministic run {i + 1} of 2: {r.outcome}, digest {r.digest}")
        runs.append((r, rundir))
    (ra, da), (rb, db) = runs
    files = {n: (_read_or_none(da, n), _read_or_none(db, n)) for n in ("faults.jsonl", "ktap.log")}
    differ = [n for n, (a, b) in files.items() if a is None or a != b]
    same = ra.status == rb.status == EXIT_PASS and ra.digest is not None and \
        ra.digest == rb.digest and not differ
    note = f"digests {ra.digest} / {rb.digest}" + (f"; {', '.join(differ)} differ" if differ
                                                     else "")
    return Row("restore", f"{BENCH_SCENARIO} restored --deterministic, seed 1 twice: the same run",
               1.0 if same else 0.0, 1.0, "identical", n=2, target="identical", ok=same,
               note=note)


def _read_or_none(rundir, name):
    try:
        with open(os.path.join(rundir, name), "rb") as f:
            return f.read()
    except OSError:
        return None
