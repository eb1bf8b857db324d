"""Unit tests of kernel-CI output: LAVA job generation (checked with
lava-dispatcher's own job schema and lava-server's device template), the
KTAP monitor pattern (driven through pexpect as LAVA's monitor does), the
conversion of LAVA's results back into a run, KCIDB v5 and JUnit
documents, and the matrix summary.  No network."""

import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
from unittest import mock
import xml.etree.ElementTree as ET

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

import pexpect  # noqa: E402  (python3-pexpect: lava-dispatcher's own dependency)
import yaml  # noqa: E402
from lava_common.schemas import validate as lava_validate  # noqa: E402

from faultline import scenario
from faultline.errors import EXIT_CRASH, EXIT_FAIL, EXIT_PASS, EXIT_SETUP, SetupError
from faultline.judge import kcidb
from faultline.judge.judge import judge
from faultline.judge.ktap import parse_ktap
from faultline.judge.report import Report, junit_xml
from faultline.lab import matrix
from faultline.paths import CACHE
from faultline.run import lava_watch
from faultline.run.lava_watch import LavaView
from faultline.run.watch import WatchResult
from faultline.vm import lava, lava_job
from faultline.vm.machine import MachineSpec

SMOKE = os.path.join(TOP, "scenarios", "smoke.toml")


def spec(tmp, rules=True):
    return MachineSpec(
        scenario="nvme-write-error", qemu_binary="/q/bin/qemu-system-x86_64",
        firmware_dirs=["/q/share", "/usr/share/seabios"], kernel="/k/vmlinuz",
        initrd=os.path.join(tmp, "initramfs.cpio"), append="console=ttyS0 loglevel=6",
        memory="1G", cpus=2, accel="tcg", deterministic=False, rundir=tmp, scratch=tmp,
        disk=os.path.join(tmp, "disk.img"), injector_id="fi0" if rules else None,
        device_args=["-blockdev", f"driver=file,filename={tmp}/disk.img,node-name=disk0,"
                     "cache.direct=off"]
        + (["-object", f"fault-injector,id=fi0,rules={tmp}/rules.txt,seed=7,"
            f"log={tmp}/faults.jsonl"] if rules else [])
        + ["-device", "nvme,serial=faultline0,drive=disk0" + (",fault-injector=fi0"
                                                              if rules else "")],
        extra_args=["-smp", "2"], rules_file=os.path.join(tmp, "rules.txt") if rules else None)


URLS = {"kernel": "http://lab/k/vmlinuz", "initrd": "http://lab/j/initramfs.cpio",
        "disk": "http://lab/disk.img.gz", "rules": "http://lab/j/rules.txt"}


class JobTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        meta = lava_job.job_metadata("nvme-write-error", 7, "v1-3-gabc", "faultline run x --seed 7")
        self.job = lava_job.make_job(spec(self.tmp), URLS, 300, meta)

    def test_valid_lava_job(self):
        # lava-dispatcher's own schema (strict: no unknown keys or context variables)
        lava_validate(yaml.safe_load(lava_job.yaml_dump(self.job)), strict=True)

    def test_job_content(self):
        j = self.job
        self.assertEqual(j["device_type"], "qemu")
        self.assertEqual(j["context"]["arch"], "x86_64")
        self.assertEqual(j["context"]["memory"], 1024)
        extra = " ".join(j["context"]["extra_options"])
        self.assertIn("-nodefaults -machine q35", extra)
        self.assertIn("-serial chardev:ser0 -serial chardev:ser0", extra)
        self.assertIn("-device nvme,serial=faultline0,drive=disk0,fault-injector=fi0", extra)
        self.assertNotIn(self.tmp, extra)          # no path of this host in a lab job
        deploy, boot, test = (next(iter(a.values())) for a in j["actions"])
        self.assertEqual(deploy["to"], "tmpfs")
        imgs = deploy["images"]
        self.assertEqual(set(imgs), {"kernel", "initrd", "disk", "rules"})
        self.assertEqual(imgs["disk"]["compression"], "gz")
        self.assertIn("filename={disk}", imgs["disk"]["image_arg"])
        self.assertIn("rules={rules},seed=7", imgs["rules"]["image_arg"])
        self.assertNotIn("log=", imgs["rules"]["image_arg"])
        self.assertEqual(boot["method"], "qemu")
        self.assertIn("-append 'console=ttyS0 loglevel=6'", imgs["kernel"]["image_arg"])
        self.assertEqual(test["monitors"][0]["name"], lava_job.MONITOR_NAME)
        self.assertEqual(j["metadata"]["faultline.seed"], 7)
        self.assertEqual(j["metadata"]["faultline.repro"], "faultline run x --seed 7")

    def test_no_rules_no_rules_image(self):
        job = lava_job.make_job(spec(self.tmp, rules=False), URLS, 60, {})
        self.assertNotIn("rules", job["actions"][0]["deploy"]["images"])

    def test_local_console_file(self):
        extra, images = lava_job.job_args(spec(self.tmp), console="/run/console.log")
        self.assertIn("-serial file:/run/console.log -serial stdio", extra)
        # a local run keeps the fault log in its run directory and boots
        # the scratch disk in place (no 1 GB copy by LAVA)
        self.assertIn(f"log={self.tmp}/faults.jsonl", images["rules"])
        self.assertNotIn("disk", images)
        self.assertIn(f"-blockdev driver=file,filename={self.tmp}/disk.img,node-name=disk0,"
                      "cache.direct=off", extra)

    def test_device_rendered_like_lava_server(self):
        device = yaml.safe_load(lava_job.render_device(lava_job.template_dir(CACHE),
                                                   self.job["context"]))
        params = device["actions"]["boot"]["methods"]["qemu"]["parameters"]
        self.assertEqual(params["command"], "qemu-system-x86_64")
        opts = " ".join(params["options"])
        self.assertIn("-net none", opts)
        self.assertIn("-m 1024", opts)
        self.assertNotIn("-enable-kvm", opts)
        self.assertEqual(params["extra"], self.job["context"]["extra_options"])

    def test_bad_memory(self):
        with self.assertRaises(Exception):
            lava_job.memory_mb("lots")


def monitor(chunks, delay=0.0):
    """Feed @chunks to LAVA's pattern list through pexpect, the way LAVA's
    TestMonitorAction does; returns [(test_case_id, result)] and whether the
    end was found."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write("import sys, time\n"
                f"for c in {chunks!r}:\n"
                "    sys.stdout.write(c); sys.stdout.flush(); time.sleep(%r)\n" % delay)
    child = pexpect.spawn(sys.executable, [f.name], encoding="utf-8", timeout=10)
    try:
        child.expect(lava_job.START_PATTERN)
        pats = [pexpect.EOF, pexpect.TIMEOUT, lava_job.END_PATTERN, lava_job.RESULT_PATTERN]
        out = []
        while True:
            i = child.expect(pats)
            if i == 2:
                return out, True
            if i < 2:
                return out, False
            m = child.match.groupdict()
            res = lava_job.FIXUPS.get(m["result"], m["result"])
            out.append((m["test_case_id"].strip(), res))
    finally:
        child.close(force=True)
        os.unlink(f.name)


KTAP = ("# kernel 6.12\n# seed 3\n# test: swapstress\nKTAP version 1\n1..5\n"
        "# swapstress pages=10\nok 1 memcg created\n# filled 40960 pages: ok 3 # SKIP x\n"
        "not ok 2 filled 40960 pages\n  # sub case: not ok 4 y\n"
        "  ok 3 sub case # SKIP no zswap\nok 4 round 2: 40 pages # XFAIL known\n"
        "# vmstat pswpout 40960\nBail out! modprobe nvme failed\n# totals: pass:2\n"
        "FAULTLINE-EXIT 12\nfaultline-init: test exited 12\n")


class MonitorPatternTest(unittest.TestCase):
    WANT = [("memcg created", "pass"), ("filled 40960 pages", "fail"),
            ("sub case", "skip"), ("round 2: 40 pages", "pass"),
            ("Bail out! modprobe nvme failed", "fail"), ("FAULTLINE-EXIT", "fail")]

    def test_all_cases_and_exit(self):
        got, ended = monitor([KTAP])
        self.assertEqual(got, self.WANT)
        self.assertTrue(ended)

    def test_split_lines_do_not_lose_or_cut_results(self):
        # Byte by byte around the exit line: the status must still be a case.
        head, tail = KTAP.split("FAULTLINE-EXIT")
        chunks = [head[:40], head[40:97], head[97:]] + list("FAULTLINE-EXIT" + tail)
        got, ended = monitor(chunks, delay=0.005)
        self.assertEqual(got, self.WANT)
        self.assertTrue(ended)

    def test_exit_zero_passes(self):
        got, _ = monitor(["# seed 1\nok 1 a\nFAULTLINE-EXIT 0\n"])
        self.assertEqual(got, [("a", "pass"), ("FAULTLINE-EXIT", "pass")])

    def test_case_ids_match_our_parse(self):
        ours = [lava_job.lava_case_id(r["name"]) for r in parse_ktap(KTAP)["results"]]
        got, _ = monitor([KTAP])
        self.assertEqual([lava_job.lava_case_id(n) for n, _ in got[:-1]], ours)


def log_line(lvl, msg):
    return json.dumps({"dt": "2026-12-01T08:00:00", "lvl": lvl, "msg": msg})


def lava_log(ktap_lines, cases, job="pass", error=None, extra=()):
    lines = [log_line("info", "start: 0 validate"),
             '{"dt": "x", "lvl": "results", "msg": {"case": "file-download", '
             '"definition": "lava", "extra": {"size": ! "123"}, "result": "pass"}}']
    lines += [log_line("target", ln) for ln in extra]
    lines += [log_line("target", ln) for ln in ktap_lines]
    for name, res in cases:
        lines.append(log_line("results", {"case": lava_job.lava_case_id(name),
                                          "definition": lava_job.MONITOR_NAME,
                                          "extra": {"test_case_id": name}, "result": res}))
    jobres = {"case": "job", "definition": "lava", "result": job}
    if error:
        jobres["extra"] = {"error_type": error[0], "error_msg": error[1]}
        lines.append(log_line("error", error[1]))
    lines.append(log_line("results", jobres))
    return "\n".join(lines) + "\n"


class ConvertTest(unittest.TestCase):
    """LAVA's log -> run directory -> the same judge as every backend."""

    def convert(self, log, console="", injector=False):
        tmp = tempfile.mkdtemp()
        s = spec(tmp, rules=injector)
        m = lava.LavaMachine(s)
        with open(m.log_path, "w") as f:
            f.write(log)
        with open(os.path.join(tmp, "console.log"), "w") as f:
            f.write(console)
        w = LavaView(m).convert(WatchResult(backend="lava"))
        sc = scenario.load(SMOKE)
        sc.expect = {}
        return judge(sc, tmp, 1, False, w), w, tmp

    BOOT = "faultline-init: 6.12 up 3s\n"
    OK = ["# kernel 6.12", "# seed 1", "KTAP version 1", "1..2", "ok 1 a", "ok 2 b # SKIP x",
          "FAULTLINE-EXIT 0"]

    def test_pass(self):
        r, w, tmp = self.convert(lava_log(self.OK, [("a", "pass"), ("b", "skip"),
                                                    ("FAULTLINE-EXIT", "pass")]), self.BOOT)
        self.assertEqual((r.status, w.guest_exit), (EXIT_PASS, 0))
        self.assertEqual(r.ktap["skip"], 1)
        with open(os.path.join(tmp, "ktap.log")) as f:
            self.assertEqual(f.read().splitlines(), self.OK)
        with open(os.path.join(tmp, "lava-results.json")) as f:
            doc = json.load(f)
        self.assertEqual(doc["job"]["result"], "pass")
        self.assertEqual(doc["mismatches"], [])
        self.assertEqual([c["result"] for c in doc["cases"]], ["pass", "skip", "pass"])

    def test_failed_case_is_1(self):
        lines = self.OK[:4] + ["not ok 1 a", "ok 2 b", "FAULTLINE-EXIT 1"]
        r, w, _ = self.convert(lava_log(lines, [("a", "fail"), ("b", "pass"),
                                                ("FAULTLINE-EXIT", "fail")]), self.BOOT)
        self.assertEqual((r.status, w.guest_exit), (EXIT_FAIL, 1))

    def test_qemu_not_starting_is_2(self):
        err = "qemu-system-x86_64: -device nvme,bogus=1: Property 'nvme.bogus' not found"
        r, w, _ = self.convert(lava_log([], [], job="fail",
                                        error=("Infrastructure", "Connection closed"),
                                        extra=[err]))
        self.assertEqual(r.status, EXIT_SETUP)
        self.assertIn("bogus", r.reason)

    def test_panic_is_3(self):
        r, _, _ = self.convert(lava_log(self.OK[:4], [], job="fail",
                                        error=("Infrastructure", "Connection closed")),
                               self.BOOT + "Kernel panic - not syncing: Fatal exception\n")
        self.assertEqual((r.status, r.outcome), (EXIT_CRASH, "crash"))

    def test_hang_is_3(self):
        log = lava_log(self.OK[:4], [], job="fail", error=("Test", "lava test monitoring "
                                                                   "has timed out"))
        r, w, _ = self.convert(log, self.BOOT)
        self.assertTrue(w.hang)
        self.assertEqual((r.status, r.outcome), (EXIT_CRASH, "hang"))

    def test_mismatch_reported(self):
        problems = lava_watch.compare_cases([{"case": "a", "name": "a", "result": "pass"}],
                                      [{"name": "a", "kind": "fail"},
                                       {"name": "b", "kind": "ok"}])
        self.assertEqual(len(problems), 2)

    def test_missing_stats_said(self):
        _, w, _ = self.convert(lava_log(self.OK, []), self.BOOT, injector=True)
        self.assertIn("error", w.faults)


# ------------------------------------------------------------ KCIDB v5
# Written from the published KCIDB I/O schema v5.0 (kcidb-io,
# kcidb_io/schema/v05_00.py): the required fields, types, patterns and
# enums of the objects faultline writes; every object has
# additionalProperties false.
ORIGIN_RE = r"^[a-z0-9_]+$"
ID_RE = r"^[a-z0-9_]+:.*$"
DATE_RE = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)$"
STR, NUM, BOOL, OBJ, ARR = str, (int, float), bool, dict, list
KCIDB_V5 = {
    "top": {"required": ["version"], "props": {"version": OBJ, "checkouts": ARR,
                                               "builds": ARR, "tests": ARR, "issues": ARR,
                                               "incidents": ARR}},
    "checkout": {"required": ["id", "origin"],
                 "props": {"_timestamp": STR, "id": STR, "origin": STR, "tree_name": STR,
                           "git_repository_url": STR, "git_commit_hash": STR,
                           "git_commit_name": STR, "git_commit_tags": ARR,
                           "git_commit_message": STR, "git_repository_branch": STR,
                           "git_repository_branch_tip": BOOL, "patchset_files": ARR,
                           "patchset_hash": STR, "message_id": STR, "comment": STR,
                           "start_time": STR, "log_url": STR, "log_excerpt": STR,
                           "valid": BOOL, "misc": OBJ}},
    "build": {"required": ["checkout_id", "id", "origin"],
              "props": {"_timestamp": STR, "checkout_id": STR, "id": STR, "origin": STR,
                        "comment": STR, "start_time": STR, "duration": NUM,
                        "architecture": STR, "command": STR, "compiler": STR,
                        "input_files": ARR, "output_files": ARR, "config_name": STR,
                        "config_url": STR, "log_url": STR, "log_excerpt": STR,
                        "status": STR, "misc": OBJ}},
    "test": {"required": ["build_id", "id", "origin"],
             "props": {"_timestamp": STR, "build_id": STR, "id": STR, "origin": STR,
                       "environment": OBJ, "path": STR, "comment": STR, "log_url": STR,
                       "log_excerpt": STR, "status": STR, "number": OBJ, "waived": BOOL,
                       "start_time": STR, "duration": NUM, "output_files": ARR,
                       "misc": OBJ}},
}
STATUS = {"FAIL", "ERROR", "MISS", "PASS", "DONE", "SKIP"}


def kcidb_problems(doc):
    """Every way @doc breaks the KCIDB v5.0 schema (for the fields above)."""
    out = []

    def check(kind, obj, where):
        rules = KCIDB_V5[kind]
        if not isinstance(obj, dict):
            return out.append(f"{where}: not an object")
        for k in rules["required"]:
            if k not in obj:
                out.append(f"{where}: lacks required {k}")
        for k, v in obj.items():
            t = rules["props"].get(k)
            if t is None:
                out.append(f"{where}: unknown property {k}")
            elif v is None or not isinstance(v, t) or (t is NUM and isinstance(v, bool)):
                out.append(f"{where}.{k}: {v!r} is not {t}")
        for k in ("id", "checkout_id", "build_id"):
            if isinstance(obj.get(k), str) and not re.match(ID_RE, obj[k]):
                out.append(f"{where}.{k}: {obj[k]!r} is not origin:...")
        if isinstance(obj.get("origin"), str) and not re.match(ORIGIN_RE, obj["origin"]):
            out.append(f"{where}.origin: {obj['origin']!r}")
        if isinstance(obj.get("start_time"), str) and not re.match(DATE_RE, obj["start_time"]):
            out.append(f"{where}.start_time: {obj['start_time']!r} is not date-time")
        if "status" in obj and obj["status"] not in STATUS:
            out.append(f"{where}.status: {obj['status']!r}")
        if kind == "build" and "architecture" in obj and \
                not re.match(r"^[a-z0-9_]*$", obj["architecture"]):
            out.append(f"{where}.architecture")
        if kind == "checkout" and "git_commit_hash" in obj and \
                not re.match(r"^[0-9a-f]{40}$|^[0-9a-f]{64}$", obj["git_commit_hash"]):
            out.append(f"{where}.git_commit_hash")
        if kind == "test":
            if "path" in obj and not re.match(r"^([a-zA-Z0-9_-]+(\.[a-zA-Z0-9_-]+)*)?$",
                                              obj["path"]):
                out.append(f"{where}.path: {obj['path']!r}")
            num = obj.get("number")
            if num is not None:
                if set(num) - {"value", "unit", "prefix"} or "value" not in num or \
                        not isinstance(num["value"], NUM) or isinstance(num["value"], bool):
                    out.append(f"{where}.number: {num!r}")
                if "unit" in num and not isinstance(num["unit"], str):
                    out.append(f"{where}.number.unit")
                if "prefix" in num and num["prefix"] not in ("metric", "binary"):
                    out.append(f"{where}.number.prefix")

    check("top", doc, "document")
    v = doc.get("version")
    if not (isinstance(v, dict) and v.get("major") == 5 and set(v) <= {"major", "minor"}
            and isinstance(v.get("minor", 0), int) and 0 <= v.get("minor", 0) <= 3):
        out.append(f"version {v!r}")
    for kind, key in (("checkout", "checkouts"), ("build", "builds"), ("test", "tests")):
        for i, obj in enumerate(doc.get(key, [])):
            check(kind, obj, f"{key}[{i}]")
    ids = [t["id"] for t in doc.get("tests", [])]
    if len(ids) != len(set(ids)):
        out.append("test ids are not unique")
    builds = {b["id"] for b in doc.get("builds", [])}
    checkouts = {c["id"] for c in doc.get("checkouts", [])}
    out += [f"test {t['id']} on unknown build" for t in doc.get("tests", [])
            if t.get("build_id") not in builds]
    out += [f"build {b['id']} of unknown checkout" for b in doc.get("builds", [])
            if b.get("checkout_id") not in checkouts]
    return out


def make_run(tmp, name, status=0, outcome="pass", kernel=None, results=None):
    rundir = os.path.join(tmp, name)
    os.makedirs(rundir)
    meta = {"seed": 3, "kernel": kernel, "kernel_sha256": "ab" * 32,
            "versions": {"KERNEL_PACKAGE": "linux-image-6.12", "KERNEL_VERSION": "6.12.1-1"},
            "repro": "faultline repro " + rundir, "run_command": "faultline run x --seed 3",
            "start_time": 1764576000.5, "backend": "qemu"}
    with open(os.path.join(rundir, "run.json"), "w") as f:
        json.dump(meta, f)
    r = Report(scenario="write-error-redirty-nvme", seed=3, status=status, outcome=outcome,
               reason=outcome, kernel="6.12.1", elapsed_s=12.5,
               faults={"digest": 5, "rules": [{"name": "wfail", "hits": 40}]},
               digest="0000000000000005",
               results=results if results is not None else [
                   {"suite": "swapstress", "name": "data verified", "kind": "ok",
                    "line": "ok 1 data verified"},
                   {"suite": "swapstress", "name": "zswap: off", "kind": "skip",
                    "line": "ok 2 zswap: off # SKIP"},
                   {"suite": "swapstress", "name": "errors seen", "kind": "fail",
                    "line": "not ok 3 errors seen"}])
    return r, rundir


# Two real ktap.log of syncblk-task (swapctx around swapstress), seed 1: a
# pass, and a --mutate lie run whose data checks fail with other counts.
REAL_KTAP = [os.path.join(TOP, "tests", "unit", "ktap", name)
             for name in ("syncblk-task-pass.log", "syncblk-task-mutate-lie.log")]


def ci_case_ids(path):
    """A real run's KTAP as the CI systems name its cases: our parse, LAVA's
    (its monitor pattern through pexpect, as lava-run applies it) and the
    KCIDB test paths."""
    with open(path) as f:
        text = f.read()
    results = parse_ktap(text)["results"]
    got, _ = monitor([text])
    r, rundir = make_run(tempfile.mkdtemp(), "run", results=results)
    paths = [t["path"] for t in kcidb.document([(r, rundir)])["tests"]]
    return results, [lava_job.lava_case_id(n) for n, _ in got], paths


class StableCaseIdTest(unittest.TestCase):
    """A case's id must not depend on what it measured, or a lab cannot
    follow one check's history across runs."""

    def test_two_runs_same_ids(self):
        (pres, plava, pkcidb), (mres, mlava, mkcidb) = map(ci_case_ids, REAL_KTAP)
        # The runs differ: in verdicts and in measured values.
        self.assertEqual({r["kind"] for r in pres}, {"ok"})
        self.assertIn("fail", {r["kind"] for r in mres})
        self.assertNotEqual([r["detail"] for r in pres], [r["detail"] for r in mres])
        # The ids are the same everywhere.
        self.assertEqual([r["name"] for r in pres], [r["name"] for r in mres])
        self.assertEqual(plava, mlava)
        self.assertEqual(pkcidb, mkcidb)
        # LAVA: one case per result (and FAULTLINE-EXIT), none for the '# NAME:' lines.
        self.assertEqual(plava[:-1], [lava_job.lava_case_id(r["name"]) for r in pres])
        self.assertEqual(len(set(plava)), len(plava))
        self.assertEqual(len(pkcidb), len(pres) + 1)

    def test_details_are_kept(self):
        # What a failed case measured reaches report.json's failures.
        with open(REAL_KTAP[1]) as f:
            k = parse_ktap(f.read())
        failed = [r for r in k["results"] if r["kind"] == "fail"]
        self.assertTrue(all(r["detail"] for r in failed))
        self.assertEqual(k["failures"][0], f"{failed[0]['line']}: {failed[0]['detail']}")


class KcidbTest(unittest.TestCase):
    def test_checker_catches_bad_documents(self):
        # The check itself must fail on what the schema forbids.
        bad = {"version": {"major": 4}, "tests": [{"id": "nocolon", "origin": "Bad!",
                                                   "status": "OK", "path": "a..b",
                                                   "extra": 1}]}
        self.assertGreaterEqual(len(kcidb_problems(bad)), 6)

    def test_run_document(self):
        tmp = tempfile.mkdtemp()
        runs = [make_run(tmp, "r1"), make_run(tmp, "r2", status=EXIT_CRASH, outcome="hang")]
        doc = kcidb.document(runs)
        self.assertEqual(kcidb_problems(doc), [])
        self.assertEqual(doc["version"], {"major": 5, "minor": 0})
        paths = {t["path"]: t for t in doc["tests"] if t["id"].startswith("faultline:r1")}
        case = paths["faultline.write-error-redirty-nvme.data_verified"]
        self.assertEqual(case["status"], "PASS")
        self.assertEqual(paths["faultline.write-error-redirty-nvme.zswap_off"]["status"],
                         "SKIP")
        self.assertEqual(paths["faultline.write-error-redirty-nvme.errors_seen"]["status"],
                         "FAIL")
        self.assertEqual(case["misc"]["seed"], 3)
        self.assertEqual(case["misc"]["rule_hits"], {"wfail": 40})
        self.assertEqual(case["misc"]["digest"], "0000000000000005")
        self.assertEqual(case["misc"]["run_command"], "faultline run x --seed 3")
        self.assertEqual(case["start_time"], "2025-12-01T08:00:00+00:00")
        self.assertEqual(case["duration"], 12.5)
        hang = [t for t in doc["tests"] if t["id"] == "faultline:r2"][0]
        self.assertEqual(hang["status"], "ERROR")
        self.assertEqual(len(doc["checkouts"]), 1)
        self.assertEqual(doc["checkouts"][0]["id"], "faultline:debian-6.12.1-1")

    def test_kernel_from_git_tree(self):
        tmp = tempfile.mkdtemp()
        tree = os.path.join(tmp, "linux")
        os.makedirs(os.path.join(tree, "arch/x86/boot"))
        for name, text in (("Makefile", "VERSION = 6\n"), (".config", "CONFIG_SWAP=y\n"),
                           ("arch/x86/boot/bzImage", "image")):
            with open(os.path.join(tree, name), "w") as f:
                f.write(text)
        env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
                   GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
        for cmd in (["init", "-q"], ["add", "Makefile"], ["commit", "-qm", "v6"],
                    ["tag", "v6.99"]):
            subprocess.run(["git", "-C", tree, *cmd], check=True, env=env)
        r, rundir = make_run(tmp, "r", kernel=os.path.join(tree, "arch/x86/boot/bzImage"))
        doc = kcidb.document([(r, rundir)])
        self.assertEqual(kcidb_problems(doc), [])
        co, b = doc["checkouts"][0], doc["builds"][0]
        self.assertRegex(co["git_commit_hash"], r"^[0-9a-f]{40}$")
        self.assertTrue(co["git_commit_name"].startswith("v6.99"))
        self.assertTrue(b["config_name"].startswith("config-"))
        self.assertEqual(b["checkout_id"], co["id"])

    def test_compare_metrics_are_numbers(self):
        tmp = tempfile.mkdtemp()
        a, b = make_run(tmp, "baseline-1"), make_run(tmp, "series-1")
        data = {"scenario": "writeback-dropbehind-nvme",
                "runs": [{"side": "baseline", "rundir": a[1]},
                         {"side": "series", "rundir": b[1]}],
                "metrics": [{"metric": "vmstat pgrotated", "expect": "lower",
                             "baseline": {"mean": 100.0, "samples": [100]},
                             "series": {"mean": 50.0, "samples": [50]},
                             "delta_percent": -50.0, "p": 0.01, "expect_ok": True,
                             "verdict": "lower"}]}
        # the two sides boot different kernels
        with open(os.path.join(b[1], "run.json")) as f:
            meta = json.load(f)
        meta["kernel_sha256"] = "cd" * 32
        with open(os.path.join(b[1], "run.json"), "w") as f:
            json.dump(meta, f)
        doc = kcidb.document([a, b], compare=data)
        self.assertEqual(kcidb_problems(doc), [])
        nums = {t["path"]: t for t in doc["tests"] if "number" in t}
        base = "faultline.writeback-dropbehind-nvme.compare.vmstat_pgrotated"
        self.assertEqual(nums[base + ".baseline"]["number"], {"value": 100.0})
        self.assertEqual(nums[base + ".delta"]["number"], {"value": -50.0, "unit": "%"})
        self.assertNotEqual(nums[base + ".baseline"]["build_id"],
                            nums[base + ".series"]["build_id"])


class JunitTest(unittest.TestCase):
    def test_same_units(self):
        tmp = tempfile.mkdtemp()
        runs = [make_run(tmp, "r1"), make_run(tmp, "r2", status=EXIT_CRASH, outcome="crash")]
        root = ET.fromstring(junit_xml(runs))
        suites = root.findall("testsuite")
        self.assertEqual(len(suites), 2)
        self.assertEqual(suites[0].get("failures"), "1")
        self.assertEqual(suites[0].get("skipped"), "1")
        self.assertEqual(suites[1].get("errors"), "1")


class MatrixSummaryTest(unittest.TestCase):
    def rep(self, seed, status, outcome):
        return Report(scenario="s", seed=seed, status=status, outcome=outcome, reason=outcome)

    def test_rows_and_status(self):
        res = [("a", 0, self.rep(1, 0, "pass"), "r1"), ("a", 0, self.rep(2, 1, "fail"), "r2"),
               ("a", 1, self.rep(1, 0, "pass"), "r3"), ("b", 0, self.rep(1, 3, "hang"), "r4")]
        rows = matrix.summarize(res, ["k0", "k1"])
        self.assertEqual([(r["scenario"], r["kernel"], r["passed"], r["failed"], r["crashed"])
                          for r in rows],
                         [("a", "k0", 1, 1, 0), ("a", "k1", 1, 0, 0), ("b", "k0", 0, 0, 1)])
        self.assertEqual(rows[0]["failing"], [(2, "fail", "r2")])
        text = matrix.format_table(rows)
        self.assertIn("seed 2 fail: r2", text)
        self.assertEqual(matrix.matrix_status(res), EXIT_CRASH)
        self.assertEqual(matrix.matrix_status(res[:3]), EXIT_FAIL)
        self.assertEqual(matrix.matrix_status(res[:1]), EXIT_PASS)

    def test_plan_and_jobs(self):
        sc = scenario.load(SMOKE)
        self.assertEqual(len(matrix.plan([sc, sc], [1, 2], [(None, None)] * 2)), 8)
        self.assertEqual(matrix.default_jobs([sc], ncpu=2), 1)
        self.assertEqual(matrix.default_jobs([sc], ncpu=8), 4)

    def test_scenarios_all_leaves_out_what_a_kernel_refuses(self):
        every = matrix.scenario_names("all")
        self.assertIn("smoke", every)
        self.assertFalse([n for n in every if "selftest" in n])
        with self.assertRaisesRegex(SetupError, "--scenarios all stands alone"):
            matrix.scenario_names("all,smoke")
        a, b = scenario.load(SMOKE), scenario.load("nvme-iocheck")
        kernels = [("/k/6.12", None), ("/k/7.2", None)]

        def check(scs, kernel, modules):
            if kernel == "/k/7.2" and any(sc.name == "nvme-iocheck" for sc in scs):
                raise SetupError("kernel /k/7.2 lacks what the scenario needs: CONFIG_X")
        with mock.patch.object(matrix.kconfig, "check", check):
            refused = matrix.refusals([a, b], kernels, every=True)
            self.assertEqual(list(refused), [("nvme-iocheck", 1)])
            self.assertEqual([(sc.name, ki) for sc, ki, _ in
                              matrix.plan([a, b], [1], kernels, refused)],
                             [("smoke", 0), ("smoke", 1), ("nvme-iocheck", 0)])
            # A list the user named is refused whole.
            with self.assertRaisesRegex(SetupError, "CONFIG_X"):
                matrix.refusals([a, b], kernels, every=False)


if __name__ == "__main__":
    unittest.main()
