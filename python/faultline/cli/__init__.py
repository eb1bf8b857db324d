"""The command line: the parser (parser.py) and the command front ends
(commands.py) that hand typed options to the domain modules."""

import os
import subprocess
import sys

from faultline import scenario
from faultline.cli.commands import COMMANDS, resolve_kernels
from faultline.cli.parser import parser
from faultline.errors import EXIT_SETUP, SetupError
from faultline.host import stop, versions
from faultline.host.messages import say
from faultline.run import aborted


def main(argv=None):
    p = parser()
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        p.print_help(sys.stderr)
        return EXIT_SETUP
    try:
        args = p.parse_args(argv)
    except SystemExit as e:     # a bad value (one line printed), --help, --version
        return e.code
    if args.cmd in ("run", "check", "build", "cmdline", "libvirt-xml") and args.modules and not args.kernel:
        p.error("--modules needs --kernel")
    try:
        # Here, not per command: a signal stops any command in order
        # (docs/launcher.md); and what a killed launcher left is removed.
        stop.install()
        versions.git_describe()     # what this process runs, before the checkout can move
        aborted.sweep()
        resolve_kernels(args)     # --kernel NAME: a kernel built by `faultline kernel`
        status = COMMANDS[args.cmd](args)
        stop.check()
        return stop.settle(status)
    except stop.Aborted as e:
        return aborted.finish(e)
    except (SetupError, scenario.ScenarioError) as e:
        say(f"error: {e}")
        return EXIT_SETUP
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except (OSError, subprocess.CalledProcessError) as e:
        say(f"error: {e}")
        return EXIT_SETUP
    except Exception as e:  # noqa: BLE001 - one line for users, traceback on request
        if os.environ.get("FAULTLINE_DEBUG"):
            raise
        say(f"internal error: {type(e).__name__}: {e} (FAULTLINE_DEBUG=1 shows the traceback)")
        return EXIT_SETUP
