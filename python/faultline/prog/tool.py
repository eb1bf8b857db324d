"""`faultline prog check` and `faultline prog gen` (docs/programs.md, Tools)."""

import os
import sys

from faultline.errors import EXIT_SETUP, SetupError
from faultline.prog.check import check
from faultline.prog.gen import generate
from faultline.prog.lang import ProgramError, read

MAX_COUNT = 100000


def check_files(paths):
    """0 when every program is valid, else EXIT_SETUP after printing
    `FILE:LINE: reason` of the first bad line."""
    for path in paths:
        try:
            check(read(path))
        except ProgramError as e:
            print(e, file=sys.stderr, flush=True)
            return EXIT_SETUP
    return 0


def program_paths(out, count):
    """DIR/0001.prog ... for COUNT programs; SetupError (before anything is
    written) when DIR is a file or already holds one of them."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise SetupError(f"--out {out}: not a directory")
    width = max(4, len(str(count)))
    paths = [os.path.join(out, f"{i:0{width}d}.prog") for i in range(1, count + 1)]
    taken = [p for p in paths if os.path.exists(p)]
    if taken:
        raise SetupError(f"--out {out}: {os.path.basename(taken[0])} exists (expected a new "
                         "or empty directory: programs are not overwritten)")
    return paths


def write_programs(seed, count, out):
    """COUNT programs of seeds SEED, SEED+1, ... into OUT; their paths."""
    if not 1 <= count <= MAX_COUNT:
        raise SetupError(f"--count {count}: expected 1 to {MAX_COUNT}")
    paths = program_paths(out, count)
    os.makedirs(out, exist_ok=True)
    for i, path in enumerate(paths):
        text = generate(seed + i, path=path).text()
        with open(path, "w") as f:
            f.write(text)
    return paths
