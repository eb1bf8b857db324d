"""bench: its rows, printed, as JSON, and against an earlier run's JSON."""

import json
from dataclasses import asdict, dataclass

from faultline.errors import SetupError


@dataclass
class Row:
    """One printed line: value against baseline; ratio = value / baseline."""
    group: str
    name: str
    value: float
    baseline: float
    unit: str
    ratio: float | None = None
    ci_low: float | None = None       # of the ratio
    ci_high: float | None = None
    n: int = 1
    target: str = ""
    ok: bool | None = None
    note: str = ""

    @property
    def key(self):
        return f"{self.group}/{self.name}"


def fmt(x, unit):
    if x is None:
        return "-"
    if unit == "s":
        return f"{x:.2f} s"
    return f"{x:.1f} {unit}" if abs(x) >= 10 or unit == "us" else f"{x:.2f} {unit}"


def format_rows(rows):
    lines = [f"{'row':60} {'value':>11} {'baseline':>11} {'ratio':>7} {'95% CI':>15}  target"]
    for r in rows:
        ci = f"{r.ci_low:.3f}..{r.ci_high:.3f}" if r.ci_low is not None else ""
        rat = f"{r.ratio:.3f}" if r.ratio is not None else "-"
        verdict = " ok" if r.ok else " MISSED" if r.ok is False else " ?" if r.target else ""
        tail = f"{r.target}{verdict}" + (f"  ({r.note})" if r.note else "")
        lines.append(f"{r.key:60} {fmt(r.value, r.unit):>11} {fmt(r.baseline, r.unit):>11} "
                     f"{rat:>7} {ci:>15}  {tail}".rstrip())
    return "\n".join(lines)


def to_json(rows, meta):
    return {"format": "faultline-bench 1", **meta, "rows": [asdict(r) for r in rows]}


def load_json(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise SetupError(f"--compare {path}: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != "faultline-bench 1":
        raise SetupError(f"--compare {path}: not a faultline bench JSON file")
    return doc


def compare_lines(old, rows):
    """old/new value and ratio of each row present in both runs."""
    prev = {f"{r['group']}/{r['name']}": r for r in old.get("rows", [])}
    lines = [f"against {old.get('git', '?')} ({old.get('date', '?')}):",
             f"{'row':60} {'old':>11} {'new':>11} {'change':>8}  old ratio -> new ratio"]
    for r in rows:
        o = prev.get(r.key)
        if o is None:
            continue
        change = f"{(r.value - o['value']) / abs(o['value']):+.1%}" if o["value"] else "-"
        ro = f"{o['ratio']:.3f}" if o.get("ratio") is not None else "-"
        rn = f"{r.ratio:.3f}" if r.ratio is not None else "-"
        lines.append(f"{r.key:60} {fmt(o['value'], r.unit):>11} {fmt(r.value, r.unit):>11} "
                     f"{change:>8}  {ro} -> {rn}")
    return "\n".join(lines)
