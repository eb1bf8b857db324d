"""A failing program, from the fuzzing VM to its failure directory.

Its signature says which failure it is (distinct failures get a directory
each): the oracle's check, the operation's verb and the finding's why
(`content read sigbus`), or the kernel's splat title with numbers masked
and its top frames (`kernel: WARNING: ... [swap_writepage ...]`), or how
the guest stopped.  A new signature is triaged on the spot by the job that
found it:

 1. replay: a fresh boot runs the program alone; if it does not fail so,
    the programs the fuzzing VM ran before it, in order (a failure that
    needs their history);
 2. minimize (prog/minimize.py): a candidate fails when it fails with the
    same signature on a VM booted for the minimization (fresh, then fed
    candidate after candidate; rebooted when one kills it), within
    --minimize-budget.  A failure that needs its history is minimized over
    the history instead: the fewest earlier programs (ddmin, a fresh boot
    per candidate) after which the program still fails so;
 3. the minimized program (after the history it needs) once more on a
    fresh --deterministic boot;
 4. the C reproducer of the minimized program in repro/ (execute/repro.py's
    write_reproducer, when this checkout has it), of a failure that needs
    no history.

OUT/failures/SLUG/ holds program.prog (as found), minimized.prog,
rules.txt, report.txt, result.json, console.txt, history/ (the programs
the VM ran before it), sequence/ (for a failure that needs its history:
the programs it needs, then the failing one, in name order), replay.sh
(`prog run` of minimized.prog, or of sequence/ in one boot), repro/ (the
reproducer), and failure.json (signature, class, hits, what each step
found).
"""

import dataclasses
import hashlib
import json
import os
import re
import shlex
import threading
import time

from faultline.execute import devices
from faultline.execute.session import Outcome, Prepared
from faultline.judge.failure import crash_line
from faultline.judge.judge import splat_line
from faultline.prog.minimize import minimize
from faultline.search.feedback import mask
from faultline.search.minimize import BudgetSpent, ddmin

try:                    # the C reproducer is another branch's work (execute/repro.py)
    from faultline.execute import repro
except ImportError:
    repro = None

FRAMES = 3
_FRAME = re.compile(r"\b([A-Za-z_][\w.]*)\+0x[0-9a-f]+/0x[0-9a-f]+")
INDEX = "index.json"


class BootFailed(Exception):
    """A VM for triage did not come up: one line."""


# ---------------------------------------------------------------- signatures

def top_frames(console, n=FRAMES):
    """The first @n functions of the first call trace on @console (frames
    marked `?`, guesses of the unwinder, left out)."""
    lines = console.splitlines()
    for i, line in enumerate(lines):
        if "Call Trace:" not in line:
            continue
        out = []
        for ln in lines[i + 1:]:
            if "</TASK>" in ln or "---[ end trace" in ln:
                break
            m = _FRAME.search(ln)
            if m and " ? " not in ln:
                out.append(m.group(1))
                if len(out) == n:
                    break
        return out
    return []


# Checks about one operation whatever line saw them fail: a swapoff that
# does not end is one failure whether its own line timed out or a `wait`
# (or the end of the program) joined it in the background.
OWN_OPERATION = {"swapoff": "swapoff"}


def signature(outcome, console, name):
    """Which failure @outcome (of program @name; @console: the console
    while it ran) is; None for a program that did not fail."""
    if outcome.verdict not in ("fail", "crash"):
        return None
    kernel = [f for f in outcome.findings if f.get("check") == "kernel"]
    splat = kernel[0].get("text") if kernel else None
    if outcome.verdict == "crash" and not splat:
        splat = crash_line(console) or splat_line(console, bare_dumps=False)
    if splat:
        frames = top_frames(console)
        return "kernel: " + mask(splat) + (f" [{' '.join(frames)}]" if frames else "")
    if outcome.verdict == "crash":
        reason = outcome.reason.replace(name, "PROGRAM")
        how = "hang" if "from the guest in" in reason else "crash"
        return f"{how}: {mask(reason)}"
    f = outcome.findings[0] if outcome.findings else {"check": "result"}
    verb = OWN_OPERATION.get(f["check"]) \
        or next((w for w in (f.get("op") or "").split() if not w.startswith("@")), "-")
    return f"{f['check']} {verb} {f.get('why', '-')}"


def result_signature(res, console):
    """signature() of one program's result as `prog run` writes it
    (execute/results.py), @console: the boot's console."""
    out = Outcome(res["name"], res["verdict"], res.get("reason") or "",
                  res.get("findings") or [])
    return signature(out, console, res["name"])


def failure_class(sig, plant):
    if plant:
        return f"planted ({plant}): faultline's self-test"
    if sig.startswith("kernel: "):
        return "kernel splat: a kernel bug, or a device model's"
    if sig.endswith(" model"):
        return "the executor's model refused its own state (why=model): a faultline defect"
    if sig.startswith(("hang", "crash")):
        return "the guest stopped: a kernel bug, a device model's, or the executor's"
    return f"oracle ({sig.split()[0]}): a kernel bug, or the executor's model (check the report)"


# What a person found a failure to be (`fuzz triage`): the campaign counts
# only once none is left without one.
VERDICTS = ("kernel-bug", "faultline-defect", "oracle-error")


def slug(sig):
    words = re.sub(r"[^a-z0-9]+", "-", sig.lower()).strip("-")[:48].strip("-")
    return f"{words}-{hashlib.sha1(sig.encode()).hexdigest()[:8]}"


# ---------------------------------------------------------------- the book

class FailureBook:
    """The distinct failures of a campaign (OUT/failures/index.json):
    thread-safe; the first job to see a signature triages it."""

    def __init__(self, directory):
        self.dir = directory
        self.known = {}
        self.lock = threading.Lock()

    def load(self):
        try:
            with open(os.path.join(self.dir, INDEX)) as f:
                self.known = {r["signature"]: r for r in json.load(f)["failures"]}
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{os.path.join(self.dir, INDEX)}: not a failure index ({e})")
        return self

    def claim(self, sig, found_s):
        """True for a signature not seen before (the caller triages it);
        a known one counts one more hit."""
        with self.lock:
            if sig in self.known:
                self.known[sig]["hits"] += 1
                self._write()
                return False
            self.known[sig] = {"signature": sig, "dir": slug(sig), "hits": 1,
                               "first_s": round(found_s, 1), "triaged": False}
            self._write()
            return True

    def done(self, sig, summary):
        with self.lock:
            self.known[sig].update(summary, triaged=True)
            self._write()

    def judge(self, which, verdict, why):
        """Record a person's @verdict (VERDICTS) and @why for the failure
        @which (its directory name or its signature); the failure's record.
        ValueError (one line) for an unknown failure or verdict."""
        if verdict not in VERDICTS:
            raise ValueError(f"verdict {verdict!r}: one of {', '.join(VERDICTS)}")
        if not why.strip():
            raise ValueError("say why (the commit that fixed it, the kernel bug it is)")
        with self.lock:
            rec = next((r for r in self.known.values() if which in (r["dir"], r["signature"])),
                       None)
            if rec is None:
                known = ", ".join(r["dir"] for r in self.known.values()) or "none"
                raise ValueError(f"no failure {which!r} in {self.dir} (known: {known})")
            rec.update(verdict=verdict, why=" ".join(why.split()))
            self._write()
            return dict(rec)

    def summaries(self):
        with self.lock:
            return sorted((dict(r) for r in self.known.values()), key=lambda r: r["first_s"])

    def _write(self):
        os.makedirs(self.dir, exist_ok=True)
        path = os.path.join(self.dir, INDEX)
        with open(path + ".tmp", "w") as f:
            json.dump({"failures": sorted(self.known.values(), key=lambda r: r["first_s"])},
                      f, indent=1)
        os.replace(path + ".tmp", path)


# ---------------------------------------------------------------- triage

def prepared(name, program, path):
    """@program ready to send (a Refusal when the VM cannot take it)."""
    return Prepared.of(name, path, program, devices.bind(program), devices.rules_of(program))


KNOWN_CLASS = "a known kernel finding's (findings/): kept as found, not minimized"


def write_text(path, text):
    with open(path, "w") as f:
        f.write(text)


class Triage:
    """One new failure's steps.  @boot(label, deterministic=False) -> a
    started VM (machines.GuestVM's interface) or BootFailed; @replay_argv
    (path, deterministic) -> the command that replays a program file."""

    def __init__(self, boot, fdir, sig, plant, replay_argv, minimize_budget_s,
                 repro_options=None, known=False):
        self.boot, self.dir, self.sig, self.plant = boot, fdir, sig, plant
        self.known = known      # a known kernel finding's: its evidence only
        self.replay_argv = replay_argv
        self.repro_options = repro_options or {}
        self.minimize_budget_s = minimize_budget_s
        self.vm = None

    def _run(self, prep, label, deterministic=False):
        """Does @prep fail with the signature on self.vm (booted when
        there is none)?  (signature seen, outcome)."""
        if self.vm is None:
            self.vm = self.boot(label, deterministic)
        out, console, alive = self.vm.run(prep)
        if not alive:
            self._close()
        return signature(out, console, prep.name), out

    def _close(self):
        if self.vm is not None:
            self.vm.close()
            self.vm = None

    def replay(self, prep, history):
        """("alone" | "after N programs" | "no", the signature the last run saw)."""
        seen, _ = self._run(prep, "replay")
        if seen == self.sig or not history:
            return ("alone" if seen == self.sig else "no"), seen
        self._close()
        for p in history:
            self._run(p, "replay")
            if self.vm is None:
                break           # an earlier program killed the fresh VM: another failure
        else:
            seen, _ = self._run(prep, "replay")
        self._close()
        return (f"after {len(history)} programs" if seen == self.sig else "no"), seen

    def minimize(self, prep):
        """(the smallest failing program found, runs, whether the budget cut it short)."""
        deadline = time.monotonic() + self.minimize_budget_s
        tries = {"n": 0, "cut": False}

        def fails(candidate):
            if time.monotonic() > deadline:
                tries["cut"] = True
                return False
            tries["n"] += 1
            try:
                p = prepared(f"min-{tries['n']}", candidate, prep.path)
            except devices.Refusal:
                return False
            try:
                return self._run(p, "minimize")[0] == self.sig
            except BootFailed:
                tries["cut"] = True
                return False
        program, stats = minimize(prep.program, fails)
        return program, stats.runs, tries["cut"]

    def minimize_history(self, prep, history):
        """(the fewest programs of @history after which @prep still fails
        so on a fresh boot, runs, whether the budget cut it short)."""
        deadline = time.monotonic() + self.minimize_budget_s
        tries = {"n": 0, "cut": False}

        def fails_after(before):
            if time.monotonic() > deadline:
                raise BudgetSpent()
            tries["n"] += 1
            self._close()
            try:
                for p in before:
                    self._run(p, "minimize")
                    if self.vm is None:
                        return False    # an earlier program killed the VM: another failure
                return self._run(prep, "minimize")[0] == self.sig
            except BootFailed:
                raise BudgetSpent() from None
            finally:
                self._close()

        # The replay showed the program alone passes: at least one is needed.
        try:
            needed = ddmin(list(history), lambda cands: [fails_after(c) for c in cands])
        except BudgetSpent as e:
            tries["cut"] = True
            needed = e.args[0] if e.args else list(history)
        return needed, tries["n"], tries["cut"]

    def deterministic(self, prep, before=()):
        """What the program does on a fresh --deterministic boot (after the
        programs @before): "same", "pass" or "other: SIGNATURE"."""
        self._close()
        try:
            for p in before:
                self._run(p, "deterministic", deterministic=True)
                if self.vm is None:
                    return "other: an earlier program of the sequence killed the VM"
            seen, _ = self._run(prep, "deterministic", deterministic=True)
        finally:
            self._close()
        return "same" if seen == self.sig else "pass" if seen is None else f"other: {seen}"

    def reproducer(self, path, deterministic):
        """The reproducer's files in DIR/repro/, or why there are none."""
        if repro is None:
            return "not written: this checkout has no execute/repro.py (`faultline prog c`)"
        try:
            repro.write_reproducer(path, os.path.join(self.dir, "repro"),
                                   deterministic=deterministic, **self.repro_options)
        except Exception as e:  # noqa: BLE001 - another module's failure is one line here
            return f"not written: {type(e).__name__}: {e}"
        return "repro/"

    def write_sequence(self, before, small_path):
        """sequence/: the programs @before, then the failing one, named so
        that `prog run DIR` runs them in this order; its path."""
        seq = os.path.join(self.dir, "sequence")
        os.makedirs(seq, exist_ok=True)
        for i, p in enumerate(before, 1):
            write_text(os.path.join(seq, f"{i:02d}-{p.name}.prog"), p.program.text())
        with open(small_path) as f:
            write_text(os.path.join(seq, f"{len(before) + 1:02d}-failing.prog"), f.read())
        return seq

    def run(self, found):
        """Every step for @found (manager.Found); the failure.json summary."""
        os.makedirs(os.path.join(self.dir, "history"), exist_ok=True)
        prep, out = found.prep, found.outcome
        write_text(os.path.join(self.dir, "program.prog"), prep.program.text())
        write_text(os.path.join(self.dir, "report.txt"), "".join(ln + "\n" for ln in out.report))
        write_text(os.path.join(self.dir, "result.json"),
                   json.dumps(dataclasses.asdict(out), indent=1,
                              default=sorted) + "\n")   # cover is a set
        write_text(os.path.join(self.dir, "console.txt"), found.console)
        for i, p in enumerate(found.history, 1):
            write_text(os.path.join(self.dir, "history", f"{i:02d}-{p.name}.prog"),
                       p.program.text())
        summary = {"signature": self.sig, "class": failure_class(self.sig, self.plant),
                   "program": found.prep.name, "job": found.job,
                   "found_s": round(found.found_s, 1), "history": len(found.history)}
        if self.known:
            # findings/ has its minimized program and reproducer already.
            summary["class"] = KNOWN_CLASS
            return summary
        try:
            summary["replay"], seen = self.replay(prep, found.history)
            if summary["replay"] != "alone":
                summary["replay_saw"] = seen
            small, before = prep.program, []
            if summary["replay"].startswith("after"):
                before, runs, cut = self.minimize_history(prep, found.history)
                summary["minimize_history"] = {"runs": runs,
                                               "programs": [len(found.history), len(before)],
                                               "cut_by_budget": cut}
            if summary["replay"] == "alone":
                small, runs, cut = self.minimize(prep)
                summary["minimize"] = {"runs": runs, "ops": [len(prep.program.ops),
                                                             len(small.ops)],
                                       "header": [len(prep.program.header), len(small.header)],
                                       "cut_by_budget": cut}
            small_path = os.path.join(self.dir, "minimized.prog")
            write_text(small_path, small.text())
            write_text(os.path.join(self.dir, "rules.txt"),
                       "".join(st.text() + "\n" for st in small.of("rule")))
            summary["deterministic"] = self.deterministic(
                prepared("deterministic", small, small_path), before)
        except BootFailed as e:
            summary["triage_error"] = str(e)
            small_path = os.path.join(self.dir, "program.prog")
        finally:
            self._close()
        det = summary.get("deterministic") == "same"
        replayed, what = small_path, "the minimized program"
        if summary.get("replay", "").startswith("after"):
            replayed = self.write_sequence(before, small_path)
            what = (f"the {len(before)} program(s) it needs, then the failing one, in one boot "
                    "(sequence/)")
        write_text(os.path.join(self.dir, "replay.sh"),
                   f"#!/bin/sh\n# replays {what} from a fresh boot\n"
                   + (f"# planted: the guest ran `progexec serve --plant {self.plant}`, which "
                      "`prog run` does not: this replay passes\n" if self.plant else "")
                   + shlex.join(self.replay_argv(replayed, det)) + "\n")
        os.chmod(os.path.join(self.dir, "replay.sh"), 0o755)
        summary["reproducer"] = self.reproducer(small_path, det) \
            if replayed == small_path else (
                "not written: the failure needs the programs before it (sequence/), and a "
                "C reproducer holds one program")
        write_text(os.path.join(self.dir, "failure.json"), json.dumps(summary, indent=1) + "\n")
        return summary
