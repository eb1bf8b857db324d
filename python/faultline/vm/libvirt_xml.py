"""The libvirt domain XML of a MachineSpec: the same QEMU command line as the
qemu backend, as a transient domain's <qemu:commandline>, with an owner
element the next launcher's sweep can find."""

import calendar
import os
import re
import secrets
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET

from faultline.errors import SetupError

QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
OWNER_NS = "urn:faultline:owner"
ZERO_UUID = "00000000-0000-0000-0000-000000000000"


# ---------------------------------------------------------------- domain XML

def _size_kib(text):
    m = re.fullmatch(r"(\d+)([KMGT]?)i?B?", str(text).strip(), re.I)
    if not m:
        raise SetupError(f"libvirt backend: memory {text!r}: expected e.g. 512M or 1G")
    scale = {"": 1 << 10, "K": 1, "M": 1 << 10, "G": 1 << 20, "T": 1 << 30}
    unit = m.group(2).upper()
    # A bare number is MiB, as for QEMU's -m.
    return int(m.group(1)) * scale[unit]


def _epoch(iso):
    """'2026-01-01T00:00:00' (UTC) -> seconds since the epoch."""
    try:
        return calendar.timegm(time.strptime(iso, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        raise SetupError(f"libvirt backend: -rtc base={iso!r} is not "
                         "YYYY-MM-DDTHH:MM:SS") from None


def _machine_options(spec):
    """Map spec.extra_args onto libvirt elements where libvirt has them.

    Returns (vcpus, clock element attributes, rtc track, passthrough argv).
    -smp and -rtc must be libvirt's (it always emits its own, and two -rtc
    would merge by accident); -accel follows the domain type; the rest
    (-icount ...) goes through <qemu:commandline> unchanged."""
    vcpus, clock, track, rest = spec.cpus, {"offset": "utc"}, None, []
    args = list(spec.extra_args)
    while args:
        opt = args.pop(0)
        val = args.pop(0) if args and opt in ("-smp", "-rtc", "-accel", "-icount",
                                              "-machine", "-m", "-cpu") else None
        if opt == "-smp":
            first = val.split(",")[0].split("=")[-1]     # "2" or "cpus=2"
            if not first.isdigit():
                raise SetupError(f"libvirt backend: -smp {val!r}: expected a vCPU count")
            vcpus = int(first)
        elif opt == "-rtc":
            for kv in val.split(","):
                k, _, v = kv.partition("=")
                if k == "base" and v == "utc":
                    clock = {"offset": "utc"}
                elif k == "base" and v == "localtime":
                    clock = {"offset": "localtime"}
                elif k == "base":
                    clock = {"offset": "absolute", "start": str(_epoch(v))}
                elif k == "clock" and v in ("vm", "host", "rt"):
                    track = {"vm": "guest", "host": "wall", "rt": "realtime"}[v]
                else:
                    raise SetupError(f"libvirt backend: -rtc {kv!r} has no libvirt form")
        elif opt == "-accel":
            if val not in ("tcg", "kvm"):
                raise SetupError(f"libvirt backend: -accel {val!r}: tcg or kvm")
        elif val is not None:
            rest += [opt, val]
        else:
            rest.append(opt)
    return vcpus, clock, track, rest


def domain_xml(spec, name, by_hand=False, owner=None):
    """The domain XML of one run (a string); see the module docstring.

    @by_hand: for `virsh create` without the launcher, whose event callback
    would pause the reset: the domain ends when the guest powers off.
    @owner: the launcher's procs.identity(), kept in <metadata>."""
    vcpus, clock, track, passthrough = _machine_options(spec)
    dom = ET.Element("domain", {"type": "kvm" if spec.accel == "kvm" else "qemu"})
    ET.SubElement(dom, "name").text = name
    ET.SubElement(dom, "description").text = (
        f"faultline scenario {spec.scenario}; run directory {spec.rundir}")
    if owner:
        ET.SubElement(ET.SubElement(dom, "metadata"), f"{{{OWNER_NS}}}owner",
                      {k: str(v) for k, v in owner.items()})
    ET.SubElement(dom, "memory", unit="KiB").text = str(_size_kib(spec.memory))
    ET.SubElement(dom, "vcpu").text = str(vcpus)
    # QEMU's own -smp N makes N cores in one socket; libvirt's <vcpu> alone
    # makes N sockets, a topology the guest sees (another deterministic run).
    topo = ET.SubElement(dom, "cpu")
    ET.SubElement(topo, "topology", sockets="1", dies="1", cores=str(vcpus), threads="1")
    os_ = ET.SubElement(dom, "os")
    ET.SubElement(os_, "type", arch="x86_64", machine="q35").text = "hvm"
    ET.SubElement(os_, "kernel").text = spec.kernel
    ET.SubElement(os_, "initrd").text = spec.initrd
    ET.SubElement(os_, "cmdline").text = spec.append
    # Without <acpi/> libvirt 9.0 passes -no-acpi, which QEMU 10 removed.
    ET.SubElement(ET.SubElement(dom, "features"), "acpi")
    clk = ET.SubElement(dom, "clock", clock)
    if track:
        ET.SubElement(clk, "timer", name="rtc", track=track)
    # Reset instead of kill; the event callback then pauses (module docstring).
    ET.SubElement(dom, "on_poweroff").text = "destroy" if by_hand else "restart"
    ET.SubElement(dom, "on_reboot").text = "destroy" if by_hand else "restart"
    ET.SubElement(dom, "on_crash").text = "destroy"
    devs = ET.SubElement(dom, "devices")
    ET.SubElement(devs, "emulator").text = spec.qemu_binary
    # Nothing on the PCI bus but our device, as with the qemu backend.
    ET.SubElement(devs, "controller", type="usb", model="none")
    ET.SubElement(devs, "memballoon", model="none")
    cmd = ET.SubElement(dom, f"{{{QEMU_NS}}}commandline")
    argv = []
    for d in spec.firmware_dirs:
        argv += ["-L", d]
    # libvirt passes -uuid (random per domain), which QEMU also writes into
    # SMBIOS type 1, and each UUID gives a deterministic run another digest
    # (measured with the qemu backend).  Its guest sees the all-zero UUID:
    # give this one that too.
    argv += ["-smbios", "type=1,uuid=" + ZERO_UUID]
    # libvirt always passes -boot strict=on; SeaBIOS then runs another path
    # before the kernel and a deterministic run lands on another digest
    # (measured: -boot strict=on alone changes it).  -boot options merge, the
    # last one wins.
    argv += ["-boot", "strict=off"]
    # The serial ports as QEMU's own -serial, not libvirt <serial> elements:
    # libvirt makes those -device isa-serial after machine init, which moves
    # the boot in virtual time (measured: the qemu backend with only that
    # change gives libvirt's digest, b29e5872ffd8c976 for f6bc6497d3164bb1).
    for log in ("console.log", "ktap.log"):
        argv += ["-serial", "file:" + os.path.join(spec.rundir, log)]
    argv += passthrough + list(spec.device_args)
    for a in argv:
        ET.SubElement(cmd, f"{{{QEMU_NS}}}arg", value=a)
    ET.register_namespace("qemu", QEMU_NS)
    ET.register_namespace("faultline", OWNER_NS)
    ET.indent(dom)
    return ET.tostring(dom, encoding="unicode") + "\n"


def new_domain_name(scenario):
    """Unique per run: two launchers never fight over one name."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", scenario)[:40]
    return f"faultline-{safe}-{os.getpid()}-{secrets.token_hex(3)}"


def validate_xml(path):
    """virt-xml-validate's verdict on @path: None when valid or not installed,
    else its message (one line)."""
    tool = shutil.which("virt-xml-validate")
    if not tool:
        return None
    r = subprocess.run([tool, path, "domain"], capture_output=True, text=True)
    if r.returncode == 0:
        return None
    msg = (r.stderr or r.stdout).strip().splitlines()
    return msg[0] if msg else f"virt-xml-validate exit {r.returncode}"
