"""Statistics for comparing two kernels (baseline A, series B) on one metric.

`faultline compare` runs a scenario N times per kernel and collects one
sample per run and metric.  This module answers "did the series change the
metric, and in the direction the scenario expects?" with Welch's t-test,
which does not assume both kernels have the same run-to-run variance (a
patch often changes the variance too).

Sign convention everywhere: diff = mean(b) - mean(a), t has the sign of
diff, so a positive t / diff means the series is higher than the baseline.

Standard library only: the Student t distribution is computed from the
regularized incomplete beta function (Numerical Recipes continued
fraction) and inverted by bisection.
"""

import math
import statistics
from dataclasses import dataclass

EXPECTATIONS = ("increase", "decrease", "zero", "unchanged")
# Beyond this many degrees of freedom the t distribution is the normal one
# to within 1e-7, and the continued fraction would need too many steps.
NORMAL_DF = 1e7


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    stddev: float


@dataclass(frozen=True)
class Welch:
    """Welch's t-test of b against a.

    t, df, p, ci_low and ci_high are None when a side has fewer than two
    samples (no variance estimate, so no test).  df is None when both
    variances are zero (Welch's formula is 0/0 there).
    """
    t: float | None
    df: float | None
    p: float | None
    diff: float
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class Verdict:
    changed: bool
    direction: str          # "+", "-" or "=" (no change at the chosen level)
    expect_ok: bool | None  # None when no expectation was given
    text: str
    tested: bool = True     # False: a side had one sample, relative threshold used
    expect: str | None = None

    @property
    def label(self):
        """Short form for a table cell: 'decreased', 'unchanged ok',
        'increased (n=1) FAIL', 'zero ok', 'not zero FAIL'."""
        word = {"+": "increased", "-": "decreased", "=": "unchanged"}[self.direction]
        if self.expect == "zero":
            word = "zero" if self.expect_ok else "not zero"
        elif not self.tested:
            word += " (n=1)"
        if self.expect_ok is None:
            return word
        return word + (" ok" if self.expect_ok else " FAIL")


# ---------------------------------------------------------------- summaries

def summary(samples):
    """n, mean and sample stddev (n-1 denominator; 0 for a single sample).

    Uses the statistics module, which computes exactly, so a constant
    series gives a stddev of exactly 0 (the zero-variance edge cases of
    welch() depend on that).
    """
    data = list(samples)
    if not data:
        raise ValueError("summary of an empty sample list")
    mean = float(statistics.mean(data))
    stddev = float(statistics.stdev(data)) if len(data) > 1 else 0.0
    return Summary(len(data), mean, stddev)


def all_zero(*series):
    """True when every sample of every given series is 0.

    For an expectation like data_errors = "zero": verdict() checks the
    series only; a caller that also wants a clean baseline passes both.
    """
    return all(x == 0 for s in series for x in s)


# ---------------------------------------------------------------- Student t

def _betacf(a, b, x, max_iter=10000, eps=3e-16):
    """Continued fraction of the incomplete beta function (modified Lentz),
    as in Numerical Recipes `betacf`.  Converges in O(sqrt(max(a, b)))
    steps for the x < (a+1)/(a+b+2) side that betainc() hands it."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, max_iter + 1):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                   -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            delta = d * c
            h *= delta
        if abs(delta - 1.0) < eps:
            return h
    raise ArithmeticError(f"betacf({a}, {b}, {x}) did not converge")


def betainc(a, b, x):
    """Regularized incomplete beta function I_x(a, b) for a, b > 0."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf(t, df):
    """Upper tail P(T > t) of Student's t with df (> 0, may be fractional
    or math.inf) degrees of freedom.  Computed directly as a tail, not as
    1 - cdf, so small p-values keep their precision."""
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    if df > NORMAL_DF:
        return 0.5 * math.erfc(t / math.sqrt(2.0))
    x = df / (df + t * t)
    half_two_sided = 0.5 * betainc(df / 2.0, 0.5, x)
    return half_two_sided if t > 0 else 1.0 - half_two_sided


def t_cdf(t, df):
    """P(T <= t) for Student's t with df degrees of freedom."""
    return t_sf(-t, df)


def t_isf(tail, df):
    """The t with P(T > t) = tail (inverse survival function).

    Bisection on t_sf: monotone and robust for any df, and 200 halvings
    reach the float resolution of the bracket.
    """
    if not 0.0 < tail < 1.0:
        raise ValueError(f"tail probability {tail} not in (0, 1)")
    if tail == 0.5:
        return 0.0
    if tail > 0.5:
        return -t_isf(1.0 - tail, df)
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > tail:
        lo, hi = hi, hi * 2.0
        if hi > 1e300:
            return math.inf
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if t_sf(mid, df) > tail:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def t_ppf(q, df):
    """Quantile: the t with P(T <= t) = q."""
    return t_isf(1.0 - q, df) if q > 0.5 else -t_isf(q, df)


# ---------------------------------------------------------------- Welch

def welch(a, b, level=0.95):
    """Welch's unequal-variance t-test of b against a, two-sided p-value,
    and the `level` confidence interval of mean(b) - mean(a).

    Edge cases (all deliberate, see tests/unit/test_compare_stats.py):
    - fewer than 2 samples on a side: no variance, no test; only diff is
      set, everything else is None.
    - both variances zero (each kernel gave one constant value): if the
      means are equal, t = 0 and p = 1; otherwise the difference is exact,
      t = +-inf and p = 0.  Either way the CI has zero width at diff, and
      df is None.
    - one variance zero: nothing special; Welch's formula then reduces to
      the one-sample test of the varying side (df = its n - 1).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level {level} not in (0, 1)")
    sa, sb = summary(a), summary(b)
    diff = sb.mean - sa.mean
    if sa.n < 2 or sb.n < 2:
        return Welch(None, None, None, diff, None, None)
    va, vb = sa.stddev ** 2 / sa.n, sb.stddev ** 2 / sb.n
    if va == 0.0 and vb == 0.0:
        if diff == 0.0:
            return Welch(0.0, None, 1.0, diff, diff, diff)
        return Welch(math.copysign(math.inf, diff), None, 0.0, diff, diff, diff)
    se = math.sqrt(va + vb)
    t = diff / se
    df = (va + vb) ** 2 / (va ** 2 / (sa.n - 1) + vb ** 2 / (sb.n - 1))
    p = min(1.0, 2.0 * t_sf(abs(t), df))
    half = t_isf((1.0 - level) / 2.0, df) * se
    return Welch(t, df, p, diff, diff - half, diff + half)


# ---------------------------------------------------------------- verdicts

def _direction(changed, diff):
    if not changed or diff == 0:
        return "="
    return "+" if diff > 0 else "-"


def _expect_ok(expect, changed, direction, b):
    if expect is None:
        return None
    if expect not in EXPECTATIONS:
        raise ValueError(f"unknown expectation {expect!r} (one of {', '.join(EXPECTATIONS)})")
    if expect == "zero":
        return all_zero(b)
    if expect == "unchanged":
        return not changed
    return direction == ("+" if expect == "increase" else "-")


def verdict(a, b, level=0.95, expect=None, rel_threshold=0.10):
    """Did b (series) change against a (baseline), and as expected?

    With at least two samples per side the change is Welch's p < 1 - level.
    With a single sample on a side no test is possible; then "changed"
    means |diff| > rel_threshold * |mean(a)| (any difference when the
    baseline mean is 0), and the text says "(n=1, no test)".

    expect: None or one of "increase", "decrease" (a significant change in
    that direction), "unchanged" (no significant change), "zero" (every
    sample of the series b is 0; use all_zero(a, b) to demand it of both).
    """
    w = welch(a, b, level)
    if w.p is not None:
        changed = w.p < 1.0 - level
        detail = f"p={format_p(w.p)}"
    else:
        base = summary(a).mean
        changed = abs(w.diff) > rel_threshold * abs(base)
        detail = "n=1, no test"
    direction = _direction(changed, w.diff)
    ok = _expect_ok(expect, changed, direction, b)
    text = ("changed " + direction if changed else "unchanged") + f" ({detail})"
    if expect is not None:
        text += f"; expected {expect}: " + ("ok" if ok else "FAIL")
    return Verdict(changed, direction, ok, text, tested=w.p is not None, expect=expect)


def format_p(p):
    """p-value for humans: three decimals, '<0.001' below that."""
    if p is None:
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


# ---------------------------------------------------------------- bench's arithmetic

LEVEL = 0.95


def ratio(value, base):
    return value / base if base else None


def median(xs):
    xs = sorted(xs)
    if not xs:
        raise ValueError("median of no samples")
    mid = len(xs) // 2
    return float(xs[mid]) if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2.0


def mean(xs):
    return summary(xs).mean


def paired_ratio(base, other, level=LEVEL):
    """Mean of the per-round ratios other[i] / base[i] and its Student t
    confidence interval (rounds are interleaved, so each pair shares the
    host's load of that moment).  (mean, low, high); low/high None for n<2."""
    if len(base) != len(other) or not base:
        raise ValueError("paired_ratio needs equally many rounds on both sides")
    return mean_interval([o / b for b, o in zip(base, other)], level)


def mean_interval(xs, level=LEVEL):
    """Mean of @xs and its Student t interval: (mean, low, high), low/high
    None for one sample."""
    s = summary(xs)
    if s.n < 2:
        return s.mean, None, None
    half = t_isf((1.0 - level) / 2.0, s.n - 1) * s.stddev / s.n ** 0.5
    return s.mean, s.mean - half, s.mean + half


def ci_verdict(r, lo, hi, target):
    """Ratio <= target: True when the whole confidence interval is at or
    below it, False when the whole interval is above, None (inconclusive)
    when it straddles; without an interval, the ratio itself decides."""
    if lo is None:
        return r <= target
    if hi <= target:
        return True
    return False if lo > target else None


def tolerance_verdict(err, lo, hi, tol):
    """|error| <= tol: True when the whole interval is inside, False when
    it is wholly outside, None (inconclusive) otherwise; without an
    interval, the error itself decides."""
    if lo is None:
        return abs(err) <= tol
    if -tol <= lo and hi <= tol:
        return True
    return False if lo > tol or hi < -tol else None
