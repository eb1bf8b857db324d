"""Unit tests of `faultline bench`'s arithmetic: trace pairing, medians,
ratios and their confidence intervals, /proc/PID/stat parsing, engine-bench
parsing, the JSON a later run compares with, and its scenarios (checked by
the real scenario loader and the engine's rule parser)."""

import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline import rules, scenario
from faultline.bench import bench, cpu, figures, fresh, report, trace
from faultline.bench import results as bench_results
from faultline.errors import SetupError
from faultline.judge import stats
from faultline.results import records

FAULTLINE = os.path.join(TOP, "scripts", "faultline")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from docs_page import render_set  # noqa: E402


def nvme_io(t_us, lba, dur_us, sqid=1, vector=1):
    """Trace lines of one QD1 NVMe write starting at t_us (since 1000 s)."""
    def at(us):
        return f"4242@{1000 + us // 1000000}.{us % 1000000:06d}"
    return [f"{at(t_us)}:pci_nvme_mmio_doorbell_sq sqid {sqid} new_tail 3",
            f"{at(t_us + 2)}:pci_nvme_write cid 7 opname 'NVME_NVM_CMD_WRITE' nsid 1 nlb 8 "
            f"count 4096 lba {lba:#x}",
            f"{at(t_us + dur_us)}:pci_nvme_irq_msix raising MSI-X IRQ vector {vector}"]


class ArithmeticTest(unittest.TestCase):
    def test_median(self):
        self.assertEqual(stats.median([3, 1, 2]), 2.0)
        self.assertEqual(stats.median([4, 1, 3, 2]), 2.5)
        with self.assertRaises(ValueError):
            stats.median([])

    def test_paired_ratio_ci(self):
        base = [10.0, 20.0, 10.0, 20.0, 10.0]
        other = [10.1, 20.4, 10.3, 20.0, 10.2]
        r, lo, hi = stats.paired_ratio(base, other)
        rs = [1.01, 1.02, 1.03, 1.0, 1.02]
        mean = sum(rs) / 5
        sd = math.sqrt(sum((x - mean) ** 2 for x in rs) / 4)
        half = 2.7764451051977987 * sd / math.sqrt(5)    # t(0.975, 4)
        self.assertAlmostEqual(r, mean, places=12)
        self.assertAlmostEqual(lo, mean - half, places=9)
        self.assertAlmostEqual(hi, mean + half, places=9)

    def test_paired_ratio_single_round_has_no_ci(self):
        self.assertEqual(stats.paired_ratio([2.0], [3.0]), (1.5, None, None))
        with self.assertRaises(ValueError):
            stats.paired_ratio([1.0, 2.0], [1.0])

    def test_ci_verdict(self):
        self.assertTrue(stats.ci_verdict(1.0, 0.99, 1.005, 1.01))
        self.assertFalse(stats.ci_verdict(1.05, 1.02, 1.08, 1.01))
        self.assertIsNone(stats.ci_verdict(1.0, 0.95, 1.05, 1.01))
        self.assertFalse(stats.ci_verdict(1.02, None, None, 1.01))

    def test_proc_stat_with_hostile_comm(self):
        # comm may hold spaces and ')': fields count from the last ')'.
        fields = ["S"] + [str(i) for i in range(4, 14)] + ["250", "150"] + ["0"] * 30
        text = "1234 (qemu) x (y)) " + " ".join(fields)
        self.assertAlmostEqual(cpu.proc_cpu_seconds(text, 100), 4.0)

    def test_engine_bench_parse(self):
        text = ("baseline (empty call via volatile fn ptr): 1.50 ns\n"
                "non-matching lba ranges   1 rules:   4.00 ns/decision  (2.7x baseline, +2.50 ns)\n"
                "matching, prob=0         64 rules: 223.40 ns/decision  (148.9x baseline)\n"
                "sq mismatch (SQ 1 I/O) * 64 rules: 299.07 ns/decision  (99.0x baseline)\n")
        rows = figures.engine_rows(text)
        self.assertEqual([(r.name, r.value, r.ok) for r in rows],
                         [("non-matching lba ranges, 1 rules", 4.0, True),
                          ("matching, prob=0, 64 rules", 223.4, False),
                          ("sq mismatch (SQ 1 I/O) *, 64 rules", 299.07, False)])
        self.assertAlmostEqual(rows[1].ratio, 223.4 / 1.5)
        with self.assertRaises(SetupError):
            trace.parse_engine_bench("no numbers here\n")


class TraceTest(unittest.TestCase):
    def test_nvme_pairs_io_doorbell_write_irq(self):
        lines = ["garbage", "4242@1000.000000:pci_nvme_mmio_doorbell_sq sqid 0 new_tail 1",
                 "4242@1000.000010:pci_nvme_irq_msix raising MSI-X IRQ vector 0"]
        lines += nvme_io(100, 0x10, 37)
        # The CQ doorbell and an admin interrupt in between change nothing.
        lines += ["4242@1000.000300:pci_nvme_mmio_doorbell_cq cqid 1 new_head 3"]
        lines += nvme_io(1000, 131072 + 8, 1_000_123)
        got = trace.device_latencies("\n".join(lines), "nvme")
        self.assertEqual([lba for lba, _ in got], [0x10, 131080])
        self.assertAlmostEqual(got[0][1], 37e-6, places=12)
        self.assertAlmostEqual(got[1][1], 1.000123, places=12)
        self.assertEqual([trace.segment_of(lba) for lba, _ in got], [0, 1])

    def test_nvme_delayed_write_timed_from_its_stamp(self):
        # Doorbell line at 0, stamp 14 us later: held at 80 us for a 10 ms
        # delay, timer in 9_884_000 ns armed 50_000 ns early, so the stamp
        # is 80 + 9884 + 50 - 10000 = 14 us.  MSI-X at 10_021 us.
        lines = nvme_io(0, 0x20, 10_021)
        lines.insert(2, "4242@1000.000080:pci_nvme_fault_delay cid 7 sqid 1 completion held: "
                        "delay 10000000ns from submission, timer in 9884000ns "
                        "(50000ns early for timer lateness)")
        # A timer armed for now (wait 0): its deadline is unknown, the
        # doorbell stays the start.
        late = nvme_io(20_000, 0x28, 130)
        late.insert(2, "4242@1000.020120:pci_nvme_fault_delay cid 8 sqid 1 completion held: "
                       "delay 100000ns from submission, timer in 0ns "
                       "(25000ns early for timer lateness)")
        gaps = []
        got = trace.device_latencies("\n".join(lines + late), "nvme", gaps)
        self.assertEqual([lba for lba, _ in got], [0x20, 0x28])
        self.assertAlmostEqual(got[0][1], 10_007e-6, places=9)
        self.assertAlmostEqual(got[1][1], 130e-6, places=9)
        self.assertEqual(len(gaps), 1)
        self.assertAlmostEqual(gaps[0][1], 14e-6, places=9)
        sect = (trace.SEGMENT_MIB << 20) // 512
        dev = [(5, 50e-6), (sect, 104e-6), (2 * sect, 1004e-6), (3 * sect, 10004e-6)]
        guest = {0: [100], 100: [150], 1000: [1050], 10000: [10050]}
        rows = {r.key: r for r in figures.latency_rows("nvme", dev, guest, guest,
                                                     [(sect, 14e-6)])}
        self.assertIn("14.0 us after the doorbell's trace line",
                      rows["latency/nvme device delay=100us"].note)
        self.assertEqual(rows["latency/nvme device delay=1000us"].note, "error +4.0 us")


    def test_syncblk_pairs_by_slot_writes_only(self):
        lines = ["1@5.000000:syncblk_submit slot 0 op 1 lba 8 n 8 ctx 1",
                 "1@5.000005:syncblk_submit slot 1 op 0 lba 16 n 8 ctx 1",   # a read
                 "1@5.000007:syncblk_submit slot 2 op 1 lba 262144 n 8 ctx 1",
                 "1@5.000050:syncblk_complete slot 1 status 2 error 0 ctx 1",
                 "1@5.000100:syncblk_complete slot 2 status 2 error 0 ctx 1",
                 "1@5.000200:syncblk_complete slot 0 status 2 error 0 ctx 1"]
        got = trace.device_latencies("\n".join(lines), "syncblk")
        self.assertEqual([lba for lba, _ in got], [262144, 8])
        self.assertAlmostEqual(got[0][1], 93e-6, places=12)
        self.assertAlmostEqual(got[1][1], 200e-6, places=12)

    def test_guest_share_is_interrupt_to_next_submission(self):
        # NVMe: write 1's MSI-X at 37 us, write 2's doorbell at 100 us.
        lines = nvme_io(0, 0x10, 37) + nvme_io(100, 0x18, 40) + nvme_io(300, 0x20, 40)
        shares = []
        trace.device_latencies("\n".join(lines), "nvme", shares=shares)
        self.assertEqual([lba for lba, _ in shares], [0x10, 0x18])
        self.assertAlmostEqual(shares[0][1], 63e-6, places=9)
        self.assertAlmostEqual(shares[1][1], 160e-6, places=9)
        # syncblk: a write's completion to the next submission, read or write.
        lines = ["1@5.000000:syncblk_submit slot 0 op 1 lba 8 n 8 ctx 1",
                 "1@5.000090:syncblk_complete slot 0 status 2 error 0 ctx 1",
                 "1@5.000120:syncblk_submit slot 0 op 0 lba 16 n 8 ctx 1",
                 "1@5.000150:syncblk_complete slot 0 status 2 error 0 ctx 1",
                 "1@5.000170:syncblk_submit slot 0 op 1 lba 24 n 8 ctx 1"]
        shares = []
        trace.device_latencies("\n".join(lines), "syncblk", shares=shares)
        self.assertEqual(len(shares), 1)                    # after the write only
        self.assertAlmostEqual(shares[0][1], 30e-6, places=9)
        sect = (trace.SEGMENT_MIB << 20) // 512
        self.assertEqual(figures.share_note(trace.per_segment([(5, 60e-6), (sect, 80e-6)]), 1),
                         "; interrupt to the guest's next submission 80 us, 60 us at baseline")
        self.assertEqual(figures.share_note(trace.per_segment([(sect, 80e-6)]), 1), "")


class RowsTest(unittest.TestCase):
    def test_latency_rows(self):
        sect = (trace.SEGMENT_MIB << 20) // 512
        dev = [(5, 40e-6), (6, 50e-6), (7, 60e-6),            # backend: median 50 us
               (sect, 110e-6), (2 * sect, 1010e-6), (3 * sect, 10030e-6)]
        guest = {0: [80], 100: [150], 1000: [1100], 10000: [10700]}
        halt = {0: [85], 100: [175], 1000: [1135], 10000: [10705]}
        rows = {r.key: r for r in figures.latency_rows("nvme", dev, guest, halt)}
        self.assertEqual(rows["latency/nvme backend (no rule)"].value, 50.0)
        d100 = rows["latency/nvme device delay=100us"]
        self.assertEqual((d100.baseline, d100.value, d100.ok), (100.0, 110.0, True))
        self.assertFalse(rows["latency/nvme device delay=10000us"].ok)     # +30 us
        g100 = rows["latency/nvme guest delay=100us"]
        # guest baseline 80 - backend 50 + max(100, 50) = 130; 150 is +20 % of DUR.
        self.assertEqual((g100.baseline, g100.ok), (130.0, False))
        g1m = rows["latency/nvme guest delay=1000us"]
        # 1100 - 1030 = 70 us is 7 % of DUR: above the 5 % target.
        self.assertEqual((g1m.baseline, g1m.ok), (1030.0, False))
        self.assertAlmostEqual(g1m.ratio, 1100 / 1030)
        # wake-up: excess with HLT idle (1135-85) minus with idle=poll (1100-80).
        self.assertEqual(rows["wakeup/nvme delay=1000us"].value, 30.0)
        self.assertEqual(rows["wakeup/nvme delay=100us"].value, 20.0)

    def test_idle_cost_taken_out_only_when_the_reference_matched(self):
        sect = (trace.SEGMENT_MIB << 20) // 512
        dev = [(5, 50e-6), (sect, 110e-6), (2 * sect, 1010e-6), (3 * sect, 10030e-6)]
        guest = {0: [80], 100: [150], 1000: [1100], 10000: [10700]}
        # The guest's time around the device's: 200 at 1 ms against 100 unheld.
        refs = {100: bench.Reference(0, 160.0, 260.0, 140.0, 240.0, 10),     # 160 vs 110
                1000: bench.Reference(900_000, 1020.0, 1220.0, 140.0, 240.0, 10),
                10000: bench.Reference(9_900_000, 10040.0, 10740.0, 140.0, 240.0, 10)}
        self.assertEqual(refs[1000].idle_us, 100.0)
        rows = {r.key: r for r in figures.latency_rows("nvme", dev, guest, guest, refs=refs)}
        g1m = rows["latency/nvme guest delay=1000us"]
        # 80 - 50 + 1000 + the idle cost 100 = 1130: 1100 is -3 %.
        self.assertEqual((g1m.baseline, g1m.ok), (1130.0, True))
        self.assertIn("idle cost (+100 us) taken out, +7.0% of DUR with it", g1m.note)
        self.assertEqual(rows["idle/nvme delay=10000us"].value, 600.0)
        g100 = rows["latency/nvme guest delay=100us"]
        # 160 us is not within 10 % of the injected 110: the raw figure stands.
        self.assertEqual(g100.baseline, 130.0)
        self.assertIn("not taken out", g100.note)

    def test_cooling_rows(self):
        rows = figures.cooling_rows("idle_us 0 median_ns 80000\nidle_us 100 median_ns 88000\n"
                                  "idle_us 1000 median_ns 200000\n"
                                  "idle_us 10000 median_ns 480000\n")
        self.assertEqual([(r.value, r.baseline) for r in rows],
                         [(88.0, 80.0), (200.0, 80.0), (480.0, 80.0)])
        self.assertAlmostEqual(rows[2].ratio, 6.0)
        with self.assertRaises(SetupError):
            figures.cooling_rows("idle_us 100 median_ns 88000\n")

    def test_segment_medians_over_interleaved_rounds(self):
        class FakeBoot:
            def diag_after(self, mark, name):
                dur, rnd = mark[3:].split("-")
                return {"0": 100, "100": 200, "1000": 1100, "10000": 10100}[dur] + int(rnd)
        self.assertEqual(bench.segment_p50(FakeBoot(), 3),
                         {0: [100, 101, 102], 100: [200, 201, 202], 1000: [1100, 1101, 1102],
                          10000: [10100, 10101, 10102]})
        sizes = figures.Sizes.for_mode(False)
        script = bench.latency_script("nvme", sizes)
        marks = [w.split("'")[0] for w in script.split("bench-mark ")[1:]]
        self.assertEqual(marks[:5], ["seg0-0", "seg100-0", "seg1000-0", "seg10000-0", "seg0-1"])
        self.assertEqual(len(marks), 4 * sizes.latency_rounds)

    def test_guest_error_per_round_with_interval(self):
        sect = (trace.SEGMENT_MIB << 20) // 512
        dev = [(5, 50e-6), (sect, 100e-6), (2 * sect, 1000e-6), (3 * sect, 10000e-6)]
        # Baselines drift by 100 us from round to round; each delayed round
        # drifts with its baseline: per round the errors are 0, +2, -2, 0 us.
        base = [80, 180, 280, 120]
        guest = {0: base, 100: [b + 50 + d for b, d in zip(base, (0, 2, -2, 0))],
                 1000: [b + 950 + d for b, d in zip(base, (30, 90, 60, 80))],
                 10000: [b + 9950 + d for b, d in zip(base, (-400, 400, -400, 400))]}
        rows = {r.key: r for r in figures.latency_rows("nvme", dev, guest, guest)}
        g100 = rows["latency/nvme guest delay=100us"]
        self.assertTrue(g100.ok)                       # CI about +-2.6 us, tolerance 10
        self.assertIn("error +0.0% of DUR (95% CI", g100.note)
        self.assertFalse(rows["latency/nvme guest delay=1000us"].ok)   # all of it above 50
        self.assertIsNone(rows["latency/nvme guest delay=10000us"].ok)  # straddles +-500
        self.assertEqual(stats.tolerance_verdict(3.0, None, None, 5.0), True)

    def test_latency_backend_longer_than_delay(self):
        sect = (trace.SEGMENT_MIB << 20) // 512
        dev = [(0, 300e-6), (sect, 305e-6), (2 * sect, 1000e-6), (3 * sect, 10000e-6)]
        guest = {0: [400], 100: [405], 1000: [1100], 10000: [10100]}
        rows = {r.key: r for r in figures.latency_rows("syncblk", dev, guest, guest)}
        r = rows["latency/syncblk-irq device delay=100us"]
        self.assertEqual((r.baseline, r.ok), (300.0, True))    # max(DUR, backend)
        with self.assertRaises(SetupError):
            figures.latency_rows("nvme", [(sect, 1e-4)], guest, guest)  # no baseline segment

    def test_overhead_rows(self):
        bases = {"stock": None, "inj": "stock"}
        samples = {"stock": [{"cpu_s": 1.0, "ios": 10000, "boot_s": 10.0},
                             {"cpu_s": 1.2, "ios": 10000, "boot_s": 12.0}],
                   "inj": [{"cpu_s": 1.01, "ios": 10000, "boot_s": 10.5},
                           {"cpu_s": 1.224, "ios": 10000, "boot_s": 12.0}]}
        rows = {r.key: r for r in figures.overhead_rows(samples, bases)}
        self.assertAlmostEqual(rows["overhead/stock, host CPU per I/O"].value, 110.0)
        o = rows["overhead/inj, host CPU per I/O"]
        self.assertAlmostEqual(o.ratio, (1.01 + 1.02) / 2)
        self.assertAlmostEqual(o.value, 111.7)                # us of CPU per I/O
        self.assertLess(o.ci_low, o.ratio)
        self.assertGreater(o.ci_high, o.ratio)
        self.assertIsNone(o.ok)        # the CI straddles the 1.01 target
        self.assertIn("straddles", o.note)
        b = rows["boot/inj, first KTAP line"]
        self.assertAlmostEqual(b.ratio, (1.05 + 1.0) / 2)

    def test_overhead_sample_cancels_fixed_costs(self):
        # 0.3 s of fixed cost (fio start-up, idle) in both runs; 40 us per I/O.
        marks = {"a0": 10.0, "a1": 10.0 + 0.3 + 2500 * 40e-6,
                 "b0": 20.0, "b1": 20.0 + 0.3 + 10000 * 40e-6}
        s = figures.overhead_sample(marks, 2500, 10000)
        self.assertEqual(s["ios"], 7500)
        self.assertAlmostEqual(s["cpu_s"] / s["ios"], 40e-6)

    def test_overhead_sample_by_thread_role(self):
        # vCPU (tid 1) 30 us and main loop (tid 2) 8 us per I/O; in the large
        # run a worker (tid 3) took 1.5 us per I/O, and one that was there at
        # b0 (tid 4) exited before b1 with 0.5 us per I/O.
        marks = {"a0": 10.0, "a1": 10.0 + 2500 * 38e-6,
                 "b0": 20.0, "b1": 20.0 + 10000 * 40e-6}
        vcpu, main = "vCPU", "main loop"
        threads = {"a0": {1: (vcpu, 5.0), 2: (main, 1.0)},
                   "a1": {1: (vcpu, 5.0 + 2500 * 30e-6), 2: (main, 1.0 + 2500 * 8e-6)},
                   "b0": {1: (vcpu, 9.0), 2: (main, 2.0), 4: ("thread pool", 0.7)},
                   "b1": {1: (vcpu, 9.0 + 10000 * 30e-6), 2: (main, 2.0 + 10000 * 8e-6),
                          3: ("thread pool", 10000 * 1.5e-6)}}
        s = figures.overhead_sample(marks, 2500, 10000, threads)
        t = {k: v / s["ios"] * 1e6 for k, v in s["threads_s"].items()}
        self.assertAlmostEqual(t["vCPU"], 30.0)
        self.assertAlmostEqual(t["main loop"], 8.0)
        self.assertAlmostEqual(t["thread pool"], 10000 * 1.5 / 7500)
        self.assertAlmostEqual(sum(s["threads_s"].values()), s["cpu_s"])
        self.assertAlmostEqual(t[cpu.EXITED], 40.0 * 10000 / 7500 - 38.0 * 2500 / 7500
                               - 30.0 - 8.0 - 2.0)
        # Without all four marks there is no breakdown.
        self.assertNotIn("threads_s", figures.overhead_sample(marks, 2500, 10000,
                                                            {"a0": {}, "b1": {}}))
        note = figures.thread_note([s, s])
        self.assertTrue(note.startswith("vCPU 30.0, main loop 8.0, thread pool 2.0, "
                                        "exited threads "), note)
        self.assertTrue(note.endswith(" us per I/O"), note)
        # A role that took no time in any sample (call_rcu, say) is left out.
        idle = dict(s, threads_s=dict(s["threads_s"], other=0.0))
        self.assertNotIn("other", figures.thread_note([idle, idle]))
        self.assertIn("vCPU 30.0", figures.thread_note([idle, idle]))
        rows = {r.key: r for r in figures.overhead_rows(
            {"stock": [dict(s, boot_s=1.0)], "inj": [dict(s, boot_s=1.0)]},
            {"stock": None, "inj": "stock"})}
        self.assertIn("vCPU 30.0", rows["overhead/stock, host CPU per I/O"].note)
        self.assertIn("vCPU 30.0", rows["overhead/inj, host CPU per I/O"].note)
        self.assertNotIn("vCPU", rows["boot/inj, first KTAP line"].note)

    def test_thread_roles_from_proc(self):
        self.assertEqual(cpu.thread_role("CPU 1/TCG"), "vCPU")
        self.assertEqual(cpu.thread_role("worker"), "thread pool")
        self.assertEqual(cpu.thread_role("qemu-system-x86"), "main loop")
        self.assertEqual(cpu.thread_role("call_rcu"), "other")
        sum(i * i for i in range(300000))       # some CPU time of our own
        clk = os.sysconf("SC_CLK_TCK")
        threads = cpu.proc_thread_cpu_seconds(os.getpid(), clk)
        with open(f"/proc/{os.getpid()}/stat") as f:
            total = cpu.proc_cpu_seconds(f.read(), clk)
        self.assertEqual(threads[os.getpid()][0], "other")     # python3: no QEMU role
        self.assertGreater(threads[os.getpid()][1], 0)
        self.assertLessEqual(sum(x[1] for x in threads.values()), total + 2.0 / clk)
        self.assertEqual(cpu.proc_thread_cpu_seconds(2 ** 22 + 1, clk), {})

    def test_deterministic_rows(self):
        (r,) = figures.deterministic_rows([50.0, 60.0], [55.0, 60.0], 0.010, 3000)
        self.assertAlmostEqual(r.ratio, 1.05)
        self.assertIn("30.0 s virtual", r.note)


class JsonTest(unittest.TestCase):
    def test_round_trip_and_compare(self):
        rows = [report.Row("engine", "x, 64 rules", 20.0, 2.0, "ns", 10.0),
                report.Row("boot", "stock", 10.0, 10.0, "s", 1.0)]
        doc = report.to_json(rows, {"date": "d", "git": "g"})
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(doc, f)
        try:
            old = report.load_json(f.name)
        finally:
            os.unlink(f.name)
        rows[0].value, rows[0].ratio = 10.0, 5.0
        text = report.compare_lines(old, rows)
        self.assertIn("-50.0%", text)
        self.assertIn("10.000 -> 5.000", text)
        self.assertIn("+0.0%", text)

    def test_foreign_json_is_refused(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write('{"rows": []}')
        try:
            with self.assertRaises(SetupError):
                report.load_json(f.name)
            res = subprocess.run([FAULTLINE, "bench", "--compare", f.name],
                                 capture_output=True, text=True, timeout=60)
        finally:
            os.unlink(f.name)
        self.assertEqual(res.returncode, 2)
        self.assertEqual(len(res.stderr.strip().splitlines()), 1, res.stderr)
        self.assertIn("not a faultline bench JSON", res.stderr)

    def test_bad_rounds_are_one_line(self):
        for arg, want in (("1", "--rounds 1: between 2"), ("101", "--rounds 101: between 2"),
                          ("x", "invalid int value: 'x'")):
            res = subprocess.run([FAULTLINE, "bench", "--only", "overhead", "--rounds", arg],
                                 capture_output=True, text=True, timeout=60)
            self.assertEqual(res.returncode, 2, res.stderr)
            self.assertEqual(len(res.stderr.strip().splitlines()), 1, res.stderr)
            self.assertIn(want, res.stderr)

    def test_unknown_group_is_one_line(self):
        res = subprocess.run([FAULTLINE, "bench", "--only", "engine,bogus"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(res.returncode, 2)
        self.assertEqual(res.stderr.strip().splitlines(),
                         ["faultline: error: --only bogus: groups are "
                          "engine, latency, overhead, deterministic, restore, programs, fresh"])

    def test_fresh_phases_from_the_launchers_lines(self):
        text = ("faultline: QEMU built in 645s: /tmp/c/qemu/7642bef5a6b6757f\n"
                "faultline: build: setup for qemu 8.2s, qemu 645.6s, setup + guest 83.7s "
                "(side by side), wall 653.8s\n  [  16.5s] done\n"
                "faultline: phases: build 653.8s, run 16.7s, total 670.5s\n")
        self.assertEqual(fresh.parse_phases(text),
                         {"build": 653.8, "run": 16.7, "total": 670.5, "setup": 8.2,
                          "qemu": 645.6, "guest": 83.7})
        warm = ("faultline: build: qemu 0.1s, guest 0.2s (side by side), wall 0.3s\n"
                "faultline: phases: build 0.3s, run 16.1s, total 16.4s\n")
        self.assertEqual(fresh.parse_phases(warm)["qemu"], 0.1)
        with self.assertRaisesRegex(SetupError, "no `faultline: phases:` line"):
            fresh.parse_phases("faultline: error: boom\n")

    def test_fresh_row_misses_when_one_round_is_over_the_target(self):
        def fake_round(walls):
            it = iter(walls)

            def one_round(n, out, log):
                w = next(it)
                return ("abc1234", ({"build": w - 16, "run": 16.0, "total": w, "qemu": w - 30,
                                     "guest": 50.0}, w), ({"run": 16.0, "total": 17.0}, 17.0))
            return one_round
        orig = fresh.one_round
        try:
            fresh.one_round = fake_round([280.0, 290.0, 299.0])
            (row,), samples = fresh.bench_rows(3, "/nonexistent", lambda m: None)
            self.assertTrue(row.ok)
            self.assertAlmostEqual(row.value, 289.667, places=2)
            self.assertEqual((row.baseline, row.n, row.unit), (17.0, 3, "s"))
            self.assertIn("commit abc1234; fresh runs: 280 s (QEMU 250 s", row.note)
            fresh.one_round = fake_round([280.0, 310.0, 250.0])
            (row,), _ = fresh.bench_rows(3, "/nonexistent", lambda m: None)
            self.assertIs(row.ok, False)
        finally:
            fresh.one_round = orig


class ResultsTest(unittest.TestCase):
    """--results: each row a record of a results set, its table in docs/."""
    IDENT = {"qemu_build": "q1", "guest_build": "g1", "kernel_key": "debian:6.12.118+deb12-amd64"}
    META = {"date": "2026-12-07T19:00:00Z", "git": "abc1234", "quick": False, "seconds": 640.2}

    def rows(self, programs_ratio=14.2, ok=True):
        return [report.Row("engine", "matching, prob=0, 64 rules", 22.1, 1.7, "ns", 13.0,
                           target="<= 30 ns", ok=True),
                report.Row("programs", "per hour", 900.0, 63.4, "/h", programs_ratio,
                           ci_low=8.1, ci_high=20.3, n=3, target=">= 10x", ok=ok,
                           note="undecided on this host" if ok is None else "")]

    def test_rows_become_records_and_a_rerun_replaces_its_row(self):
        d = tempfile.mkdtemp()
        path = os.path.join(d, "default.jsonl")
        bench_results.write(path, self.rows(), self.IDENT, self.META)
        rerun = report.Row("programs", "per hour", 700.0, 70.0, "/h", 10.0, target=">= 10x",
                           ok=False)
        bench_results.write(path, [rerun], self.IDENT, dict(self.META, git="def5678"))
        recs = records.read_set(path, bench_results.RECORD_FIELDS)
        self.assertEqual([r["subject"] for r in recs],
                         ["engine/matching, prob=0, 64 rules", "programs/per hour"])
        eng, prog = recs
        self.assertEqual((eng["verdict"], eng["time_to_failure_s"], eng["faultline"]),
                         ("pass", None, "abc1234"))
        self.assertEqual((prog["verdict"], prog["value"], prog["faultline"], prog["signature"]),
                         ("fail", 700.0, "def5678", "missed >= 10x"))
        self.assertEqual(prog["date"], "2026-12-07")

    def test_rows_of_another_build_are_refused_before_anything_runs(self):
        d = tempfile.mkdtemp()
        path = os.path.join(d, "default.jsonl")
        bench_results.write(path, self.rows(), self.IDENT, self.META)
        with self.assertRaisesRegex(SetupError, "q1.*q2|q2.*q1"):
            bench_results.check(path, dict(self.IDENT, qemu_build="q2"))
        bench_results.check(path, self.IDENT)
        with self.assertRaisesRegex(SetupError, "no directory"):
            bench_results.check_path(os.path.join(d, "nowhere", "x.jsonl"))

    def test_docs_table_from_the_set(self):
        d = tempfile.mkdtemp()
        path = os.path.join(d, "set.jsonl")
        bench_results.write(path, self.rows(ok=None), self.IDENT, self.META)
        status, err, text = render_set(os.path.join(d, "repo"), "bench", path)
        self.assertEqual(status, 0, err)
        self.assertIn("| `engine/matching, prob=0, 64 rules` | 22.1 ns | 1.7 ns | 13.00 | 1 "
                      "| <= 30 ns | ok |", text)
        self.assertIn("| `programs/per hour` | 900.0 /h | 63.4 /h | 14.20 (8.10..20.30) | 3 "
                      "| >= 10x | ? (undecided) |", text)
        self.assertIn("- `programs/per hour`: undecided on this host", text)
        self.assertIn("QEMU build q1", text)
        self.assertTrue(text.endswith("<!-- end generated -->\nafter\n"), text)

    def test_bad_results_path_is_one_line_before_any_build(self):
        res = subprocess.run([FAULTLINE, "bench", "--only", "engine", "--results",
                              "/nonexistent-dir/x.jsonl"], capture_output=True, text=True,
                             timeout=60)
        self.assertEqual(res.returncode, 2, res.stderr)
        self.assertEqual(res.stderr.strip().splitlines(),
                         ["faultline: error: --results /nonexistent-dir/x.jsonl: no directory "
                          "/nonexistent-dir"])


class ScenarioTest(unittest.TestCase):
    """The generated scenarios load and their rules pass the engine's parser."""

    def load(self, text):
        d = tempfile.mkdtemp()
        path = os.path.join(d, "gen.toml")
        with open(path, "w") as f:
            f.write(text)
        sc = scenario.load(path)
        rules.check_scenarios([sc])
        return sc

    def test_latency_scenarios(self):
        sizes = figures.Sizes.for_mode(True)
        for kind in ("nvme", "syncblk"):
            sc = self.load(bench.scenario_text("t", kind, ["fio"], bench.latency_faults(),
                                               bench.latency_script(kind, sizes),
                                               completion="irq"))
            self.assertEqual(sc.device.kind, kind)
        sect = (trace.SEGMENT_MIB << 20) // 512
        # Segment i of the script is the rule's LBA range i.
        self.assertIn(f"d1000: write lba={2 * sect}-{3 * sect - 1} delay=1000us",
                      bench.latency_faults())
        self.assertIn(f"--offset={2 * trace.SEGMENT_MIB}M", bench.latency_script("nvme", sizes))

    def test_overhead_scenarios(self):
        variants = bench.overhead_variants()
        names = {v[0] for v in variants}
        sizes = figures.Sizes.for_mode(True)
        for name, kind, faults, base in variants:
            self.assertTrue(base is None or base in names, base)
            sc = self.load(bench.scenario_text("t", kind, ["fio"], faults,
                                               bench.overhead_script("/dev/vda", sizes)))
            self.assertEqual(sc.device.kind, kind)
            self.assertEqual(bool(sc.faults.rules.strip()), base is not None)

    def test_never_rules_never_match_the_disk(self):
        text = bench.never_rules(64)
        self.assertEqual(text.count("never"), 64)
        sc = self.load(bench.scenario_text("t", "nvme", [], text, "true"))
        first = min(int(ln.split("lba=")[1].split("-")[0])
                    for ln in sc.faults.rules.splitlines() if "lba=" in ln)
        self.assertGreater(first * 512, 1 << 30)    # beyond the 1 GiB disk


if __name__ == "__main__":
    unittest.main()
