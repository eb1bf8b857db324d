"""faultline scenario files: load, validate, judge expectations.

A scenario is one TOML file in scenarios/ (format: docs/scenarios.md).
Every key is checked; a typo gives a one-line error naming the file and key.
"""

import os
import re
import tomllib
from dataclasses import dataclass, field

TOP = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
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
    if not m:
        raise ScenarioError(f"{where}: bad duration {v!r} (expected e.g. 180s, 3m)")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60}[m.group(2)]


@dataclass
class Vm:
    memory: str = "512M"
    cpus: int = 2
    cmdline: str = "transparent_hugepage=never"
    panic_on_oops: bool = True


@dataclass
class Device:
    kind: str = "nvme"
    completion: str = "task"
    size: str = "1G"
    size_bytes: int = 1 << 30
    extra: str = ""


@dataclass
class Faults:
    seed: int = 1
    rules: str = ""


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


def _check_keys(table, allowed, where):
    for k in table:
        if k not in allowed:
            raise ScenarioError(f"{where}: unknown key {k!r} (expected one of "
                                f"{', '.join(sorted(allowed))})")


EXPECT_KEYS = {"rule_hits_min", "kernel_log", "vmstat_min", "diag_min", "diag_max"}


def find(name):
    if os.path.exists(name):
        return name
    path = os.path.join(SCENARIO_DIR, name + ".toml")
    if os.path.exists(path):
        return path
    have = sorted(f[:-5] for f in os.listdir(SCENARIO_DIR) if f.endswith(".toml"))
    raise ScenarioError(f"no scenario {name!r} (have: {', '.join(have)})")


def load(name):
    path = find(name)
    try:
        with open(path, "rb") as f:
            d = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: {e}") from None
    w = os.path.basename(path)
    _check_keys(d, {"description", "timeout", "vm", "device", "faults", "swap", "test",
                    "expect"}, w)
    vm = Vm(**_table(d, "vm", Vm, w))
    parse_size(vm.memory, f"{w}: vm.memory")
    dev = Device(**_table(d, "device", Device, w, skip={"size_bytes"}))
    if dev.kind not in ("nvme", "syncblk"):
        raise ScenarioError(f"{w}: device.kind {dev.kind!r} (expected nvme or syncblk)")
    if dev.completion not in ("task", "irq", "thread"):
        raise ScenarioError(f"{w}: device.completion {dev.completion!r} "
                            "(expected task, irq or thread)")
    dev.size_bytes = parse_size(dev.size, f"{w}: device.size")
    if dev.extra and not dev.extra.startswith(","):
        dev.extra = "," + dev.extra
    faults = Faults(**_table(d, "faults", Faults, w))
    swap = d.get("swap", {})
    _check_keys(swap, {"zswap"}, f"{w}: [swap]")
    tests = []
    for i, t in enumerate(d.get("test", [])):
        _check_keys(t, {"run"}, f"{w}: [[test]] #{i + 1}")
        if not isinstance(t.get("run"), str) or not t["run"].strip():
            raise ScenarioError(f"{w}: [[test]] #{i + 1} needs run = \"command\"")
        tests.append(t["run"])
    if not tests:
        raise ScenarioError(f"{w}: no [[test]] to run")
    expect = d.get("expect", {})
    _check_keys(expect, EXPECT_KEYS, f"{w}: [expect]")
    return Scenario(name=os.path.basename(path)[:-5], path=os.path.abspath(path),
                    description=d.get("description", ""),
                    timeout_s=parse_duration(d.get("timeout", "300s"), f"{w}: timeout"),
                    vm=vm, device=dev, faults=faults, swap=swap, tests=tests, expect=expect)


def _table(d, key, cls, where, skip=()):
    t = d.get(key, {})
    if not isinstance(t, dict):
        raise ScenarioError(f"{where}: [{key}] must be a table")
    allowed = set(cls.__dataclass_fields__) - set(skip)
    _check_keys(t, allowed, f"{where}: [{key}]")
    for k, v in t.items():
        want = type(cls.__dataclass_fields__[k].default)
        if not isinstance(v, want):
            raise ScenarioError(f"{where}: {key}.{k} must be a {want.__name__}")
    return t


def check_expectations(sc, ktap, console, faults):
    """Return a list of unmet expectations (empty: all met)."""
    problems = []
    e = sc.expect
    diag = ktap["diag"]
    for name, minimum in e.get("vmstat_min", {}).items():
        got = diag.get("vmstat " + name)
        if got is None or got < minimum:
            problems.append(f"vmstat {name} {got} < {minimum}")
    for name, minimum in e.get("diag_min", {}).items():
        got = diag.get(name)
        if got is None or got < minimum:
            problems.append(f"{name} {got} < {minimum}")
    for name, maximum in e.get("diag_max", {}).items():
        got = diag.get(name)
        if got is None or got > maximum:
            problems.append(f"{name} {got} > {maximum}")
    for text in e.get("kernel_log", []):
        if text not in console:
            problems.append(f"kernel log lacks {text!r}")
    hits_min = e.get("rule_hits_min", {})
    if hits_min:
        # x-fault-query-stats returns {"rules": [...], "digest": ...}
        rules = faults.get("rules") if isinstance(faults, dict) else faults
        if not isinstance(rules, list):
            problems.append(f"no rule statistics from the fault injector ({faults})")
        else:
            hits = {r["name"]: r["hits"] for r in rules}
            for name, minimum in hits_min.items():
                if hits.get(name, 0) < minimum:
                    problems.append(f"rule {name} hit {hits.get(name, 0)} < {minimum}")
    return problems
