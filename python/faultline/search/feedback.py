"""What the kernel did in one run, as a set of features, for `faultline
explore`: a schedule is kept when its run shows a feature no earlier run
showed.

Signals, cheapest first, all read from the run directory:
  - (kernel function, return value) pairs of the guest's kretprobes
    (`# kretprobe FUNC=0 N`, `FUNC!=0`), and kprobe hits per function and
    completion context (`# kprobe FUNC [CTX] N`), N bucketed;
  - the run's counter deltas (report.json diag: vmstat, memory.stat and the
    tests' own counts), log2-bucketed in pairs of powers (x4 per bucket) so
    that run-to-run noise does not read as news;
  - the kernel's messages about the device (kernlog templates) and every
    other kernel console line as a template, numbers and addresses masked;
  - KTAP result and detail lines, numbers masked;
  - with a kernel built with --kcov ([vm] kcov): the kernel edges the tests'
    threads ran, one feature per bit of the guest tools' `# kcov-map`
    (guest/tools/lib/guestlib-kcov.c: edges hashed into a 64 Ki-bit map).

A feature is a short string: "ret:swap_writepage!=0", "diag:vmstat pswpin:9",
"kcov:4711".
"""

import base64
import binascii
import json
import os
import re

# Numbers, hex, and addresses: they differ between runs, not between behaviours.
_NUM = re.compile(r"0x[0-9a-fA-F]+|\b[0-9a-fA-F]{8,}\b|\d+(?:\.\d+)?")
_STAMP = re.compile(r"^\s*\[\s*\d+\.\d+\]\s*")
# Diagnostics that are inputs or wall time, not the kernel's behaviour.
IGNORED_DIAG = re.compile(r"^(seed|elapsed|.*_ms|.*_us|.*_ns|.*_s)$|time")


def bucket(n):
    """0 for 0, else about log4(|n|)+1, signed: counts within a factor of 4
    share a bucket."""
    if not isinstance(n, (int, float)) or isinstance(n, bool):
        return None
    b = (int(abs(n)).bit_length() + 1) // 2
    return -b if n < 0 else b


def mask(line):
    return _NUM.sub("N", line).strip()


def _read(rundir, name):
    try:
        with open(os.path.join(rundir, name), errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def probe_features(ktap):
    out = set()
    for line in ktap.splitlines():
        toks = line.split()
        if len(toks) < 3 or toks[0] != "#":
            continue
        if toks[1] == "kretprobe" and len(toks) == 4:
            try:
                n = int(toks[3])
            except ValueError:
                continue
            if n:
                out.add(f"ret:{toks[2]}")
                out.add(f"ret:{toks[2]}:{bucket(n)}")
        elif toks[1] == "kprobe" and len(toks) in (4, 5):
            try:
                n = int(toks[-1])
            except ValueError:
                continue        # "resolved to", "not installed", "n/a"
            if n:
                out.add("probe:" + ":".join(toks[2:-1]) + f":{bucket(n)}")
    return out


def diag_features(diag):
    out = set()
    for k, v in (diag or {}).items():
        if IGNORED_DIAG.search(k):
            continue
        b = bucket(v)
        if b is not None:
            out.add(f"diag:{k}:{b}")
    return out


def kernel_log_features(kernel_log, console):
    out = set()
    for label, n in ((kernel_log or {}).get("messages") or {}).items():
        out.add(f"klog:{label}:{bucket(n)}")
    for line in console.splitlines():
        m = _STAMP.match(line)
        if m:
            out.add("dmesg:" + mask(line[m.end():]))
    return out


def ktap_features(ktap):
    out = set()
    for line in ktap.splitlines():
        s = line.strip()
        if s.startswith(("ok ", "not ok ", "# ")) and not s.startswith(("# kprobe ",
                                                                         "# kretprobe ",
                                                                         "# kcov")):
            out.add("ktap:" + mask(s))
    return out


KCOV_MAP = "# kcov-map "
KCOV_MAP_BYTES = 1 << 13        # GL_KCOV_MAP_BITS / 8


def kcov_features(ktap):
    """"kcov:N" for every bit set in any `# kcov-map` of the run (one per
    guest tool process).  A map cut short or garbled (a guest that died
    mid-line) adds nothing."""
    bits = bytearray(KCOV_MAP_BYTES)
    for line in ktap.splitlines():
        s = line.strip()
        if not s.startswith(KCOV_MAP):
            continue
        try:
            raw = base64.b64decode(s[len(KCOV_MAP):], validate=True)
        except (binascii.Error, ValueError):
            continue
        if len(raw) != KCOV_MAP_BYTES:
            continue
        for i, b in enumerate(raw):
            bits[i] |= b
    return {f"kcov:{i * 8 + j}" for i, b in enumerate(bits) if b for j in range(8)
            if b >> j & 1}


def kcov_edges(feats):
    """How many of @feats are kcov edges."""
    return sum(1 for f in feats if f.startswith("kcov:"))


def features(rundir):
    """The feature set of the run in @rundir."""
    try:
        with open(os.path.join(rundir, "report.json")) as f:
            rep = json.load(f)
    except (OSError, ValueError):
        rep = {}
    ktap = _read(rundir, "ktap.log")
    return (probe_features(ktap) | diag_features(rep.get("diag"))
            | kernel_log_features(rep.get("kernel_log"), _read(rundir, "console.log"))
            | ktap_features(ktap) | kcov_features(ktap))


def new_features(feats, seen):
    """The features of @feats not in @seen (a set), sorted."""
    return sorted(feats - seen)
