"""Judging a finished run from its run directory and WatchResult: outcome,
status, reason, the scenario's expectations.  Backend-neutral."""

import json
import os
import re

from faultline.errors import EXIT_CRASH, EXIT_FAIL, EXIT_PASS, EXIT_SETUP, OUTCOMES
from faultline.judge import kernlog, mutate
from faultline.judge.ktap import parse_ktap
from faultline.judge.report import Report

# Console lines that mean the kernel is unhealthy (tainting by our own
# out-of-tree module is expected and is not among them).
CRASH_MARKERS = ["Kernel panic", "kernel BUG at", "BUG: unable to handle",
                 "Oops:", "general protection fault"]
SPLAT_MARKERS = ["WARNING: CPU", "BUG: ", "sleeping function called from invalid context",
                 "possible circular locking dependency", "INFO: task", "Call Trace:",
                 "WARNING: suspicious RCU usage", "detected stall"]
# A splat's opening line carries one of these ("BUG: " covers KASAN and
# soft lockups, "INFO: task" hung tasks, "detected stall" RCU stalls);
# "Call Trace:" only follows one, so it never heads a splat.
_SPLAT_HEADS = ["rcu: INFO:"] + [m for m in CRASH_MARKERS + SPLAT_MARKERS
                                  if m != "Call Trace:"]


def console_health(console):
    crash = [m for m in CRASH_MARKERS if m in console]
    splats = [m for m in SPLAT_MARKERS if m in console]
    return crash, splats


# Lines of a dump's header between its first line and "Call Trace:".
_DUMP_HEADER = re.compile(r"^\s*(CPU: |Hardware name:|Tainted:|Modules linked in|RIP:|Code:|"
                          r"RSP:|R[A-Z0-9]{2}:|FS:|CS:|CR2:|DR[0-9]:|PKRU:)")
_STAMP = re.compile(r"^\[\s*\d+\.\d+\]\s?")


def splat_line(console, bare_dumps=True):
    """The first console line that opens a splat (BUG, KASAN, Oops,
    WARNING, hung task, soft lockup, RCU stall), from its marker on (the
    timestamp dropped); for a bare stack dump (an OOM kill, dump_stack())
    the line its header follows, unless not @bare_dumps; or None."""
    lines = console.splitlines()
    for i, ln in enumerate(lines):
        hits = [ln.find(h) for h in _SPLAT_HEADS if h in ln]
        if hits:
            return ln[min(hits):].strip()
        if "Call Trace:" in ln and bare_dumps:
            for prev in reversed(lines[:i]):
                text = _STAMP.sub("", prev)
                if not _DUMP_HEADER.match(text):
                    return text.strip() or None
            return None
    return None


def panic_line(console):
    """The panic's own message ("Kernel panic - not syncing: ..."): the
    console tail of a long trace no longer shows which panic it was."""
    for ln in console.splitlines():
        i = ln.find("Kernel panic - not syncing:")
        if i >= 0:
            return ln[i:].strip()
    return None


def tail(text, n=25):
    return "\n".join(text.splitlines()[-n:])


def fault_log_problems(only, lines):
    """fault_log_only: every fault log entry (JSON lines, @lines) has the
    fields of @only with those values, and there is at least one."""
    entries, bad = 0, []
    for ln in lines:
        try:
            e = json.loads(ln)
        except ValueError:
            continue
        if not isinstance(e, dict) or "seq" not in e:
            continue
        entries += 1
        if any(e.get(k) != v for k, v in only.items()) and len(bad) < 3:
            bad.append(f"seq {e['seq']} has " + ", ".join(
                f"{k}={e.get(k)}" for k in only))
    want = ", ".join(f"{k}={v}" for k, v in only.items())
    if not entries:
        return [f"fault log has no entry (expected only {want})"]
    return [f"fault log entry not {want}: {b}" for b in bad]


def check_expectations(sc, ktap, console, faults, fault_log=()):
    """Return a list of unmet expectations (empty: all met); @fault_log
    is the lines of faults.jsonl."""
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
    if e.get("fault_log_only"):
        problems += fault_log_problems(e["fault_log_only"], fault_log)
    hits_min = e.get("rule_hits_min", {})
    if hits_min:
        rules = faults.get("rules") if isinstance(faults, dict) else faults
        if not isinstance(rules, list):
            problems.append(f"no rule statistics from the fault injector ({faults})")
        else:
            hits = {r["name"]: r["hits"] for r in rules}
            for name, minimum in hits_min.items():
                if hits.get(name, 0) < minimum:
                    problems.append(f"rule {name} hit {hits.get(name, 0)} < {minimum}")
    return problems


# Diagnostics in which the guest tools count what the kernel lost (pages
# that read back wrong, increments that vanished, a parent's pages that
# fault with SIGBUS) or kept (pages left charged on a memcg's LRU once
# their memory was unmapped and reclaimed): above zero, a guarantee the
# kernel always owes is broken, whatever the scenario expected.
DATA_LOSS_DIAGS = ("data_errors", "lost_increments", "sigbus_pages_parent")
LEAK_DIAGS = ("lru_left_pages",)
# Diagnostics in which a guest tool counts what the kernel never finished
# (a swapoff whose area stopped emptying until it was killed): a hang the
# guest measured itself, before the watchdog's.
HANG_DIAGS = ("swapoff_stuck",)


def broken_guarantee(r):
    """What a failed run @r (a Report) shows the kernel broke: "crash",
    "hang", "splat", "hang (KEY N)", "data loss (KEY N, ...)" or "leak (KEY N)"; None when
    it passed, was aborted or could not run, or failed only a check of its workload or
    of the kernel's behaviour (e.g. less writeback than the scenario
    needs): such a run says nothing about the kernel's correctness."""
    if r.status == EXIT_PASS or r.status == EXIT_SETUP or r.outcome == "aborted":
        return None
    if r.outcome == "hang":
        return "hang"
    if r.status == EXIT_CRASH:
        return "crash"
    if r.reason.startswith("kernel splat"):
        return "splat"
    for what, keys in (("hang", HANG_DIAGS), ("data loss", DATA_LOSS_DIAGS),
                       ("leak", LEAK_DIAGS)):
        counted = [f"{key} {r.diag[key]}" for key in keys
                   if isinstance(r.diag.get(key), (int, float)) and r.diag[key] > 0]
        if counted:
            return f"{what} ({', '.join(counted)})"
    return None


def _verdict(sc, w, console, k):
    """(status, outcome or None, reason) of a run."""
    crash, splats = console_health(console)
    machine = "QEMU" if w.backend in ("qemu", "") else w.backend
    if w.hang:
        return EXIT_CRASH, "hang", (
            f"hang: no result after {sc.timeout_s:.0f}s, watchdog killed {machine}"
            + (", sysrq task dump in the report" if w.task_dump is not None
               else ", no task dump (guest did not answer sysrq)"))
    if crash:
        panic, first = panic_line(console), splat_line(console)
        reason = "kernel crash: " + ", ".join(
            [panic] + [m for m in crash if m != "Kernel panic"] if panic else crash)
        if first and first != panic:
            reason += f" (first: {first})"
        return EXIT_CRASH, None, reason
    if w.guest_exit is None:
        if "faultline-init" not in console and w.stderr:
            return EXIT_SETUP, None, f"{machine} failed: " + w.stderr.splitlines()[-1]
        if "faultline-init" not in console:
            return EXIT_CRASH, None, "kernel did not boot to init"
        return EXIT_CRASH, None, "guest stopped without reporting a result"
    if splats:
        return EXIT_FAIL, None, "kernel splat: " + (splat_line(console) or ", ".join(splats))
    modprobe = [f for f in k["failures"] if f.startswith("Bail out! modprobe")]
    if modprobe:
        # The kernel lacks a driver the scenario needs: fix the setup, not the code.
        return EXIT_SETUP, None, modprobe[0] + " (does the kernel/--modules tree have it?)"
    if w.guest_exit != 0 or k["not_ok"] or k["bail"]:
        return EXIT_FAIL, None, (f"guest tests failed (exit {w.guest_exit}, "
                                 f"{k['not_ok']} not ok)")
    if k["ok"] == 0:
        return EXIT_FAIL, None, "guest tests reported no result"
    if k.get("plan_errors"):
        return EXIT_FAIL, None, "KTAP plan not met: " + "; ".join(k["plan_errors"])
    mode = kernel_mode_problem(getattr(sc, "kernel_mode", "auto"), k)
    if mode:
        return EXIT_FAIL, None, mode
    if k["xfail"]:
        return EXIT_PASS, None, (f"pass ({k['xfail']} XFAIL: expected failures, not "
                                 "judged; see ktap.log)")
    return EXIT_PASS, None, "pass"


def kernel_mode_problem(mode, k):
    """The scenario's kernel_mode against what swaptest judged: a kernel
    declared patched must have its patch-specific checks asserted (none
    XFAIL); one declared stock must show no sign of the patch."""
    diag = k["diag"]
    if mode == "patched":
        if k["xfail"]:
            return (f"kernel_mode patched: {k['xfail']} check(s) XFAIL, the patch-specific "
                    "checks did not judge")
        if not diag.get("patch_checks_asserted"):
            return "kernel_mode patched: no patch-specific check was asserted"
    if mode == "stock" and diag.get("patch_probes_found"):
        return (f"kernel_mode stock: {diag['patch_probes_found']} dropbehind probe(s) "
                "found in the kernel (see '# feature' lines in ktap.log)")
    return None


def action_problems(sc, w):
    """[[qmp]] actions that never fired or that QMP refused."""
    problems = []
    actions = getattr(w, "actions", None) or []
    if len(actions) != len(sc.qmp):
        # A backend with its own watch loop (LAVA) cannot send them.
        return [f"[[qmp]] actions not run by the {w.backend or '?'} backend"]
    for a in actions:
        if a.get("at_s") is None:
            problems.append(f"qmp {a['execute']} never sent (no guest line with "
                            f"{a['when']!r})")
        elif a.get("error"):
            problems.append(f"qmp {a['execute']} failed: {a['error']}")
    return problems


def never_fired(faults):
    """Names of the rules the injector's statistics show with no hit."""
    rules = faults.get("rules") if isinstance(faults, dict) else None
    if not isinstance(rules, list):
        return []
    return [x["name"] for x in rules if not x.get("hits")]


def rules_option_warnings(sc, faults):
    """--rules FILE replaces the scenario's rule_hits_min (which names the
    scenario's rules): a rule of FILE that never fired is a warning, not a
    failure (a rule may rightly not match a run, as minimize's subsets)."""
    return [f"rule {name} (--rules {sc.rules_override}) never fired"
            for name in never_fired(faults)]


def judge(sc, rundir, seed, deterministic, w, elapsed_s=None):
    """The Report of a finished run of scenario @sc, from its run directory
    (console.log, ktap.log) and the machine's WatchResult @w."""
    def read(name):
        try:
            with open(os.path.join(rundir, name), errors="replace") as f:
                return f.read()
        except OSError:
            return ""
    console, ktap = read("console.log"), read("ktap.log")
    k = parse_ktap(ktap)
    status, outcome, reason = _verdict(sc, w, console, k)
    if status == EXIT_PASS:
        problems = check_expectations(sc, k, console, w.faults,
                                      read("faults.jsonl").splitlines()) + \
            action_problems(sc, w)
        if problems:
            status, reason = EXIT_FAIL, "expectation failed: " + "; ".join(problems)
    release = ""
    for ln in ktap.splitlines():
        if ln.startswith("# kernel ") and len(ln.split()) > 2:
            release = ln.split()[2]
    faults = w.faults
    r = Report(scenario=sc.name, seed=seed, status=status,
               outcome=outcome or OUTCOMES[status], reason=reason, kernel=release,
               device=sc.device.kind, completion=sc.device.completion,
               elapsed_s=round(w.elapsed_s if elapsed_s is None else elapsed_s, 1),
               deterministic=deterministic,
               ktap={key: v for key, v in k.items() if key not in ("diag", "results")},
               diag=k["diag"], faults=faults, results=k["results"])
    if isinstance(faults, dict) and isinstance(faults.get("digest"), int):
        r.digest = f"{faults['digest']:016x}"
        # stats.json and report.json show it as everything else does: hex.
        r.faults = faults = dict(faults, digest=r.digest)
    if os.path.exists(os.path.join(rundir, "faults.jsonl")):
        r.fault_log = "faults.jsonl"
    r.kernel_log = kernlog.summarize(console, read("faults.jsonl").splitlines())
    if sc.rules_override:
        r.rules_option = sc.rules_override
        r.warnings = rules_option_warnings(sc, faults) or None
    if getattr(w, "actions", None):
        r.qmp_actions = w.actions
    r.broken_guarantee = broken_guarantee(r)
    if sc.mutate:
        # The run's own status stands (a caught mutation is a FAIL); the
        # verdict says whether the data check is what failed.
        r.mutation = mutate.verdict(sc.mutate, status, k["diag"], k["results"], faults)
    dump = w.task_dump
    if status != EXIT_PASS:
        r.console_tail = tail(console.encode()[:dump].decode(errors="replace")
                              if dump is not None else console)
    if dump is not None:
        text = console.encode()[dump:].decode(errors="replace")
        r.task_dump = "\n".join(text.splitlines()[:400])
    return r
