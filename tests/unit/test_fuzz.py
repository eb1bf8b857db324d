"""Unit tests of `faultline fuzz` (python/faultline/fuzz/): the features of
an Outcome, the corpus and its index, failure signatures, and the manager's
loop on a fake guest whose executor drops the store of a write that a later
read of the same pages checks (the `drop-write` plant's bug) and whose
kernel panics on `compact`; budgets, --resume and its refusals, the
results record and its table."""

import io
import json
import os
import random
import sys
import tempfile
import time
import unittest
from contextlib import redirect_stderr

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.errors import SetupError  # noqa: E402
from faultline.execute.session import Outcome  # noqa: E402
from faultline.fuzz import manager, signal, state  # noqa: E402
from faultline.fuzz.corpus import Corpus  # noqa: E402
from faultline.fuzz.triage import BootFailed, Triage, prepared, signature, top_frames  # noqa: E402
from faultline.prog.gen import generate  # noqa: E402
from faultline.prog.lang import parse  # noqa: E402
from faultline.results import records  # noqa: E402

IDENT = {"qemu_build": "q1", "guest_build": "g1", "kernel_key": "debian:6.12"}

SPLAT = """[   12.345678] ------------[ cut here ]------------
[   12.345680] WARNING: CPU: 1 PID: 4242 at mm/swapfile.c:1234 swap_free+0x5c/0x80
[   12.345690] Call Trace:
[   12.345691]  <TASK>
[   12.345692]  ? __warn+0x7d/0x130
[   12.345693]  swap_free+0x5c/0x80
[   12.345694]  do_swap_page+0x1a2/0xc40
[   12.345695]  __handle_mm_fault+0x7e0/0xd50
[   12.345696]  handle_mm_fault+0xfe/0x300
[   12.345697]  </TASK>
"""


def overlaps(a, b):
    return a[0] < b[0] + b[1] and b[0] < a[0] + a[1]


class FakeGuest:
    """A booted guest as machines.GuestVM is one.  Its executor loses a
    write's store when a later read checks those pages (a content finding
    on that read); its kernel panics on `compact`; every other program
    passes, with counters and kcov edges made of its operations."""

    def __init__(self, log, rundir, deterministic, fail_boots=0, offers=None):
        self.log, self.rundir, self.deterministic = log, rundir, deterministic
        self.fail_boots = fail_boots
        self.alive = True
        self.kernel_offers = offers or {}

    def offers(self):
        return self.kernel_offers

    def start(self):
        self.log.append(("boot", os.path.basename(self.rundir), self.deterministic))
        if self.log.count(("boot-failure",)) < self.fail_boots:
            self.log.append(("boot-failure",))
            raise BootFailed("the fake guest did not come up")
        return "6.12-fake"

    def run(self, prep):
        assert self.alive, "a dead guest got a program"
        self.log.append(("run", prep.name))
        self.log.append(("rules", [st.args[2] for st in prep.program.of("rule")]))
        self.log.append(("knobs", [kv for st in prep.program.of("knob") for kv in st.args]))
        ops = prep.program.ops
        if any(op.verb == "compact" for op in ops):
            self.alive = False
            return (Outcome(prep.name, "crash", "the kernel panicked: Kernel panic - not "
                            "syncing: fake"),
                    "[ 3.2] Kernel panic - not syncing: fake oops at 0xffff1234\n", False)
        written = []
        for op in ops:
            if op.verb == "write" and not op.actor:
                written.append((op.args[0], op.args[1], op.args[2]))
            elif op.verb == "read" and not op.actor:
                if any(o == op.args[0] and overlaps((off, n), (op.args[1], op.args[2]))
                       for o, off, n in written):
                    f = {"check": "content", "line": str(op.line), "op": op.text(),
                         "why": "-", "obj": op.args[0]}
                    return Outcome(prep.name, "fail", findings=[f], report=["result x fail 1"]), \
                        "", True
        verbs = [op.verb for op in ops]
        cover = [f"{hash((a, b)) & 0xffff:x}" for a, b in zip(verbs, verbs[1:])]
        return Outcome(prep.name, "pass", stats={"ops": str(len(ops)), "elapsed_ms": "3"},
                       report=[f"cover {len(cover)} {' '.join(cover)}"]), "", True

    def close(self):
        self.alive = False
        self.log.append(("close", os.path.basename(self.rundir)))


def campaign(out, budget_s=2.0, resume=False, seed=None, ident=IDENT, fail_boots=0, jobs=1,
             results=None, until_failure=False, faults="all", offers=None):
    log = []
    opts = manager.FuzzOptions(out=out, budget_s=budget_s, jobs=jobs, seed=seed, resume=resume,
                               results=results, minimize_budget_s=20.0, quiet=True,
                               until_failure=until_failure, faults=faults)
    opts.check()
    with redirect_stderr(io.StringIO()) as err:
        status = manager.fuzz(opts, dict(ident),
                              lambda rundir, det: FakeGuest(log, rundir, det, fail_boots,
                                                            offers),
                              lambda path, det: ["faultline", "prog", "run", path]
                              + (["--deterministic"] if det else []))
    return status, log, err.getvalue()


class SignalTest(unittest.TestCase):
    def test_features_of_an_outcome(self):
        out = Outcome("p", "pass", report=["at 1", "cover 3 A1 b2 c3", "cover 1 d4",
                                           "relaxed madv-free line=4 obj=a page=0",
                                           "result p pass 0"],
                      stats={"swapins": "300", "pages_written": "0", "elapsed_ms": "912"},
                      faults={"s0": {"injector": "fi-nvme0", "hits": {"r0": 5, "r1": 0},
                                     "io": {"write": 4000, "read": 17}}})
        rules = {"s0": [("r0", "write every=3 error=eio"), ("r1", "read delay=exp(1ms)")]}
        self.assertEqual(signal.features(out, rules), {
            "edge:a1", "edge:b2", "edge:c3", "edge:d4", "relaxed:madv-free",
            "io:fi-nvme0:write:6", "io:fi-nvme0:read:3", "io:fi-nvme0:errors:2",
            "fired:write:error=eio", "stat:swapins:5", "stat:pages_written:0"})
        self.assertEqual(signal.edges(signal.features(out, rules)), 4)

    def test_cover_field_and_no_kcov(self):
        out = Outcome("p", "pass", report=["result p pass 0"])
        self.assertEqual(signal.features(out, {}), set())
        out.cover = {0xFF, 0xee}        # the kcov branch's Outcome.cover: ints
        out.report.append("cover 2 ff 0A0")
        self.assertEqual(signal.features(out, {}), {"edge:ff", "edge:ee", "edge:a0"})

    def test_action_words(self):
        self.assertEqual(signal.action_words("any nth=3 delay=uniform(1us,2ms) drop complete=irq"),
                         [("delay", "delays"), ("drop", "lost"), ("complete=irq", "completion")])


class CorpusTest(unittest.TestCase):
    def test_keeps_what_is_new_persists_and_draws_by_weight(self):
        d = tempfile.mkdtemp()
        c = Corpus(os.path.join(d, "corpus"))
        p1, p2 = generate(1), generate(2)
        self.assertEqual(c.consider(p1, {"a", "b", "c"}, "gen 1", 1.0), ["a", "b", "c"])
        self.assertEqual(c.consider(p2, {"a", "b"}, "gen 2", 2.0), [])
        self.assertEqual(c.consider(p2, {"a", "z"}, "gen 2", 3.0), ["z"])
        again = Corpus(os.path.join(d, "corpus")).load()
        self.assertEqual(again.features(), {"a", "b", "c", "z"})
        self.assertEqual([e.program.text() for e in again.entries], [p1.text(), p2.text()])
        rng = random.Random(7)
        draws = [again.choose(rng).id for _ in range(2000)]
        self.assertAlmostEqual(draws.count("000001") / 2000, 0.75, delta=0.04)

    def test_a_broken_corpus_is_one_line(self):
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "index.json"), "w") as f:
            json.dump({"programs": [{"id": "000001", "file": "000001.prog", "new": ["a"]}]}, f)
        with open(os.path.join(d, "000001.prog"), "w") as f:
            f.write("anon a 4K\nread b 0 4K\n")
        with self.assertRaises(SetupError) as e:
            Corpus(d).load()
        self.assertIn("000001.prog:2", str(e.exception))


class SignatureTest(unittest.TestCase):
    def test_oracle_kernel_crash_and_hang(self):
        f = {"check": "content", "op": "@p read a 0 4M", "why": "sigbus"}
        self.assertEqual(signature(Outcome("p", "fail", findings=[f]), "", "p"),
                         "content read sigbus")
        k = {"check": "kernel", "why": "splat",
             "text": "WARNING: CPU: 1 PID: 4242 at mm/swapfile.c:1234 swap_free+0x5c/0x80"}
        self.assertEqual(signature(Outcome("p", "fail", findings=[f, k]), SPLAT, "p"),
                         "kernel: WARNING: CPU: N PID: N at mm/swapfile.c:N swap_free+N/N "
                         "[swap_free do_swap_page __handle_mm_fault]")
        self.assertEqual(top_frames(SPLAT, 2), ["swap_free", "do_swap_page"])
        crash = Outcome("j0-7", "crash", "the kernel panicked: Kernel panic - not syncing: x")
        self.assertEqual(signature(crash, "[ 1.5] Kernel panic - not syncing: x 42\n", "j0-7"),
                         "kernel: Kernel panic - not syncing: x N")
        hang = Outcome("j0-7", "crash", "no ops-done of j0-7 from the guest in 300s")
        self.assertEqual(signature(hang, "", "j0-7"),
                         "hang: no ops-done of PROGRAM from the guest in Ns")
        self.assertIsNone(signature(Outcome("p", "pass"), "", "p"))

    def test_swapoff_is_one_failure_whichever_line_saw_it(self):
        own = {"check": "swapoff", "op": "swapoff s0", "why": "timeout"}
        joined = {"check": "swapoff", "op": "wait", "why": "timeout"}
        self.assertEqual(signature(Outcome("p", "fail", findings=[own]), "", "p"),
                         "swapoff swapoff timeout")
        self.assertEqual(signature(Outcome("p", "fail", findings=[joined]), "", "p"),
                         "swapoff swapoff timeout")


class SequenceGuest:
    """A guest whose kernel remembers: a program fails with a content
    finding when both `arm-a` and `arm-b` ran on this boot before it (in
    any order, with others between); every other program passes."""

    def __init__(self, log, label, deterministic):
        self.log, self.label, self.deterministic = log, label, deterministic
        self.ran = set()

    def run(self, prep):
        self.log.append((self.label, prep.name))
        self.ran.add(prep.name)
        if prep.name.startswith("victim") or prep.name in ("deterministic", "replay") \
                or prep.name.startswith("min-"):
            if {"arm-a", "arm-b"} <= self.ran:
                f = {"check": "content", "line": "2", "op": "read a 0 4K", "why": "-"}
                return Outcome(prep.name, "fail", findings=[f]), "", True
        return Outcome(prep.name, "pass"), "", True

    def close(self):
        pass


class TriageTest(unittest.TestCase):
    def test_a_failure_that_needs_its_history_is_minimized_over_it(self):
        fdir = tempfile.mkdtemp()
        log = []
        text = "anon a 4K\nwrite a 0 4K v=1\nread a 0 4K\n"
        prep = lambda name: prepared(name, parse(text), os.path.join(fdir, name))  # noqa: E731
        history = [prep(n) for n in ("p1", "arm-b", "p3", "p4", "arm-a", "p6", "p7", "p8")]
        victim = prep("victim")
        sig = "content read -"
        t = Triage(lambda label, det=False: SequenceGuest(log, label, det), fdir, sig, None,
                   lambda path, det: ["faultline", "prog", "run", path], 60.0)
        found = manager.Found(victim, Outcome("victim", "fail"), "", history, 0, 12.0)
        summary = t.run(found)
        self.assertEqual(summary["replay"], "after 8 programs")
        self.assertEqual(summary["minimize_history"]["programs"], [8, 2])
        self.assertFalse(summary["minimize_history"]["cut_by_budget"])
        self.assertEqual(summary["deterministic"], "same")
        seq = os.path.join(fdir, "sequence")
        self.assertEqual(sorted(os.listdir(seq)),
                         ["01-arm-b.prog", "02-arm-a.prog", "03-failing.prog"])
        with open(os.path.join(fdir, "replay.sh")) as f:
            replay = f.read()
        self.assertIn("faultline prog run " + seq + "\n", replay)
        self.assertIn("not written: the failure needs the programs before it",
                      summary["reproducer"])
        # The sequence replays: a fresh boot of its programs in name order fails so.
        g = SequenceGuest([], "check", False)
        outs = [g.run(prep(n.split("-", 1)[1][:-5] if not n.endswith("failing.prog")
                           else "victim"))[0] for n in sorted(os.listdir(seq))]
        self.assertEqual([o.verdict for o in outs], ["pass", "pass", "fail"])


class ManagerTest(unittest.TestCase):
    def test_finds_minimizes_and_records_each_failure_once(self):
        out = os.path.join(tempfile.mkdtemp(), "c")
        t0 = time.monotonic()
        status, log, err = campaign(out, budget_s=3.0)
        self.assertLess(time.monotonic() - t0, 60)
        self.assertEqual(status, 1)
        with open(os.path.join(out, "fuzz.json")) as f:
            st = json.load(f)
        sigs = {f["signature"]: f for f in st["failures"]}
        self.assertIn("content read -", sigs)
        last = st["stats"][-1]
        self.assertGreater(last["programs"], 10)
        self.assertGreater(last["corpus"], 0)
        self.assertGreater(last["edges"], 0)
        self.assertEqual(last["failures"], len(sigs))
        # Found again and again, triaged once.
        content = sigs["content read -"]
        self.assertGreater(content["hits"], 1)
        fdir = os.path.join(out, "failures", content["dir"])
        for name in ("program.prog", "minimized.prog", "rules.txt", "report.txt", "result.json",
                     "console.txt", "replay.sh", "failure.json"):
            self.assertTrue(os.path.exists(os.path.join(fdir, name)), name)
        with open(os.path.join(fdir, "failure.json")) as f:
            summary = json.load(f)
        self.assertEqual(summary["replay"], "alone")
        self.assertEqual(summary["deterministic"], "same")
        with open(os.path.join(fdir, "minimized.prog")) as f:
            small = parse(f.read())
        # The smallest program that still fails: an object, a write, a read of it.
        self.assertEqual([op.verb for op in small.ops][-2:], ["write", "read"])
        self.assertLessEqual(len(small.ops), 3)
        # No device, rule or knob is needed to lose a store.
        self.assertEqual([st for st in small.header if st.verb in ("swap", "rule", "knob")], [])
        self.assertEqual(summary["minimize"]["ops"][1], len(small.ops))
        # Triage boots its own guests: a fresh replay, then a deterministic one.
        boots = [b for b in log if b[0] == "boot"]
        self.assertTrue(any("replay" in b[1] for b in boots))
        self.assertTrue(any(b[2] for b in boots if "deterministic" in b[1]))
        # The corpus holds only passing programs.
        c = Corpus(os.path.join(out, "corpus")).load()
        self.assertTrue(c.entries)

    def test_a_dead_guest_is_booted_again(self):
        out = os.path.join(tempfile.mkdtemp(), "c")
        _, log, _ = campaign(out, budget_s=3.0, seed=3)
        with open(os.path.join(out, "fuzz.json")) as f:
            st = json.load(f)
        crashes = st["stats"][-1]["crashes"]
        self.assertGreater(crashes, 0)
        fuzz_boots = [b for b in log if b[0] == "boot" and "fuzz0" in b[1]]
        self.assertGreater(len(fuzz_boots), 1)
        self.assertIn("kernel: Kernel panic - not syncing: fake oops at N",
                      [f["signature"] for f in st["failures"]])

    def test_jobs_share_the_corpus_and_the_failures(self):
        out = os.path.join(tempfile.mkdtemp(), "c")
        _, log, _ = campaign(out, budget_s=3.0, jobs=2)
        labels = {b[1].split("-", 1)[1] for b in log if b[0] == "boot"}
        self.assertTrue({"fuzz0", "fuzz1"} <= labels, labels)
        jobs = {name.split("s", 1)[0] for kind, name in
                ((e[0], e[1]) for e in log if e[0] == "run") if name.startswith("j")}
        self.assertEqual(jobs, {"j0", "j1"})
        with open(os.path.join(out, "failures", "index.json")) as f:
            index = json.load(f)["failures"]
        sigs = [f["signature"] for f in index]
        self.assertEqual(len(sigs), len(set(sigs)))
        self.assertEqual(len(os.listdir(os.path.join(out, "failures"))), len(sigs) + 1)

    def test_boots_that_keep_failing_end_the_campaign(self):
        out = os.path.join(tempfile.mkdtemp(), "c")
        with self.assertRaises(SetupError) as e:
            campaign(out, budget_s=30.0, fail_boots=99)
        self.assertIn("3 boots failed in a row", str(e.exception))

    def test_budget(self):
        self.assertEqual(manager.parse_budget("90s"), 90)
        self.assertEqual(manager.parse_budget("30m"), 1800)
        self.assertEqual(manager.parse_budget("4h"), 14400)
        for bad in ("0m", "4d", "m", "-1s"):
            with self.assertRaises(SetupError):
                manager.parse_budget(bad)
        out = os.path.join(tempfile.mkdtemp(), "c")
        t0 = time.monotonic()
        campaign(out, budget_s=1.0, seed=5)
        # The budget, the triage of the failures found in it, and no more.
        self.assertLess(time.monotonic() - t0, 40)

    def test_faults_none_and_delay(self):
        d = tempfile.mkdtemp()
        seen = {}
        for faults in ("none", "delay", "all"):
            out = os.path.join(d, faults)
            _, log, _ = campaign(out, budget_s=4.0, seed=3, faults=faults)
            runs = [e[1] for e in log if e[0] == "rules"]
            self.assertGreater(len(runs), 10, faults)
            seen[faults] = [text for rules in runs for text in rules]
            self.assertEqual(state.load(out)["identity"]["faults"], faults)
        self.assertEqual(seen["none"], [])
        self.assertTrue(seen["delay"])
        for text in seen["delay"]:
            actions = {t.split("=")[0] for t in text.split()[1:]} & {
                "delay", "irq-delay", "error", "drop", "complete", "irq"}
            self.assertLessEqual(actions, {"delay", "irq-delay"}, text)
            self.assertTrue(actions, text)
        self.assertTrue(any("error=" in t for t in seen["all"]), seen["all"])
        # Another --faults is another measurement: no resume across them.
        with self.assertRaises(SetupError) as e:
            campaign(os.path.join(d, "none"), budget_s=1.0, resume=True, faults="delay")
        self.assertIn("--faults none, this run has delay", str(e.exception))
        self.assertEqual(manager.subject(None, "none"), "fuzz-faults-none")

    def test_programs_keep_to_what_the_guests_kernel_offers(self):
        d = tempfile.mkdtemp()
        offers = {"knobs": ["zswap.compressor", "zswap.zpool", "vm.swappiness"],
                  "zswap.compressor": ["lz4"], "zswap.zpool": ["zsmalloc"]}
        seen = {}
        for name, given in (("all", None), ("offered", offers)):
            _, log, _ = campaign(os.path.join(d, name), budget_s=4.0, seed=5, offers=given)
            seen[name] = {kv for e in log if e[0] == "knobs" for kv in e[1]}
        # Without offers the language's every value is drawn (deflate, z3fold...).
        self.assertTrue(seen["all"] - {("zswap.compressor", "lz4"), ("zswap.zpool", "zsmalloc")}
                        - {("vm.swappiness", v) for v in ("0", "60", "100", "200")})
        self.assertTrue(seen["offered"])
        for key, value in seen["offered"]:
            self.assertIn(key, offers["knobs"])
            self.assertIn(value, offers.get(key, [value]))

    def test_until_failure_stops_at_the_first_failure(self):
        out = os.path.join(tempfile.mkdtemp(), "c")
        t0 = time.monotonic()
        status, log, err = campaign(out, budget_s=600.0, until_failure=True)
        self.assertEqual(status, 1, err)
        self.assertLess(time.monotonic() - t0, 120)
        st = state.load(out)
        self.assertEqual(len(st["failures"]), 1)
        self.assertTrue(st["sessions"][-1]["until_failure"])
        self.assertIn("--until-failure: stopping at the first failure", err)

    def test_resume_goes_on_and_refuses_another_build(self):
        out = os.path.join(tempfile.mkdtemp(), "c")
        campaign(out, budget_s=1.0)
        with open(os.path.join(out, "fuzz.json")) as f:
            first = json.load(f)
        with self.assertRaises(SetupError) as e:
            campaign(out, budget_s=1.0)     # the same --out without --resume
        self.assertIn("--resume", str(e.exception))
        for key in ("qemu_build", "guest_build", "kernel_key"):
            with self.assertRaises(SetupError) as e:
                campaign(out, budget_s=1.0, resume=True, ident={**IDENT, key: "other"})
            self.assertIn("other", str(e.exception))
            self.assertIn(IDENT[key], str(e.exception))
        with self.assertRaises(SetupError):
            campaign(out, budget_s=1.0, resume=True, seed=99)
        campaign(out, budget_s=1.0, resume=True)
        with open(os.path.join(out, "fuzz.json")) as f:
            second = json.load(f)
        self.assertEqual(len(second["sessions"]), 2)
        self.assertGreater(second["stats"][-1]["programs"], first["stats"][-1]["programs"])
        for count in ("passed", "failed", "refused", "crashes"):     # counted on, not anew
            self.assertGreaterEqual(second["stats"][-1][count], first["stats"][-1][count])
        self.assertGreaterEqual(second["stats"][-1]["corpus"], first["stats"][-1]["corpus"])
        self.assertGreater(second["elapsed_s"], first["elapsed_s"])

    def test_results_record_and_table(self):
        d = tempfile.mkdtemp()
        results = os.path.join(d, "fuzz", "default.jsonl")
        campaign(os.path.join(d, "c"), budget_s=1.0, results=results)
        recs = records.read_set(results, state.RECORD_FIELDS)
        self.assertEqual(len(recs), 1)
        r = recs[0]
        self.assertEqual((r["subject"], r["verdict"], r["qemu_build"]), ("fuzz", "fail", "q1"))
        self.assertIn("content read -", r["signatures"])
        table = state.render(recs, "results/fuzz/default.jsonl")
        self.assertIn("| fuzz | debian:6.12 | 1 | 1 |", table)
        self.assertIn("No campaign recorded yet", state.render([], "x.jsonl"))
        self.assertEqual(r["growth"][-1][1], r["programs"])
        # A set of another QEMU build is refused before the campaign runs.
        with self.assertRaises(SetupError) as e:
            campaign(os.path.join(d, "c2"), budget_s=1.0, results=results,
                     ident={**IDENT, "qemu_build": "q2"})
        self.assertIn("q2", str(e.exception))
        self.assertFalse(os.path.exists(os.path.join(d, "c2", "fuzz.json")))

    def test_triage_verdicts_and_the_record_of_a_stopped_campaign(self):
        d = tempfile.mkdtemp()
        out, results = os.path.join(d, "c"), os.path.join(d, "fuzz", "s.jsonl")
        campaign(out, budget_s=1.0)                 # no --results: recorded afterwards
        with open(os.path.join(out, "failures", "index.json")) as f:
            failure = json.load(f)["failures"][0]
        rec = manager.record_campaign(out, results)
        self.assertIn(failure["signature"], rec["signatures"])
        self.assertEqual(rec["verdicts"], {})
        self.assertIn("(not triaged yet)", state.render([rec], "s.jsonl"))
        for which, verdict, why, err in (("nope", "kernel-bug", "x", "no failure 'nope'"),
                                         (failure["dir"], "flaky", "x", "one of kernel-bug"),
                                         (failure["dir"], "kernel-bug", " ", "say why")):
            with self.assertRaises(SetupError) as e:
                manager.triage_failure(out, which, verdict, why)
            self.assertIn(err, str(e.exception))
        manager.triage_failure(out, failure["dir"], "faultline-defect", "fixed in abc")
        rec = manager.record_campaign(out, results)
        self.assertEqual(rec["verdicts"], {failure["signature"]: "faultline-defect: fixed in abc"})
        [back] = records.read_set(results, state.RECORD_FIELDS)
        self.assertEqual(back["verdicts"], rec["verdicts"])
        self.assertIn("(faultline-defect: fixed in abc)", state.render([back], "s.jsonl"))
        # The verdict outlives a resumed session: the book keeps it.
        campaign(out, budget_s=1.0, resume=True, results=results)
        [back] = records.read_set(results, state.RECORD_FIELDS)
        self.assertEqual(back["verdicts"], rec["verdicts"])
        # A running campaign writes its book last: no verdict, record, merge
        # or second run meanwhile.
        with state.running(out, "fuzz"):
            for call, what in ((lambda: manager.triage_failure(out, failure["dir"], "kernel-bug",
                                                               "x"), "fuzz triage"),
                               (lambda: manager.record_campaign(out, results), "fuzz record"),
                               (lambda: campaign(out, budget_s=1.0, resume=True),
                                "fuzz --resume")):
                with self.assertRaises(SetupError) as e:
                    call()
                self.assertEqual(str(e.exception), f"{what}: {out}: its campaign is running "
                                 f"(pid {os.getpid()}); wait for it or stop it (Ctrl-C) first")
        manager.triage_failure(out, failure["dir"], "kernel-bug", "after the stop")

    def test_totals_add_up_campaigns_of_one_kind_and_kernel(self):
        def rec(subject, kernel, seconds, programs, sigs, verdicts):
            return {"subject": subject, "kernel_release": kernel, "kernel_key": "k",
                    "elapsed_s": seconds, "programs": programs, "signatures": sigs,
                    "verdicts": verdicts}
        recs = [rec("fuzz-faults-none", "6.12", 3600, 1400, ["a"], {"a": "kernel-bug: x"}),
                rec("fuzz-faults-none", "6.12", 1800, 700, ["b"], {}),
                rec("fuzz-faults-none", "7.2", 600, 200, [], {})]
        text = state.totals_table(recs)
        self.assertIn("| fuzz-faults-none | 6.12 | 2 | 1.5 h | 2100 | 2 | 1 |", text)
        self.assertIn("| fuzz-faults-none | 7.2 | 1 | ", text)
        self.assertEqual(state.totals_table(recs[1:]), "")     # nothing to add up

    def test_growth_is_read_off_at_the_marks(self):
        stats = [{"t": t, "programs": t // 10, "edges": 1000 + t, "features": 7}
                 for t in range(30, 1000, 30)]
        g = state.growth(stats)
        # 1, 5 and 15 min reached, 30 min not: the end (990 s) after them.
        self.assertEqual(g, [[60, 6, 1060, 7], [300, 30, 1300, 7], [900, 90, 1900, 7],
                             [990, 99, 1990, 7]])
        self.assertEqual(state.growth([]), [])
        rec = {"subject": "fuzz", "kernel_key": "k", "seed": 1, "growth": g}
        table = state.growth_table([rec])
        self.assertIn("| 1 min | 5 min | 15 min | end | curve |", table)
        self.assertIn("| 1060 | 1300 | 1900 | 1990 at 16 min | ", table)
        # Without kcov the edges are 0: the features are shown, marked.
        flat = [[60, 6, 0, 40], [120, 12, 0, 80]]
        self.assertIn("| 40 f | 80 f at 2 min |", state.growth_table(
            [{**rec, "growth": flat}]))


if __name__ == "__main__":
    sys.exit(unittest.main())
