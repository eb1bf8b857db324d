"""matrix's results set: each run of a `faultline matrix --results FILE`
as one record of results/scenarios/SET.jsonl, and the table `faultline
docs` writes from it (docs/scenarios.md, "Measured").

A record has the fields every record has (results/records.py), the
scenario as its subject, plus the kernel's column name, the run's
outcome and the host's one-minute load average when the run ended: a
wall time measured beside other VMs is not an idle host's, and the
table says which it was."""

import os
import statistics

from faultline.results import records
from faultline.results.tables import markdown

NULL = type(None)
RECORD_FIELDS = {"kernel": (str,), "outcome": (str,), "reason": (str, NULL),
                 "load1": records.NUMBER, "date": (str,), "faultline": (str,)}
# One record per (scenario, kernel, seed): a rerun replaces it.
IDENTITY = ("subject", "kernel_key", "seed", "deterministic")
COMMAND = "faultline matrix --scenarios all --kernel K ... --results FILE"


def check_path(path):
    records.check_results_option(path, RECORD_FIELDS)


def check(path, idents):
    records.check_set_builds(path, RECORD_FIELDS, idents)


def record_of(rundir, report, meta, kernel):
    """The record of a finished matrix run (None: it measured nothing)."""
    rec = records.record_of_run(rundir, report.scenario, meta, report, kernel=kernel,
                                outcome=report.outcome or "-",
                                load1=round(os.getloadavg()[0], 1))
    if rec is not None:
        rec.setdefault("faultline", "unknown")
        rec.setdefault("date", "unknown")
    return rec


def write(path, rec):
    return records.write_set(path, [rec], IDENTITY, RECORD_FIELDS)


def _cell(runs):
    """One scenario on one kernel: passes of runs, median wall, load."""
    if not runs:
        return "-"
    ok = sum(1 for r in runs if r["verdict"] == "pass")
    wall = statistics.median(r["elapsed_s"] for r in runs)
    load = max(r["load1"] for r in runs)
    bad = sorted({r["verdict"] for r in runs if r["verdict"] != "pass"})
    return (f"{ok}/{len(runs)} pass{' (' + ', '.join(bad) + ')' if bad else ''}, "
            f"{wall:.0f} s (load {load:.1f})")


def render(recs, where):
    """The generated text of a docs/ region for the set @where."""
    if not recs:
        return (f"No measurement in `{where}` yet. `{COMMAND.replace('FILE', where)}` "
                "records one, then `faultline docs` writes the table here.\n")
    kernels = sorted({r["kernel"] for r in recs})
    scenarios = sorted({r["subject"] for r in recs})
    by = {}
    for r in recs:
        by.setdefault((r["subject"], r["kernel"]), []).append(r)
    rows = [(f"`{s}`",) + tuple(_cell(by.get((s, k), [])) for k in kernels) for s in scenarios]
    failing = [r for r in recs if r["verdict"] != "pass"]
    dates = sorted({r["date"] for r in recs})
    gits = sorted({r["faultline"] for r in recs})
    caption = (f"{len(recs)} run(s) of `faultline matrix` (QEMU build {recs[0]['qemu_build']}); "
               f"run {', '.join(dates)}; faultline {', '.join(gits)}. A cell: runs that "
               "passed, the median wall time, and the highest one-minute load average "
               "of the host when they ended (2 cores: above 2, other VMs shared them); "
               "`-`: not run on that kernel (`--scenarios all` leaves out what the "
               "kernel-config check refuses before boot, and says why).")
    notes = [f"- `{r['subject']}` on {r['kernel']}, seed {r['seed']}: {r['verdict']} "
             f"({r['outcome']}): {r['signature'] or r['reason'] or '-'}" for r in failing]
    return (caption + "\n\n" + markdown(("scenario",) + tuple(kernels), rows)
            + ("\nNot passed:\n\n" + "\n".join(notes) + "\n" if notes else ""))
