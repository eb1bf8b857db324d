"""Unit tests of `faultline explore`: the schedule grammar (every generated
or mutated rule set parses with the engine's own parser, is accepted by its
attach point, and holds no excluded action), the feedback signal on
recorded runs (tests/unit/explore/), and resuming a search."""

import base64
import json
import os
import random
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline import cli, rules, scenario
from faultline.errors import EXIT_CRASH, EXIT_FAIL, EXIT_PASS, SetupError
from faultline.judge.report import Report
from faultline.run import runner, spec_builder
from faultline.run.options import ExploreOptions, RunOptions
from faultline.faults import grammar
from faultline.search import explore, feedback
from faultline.vm import machine

FIXTURES = os.path.join(TOP, "tests", "unit", "explore")
# One scenario per attach point, and ones whose own rules allow more
# (lost completions, fatal, in-band states, several CPUs).
SCENARIOS = ["smoke", "syncblk-task", "write-error-redirty-virtio",
             "write-error-redirty-virtio-scsi", "nvme-lost-completion", "nvme-fatal",
             "syncblk-cpu-target", "nvme-queue-target", "write-error-redirty-sync", "read-error"]
PER_SCENARIO = 800


def spaces(allow_lies=False):
    out = []
    for name in SCENARIOS:
        sc = scenario.load(name)
        out.append((name, grammar.Space.of(sc, sc.faults.rules, allow_lies)))
    return out


def schedules(space, rng, n):
    """@n schedules: fresh ones and chains of mutations of them."""
    out = []
    while len(out) < n:
        s = grammar.generate(rng, space)
        out.append(s)
        for _ in range(rng.randint(0, 8)):
            s, _ = grammar.mutate(rng, space, s)
            out.append(s)
    return out[:n]


def delay_bound_ns(text, low=False):
    """The longest (@low: the shortest) delay of a grammar delay value:
    fixed, uniform(a,b), or exp(mean) taken as 3 means long (the grammar's
    cap is for its mean times 3) and as 0 short."""
    def ns(d):
        for unit, f in (("ms", 10**6), ("us", 10**3), ("ns", 1), ("s", 10**9)):
            if d.endswith(unit):
                return int(d[:-len(unit)]) * f
        raise ValueError(d)
    if text.startswith("uniform("):
        a, b = text[len("uniform("):-1].split(",")
        return ns(a) if low else ns(b)
    if text.startswith("exp("):
        return 0 if low else 3 * ns(text[len("exp("):-1])
    return ns(text)


def engine_errors(texts):
    """{index: message} of the rule texts fault-rules-check rejects."""
    errors = {}
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for i, t in enumerate(texts):
            paths.append(os.path.join(d, f"{i}.rules"))
            with open(paths[-1], "w") as f:
                f.write(t)
        for k in range(0, len(paths), 1000):
            res = subprocess.run([rules.checker(), *paths[k:k + 1000]], capture_output=True,
                                 text=True)
            for line in res.stdout.splitlines():
                path, _, msg = line.partition(": ")
                errors[paths.index(path)] = msg
            if res.returncode not in (0, 1):
                raise AssertionError(f"fault-rules-check exit {res.returncode}: {res.stderr}")
    return errors


class GrammarTest(unittest.TestCase):
    def test_every_schedule_parses_and_fits_its_attach_point(self):
        rng = random.Random(7)
        for name, space in spaces():
            scheds = schedules(space, rng, PER_SCENARIO)
            texts = [s.text() for s in scheds]
            bad = engine_errors(texts)
            self.assertEqual(bad, {}, f"{name}: e.g. {texts[min(bad)] if bad else ''}")
            for t in texts:
                self.assertTrue(t.strip(), name)
                self.assertEqual(grammar.device_problem(space.kind, t), "", (name, t))
                self.assertEqual(grammar.excluded(t, space), "", (name, t))
                for tok in ("lie", "corrupt", "reset-fail", "read-error"):
                    if tok == "read-error" and space.read_error_states is not None:
                        continue
                    self.assertNotIn(tok, t.split(), (name, t))

    def test_read_errors_only_where_the_scenario_fails_reads_and_in_its_states(self):
        """read-error.toml fails reads in state 1 (armed once the pattern is
        on the device): explore may too, in state 1 only; smoke never."""
        rng = random.Random(12)
        spaces_by = dict(spaces())
        rerr = spaces_by["read-error"]
        self.assertEqual(rerr.read_error_states, (1,))
        self.assertIsNone(spaces_by["smoke"].read_error_states)
        failing_reads = []
        for s in schedules(rerr, rng, 400):
            for line in s.text().splitlines():
                toks = line.split()
                if len(toks) > 1 and toks[1] in ("read", "any") and \
                        any(t.startswith("error=") for t in toks):
                    failing_reads.append(line)
                    self.assertIn("state=1", toks, line)
        self.assertTrue(failing_reads)
        self.assertTrue(any("error=read-error" in ln for ln in failing_reads))
        self.assertIn("loses the page", grammar.excluded("a: read every=2 error=eio", rerr))
        self.assertEqual(grammar.excluded("a: read state=1 every=2 error=eio", rerr), "")
        self.assertEqual(grammar._read_error_states("r: read every=3 error=eio\n"), ())
        self.assertIsNone(grammar._read_error_states("w: write every=3 error=eio\n"))

    def test_the_space_uses_what_each_attach_point_has(self):
        rng = random.Random(8)
        seen = {}
        for name, space in spaces():
            text = "".join(s.text() for s in schedules(space, rng, PER_SCENARIO))
            seen[name] = {k for k in ("sq=", "cpu=", "irq-delay=", "irq=suppress", "complete=",
                                      "drop", "fatal", "dnr", "when=after", "uniform(",
                                      "exp(", "state=", "prob=", "every=", "nth=", "after=",
                                      "count=", "lba=") if k in text}
        self.assertIn("sq=", seen["nvme-queue-target"])
        self.assertIn("cpu=", seen["syncblk-cpu-target"])
        self.assertIn("complete=", seen["write-error-redirty-sync"])
        # swapctx --expect task asserts the completion context: a complete=
        # rule would fail it by the device's doing (explore's first real run).
        self.assertNotIn("complete=", seen["syncblk-task"])
        # Nor a lost completion: its timeout completes outside the submitter
        # (explore on the fixed kernel: one dropped write failed syncblk-task).
        self.assertNotIn("drop", seen["syncblk-task"])
        self.assertIn("drop", seen["syncblk-cpu-target"])      # syncblk, no swapctx
        self.assertIn("drop", seen["nvme-lost-completion"])
        self.assertIn("irq=suppress", seen["nvme-lost-completion"])
        self.assertIn("fatal", seen["nvme-fatal"])
        self.assertIn("state=", seen["write-error-redirty-sync"])   # --arm-state 1
        for k in ("irq-delay=", "dnr", "when=after", "uniform(", "exp(", "prob=", "every=",
                  "nth=", "after=", "count=", "lba="):
            self.assertIn(k, seen["smoke"])
        # Lost completions only where the scenario's own rules lose them;
        # never on virtio, whose drivers never time out.
        for name in ("smoke", "write-error-redirty-virtio", "write-error-redirty-virtio-scsi"):
            self.assertFalse({"drop", "irq=suppress", "fatal"} & seen[name], name)

    def test_allow_lies_widens_the_space_and_still_parses(self):
        rng = random.Random(9)
        got = set()
        for name, space in spaces(allow_lies=True):
            if space.kind not in ("nvme", "virtio-blk"):
                continue
            scheds = schedules(space, rng, 300)
            texts = [s.text() for s in scheds]
            self.assertEqual(engine_errors(texts), {}, name)
            strict = grammar.Space(**{**space.__dict__, "allow_lies": False})
            for t in texts:
                self.assertEqual(grammar.device_problem(space.kind, t), "", t)
                if any(k in t.split() for k in ("lie",)) or "corrupt" in t:
                    self.assertNotEqual(grammar.excluded(t, strict), "", t)
                    got.add("lie" if "lie" in t.split() else "corrupt")
        self.assertEqual(got, {"lie", "corrupt"})

    def test_excluded_names_what_breaks_data(self):
        nvme = grammar.Space("nvme", 1 << 21)
        virtio = grammar.Space("virtio-blk", 1 << 21, lost_ok=False)
        for text, space in (("a: write nth=3 lie", nvme), ("a: write corrupt=2", nvme),
                            ("a: read prob=0.1 error=eio", nvme),
                            ("a: any error=write-fault", nvme),
                            ("a: write nth=2 reset-fail=1", nvme),
                            ("a: write nth=2 drop", virtio),
                            ("a: write nth=2 error=timeout", nvme),
                            ("a: read nth=2 irq=suppress", nvme),
                            ("a: write nth=2 fatal", nvme)):
            self.assertNotEqual(grammar.excluded(text, space), "", text)
        self.assertEqual(grammar.excluded("a: write every=4 error=eio dnr", nvme), "")
        self.assertIn("not supplied", grammar.device_problem("syncblk", "a: write sq=1 delay=1us"))
        self.assertIn("not supplied", grammar.device_problem("nvme", "a: write cpu=1 delay=1us"))
        self.assertIn("hang forever", grammar.device_problem("virtio-scsi", "a: write drop"))

    def test_delays_stay_within_their_cap_and_heavy_ones_within_the_budget(self):
        """Delays past SPARSE_DELAY_MAX_NS are on rules whose count= keeps
        their worst case, summed over the schedule, within a quarter of the
        scenario's timeout."""
        rng = random.Random(9)
        heavy = 0
        for name, space in spaces():
            self.assertEqual(space.delay_budget_ns,
                             scenario.load(name).timeout_s * 10**9 // 4, name)
            for s in schedules(space, rng, PER_SCENARIO // 2):
                stalls = 0
                for r in s.rules:
                    key = next((k for k in ("delay", "irq-delay") if k in r.action), None)
                    if key is None:
                        continue
                    worst = delay_bound_ns(r.action[key])
                    self.assertLessEqual(worst, grammar.delay_cap(r, space), (name, r.text()))
                    if worst > grammar.SPARSE_DELAY_MAX_NS:
                        heavy += 1
                        stalls += r.trigger["count"] * worst
                self.assertLessEqual(stalls, space.delay_budget_ns, (name, s.text()))
        self.assertGreater(heavy, 0)

    def test_a_stall_on_most_reads_is_in_the_space(self):
        """swapin-race-sync's own rule slows every read of one vCPU by
        20-200 ms; explore must be able to say as much (bounded by count=),
        or a race that needs it is out of its reach."""
        sc = scenario.load("swapin-race-sync")
        space = grammar.Space.of(sc, sc.faults.rules)
        stalls = []
        for s in schedules(space, random.Random(10), 400):
            for r in s.rules:
                if r.op in ("read", "any") and "delay" in r.action and \
                        "nth" not in r.trigger and r.trigger.get("prob", 1) >= 0.2 and \
                        r.trigger.get("every", 1) <= 4 and r.trigger.get("count", 0) >= 100 and \
                        delay_bound_ns(r.action["delay"], low=True) >= 10_000_000:
                    stalls.append(r.text())
        self.assertTrue(stalls)

    def test_rules_are_drawn_on_the_io_the_device_saw(self):
        """Once the baseline's I/O is known, rules target the ops the
        workload issued, about as often as it issued them, and LBA ranges
        lie where those ops went: swapin-race-sync swaps on 640 sectors of
        a 16 MiB device and issues no discard."""
        sc = scenario.load("swapin-race-sync")
        io = [{"op": "read", "count": 20000, "lba-min": 8, "lba-max": 639},
              {"op": "write", "count": 20000, "lba-min": 0, "lba-max": 639}]
        space = grammar.Space.of(sc, "").with_io(io)
        self.assertEqual(space.extent("read"), (8, 639))
        self.assertEqual(space.extent("any"), (0, 639))
        self.assertEqual(space.extent("discard"), (0, space.sectors - 1))
        ops = {"read": 0, "write": 0, "any": 0}
        scheds = schedules(space, random.Random(21), 400)
        rng = random.Random(22)
        scheds += [grammar.mutate(rng, space, s)[0] for s in scheds]
        for s in scheds:
            for r in s.rules:
                self.assertIn(r.op, ops, r.text())
                ops[r.op] += 1
                if "lba" in r.match:
                    lo, hi = space.extent(r.op)
                    a, b = r.match["lba"]
                    self.assertTrue(lo <= a <= b <= hi, r.text())
        self.assertLess(abs(ops["read"] - ops["write"]), 0.2 * (ops["read"] + ops["write"]), ops)
        self.assertEqual(engine_errors([s.text() for s in scheds]), {})
        # Without a profile the whole device and every op, as before.
        self.assertEqual(grammar.Space.of(sc, "").with_io([]).extent("read"),
                         (0, space.sectors - 1))

    def test_mutations_are_reproducible_and_change_something(self):
        _, space = spaces()[0]
        a = [s.text() for s in schedules(space, random.Random(3), 50)]
        b = [s.text() for s in schedules(space, random.Random(3), 50)]
        self.assertEqual(a, b)
        rng = random.Random(4)
        s = grammar.generate(rng, space)
        kinds = set()
        for _ in range(200):
            m, what = grammar.mutate(rng, space, s)
            kinds.add(what)
            if what != "seed":
                self.assertNotEqual(m.text(), s.text(), what)
            else:
                self.assertNotEqual(m.seed, s.seed)
            s = m
        self.assertEqual(kinds, {"distribution", "range", "seed", "add", "drop", "regen"})

    def test_schedule_text_round_trips(self):
        rng = random.Random(5)
        for _, space in spaces():
            for s in schedules(space, rng, 100):
                back = explore.parse_schedule({"seed": s.seed, "rules": s.text()})
                self.assertEqual(back.text(), s.text())


class FeedbackTest(unittest.TestCase):
    def test_bucket(self):
        self.assertEqual([feedback.bucket(n) for n in (0, 1, 2, 3, 4, 15, 16, 64, -5)],
                         [0, 1, 1, 1, 2, 2, 3, 4, -2])
        self.assertIsNone(feedback.bucket("x"))

    def test_recorded_runs(self):
        plain = feedback.features(os.path.join(FIXTURES, "pass"))
        errs = feedback.features(os.path.join(FIXTURES, "w3dnr"))
        # Same scenario, same kernel: a run is nothing new after itself.
        self.assertEqual(feedback.new_features(plain, plain), [])
        new = feedback.new_features(errs, plain)
        # Every third swap write failed (write every=3 error=eio dnr): the
        # kernel's write-error path is what is new, with numbers masked.
        self.assertIn("klog:Write-error on swap-device:4", new)
        self.assertIn("dmesg:Write-error on swap-device (N:N:N)", new)
        self.assertIn("diag:vmstat pswpout:8", errs)
        self.assertFalse(any(f.startswith(("diag:seed", "diag:elapsed")) for f in errs))
        self.assertFalse(any(c.isdigit() for f in errs if f.startswith(("dmesg:", "ktap:"))
                             for c in f))

    def test_probes(self):
        ktap = ("# kretprobe swap_writepage_bdev_sync=0 12\n"
                "# kretprobe swap_writepage_bdev_sync!=0 3\n"
                "# kprobe end_swap_bio_write 40\n"
                "# kprobe end_swap_bio_write hardirq 40\n"
                "# kprobe folio_end_writeback n/a\n"
                "# kprobe zswap_writeback_entry 0\n")
        got = feedback.probe_features(ktap)
        f = "swap_writepage_bdev_sync"
        self.assertEqual(got, {f"ret:{f}=0", f"ret:{f}=0:2", f"ret:{f}!=0", f"ret:{f}!=0:1",
                               "probe:end_swap_bio_write:3",
                               "probe:end_swap_bio_write:hardirq:3"})


class KcovFeedbackTest(unittest.TestCase):
    """The guest tools' `# kcov-map` lines (guestlib-kcov.c, standard
    base64 of a 64 Ki-bit edge map) as explore features."""

    @staticmethod
    def kmap(*bits):
        raw = bytearray(feedback.KCOV_MAP_BYTES)
        for b in bits:
            raw[b // 8] |= 1 << (b % 8)
        return base64.b64encode(bytes(raw)).decode()

    def test_maps_of_every_tool_are_merged(self):
        ktap = (f"1..1\nok 1 a\n# kcov edges 2\n# kcov-map {self.kmap(0, 4711)}\n"
                f"# test: b\n# kcov edges 2\n# kcov-map {self.kmap(4711, 65535)}\n")
        self.assertEqual(feedback.kcov_features(ktap), {"kcov:0", "kcov:4711", "kcov:65535"})
        # The map is feedback once, not also a KTAP line of its own.
        self.assertFalse(any("kcov" in f for f in feedback.ktap_features(ktap)))
        self.assertEqual(feedback.kcov_edges(feedback.kcov_features(ktap) | {"diag:x"}), 3)

    def test_a_map_cut_short_adds_nothing(self):
        whole = self.kmap(7)
        for line in (whole[:100], whole[:-4], "not base64 at all!", whole + "AAAA"):
            self.assertEqual(feedback.kcov_features(f"# kcov-map {line}\n"), set(), line[:20])
        self.assertEqual(feedback.kcov_features("# kcov unavailable: No such file\n"), set())

    def test_explore_turns_kcov_on_where_the_kernel_has_it(self):
        seen = []

        def fake_run(self, budget_s, max_runs=None, max_failures=None):
            seen.append(self.opts.kcov)
            return EXIT_PASS
        for config, want in (("CONFIG_KCOV=y\nCONFIG_DEBUG_FS=y\n", True),
                             ("# CONFIG_KCOV is not set\n", False), (None, False)):
            with tempfile.TemporaryDirectory() as d, \
                    mock.patch.object(explore.Explorer, "run", fake_run), \
                    mock.patch.object(explore.Explorer, "prepare", lambda self, names: None):
                kernel = os.path.join(d, "bzImage")
                with open(kernel, "wb") as f:
                    f.write(b"not an image")
                if config is not None:
                    with open(os.path.join(d, ".config"), "w") as f:
                        f.write(config)
                explore.explore(ExploreOptions(["smoke"], RunOptions(kernel=kernel, quiet=True),
                                               out=os.path.join(d, "x"), quiet=True))
            self.assertEqual(seen[-1], want, config)


class ResumeTest(unittest.TestCase):
    def explorer(self, out):
        return explore.Explorer(out, RunOptions(quiet=True), seed=11)

    def test_resume_goes_on_as_an_uninterrupted_search(self):
        with tempfile.TemporaryDirectory() as d:
            a = self.explorer(d)
            a.prepare(["smoke", "syncblk-task"])
            # A search 6 trials in, with two schedules kept.
            for trial in (0, 3):
                name, s, _ = a.schedule_for(trial)
                a.corpus.append({"id": f"c{trial}", "scenario": name, "seed": s.seed,
                                 "rules": s.text(), "new": 1, "trial": trial})
            a.tried, a.kept, a.seen = 6, 2, {"diag:vmstat pswpout:8", "ret:f=0"}
            a.failures.append({"trial": 4, "signature": "hang", "scenario": "smoke"})
            a.elapsed_s = 99.0
            a.save()
            b = self.explorer(d)
            st = b.load()
            b.prepare(b.scenarios)
            self.assertEqual((b.tried, b.kept, b.seen, b.elapsed_s, b.scenarios),
                             (6, 2, a.seen, 99.0, ["smoke", "syncblk-task"]))
            self.assertEqual(b.signatures, {"hang"})
            self.assertEqual(st["seed"], 11)
            for trial in range(6, 30):
                x, y = a.schedule_for(trial), b.schedule_for(trial)
                self.assertEqual((x[0], x[1].text(), x[1].seed, x[2]),
                                 (y[0], y[1].text(), y[1].seed, y[2]))
            # Mutations of kept schedules happen (not only fresh ones).
            self.assertTrue(any(" of c" in b.schedule_for(t)[2] for t in range(6, 30)))

    def baseline(self, d, names, reports):
        """Explorer @names after baseline runs judged as @reports (no VM:
        run_schedule gives each in turn)."""
        ex = self.explorer(d)
        ex.prepare(names)
        ex.builds = None
        results = iter(reports)

        def fake_run(name, sched, opts, builds, rundir):
            r = next(results)
            return explore.Result(r, rundir, {"diag:x"}, explore.failure_class(r), 5.0)
        with mock.patch.object(explore, "run_schedule", fake_run), \
                mock.patch.object(explore.runner, "load_run",
                                  lambda d: ({"run_command": f"faultline run ... {d}"}, None)), \
                mock.patch.object(explore.minimize, "signature",
                                  lambda d, r: r.reason.split(":")[0]):
            for name in names:
                ex.baseline(name)
        return ex

    def test_a_baseline_that_breaks_a_guarantee_is_a_finding(self):
        crash = Report(scenario="smoke", seed=1, status=EXIT_CRASH, outcome="crash",
                       reason="kernel crash: Oops")
        ok = Report(scenario="syncblk-task", seed=1, status=EXIT_PASS, outcome="pass",
                    reason="pass")
        with tempfile.TemporaryDirectory() as d:
            ex = self.baseline(d, ["smoke", "syncblk-task"], [crash, ok])
            self.assertEqual(ex.explorable(), ["syncblk-task"])
            self.assertEqual([f["trial"] for f in ex.failures], [None])
            self.assertIn("crash with no fault at all", ex.failures[0]["note"])
            self.assertEqual({ex.schedule_for(t)[0] for t in range(10)}, {"syncblk-task"})
            # Resumed, it stays a finding and the scenario stays out.
            b = self.explorer(d)
            b.load()
            self.assertEqual(b.explorable(), ["syncblk-task"])
            self.assertEqual(b.finish(), explore.EXIT_FAIL)

    def test_the_baseline_s_io_shapes_the_schedules_and_survives_resume(self):
        io = [{"op": "read", "count": 50, "lba-min": 0, "lba-max": 99}]
        ok = Report(scenario="swapin-race-sync", seed=1, status=EXIT_PASS, outcome="pass",
                    reason="pass", faults={"digest": 1, "io": io})
        with tempfile.TemporaryDirectory() as d:
            ex = self.baseline(d, ["swapin-race-sync"], [ok])
            self.assertEqual(ex.baselines["swapin-race-sync"]["io"], io)
            scheds = [ex.schedule_for(t)[1] for t in range(30)]
            self.assertEqual({r.op for s in scheds for r in s.rules} - {"read", "any"}, set())
            b = self.explorer(d)
            b.load()
            b.prepare(b.scenarios)
            self.assertEqual([b.schedule_for(t)[1].text() for t in range(30)],
                             [s.text() for s in scheds])

    def test_the_baseline_keeps_the_fault_layer(self):
        """The baseline's empty schedule still attaches the fault-injector
        (with no rule): swapoff-read-error's test arms its engine state
        in-band and failed every baseline without one ("NVMe Set Features
        0xC0 failed"), so explore refused it as a scenario that fails
        without faults."""
        got = []

        def fake_one_run(sc, seed, opts, builds, rundir, verbose=True):
            got.append(spec_builder.device_args(sc, "/d.img", rundir, seed, False)[1])
            return Report(scenario=sc.name, seed=seed, status=EXIT_PASS, outcome="pass",
                          reason="pass"), {}
        with tempfile.TemporaryDirectory() as d, \
                mock.patch.object(explore.runner, "one_run", fake_one_run), \
                mock.patch.object(explore.feedback, "features", lambda d: set()):
            explore.run_schedule("swapoff-read-error", grammar.Schedule(1, []),
                                 RunOptions(quiet=True), None, os.path.join(d, "b"))
        self.assertEqual(got, [machine.INJECTOR_ID])

    def test_a_baseline_that_fails_its_own_check_is_refused(self):
        """A guest test that checks its own faults fails without them: the
        scenario's, not the kernel's."""
        fail = Report(scenario="smoke", seed=1, status=EXIT_FAIL, outcome="fail",
                      reason="guest tests failed (exit 1, 1 not ok)", diag={"data_errors": 0})
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(SetupError, "smoke fails with no faults"):
                self.baseline(d, ["smoke"], [fail])

    def test_a_refused_scenario_names_the_generic_one_of_its_device(self):
        fail = Report(scenario="write-error-redirty-sync", seed=1, status=EXIT_FAIL,
                      outcome="fail", reason="guest tests failed (exit 1, 1 not ok)",
                      diag={"data_errors": 0})
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(SetupError, r"\(for its device: syncblk-task\)$"):
                self.baseline(d, ["write-error-redirty-sync"], [fail])

    def test_every_generic_scenario_is_its_own_device_s(self):
        for (kind, completion), name in explore.GENERIC_SCENARIOS.items():
            sc = scenario.load(name)
            self.assertEqual((sc.device.kind, explore.generic_scenario(sc)), (kind, name))
        self.assertEqual(explore.generic_scenario(scenario.load("write-error-redirty-nvme")),
                         "smoke")
        self.assertIsNone(explore.generic_scenario(scenario.load("latency-virtio")))

    def test_a_schedule_whose_guest_bailed_out_is_not_kept(self):
        """Failing every 4 KiB write fails mkswap's header: the guest bails
        out in 3 s with features of its own (seen on the fixed kernel: such
        a schedule joined the corpus and its mutations bailed out again)."""
        fail = Report(scenario="smoke", seed=1, status=EXIT_FAIL, outcome="fail",
                      reason="guest tests failed (exit 1, 0 not ok)")
        with tempfile.TemporaryDirectory() as d:
            ex = explore.Explorer(d, RunOptions(quiet=True), seed=3, quiet=True)
            ex.prepare(["smoke"])
            os.makedirs(os.path.join(d, "corpus"))
            rundir = os.path.join(d, "runs", "00000-smoke")
            os.makedirs(rundir)
            name, sched, origin = ex.schedule_for(0)
            ex.record(0, name, sched, origin,
                      explore.Result(fail, rundir, {"ktap:Bail out! swapon failed"}, "", 3.0,
                                     bailed=True))
            self.assertEqual((ex.kept, ex.corpus, ex.seen), (0, [], set()))
            self.assertFalse(os.path.exists(rundir))

    def test_a_guest_that_bailed_out_is_not_a_failure(self):
        """A schedule that fails every write fails mkswap's header: swapon
        refuses the area and the guest bails out before any test (explore's
        first corpus run called that a finding).  The kernel was never
        tested; a crash or a splat still counts."""
        fail = Report(scenario="s", seed=1, status=EXIT_FAIL, outcome="fail",
                      reason="guest tests failed (exit 1, 0 not ok)")
        splat = Report(scenario="s", seed=1, status=EXIT_FAIL, outcome="fail",
                       reason="kernel splat: WARNING: at mm/swapfile.c:1")
        crash = Report(scenario="s", seed=1, status=EXIT_CRASH, outcome="crash",
                       reason="kernel crash: Oops")
        self.assertEqual(explore.failure_class(fail), "fail")
        self.assertEqual(explore.failure_class(fail, bailed=True), "")
        self.assertEqual(explore.failure_class(splat, bailed=True), "fail")
        self.assertEqual(explore.failure_class(crash, bailed=True), "crash")
        with tempfile.TemporaryDirectory() as d:
            self.assertFalse(explore.bailed_out(d))
            with open(os.path.join(d, "ktap.log"), "w") as f:
                f.write("swapon: /dev/syncblk0: Invalid argument\n"
                        "Bail out! swapon /dev/syncblk0 failed\n")
            self.assertTrue(explore.bailed_out(d))

    def test_max_failures_stops_the_search_at_the_nth_failure(self):
        """--max-failures 1: the search ends at its first failure instead of
        spending the rest of the budget (time to first failure is what a
        corpus measurement wants)."""
        ok = Report(scenario="smoke", seed=1, status=EXIT_PASS, outcome="pass", reason="pass")
        crash = Report(scenario="smoke", seed=1, status=EXIT_CRASH, outcome="crash",
                       reason="kernel crash: Oops")
        outcomes = iter([ok, ok, ok, crash] + [ok] * 50)
        ran = []

        def fake_run(name, sched, opts, builds, rundir):
            ran.append(rundir)
            os.makedirs(rundir, exist_ok=True)
            r = next(outcomes)
            return explore.Result(r, rundir, {f"diag:x{len(ran)}"}, explore.failure_class(r), 1.0)
        with tempfile.TemporaryDirectory() as d:
            ex = explore.Explorer(d, RunOptions(quiet=True), seed=3, quiet=True,
                                  minimize_budget=0)
            ex.prepare(["smoke"])
            with mock.patch.object(explore, "run_schedule", fake_run), \
                    mock.patch.object(explore, "build_all", lambda *a: None), \
                    mock.patch.object(explore.runner, "load_run",
                                      lambda d: ({"run_command": "faultline run x"}, None)), \
                    mock.patch.object(explore.minimize, "signature", lambda d, r: "Oops"):
                rc = ex.run(3600, max_failures=1)
            self.assertEqual(rc, explore.EXIT_FAIL)
            self.assertEqual(len(ran), 4)       # the baseline and three trials
            self.assertEqual([f["trial"] for f in ex.failures], [2])

    def test_a_failure_minimize_refuses_is_kept_and_the_search_goes_on(self):
        """minimize refusing a failure (say, more faults than the engine
        takes rules, none of its prefixes failing) ended the whole explore
        with a setup error; the failure stands with its run command."""
        ok = Report(scenario="smoke", seed=1, status=EXIT_PASS, outcome="pass", reason="pass")
        fail = Report(scenario="smoke", seed=1, status=EXIT_FAIL, outcome="fail",
                      reason="guest tests failed (exit 1, 1 not ok)")
        outcomes = iter([ok, fail, ok, ok, ok, ok])

        def fake_run(name, sched, opts, builds, rundir):
            os.makedirs(rundir, exist_ok=True)
            r = next(outcomes)
            return explore.Result(r, rundir, {"diag:x"}, explore.failure_class(r), 1.0)

        def refuse(*a, **k):
            raise SetupError("x: 9000 faults, more than the 4096 rules the engine takes")
        with tempfile.TemporaryDirectory() as d:
            ex = explore.Explorer(d, RunOptions(quiet=True, deterministic=True), seed=3,
                                  quiet=True)
            ex.prepare(["smoke"])
            with mock.patch.object(explore, "run_schedule", fake_run), \
                    mock.patch.object(explore, "build_all", lambda *a: None), \
                    mock.patch.object(explore.runner, "load_run",
                                      lambda d: ({"run_command": "faultline run x"}, None)), \
                    mock.patch.object(explore.minimize, "signature", lambda d, r: "not ok 1"), \
                    mock.patch.object(explore.minimize, "minimize", refuse):
                rc = ex.run(3600, max_runs=4)
            self.assertEqual(rc, explore.EXIT_FAIL)
            self.assertEqual(ex.tried, 4)
            self.assertEqual(ex.failures[0]["repro"], "faultline run x")
            self.assertIn("not minimized: x: 9000 faults", ex.failures[0]["note"])

    def test_bad_input_is_one_line_before_any_vm(self):
        """... and leaves no run directory behind."""
        before = set(os.listdir(runner.DEFAULT_OUT)) if os.path.isdir(runner.DEFAULT_OUT) else set()
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"scenarios": ["smoke"]}, f)
            for argv in (["explore", "--resume", d], ["explore", "smoke", "--out", d],
                         ["explore", "smoke", "--budget", "10x"],
                         ["explore", "write-error-redirty-virtio-scsi", "--restore"],
                         ["explore", "no-such-scenario"], ["explore"]):
                res = subprocess.run([sys.executable, "-m", "faultline", *argv],
                                     capture_output=True, text=True,
                                     cwd=os.path.join(TOP, "python"))
                self.assertEqual(res.returncode, 2, argv)
                self.assertEqual(len(res.stderr.strip().splitlines()), 1, (argv, res.stderr))
                self.assertEqual(res.stdout, "", argv)
        after = set(os.listdir(runner.DEFAULT_OUT)) if os.path.isdir(runner.DEFAULT_OUT) else set()
        self.assertEqual(after - before, set())

    def test_command_is_registered(self):
        self.assertIn("explore", cli.COMMANDS)
        self.assertEqual(explore.parse_budget("90s"), 90)
        self.assertEqual(explore.parse_budget("1.5h"), 5400)


if __name__ == "__main__":
    unittest.main()
