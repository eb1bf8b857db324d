"""What the vm and slow test scripts (tests/vm/, tests/slow/) share: where
the tree and the run directories are, the kernel that FAULTLINE_KERNEL /
FAULTLINE_MODULES select (set by `faultline check --kernel`), one scenario
run, the verdict line and the exit convention: 0 pass, 1 fail, 2 setup
error.  Importing it puts the launcher package (python/) on sys.path.
"""

import json
import os
import re
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.errors import EXIT_FAIL, EXIT_PASS, EXIT_SETUP, SetupError
from faultline.host import stop
from faultline.run import aborted, runner
from faultline.run.options import RunOptions
from faultline.scenario import ScenarioError

OUT = os.path.join(TOP, "build", "vm-runs")
FAULTLINE = os.path.join(TOP, "scripts", "faultline")


def run_options(**opts):
    """RunOptions for the selected kernel (the launcher's own when unset)."""
    return RunOptions(kernel=os.environ.get("FAULTLINE_KERNEL"),
                             modules=os.environ.get("FAULTLINE_MODULES"), **opts)


def kernel_args():
    """The same kernel as `faultline` command line options."""
    kernel, modules = os.environ.get("FAULTLINE_KERNEL"), os.environ.get("FAULTLINE_MODULES")
    if not kernel:
        return []
    return ["--kernel", kernel] + (["--modules", modules] if modules else [])


def run_one(scenario, opts, out=OUT):
    """(exit status, report, run directory) of one run of scenario."""
    status, results = runner.run_plan([scenario], opts, out=out)
    report, rundir = results[0]
    return status, report, rundir


def read_bytes(rundir, name):
    """A run directory's file, None when it is missing."""
    try:
        with open(os.path.join(rundir, name), "rb") as f:
            return f.read()
    except OSError:
        return None


_STAMP = re.compile(r"^\[\s*\d+\.\d+\]")


def timeline_differences(a, b):
    """(problems, notes) between two deterministic runs' fault logs and
    consoles.  Every fault must match in all but its virtual time; a drift
    of virtual time alone (the known leak of docs/launcher.md: about 3 us
    after a minute, on a loaded host) is a note, every console line but
    its timestamp likewise."""
    problems, notes = [], []
    fa, fb = (read_bytes(d, "faults.jsonl").splitlines() for d in (a, b))
    ja = [json.loads(x) for x in fa if x.strip()]
    jb = [json.loads(x) for x in fb if x.strip()]
    strip = [[{k: v for k, v in e.items() if k != "vns"} for e in j] for j in (ja, jb)]
    if strip[0] != strip[1]:
        problems.append(f"faults.jsonl differs ({a} vs {b})")
    elif ja != jb:
        i = next(i for i, (x, y) in enumerate(zip(ja, jb)) if x != y)
        notes.append(f"note: virtual time drifted from fault {i} on "
                     f"({ja[i]['vns']} vs {jb[i]['vns']} ns), every fault the same")
    ca, cb = (read_bytes(d, "console.log").decode(errors="replace").splitlines()
              for d in (a, b))
    if [_STAMP.sub("", x) for x in ca] != [_STAMP.sub("", x) for x in cb]:
        problems.append(f"console.log differs ({a} vs {b})")
    elif ca != cb:
        notes.append("note: console timestamps differ, every line the same")
    return problems, notes


def verdict(what, problems):
    """Print `what: ok` or `what: the problems`; return the exit status."""
    print(f"{what}: {'; '.join(problems) or 'ok'}")
    return EXIT_FAIL if problems else EXIT_PASS


def exit_with(name, main):
    """Exit with main()'s status; a setup or scenario error is one line on
    stderr and exit 2, never a traceback.  Stopped by a signal (meson's
    timeout), it stops its machines as the launcher does (abort.py)."""
    try:
        stop.install()
        sys.exit(main())
    except stop.Aborted as e:
        sys.exit(aborted.finish(e))
    except (SetupError, ScenarioError) as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        sys.exit(EXIT_SETUP)
