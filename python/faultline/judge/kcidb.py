"""KCIDB (schema v5) documents of runs, sweeps, matrices and comparisons:
kcidb.json beside junit.xml, for submission to KernelCI's common database
(`kcidb-submit` reads it as is).

  checkouts  one per kernel source: git commit and describe when --kernel
             comes from a git tree, else the Debian kernel package
  builds     one per kernel image (sha256), with its .config hash
  tests      one per KTAP case (path faultline.SCENARIO.CASE), one per run
             (path faultline.SCENARIO), numeric ones for compare metrics
"""

import hashlib
import json
import os
import re
import subprocess
import time

from faultline.errors import EXIT_CRASH, EXIT_FAIL, EXIT_PASS, EXIT_SETUP
from faultline.judge.ktap import parse_ktap

ORIGIN = "faultline"
SCHEMA = {"major": 5, "minor": 0}
CASE_STATUS = {"ok": "PASS", "fail": "FAIL", "skip": "SKIP", "xfail": "PASS"}


def path_part(text):
    """One component of a dotted KCIDB test path ([a-zA-Z0-9_-]+)."""
    part = re.sub(r"[^a-zA-Z0-9_-]+", "_", text.strip()).strip("_")
    return part or "unnamed"


def run_status(report):
    """KCIDB status of a whole run: a crash is the kernel's fault (FAIL), a
    hang never completed (ERROR), a setup error never ran the test (MISS)."""
    if report.status == EXIT_PASS:
        return "PASS"
    if report.status == EXIT_FAIL:
        return "FAIL"
    if report.status == EXIT_CRASH:
        return "ERROR" if report.outcome == "hang" else "FAIL"
    return "MISS" if report.status == EXIT_SETUP else "ERROR"


def _iso(epoch):
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(epoch))


def _git(tree, *args):
    try:
        out = subprocess.run(["git", "-C", tree, *args], capture_output=True, text=True,
                             timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def kernel_tree(kernel):
    """The kernel source/build tree a bzImage comes from (arch/*/boot/
    bzImage under a directory with a Makefile and .config), else None."""
    d = os.path.dirname(os.path.abspath(kernel))
    for _ in range(4):
        if os.path.isfile(os.path.join(d, ".config")) and \
                os.path.isfile(os.path.join(d, "Makefile")):
            return d
        d = os.path.dirname(d)
    return None


def _sha256_file(path):
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def kernel_objects(meta, release):
    """(checkout, build) of the kernel a run booted, from its run.json."""
    kernel = meta.get("kernel")
    versions = meta.get("versions") or {}
    image_sha = meta.get("kernel_sha256") or "unknown"
    checkout = {"origin": ORIGIN}
    build = {"origin": ORIGIN, "architecture": "x86_64", "status": "PASS"}
    misc = {"kernel_release": release, "kernel_sha256": image_sha}
    tree = kernel_tree(kernel) if kernel else None
    if tree:
        commit = _git(tree, "rev-parse", "HEAD")
        describe = _git(tree, "describe", "--always", "--dirty", "--tags")
        config_sha = _sha256_file(os.path.join(tree, ".config"))
        if commit and re.fullmatch(r"[0-9a-f]{40}", commit):
            checkout["git_commit_hash"] = commit
        if describe:
            checkout["git_commit_name"] = describe
        url = _git(tree, "remote", "get-url", "origin")
        if url and re.match(r"(https|git)://", url):
            checkout["git_repository_url"] = url
        checkout_key = commit or describe or "tree-" + image_sha[:16]
        misc["tree"] = tree
    elif kernel:
        # A packaged kernel: boot/vmlinuz-VERSION has boot/config-VERSION.
        name = os.path.basename(kernel)
        config = os.path.join(os.path.dirname(os.path.abspath(kernel)),
                              "config-" + name.split("-", 1)[1]) if "-" in name else ""
        config_sha = _sha256_file(config) if config else None
        checkout_key = "image-" + image_sha[:16]
    else:
        pkg = versions.get("KERNEL_PACKAGE", "linux-image")
        ver = versions.get("KERNEL_VERSION", release or "unknown")
        checkout["comment"] = f"Debian {pkg} {ver}"
        checkout["tree_name"] = "debian"
        config_sha = None
        checkout_key = f"debian-{ver}"
    checkout["id"] = f"{ORIGIN}:{checkout_key}"
    checkout["misc"] = {"kernel_release": release}
    build["checkout_id"] = checkout["id"]
    build["id"] = f"{ORIGIN}:{image_sha[:16]}"
    if config_sha:
        build["config_name"] = "config-" + config_sha[:12]
        misc["config_sha256"] = config_sha
    build["misc"] = misc
    return checkout, build


def _load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def run_results(report, rundir):
    """Per-KTAP-case results of a run (from memory, else from ktap.log)."""
    if report.results:
        return report.results
    try:
        with open(os.path.join(rundir, "ktap.log"), errors="replace") as f:
            return parse_ktap(f.read())["results"]
    except OSError:
        return []


def run_tests(report, rundir, build_id, meta):
    """The tests of one run: its verdict and one per KTAP case.  Cases carry
    the run's start time and duration (KTAP has no per-case clock)."""
    start = meta.get("start_time")
    if start is None:
        try:
            start = os.path.getmtime(os.path.join(rundir, "run.json"))
        except OSError:
            start = time.time()
    run_id = path_part(os.path.basename(os.path.normpath(rundir)))
    faults = report.faults if isinstance(report.faults, dict) else {}
    misc = {"seed": report.seed, "digest": report.digest,
            "rule_hits": {r["name"]: r["hits"] for r in faults.get("rules", [])},
            "repro": meta.get("repro"), "run_command": meta.get("run_command"),
            "outcome": report.outcome, "reason": report.reason, "rundir": rundir,
            "backend": meta.get("backend", "qemu"), "deterministic": report.deterministic}
    misc = {k: v for k, v in misc.items() if v is not None}
    base = "faultline." + path_part(report.scenario)
    common = {"origin": ORIGIN, "build_id": build_id, "start_time": _iso(start),
              "duration": float(report.elapsed_s), "misc": misc}
    tests = [dict(common, id=f"{ORIGIN}:{run_id}", path=base, status=run_status(report),
                  comment=f"{report.scenario} seed {report.seed}: {report.reason}")]
    seen = {}
    for res in run_results(report, rundir):
        name = path_part(res["name"])
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name += f"-{seen[name]}"
        t = dict(common, id=f"{ORIGIN}:{run_id}.{name}", path=f"{base}.{name}",
                 status=CASE_STATUS.get(res["kind"], "ERROR"),
                 misc=dict(misc, ktap=res["line"], detail=res.get("detail", ""),
                           suite=res.get("suite", "")))
        tests.append(t)
    return tests


def document(runs, compare=None):
    """The KCIDB document of [(Report, rundir)] (and of a comparison's
    compare.json data, whose metrics become numeric tests)."""
    checkouts, builds, tests = {}, {}, []
    build_of = {}
    for report, rundir in runs:
        meta = _load_json(os.path.join(rundir, "run.json"))
        checkout, build = kernel_objects(meta, report.kernel)
        checkouts.setdefault(checkout["id"], checkout)
        builds.setdefault(build["id"], build)
        build_of[rundir] = build["id"]
        tests += run_tests(report, rundir, build["id"], meta)
    if compare:
        tests += compare_tests(compare, build_of)
    return {"version": dict(SCHEMA), "checkouts": list(checkouts.values()),
            "builds": list(builds.values()), "tests": tests}


def compare_tests(data, build_of):
    """Numeric tests of a comparison: each metric's mean on each kernel,
    on that kernel's build, and the series-vs-baseline delta in percent."""
    side_build = {}
    for run in data.get("runs", []):
        b = build_of.get(run.get("rundir"))
        if b:
            side_build.setdefault(run["side"], b)
    tests = []
    scenario = path_part(data.get("scenario", "compare"))
    stamp = _iso(time.time())
    for m in data.get("metrics", []):
        metric = path_part(m["metric"])
        base = f"faultline.{scenario}.compare.{metric}"
        misc = {"verdict": m.get("verdict"), "p": m.get("p"), "expect": m.get("expect"),
                "baseline_samples": m["baseline"]["samples"],
                "series_samples": m["series"]["samples"]}
        misc = {k: v for k, v in misc.items() if v is not None}
        for side in ("baseline", "series"):
            if side not in side_build or m[side].get("mean") is None:
                continue
            tests.append({"origin": ORIGIN, "id": f"{ORIGIN}:{scenario}.compare.{metric}.{side}."
                          f"{side_build[side].split(':', 1)[1]}",
                          "build_id": side_build[side], "path": f"{base}.{side}",
                          "status": "DONE", "start_time": stamp,
                          "number": {"value": float(m[side]["mean"])}, "misc": misc})
        if m.get("delta_percent") is not None and "series" in side_build:
            failed = m.get("expect_ok") is False
            tests.append({"origin": ORIGIN, "id": f"{ORIGIN}:{scenario}.compare.{metric}.delta."
                          f"{side_build['series'].split(':', 1)[1]}",
                          "build_id": side_build["series"], "path": f"{base}.delta",
                          "status": "FAIL" if failed else "DONE", "start_time": stamp,
                          "number": {"value": float(m["delta_percent"]), "unit": "%"},
                          "misc": misc})
    return tests


def write(path, runs, compare=None):
    doc = document(runs, compare)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    return doc
