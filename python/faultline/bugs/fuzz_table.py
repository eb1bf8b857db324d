"""The "Recall from no scenario" table, from the records of a recall-fuzz
set (results/recall-fuzz/SET.jsonl): one row per corpus bug, what
`faultline bugs --fuzz` prints and what `faultline docs` puts in
docs/bugs.md.

A record is one fuzz campaign (the fuzzer's defaults, no scenario) on one
of a bug's kernels with one search seed.  It adds to records.REQUIRED the
side (buggy or fixed), the kernel's name and base, the campaign's budget,
jobs and program count, its directory, every failure it found (signature,
campaign time, minimized program) and, for a buggy campaign that failed,
a human's verdict on whether the failure is the bug's (`faultline bugs
--fuzz-verdict`; "untriaged" until then): no program can tell a bug's
symptom from another failure.  A buggy kernel's campaign stops at its
first failure (until_failure); a fixed kernel's runs its whole budget.
Bugs whose fixed kernel is one kernel (one cache key) share its campaigns:
a shared record names the bug whose run it is (shared_from)."""

from faultline.bugs.recall_table import span
from faultline.errors import SetupError
from faultline.results import records as results
from faultline.results import tables

SIDES = ("buggy", "fixed")
VERDICTS = ("untriaged", "yes", "no")
NULL = type(None)
RECORD_FIELDS = {"side": (str,), "kernel": (str,), "base": (str,),
                 "budget_s": results.NUMBER, "jobs": (int,), "programs": (int,),
                 "fuzz_out": (str,), "failures": (list,), "minimized": (str, NULL),
                 "bug_failure": (str, NULL), "bug_failure_why": (str, NULL),
                 "bug_failure_index": (int, NULL), "until_failure": (bool,),
                 "shared_from": (str, NULL), "known_failures": (list,)}
# One record per bug, side and search seed; the set's lines in this order.
IDENTITY = ("subject", "side", "seed")
COLUMNS = ("bug", "base", "buggy failed/N", "time to first failure", "failure signature",
           "fixed false alarms/N", "the bug's failure?")
LEGEND = ("Columns: search seeds on which the fuzzer found a failure on the buggy kernel; "
          "the campaign time of each seed's first failure (`none`: none within the "
          "budget); each failing seed's first failure signature; search seeds on which it "
          "found a failure on the fixed kernel, a false alarm; whether a person who read "
          "the minimized program and its report judged the failure to be the bug's "
          "(`faultline bugs --fuzz-verdict`), per failing seed. A failure with the "
          "signature of a kernel finding already known (findings.md) is no bug's and no "
          "false alarm: it is listed apart and the search goes on. A buggy kernel's campaign "
          "stops at its first other failure; a fixed kernel's runs its whole budget, once per "
          "seed for the bugs it is the fixed kernel of.")


def duration(s):
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min"


def check(rec):
    """SetupError (one line) for a record whose values the table cannot show."""
    where = f"recall-fuzz record of {rec['subject']} seed {rec['seed']}"
    if rec["side"] not in SIDES:
        raise SetupError(f"{where}: side {rec['side']!r} is not one of {', '.join(SIDES)}")
    if rec["bug_failure"] is not None and rec["bug_failure"] not in VERDICTS:
        raise SetupError(f"{where}: bug_failure {rec['bug_failure']!r} is not one of "
                         f"{', '.join(VERDICTS)}")
    for f in rec["failures"]:
        if not isinstance(f, dict) or not isinstance(f.get("signature"), str) \
                or not isinstance(f.get("first_s"), results.NUMBER):
            raise SetupError(f"{where}: a failure without its signature and first_s: {f!r}")


def rows(recs):
    """The table's rows (dicts): one per bug, in the order of the set."""
    groups = {}
    for r in recs:
        check(r)
        groups.setdefault(r["subject"], []).append(r)
    out = []
    for bug, group in groups.items():
        side = {s: sorted((r for r in group if r["side"] == s), key=lambda r: r["seed"])
                for s in SIDES}
        base = next(r["base"] for r in group)
        out.append({"bug": bug, "base": base, "buggy": side["buggy"], "fixed": side["fixed"]})
    return out


def _esc(text, markdown):
    """@text as one table cell (a signature may hold `|`)."""
    return text.replace("|", "\\|").replace("`", "'") if markdown else text


def _code(text, markdown):
    return f"`{_esc(text, markdown)}`" if markdown else text


def _by_signature(recs, markdown):
    """`sig` (s1, s3); ... of the failing campaigns @recs (their first failures)."""
    seeds = {}
    for r in recs:
        if r["signature"] is not None:
            seeds.setdefault(r["signature"], []).append(f"s{r['seed']}")
    return "; ".join(f"{_code(sig, markdown)} ({', '.join(s)})" for sig, s in seeds.items())


def _triage(r):
    v = r["bug_failure"] or "untriaged"
    idx = r.get("bug_failure_index")
    return f"s{r['seed']} {v}" + (f" (failure {idx})" if idx and idx != 1 else "")


def cells(row, markdown=True):
    """The table's cells of @row, as text."""
    buggy, fixed = row["buggy"], row["fixed"]
    failed = [r for r in buggy if r["verdict"] != "pass"]
    alarms = [r for r in fixed if r["verdict"] != "pass"]
    times = ", ".join(f"s{r['seed']} " + ("none" if r["time_to_failure_s"] is None
                                          else duration(r["time_to_failure_s"]))
                      for r in buggy) or "-"
    fixed_cell = "not run" if not fixed else f"{len(alarms)}/{len(fixed)}"
    if alarms:
        fixed_cell += ": " + _by_signature(alarms, markdown)
    known = sorted({(s, f"s{r['seed']}") for r in fixed for s in r["known_failures"]})
    if known:
        fixed_cell += "; known findings: " + ", ".join(f"{_code(s, markdown)} ({n})"
                                                       for s, n in known)
    return [row["bug"], row["base"],
            f"{len(failed)}/{len(buggy)}" if buggy else "not run", times,
            _by_signature(failed, markdown) or "-", fixed_cell,
            ", ".join(_triage(r) for r in failed) or "-"]


def caption(recs):
    """One paragraph: what the campaigns were (seeds, budget, builds, dates)."""
    seeds = sorted({r["seed"] for r in recs})
    budgets = sorted({r["budget_s"] for r in recs})
    jobs = sorted({r["jobs"] for r in recs})
    kernels = {}
    for r in recs:
        kernels.setdefault(r["kernel"], (r["kernel_key"], results.guest_base(r["guest_build"])))
    runs = len({r["fuzz_out"] for r in recs})
    text = (f"{runs} fuzz campaign{'' if runs == 1 else 's'} (the fuzzer's "
            f"defaults, no scenario), search seeds {seeds[0]}..{seeds[-1]}, "
            f"{' or '.join(duration(b) for b in budgets)} each, "
            f"{' or '.join(str(j) for j in jobs)} job(s); QEMU build {recs[0]['qemu_build']}; "
            "kernels (cache key, guest build): "
            + ", ".join(f"{n} ({k}, {g})" for n, (k, g) in sorted(kernels.items())))
    resumed = sum(1 for r in recs if r.get("sessions", 1) > 1 and r["shared_from"] is None)
    if resumed:
        text += (f"; {resumed} of them interrupted and gone on with, with the budget left "
                 "(their times are campaign time)")
    dates = span(r["date"] for r in recs if r.get("date"))
    versions = span(r["faultline"] for r in recs if r.get("faultline"))
    if dates:
        text += f"; run {dates}"
    if versions:
        text += f"; faultline {versions}"
    return text + "."


def verdict_notes(recs):
    """The reasons given with each verdict, a list item each (outside the
    table: a `|` needs no escape there)."""
    out = []
    for r in recs:
        if r["side"] == "buggy" and r["bug_failure"] in ("yes", "no"):
            i = r.get("bug_failure_index") or 1
            sig = r["failures"][i - 1]["signature"] if i <= len(r["failures"]) else "?"
            out.append(f"- {r['subject']} seed {r['seed']}, failure {i} "
                       f"`{sig.replace('`', chr(39))}`: {r['bug_failure']}, "
                       f"{r['bug_failure_why']}" + replay_note(r, i, sig))
    return out


def replay_note(rec, index, sig):
    """What `--fuzz-replay` of that failure saw, when it ran."""
    rp = next((x for x in rec.get("replays") or [] if x.get("failure") == index), None)
    if rp is None:
        return ""
    same = [sum(1 for x in rp[side] if x == sig) for side in ("buggy", "fixed")]
    return (f" (replayed, {rp['replayed']}: the same failure on the buggy kernel "
            f"{same[0]}/{len(rp['buggy'])}, on the fixed kernel {same[1]}/{len(rp['fixed'])})")


def markdown(table_rows):
    return tables.markdown(COLUMNS, [cells(r) for r in table_rows])


def text_table(table_rows):
    return tables.text(COLUMNS, [cells(r, markdown=False) for r in table_rows])


def render(recs, where):
    """The generated text of a docs/ region for the set @where (its path as
    shown): caption, legend, table and the verdicts' reasons; what fills
    it while the set is empty."""
    if not recs:
        return (f"No campaigns in `{where}` yet. `faultline bugs [NAME ...] --fuzz "
                f"--results {where}` measures them (each bug's buggy and fixed kernels "
                "built first; 30 minutes a campaign, search seeds 1..3), then "
                "`faultline docs` writes the table here.\n")
    notes = verdict_notes(recs)
    return (caption(recs) + " " + LEGEND + "\n\n" + markdown(rows(recs))
            + ("\nVerdicts:\n\n" + "\n".join(notes) + "\n" if notes else ""))
