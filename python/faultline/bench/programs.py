"""bench's programs group: generated swap programs per hour per VM (one boot
runs many) against the scenario runs per hour of `faultline explore` (one
cold boot per schedule: search/explore.py run_schedule), measured in the
same bench run (docs/bench.md).

The two take turns over rounds, so each pair shares the host's load of
that moment: a round is one ProgramVM boot running its share of the
generated programs (the boot counted in its wall time) and its share of
explore runs of the smoke scenario with fresh schedules.  The ratio is the
mean of the per-round ratios of the rates, with its 95 % interval.
"""

import os
import random
import time

from faultline import scenario
from faultline.bench.report import Row
from faultline.build.builds import build_all
from faultline.errors import SetupError
from faultline.execute import boot as program_boot
from faultline.execute.channel import ChannelError
from faultline.execute.session import Budgets
from faultline.execute.vm import ProgramVM
from faultline.host import scratchdirs
from faultline.judge.stats import paired_ratio
from faultline.prog.gen import generate
from faultline.run import runner
from faultline.run.options import RunOptions
from faultline.faults import grammar
from faultline.search import explore
from faultline.vm.qmp import QmpError

EXPLORE_SCENARIO = "smoke"
PROGRAMS_TARGET = 10.0      # programs per hour per VM >= 10x explore's runs per hour
GEN_SEED = 1


def write_programs(out, first_seed, count):
    """[(name, path)] of @count generated programs in @out."""
    os.makedirs(out, exist_ok=True)
    entries = []
    for seed in range(first_seed, first_seed + count):
        path = os.path.join(out, f"gen-{seed:05d}.prog")
        with open(path, "w") as f:
            f.write(generate(seed, path=path).text())
        entries.append((program_boot.program_name(path), path))
    return entries


def program_round(entries, builds, rundir, log):
    """One boot running @entries: (wall s including the boot, programs that
    ran to a verdict, {verdict: count})."""
    ready, refused = program_boot.prepare(entries, None, one_file=False)
    opts = program_boot.ProgOptions(rundir, quiet=True)
    verdicts = {"refused": len(refused)}
    scratch = scratchdirs.new_scratch()
    t0 = time.monotonic()
    try:
        with ProgramVM(program_boot.vm_scenario(opts), builds, rundir=rundir, scratch=scratch,
                       seed=opts.seed, budgets=Budgets()) as vm:
            try:
                vm.start()
                for prep in ready:
                    out = vm.run(prep)
                    verdicts[out.verdict] = verdicts.get(out.verdict, 0) + 1
                vm.close()
            except (ChannelError, QmpError) as e:
                # The boot ends at a crash: what ran before it counts.
                verdicts["crash"] = verdicts.get("crash", 0) + 1
                log(f"programs: the guest died: {e}")
    finally:
        scratchdirs.remove_scratch(scratch)
    wall = time.monotonic() - t0
    ran = verdicts.get("pass", 0) + verdicts.get("fail", 0)
    return wall, ran, verdicts


def explore_space(opts):
    own = scenario.load(EXPLORE_SCENARIO).faults.rules
    sc = runner.load_scenarios([EXPLORE_SCENARIO], opts)[0]
    return grammar.Space.of(sc, own, False)


def bench_rows(rounds, programs_per_round, runs_per_round, out, log):
    """The programs row: ([Row], samples)."""
    builds = build_all(quiet=True)
    opts = RunOptions(quiet=True)
    space = explore_space(opts)
    rng = random.Random(f"bench-programs:{GEN_SEED}")
    prog_rates, run_rates, samples = [], [], []
    for rnd in range(rounds):
        entries = write_programs(os.path.join(out, f"bench-programs-{rnd + 1}"),
                                 GEN_SEED + rnd * programs_per_round, programs_per_round)
        rundir = runner.new_dir(out, f"bench-programs-run{rnd + 1}")
        wall, ran, verdicts = program_round(entries, builds, rundir, log)
        if not ran:
            raise SetupError(f"{rundir}: no program ran to a verdict ({verdicts})")
        walls = []
        for i in range(runs_per_round):
            sched = grammar.generate(rng, space)
            d = runner.new_dir(out, f"bench-explore-{rnd + 1}-{i + 1}")
            t = time.monotonic()
            res = explore.run_schedule(EXPLORE_SCENARIO, sched, opts, builds, d)
            walls.append(time.monotonic() - t)
            log(f"programs: round {rnd + 1} explore run {i + 1}: {walls[-1]:.1f} s "
                f"({res.report.outcome})")
        prog_rates.append(3600.0 * ran / wall)
        run_rates.append(3600.0 * len(walls) / sum(walls))
        log(f"programs: round {rnd + 1}: {ran} programs in {wall:.1f} s (one boot; {verdicts}) "
            f"= {prog_rates[-1]:.0f}/h; explore {run_rates[-1]:.0f} runs/h")
        samples.append({"programs": ran, "verdicts": verdicts, "programs_wall_s": round(wall, 1),
                        "explore_walls_s": [round(w, 1) for w in walls]})
    r, lo, hi = paired_ratio(run_rates, prog_rates)
    if lo is None:
        ok = r >= PROGRAMS_TARGET
    else:
        ok = True if lo >= PROGRAMS_TARGET else False if hi < PROGRAMS_TARGET else None
    note = (f"{rounds} rounds of one boot with {programs_per_round} generated programs "
            f"and {runs_per_round} {EXPLORE_SCENARIO} explore run(s)")
    if ok is None:
        note += "; undecided on this host: the interval straddles the target"
    row = Row("programs", f"generated programs per hour per VM vs {EXPLORE_SCENARIO} "
              "explore runs per hour", sum(prog_rates) / rounds, sum(run_rates) / rounds, "/h",
              r, lo, hi, n=rounds, target=f">= {PROGRAMS_TARGET:g}x", ok=ok, note=note)
    return [row], samples
