"""What a scenario needs of its guest kernel's config, checked before boot.

NEEDS is the one table: each row names a kernel feature, the scenarios that
need it (a predicate on the scenario's data: device kind, swap, the guest
tools its tests run, the metrics it expects) and the options that give it.
An option is met by =y, or by =m when the guest gets the kernel's modules
(Debian's kernel, or --modules); NAME=y takes only =y (a module the guest
image does not load); ?NAME only asks that the kernel know the option (set
or not): it marks a kernel version with the feature.

The config comes from the kernel's own files (find_config): a .config or
config-VERSION beside the image, the build tree of --modules, or the
config embedded in the image (CONFIG_IKCONFIG).  docs/scenarios.md,
"Kernel requirements", is this table for users.
"""

import bz2
import gzip
import lzma
import os
import re
import shutil
import subprocess
import zlib

from faultline.errors import SetupError
from faultline.host.messages import say
from faultline.host.versions import versions

# Guest tools that attach kprobes and kretprobes with hist triggers.
PROBE_TOOLS = {"swapctx", "swaptest"}
# Metrics read from kprobe/kretprobe events.
PROBE_METRICS = ("kprobe ", "kretprobe ", "ctx ", "write_path ")


def command_words(sc):
    """Every word of the scenario's test commands (tools and options)."""
    return {w for t in sc.tests for w in t.split()}


def metric_names(sc):
    return [k for key in ("diag_min", "diag_max") for k in sc.expect.get(key, {})]


def uses_probes(sc):
    return bool(command_words(sc) & PROBE_TOOLS) or any(
        m.startswith(PROBE_METRICS) for m in metric_names(sc))


def uses_shrinker(sc):
    return sc.swap.get("zswap", False) and sc.swap.get("shrinker", True)


# (feature, applies to scenario, options)
NEEDS = [
    ("the guest init: initramfs, devtmpfs, tmpfs, console, swap, cgroup2 memory",
     lambda sc: True,
     # VM_EVENT_COUNTERS: pswpout and the other /proc/vmstat events every test reads.
     ("BLK_DEV_INITRD", "DEVTMPFS", "TMPFS", "SERIAL_8250_CONSOLE=y", "SWAP", "MEMCG",
      "VM_EVENT_COUNTERS")),
    ("NVMe swap device", lambda sc: sc.device.kind == "nvme", ("BLK_DEV_NVME",)),
    ("syncblk guest module (built against the kernel's tree, MSI-X)",
     lambda sc: sc.device.kind == "syncblk", ("MODULES", "PCI_MSI")),
    ("virtio-blk swap device", lambda sc: sc.device.kind == "virtio-blk",
     ("VIRTIO_PCI=y", "VIRTIO_BLK")),
    ("virtio-scsi swap device", lambda sc: sc.device.kind == "virtio-scsi",
     ("VIRTIO_PCI=y", "SCSI_VIRTIO", "BLK_DEV_SD")),
    ("zswap", lambda sc: sc.swap.get("zswap", False), ("ZSWAP=y",)),
    # Only where the guest switches the shrinker on (swap.shrinker, default
    # with zswap): pool-limit writeback exists since zswap began.
    ("zswap shrinker, Linux 6.8+", uses_shrinker, ("?ZSWAP_SHRINKER_DEFAULT_ON",)),
    ("zswap zbud pool (swap.zpool)", lambda sc: sc.swap.get("zpool") == "zbud", ("ZBUD",)),
    ("kprobe/kretprobe metrics (swapctx, swaptest, kprobe diag keys)", uses_probes,
     ("KPROBES=y", "KRETPROBES=y", "KPROBE_EVENTS=y", "HIST_TRIGGERS=y")),
    ("kernel coverage ([vm] kcov, --kcov)", lambda sc: sc.vm.kcov, ("KCOV=y", "DEBUG_FS=y")),
    # Without it the toggler's userfaultfd() is ENOSYS and the race it
    # stresses never runs: refuse the run rather than fail it in the guest.
    ("userfaultfd write-protect (swaprace --wp-toggle)",
     lambda sc: "--wp-toggle" in command_words(sc), ("USERFAULTFD=y",)),
    # A kernel without it ignores preempt= and runs its built-in model.
    ("preemption model chosen at boot (preempt= in [vm] cmdline)",
     lambda sc: re.search(r"(^|\s)preempt=", sc.vm.cmdline) is not None,
     ("PREEMPT_DYNAMIC=y",)),
]


def needs(sc):
    """[(feature, [option spec])] that scenario @sc needs, from NEEDS."""
    return [(feature, list(opts)) for feature, applies, opts in NEEDS if applies(sc)]


_LINE = re.compile(r"^(?:CONFIG_(\w+)=(.*)|# CONFIG_(\w+) is not set)$")


def parse(text):
    """{NAME: value} of a .config text ("n" for `# CONFIG_X is not set`)."""
    vals = {}
    for ln in text.splitlines():
        m = _LINE.match(ln.strip())
        if m:
            if m.group(1):
                vals[m.group(1)] = m.group(2).strip('"')
            else:
                vals[m.group(3)] = "n"
    return vals


def missing(sc, config, have_modules):
    """The options of @config ({NAME: value}) that @sc needs and lacks:
    ["CONFIG_X (feature)", ...]; =m counts only with @have_modules."""
    out = []
    for feature, specs in needs(sc):
        for spec in specs:
            name, strict = spec.lstrip("?").split("=")[0], spec.endswith("=y")
            val = config.get(name)
            if spec.startswith("?"):
                if val is None:
                    out.append(f"CONFIG_{name} unknown to this kernel ({feature})")
            elif val == "m" and not strict and not have_modules:
                out.append(f"CONFIG_{name}=m but no --modules ({feature})")
            elif val != "y" and not (val == "m" and not strict):
                got = " not set" if val in (None, "n") else f"={val}"
                out.append(f"CONFIG_{name}{got}, needs =y{'' if strict else ' or =m'} "
                           f"({feature})")
    return out


# ------------------------------------------------------------ finding a config

IKCFG_ST, IKCFG_ED = b"IKCFG_ST", b"IKCFG_ED"
# Compressed payloads a bzImage may carry (scripts/extract-ikconfig's list):
# magic, and how to decompress from there (stdlib, else the Debian tool).
_PAYLOADS = [
    (b"\x1f\x8b\x08", "gzip"), (b"\xfd7zXZ\x00", "xz"), (b"BZh", "bzip2"),
    (b"\x5d\x00\x00\x00", "lzma"), (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\x89LZO", "lzop"), (b"\x02\x21\x4c\x18", "lz4"),
]


def _decompress(data, kind):
    """As much of @data as decompresses as @kind; b"" when it does not."""
    try:
        if kind == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data)
        if kind == "xz":
            return lzma.LZMADecompressor(lzma.FORMAT_XZ).decompress(data)
        if kind == "lzma":
            return lzma.LZMADecompressor(lzma.FORMAT_ALONE).decompress(data)
        if kind == "bzip2":
            return bz2.BZ2Decompressor().decompress(data)
    except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
        return b""
    if not shutil.which(kind):
        return b""
    # A trailing garbage error is expected: the payload ends inside the image.
    res = subprocess.run([kind, "-dc"], input=data, capture_output=True)
    return res.stdout


def _ikconfig_in(data):
    i = data.find(IKCFG_ST)
    if i < 0:
        return None
    j = data.find(IKCFG_ED, i)
    blob = data[i + len(IKCFG_ST):j if j > 0 else None]
    try:
        return gzip.decompress(blob).decode(errors="replace")
    except (OSError, EOFError):
        return None


def ikconfig(image):
    """The config embedded in kernel @image (CONFIG_IKCONFIG), or None: in
    the image as is (a vmlinux), else in its compressed payload."""
    try:
        with open(image, "rb") as f:
            data = f.read()
    except OSError:
        return None
    found = _ikconfig_in(data)
    if found is not None:
        return found
    for magic, kind in _PAYLOADS:
        start = 0
        for _ in range(4):      # the first few candidates: a magic may occur by chance
            at = data.find(magic, start)
            if at < 0:
                break
            found = _ikconfig_in(_decompress(data[at:], kind))
            if found is not None:
                return found
            start = at + 1
    return None


def _headers_of(modules):
    """The build tree of lib/modules/VERSION (its build link, also when it
    points into /usr/src/ of Debian packages unpacked elsewhere)."""
    link = os.path.join(modules, "build")
    if not os.path.islink(link):
        return None
    if os.path.isdir(link):
        return os.path.realpath(link)
    target = os.readlink(link)
    mod = os.path.abspath(modules)
    for marker in ("/usr/lib/modules/", "/lib/modules/"):
        if marker in mod and target.startswith("/"):
            root = mod[:mod.index(marker)]
            if os.path.isdir(root + target):
                return root + target
    return None


def config_candidates(kernel, modules):
    """Files that may hold @kernel's config, most specific first."""
    kdir = os.path.dirname(os.path.abspath(kernel))
    out = [os.path.join(kdir, ".config"), os.path.join(kdir, "config")]
    base = os.path.basename(kernel)
    for prefix in ("vmlinuz-", "bzImage-", "vmlinux-"):
        if base.startswith(prefix):     # Debian's /boot/config-VERSION
            out.append(os.path.join(kdir, "config-" + base[len(prefix):]))
    parts = os.path.abspath(kernel).split(os.sep)
    if len(parts) > 4 and parts[-4] == "arch" and parts[-2] == "boot":
        out.append(os.sep.join(parts[:-4] + [".config"]))      # TREE/arch/X/boot/bzImage
    if modules:
        out.append(os.path.join(modules, ".config"))
        tree = _headers_of(modules)
        if tree:
            out.append(os.path.join(tree, ".config"))
    return out


def find_config(kernel=None, modules=None):
    """(where, {NAME: value}) of the kernel's config, or (None, None).
    Debian's default kernel: its headers' .config (scripts/setup)."""
    if not kernel:
        headers = versions().get("KERNEL_HEADERS")
        cands = [os.path.join(headers, ".config")] if headers else []
    else:
        cands = config_candidates(kernel, modules)
    for path in cands:
        if os.path.isfile(path):
            with open(path, errors="replace") as f:
                return path, parse(f.read())
    if kernel:
        text = ikconfig(kernel)
        if text is not None:
            return f"{kernel} (embedded)", parse(text)
    return None, None


def has_option(option, kernel=None, modules=None):
    """Whether the kernel's config sets CONFIG_@option=y (False when its
    config is not found)."""
    _, config = find_config(kernel, modules)
    return bool(config) and config.get(option) == "y"


def check(scs, kernel=None, modules=None):
    """Refuse, before anything is built or booted, scenarios whose kernel
    config lacks what they need: one line listing the missing options."""
    if kernel and not os.path.isfile(kernel):
        raise SetupError(f"--kernel {kernel}: no such file")
    if modules and not os.path.isdir(modules):
        raise SetupError(f"--modules {modules}: no such directory")
    where, config = find_config(kernel, modules)
    if config is None and kernel:       # Debian's own kernel is known-good
        say(f"warning: no config found for kernel {kernel} (no .config beside it or in "
            "--modules, none embedded): its options are not checked")
    lines = []
    for sc in scs:
        miss = []
        if sc.device.kind == "syncblk" and kernel and not modules:
            miss.append("--modules DIR (the syncblk guest module is built against the "
                        "kernel's tree)")
        if config is not None:
            miss += missing(sc, config, bool(modules) or not kernel)
        if miss:
            lines.append(f"{sc.name}: " + ", ".join(miss))
    if lines:
        raise SetupError(f"kernel {kernel or 'default'} ({where or 'no config'}) lacks what "
                         "the scenario needs: " + "; ".join(lines))


def check_image(sc, guest_dir):
    """A syncblk scenario needs the syncblk module in the guest image;
    build-guest lists the project modules it built (or why none)."""
    if sc.device.kind != "syncblk":
        return
    try:
        with open(os.path.join(guest_dir, "guest-modules")) as f:
            lines = f.read().splitlines()
    except OSError:
        return      # an image from before the list: the guest says it (modprobe)
    if "syncblk" not in lines:
        why = next((ln[2:] for ln in lines if ln.startswith("# ")), "not built")
        raise SetupError(f"{sc.name} needs the syncblk guest module, which this guest "
                         f"image lacks: {why}")
