"""Exit codes and the one user-facing error type."""

EXIT_PASS, EXIT_FAIL, EXIT_SETUP, EXIT_CRASH = 0, 1, 2, 3
OUTCOMES = {EXIT_PASS: "pass", EXIT_FAIL: "fail", EXIT_SETUP: "setup-error",
            EXIT_CRASH: "crash"}


class SetupError(Exception):
    """A missing piece the user can fix; printed as one line, exit 2."""
