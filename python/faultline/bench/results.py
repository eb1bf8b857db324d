"""bench's results set: each row of a `faultline bench --results FILE` run
as one record of results/bench/SET.jsonl, and the table `faultline docs`
writes from it into docs/bench.md.

A record has the fields every record has (results/records.py) with the
row's key as its subject and the bench run's default guest, then the row
as `--json` writes it.  Its verdict is bench's own: "fail" when the row
missed its target (exit status 1), else "pass", which includes a row
without a target and one whose interval could not decide (`ok` null)."""

import dataclasses

from faultline.results import records
from faultline.results.tables import markdown

NULL = type(None)
RECORD_FIELDS = {"group": (str,), "name": (str,), "value": records.NUMBER,
                 "baseline": records.NUMBER, "unit": (str,),
                 "ratio": records.NUMBER + (NULL,), "ci_low": records.NUMBER + (NULL,),
                 "ci_high": records.NUMBER + (NULL,), "n": (int,), "target": (str,),
                 "ok": (bool, NULL), "note": (str,), "quick": (bool,), "date": (str,),
                 "faultline": (str,), "bench_seconds": records.NUMBER}
# One record per row: a rerun of the row replaces it.
IDENTITY = ("subject",)
COLUMNS = ("row", "value", "baseline", "ratio (95 % CI)", "n", "target", "verdict")
COMMAND = "faultline bench --only GROUPS --results FILE"


def builds_of(builds):
    """The identity fields of the bench run's builds (Debian's kernel)."""
    return records.builds_identity(builds, builds.kernel)


def record_of_row(row, ident, meta):
    """The record of one Row of a bench run; @meta: bench's date, git,
    quick and seconds."""
    missed = row.ok is False
    return {"subject": row.key, **ident, "seed": 1, "deterministic": False,
            "verdict": "fail" if missed else "pass",
            "elapsed_s": float(meta["seconds"]),
            "time_to_failure_s": float(meta["seconds"]) if missed else None,
            "signature": f"missed {row.target}" if missed else None, "digest": None,
            **dataclasses.asdict(row), "quick": bool(meta["quick"]),
            "date": meta["date"][:10], "faultline": meta["git"],
            "bench_seconds": float(meta["seconds"])}


def check_path(path):
    records.check_results_option(path, RECORD_FIELDS)


def check(path, ident):
    records.check_set_builds(path, RECORD_FIELDS, [ident])


def write(path, rows, ident, meta):
    """Add (or replace) the records of @rows in the set @path."""
    recs = [record_of_row(r, ident, meta) for r in rows]
    return records.write_set(path, recs, IDENTITY, RECORD_FIELDS)


def _num(x, unit):
    if x is None:
        return "-"
    return f"{x:.1f} {unit}" if abs(x) >= 10 else f"{x:.3g} {unit}"


def _ratio(r):
    if r["ratio"] is None:
        return "-"
    ci = f" ({r['ci_low']:.2f}..{r['ci_high']:.2f})" if r["ci_low"] is not None else ""
    return f"{r['ratio']:.2f}{ci}"


def _verdict(r):
    if not r["target"]:
        return "-"
    return "ok" if r["ok"] else "MISSED" if r["ok"] is False else "? (undecided)"


def render(recs, where):
    """The generated text of a docs/ region for the set @where."""
    if not recs:
        return (f"No measurement in `{where}` yet. `{COMMAND.replace('FILE', where)}` "
                "records one, then `faultline docs` writes the table here.\n")
    dates = sorted({r["date"] for r in recs})
    gits = sorted({r["faultline"] for r in recs})
    caption = (f"{len(recs)} row(s) of `faultline bench` ({'--quick, ' if any(r['quick'] for r in recs) else ''}"
               f"QEMU build {recs[0]['qemu_build']}, guest build(s) "
               f"{', '.join(sorted({r['guest_build'] for r in recs}))}); run "
               f"{', '.join(dates)}; faultline {', '.join(gits)}. The note of each row "
               "follows the table.")
    rows = [(f"`{r['subject']}`", _num(r["value"], r["unit"]), _num(r["baseline"], r["unit"]),
             _ratio(r), str(r["n"]), r["target"] or "-", _verdict(r)) for r in recs]
    notes = [f"- `{r['subject']}`: {r['note']}" for r in recs if r["note"]]
    return (caption + "\n\n" + markdown(COLUMNS, rows)
            + ("\n" + "\n".join(notes) + "\n" if notes else ""))
