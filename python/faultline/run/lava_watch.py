"""How the watch loop follows a LAVA job (backend lava): the KTAP stream
read from LAVA's log as it grows, the watchdog armed once LAVA's QEMU runs,
a task dump through the QEMU wrapper, and at the end LAVA's results turned
back into the run directory (ktap.log, lava-results.json, qemu.stderr) and
the WatchResult.

LAVA's QEMU has no QMP of ours; the watchdog counts from QEMU's start, as
on the qemu backend; when it fires before the guest reported, the QEMU
wrapper asks the guest for a sysrq task dump, then lava-run is stopped
(LAVA's own test timeout is later).
"""

import glob
import json
import os
import time

from faultline.host import stop
from faultline.judge.ktap import parse_ktap
from faultline.run.watch import GuestView
from faultline.vm.lava_job import (EXIT_CASE, LAVA_MARGIN_S, MONITOR_NAME, job_metadata,
                                   lava_case_id, yaml_load)
from faultline.vm.logtail import LogTail

# Local runs: LAVA's test timeout is this much after our watchdog, which
# asks the guest for a task dump first.
DUMP_GRACE_S = 30


def parse_lava_log(text):
    """LAVA's log -> (target output lines, result entries, errors).

    One entry a line, {"dt": ..., "lvl": ..., "msg": ...} (lava-run's
    output; the server's job log has the same lines as a YAML list)."""
    target, results, errors = [], [], []
    for line in text.splitlines():
        line = line[2:] if line.startswith("- {") else line
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            # lava-run writes JSON except for tagged values (size: ! "123").
            try:
                entry = yaml_load(line)
            except Exception:  # noqa: BLE001 - one odd line must not lose the rest
                continue
        if not isinstance(entry, dict):
            continue
        lvl, msg = entry.get("lvl"), entry.get("msg")
        if lvl == "target" and isinstance(msg, str):
            target.append(msg)
        elif lvl == "results" and isinstance(msg, dict):
            results.append(msg)
        elif lvl in ("error", "exception") and msg:
            errors.append(str(msg))
    return target, results, errors


def _ktap_lines(lines, started=False):
    """(KTAP lines among LAVA's target @lines, whether KTAP has started):
    from '# kernel' on."""
    out = []
    for ln in lines:
        s = ln.rstrip("\r")
        started = started or s.startswith("# kernel ")
        if started:
            out.append(s + "\n")
    return out, started


def ktap_from_target(lines):
    """The ttyS1 (KTAP) stream from LAVA's target lines."""
    return "".join(_ktap_lines(lines)[0])


class LavaKtap:
    """The KTAP stream as LAVA logs it, read incrementally from lava.log (a
    LogTail of KTAP text: text, partial, poll(), lines())."""

    def __init__(self, log_path):
        self.log = LogTail(log_path)
        self.text, self.partial = "", ""
        self.started = False

    def poll(self):
        target, _, _ = parse_lava_log(self.log.poll())
        new, self.started = _ktap_lines(target, self.started)
        self.text += "".join(new)
        return "".join(new)

    def lines(self):
        return self.text.splitlines()


def case_results(results):
    """Our cases from LAVA's results: [{case, name, result}], LAVA's own
    job/boot results (suite lava) left out."""
    cases = []
    for r in results:
        if r.get("definition") != MONITOR_NAME:
            continue
        extra = r.get("extra") if isinstance(r.get("extra"), dict) else {}
        cases.append({"case": r.get("case"), "name": extra.get("test_case_id", r.get("case")),
                      "result": r.get("result")})
    return cases


def job_verdict(results, result_yaml_text):
    """LAVA's job result ('pass'/'fail'/None) and its error type and message."""
    verdict, etype, emsg = None, None, None
    for r in results:
        if r.get("definition") == "lava" and r.get("case") == "job":
            verdict = r.get("result")
            extra = r.get("extra") if isinstance(r.get("extra"), dict) else {}
            etype, emsg = extra.get("error_type"), extra.get("error_msg")
    if verdict is None and result_yaml_text:
        try:
            doc = yaml_load(result_yaml_text)
        except Exception:  # noqa: BLE001
            doc = None
        for r in doc if isinstance(doc, list) else []:
            if isinstance(r, dict) and r.get("case") == "job":
                verdict = r.get("result")
                meta = r.get("metadata") or {}
                etype, emsg = meta.get("error_type"), meta.get("error_msg")
    return verdict, etype, emsg


def guest_exit_from(cases, ktap):
    """FAULTLINE-EXIT status: the number from the KTAP stream, else the
    LAVA case (pass -> 0, fail -> 1), else None (never reported)."""
    for ln in ktap.splitlines():
        if ln.startswith(EXIT_CASE + " "):
            try:
                return int(ln.split()[1])
            except (IndexError, ValueError):
                pass
    for c in cases:
        if c["name"] == EXIT_CASE:
            return 0 if c["result"] == "pass" else 1
    return None


def compare_cases(cases, ktap_results):
    """Disagreements between LAVA's per-case results and our KTAP parse
    (they read the same lines): list of one-line problems."""
    want = {"ok": "pass", "fail": "fail", "skip": "skip", "xfail": "pass"}
    lava = {}
    for c in cases:
        if c["name"] != EXIT_CASE:
            lava.setdefault(c["case"], []).append(c["result"])
    problems = []
    for r in ktap_results:
        case = lava_case_id(r["name"])
        got = lava.get(case)
        if not got:
            problems.append(f"LAVA has no result for {r['name']!r}")
            continue
        res = got.pop(0)
        if res != want.get(r["kind"]):
            problems.append(f"LAVA says {res} for {r['name']!r}, KTAP says {r['kind']}")
    return problems


def run_metadata(spec):
    """Job metadata from the run's run.json (written before the boot)."""
    try:
        with open(os.path.join(spec.rundir, "run.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        meta = {}
    return job_metadata(spec.scenario, meta.get("seed"), meta.get("faultline", "?"),
                        meta.get("run_command", ""), meta.get("kernel"))


class LavaView(GuestView):
    """The watch loop's view of a vm.lava.LavaMachine (no QMP of ours:
    LavaMachine.has_qmp is False)."""

    def __init__(self, m):
        super().__init__(m)
        self._diag = []
        self._give_up = None
        self.cases = []

    def begin(self, timeout_s):
        m = self.m
        if "metadata" not in m.options:
            m.options = dict(m.options, metadata=run_metadata(m.spec))
        m.spawn(timeout_s + DUMP_GRACE_S)

    def streams(self):
        return {"ktap": LavaKtap(self.m.log_path),
                "console": LogTail(os.path.join(self.m.spec.rundir, "console.log"))}

    def watchdog_armed(self):
        return os.path.exists(self.m.wrapper_pid_path())

    def give_up_at(self, t0, timeout_s):
        self._give_up = t0 + timeout_s + LAVA_MARGIN_S + DUMP_GRACE_S + 60
        return self._give_up

    def request_task_dump(self):
        return self.m.signal_wrapper()

    def finish(self, w, hang):
        """Wait for lava-run to end (the wrapper quits QEMU once the guest
        is off), then convert LAVA's results (see convert())."""
        m = self.m
        while not hang and m.running():
            if time.monotonic() > self._give_up:
                hang = True
                break
            time.sleep(0.5)
            stop.check()
        if hang:
            m.kill()
        self.convert(w, hang)
        if hang:
            w.hang = w.guest_exit is None

    def diagnostics(self):
        return "\n".join(self._diag)

    def convert(self, w, killed=False):
        """LAVA's log and result.yaml -> ktap.log, lava-results.json and @w."""
        m = self.m
        spec = m.spec
        log = m.read_log()
        target, results, errors = parse_lava_log(log)
        ktap = ktap_from_target(target)
        with open(os.path.join(spec.rundir, "ktap.log"), "w") as f:
            f.write(ktap)
        result_yaml = ""
        for path in glob.glob(os.path.join(m.lava_dir, "out", "**", "result.yaml"),
                              recursive=True):
            with open(path, errors="replace") as f:
                result_yaml = f.read()
        self.cases = case_results(results)
        verdict, etype, emsg = job_verdict(results, result_yaml)
        w.guest_exit = guest_exit_from(self.cases, ktap)
        timed_out = any("timed out" in e or "timeout" in e.lower() for e in errors) or \
            any("lava test monitoring has timed out" in ln for ln in target)
        if "lava test monitoring has timed out" in log or killed:
            timed_out = True
        if w.guest_exit is None and timed_out:
            w.hang = True
        if os.path.exists(m.stats_path):
            try:
                with open(m.stats_path) as f:
                    w.faults = json.load(f)
            except (OSError, ValueError) as e:
                w.faults = {"error": f"lava-stats.json: {e}"}
        elif spec.injector_id and spec.rules_file:
            w.faults = {"error": "the QEMU wrapper saved no fault statistics"}
        if verdict != "pass":
            self._diag.append(f"LAVA job {verdict or 'did not finish'}"
                              + (f" ({etype}: {emsg})" if etype or emsg else ""))
        for e in errors:
            if e not in self._diag:
                self._diag.append(e)
        # QEMU's own complaints reach LAVA's stream; the template's NIC
        # options (-net nic ... -net none) always cause three warnings.
        self._diag += [ln for ln in target if ln.startswith("qemu-system-x86_64:")
                       and "warning:" not in ln]
        stderr_path = os.path.join(spec.rundir, "qemu.stderr")
        with open(stderr_path, "w") as f:
            f.write(self.diagnostics() + ("\n" if self._diag else ""))
        mismatches = compare_cases(self.cases, parse_ktap(ktap)["results"])
        doc = {"job": {"result": verdict, "error_type": etype, "error_msg": emsg},
               "cases": self.cases, "hang": w.hang, "guest_exit": w.guest_exit,
               "mismatches": mismatches}
        with open(os.path.join(spec.rundir, "lava-results.json"), "w") as f:
            json.dump(doc, f, indent=1)
        w.stderr = self.diagnostics()
        return w
