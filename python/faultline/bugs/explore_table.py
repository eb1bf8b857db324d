"""The "Against the real-bug corpus" table of docs/explore.md, from the
records of an explore-corpus set (results/explore-corpus/SET.jsonl): one
row per corpus bug, scenario and kernel, what tests/slow/explore_corpus.py
writes and what `faultline docs` renders.

A record is one comparison on one of a bug's kernels (the buggy one, or
with --fixed the fixed one): `faultline explore` with the scenario's own
rules removed and `--max-failures 1`, beside a plain seed sweep of the
scenario as written (seeds 1, 2, ... until a failure), each with the same
budget.  The fields of records.REQUIRED describe explore's search: the
builds of its runs, its search seed and mode, its verdict (its first
failure's class; pass when it found none within the budget), its wall time
(minimizing included), the search time of its first failure and that
failure's signature and fault digest.  A record adds:

  scenario                the bug's scenario, the one the sweep runs
  start_scenario          the generic scenario explore started from when it
                          refused the bug's (a test that checks its own
                          faults fails without them); null: the bug's own
  side, kernel, base      buggy or fixed, the kernel's name, the bug's base
  budget_s, restore       each side's budget; whether both ran from a saved
                          guest (--restore, where the device can be hot-added)
  explore_runs            explore's trials
  explore_trial           the trial of its first failure; null with none, or
                          when the failure was its baseline (no fault at all)
  explore_minimal_faults  the faults `minimize` left of that failure, with
  explore_minimal         its rules (null: not minimized)
  sweep_runs              the sweep's runs (seeds)
  sweep_time_to_failure_s the sweep's wall time up to its first failure, with
  sweep_seed              that run's seed and
  sweep_signature         signature (all three null when every seed passed)"""

import json
import os
import time

from faultline.bugs.fuzz_table import duration
from faultline.bugs.recall_table import span
from faultline.errors import SetupError
from faultline.judge import failure
from faultline.judge.report import load_report
from faultline.results import records as results
from faultline.results import tables

SIDES = ("buggy", "fixed")
NULL = type(None)
RECORD_FIELDS = {"scenario": (str,), "start_scenario": (str, NULL), "side": (str,),
                 "kernel": (str,), "base": (str,), "budget_s": results.NUMBER,
                 "restore": (bool,), "explore_runs": (int,), "explore_trial": (int, NULL),
                 "explore_minimal_faults": (int, NULL), "explore_minimal": (str, NULL),
                 "sweep_runs": (int,), "sweep_time_to_failure_s": results.NUMBER + (NULL,),
                 "sweep_seed": (int, NULL), "sweep_signature": (str, NULL)}
# One record per bug, scenario and side; the set's lines in this order.
IDENTITY = ("subject", "scenario", "side")
COLUMNS = ("bug", "kernel", "scenario", "explore started from", "explore: first failure",
           "explore's failure", "minimal faults", "sweep: first failure", "sweep's failure")
LEGEND = ("Columns: the bug's kernel (`buggy`, or `fixed`, where nothing may fail); the "
          "bug's scenario, which the sweep runs as written; the generic scenario explore "
          "started from when it refused the bug's (`-`: the bug's own, its rules removed); "
          "explore's search time to its first failure and its trial (`baseline`: the run "
          "with no fault at all), or its trials when none failed within the budget; that "
          "failure's signature; the faults `minimize` left of it; the sweep's wall time to "
          "its first failure and that seed, or its seeds when none failed; that failure's "
          "signature.")
# The command that fills a set, as the empty table states it.
COMMAND = "tests/slow/explore_corpus.py [BUG ...] --budget 30m --restore --fixed"


# ---------------------------------------------------------------- from the runs

def _read_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise SetupError(f"{path}: no readable {what} ({e.__class__.__name__}: {e})") from None


def explore_outcome(out, wall_s):
    """What the explore directory @out measured, for record(): its state
    (runs, seed, mode), the run.json of its baseline (every search makes
    one first: the builds and kernel every run of it shares), its first
    failure with the fault digest of its run and the faults `minimize`
    left of it, and @wall_s, the command's wall time."""
    st = _read_json(os.path.join(out, "state.json"), "explore state")
    try:
        name = st["scenarios"][0]
        baseline = os.path.join(out, "runs", "baseline-" + os.path.basename(name)[:40])
        first = st["failures"][0] if st["failures"] else None
        outcome = {"scenario": name, "seed": st["seed"],
                   "deterministic": bool(st.get("deterministic")), "runs": st["tried"],
                   "wall_s": round(wall_s, 1), "first": first, "digest": None,
                   "minimal_faults": None}
    except (KeyError, IndexError, TypeError) as e:
        raise SetupError(f"{out}: not an explore directory ({e.__class__.__name__}: {e})") \
            from None
    outcome["meta"], _ = results.load_run(baseline)
    if first:
        rundir = os.path.join(out, first["rundir"])
        outcome["digest"] = load_report(rundir).digest
        if first.get("minimal"):
            # minimize ran on the failure's --deterministic rerun, when explore made one.
            mdir = rundir + "-deterministic" if "deterministic" in first else rundir
            summary = _read_json(os.path.join(mdir, "minimize", "summary.json"),
                                 "minimize summary")
            outcome["minimal_faults"] = len(summary["minimal"])
    return outcome


def sweep_failure(rundir, seed, after_s):
    """The sweep's outcome when seed @seed, its run in @rundir, was its
    first failure @after_s seconds after the sweep began."""
    return {"runs": seed, "time_to_failure_s": round(after_s, 1), "seed": seed,
            "signature": failure.signature(rundir, load_report(rundir))}


def sweep_passed(runs):
    """The sweep's outcome when its @runs seeds all passed."""
    return {"runs": runs, "time_to_failure_s": None, "seed": None, "signature": None}


def record(bug, scenario, start_scenario, side, kernel, budget_s, restore, explore, sweep):
    """The record of one comparison on @bug's @side kernel @kernel: @explore
    from explore_outcome() (explore ran @start_scenario, or @scenario when
    None), @sweep from sweep_failure() or sweep_passed()."""
    meta, first = explore["meta"], explore["first"]
    cls = first and first.get("class")
    rec = {"subject": bug.name, "kernel_key": results.kernel_key(meta),
           "qemu_build": meta.get("qemu_build"), "guest_build": meta.get("guest_build"),
           "seed": explore["seed"], "deterministic": explore["deterministic"],
           # A baseline that broke a guarantee with the guest bailed out has no class.
           "verdict": "pass" if not first else cls if cls in ("crash", "hang") else "fail",
           "elapsed_s": explore["wall_s"],
           "time_to_failure_s": first["after_s"] if first else None,
           "signature": first["signature"] if first else None,
           "digest": explore["digest"],
           "scenario": scenario, "start_scenario": start_scenario, "side": side,
           "kernel": kernel, "base": bug.base, "budget_s": budget_s, "restore": restore,
           "explore_runs": explore["runs"],
           "explore_trial": first["trial"] if first else None,
           "explore_minimal_faults": explore["minimal_faults"],
           "explore_minimal": first.get("minimal") if first else None,
           "sweep_runs": sweep["runs"], "sweep_time_to_failure_s": sweep["time_to_failure_s"],
           "sweep_seed": sweep["seed"], "sweep_signature": sweep["signature"]}
    if meta.get("start_time"):
        rec["date"] = time.strftime("%Y-%m-%d", time.gmtime(meta["start_time"]))
    if meta.get("faultline"):
        rec["faultline"] = meta["faultline"]
    return rec


def read(path):
    """The records of the set @path; none while it does not exist."""
    return results.read_set(path, RECORD_FIELDS) if os.path.exists(path) else []


def write(path, recs):
    return results.write_set(path, recs, IDENTITY, RECORD_FIELDS)


# ---------------------------------------------------------------- the table

def check(rec):
    """SetupError (one line) for a record whose values the table cannot show."""
    where = f"explore-corpus record of {rec['subject']} {rec['scenario']} {rec['side']}"
    if rec["side"] not in SIDES:
        raise SetupError(f"{where}: side {rec['side']!r} is not one of {', '.join(SIDES)}")
    if (rec["sweep_seed"] is None) != (rec["sweep_time_to_failure_s"] is None):
        raise SetupError(f"{where}: sweep_seed and sweep_time_to_failure_s must both be "
                         "null (no failure) or both set")


def rows(recs):
    """The table's rows: the records, checked, in the order of the set."""
    for r in recs:
        check(r)
    return list(recs)


def _code(text, markdown):
    """@text as one table cell (a signature may hold `|`)."""
    return f"`{text.replace('|', chr(92) + '|').replace('`', chr(39))}`" if markdown else text


def _explore_cell(r):
    if r["time_to_failure_s"] is None:
        return f"none in {r['explore_runs']} runs"
    when = "baseline" if r["explore_trial"] is None else f"trial {r['explore_trial']}"
    return f"{r['time_to_failure_s']:.0f} s, {when}"


def _minimal_cell(r):
    if r["time_to_failure_s"] is None:
        return "-"
    if r["explore_trial"] is None:
        return "no fault"
    n = r["explore_minimal_faults"]
    return "not minimized" if n is None else str(n)


def cells(r, markdown=True):
    """The table's cells of record @r, as text."""
    sweep = (f"none in {r['sweep_runs']} runs" if r["sweep_seed"] is None else
             f"{r['sweep_time_to_failure_s']:.0f} s, seed {r['sweep_seed']}")
    return [r["subject"], r["side"], r["scenario"], r["start_scenario"] or "-",
            _explore_cell(r),
            _code(r["signature"], markdown) if r["signature"] else "-",
            _minimal_cell(r), sweep,
            _code(r["sweep_signature"], markdown) if r["sweep_signature"] else "-"]


def _bugs_found(recs, side, found):
    """Bugs of @side that @found(record) holds for on any of their scenarios."""
    return len({r["subject"] for r in recs if r["side"] == side and found(r)})


def caption(recs):
    """One paragraph: what the comparisons were (budgets, boots, builds,
    dates) and how many bugs each side found."""
    budgets = sorted({r["budget_s"] for r in recs})
    kernels = {}
    for r in recs:
        kernels.setdefault(r["kernel"], (r["kernel_key"], results.guest_base(r["guest_build"])))
    restored = sorted({r["scenario"] for r in recs if r["restore"]})
    cold = sorted({r["scenario"] for r in recs if not r["restore"]})
    boots = ("every run from a saved guest (`--restore`)" if not cold else
             "every run a cold boot" if not restored else
             "runs from a saved guest (`--restore`) on " + ", ".join(restored)
             + ", cold boots on " + ", ".join(cold))
    text = (f"{len(recs)} comparison{'' if len(recs) == 1 else 's'} of explore and a seed "
            f"sweep, {' or '.join(duration(b) for b in budgets)} each side, {boots}; "
            f"QEMU build {recs[0]['qemu_build']}; kernels (cache key, guest build): "
            + ", ".join(f"{n} ({k}, {g})" for n, (k, g) in sorted(kernels.items())))
    dates = span(r["date"] for r in recs if r.get("date"))
    versions = span(r["faultline"] for r in recs if r.get("faultline"))
    if dates:
        text += f"; run {dates}"
    if versions:
        text += f"; faultline {versions}"
    text += "."
    for side, what in (("buggy", "the buggy kernels"),
                       ("fixed", "the fixed kernels, where nothing may fail")):
        n = len({r["subject"] for r in recs if r["side"] == side})
        if n:
            ex = _bugs_found(recs, side, lambda r: r["verdict"] != "pass")
            sw = _bugs_found(recs, side, lambda r: r["sweep_seed"] is not None)
            text += (f" On {what}, explore found a failure for {ex} of {n} bug"
                     f"{'' if n == 1 else 's'}, the sweep for {sw}.")
    return text


def markdown(table_rows):
    return tables.markdown(COLUMNS, [cells(r) for r in table_rows])


def text_table(table_rows):
    return tables.text(COLUMNS, [cells(r, markdown=False) for r in table_rows])


def minimal_rules(text):
    """The rules of a minimal.rules @text, without its comments."""
    return [x.split("#")[0].strip() for x in (text or "").splitlines()
            if x.strip() and not x.startswith("#")]


def minimal_notes(recs):
    """The rules `minimize` left of each minimized failure, a list item
    each (outside the table: a rule may hold `|`)."""
    out = []
    for r in recs:
        rules = minimal_rules(r["explore_minimal"])
        if rules:
            out.append(f"- {r['subject']} {r['side']} ({r['start_scenario'] or r['scenario']}): "
                       + "; ".join(f"`{x}`" for x in rules))
    return out


def render(recs, where):
    """The generated text of a docs/ region for the set @where (its path as
    shown): caption, legend, table and the minimal schedules; what fills it
    while the set is empty."""
    if not recs:
        return (f"No measurement in `{where}` yet. `{COMMAND} --results {where}` records "
                "one (each bug's kernel built first: `faultline kernel build BASE --patch "
                "tests/bugs/NAME/reintroduce.patch --name bug-NAME`), then `faultline docs` "
                "writes the table here.\n")
    notes = minimal_notes(recs)
    return (caption(recs) + " " + LEGEND + "\n\n" + markdown(rows(recs))
            + ("\nMinimal schedules:\n\n" + "\n".join(notes) + "\n" if notes else ""))
