"""Unit tests of `faultline prog run` and `prog show` on the host
(python/faultline/execute/): the channel protocol against a fake guest on a
real unix socket (docs/programs.md, "The executor and its channel"), its
timeouts, a dead guest, bad lines from the guest, refused programs, the
mapping of the guest's line numbers to the file's, the device binding and
the exit codes."""

import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from contextlib import redirect_stdout

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.errors import EXIT_CRASH, EXIT_FAIL, EXIT_PASS, EXIT_SETUP  # noqa: E402
from faultline.execute import boot, devices, results  # noqa: E402
from faultline.execute.channel import (BadLine, Channel, GuestGone, GuestSilent,  # noqa: E402
                                       MAX_LINE)
from faultline.execute.session import Budgets, Prepared, Session  # noqa: E402
from faultline.prog.lang import parse  # noqa: E402
from faultline.vm.qmp import QmpError  # noqa: E402

# A program with comments and blank lines: the guest's line N is the Nth
# statement, the file's line is where it was written.
PROGRAM = """# a comment first
program v1
swap s0 nvme size=32M

rule s0 rfail: read every=3 count=2 error=eio
swap s1 syncblk completion=irq size=16M
anon a 8M
# write then read back
write a 0 8M v=1
madvise a 0 8M pageout
read a 0 8M
"""


class FakeQmp:
    """The machine's QMP as the session calls it: a log of the commands,
    rule hits for the rules it holds, QmpError once dead."""

    def __init__(self):
        self.log = []
        self.rules = {}
        self.dead = False

    def __call__(self, command, **args):
        if self.dead:
            raise QmpError("QEMU is not running")
        self.log.append((command, args))
        if command == "x-fault-add-rules":
            self.rules.setdefault(args["id"], []).extend(
                ln.split(":")[0] for ln in args["rules"].splitlines() if ln)
        elif command == "x-fault-delete-rule":
            self.rules[args["id"]].remove(args["name"])
        elif command == "x-fault-query-stats":
            return {"digest": 0xabc if args["id"] == "fi-nvme0" else 1,
                    "rules": [{"name": n, "hits": 2} for n in self.rules.get(args["id"], [])],
                    "io": [{"op": "write", "count": 7, "lba-min": 0, "lba-max": 8}]}
        return {}


class FakeGuest(threading.Thread):
    """The guest end of the channel: listens on a unix socket as QEMU's
    chardev does, then runs @script(self) in a thread."""

    def __init__(self, path, script):
        super().__init__(daemon=True)
        self.srv = socket.socket(socket.AF_UNIX)
        self.srv.bind(path)
        self.srv.listen(1)
        self.script = script
        self.got = []           # host lines, in order
        self.error = None
        self.conn = None
        self._buf = b""

    def say(self, line):
        self.conn.sendall(line.encode() + b"\n" if isinstance(line, str) else line)

    def line(self):
        while b"\n" not in self._buf:
            chunk = self.conn.recv(4096)
            if not chunk:
                raise EOFError
            self._buf += chunk
        ln, _, self._buf = self._buf.partition(b"\n")
        self.got.append(ln.decode())
        return ln.decode()

    def until(self, word):
        while True:
            ln = self.line()
            if ln.split()[0] == word:
                return ln

    def run(self):
        self.conn, _ = self.srv.accept()
        try:
            self.script(self)
        except Exception as e:  # noqa: BLE001 - the test reads it
            self.error = e

    def close(self):
        for s in (self.conn, self.srv):
            if s:
                s.close()


def prepared(text=PROGRAM, name="p1", mutation=None):
    program = parse(text, "t.prog")
    return Prepared.of(name, "t.prog", program, devices.bind(program),
                       devices.rules_of(program, mutation))


class ChannelTestCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.sock = os.path.join(self.tmp, "prog.sock")
        self.qmp = FakeQmp()
        self.console = ""
        self.dead_reason = None
        self.guests = []
        self.channels = []

    def tearDown(self):
        for g in self.guests:
            g.close()
        for c in self.channels:
            c.close()

    def session(self, script, **budgets):
        g = FakeGuest(self.sock, script)
        g.start()
        self.guests.append(g)
        chan = Channel(self.sock, lambda: self.dead_reason, connect_timeout=5)
        self.channels.append(chan)
        b = Budgets(**{"hello": 5, "ready": 5, "ops": 5, "result": 5, **budgets})
        return g, Session(chan, self.qmp, lambda: self.console, b)


class ProtocolTest(ChannelTestCase):
    def test_one_program_start_to_result(self):
        """The lines in order; the rules are set between ready and start
        and gone before teardown; the finding maps to the file's line."""
        seen = {}
        prep = prepared()

        def guest(g):
            g.say("hello progexec 1 kernel=6.12.0-test kcov=0")
            g.until("end")
            g.say("ready p1")
            g.until("start")
            seen["rules at start"] = {k: list(v) for k, v in self.qmp.rules.items() if v}
            g.say("at 5")
            g.say("at 6")
            g.say("finding content line=7 proc=main obj=a page=3 expected=v1 seen=v0 word=0 "
                  "got=0x0 want=0x1234")
            g.say('finding content line=6 proc=main why=knob errno=ENOENT '
                  'detail="knob zswap.compressor=lz4: No such file or directory"')
            g.say("stat pages_written=2048 elapsed_ms=120")
            g.say("ops-done p1")
            g.until("teardown")
            seen["rules at teardown"] = {k: list(v) for k, v in self.qmp.rules.items() if v}
            g.say("result p1 fail 2")
        g, s = self.session(guest)
        self.assertEqual(s.hello(), "6.12.0-test")
        out = s.run(prep)
        g.join(5)
        self.assertIsNone(g.error)
        self.assertEqual(g.got[:6], ["program p1", "bind s0 nvme:fl-nvme0",
                                     "bind s1 syncblk:irq", "allow failed-read s0",
                                     "text swap s0 nvme size=32M",
                                     "text rule s0 rfail: read every=3 count=2 error=eio"])
        self.assertEqual(g.got[6:], ["text swap s1 syncblk size=16M completion=irq",
                                     "text anon a 8M", "text write a 0 8M v=1",
                                     "text madvise a 0 8M pageout", "text read a 0 8M", "end",
                                     "start", "teardown"])
        self.assertEqual(seen["rules at start"], {"fi-nvme0": ["rfail"]})
        self.assertEqual(seen["rules at teardown"], {})
        resets = [a["id"] for c, a in self.qmp.log if c == "x-fault-reset"]
        self.assertEqual(sorted(resets), sorted(d.injector for d in devices.VM_DISKS))
        self.assertEqual(out.verdict, "fail")
        self.assertEqual(out.ops_run, 2)
        f, knob = out.findings
        self.assertEqual((f["check"], f["file_line"], f["op"], f["page"], f["seen"]),
                         ("content", 11, "read a 0 8M", "3", "v0"))
        # A quoted value keeps its spaces.
        self.assertEqual((knob["why"], knob["errno"], knob["detail"]),
                         ("knob", "ENOENT", "knob zswap.compressor=lz4: No such file or directory"))
        self.assertEqual(out.faults["s0"], {"injector": "fi-nvme0", "digest": "0000000000000abc",
                                            "hits": {"rfail": 2}, "io": {"write": 7}})
        self.assertEqual(out.stats["pages_written"], "2048")
        self.assertEqual(out.report[-1], "result p1 fail 2")

    def test_refused_then_the_next_program_runs(self):
        def guest(g):
            g.say("hello progexec 1 kernel=k kcov=0")
            g.until("end")
            g.say("refused p1 knob zswap.zpool=z3fold: not in this kernel")
            g.until("end")
            g.say("refused p3 7: read a 0 8M: no such object")
            g.until("end")
            g.say("ready p2")
            g.until("start")
            g.say("ops-done p2")
            g.until("teardown")
            g.say("result p2 pass 0")
        g, s = self.session(guest)
        s.hello()
        first = s.run(prepared(name="p1"))
        third = s.run(prepared(name="p3"))
        second = s.run(prepared(name="p2"))
        self.assertEqual(third.reason, "line 11 (read a 0 8M): read a 0 8M: no such object")
        self.assertEqual((first.verdict, first.reason),
                         ("refused", "knob zswap.zpool=z3fold: not in this kernel"))
        self.assertFalse([c for c, _ in self.qmp.log[:7] if c == "x-fault-add-rules"])
        self.assertEqual(second.verdict, "pass")

    def test_a_splat_while_the_program_runs_is_its_kernel_finding(self):
        self.console = "[ 1.0] boot\nWARNING: CPU: 0 PID: 1 at mm/old.c:1 old+0x1\n"

        def guest(g):
            g.say("hello progexec 1 kernel=k kcov=0")
            g.until("end")
            g.say("ready p1")
            g.until("start")
            self.console += "[ 2.0] WARNING: CPU: 1 PID: 9 at mm/swapfile.c:42 f+0x1/0x2\n"
            g.say("ops-done p1")
            g.until("teardown")
            g.say("result p1 pass 0")
        g, s = self.session(guest)
        s.hello()
        out = s.run(prepared())
        self.assertEqual(out.verdict, "fail")
        self.assertEqual(out.findings, [{"check": "kernel", "why": "splat",
                                         "text": "WARNING: CPU: 1 PID: 9 at mm/swapfile.c:42 "
                                                 "f+0x1/0x2"}])

    def test_an_oom_kill_dump_is_not_a_kernel_finding(self):
        def guest(g):
            g.say("hello progexec 1 kernel=k kcov=0")
            g.until("end")
            g.say("ready p1")
            g.until("start")
            self.console += ("[ 3.0] progexec invoked oom-killer: gfp_mask=0xcc0, order=0\n"
                             "[ 3.0] CPU: 0 PID: 77 Comm: progexec\n[ 3.0] Call Trace:\n"
                             "[ 3.0]  <TASK>\n[ 3.0]  dump_stack_lvl+0x1/0x2\n")
            g.say("relaxed oom-kill line=5 obj=a page=0")
            g.say("ops-done p1")
            g.until("teardown")
            g.say("result p1 pass 0")
        g, s = self.session(guest)
        s.hello()
        out = s.run(prepared())
        self.assertEqual((out.verdict, out.findings), ("pass", []))

    def test_mutation_adds_a_rule_on_every_device(self):
        prep = prepared(mutation="corrupt")

        def guest(g):
            g.say("hello progexec 1 kernel=k kcov=0")
            g.until("end")
            g.say("ready p1")
            g.until("start")
            g.say("ops-done p1")
            g.until("teardown")
            g.say("result p1 pass 0")
        g, s = self.session(guest)
        s.hello()
        s.run(prep)
        added = {a["id"]: a["rules"] for c, a in self.qmp.log if c == "x-fault-add-rules"}
        self.assertEqual(added, {
            "fi-nvme0": "rfail: read every=3 count=2 error=eio\n"
                        "mutate: write count=256 corrupt\n",
            "fi-sync-irq": "mutate: write count=256 corrupt\n"})


class DeadGuestTest(ChannelTestCase):
    def test_a_silent_guest_times_out(self):
        def guest(g):
            g.say("hello progexec 1 kernel=k kcov=0")
            g.until("end")
        g, s = self.session(guest, ready=1.0)
        s.hello()
        t0 = time.monotonic()
        with self.assertRaises(GuestSilent) as cm:
            s.run(prepared())
        self.assertLess(time.monotonic() - t0, 3)
        self.assertIn("no ready", str(cm.exception))
        self.assertEqual(cm.exception.outcome.verdict, "crash")

    def test_a_stopped_machine_ends_the_wait_before_the_budget(self):
        def guest(g):
            g.say("hello progexec 1 kernel=k kcov=0")
            g.until("end")
            g.say("ready p1")
            g.until("start")
            self.dead_reason = "the kernel panicked: Kernel panic - not syncing: test"
        g, s = self.session(guest, ops=60)
        s.hello()
        t0 = time.monotonic()
        with self.assertRaises(GuestGone) as cm:
            s.run(prepared())
        self.assertLess(time.monotonic() - t0, 5)
        self.assertIn("panicked", str(cm.exception))
        # The rules were cleared all the same.
        self.assertEqual(self.qmp.rules["fi-nvme0"], [])

    def test_a_closed_channel_is_a_dead_guest(self):
        def guest(g):
            g.say("hello progexec 1 kernel=k kcov=0")
            g.until("end")
            g.conn.close()
        g, s = self.session(guest)
        s.hello()
        with self.assertRaises(GuestGone) as cm:
            s.run(prepared())
        self.assertIn("closed", str(cm.exception))

    def test_qmp_gone_is_a_crash(self):
        def guest(g):
            g.say("hello progexec 1 kernel=k kcov=0")
            g.until("end")
            self.qmp.dead = True        # before ready: the host's next call is QMP's
            g.say("ready p1")
        g, s = self.session(guest)
        s.hello()
        with self.assertRaises(QmpError) as cm:
            s.run(prepared())
        self.assertEqual(cm.exception.outcome.verdict, "crash")

    def test_no_socket_and_a_dead_machine(self):
        with self.assertRaises(GuestGone) as cm:
            Channel(os.path.join(self.tmp, "none.sock"), lambda: "QEMU exited: bad option")
        self.assertEqual(str(cm.exception), "QEMU exited: bad option")


class BadLineTest(ChannelTestCase):
    def bad(self, lines, expect):
        def guest(g):
            g.say("hello progexec 1 kernel=k kcov=0")
            g.until("end")
            for ln in lines:
                g.say(ln)
        g, s = self.session(guest)
        s.hello()
        with self.assertRaises(BadLine) as cm:
            s.run(prepared())
        self.assertIn(expect, str(cm.exception))

    def test_unknown_kind(self):
        self.bad(["frobnicate p1"], "unknown message: 'frobnicate p1'")

    def test_over_long(self):
        self.bad([b"at " + b"1" * MAX_LINE + b"\n"], f"over {MAX_LINE} bytes")

    def test_not_ascii(self):
        self.bad([b"ready p\xc3\xa9\n"], "not ASCII")

    def test_another_program(self):
        self.bad(["ready p9"], "answered ready for 'p9' while 'p1' runs")

    def test_result_word(self):
        def guest(g):
            g.say("hello progexec 1 kernel=k kcov=0")
            g.until("end")
            g.say("ready p1")
            g.until("start")
            g.say("ops-done p1")
            g.until("teardown")
            g.say("result p1 maybe 0")
        g, s = self.session(guest)
        s.hello()
        with self.assertRaises(BadLine) as cm:
            s.run(prepared())
        self.assertIn("malformed 'result' line", str(cm.exception))

    def test_first_line_not_hello(self):
        g, s = self.session(lambda g: g.say("ready p1"))
        with self.assertRaises(BadLine):
            s.hello()

    def test_host_lines_are_checked(self):
        g, s = self.session(lambda g: None)
        with self.assertRaises(ValueError):
            s.chan.send("text a\nb")


class OffersAndCoverTest(ChannelTestCase):
    """`offers` lines after the hello (its offers=N), `cover` lines before
    `result`, and where they end up (run.json offers; result.json cover
    and edges; `prog show`)."""

    OFFERS = ["offers knobs zswap.enabled zswap.compressor thp.enabled mthp.64kB.enabled",
              "offers zswap.compressor lzo zstd",
              "offers thp.enabled always madvise never",
              "offers mthp.sizes 16kB 64kB",
              "offers cgroup.files memory.max memory.swap.max",
              "offers cpus 2",
              "offers memory 536870912"]

    def program_with_cover(self, cover_lines):
        def guest(g):
            g.say(f"hello progexec 1 kernel=k kcov=1 offers={len(self.OFFERS)}")
            for ln in self.OFFERS:
                g.say(ln)
            g.until("end")
            g.say("ready p1")
            g.until("start")
            g.say("at 5")
            g.say("ops-done p1")
            g.until("teardown")
            g.say("stat elapsed_ms=9")
            for ln in cover_lines:
                g.say(ln)
            g.say("result p1 pass 0")
        g, s = self.session(guest)
        s.hello()
        return g, s, s.run(prepared())

    def test_offers_and_cover(self):
        g, s, out = self.program_with_cover(["cover 3 00ff 1a2b ffff", "cover 2 0001 00ff"])
        self.assertTrue(s.kcov)
        self.assertEqual(s.offers, {
            "knobs": ["zswap.enabled", "zswap.compressor", "thp.enabled", "mthp.64kB.enabled"],
            "zswap.compressor": ["lzo", "zstd"], "thp.enabled": ["always", "madvise", "never"],
            "mthp.sizes": ["16kB", "64kB"], "cgroup.files": ["memory.max", "memory.swap.max"],
            "cpus": 2, "memory": 512 << 20})
        self.assertEqual(out.verdict, "pass")
        self.assertEqual(out.cover, {0x1, 0xff, 0x1a2b, 0xffff})
        rundir = os.path.join(self.tmp, "run")
        prog = os.path.join(self.tmp, "p1.prog")
        with open(prog, "w") as f:
            f.write(PROGRAM)
        results.write_program(rundir, "p1", prog, out, 5)
        results.write_run_json(rundir, {"programs": ["p1"], "kernel_release": "k",
                                        "offers": s.offers})
        path = os.path.join(rundir, "programs", "p1", "result.json")
        with open(path) as f:
            text = f.read()
        saved = json.loads(text)
        self.assertEqual(saved["cover"], [0x1, 0xff, 0x1a2b, 0xffff])
        self.assertEqual(saved["edges"], 4)
        self.assertIn('"cover": [1,255,6699,65535]', text)     # one line, however many
        buf = io.StringIO()
        with redirect_stdout(buf):
            results.show(rundir)
        self.assertRegex(buf.getvalue().splitlines()[1],
                         r"^p1 +pass +1/5 ops +0 findings, 4 edges$")
        meta, _ = results.load(rundir)
        self.assertEqual(meta["offers"]["cpus"], 2)

    def test_no_kcov_no_offers_no_cover(self):
        """An executor that announces nothing: the old hello still works."""
        def guest(g):
            g.say("hello progexec 1 kernel=k kcov=0")
            g.until("end")
            g.say("ready p1")
            g.until("start")
            g.say("ops-done p1")
            g.until("teardown")
            g.say("result p1 pass 0")
        g, s = self.session(guest)
        s.hello()
        out = s.run(prepared())
        self.assertEqual((s.kcov, s.offers, out.cover), (False, {}, set()))

    def test_bad_cover_lines(self):
        for line, what in (("cover 3 00ff 1a2b", "malformed 'cover'"),
                           ("cover 1 xyz", "malformed 'cover'"),
                           ("cover two 00ff", "malformed 'cover'")):
            with self.subTest(line=line):
                self.setUp()
                with self.assertRaises(BadLine) as cm:
                    self.program_with_cover([line])
                self.assertIn(what, str(cm.exception))
                self.tearDown()

    def test_bad_offers(self):
        for lines, what in ((["hello progexec 1 kernel=k kcov=0 offers=2", "offers cpus 2",
                              "ready p1"], "where its offers were due"),
                            (["hello progexec 1 kernel=k kcov=0 offers=1", "offers cpus two"],
                             "bad cpus"),
                            (["hello progexec 1 kernel=k kcov=0 offers=x"], "bad offers count")):
            with self.subTest(lines=lines):
                self.setUp()
                g, s = self.session(lambda g, lines=lines: [g.say(ln) for ln in lines])
                with self.assertRaises(BadLine) as cm:
                    s.hello()
                self.assertIn(what, str(cm.exception))
                self.tearDown()

    def test_offers_never_sent(self):
        """A hello that announces offers it never sends: silence, not a hang."""
        g, s = self.session(lambda g: g.say("hello progexec 1 kernel=k kcov=0 offers=3"),
                            ready=0.5)
        with self.assertRaises(GuestSilent):
            s.hello()


class BindTest(unittest.TestCase):
    def refusal(self, text):
        with self.assertRaises(devices.Refusal) as cm:
            devices.bind(parse(text, "t.prog"))
        return str(cm.exception)

    def test_bound_by_kind_and_completion(self):
        b = devices.bind(parse("swap a nvme\nswap b nvme\nswap c syncblk\n"
                               "swap d syncblk completion=thread\nswap e virtio-blk\n"))
        self.assertEqual({k: v.target for k, v in b.items()},
                         {"a": "nvme:fl-nvme0", "b": "nvme:fl-nvme1", "c": "syncblk:task",
                          "d": "syncblk:thread", "e": "virtio-blk:fl-vblk0"})

    def test_too_many(self):
        self.assertEqual(self.refusal("swap a nvme\nswap b nvme\nswap c nvme\n"),
                         "line 3: swap c: the VM has 2 nvme devices, all bound to the "
                         "program's earlier swap lines")
        self.assertEqual(self.refusal("swap a syncblk completion=irq\n"
                                      "swap b syncblk completion=irq\n"),
                         "line 2: swap b: the VM has 1 syncblk completion=irq device, all "
                         "bound to the program's earlier swap lines")

    def test_too_big_and_refused_rule_keys(self):
        self.assertIn("size 1024M is over the VM's 512M disks",
                      self.refusal("swap a nvme size=1G\n"))
        self.assertEqual(self.refusal("swap a virtio-blk\nrule a q: write sq=1 error=eio\n"),
                         "line 2: rule a q: sq is not supported on virtio-blk")

    def test_which_rules_fail_reads(self):
        self.assertTrue(devices.fails_reads("read every=3 error=eio"))
        self.assertTrue(devices.fails_reads("any drop"))
        self.assertFalse(devices.fails_reads("write error=eio"))
        self.assertFalse(devices.fails_reads("read delay=1ms"))

    def test_line_mapping(self):
        prep = prepared()
        self.assertEqual(prep.file_line(1), (3, "swap s0 nvme size=32M"))
        self.assertEqual(prep.file_line("7"), (11, "read a 0 8M"))
        self.assertEqual(prep.file_line(8), (None, None))
        self.assertEqual(prep.file_line("x"), (None, None))


class CommandTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def run_cli(self, *argv):
        """The command as a user runs it: (exit status, stderr)."""
        res = subprocess.run([sys.executable, "-m", "faultline", *argv], capture_output=True,
                             text=True, timeout=60,
                             env=dict(os.environ, PYTHONPATH=os.path.join(TOP, "python")))
        return res.returncode, res.stderr

    def test_a_bad_program_is_one_line_before_any_vm(self):
        bad = os.path.join(self.tmp, "bad.prog")
        with open(bad, "w") as f:
            f.write("swap s0 nvme\nanon a 4M\nwrite a 0 8M v=1\n")
        status, err = self.run_cli("prog", "run", bad, "--out", os.path.join(self.tmp, "o"))
        self.assertEqual(status, EXIT_SETUP)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertTrue(err.startswith(f"{bad}:3: "), err)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "o")))

    def test_a_file_the_vm_cannot_run_is_one_line(self):
        p = os.path.join(self.tmp, "three.prog")
        with open(p, "w") as f:
            f.write("swap a nvme\nswap b nvme\nswap c nvme\nanon x 4M\n")
        status, err = self.run_cli("prog", "run", p, "--out", os.path.join(self.tmp, "o"))
        self.assertEqual(status, EXIT_SETUP)
        self.assertIn("three.prog: line 3: swap c: the VM has 2 nvme devices", err)

    def test_a_dir_records_what_the_vm_cannot_run(self):
        os.makedirs(os.path.join(self.tmp, "d"))
        for name, text in (("1.prog", "swap a nvme\nanon x 4M\n"),
                           ("2.prog", "swap a nvme\nswap b nvme\nswap c nvme\nanon x 4M\n")):
            with open(os.path.join(self.tmp, "d", name), "w") as f:
                f.write(text)
        ready, refused = boot.prepare(boot.collect(os.path.join(self.tmp, "d")), None, False)
        self.assertEqual([p.name for p in ready], ["1"])
        self.assertEqual(list(refused), ["2"])
        self.assertIn("the VM has 2 nvme devices", refused["2"][1])

    def test_exit_codes(self):
        self.assertEqual(boot.status_of([{"verdict": "pass"}, {"verdict": "refused"}]),
                         EXIT_PASS)
        self.assertEqual(boot.status_of([{"verdict": "pass"}, {"verdict": "fail"}]), EXIT_FAIL)
        self.assertEqual(boot.status_of([{"verdict": "fail"}, {"verdict": "crash"}]),
                         EXIT_CRASH)

    def test_show(self):
        rundir = os.path.join(self.tmp, "run")
        prog = os.path.join(self.tmp, "p1.prog")
        with open(prog, "w") as f:
            f.write(PROGRAM)
        out = boot.Outcome("p1", "fail", findings=[
            {"check": "content", "line": "7", "file_line": 11, "op": "read a 0 8M",
             "obj": "a", "page": "3", "expected": "v1", "seen": "v0"}],
            report=["ready p1", "result p1 fail 1"], ops_run=4)
        results.write_program(rundir, "p1", prog, out, 4)
        results.write_run_json(rundir, {"programs": ["p1", "p2"], "kernel_release": "6.12",
                                        "status": 1})
        buf = io.StringIO()
        with redirect_stdout(buf):
            self.assertEqual(results.show(rundir), 0)
        lines = buf.getvalue().splitlines()
        self.assertRegex(lines[1], r"^p1 +fail +4/4 ops +1 finding$")
        self.assertEqual(lines[2].strip(), "content  line 11: read a 0 8M")
        self.assertEqual(lines[3].strip(), "obj a page 3, expected v1 seen v0")
        self.assertRegex(lines[4], r"^p2 +not run")
        with open(os.path.join(rundir, "programs", "p1", "result.json")) as f:
            self.assertEqual(json.load(f)["verdict"], "fail")
        with open(os.path.join(rundir, "programs", "p1", "program.prog")) as f:
            self.assertEqual(f.read(), PROGRAM)

    def test_replay_command(self):
        o = boot.ProgOptions("x", kernel="/k/bzImage", mutate="lie", seed=3,
                             deterministic=True)
        self.assertEqual(o.replay_argv("R/programs/p/program.prog")[1:],
                         ["prog", "run", "R/programs/p/program.prog", "--seed", "3",
                          "--kernel", "/k/bzImage", "--mutate", "lie", "--deterministic"])


if __name__ == "__main__":
    unittest.main()
