"""One line to the user: `faultline: ...` on stderr."""

import sys


def say(msg):
    print(f"faultline: {msg}", file=sys.stderr, flush=True)
