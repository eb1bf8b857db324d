"""Records of measured runs: results/KIND/SET.jsonl, one JSON object a line.

A set is one measurement (a recall campaign, later a fuzz campaign), kept
in the repository so that every table in docs/ can be regenerated from it
(`faultline docs`).  Every record has the fields of REQUIRED; a kind adds
its own (bugs/recall_table.py: the scenario, the side...).  A set holds
runs of one QEMU build, and for each kernel of one guest build: numbers
measured on different builds are different measurements, and a set that
mixes them is refused (reading it, or adding a run to it), in one line
naming both builds.

Lines are written with sorted keys and in the order of the set's identity
fields, so that a rerun changes only the lines of the runs it redid."""

import contextlib
import fcntl
import json
import os
import time

from faultline import TOP
from faultline.errors import EXIT_CRASH, EXIT_PASS, SetupError
from faultline.host.versions import sha256, versions
from faultline.judge import failure
from faultline.judge.report import load_report
from faultline.kernel import store

RESULTS_DIR = os.path.join(TOP, "results")
NUMBER = (int, float)
NULL = type(None)
# Every record: what was measured on what, and what came of it.
REQUIRED = {
    "subject": (str,),                  # the bug, or the program set
    "kernel_key": (str,),               # store.py's entry key ("debian:ABI" for Debian's)
    "qemu_build": (str,),               # the QEMU build's cache key, as run.json has it
    "guest_build": (str,),              # the guest image's cache key, as run.json has it
    "seed": (int,),
    "deterministic": (bool,),
    "verdict": (str,),                  # VERDICTS
    "elapsed_s": NUMBER,                # the run's wall time
    "time_to_failure_s": NUMBER + (NULL,),  # None when it passed
    "signature": (str, NULL),           # failure.signature(); None when it passed
    "digest": (str, NULL),              # the fault log's digest, when the run has one
}
VERDICTS = ("pass", "fail", "crash", "hang")
# A guest build for a scenario's extra tools is named BASE-tools-HASH.
TOOLS_SEP = "-tools-"


# ---------------------------------------------------------------- one record

def verdict(report):
    """The verdict of a finished run's Report, or None for a run that says
    nothing (it could not be set up, or was stopped)."""
    if report.status == EXIT_PASS:
        return "pass"
    if report.outcome == "hang":
        return "hang"
    if report.status == EXIT_CRASH:
        return "crash"
    return "fail" if report.status == 1 else None


def kernel_key(meta):
    """The kernel's identity from a run.json: its entry key in the kernel
    cache, "debian:ABI" for Debian's packaged kernel, else its hash."""
    image = meta.get("kernel")
    if image:
        return store.key_of(image) or "sha256:" + str(meta.get("kernel_sha256", "?"))[:16]
    abi = (meta.get("versions") or {}).get("KERNEL_ABI")
    return "debian:" + abi if abi else "sha256:" + str(meta.get("kernel_sha256", "?"))[:16]


def builds_identity(builds, kernel):
    """What a measurement ran on: the QEMU build, the guest build and the
    kernel's key (@kernel: its image, None for Debian's packaged one)."""
    meta = {"kernel": kernel, "versions": versions(),
            "kernel_sha256": sha256(kernel) if kernel else None}
    return {"qemu_build": os.path.basename(builds.qemu_dir),
            "guest_build": os.path.basename(builds.guest_dir),
            "kernel_key": kernel_key(meta)}


def load_run(rundir):
    """(run.json, Report) of a finished run directory; SetupError else."""
    r = load_report(rundir)
    try:
        with open(os.path.join(rundir, "run.json")) as f:
            return json.load(f), r
    except (OSError, ValueError) as e:
        raise SetupError(f"{rundir}: no readable run.json ({e})") from None


def record_of_run(rundir, subject, meta=None, report=None, **fields):
    """The record of the run in @rundir (its run.json and report.json unless
    given), with the kind's @fields; None for a run that measured nothing."""
    if meta is None or report is None:
        meta, report = load_run(rundir)
    v = verdict(report)
    if v is None:
        return None
    rec = {"subject": subject, "kernel_key": kernel_key(meta),
           "qemu_build": meta.get("qemu_build"), "guest_build": meta.get("guest_build"),
           "seed": report.seed, "deterministic": bool(report.deterministic),
           "verdict": v, "elapsed_s": round(report.elapsed_s, 1),
           "time_to_failure_s": None if v == "pass" else round(report.elapsed_s, 1),
           "signature": failure.signature(rundir, report), "digest": report.digest,
           "reason": report.reason}
    if meta.get("start_time"):
        rec["date"] = time.strftime("%Y-%m-%d", time.gmtime(meta["start_time"]))
    if meta.get("faultline"):
        rec["faultline"] = meta["faultline"]
    rec.update(fields)
    return rec


def _type_names(types):
    return " or ".join("null" if t is NULL else t.__name__ for t in types)


def check_record(rec, fields=None, where="record"):
    """SetupError (one line) unless @rec has every field of REQUIRED and of
    the kind's @fields ({name: types}), each of its type."""
    if not isinstance(rec, dict):
        raise SetupError(f"{where}: not a JSON object")
    for name, types in {**REQUIRED, **(fields or {})}.items():
        if name not in rec:
            raise SetupError(f"{where}: no field {name!r}")
        v = rec[name]
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
            raise SetupError(f"{where}: field {name!r} is {v!r}, not {_type_names(types)}")
    if rec["verdict"] not in VERDICTS:
        raise SetupError(f"{where}: verdict {rec['verdict']!r} is not one of "
                         f"{', '.join(VERDICTS)}")
    if (rec["verdict"] == "pass") != (rec["time_to_failure_s"] is None):
        raise SetupError(f"{where}: time_to_failure_s must be null exactly when the run passed")


# ---------------------------------------------------------------- builds of a set

def guest_base(guest_build):
    """The guest image without a scenario's extra tools."""
    return guest_build.split(TOOLS_SEP, 1)[0]


def check_builds(path, records, qemu_build=None, guest_builds=None):
    """SetupError (one line naming both ids) unless @records, with a run of
    @qemu_build and @guest_builds ({kernel key: guest build}) when given,
    are runs of one QEMU build and, per kernel, of one guest build."""
    qemu, guests = None, {}
    extra = [{"qemu_build": qemu_build, "guest_build": g, "kernel_key": k}
             for k, g in (guest_builds or {}).items()]
    if qemu_build and not extra:
        extra = [{"qemu_build": qemu_build}]
    for rec in list(records) + extra:
        q = rec.get("qemu_build")
        if q and qemu and q != qemu:
            raise SetupError(f"{path}: a run of QEMU build {q} cannot join runs of QEMU build "
                             f"{qemu} (a set holds one QEMU build; start another set with "
                             "--results FILE)")
        qemu = qemu or q
        if rec.get("guest_build"):
            g, k = guest_base(rec["guest_build"]), rec["kernel_key"]
            if guests.setdefault(k, g) != g:
                raise SetupError(f"{path}: kernel {k}: a run of guest build {g} cannot join "
                                 f"runs of guest build {guests[k]} (a set holds one guest "
                                 "build per kernel; start another set with --results FILE)")


# ---------------------------------------------------------------- sets

def check_results_option(path, fields):
    """SetupError (one line) for a --results set that cannot be read or
    written: refused before anything is built."""
    if not path:
        return
    if os.path.exists(path):
        read_set(path, fields)
    elif not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise SetupError(f"--results {path}: no directory {os.path.dirname(path) or '.'}")


def check_set_builds(path, fields, idents):
    """SetupError (one line) when the set @path holds runs of other builds
    than @idents (builds_identity of each kernel to run): refused before
    anything runs."""
    if not path or not os.path.exists(path):
        return
    recs = read_set(path, fields)
    for ident in idents:
        check_builds(display(path), recs, ident["qemu_build"],
                     {ident["kernel_key"]: ident["guest_build"]})


def display(path):
    """@path relative to the repository when it is inside it."""
    rel = os.path.relpath(os.path.abspath(path), TOP)
    return path if rel.startswith("..") else rel


def read_set(path, fields=None):
    """The records of the set @path, each checked (REQUIRED and @fields)
    and all of one QEMU build and one guest build per kernel; SetupError
    (one line, FILE:LINE) else.  A missing file is an error: a set that
    has no runs yet is an empty file."""
    where = display(path)
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise SetupError(f"{where}: cannot read the results ({e.strerror})") from None
    records = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise SetupError(f"{where}:{n}: not JSON ({e})") from None
        check_record(rec, fields, f"{where}:{n}")
        records.append(rec)
    check_builds(where, records)
    return records


def dumps(rec):
    return json.dumps(rec, sort_keys=True, separators=(", ", ": "))


def write_set(path, new, identity, fields=None, drop=None):
    """Add the records @new to the set @path (created if missing): a record
    with the same @identity fields as one already there replaces it; the
    set's lines are kept in the order of their identity.  Refused (before
    anything is written) if a record is incomplete or of another build.
    @drop(record) -> True: a record of the set that @new replaces whatever
    its identity (it does not count against @new's builds).  Returns the
    set's records.  Campaigns that share a set (two `bugs --fuzz` at once)
    take turns: each reads what the other wrote."""
    with _set_lock(path):
        return _write_set(path, new, identity, fields, drop)


@contextlib.contextmanager
def _set_lock(path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    lock = os.path.join(os.path.dirname(os.path.abspath(path)),
                        f".{os.path.basename(path)}.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write_set(path, new, identity, fields, drop):
    old = read_set(path, fields) if os.path.exists(path) else []
    old = [r for r in old if not (drop and drop(r))]
    for rec in new:
        check_record(rec, fields, f"{display(path)}: new record")
    check_builds(display(path), old + list(new))
    merged = {tuple(r[k] for k in identity): r for r in old}
    merged.update({tuple(r[k] for k in identity): r for r in new})
    records = [merged[k] for k in sorted(merged)]
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.writelines(dumps(r) + "\n" for r in records)
    os.replace(tmp, path)
    return records


def all_sets(results_dir=RESULTS_DIR):
    """Every results/KIND/SET.jsonl, sorted."""
    out = []
    for root, _, files in os.walk(results_dir):
        out += [os.path.join(root, fn) for fn in files if fn.endswith(".jsonl")]
    return sorted(out)
