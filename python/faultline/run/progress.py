"""What the user sees while a machine runs."""

import shutil
import sys


class Progress:
    """What the user sees while a VM runs.

    On a terminal: the KTAP stream plus one status line redrawn in place
    (phase, elapsed, rule hits).  Otherwise (CI logs): one line per phase
    change and the failing KTAP lines only, so logs stay short.
    """

    def __init__(self, ntests, quiet=False, stream=None):
        self.out = stream or sys.stdout
        self.tty = self.out.isatty()
        self.quiet = quiet
        self.ntests = ntests
        self.phase = "boot"
        self.tests_started = 0
        self.shown = 0
        self.status_len = 0

    def _clear(self):
        if self.tty and self.status_len:
            self.out.write("\r" + " " * self.status_len + "\r")
            self.status_len = 0

    def update(self, ktap, elapsed, hits):
        lines = [ln for ln in ktap.splitlines(keepends=True) if ln.endswith("\n")]
        phase = self.phase
        for ln in lines[self.shown:]:
            if ln.startswith("# kernel ") and phase == "boot":
                phase = "setup"
            elif ln.startswith("# test: "):
                self.tests_started += 1
                phase = f"test {self.tests_started}/{self.ntests}"
            elif ln.startswith("FAULTLINE-EXIT"):
                phase = "done"
        first, self.shown = self.shown, len(lines)
        self._clear()
        if not self.quiet:
            for i in range(first, len(lines)):
                ln = lines[i]
                if ln.startswith("FAULTLINE-EXIT"):
                    continue
                if self.tty:
                    self.out.write("  | " + ln)
                elif ln.startswith("not ok") or ln.startswith("Bail out"):
                    # With its measured detail, the '# NAME: ...' line before it.
                    name = ln.split(" # ")[0].split(" ", 3)[-1].strip()
                    if i and lines[i - 1].startswith(f"# {name}: "):
                        self.out.write("  | " + lines[i - 1])
                    self.out.write("  | " + ln)
        if phase != self.phase and not self.tty and not self.quiet:
            self.out.write(f"  [{elapsed:6.1f}s] {phase}\n")
        self.phase = phase
        if self.tty and not self.quiet:
            hit_text = " ".join(f"{k}={v}" for k, v in hits.items()) if hits else ""
            status = f"  [{self.phase}] {elapsed:5.1f}s" + (f"  hits: {hit_text}" if hit_text
                                                            else "")
            status = status[:max(20, shutil.get_terminal_size().columns - 1)]
            self.out.write(status)
            self.status_len = len(status)
        self.out.flush()

    def finish(self):
        self._clear()
        self.out.flush()
