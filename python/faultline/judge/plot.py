"""Hand-written SVG plots for faultline comparisons (no plotting library).

Each function returns a complete SVG 1.1 document as a string (width,
height and viewBox set, so browsers scale it), with a title, axis labels
and a legend.  All user text goes through xml.sax.saxutils.escape.

- bars_svg: baseline vs series per metric, normalised to baseline = 100%
  because counters (hundreds of thousands) and times (seconds) share a plot.
- scatter_svg: injected latency vs observed latency, optionally log-log.
- lines_svg: counter deltas per phase (categorical x axis), several series.
"""

import math
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 800, 520
# The bottom margin leaves room for slanted category labels.
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 80, 170, 70, 110
CHAR_WIDTH = 6.5  # rough width of an 11px sans-serif character
# Okabe-Ito: distinguishable with the common colour vision deficiencies.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7",
           "#56B4E9", "#F0E442", "#000000")
FONT = 'font-family="sans-serif"'


# ---------------------------------------------------------------- helpers

def _num(x):
    """Coordinates with two decimals at most: small files, exact enough."""
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _text(x, y, content, size=12, anchor="start", extra=""):
    return (f'<text x="{_num(x)}" y="{_num(y)}" font-size="{size}" {FONT} '
            f'text-anchor="{anchor}"{extra}>{escape(str(content))}</text>')


def _line(x1, y1, x2, y2, color="#000000", width=1, extra=""):
    return (f'<line x1="{_num(x1)}" y1="{_num(y1)}" x2="{_num(x2)}" y2="{_num(y2)}" '
            f'stroke="{color}" stroke-width="{width}"{extra}/>')


def _rect(x, y, w, h, color, extra=""):
    return (f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}" '
            f'fill="{color}"{extra}/>')


def _document(title, subtitle, body):
    """Wrap plot elements in the SVG root with title and subtitle."""
    head = ['<?xml version="1.0" encoding="UTF-8"?>',
            f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" '
            f'width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}">',
            f"<title>{escape(title)}</title>",
            _rect(0, 0, WIDTH, HEIGHT, "#ffffff"),
            _text(WIDTH / 2, 26, title, 16, "middle", ' font-weight="bold"')]
    if subtitle:
        head.append(_text(WIDTH / 2, 46, subtitle, 11, "middle", ' fill="#444444"'))
    return "\n".join(head + body + ["</svg>"]) + "\n"


def short_number(x):
    """Compact label for a value: 441028 -> '441k', 2521 -> '2521', 0.5 -> '0.5'."""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e4, "k")):
        if abs(x) >= limit:
            v = x / (1e3 if suffix == "k" else limit)
            digits = max(0, 2 - math.floor(math.log10(abs(v))))
            text = f"{v:.{digits}f}"
            return (text.rstrip("0").rstrip(".") if "." in text else text) + suffix
    return f"{x:.4g}"


def nice_ticks(lo, hi, count=5):
    """Round tick values (1, 2, 5 x 10^k steps) covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first, last = math.floor(lo / step), math.ceil(hi / step)
    return [round(k * step, 12) for k in range(first, last + 1)]


def log_ticks(lo, hi):
    """Powers of ten covering [lo, hi] (lo > 0)."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if a == b:
        b += 1
    return [10.0 ** k for k in range(a, b + 1)]


class _Axis:
    """Maps data values to pixels, linear or log10."""

    def __init__(self, lo, hi, p0, p1, log=False):
        self.log = log
        self.lo, self.hi = (math.log10(lo), math.log10(hi)) if log else (lo, hi)
        self.p0, self.p1 = p0, p1

    def __call__(self, v):
        v = math.log10(v) if self.log else v
        span = (self.hi - self.lo) or 1.0
        return self.p0 + (v - self.lo) / span * (self.p1 - self.p0)


def _plot_box():
    return (MARGIN_LEFT, MARGIN_TOP, WIDTH - MARGIN_RIGHT, HEIGHT - MARGIN_BOTTOM)


def _numeric_axis(ticks, vmap, label, fmt=short_number, vertical=False):
    """A value axis with a grid line, tick mark and value per tick: the y
    axis left of the plot box (vertical), else the x axis under it."""
    x0, top, x1, bottom = _plot_box()
    out = [_line(x0, top, x0, bottom) if vertical else _line(x0, bottom, x1, bottom)]
    for t in ticks:
        p = vmap(t)
        if vertical:
            out += [_line(x0, p, x1, p, "#dddddd"), _line(x0 - 5, p, x0, p),
                    _text(x0 - 8, p + 4, fmt(t), 11, "end")]
        else:
            out += [_line(p, top, p, bottom, "#eeeeee"), _line(p, bottom, p, bottom + 5),
                    _text(p, bottom + 18, fmt(t), 11, "middle")]
    if vertical:
        cy = (top + bottom) / 2
        out.append(_text(18, cy, label, 12, "middle", f' transform="rotate(-90 18 {_num(cy)})"'))
    else:
        out.append(_text((x0 + x1) / 2, bottom + 42, label, 12, "middle"))
    return out


def _x_axis_categories(names, centers, label):
    """Category labels under the axis, slanted when they would overlap."""
    x0, _, x1, bottom = _plot_box()
    slot = (x1 - x0) / max(1, len(names))
    slant = any(len(n) * CHAR_WIDTH > slot * 0.95 for n in names)
    out = [_line(x0, bottom, x1, bottom)]
    for name, x in zip(names, centers):
        out.append(_line(x, bottom, x, bottom + 5))
        if slant:
            y = bottom + 14
            out.append(_text(x + 4, y, name, 11, "end",
                             f' transform="rotate(-30 {_num(x + 4)} {_num(y)})"'))
        else:
            out.append(_text(x, bottom + 18, name, 11, "middle"))
    if label:
        out.append(_text((x0 + x1) / 2, HEIGHT - 14, label, 12, "middle"))
    return out


def _legend(names, marker="rect"):
    """Legend to the right of the plot: one colour swatch per name."""
    x = WIDTH - MARGIN_RIGHT + 20
    out = ['<g class="legend">']
    for i, name in enumerate(names):
        y = MARGIN_TOP + 10 + 20 * i
        color = PALETTE[i % len(PALETTE)]
        if marker == "rect":
            out.append(_rect(x, y - 10, 12, 12, color))
        else:
            out.append(f'<circle cx="{_num(x + 6)}" cy="{_num(y - 4)}" r="4" fill="{color}"/>')
        out.append(_text(x + 18, y, name, 12))
    out.append("</g>")
    return out


def _value_range(values, include_zero=True):
    lo, hi = min(values), max(values)
    if include_zero:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    if lo == hi:
        hi = lo + 1.0
    return lo, hi


# ---------------------------------------------------------------- bars

def _normalised(baseline, series):
    """(reference, note) to divide a metric by: the baseline mean, or the
    series mean when the baseline mean is 0 (100% would be undefined)."""
    if baseline.mean != 0:
        return abs(baseline.mean), ""
    if series.mean != 0:
        return abs(series.mean), " (scaled to series)"
    return 1.0, " (both 0)"


def _bar(x, w, value, err, ymap, color, label):
    """One bar from 0 to value with a +-err whisker and its label above."""
    y0, y1 = ymap(0.0), ymap(value)
    out = [_rect(x, min(y0, y1), w, abs(y0 - y1), color, ' class="bar"')]
    cx = x + w / 2
    if err > 0:
        top, bot = ymap(value + err), ymap(value - err)
        out += [_line(cx, top, cx, bot, "#222222", 1, ' class="whisker"'),
                _line(cx - 4, top, cx + 4, top, "#222222"),
                _line(cx - 4, bot, cx + 4, bot, "#222222")]
    label_y = min(y1, ymap(value + err) if err > 0 else y1) - 4
    out.append(_text(cx, label_y, label, 10, "middle", ' class="value"'))
    return out


def bars_svg(title, metrics, baseline_label, series_label):
    """Grouped bars per metric, baseline vs series, with stddev whiskers.

    metrics: list of (name, baseline Summary, series Summary).  Each metric
    is normalised to its baseline mean (= 100%) so metrics of very
    different magnitudes fit one axis; the bars are labelled with the
    absolute means.
    """
    groups = []
    for name, base, ser in metrics:
        ref, note = _normalised(base, ser)
        groups.append((name + note, [(s.mean / ref * 100, s.stddev / ref * 100, s.mean)
                                     for s in (base, ser)]))
    values = [v + e for _, g in groups for v, e, _ in g] + \
             [v - e for _, g in groups for v, e, _ in g] + [100.0]
    lo, hi = _value_range(values)
    ticks = nice_ticks(lo, hi * 1.08)
    x0, top, x1, bottom = _plot_box()
    ymap = _Axis(ticks[0], ticks[-1], bottom, top)
    slot = (x1 - x0) / max(1, len(groups))
    bar_w = min(60.0, slot * 0.35)
    body = _numeric_axis(ticks, ymap, "% of baseline mean", lambda t: f"{t:g}%", vertical=True)
    body.append(_line(x0, ymap(100.0), x1, ymap(100.0), "#888888", 1, ' stroke-dasharray="4 3"'))
    centers = []
    for i, (name, bars) in enumerate(groups):
        cx = x0 + slot * (i + 0.5)
        centers.append(cx)
        for j, (value, err, absolute) in enumerate(bars):
            body += _bar(cx - bar_w + j * bar_w, bar_w, value, err, ymap,
                         PALETTE[j], short_number(absolute))
    body += _x_axis_categories([g[0] for g in groups], centers, "")
    body += _legend([baseline_label, series_label])
    subtitle = ("each metric normalised to its baseline mean (= 100%); "
                "labels: absolute means; whiskers: \u00b1 1 stddev")
    return _document(title, subtitle, body)


# ---------------------------------------------------------------- scatter

def scatter_svg(title, xlabel, ylabel, points, series_names, log_scale=False,
                identity_line=True):
    """Scatter of (x, y) points, e.g. injected delay vs observed latency (µs).

    points: one list of (x, y) pairs per entry of series_names.
    log_scale: log10 on both axes (latencies span decades); points with
    x or y <= 0 cannot be drawn there and are counted in the subtitle.
    identity_line: dashed y = x, "observed equals injected".
    """
    shown, dropped = [], 0
    for pts in points:
        keep = [(x, y) for x, y in pts if not log_scale or (x > 0 and y > 0)]
        dropped += len(pts) - len(keep)
        shown.append(keep)
    xs = [x for pts in shown for x, _ in pts] or [1.0]
    ys = [y for pts in shown for _, y in pts] or [1.0]
    x0, top, x1, bottom = _plot_box()
    if log_scale:
        xt, yt = log_ticks(min(xs), max(xs)), log_ticks(min(ys), max(ys))
    else:
        xt = nice_ticks(*_value_range(xs))
        yt = nice_ticks(*_value_range(ys))
    xmap = _Axis(xt[0], xt[-1], x0, x1, log_scale)
    ymap = _Axis(yt[0], yt[-1], bottom, top, log_scale)
    body = _numeric_axis(yt, ymap, ylabel, vertical=True) + _numeric_axis(xt, xmap, xlabel)
    if identity_line:
        body += _identity(xt, yt, xmap, ymap)
    for i, pts in enumerate(shown):
        color = PALETTE[i % len(PALETTE)]
        body.append(f'<g class="series" fill="{color}" fill-opacity="0.8">')
        body += [f'<circle cx="{_num(xmap(x))}" cy="{_num(ymap(y))}" r="3.5"/>' for x, y in pts]
        body.append("</g>")
    body += _legend(series_names, "circle")
    parts = ["log-log scale" if log_scale else "linear scale"]
    if identity_line:
        parts.append("dashed: y = x")
    if dropped:
        parts.append(f"{dropped} points <= 0 not shown")
    return _document(title, "; ".join(parts), body)


def _identity(xt, yt, xmap, ymap):
    """y = x over the range both axes share (nothing if they do not overlap)."""
    lo, hi = max(xt[0], yt[0]), min(xt[-1], yt[-1])
    if hi <= lo:
        return []
    return [_line(xmap(lo), ymap(lo), xmap(hi), ymap(hi), "#888888", 1,
                  ' stroke-dasharray="4 3" class="identity"')]


# ---------------------------------------------------------------- lines

def _phase_values(values, phases):
    """{phase: value} from a mapping, (phase, value) pairs, or plain numbers
    parallel to `phases` (None for a missing phase)."""
    if hasattr(values, "items"):
        return dict(values.items())
    values = list(values)
    if all(isinstance(v, (tuple, list)) for v in values):
        return dict(values)
    if phases is None or len(values) != len(phases):
        raise ValueError("plain values need a phase list of the same length as xlabel")
    return {p: v for p, v in zip(phases, values) if v is not None}


def lines_svg(title, xlabel, ylabel, series):
    """Counter deltas per phase: categorical x, one polyline per named series.

    series: list of (name, values), values being a {phase: number} mapping,
    a list of (phase, number) pairs, or plain numbers parallel to a phase
    list.  xlabel is the x axis label; it may instead be the list of phase
    names (then the axis is labelled "phase"), which plain numbers need.
    Phases appear in list order, else in order of first appearance.  A
    phase missing from a series breaks its line there instead of drawing a
    misleading interpolation.
    """
    phases = None
    if not isinstance(xlabel, str):
        phases, xlabel = list(xlabel), "phase"
    named = [(name, _phase_values(v, phases)) for name, v in series]
    phases = phases or []
    for _, vals in named:
        phases += [p for p in vals if p not in phases]
    all_values = [v for _, vals in named for v in vals.values()] or [0.0]
    ticks = nice_ticks(*_value_range(all_values))
    x0, top, x1, bottom = _plot_box()
    ymap = _Axis(ticks[0], ticks[-1], bottom, top)
    slot = (x1 - x0) / max(1, len(phases))
    centers = {p: x0 + slot * (i + 0.5) for i, p in enumerate(phases)}
    body = _numeric_axis(ticks, ymap, ylabel, vertical=True)
    body += _x_axis_categories(phases, [centers[p] for p in phases], xlabel)
    for i, (name, vals) in enumerate(named):
        body += _polyline(phases, vals, centers, ymap, PALETTE[i % len(PALETTE)])
    body += _legend([n for n, _ in named])
    return _document(title, "", body)


def _polyline(phases, vals, centers, ymap, color):
    """Runs of consecutive present phases as polylines, plus point markers."""
    out, run = [], []
    for p in phases + [None]:
        if p is not None and p in vals:
            run.append((centers[p], ymap(vals[p])))
            continue
        if len(run) > 1:
            pts = " ".join(f"{_num(x)},{_num(y)}" for x, y in run)
            out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
        out += [f'<circle cx="{_num(x)}" cy="{_num(y)}" r="3.5" fill="{color}"/>' for x, y in run]
        run = []
    return out
