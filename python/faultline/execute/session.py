"""One program's turn on a booted VM (docs/programs.md, "The executor and
its channel"): reset the injectors, send the program, set its rules over
QMP while the guest waits, run it, read the injectors, clear the rules,
tear down, and judge the console for the `kernel` check.

The session knows the machine only through three callables (QMP, the
console's text, the channel), so the unit tests drive it with a fake
guest on a socket.  Its reading and judging (read_until, finding,
kernel_check, device_faults, settle) need no live channel: fresh.py
judges with them a report that the guest writes into a file.
"""

import time
from dataclasses import dataclass, field

from faultline.execute.channel import BadLine, ChannelError, keyvals, parse_message
from faultline.execute.devices import VM_DISKS, fails_reads
from faultline.judge.judge import splat_line
from faultline.vm.qmp import QmpError


@dataclass
class Budgets:
    """Seconds the host waits for each of the guest's turns."""
    hello: float = 300.0        # the boot, to the executor's hello
    ready: float = 120.0
    ops: float = 300.0          # the program's own budget
    result: float = 120.0


@dataclass
class Prepared:
    """A program as the host sends it."""
    name: str
    path: str
    program: object             # prog.lang.Program
    bound: dict                 # program device -> VmDisk
    rules: dict                 # program device -> [(name, text)]
    lines: list = field(default_factory=list)      # [(text, file line)], as sent

    @classmethod
    def of(cls, name, path, program, bound, rules):
        """The canonical lines in order (header, then operations; no
        comments, no blank line): the guest's line N is lines[N-1]."""
        lines = [(st.text(), st.line) for st in program.header + program.ops]
        return cls(name, path, program, bound, rules, lines)

    def file_line(self, guest_line):
        """(file line, operation text) of the guest's line number, or
        (None, None) when it names no line sent."""
        try:
            n = int(guest_line)
        except (TypeError, ValueError):
            return None, None
        if 1 <= n <= len(self.lines):
            text, line = self.lines[n - 1]
            return line, text
        return None, None


def mapped_reason(prep, reason):
    """A refusal's reason with the guest's `LINE: why` as the file's line."""
    head, sep, why = reason.partition(": ")
    line, text = prep.file_line(head) if sep else (None, None)
    return f"line {line} ({text}): {why}" if line is not None else reason


def offer_value(key, words):
    """An `offers` line's value: the machine's sizes as ints, else the words."""
    if key in ("cpus", "memory"):
        if len(words) != 1 or not words[0].isdigit():
            raise BadLine(f"the guest offers a bad {key}: {' '.join(words)!r}")
        return int(words[0])
    return words


@dataclass
class Outcome:
    """What came of one program."""
    name: str
    verdict: str = "crash"      # pass, fail, refused, crash
    reason: str = ""            # refused or crash: why
    findings: list = field(default_factory=list)
    faults: dict = field(default_factory=dict)    # program device -> {digest, hits}
    report: list = field(default_factory=list)    # the guest's lines
    ops_run: int = 0
    stats: dict = field(default_factory=dict)
    elapsed_s: float = 0.0
    cover: set = field(default_factory=set)       # kcov edge hashes (ints) of the program


def read_until(lines, out, prep, wanted, budget):
    """Read the guest's report lines for @prep from @lines (its
    receive(timeout, waiting_for): a live channel, or a transcript) into
    Outcome @out until one of @wanted (or `refused`, `result`); that (kind,
    words).  GuestSilent past @budget seconds, BadLine for a line of
    another program."""
    deadline = time.monotonic() + budget
    what = " or ".join(wanted)
    while True:
        left = max(0.0, deadline - time.monotonic())
        line = lines.receive(left, f"{what} of {prep.name}")
        kind, rest = parse_message(line)
        out.report.append(line)
        if kind == "finding":
            out.findings.append(finding(prep, rest))
        elif kind == "at":
            out.ops_run += 1
        elif kind == "stat":
            out.stats.update(keyvals(rest))
        elif kind == "cover":
            out.cover.update(int(h, 16) for h in rest[1:])
        if kind in wanted or kind in ("refused", "result"):
            if kind != "hello" and rest[0] != prep.name:
                raise BadLine(f"the guest answered {kind} for {rest[0]!r} while "
                              f"{prep.name!r} runs")
            return kind, rest


def finding(prep, rest):
    """A `finding` line's words as result.json keeps them."""
    f = {"check": rest[0], **keyvals(rest[1:])}
    line, text = prep.file_line(f.get("line"))
    if line is not None:
        f["file_line"], f["op"] = line, text
    return f


def kernel_check(out, console):
    """A splat in @console (the console's text while the program ran) is
    the program's finding.  A bare stack dump is not: an OOM kill prints
    one, and the program may meet its cgroup's limit (the oom-kill
    relaxation)."""
    splat = splat_line(console, bare_dumps=False)
    if splat:
        out.findings.append({"check": "kernel", "why": "splat", "text": splat})


def device_faults(qmp, injector):
    """result.json's faults of one device: its injector's digest, rule hits
    and I/Os per operation (the fuzzer's signal), over QMP."""
    stats = qmp("x-fault-query-stats", id=injector)
    digest = stats.get("digest")
    return {"injector": injector,
            "digest": f"{digest:016x}" if isinstance(digest, int) else digest,
            "hits": {r["name"]: r["hits"] for r in stats.get("rules", [])},
            "io": {i["op"]: i["count"] for i in stats.get("io", [])}}


def settle(out, result_words):
    """The verdict from the `result` line's words and the findings."""
    out.verdict = "fail" if result_words[1] == "fail" or out.findings else "pass"


class Session:
    """The host's side of the protocol for one boot."""

    def __init__(self, channel, qmp, console, budgets=None):
        """@qmp(command, **args): QMP of the machine; @console(): the
        console's text so far."""
        self.chan = channel
        self.qmp = qmp
        self.console = console
        self.budgets = budgets or Budgets()
        self.kernel = None
        self.kcov = False
        self.offers = {}

    def hello(self):
        """Wait for the executor's hello and the `offers` lines it
        announces; its kernel release.  self.kcov: whether programs come
        with `cover` lines; self.offers: {KEY: [VALUE...]} (cpus and
        memory: ints)."""
        kind, rest = parse_message(self.chan.receive(self.budgets.hello, "hello"))
        if kind != "hello" or rest[0] != "progexec":
            raise BadLine(f"the guest's first line is not a hello: {kind} {' '.join(rest)}")
        said = keyvals(rest)
        self.kernel = said.get("kernel", "?")
        self.kcov = said.get("kcov") == "1"
        count = said.get("offers", "0")
        if not count.isdigit():
            raise BadLine(f"the guest's hello has a bad offers count: {' '.join(rest)}")
        for _ in range(int(count)):
            line = self.chan.receive(self.budgets.ready, "offers")
            kind, rest = parse_message(line)
            if kind != "offers":
                raise BadLine(f"the guest sent {kind} where its offers were due: {line[:200]!r}")
            self.offers[rest[0]] = offer_value(rest[0], rest[1:])
        return self.kernel

    def quit(self):
        self.chan.send("quit")

    def _until(self, out, prep, wanted, budget):
        return read_until(self.chan, out, prep, wanted, budget)

    def _send_program(self, prep):
        self.chan.send(f"program {prep.name}")
        for dev, disk in prep.bound.items():
            self.chan.send(f"bind {dev} {disk.target}")
        for dev, rules in prep.rules.items():
            if any(fails_reads(text) for _, text in rules):
                self.chan.send(f"allow failed-read {dev}")
        for text, _ in prep.lines:
            self.chan.send(f"text {text}")
        self.chan.send("end")

    def run(self, prep):
        """One program, start to `result`: an Outcome.  A ChannelError or
        a QMP failure ends the boot: the outcome says crash and why, and
        the error is raised on (with .outcome)."""
        out = Outcome(prep.name)
        t0 = time.monotonic()
        console_from = len(self.console())
        try:
            self._turn(prep, out, console_from)
        except (ChannelError, QmpError) as e:
            out.verdict, out.reason = "crash", str(e)
            out.elapsed_s = time.monotonic() - t0
            self._kernel_check(out, console_from)
            e.outcome = out
            raise
        out.elapsed_s = time.monotonic() - t0
        return out

    def _turn(self, prep, out, console_from):
        for d in VM_DISKS:
            self.qmp("x-fault-reset", id=d.injector)
        self._send_program(prep)
        kind, rest = self._until(out, prep, ("ready",), self.budgets.ready)
        if kind == "refused":
            out.verdict = "refused"
            out.reason = mapped_reason(prep, " ".join(rest[1:])) or "refused"
            return
        if kind == "result":
            raise BadLine(f"the guest sent result for {prep.name} before ready")
        added = []
        try:
            for dev, rules in prep.rules.items():
                injector = prep.bound[dev].injector
                self.qmp("x-fault-add-rules", id=injector,
                         rules="\n".join(f"{name}: {text}" for name, text in rules) + "\n")
                added += [(dev, injector, name) for name, _ in rules]
            self.chan.send("start")
            kind, rest = self._until(out, prep, ("ops-done",), self.budgets.ops)
            for dev, disk in prep.bound.items():
                out.faults[dev] = device_faults(self.qmp, disk.injector)
        finally:
            for dev, injector, name in added:
                try:
                    self.qmp("x-fault-delete-rule", id=injector, name=name)
                except QmpError:
                    pass        # the machine is gone: the caller sees why
        if kind != "result":
            self.chan.send("teardown")
            kind, rest = self._until(out, prep, ("result",), self.budgets.result)
        if kind == "refused":
            raise BadLine(f"the guest refused {prep.name} after ready")
        self._kernel_check(out, console_from)
        settle(out, rest)

    def _kernel_check(self, out, console_from):
        kernel_check(out, self.console()[console_from:])
