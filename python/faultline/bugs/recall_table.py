"""The recall table, from the records of a recall set (results/recall/SET.jsonl,
results/records.py): one row per bug and scenario, what `faultline bugs`
prints and writes and what `faultline docs` puts in docs/bugs.md.

A recall record adds to records.REQUIRED the scenario, the side (the buggy
kernel, the fixed one, the buggy one without the scenario's rules), the
bug's base kernel and the guarantee the run broke (judge.broken_guarantee:
a crash, hang, splat, lost data; None for a pass or a run that failed only
a check of its workload).  The record of the buggy seed that `repro` and
`minimize` took also has `reproducible`, `minimal_faults` and `minimize`."""

from faultline.errors import SetupError
from faultline.results import records as results
from faultline.results import tables

SIDES = ("buggy", "fixed", "nofaults")
NULL = type(None)
RECORD_FIELDS = {"scenario": (str,), "side": (str,), "base": (str,),
                 "broken_guarantee": (str, NULL)}
# One record per bug, scenario, side and seed; the set's lines in this order.
IDENTITY = ("subject", "scenario", "side", "seed")
COLUMNS = ("bug", "base", "scenario", "buggy failed/N", "time to first failure",
           "fixed passed/N", "no-faults buggy failed/N", "reproducible", "minimal faults")
LEGEND = ("Columns: seeds on which the buggy kernel broke a guarantee, with "
          "workload-only failures apart; wall time of its runs in seed order up to the "
          "first such failure; passed seeds on the fixed kernel; the same count as the "
          "first column on the buggy kernel with the scenario's rules removed, i.e. "
          "without the fault device's help; whether `repro` of the first failure fails "
          "the same way; the faults `minimize` leaves.")


def caught(rec):
    return rec["broken_guarantee"] is not None


def _side(recs, side):
    """The counts of one side's records (seed order)."""
    failed = [r for r in recs if r["verdict"] != "pass"]
    # buggy and no-faults runs count when they broke a guarantee; a fixed
    # run counts against the kernel whatever it failed.
    bad = failed if side == "fixed" else [r for r in recs if caught(r)]
    out = {"n": len(recs), "failed": len(bad), "passed": len(recs) - len(failed),
           "failed_seeds": [r["seed"] for r in bad],
           "reasons": [r.get("reason") for r in bad][:3],
           # failed without a broken guarantee (a test that wants its faults)
           "workload": len(failed) - len(bad)}
    if side == "buggy":
        out["workload_misses"] = [{"seed": r["seed"], "reason": r.get("reason")}
                                  for r in failed if not caught(r)]
    return out


def rows(recs):
    """The table's rows (dicts) of recall records @recs: one per bug and
    scenario, in the order they first appear."""
    groups = {}
    for r in recs:
        if r["side"] not in SIDES:
            raise SetupError(f"recall record of {r['subject']}: side {r['side']!r} is not "
                             f"one of {', '.join(SIDES)}")
        groups.setdefault((r["subject"], r["scenario"]), []).append(r)
    out = []
    for (bug, scname), group in groups.items():
        by_side = {s: sorted((r for r in group if r["side"] == s), key=lambda r: r["seed"])
                   for s in SIDES}
        buggy = by_side["buggy"]
        t, ttff, first = 0.0, None, None
        for r in buggy:             # seed order: what a user waits for
            t += r["elapsed_s"]
            if caught(r):
                ttff, first = t, r
                break
        row = {"bug": bug, "base": group[0]["base"], "scenario": scname,
               "deterministic": all(r["deterministic"] for r in group),
               "buggy": _side(buggy, "buggy"),
               "time_to_first_failure_s": None if ttff is None else round(ttff, 1),
               "first_failure": None if first is None else {
                   k: first.get(k) for k in ("seed", "verdict", "broken_guarantee",
                                             "signature", "digest", "reason",
                                             "reproducible", "minimal_faults", "minimize")
                   if k in first}}
        for side in ("fixed", "nofaults"):
            row[side] = _side(by_side[side], side) if by_side[side] else None
        out.append(row)
    return out


def cells(row):
    """The table's cells of @row, as text."""
    def frac(side, key):
        s = row.get(side)
        return "not run" if not s else f"{s[key]}/{s['n']}"

    def workload(side):
        n = (row.get(side) or {}).get("workload")
        return f" (+{n} workload)" if n else ""
    ttff = row["time_to_first_failure_s"]
    first = row.get("first_failure") or {}
    if not row["buggy"]["failed"]:
        repro = minimal = "-"
    else:
        repro = ("yes" if first.get("reproducible") else
                 "no" if "reproducible" in first else "not run")
        minimal = (str(first["minimal_faults"]) if first.get("minimal_faults") is not None
                   else (first.get("minimize") or "not run"))
    return [row["bug"], row["base"], row["scenario"],
            f"{row['buggy']['failed']}/{row['buggy']['n']}" + workload("buggy"),
            "-" if ttff is None else f"{ttff:.0f} s",
            frac("fixed", "passed"), frac("nofaults", "failed") + workload("nofaults"),
            repro, minimal]


def span(values):
    """'A' or 'A to B' of @values' smallest and largest, '' of none."""
    values = sorted(set(values))
    return "" if not values else values[0] if len(values) == 1 else \
        f"{values[0]} to {values[-1]}"


def caption(recs):
    """One paragraph: what the runs were (seeds, mode, builds, dates)."""
    seeds = sorted({r["seed"] for r in recs})
    det = {r["deterministic"] for r in recs}
    mode = ("--deterministic" if det == {True} else "not --deterministic" if det == {False}
            else "--deterministic where the scenario allows it")
    kernels = {}
    for r in recs:
        kernels.setdefault(r.get("kernel") or r["kernel_key"], (r["kernel_key"],
                                                                r["guest_build"]))
    text = (f"{len(recs)} run{'' if len(recs) == 1 else 's'}, seeds {seeds[0]}..{seeds[-1]}, {mode}; QEMU build "
            f"{recs[0]['qemu_build']}; kernels (cache key, guest build): "
            + ", ".join(f"{n} ({k}, {results.guest_base(g)})"
                        for n, (k, g) in sorted(kernels.items())))
    dates, versions = span(r.get("date") for r in recs if r.get("date")), \
        span(r.get("faultline") for r in recs if r.get("faultline"))
    if dates:
        text += f"; run {dates}"
    if versions:
        text += f"; faultline {versions}"
    return text + "."


def markdown(table_rows):
    return tables.markdown(COLUMNS, [cells(r) for r in table_rows])


def text_table(table_rows):
    return tables.text(COLUMNS, [cells(r) for r in table_rows])


def render(recs, where):
    """The generated text of a docs/ region for the recall set @where
    (its path as shown): caption, legend and table; what fills it while
    the set is empty."""
    if not recs:
        return (f"No runs in `{where}` yet. `faultline bugs [NAME ...] --results {where}` "
                "measures them (building each bug's kernels first), then `faultline docs` "
                "writes the table here.\n")
    return caption(recs) + " " + LEGEND + "\n\n" + markdown(rows(recs))
