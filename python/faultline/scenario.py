"""faultline scenario files: load and validate.

A scenario is one TOML file in scenarios/ (format: docs/scenarios.md).
Every key is checked; a typo gives a one-line error naming the file and key.
"""

import difflib
import os
import re
import shlex
import tomllib
from dataclasses import MISSING, dataclass, field

from faultline import TOP

SCENARIO_DIR = os.path.join(TOP, "scenarios")


class ScenarioError(Exception):
    pass


_SIZE = re.compile(r"^(\d+)([KMGT]?)$")
_DUR = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)$")


def parse_size(v, where):
    m = _SIZE.match(str(v).strip().upper())
    if not m:
        raise ScenarioError(f"{where}: bad size {v!r} (expected e.g. 512M, 2G)")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[m.group(2)]


def parse_duration(v, where):
    m = _DUR.match(str(v).strip())
    if not m or float(m.group(1)) <= 0:
        raise ScenarioError(f"{where}: bad duration {v!r} (expected e.g. 180s, 3m)")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60}[m.group(2)]


# The fault-injector's seed is a QOM uint64 (hw/fault/fault-injector.c).
SEED_MAX = (1 << 64) - 1

# Below this the Debian guest kernel and its initramfs do not boot.
MIN_MEMORY = 128 << 20


def check_memory(v, where):
    """A guest RAM size (vm.memory, --memory): bytes."""
    n = parse_size(v, where)
    if n < MIN_MEMORY:
        raise ScenarioError(f"{where} {v}: below {MIN_MEMORY >> 20}M, the guest cannot boot")
    return n


def check_seed(v, where):
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= SEED_MAX:
        raise ScenarioError(f"{where} {v!r} is out of range (seeds are 0 to 2^64-1)")
    return v


def read_rules(path, where):
    """The text of a rules file (faults.rules_file, --rules), or one
    ScenarioError line: missing, unreadable or not text."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ScenarioError(f"{where}: {e.strerror}: {path}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{where}: {path} is not a text file (byte 0x{data[e.start]:02x} "
                            f"at offset {e.start})") from None


# Optional guest tools (scripts/build-guest --tools): opt-in, fio is ~80 MB.
GUEST_TOOLS = ("fio", "nvme-cli")


@dataclass
class Vm:
    memory: str = "512M"
    cpus: int = 2
    cmdline: str = "transparent_hugepage=never"
    panic_on_oops: bool = True
    tools: list = field(default_factory=list)
    # The tests' kernel coverage (kcov) in their KTAP, for explore's feedback.
    kcov: bool = False


@dataclass
class Device:
    kind: str = "nvme"
    completion: str = "task"
    size: str = "1G"
    size_bytes: int = 1 << 30
    extra: str = ""
    # On a hot-pluggable pcie-root-port, with QEMU id HOTPLUG_ID (device_del).
    hotplug: bool = False


# The QEMU id of the swap device with [device] hotplug = true.
HOTPLUG_ID = "swapdev"


@dataclass
class QmpAction:
    """[[qmp]]: send QMP @execute (@arguments) once, when a line of the guest's
    @source (ktap or console) first contains @when."""
    when: str
    execute: str
    arguments: dict = field(default_factory=dict)
    source: str = "ktap"


@dataclass
class Faults:
    seed: int = 1
    rules: str = ""
    rules_file: str = ""    # relative to the scenario file; appended to rules


COMPARE_DIRECTIONS = ("increase", "decrease", "zero", "unchanged")


# What swaptest's patch-specific checks (dropbehind) assume of the kernel:
# "patched" asserts them, "stock" reports them as XFAIL baselines, "auto"
# detects the patch (docs/scenarios.md, "Kernel mode").
KERNEL_MODES = ("auto", "stock", "patched")


@dataclass
class Compare:
    metrics: list = field(default_factory=list)
    expect: dict = field(default_factory=dict)
    kernel_modes: list = field(default_factory=lambda: ["auto", "auto"])  # baseline, series


@dataclass
class Scenario:
    name: str
    path: str
    description: str
    timeout_s: float
    vm: Vm
    device: Device
    faults: Faults
    swap: dict
    tests: list
    expect: dict = field(default_factory=dict)
    compare: Compare = field(default_factory=Compare)
    kernel_mode: str = "auto"
    mutate: str = ""        # --mutate KIND (mutate.py): its rule is in faults.rules
    # Why the scenario cannot be reproduced by --deterministic ("" = it can).
    nondeterministic: str = ""
    rules_override: str = ""    # --rules FILE: its path (the rules are its text)
    qmp: list = field(default_factory=list)     # QmpAction, in file order


def _check_keys(table, allowed, where):
    for k in table:
        if k not in allowed:
            raise ScenarioError(f"{where}: unknown key {k!r} (expected one of "
                                f"{', '.join(sorted(allowed))})")


# nvme and syncblk are faultline's devices; virtio-blk and virtio-scsi are
# QEMU's, their disk behind the fault-inject block filter (docs/devices.md,
# "Block filter").
DEVICE_KINDS = ("nvme", "syncblk", "virtio-blk", "virtio-scsi")
# Frontends whose Linux driver never times a request out: a lost
# completion hangs the guest for good (measured on virtio-scsi: swapoff
# stuck in D state, no SCSI timeout ever logged).
NO_TIMEOUT_KINDS = {
    "virtio-blk": "Linux virtio_blk has no request timeout",
    "virtio-scsi": "Linux virtio_scsi re-arms the timer of a timed-out command "
                   "(virtscsi_eh_timed_out)",
}


def _rules_with(rules, pred):
    """Names (or rN positions) of the rules whose tokens satisfy @pred."""
    out = []
    for i, line in enumerate(r for r in rules.splitlines()
                             if r.split("#", 1)[0].strip()):
        tokens = line.split("#", 1)[0].split()
        name = tokens[0].split(":", 1)[0] if ":" in tokens[0] else f"r{i}"
        if pred(tokens):
            out.append(name)
    return out


def _lost_completion_rules(rules):
    """Names (or rN positions) of the rules that drop completions."""
    return _rules_with(rules, lambda t: "drop" in t or "error=timeout" in t)


def _check_controller_failure(kind, rules, where):
    """fatal and reset-fail= exist on NVMe only (QEMU refuses them elsewhere)."""
    failing = [] if kind == "nvme" else _rules_with(
        rules, lambda t: "fatal" in t or any(x.startswith("reset-fail=") for x in t))
    if failing:
        raise ScenarioError(f"{where}: rule {failing[0]!r} fails the controller (fatal, "
                            f"reset-fail=), which only kind = \"nvme\" has")


def _check_lost_completions(kind, rules, where):
    why = NO_TIMEOUT_KINDS.get(kind)
    lost = _lost_completion_rules(rules) if why else []
    if lost:
        raise ScenarioError(f"{where}: rule {lost[0]!r} drops completions, but {why}: "
                            f"the guest would hang forever (use kind = \"nvme\" or "
                            f"\"syncblk\")")


def check_rules_for_device(kind, rules, where):
    """What the device of @kind cannot take, whichever file the rules came
    from (the scenario's rules, its rules_file, --rules)."""
    _check_lost_completions(kind, rules, where)
    _check_controller_failure(kind, rules, where)


EXPECT_KEYS = {"rule_hits_min", "kernel_log", "vmstat_min", "diag_min", "diag_max",
               "fault_log_only"}


def find(name):
    """The file of scenario @name: a path, or a name in scenarios/ (with
    or without .toml)."""
    if os.path.exists(name):
        return name
    if os.sep in name:
        raise ScenarioError(f"no scenario file {name}")
    base = name[:-5] if name.endswith(".toml") else name
    path = os.path.join(SCENARIO_DIR, base + ".toml")
    if os.path.exists(path):
        return path
    have = sorted(f[:-5] for f in os.listdir(SCENARIO_DIR) if f.endswith(".toml"))
    close = difflib.get_close_matches(base, have, n=3, cutoff=0.6)
    hint = (f"did you mean {' or '.join(close)}?" if close
            else "`faultline list` shows them")
    raise ScenarioError(f"no scenario {name!r}: {hint}")


def load(name):
    path = find(name)
    try:
        with open(path, "rb") as f:
            d = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: {e}") from None
    w = os.path.basename(path)
    _check_keys(d, {"description", "timeout", "vm", "device", "faults", "swap", "test",
                    "expect", "compare", "kernel_mode", "nondeterministic", "qmp"}, w)
    kernel_mode = d.get("kernel_mode", "auto")
    if kernel_mode not in KERNEL_MODES:
        raise ScenarioError(f"{w}: kernel_mode {kernel_mode!r} (expected one of "
                            f"{', '.join(KERNEL_MODES)})")
    nondet = d.get("nondeterministic", "")
    if not isinstance(nondet, str) or ("nondeterministic" in d and not nondet.strip()):
        raise ScenarioError(f"{w}: nondeterministic must say why, e.g. "
                            "nondeterministic = \"the workload reads host time\"")
    vm = Vm(**_table(d, "vm", Vm, w))
    check_memory(vm.memory, f"{w}: vm.memory")
    dev = Device(**_table(d, "device", Device, w, skip={"size_bytes"}))
    if dev.kind not in DEVICE_KINDS:
        raise ScenarioError(f"{w}: device.kind {dev.kind!r} (expected "
                            f"{', '.join(DEVICE_KINDS[:-1])} or {DEVICE_KINDS[-1]})")
    if dev.completion not in ("task", "irq", "thread"):
        raise ScenarioError(f"{w}: device.completion {dev.completion!r} "
                            "(expected task, irq or thread)")
    if not 1 <= vm.cpus <= 64:
        raise ScenarioError(f"{w}: vm.cpus {vm.cpus} (expected 1-64)")
    if not all(t in GUEST_TOOLS for t in vm.tools):
        raise ScenarioError(f"{w}: vm.tools {vm.tools!r} (expected a list of: "
                            f"{', '.join(GUEST_TOOLS)})")
    dev.size_bytes = parse_size(dev.size, f"{w}: device.size")
    if dev.size_bytes < (16 << 20):
        raise ScenarioError(f"{w}: device.size {dev.size} is below 16M")
    if dev.extra and not dev.extra.startswith(","):
        dev.extra = "," + dev.extra
    if dev.hotplug and dev.kind == "virtio-scsi":
        raise ScenarioError(f"{w}: device.hotplug: the swap disk of kind \"virtio-scsi\" is a "
                            "scsi-hd, not a PCI device (use nvme, syncblk or virtio-blk)")
    faults = Faults(**_table(d, "faults", Faults, w))
    check_seed(faults.seed, f"{w}: faults.seed")
    if faults.rules_file:
        rpath = os.path.join(os.path.dirname(os.path.abspath(path)), faults.rules_file)
        faults.rules = (faults.rules.rstrip("\n") + "\n" if faults.rules.strip()
                        else "") + read_rules(rpath, f"{w}: faults.rules_file")
    check_rules_for_device(dev.kind, faults.rules, w)
    swap = d.get("swap", {})
    _check_keys(swap, {"zswap", "enabled", "shrinker", "zpool"}, f"{w}: [swap]")
    if not isinstance(swap.get("enabled", True), bool):
        raise ScenarioError(f"{w}: swap.enabled must be a bool")
    _check_zswap_keys(swap, w)
    tests = []
    for i, t in enumerate(d.get("test", [])):
        _check_keys(t, {"run", "args"}, f"{w}: [[test]] #{i + 1}")
        if not isinstance(t.get("run"), str) or not t["run"].strip():
            raise ScenarioError(f"{w}: [[test]] #{i + 1} needs run = \"command\"")
        args = t.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, (str, int)) for a in args):
            raise ScenarioError(f"{w}: [[test]] #{i + 1} args must be a list of strings")
        # args are quoted for the guest shell; run is taken as written.
        tests.append(" ".join([t["run"]] + [shlex.quote(str(a)) for a in args]))
    if not tests:
        raise ScenarioError(f"{w}: no [[test]] to run")
    expect = d.get("expect", {})
    if not isinstance(expect, dict):
        raise ScenarioError(f"{w}: [expect] must be a table")
    _check_keys(expect, EXPECT_KEYS, f"{w}: [expect]")
    only = expect.get("fault_log_only", {})
    if not isinstance(only, dict) or not only or not all(
            isinstance(v, (int, str)) and not isinstance(v, bool) for v in only.values()):
        if "fault_log_only" in expect:
            raise ScenarioError(f"{w}: expect.fault_log_only must be a table of "
                                "fault log field = value (e.g. {{ sq = 2 }})")
    compare = _compare(d, w)
    qmp = _qmp_actions(d, w)
    return Scenario(name=os.path.basename(path)[:-5], path=os.path.abspath(path),
                    description=d.get("description", ""),
                    timeout_s=parse_duration(d.get("timeout", "300s"), f"{w}: timeout"),
                    vm=vm, device=dev, faults=faults, swap=swap, tests=tests, expect=expect,
                    compare=compare, kernel_mode=kernel_mode,
                    nondeterministic=nondet.strip(), qmp=qmp)


def _qmp_actions(d, where):
    """[[qmp]] tables: QMP commands the launcher sends at a guest line."""
    t = d.get("qmp", [])
    if not isinstance(t, list):
        raise ScenarioError(f"{where}: qmp must be an array of tables ([[qmp]])")
    out = []
    for i, a in enumerate(t):
        w = f"{where}: [[qmp]] #{i + 1}"
        if not isinstance(a, dict):
            raise ScenarioError(f"{w} must be a table")
        _check_keys(a, {"when", "execute", "arguments", "source"}, w)
        for key in ("when", "execute"):
            if not isinstance(a.get(key), str) or not a[key].strip():
                raise ScenarioError(f"{w} needs {key} = \"...\" (a non-empty string)")
        if not isinstance(a.get("arguments", {}), dict):
            raise ScenarioError(f"{w}: arguments must be a table, e.g. "
                                f"arguments = {{ id = \"{HOTPLUG_ID}\" }}")
        if a.get("source", "ktap") not in ("ktap", "console"):
            raise ScenarioError(f"{w}: source {a.get('source')!r} (expected ktap or console)")
        out.append(QmpAction(when=a["when"], execute=a["execute"].strip(),
                             arguments=dict(a.get("arguments", {})),
                             source=a.get("source", "ktap")))
    return out


def _compare(d, where):
    """[compare]: default metrics and expected directions for `faultline compare`."""
    t = d.get("compare", {})
    if not isinstance(t, dict):
        raise ScenarioError(f"{where}: [compare] must be a table")
    _check_keys(t, {"metrics", "expect", "kernel_modes"}, f"{where}: [compare]")
    metrics = t.get("metrics", [])
    if not isinstance(metrics, list) or not all(isinstance(m, str) and m for m in metrics):
        raise ScenarioError(f"{where}: compare.metrics must be a list of metric names")
    expect = t.get("expect", {})
    if not isinstance(expect, dict):
        raise ScenarioError(f"{where}: compare.expect must be a table of metric = direction")
    for metric, direction in expect.items():
        if direction not in COMPARE_DIRECTIONS:
            raise ScenarioError(f"{where}: compare.expect.{metric} {direction!r} (expected one "
                                f"of {', '.join(COMPARE_DIRECTIONS)})")
    modes = t.get("kernel_modes", ["auto", "auto"])
    if not isinstance(modes, list) or len(modes) != 2 or not all(m in KERNEL_MODES
                                                                 for m in modes):
        raise ScenarioError(f"{where}: compare.kernel_modes {modes!r} (expected [BASELINE, "
                            f"SERIES], each one of {', '.join(KERNEL_MODES)})")
    return Compare(metrics=list(metrics), expect=dict(expect), kernel_modes=list(modes))


def apply_overrides(sc, memory=None, cpus=None, timeout=None):
    """Command-line --memory/--cpus/--timeout, validated like the file's keys."""
    if memory is not None:
        check_memory(memory, "--memory")
        sc.vm.memory = memory
    if cpus is not None:
        if not 1 <= int(cpus) <= 64:
            raise ScenarioError(f"--cpus {cpus}: expected 1-64")
        sc.vm.cpus = int(cpus)
    if timeout is not None:
        sc.timeout_s = parse_duration(timeout, "--timeout")
    return sc


def _table(d, key, cls, where, skip=()):
    t = d.get(key, {})
    if not isinstance(t, dict):
        raise ScenarioError(f"{where}: [{key}] must be a table")
    allowed = set(cls.__dataclass_fields__) - set(skip)
    _check_keys(t, allowed, f"{where}: [{key}]")
    for k, v in t.items():
        f = cls.__dataclass_fields__[k]
        want = type(f.default if f.default_factory is MISSING else f.default_factory())
        if not isinstance(v, want):
            raise ScenarioError(f"{where}: {key}.{k} must be a {want.__name__}")
    return t


# swap.zpool values: the zswap pools guest.py can select (kconfig.py: their option).
ZPOOLS = ("zsmalloc", "zbud")


def _check_zswap_keys(swap, w):
    """swap.shrinker (default: as zswap) and swap.zpool need zswap = true."""
    for k in ("shrinker", "zpool"):
        if k in swap and not swap.get("zswap", False):
            raise ScenarioError(f"{w}: swap.{k} needs swap.zswap = true")
    if not isinstance(swap.get("shrinker", True), bool):
        raise ScenarioError(f"{w}: swap.shrinker must be a bool")
    if "zpool" in swap and swap["zpool"] not in ZPOOLS:
        raise ScenarioError(f"{w}: swap.zpool {swap['zpool']!r} is not one of "
                            f"{', '.join(ZPOOLS)}")


def replace_rules(sc, path):
    """--rules FILE: its rules instead of the scenario's, checked against the
    scenario's device as the scenario's own rules are.  The scenario's
    rule_hits_min names the scenario's rules, so it no longer applies: the
    judge warns about --rules rules that never fired instead."""
    sc.faults.rules = read_rules(path, "--rules")
    check_rules_for_device(sc.device.kind, sc.faults.rules,
                           f"--rules {path} on {sc.name} (device {sc.device.kind})")
    sc.rules_override = path
    sc.expect = {k: v for k, v in sc.expect.items() if k != "rule_hits_min"}


def check_deterministic(sc):
    """Only I/O done inside the MMIO handler is reproducible under icount.

    The fault-injector's deterministic=on (always set by --deterministic)
    gives that to NVMe and to every syncblk completion mode.  A scenario
    that still cannot be reproduced says why (nondeterministic = "...")."""
    if sc.nondeterministic:
        raise ScenarioError(f"{sc.name} cannot run --deterministic: {sc.nondeterministic}")
    if sc.device.kind not in ("nvme", "syncblk"):
        raise ScenarioError(f"{sc.name}: --deterministic supports nvme and syncblk devices, "
                            f"not {sc.device.kind}")


def is_selftest(name, description):
    """Scenarios that test faultline itself (the launcher, minimize), not
    the kernel: `list` shows them apart."""
    return "selftest" in name or description.startswith("launcher self-test")


def list_all():
    """(name, description) of every scenario in scenarios/, sorted by name."""
    out = []
    for f in sorted(os.listdir(SCENARIO_DIR)):
        if f.endswith(".toml"):
            try:
                out.append((f[:-5], load(f[:-5]).description))
            except ScenarioError as e:
                out.append((f[:-5], f"(invalid: {e})"))
    return out
