"""faultline reports: the Report of a run (report.json), its terminal
summary, JUnit XML, plots, sweep summaries and `faultline show`.
"""

import json
import os
import re
from dataclasses import dataclass, field, fields
from xml.sax.saxutils import escape, quoteattr

from faultline.errors import EXIT_CRASH, EXIT_FAIL, EXIT_PASS, EXIT_SETUP, SetupError
from faultline.judge import kernlog, plot


@dataclass
class Report:
    """The judged result of one run; report.json is to_json() of it."""
    scenario: str
    seed: int
    status: int
    outcome: str
    reason: str
    kernel: str = ""
    device: str = ""
    completion: str = ""
    elapsed_s: float = 0.0
    deterministic: bool = False
    ktap: dict = field(default_factory=dict)      # counts and failure lines
    diag: dict = field(default_factory=dict)      # '# key value' diagnostics, summed
    faults: dict | None = None                    # x-fault-query-stats at the end
    digest: str | None = None                     # the injector's, 16 hex digits
    fault_log: str | None = None
    console_tail: str | None = None
    task_dump: str | None = None
    plots: list | None = None
    mutation: dict | None = None                  # --mutate: mutate.verdict()
    qmp_actions: list | None = None               # [[qmp]]: when each was sent
    rules_option: str | None = None               # --rules FILE: its path
    warnings: list | None = None                  # e.g. a --rules rule that never fired
    kernel_log: dict | None = None                # kernlog.summarize() of the console
    signal: str | None = None                     # outcome "aborted": e.g. "SIGTERM"
    broken_guarantee: str | None = None           # judge.broken_guarantee(): crash, data loss...
    results: list = field(default_factory=list)   # per-KTAP-result, not in report.json

    OPTIONAL = ("digest", "fault_log", "console_tail", "task_dump", "plots", "mutation",
                "qmp_actions", "rules_option", "warnings", "kernel_log", "signal",
                "broken_guarantee")

    def to_json(self):
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "results" or (f.name in self.OPTIONAL and v is None):
                continue
            out[f.name] = v
        return out

    @classmethod
    def from_json(cls, d):
        names = {f.name for f in fields(cls)}
        try:
            return cls(**{k: v for k, v in d.items() if k in names})
        except TypeError as e:
            raise SetupError(f"report.json: {e}") from None

    def save(self, rundir):
        with open(os.path.join(rundir, "report.json"), "w") as f:
            json.dump(self.to_json(), f, indent=1)


def load_report(rundir):
    """The Report in @rundir/report.json."""
    try:
        with open(os.path.join(rundir, "report.json")) as f:
            return Report.from_json(json.load(f))
    except (OSError, ValueError) as e:
        raise SetupError(f"{rundir} is not a faultline run directory ({e})") from None


def status_word(status):
    if status > 128:
        return "ABORTED"        # 128 + the signal that stopped the launcher
    return {0: "PASS", 1: "FAIL", 2: "ERROR", 3: "CRASH"}.get(status, f"EXIT {status}")


def device_io(faults):
    """The I/O the device passed to its injector, per op, in one line
    (x-fault-query-stats "io"); None when not reported."""
    io = (faults or {}).get("io") if isinstance(faults, dict) else None
    if not io:
        return None
    return ", ".join(f"{e['op']} {e['count']}"
                     + (f" (sectors {e['lba-min']}-{e['lba-max']})" if e["op"] != "flush" else "")
                     for e in io)


def print_report(r, rundir, out=None):
    d = r.diag
    lines = [f"scenario   {r.scenario}  (seed {r.seed}"
             + (", deterministic)" if r.deterministic else ")"),
             f"kernel     {r.kernel or '?'}",
             f"device     {r.device}"
             + (f" completion={r.completion}" if r.device == "syncblk" else ""),
             f"swap-out   {d.get('vmstat pswpout', '?')} pages (pswpout)",
             f"verified   {d.get('pages_verified', '?')} pages"]
    faults = r.faults
    if isinstance(faults, dict) and "rules" in faults:
        hits = ", ".join(f"{x['name']}={x['hits']}" for x in faults["rules"])
        lines.append(f"rule hits  {hits}  (digest {r.digest or '?'}"
                     + (f"; rules from --rules {r.rules_option})" if r.rules_option else ")"))
    io = device_io(faults)
    if io:
        lines.append(f"device io  {io}")
    if r.kernel_log is not None:
        lines.append(f"kernel log {kernlog.format_line(r.kernel_log)}")
    for w in r.warnings or []:
        lines.append(f"warning    {w}")
    if r.mutation:
        lines.append(f"mutation   {r.mutation['rule']}: {r.mutation['verdict']}")
    for a in r.qmp_actions or []:
        when = "never" if a.get("at_s") is None else f"at {a['at_s']}s"
        lines.append(f"qmp        {a['execute']} {when}"
                     + (f": {a['error']}" if a.get("error") else ""))
    lines += [f"elapsed    {r.elapsed_s}s",
              f"result     {status_word(r.status)} ({r.outcome}): {r.reason}",
              f"run dir    {rundir}"]
    if r.status != EXIT_PASS and r.console_tail:
        lines.append("console tail:\n" + r.console_tail)
    if r.task_dump:
        lines.append("sysrq task dump (first 40 lines; all of it in report.json):\n"
                     + "\n".join(r.task_dump.splitlines()[:40]))
    print("\n".join(lines), file=out, flush=True)


# ---------------------------------------------------------------- JUnit

def junit_xml(runs):
    """JUnit XML for CI systems: one <testsuite> per run, one <testcase> per
    KTAP result (suite = the guest test command), plus one for the run's
    own verdict (crash, hang, expectations)."""
    suites = []
    for r, rundir in runs:
        cases = []
        for res in r.results:
            body = ""
            message = res["line"] + (f": {res['detail']}" if res.get("detail") else "")
            if res["kind"] == "fail":
                body = f"<failure message={quoteattr(message)}/>"
            elif res["kind"] in ("skip", "xfail"):
                body = f"<skipped message={quoteattr(message)}/>"
            cases.append(f"    <testcase classname={quoteattr(res['suite'] or r.scenario)} "
                         f"name={quoteattr(res['name'])}>{body}</testcase>")
        verdict = ""
        if r.status != EXIT_PASS:
            tag = "error" if r.status in (EXIT_CRASH, EXIT_SETUP) else "failure"
            verdict = (f"<{tag} message={quoteattr(r.reason)}>"
                       f"{escape(r.console_tail or '')}</{tag}>")
        cases.append(f"    <testcase classname={quoteattr(r.scenario)} name=\"run\" "
                     f"time=\"{r.elapsed_s}\">{verdict}</testcase>")
        fails = sum(1 for c in cases if "<failure" in c)
        errors = sum(1 for c in cases if "<error" in c)
        skipped = sum(1 for c in cases if "<skipped" in c)
        name = f"{r.scenario}.seed{r.seed}"
        suites.append(f"  <testsuite name={quoteattr(name)} tests=\"{len(cases)}\" "
                      f"failures=\"{fails}\" errors=\"{errors}\" skipped=\"{skipped}\" "
                      f"time=\"{r.elapsed_s}\">\n"
                      f"    <properties><property name=\"rundir\" value={quoteattr(rundir)}/>"
                      f"</properties>\n" + "\n".join(cases) + "\n  </testsuite>")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n' + "\n".join(suites)
            + "\n</testsuites>\n")


def write_junit(path, runs):
    with open(path, "w") as f:
        f.write(junit_xml(runs))


# ---------------------------------------------------------------- plots

_IO_LINE = re.compile(r"^# io \d+ (read|write) off (\d+) len (\d+) res (-?\d+) errno \S+ "
                      r"lat_us (\d+)")
_DELAY = re.compile(r"delay=(\d+)ns")


def latency_points(ktap, fault_log_lines):
    """(injected µs, observed µs) per guest I/O that iocheck timed.

    Injected delay comes from the fault log (op + lba of the I/O); I/Os
    without an injected delay count as 0 µs injected."""
    injected = {}
    for line in fault_log_lines:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        m = _DELAY.search(e.get("action", ""))
        if m:
            key = (e.get("op"), e.get("lba"))
            injected[key] = injected.get(key, 0) + int(m.group(1)) / 1000.0
    points = []
    for line in ktap.splitlines():
        m = _IO_LINE.match(line.strip())
        if m:
            op, off, lat = m.group(1), int(m.group(2)), int(m.group(5))
            points.append((injected.get((op, off // 512), 0.0), float(lat)))
    return points


_PHASE = re.compile(r"^(phase \S+|round \d+) vmstat (\S+)$")


def phase_counters(diag, names=("pswpout", "pswpin", "zswpout", "zswpwb", "pgrotated",
                                "workingset_refault_anon")):
    """Counter deltas per test phase, from '# phase P vmstat X N' diagnostics."""
    phases, series = [], {}
    for key, value in diag.items():
        m = _PHASE.match(key)
        if not m or m.group(2) not in names:
            continue
        phase = m.group(1)
        if phase not in phases:
            phases.append(phase)
        series.setdefault(m.group(2), {})[phase] = value
    return phases, series


def write_plots(rundir, report):
    """latency.svg and counters.svg where the run has the data; returns names."""
    written = []
    try:
        with open(os.path.join(rundir, "ktap.log"), errors="replace") as f:
            ktap = f.read()
    except OSError:
        return []
    log = []
    if os.path.exists(os.path.join(rundir, "faults.jsonl")):
        with open(os.path.join(rundir, "faults.jsonl"), errors="replace") as f:
            log = f.readlines()
    points = latency_points(ktap, log)
    if points:
        svg = plot.scatter_svg(f"{report.scenario}: injected vs observed I/O latency",
                               "injected delay (µs, fault log)",
                               "observed latency (µs, guest)", [points], ["I/O"])
        with open(os.path.join(rundir, "latency.svg"), "w") as f:
            f.write(svg)
        written.append("latency.svg")
    phases, series = phase_counters(report.diag)
    if phases:
        rows = [(name, [vals.get(p, 0) for p in phases]) for name, vals in series.items()]
        svg = plot.lines_svg(f"{report.scenario}: counter deltas per phase", phases,
                             "pages", rows)
        with open(os.path.join(rundir, "counters.svg"), "w") as f:
            f.write(svg)
        written.append("counters.svg")
    return written


# ---------------------------------------------------------------- sweeps

def summary_lines(results):
    out = [f"{'scenario':32} {'seed':>6}  {'result':6} {'digest':16}  {'elapsed':>8}  reason"]
    for r, rundir in results:
        out.append(f"{r.scenario:32} {r.seed:>6}  {status_word(r.status):6} "
                   f"{r.digest or '-':16}  {r.elapsed_s:>7}s  "
                   f"{'' if r.status == 0 else r.reason}")
    return out


def write_summary(path_base, results, repro_cmds):
    data = [{"scenario": r.scenario, "seed": r.seed, "status": r.status,
             "outcome": r.outcome, "digest": r.digest,
             "elapsed_s": r.elapsed_s, "reason": r.reason, "rundir": rundir,
             "repro": repro_cmds.get(rundir)} for r, rundir in results]
    with open(path_base + ".json", "w") as f:
        json.dump(data, f, indent=1)
    with open(path_base + ".txt", "w") as f:
        f.write("\n".join(summary_lines(results)) + "\n")
        for r, rundir in results:
            if r.status != EXIT_PASS:
                f.write(f"repro seed {r.seed}: {repro_cmds.get(rundir)}\n")


# ---------------------------------------------------------------- show

def show(path, out=None):
    """Print a past run (or a sweep's summary, or a comparison's table);
    returns the run's status."""
    if os.path.exists(os.path.join(path, "compare.txt")):
        with open(os.path.join(path, "compare.txt")) as f:
            print(f.read(), end="", file=out)
        with open(os.path.join(path, "compare.json")) as f:
            data = json.load(f)
        return EXIT_FAIL if data.get("failed_expectations") else EXIT_PASS
    if os.path.exists(os.path.join(path, "summary.txt")):
        with open(os.path.join(path, "summary.txt")) as f:
            print(f.read(), end="", file=out)
        with open(os.path.join(path, "summary.json")) as f:
            return max((x["status"] for x in json.load(f)), default=0)
    r = load_report(path)
    try:
        with open(os.path.join(path, "run.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        if r.outcome != "aborted":
            raise SetupError(f"{path} is not a faultline run directory ({e})") from None
        meta = {}       # stopped before run.json was written
    print_report(r, path, out)
    v = meta.get("versions", {})
    print(f"qemu       {v.get('QEMU_SRC_VERSION', '?')} ({v.get('QEMU_SRC_SUITE', '?')}), "
          f"build {meta.get('qemu_build', '?')}", file=out)
    print(f"faultline  {meta.get('faultline', '?')}", file=out)
    print(f"kernel img {meta.get('kernel_image', '?')} sha256 "
          f"{meta.get('kernel_sha256', '?')[:16]}", file=out)
    ktap = r.ktap
    print(f"ktap       {ktap.get('ok', 0)} ok, {ktap.get('not_ok', 0)} not ok, "
          f"{ktap.get('skip', 0)} skip, {ktap.get('xfail', 0)} xfail", file=out)
    for line in ktap.get("failures", [])[:10]:
        print(f"  {line}", file=out)
    files = sorted(f for f in os.listdir(path) if not f.startswith("."))
    print(f"files      {' '.join(files)}", file=out)
    print(f"repro      {meta.get('repro', 'faultline repro ' + path)}", file=out)
    return r.status
