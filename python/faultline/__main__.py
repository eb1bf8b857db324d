"""`python3 -m faultline`: the command line (cli/)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
