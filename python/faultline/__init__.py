"""faultline: fault injection into swap I/O, for Linux kernel developers.

The launcher package (standard library only).  The CLI is cli/;
docs/launcher.md describes the modules and the machine backend contract.
"""

import os

# The checkout: scenarios/, scripts/ (build scripts), runs/.
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
