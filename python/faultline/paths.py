"""Where faultline keeps what it builds and downloads: the cache directory
(FAULTLINE_CACHE, else $XDG_CACHE_HOME/faultline), the versions scripts/setup
recorded in it, and the firmware directories a QEMU run loads."""

import os


CACHE = os.environ.get("FAULTLINE_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "faultline")
VERSIONS = os.path.join(CACHE, "versions.env")
# -L directories after our own share/ (option ROMs built with QEMU):
# SeaBIOS and iPXE from Debian.  Nothing comes from /usr/share/qemu.
FIRMWARE_DIRS = ["/usr/share/seabios", "/usr/lib/ipxe/qemu"]
