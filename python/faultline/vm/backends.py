"""The machine backends by name: a plain import table, so the import graph
shows every edge (runner and the cli -> backends -> qemu, libvirt, lava).
A backend module never imports runner or the cli (tests/unit/test_imports.py)."""

from faultline.errors import SetupError
from faultline.vm.lava import LavaMachine
from faultline.vm.libvirt import LibvirtMachine
from faultline.vm.qemu import QemuMachine

# Name -> Machine subclass, in the order --help lists them.
BACKENDS = {cls.backend: cls for cls in (QemuMachine, LibvirtMachine, LavaMachine)}


def backend_class(name):
    """The Machine subclass of backend @name."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise SetupError(f"unknown backend {name!r} "
                         f"(expected one of {', '.join(BACKENDS)})") from None
