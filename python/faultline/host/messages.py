"""One line to the user: `faultline: ...` on stderr."""

import sys


def say(msg):
    # On a terminal, over a build's progress line (host/step_progress.py), which
    # is redrawn below it.
    clear = "\r\033[K" if sys.stderr.isatty() else ""
    print(f"{clear}faultline: {msg}", file=sys.stderr, flush=True)
