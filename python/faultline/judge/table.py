"""Cover-letter tables (and the same data as JSON) for an A/B kernel comparison.

The layout follows the "Results" tables of mm patch cover letters
(shared/seeds/zswap-dropbehind-v3.txt): metric, baseline, series, delta,
with numbers right-aligned so the table can be pasted into a mail as is.
With more than one run per kernel the cells become "mean ± stddev" and two
columns are added: Welch's p-value and the verdict.

A row is (metric, baseline_samples, series_samples) or
(metric, baseline_samples, series_samples, expect) where expect is one of
stats.EXPECTATIONS or None.
"""

import math
from dataclasses import dataclass

from faultline.judge.stats import Summary, Verdict, Welch, format_p, summary, verdict, welch

GAP = "   "
INDENT = "  "


@dataclass(frozen=True)
class RowStats:
    """Everything computed about one metric; shared by table and JSON."""
    metric: str
    expect: str | None
    baseline_samples: tuple
    series_samples: tuple
    baseline: Summary
    series: Summary
    welch: Welch
    verdict: Verdict
    integer: bool


def compare_rows(rows, level=0.95, rel_threshold=0.10):
    """Compute summaries, Welch's test and the verdict for every row."""
    out = []
    for row in rows:
        metric, a, b = row[0], tuple(row[1]), tuple(row[2])
        expect = row[3] if len(row) > 3 else None
        out.append(RowStats(
            metric=metric, expect=expect, baseline_samples=a, series_samples=b,
            baseline=summary(a), series=summary(b),
            welch=welch(a, b, level),
            verdict=verdict(a, b, level, expect, rel_threshold),
            integer=all(_is_integer(x) for x in a + b)))
    return out


def failed_expectations(stats):
    """Metrics whose declared expectation does not hold (for the exit status)."""
    return [s.metric for s in stats if s.verdict.expect_ok is False]


# ---------------------------------------------------------------- numbers

def _is_integer(x):
    return isinstance(x, int) or (isinstance(x, float) and x.is_integer())


def row_decimals(stat, sig=4):
    """Decimals for every number of a row, so baseline and series align.

    Integer counters whose means are whole numbers get none (441028, not
    441028.0); otherwise enough for `sig` significant digits of the larger
    mean, which keeps 153.87-like values readable and never cuts integer
    digits off a large mean.
    """
    means = (stat.baseline.mean, stat.series.mean)
    if stat.integer and all(float(m).is_integer() for m in means):
        return 0
    scale = max(abs(m) for m in means) or max(stat.baseline.stddev, stat.series.stddev)
    if scale == 0:
        return 0
    return min(8, max(0, sig - 1 - math.floor(math.log10(scale))))


def format_number(x, decimals):
    """Fixed-point, no exponent, no '-0'."""
    text = f"{x:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def format_delta(stat, decimals):
    """'+6.1%' / '-99.4%'; 'n/a (+3)' with the absolute delta when the
    baseline mean is 0 and a percentage is meaningless."""
    base, diff = stat.baseline.mean, stat.series.mean - stat.baseline.mean
    if base == 0:
        absolute = format_number(diff, decimals)
        if diff > 0:
            absolute = "+" + absolute
        return f"n/a ({absolute})"
    return f"{100.0 * diff / abs(base):+.1f}%"


def delta_percent(stat):
    base = stat.baseline.mean
    return None if base == 0 else 100.0 * (stat.series.mean - base) / abs(base)


# ---------------------------------------------------------------- table

def _with_stats(stats):
    """Show mean ± stddev, p and verdict once any metric has n > 1 on both sides."""
    return any(s.baseline.n > 1 and s.series.n > 1 for s in stats)


def _summary_parts(side, decimals):
    sd = format_number(side.stddev, decimals) if side.n > 1 else ""
    return format_number(side.mean, decimals), sd


def _summary_column(summaries, decimals, plusminus):
    """Cells 'mean ± sd' with the means and the stddevs each right-aligned,
    so the ± signs line up; a single-run cell shows the mean only."""
    parts = [_summary_parts(s, d) for s, d in zip(summaries, decimals)]
    wm = max(len(m) for m, _ in parts)
    ws = max(len(sd) for _, sd in parts)
    cells = []
    for mean, sd in parts:
        if ws == 0:
            cells.append(mean.rjust(wm))
        elif sd:
            cells.append(f"{mean.rjust(wm)} {plusminus} {sd.rjust(ws)}")
        else:
            cells.append(mean.rjust(wm) + " " * (len(plusminus) + 2 + ws))
    return cells


def _layout(header, columns, right_aligned):
    """Join header and column cells into padded lines (trailing blanks cut)."""
    widths = [max(len(h), *(len(c) for c in col)) for h, col in zip(header, columns)]
    lines = []
    for cells in [header] + [list(r) for r in zip(*columns)]:
        padded = [c.rjust(w) if right else c.ljust(w)
                  for c, w, right in zip(cells, widths, right_aligned)]
        lines.append((INDENT + GAP.join(padded)).rstrip())
    return lines


def _n_text(values):
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _footer(stats, baseline_label, series_label, level, plusminus, with_stats):
    if not with_stats:
        return [f"{INDENT}one run per kernel: no statistical test"]
    na = _n_text([s.baseline.n for s in stats])
    nb = _n_text([s.series.n for s in stats])
    return [f"{INDENT}mean {plusminus} stddev over {na} runs of {baseline_label}"
            f" and {nb} runs of {series_label}",
            f"{INDENT}p: Welch's t-test, two-sided; verdict at {level * 100:g}% confidence"]


def format_table(rows, baseline_label, series_label, level=0.95, plusminus="±",
                 rel_threshold=0.10):
    """The plain-text comparison table, ending in a newline.

    rows: see the module docstring (or a list of RowStats from compare_rows).
    plusminus: "±" by default; pass "+/-" for ASCII-only mail.
    """
    stats = _as_stats(rows, level, rel_threshold)
    if not stats:
        return ""
    with_stats = _with_stats(stats)
    decimals = [row_decimals(s) for s in stats]
    header = ["metric", baseline_label, series_label, "delta"]
    columns = [[s.metric for s in stats],
               _summary_column([s.baseline for s in stats], decimals, plusminus),
               _summary_column([s.series for s in stats], decimals, plusminus),
               [format_delta(s, d) for s, d in zip(stats, decimals)]]
    right = [False, True, True, True]
    if with_stats:
        header.append("p")
        columns.append([format_p(s.welch.p) for s in stats])
        right.append(True)
    if with_stats or any(s.expect for s in stats):
        header.append("verdict")
        columns.append([s.verdict.label for s in stats])
        right.append(False)
    lines = _layout(header, columns, right)
    lines += [""] + _footer(stats, baseline_label, series_label, level, plusminus, with_stats)
    return "\n".join(lines) + "\n"


def _as_stats(rows, level, rel_threshold):
    rows = list(rows)
    if rows and all(isinstance(r, RowStats) for r in rows):
        return rows
    return compare_rows(rows, level, rel_threshold)


# ---------------------------------------------------------------- JSON

def _finite(x):
    """JSON has no Infinity/NaN: such values become null (p and the CI
    still carry the meaning, e.g. t = inf comes with p = 0)."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return None
    return x


def _side_json(side, samples):
    return {"n": side.n, "mean": side.mean, "stddev": side.stddev,
            "samples": list(samples)}


def _row_json(s):
    w, v = s.welch, s.verdict
    return {"metric": s.metric, "expect": s.expect,
            "baseline": _side_json(s.baseline, s.baseline_samples),
            "series": _side_json(s.series, s.series_samples),
            "diff": w.diff, "delta_percent": delta_percent(s),
            "t": _finite(w.t), "df": _finite(w.df), "p": _finite(w.p),
            "ci_low": _finite(w.ci_low), "ci_high": _finite(w.ci_high),
            "changed": v.changed, "direction": v.direction,
            "expect_ok": v.expect_ok, "verdict": v.text}


def to_json(rows, baseline_label, series_label, level=0.95, rel_threshold=0.10):
    """The table's data as a JSON-ready dict (json.dumps it).

    expectations_ok is None when no metric declares an expectation, else
    whether all of them hold.
    """
    stats = _as_stats(rows, level, rel_threshold)
    checked = [s.verdict.expect_ok for s in stats if s.verdict.expect_ok is not None]
    return {"baseline": baseline_label, "series": series_label, "level": level,
            "test": "welch-two-sided",
            "metrics": [_row_json(s) for s in stats],
            "expectations_ok": all(checked) if checked else None,
            "failed_expectations": failed_expectations(stats)}
