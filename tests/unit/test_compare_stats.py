"""Unit tests of `faultline compare`'s statistics, table and SVG plots.

Reference values come from two independent places: textbook/published
numbers (t quantiles, Wikipedia's Welch's t-test example), and a second
implementation inside this file that integrates the t density with a fine
Simpson rule instead of using the incomplete beta function.
"""

import json
import math
import os
import sys
import unittest
import xml.etree.ElementTree as ET

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.judge import plot as flplot, stats as flstats, table as fltable

SVG = "{http://www.w3.org/2000/svg}"

# Wikipedia, "Welch's t-test", example 1 (A1, A2).
WIKI_A = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4]
WIKI_B = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4]


# ---------------------------------------------------------------- reference

def t_pdf(x, df):
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    return c * (1 + x * x / df) ** (-(df + 1) / 2)


def simpson_cdf(t, df, steps=20000):
    """P(T <= t) = 1/2 + integral_0^t pdf, by composite Simpson."""
    h = t / steps
    s = t_pdf(0, df) + t_pdf(t, df)
    s += sum((4 if k % 2 else 2) * t_pdf(k * h, df) for k in range(1, steps))
    return 0.5 + s * h / 3


def simpson_quantile(q, df):
    """Inverse of simpson_cdf by bisection (q > 0.5)."""
    lo, hi = 0.0, 100.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if simpson_cdf(mid, df, 4000) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def plain_welch(a, b):
    """Welch's t and df with plain loops (no flstats)."""
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    va = sum((x - ma) ** 2 for x in a) / (len(a) - 1) / len(a)
    vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1) / len(b)
    t = (mb - ma) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return t, df, math.sqrt(va + vb)


# ---------------------------------------------------------------- flstats

class SummaryTest(unittest.TestCase):
    def test_mean_and_sample_stddev(self):
        s = flstats.summary([2, 4, 4, 4, 5, 5, 7, 9])
        self.assertEqual((s.n, s.mean), (8, 5.0))
        self.assertAlmostEqual(s.stddev, math.sqrt(32 / 7), places=12)

    def test_single_sample_has_zero_stddev(self):
        self.assertEqual(flstats.summary([3]), flstats.Summary(1, 3.0, 0.0))

    def test_constant_floats_give_exactly_zero_stddev(self):
        self.assertEqual(flstats.summary([0.1, 0.1, 0.1]).stddev, 0.0)

    def test_empty_is_an_error(self):
        with self.assertRaises(ValueError):
            flstats.summary([])


class StudentTTest(unittest.TestCase):
    def test_betainc_closed_forms(self):
        for x in (0.1, 0.37, 0.9):
            self.assertAlmostEqual(flstats.betainc(1, 1, x), x, places=14)
            self.assertAlmostEqual(flstats.betainc(3, 1, x), x ** 3, places=14)
            self.assertAlmostEqual(flstats.betainc(1, 4, x), 1 - (1 - x) ** 4, places=14)
        self.assertAlmostEqual(flstats.betainc(7.5, 7.5, 0.5), 0.5, places=14)

    def test_cdf_matches_simpson_integration(self):
        for df in (1, 2.5, 4, 9, 24.98, 100):
            for t in (0.3, 1.0, 2.262157, 4.0):
                with self.subTest(df=df, t=t):
                    self.assertAlmostEqual(flstats.t_cdf(t, df), simpson_cdf(t, df), places=9)
                    self.assertAlmostEqual(flstats.t_cdf(-t, df), 1 - simpson_cdf(t, df), places=9)

    def test_textbook_quantiles(self):
        for q, df, want in ((0.975, 9, 2.262157), (0.975, 4, 2.776445), (0.975, 1, 12.706205),
                            (0.975, 30, 2.042272), (0.995, 10, 3.169273), (0.95, 8, 1.859548),
                            (0.975, math.inf, 1.959964)):
            with self.subTest(q=q, df=df):
                self.assertAlmostEqual(flstats.t_ppf(q, df), want, places=6)
                self.assertAlmostEqual(flstats.t_ppf(1 - q, df), -want, places=6)

    def test_quantile_matches_simpson_inverse(self):
        for df in (3, 24.98):
            self.assertAlmostEqual(flstats.t_ppf(0.975, df), simpson_quantile(0.975, df), places=6)

    def test_round_trip_and_symmetry(self):
        self.assertEqual(flstats.t_cdf(0, 5), 0.5)
        self.assertEqual(flstats.t_ppf(0.5, 5), 0.0)
        for df in (1, 3.3, 50):
            for q in (0.001, 0.2, 0.9, 0.9999):
                self.assertAlmostEqual(flstats.t_cdf(flstats.t_ppf(q, df), df), q, places=12)

    def test_tiny_tail_keeps_precision(self):
        # P(T > 40) for df = 3 is 1.719e-5; a 1 - cdf computation would lose digits.
        self.assertAlmostEqual(flstats.t_sf(40, 3) / 1.7190340394579e-05, 1.0, places=9)
        self.assertEqual(flstats.t_sf(math.inf, 3), 0.0)


class WelchTest(unittest.TestCase):
    def test_wikipedia_example(self):
        w = flstats.welch(WIKI_A, WIKI_B)
        # Wikipedia: t = -2.46 for A1 - A2; here diff = mean(b) - mean(a), so +2.46.
        self.assertAlmostEqual(w.t, 2.46, places=2)
        self.assertAlmostEqual(w.df, 24.98, delta=0.01)
        self.assertAlmostEqual(w.p, 0.021, delta=0.0005)
        self.assertAlmostEqual(w.diff, 22.986666666666 - 20.82, places=9)

    def test_wikipedia_example_against_independent_computation(self):
        w = flstats.welch(WIKI_A, WIKI_B)
        t, df, se = plain_welch(WIKI_A, WIKI_B)
        self.assertAlmostEqual(w.t, t, places=12)
        self.assertAlmostEqual(w.df, df, places=10)
        self.assertAlmostEqual(w.p, 2 * (1 - simpson_cdf(t, df)), places=9)
        crit = simpson_quantile(0.975, df)
        self.assertAlmostEqual(w.ci_low, w.diff - crit * se, places=6)
        self.assertAlmostEqual(w.ci_high, w.diff + crit * se, places=6)
        self.assertGreater(w.ci_low, 0)  # p < 0.05, so the 95% CI excludes 0

    def test_textbook_equal_variances(self):
        # se = 1, t = 2, df = 8: p = 0.080516, t(0.975, 8) = 2.306004.
        w = flstats.welch([1, 2, 3, 4, 5], [3, 4, 5, 6, 7])
        self.assertAlmostEqual(w.t, 2.0, places=12)
        self.assertAlmostEqual(w.df, 8.0, places=12)
        self.assertAlmostEqual(w.p, 0.080516, places=6)
        self.assertAlmostEqual(w.ci_low, 2 - 2.306004, places=6)
        self.assertAlmostEqual(w.ci_high, 2 + 2.306004, places=6)
        self.assertLess(w.ci_low, 0)  # p > 0.05: the CI contains 0

    def test_level_widens_interval(self):
        w95 = flstats.welch([1, 2, 3, 4, 5], [3, 4, 5, 6, 7], level=0.95)
        w99 = flstats.welch([1, 2, 3, 4, 5], [3, 4, 5, 6, 7], level=0.99)
        self.assertAlmostEqual(w99.ci_high - 2, 3.355387, places=6)  # t(0.995, 8)
        self.assertLess(w99.ci_low, w95.ci_low)

    def test_single_sample_side_has_no_test(self):
        w = flstats.welch([5], [6, 7])
        self.assertEqual(w, flstats.Welch(None, None, None, 1.5, None, None))

    def test_identical_constants(self):
        self.assertEqual(flstats.welch([4, 4, 4], [4, 4]), flstats.Welch(0.0, None, 1.0, 0.0, 0.0, 0.0))

    def test_different_constants(self):
        w = flstats.welch([4, 4, 4], [1, 1])
        self.assertEqual((w.t, w.df, w.p, w.diff, w.ci_low, w.ci_high),
                         (-math.inf, None, 0.0, -3.0, -3.0, -3.0))

    def test_one_zero_variance_is_a_one_sample_test(self):
        # b against the constant 5: t = 0.5 / (sd_b / 2), df = n_b - 1 = 3.
        w = flstats.welch([5, 5, 5], [4, 6, 5, 7])
        sd_b = math.sqrt(5 / 3)
        self.assertAlmostEqual(w.t, 0.5 / (sd_b / 2), places=12)
        self.assertAlmostEqual(w.df, 3.0, places=12)
        self.assertAlmostEqual(w.p, 2 * (1 - simpson_cdf(w.t, 3)), places=9)

    def test_bad_level(self):
        with self.assertRaises(ValueError):
            flstats.welch([1, 2], [3, 4], level=95)


class VerdictTest(unittest.TestCase):
    def test_changed_at_95_not_at_99(self):
        v = flstats.verdict(WIKI_A, WIKI_B)
        self.assertEqual((v.changed, v.direction, v.expect_ok), (True, "+", None))
        self.assertEqual(v.text, "changed + (p=0.021)")
        self.assertFalse(flstats.verdict(WIKI_A, WIKI_B, level=0.99).changed)

    def test_expectations(self):
        cases = {"increase": True, "decrease": False, "unchanged": False, "zero": False}
        for expect, ok in cases.items():
            with self.subTest(expect=expect):
                v = flstats.verdict(WIKI_A, WIKI_B, expect=expect)
                self.assertIs(v.expect_ok, ok)
        self.assertEqual(flstats.verdict(WIKI_A, WIKI_B, expect="decrease").text,
                         "changed + (p=0.021); expected decrease: FAIL")
        self.assertEqual(flstats.verdict(WIKI_A, WIKI_B, expect="decrease").label, "increased FAIL")

    def test_unchanged(self):
        v = flstats.verdict([1, 2, 3, 4, 5], [3, 4, 5, 6, 7], expect="unchanged")
        self.assertEqual((v.changed, v.direction, v.expect_ok), (False, "=", True))
        self.assertEqual(v.text, "unchanged (p=0.081); expected unchanged: ok")
        self.assertEqual(v.label, "unchanged ok")

    def test_single_run_uses_relative_threshold(self):
        v = flstats.verdict([100], [80], expect="decrease")
        self.assertEqual((v.changed, v.direction, v.expect_ok), (True, "-", True))
        self.assertEqual(v.text, "changed - (n=1, no test); expected decrease: ok")
        self.assertEqual(v.label, "decreased (n=1) ok")
        self.assertFalse(flstats.verdict([100], [95]).changed)
        self.assertFalse(flstats.verdict([100], [80], rel_threshold=0.25).changed)
        self.assertTrue(flstats.verdict([0], [1]).changed)
        self.assertFalse(flstats.verdict([0], [0]).changed)

    def test_zero_checks_the_series(self):
        self.assertTrue(flstats.verdict([0, 2, 0], [0, 0, 0], expect="zero").expect_ok)
        v = flstats.verdict([0, 0, 0], [0, 1, 0], expect="zero")
        self.assertFalse(v.expect_ok)
        self.assertEqual(v.label, "not zero FAIL")
        self.assertEqual(v.text, "unchanged (p=0.423); expected zero: FAIL")
        self.assertTrue(flstats.all_zero([0, 0.0], [0]))
        self.assertFalse(flstats.all_zero([0, 0], [0, 2]))

    def test_unknown_expectation(self):
        with self.assertRaises(ValueError):
            flstats.verdict([1, 2], [3, 4], expect="lower")


# ---------------------------------------------------------------- fltable

COVER_ROWS = [  # zswap-dropbehind-v3 cover letter, kernel build table (single runs)
    ("pgrotated", [441028], [2521]),
    ("pgsteal_direct", [3524343], [2869004]),
    ("pgscan_direct", [8393791], [7765008]),
    ("zswpwb", [705129], [699019]),
    ("build time (s)", [1155], [1114]),
]

STATS_ROWS = [
    ("pgrotated", [400, 410, 420], [20, 22, 24], "decrease"),
    ("data_errors", [0, 0, 0], [0, 0, 0], "zero"),
    ("workload_ms", [100.0, 110.0, 120.0], [104.0, 114.0, 124.0]),
]


class TableTest(unittest.TestCase):
    def test_single_runs_like_the_cover_letter(self):
        # The letter says -3.6% for the build time; 1114/1155 - 1 is -3.55%
        # (its means were not whole seconds).
        want = ("  metric           baseline    series    delta\n"
                "  pgrotated          441028      2521   -99.4%\n"
                "  pgsteal_direct    3524343   2869004   -18.6%\n"
                "  pgscan_direct     8393791   7765008    -7.5%\n"
                "  zswpwb             705129    699019    -0.9%\n"
                "  build time (s)       1155      1114    -3.5%\n"
                "\n"
                "  one run per kernel: no statistical test\n")
        self.assertEqual(fltable.format_table(COVER_ROWS, "baseline", "series"), want)

    def test_mean_stddev_p_and_verdict(self):
        want = ("  metric               A          B     delta        p   verdict\n"
                "  pgrotated     410 ± 10    22 ±  2    -94.6%   <0.001   decreased ok\n"
                "  data_errors     0 ±  0     0 ±  0   n/a (0)    1.000   zero ok\n"
                "  workload_ms   110 ± 10   114 ± 10     +3.6%    0.650   unchanged\n"
                "\n"
                "  mean ± stddev over 3 runs of A and 3 runs of B\n"
                "  p: Welch's t-test, two-sided; verdict at 95% confidence\n")
        self.assertEqual(fltable.format_table(STATS_ROWS, "A", "B"), want)
        # The p cell above, independently: t = 4 / sqrt(200/3), df = 4.
        t = 4 / math.sqrt(200 / 3)
        self.assertEqual(f"{2 * (1 - simpson_cdf(t, 4)):.3f}", "0.650")

    def test_ascii_plusminus_and_level(self):
        text = fltable.format_table(STATS_ROWS[:1], "A", "B", level=0.99, plusminus="+/-")
        self.assertIn("  pgrotated   410 +/- 10   22 +/- 2   -94.6%   <0.001   decreased ok\n", text)
        self.assertIn("verdict at 99% confidence", text)

    def test_decimals_and_baseline_zero(self):
        rows = [("transactions/s", [153.87], [163.30]), ("avg latency (ms)", [52.09], [49.05]),
                ("errors", [0], [3]), ("fixed", [0], [-2])]
        want = ("  metric                 A       B      delta\n"
                "  transactions/s     153.9   163.3      +6.1%\n"
                "  avg latency (ms)   52.09   49.05      -5.8%\n"
                "  errors                 0       3   n/a (+3)\n"
                "  fixed                  0      -2   n/a (-2)\n")
        self.assertEqual(fltable.format_table(rows, "A", "B").split("\n\n")[0] + "\n", want)

    def test_mixed_run_counts(self):
        text = fltable.format_table([("x", [1, 2, 3], [2]), ("y", [5, 6], [7, 8])], "A", "B")
        # Means and stddevs are each right-aligned per column, so the ± line up.
        self.assertIn("  x            2 ±     1       2            +0.0%     n/a   unchanged (n=1)\n"
                      "  y        5.500 ± 0.707   7.500 ± 0.707   +36.4%   0.106   unchanged\n", text)
        self.assertIn("over 2-3 runs of A and 1-2 runs of B", text)

    def test_verdict_column_for_single_runs_with_expectations(self):
        text = fltable.format_table([("pgrotated", [441028], [2521], "decrease")], "A", "B")
        self.assertIn("  pgrotated   441028   2521   -99.4%   decreased (n=1) ok\n", text)

    def test_negative_zero_is_not_printed(self):
        self.assertEqual(fltable.format_number(-0.0001, 2), "0.00")
        self.assertEqual(fltable.format_number(-1.5, 1), "-1.5")

    def test_json(self):
        rows = STATS_ROWS + [("const", [1, 1], [2, 2], "increase")]
        data = fltable.to_json(rows, "A", "B")
        text = json.dumps(data, allow_nan=False)  # no Infinity/NaN leaks out
        self.assertEqual(json.loads(text)["baseline"], "A")
        m = {r["metric"]: r for r in data["metrics"]}
        self.assertEqual(m["pgrotated"]["baseline"], {"n": 3, "mean": 410.0, "stddev": 10.0,
                                                      "samples": [400, 410, 420]})
        self.assertAlmostEqual(m["pgrotated"]["delta_percent"], -388 / 4.1)
        self.assertIsNone(m["data_errors"]["delta_percent"])
        self.assertEqual((m["const"]["t"], m["const"]["p"], m["const"]["ci_low"]), (None, 0.0, 1.0))
        self.assertEqual(m["workload_ms"]["verdict"], "unchanged (p=0.650)")
        self.assertIs(data["expectations_ok"], True)
        self.assertEqual(data["failed_expectations"], [])

    def test_failed_expectations(self):
        rows = [("pgrotated", [1, 2, 3], [1, 2, 3], "decrease"), ("data_errors", [0, 0], [0, 1], "zero"),
                ("zswpwb", [5, 6], [5, 6])]
        data = fltable.to_json(rows, "A", "B")
        self.assertIs(data["expectations_ok"], False)
        self.assertEqual(data["failed_expectations"], ["pgrotated", "data_errors"])
        self.assertIsNone(fltable.to_json(rows[2:], "A", "B")["expectations_ok"])


# ---------------------------------------------------------------- flplot

def parse_svg(text):
    root = ET.fromstring(text)
    assert root.tag == SVG + "svg"
    return root


def texts(root):
    return [t.text for t in root.iter(SVG + "text")]


class SvgTest(unittest.TestCase):
    def check_document(self, root, title):
        self.assertEqual(root.get("version"), "1.1")
        w, h = root.get("width"), root.get("height")
        self.assertEqual(root.get("viewBox"), f"0 0 {w} {h}")
        self.assertEqual(root.find(SVG + "title").text, title)
        self.assertIn(title, texts(root))

    def bars(self):
        metrics = [("pgrotated", flstats.summary([441028, 430000, 450100]), flstats.summary([2521, 2600])),
                   ("workload_ms", flstats.summary([1155]), flstats.summary([1114])),
                   ("data_errors", flstats.summary([0, 0]), flstats.summary([0, 0])),
                   ("x", flstats.summary([0]), flstats.summary([3]))]
        return parse_svg(flplot.bars_svg("A <vs> B & co", metrics, "7.2-stock", "dropbehind-v3"))

    def test_bars_structure_and_escaping(self):
        root = self.bars()
        self.check_document(root, "A <vs> B & co")
        bars = [r for r in root.iter(SVG + "rect") if r.get("class") == "bar"]
        self.assertEqual(len(bars), 8)
        whiskers = [ln for ln in root.iter(SVG + "line") if ln.get("class") == "whisker"]
        self.assertEqual(len(whiskers), 2)  # only pgrotated has stddev > 0
        labels = [t.text for t in root.iter(SVG + "text") if t.get("class") == "value"]
        self.assertEqual(labels, ["440k", "2560", "1155", "1114", "0", "0", "0", "3"])
        all_text = texts(root)
        for want in ("7.2-stock", "dropbehind-v3", "pgrotated", "% of baseline mean", "x (scaled to series)"):
            self.assertIn(want, all_text)
        self.assertTrue(any("baseline mean (= 100%)" in t for t in all_text))

    def test_bars_are_normalised_to_the_baseline(self):
        bars = [r for r in self.bars().iter(SVG + "rect") if r.get("class") == "bar"]
        height = [float(r.get("height")) for r in bars]
        self.assertAlmostEqual(height[0], height[2], delta=0.01)  # both baselines at 100%
        self.assertAlmostEqual(height[3] / height[2], 1114 / 1155, delta=0.001)
        self.assertEqual(height[4:7], [0.0, 0.0, 0.0])

    def test_scatter_log_scale_drops_nonpositive_points(self):
        pts = [[(10, 12), (100, 110), (1000, 1020), (0, 5)], [(10, 30), (100, 200)]]
        root = parse_svg(flplot.scatter_svg("lat", "injected delay (µs)", "observed (µs)", pts,
                                            ["nvme", "sync"], log_scale=True))
        self.check_document(root, "lat")
        groups = [g for g in root.iter(SVG + "g") if g.get("class") == "series"]
        self.assertEqual([len(g.findall(SVG + "circle")) for g in groups], [3, 2])
        all_text = texts(root)
        for want in ("injected delay (µs)", "observed (µs)", "nvme", "sync", "10", "100", "1000"):
            self.assertIn(want, all_text)
        self.assertIn("log-log scale; dashed: y = x; 1 points <= 0 not shown", all_text)
        self.assertEqual(len([ln for ln in root.iter(SVG + "line") if ln.get("class") == "identity"]), 1)

    def test_scatter_linear_keeps_zero(self):
        root = parse_svg(flplot.scatter_svg("lat", "x", "y", [[(0, 5), (10, 20)]], ["a"]))
        self.assertEqual(len(list(root.iter(SVG + "circle"))), 2 + 1)  # + legend marker

    def test_lines_with_a_missing_phase(self):
        series = [("pswpout", {"fill": 100, "reclaim": 5000, "refault": 200}),
                  ("zswpwb", [("fill", 0), ("refault", 3000)])]
        root = parse_svg(flplot.lines_svg("deltas", "phase", "pages", series))
        self.check_document(root, "deltas")
        self.assertEqual(len(list(root.iter(SVG + "polyline"))), 1)  # zswpwb is broken at reclaim
        self.assertEqual(len(list(root.iter(SVG + "circle"))), 5)
        all_text = texts(root)
        self.assertLess(all_text.index("fill"), all_text.index("reclaim"))
        self.assertLess(all_text.index("reclaim"), all_text.index("refault"))
        for want in ("phase", "pages", "pswpout", "zswpwb"):
            self.assertIn(want, all_text)

    def test_lines_with_a_phase_list_and_plain_values(self):
        # The form faultline/judge/report.py uses: phases in place of xlabel.
        phases = ["phase fill", "phase reclaim", "round 1"]
        rows = [("pswpout", [100, 5000, 200]), ("zswpwb", [0, None, 3000])]
        root = parse_svg(flplot.lines_svg("deltas", phases, "pages", rows))
        self.assertEqual(len(list(root.iter(SVG + "polyline"))), 1)
        self.assertEqual(len(list(root.iter(SVG + "circle"))), 5)
        all_text = texts(root)
        self.assertEqual([t for t in all_text if t in phases], phases)
        self.assertIn("phase", all_text)
        with self.assertRaises(ValueError):
            flplot.lines_svg("deltas", "phase", "pages", rows)

    def test_ticks(self):
        self.assertEqual(flplot.nice_ticks(0, 108), [0, 50, 100, 150])
        self.assertEqual(flplot.log_ticks(3, 2000), [1.0, 10.0, 100.0, 1000.0, 10000.0])
        self.assertEqual([flplot.short_number(x) for x in (0, 0.5, 2521, 10000, 441028, 1.5e6)],
                         ["0", "0.5", "2521", "10k", "441k", "1.5M"])


if __name__ == "__main__":
    unittest.main()
