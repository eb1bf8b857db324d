"""`faultline fuzz merge OUT SHARD_DIR...`: what LAVA shards found, into a
campaign directory `faultline fuzz --resume OUT` goes on with.

Each program's outcome is read back from its job's LAVA log (the guest's
marked report lines on ttyS1, the console lines around them) with the
session's own reader; its features are the fuzzer's (signal.py), so a
program that passed joins OUT's corpus when it shows a feature nothing in
OUT showed, in shard order then program order.  Failures go into OUT's book
by signature (triage.py): a new signature gets a failure directory with the
program, its report and console, and a replay.sh; merge boots nothing, so
no failure is triaged (failure.json says so).  Device features (I/O counts,
rules that fired) come from QEMU's injectors over QMP, which a lab does not
give back: a shard's programs have the guest's features only.
"""

import dataclasses
import datetime
import json
import os
import re
import shlex

from faultline.errors import SetupError
from faultline.execute import boot, fresh
from faultline.execute.channel import ChannelError, GuestGone, GuestSilent
from faultline.execute.session import Budgets, Outcome, kernel_check, settle
from faultline.fuzz import signal, shards, state
from faultline.fuzz.corpus import Corpus
from faultline.fuzz.triage import FailureBook, failure_class, prepared, signature, slug, \
    write_text
from faultline.judge.judge import panic_line
from faultline.prog.lang import ProgramError, read
from faultline.run.lava_watch import parse_lava_log

EXIT_LINE = re.compile(r"FAULTLINE-EXIT (\d+)")
DT = re.compile(r'"dt": "([0-9T:.-]+)"')


class LogLines:
    """The report lines of one job's log, as session.read_until reads a
    channel: when they run out, GuestGone (@why) for a guest that ended or
    panicked, else GuestSilent (@why None: LAVA's timeout ended the job on
    a guest that still ran, the hang of a local run)."""

    def __init__(self, lines, why):
        self.lines, self.why = list(lines), why

    def receive(self, timeout, waiting_for):
        if not self.lines:
            if self.why is None:
                raise GuestSilent(f"no {waiting_for} from the guest in the LAVA job's time")
            raise GuestGone(self.why)
        return self.lines.pop(0)


def split_target(target):
    """LAVA's target lines -> (report lines, console text, FAULTLINE-EXIT
    status or None).  The mark may follow console bytes the serial mux
    put before it on the same line."""
    report, console, status = [], [], None
    for raw in target:
        line = raw.rstrip("\r").replace('\\"', '"')   # LAVA escapes double quotes
        at = line.find(shards.REPORT_MARK)
        if at >= 0:
            report.append(line[at + len(shards.REPORT_MARK):])
            if line[:at].strip():
                console.append(line[:at])
            continue
        m = EXIT_LINE.search(line)
        if m and status is None:
            status = int(m.group(1))
        console.append(line)
    return report, "".join(ln + "\n" for ln in console), status


def outcome(prep, log_text):
    """(Outcome, console) of @prep from its job's LAVA log; Outcome None
    when the log shows no guest at all (LAVA's own failure: not run)."""
    target, _, _ = parse_lava_log(log_text)
    report, console, status = split_target(target)
    reached = any(ln.startswith("# kernel ") for ln in console.splitlines()) or report
    panic = panic_line(console)
    if not reached and not panic:
        return None, console
    out = Outcome(prep.name)
    why = (f"the kernel panicked: {panic}" if panic else
           f"the guest's /run.sh ended (FAULTLINE-EXIT {status})" if status is not None else
           None)
    said = None
    try:
        said = fresh._follow(prep, out, LogLines(report, why), Budgets())
    except ChannelError as e:
        out.verdict, out.reason = "crash", str(e)
    if out.verdict != "refused":
        kernel_check(out, console)
    if said:
        settle(out, said)
    return out, console


def job_seconds(log_text):
    """The LAVA job's wall time: its log's first and last timestamps (0.0
    when it has none)."""
    stamps = []
    for line in log_text.splitlines():
        m = DT.search(line)
        if m:
            try:
                stamps.append(datetime.datetime.fromisoformat(m.group(1)))
            except ValueError:
                continue
    return (max(stamps) - min(stamps)).total_seconds() if len(stamps) > 1 else 0.0


# ---------------------------------------------------------------- shards

def load_shard(sdir, need_logs=True, what="fuzz merge"):
    """shard.json of @sdir; one line when it is not a shard's (or, with
    @need_logs, has no job's log yet)."""
    path = os.path.join(sdir, shards.SHARD)
    if not os.path.isdir(sdir):
        raise SetupError(f"{what}: {sdir}: no such directory")
    try:
        with open(path) as f:
            doc = json.load(f)
        for key in ("identity", "seed", "index", "programs"):
            doc[key]
    except FileNotFoundError:
        raise SetupError(f"{what}: {sdir}: not a shard of `faultline fuzz --lava` "
                         f"(no {shards.SHARD})") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SetupError(f"{what}: {path}: not a shard's ({e})") from None
    if need_logs and not any(os.path.isfile(os.path.join(sdir, p["log"])) for p in doc["programs"]):
        raise SetupError(f"{what}: {sdir}: no LAVA log in {os.path.join(sdir, 'logs')} "
                         "(run its jobs, then put each job's log there as NAME.log)")
    return doc


def check_shards(out, docs):
    """One line unless every shard (and OUT's campaign) has one identity
    and no shard comes twice."""
    first_dir, first = docs[0]
    seen = {}
    for sdir, doc in docs:
        diff = state.differs(first["identity"], doc["identity"])
        if diff:
            raise SetupError(f"fuzz merge: {sdir} was made with {diff[0]} {diff[2]}, "
                             f"{first_dir} with {diff[1]} (merge shards of one build)")
        key = (doc["seed"], doc.get("session"), doc.get("from"))
        if key in seen:
            raise SetupError(f"fuzz merge: {sdir} and {seen[key]} are the same shard "
                             f"(seed {doc['seed']})")
        seen[key] = sdir
    if os.path.exists(os.path.join(out, state.STATE)):
        st = state.load(out)
        diff = state.differs(st["identity"], first["identity"])
        if diff:
            raise SetupError(f"fuzz merge: {out}'s campaign was made with {diff[0]} {diff[1]}, "
                             f"the shards with {diff[2]} (a corpus belongs to one build)")
        done = {tuple(s) for sess in st["sessions"] for s in sess.get("lava_shards", [])}
        for sdir, doc in docs:
            if (doc["seed"], doc.get("session"), doc.get("from")) in done:
                raise SetupError(f"fuzz merge: {sdir}: this shard is merged into {out} "
                                 "already")


def replay_argv(doc, path):
    """`faultline prog run PATH --deterministic`: a fresh boot as the shard's."""
    return boot.ProgOptions(path, kernel=doc.get("kernel"), modules=doc.get("modules"),
                            deterministic=True, seed=doc["seed"], memory=doc.get("memory"),
                            cpus=doc.get("cpus")).replay_argv(path)


def write_failure(fdir, sig, doc, sdir, prep, out, console, found_s):
    os.makedirs(fdir, exist_ok=True)
    path = os.path.join(fdir, "program.prog")
    write_text(path, prep.program.text())
    write_text(os.path.join(fdir, "report.txt"), "".join(ln + "\n" for ln in out.report))
    write_text(os.path.join(fdir, "result.json"),
               json.dumps(dataclasses.asdict(out), indent=1, default=sorted) + "\n")
    write_text(os.path.join(fdir, "console.txt"), console)
    plant = doc.get("plant")
    write_text(os.path.join(fdir, "replay.sh"),
               "#!/bin/sh\n# replays the program from a fresh --deterministic boot, as its "
               "LAVA shard ran it\n"
               + (f"# planted: the shard ran `progexec run --plant {plant}`, which `prog run` "
                  "does not: this replay passes\n" if plant else "")
               + shlex.join(replay_argv(doc, path)) + "\n")
    os.chmod(os.path.join(fdir, "replay.sh"), 0o755)
    summary = {"signature": sig, "class": failure_class(sig, plant), "program": prep.name,
               "shard": os.path.abspath(sdir), "found_s": round(found_s, 1),
               "replay": "not triaged: found by a LAVA shard (fuzz merge boots nothing; "
                         "replay.sh replays it)"}
    write_text(os.path.join(fdir, "failure.json"), json.dumps(summary, indent=1) + "\n")
    return summary


def merge(out, sdirs, quiet=False):
    """Merge shards @sdirs into campaign @out; the summary counts."""
    if not sdirs:
        raise SetupError("fuzz merge: OUT SHARD_DIR...: no shard given")
    if os.path.exists(out) and not os.path.isdir(out):
        raise SetupError(f"fuzz merge: {out}: not a directory")
    with state.running(out, "fuzz merge", create=False):
        return _merge(out, sdirs, quiet)


def _merge(out, sdirs, quiet):
    docs = [(sdir, load_shard(sdir)) for sdir in sdirs]
    check_shards(out, docs)
    first = docs[0][1]
    if os.path.exists(os.path.join(out, state.STATE)):
        st = state.load(out)
    else:
        st = {"command": "fuzz", "identity": first["identity"], "seed": first["base_seed"],
              "sessions": [], "stats": [], "elapsed_s": 0.0, "failures": []}
    corpus = Corpus(os.path.join(out, "corpus")).load()
    try:
        book = FailureBook(os.path.join(out, "failures")).load()
    except ValueError as e:
        raise SetupError(str(e)) from None
    last = (st["stats"] or [{}])[-1]
    counts = {k: last.get(k, 0) for k in ("programs", "passed", "failed", "crashes", "refused")}
    counts["not_run"] = 0
    started_s = found_s = float(st.get("elapsed_s", 0.0))
    added, new_failures = 0, 0
    for sdir, doc in sorted(docs, key=lambda d: (d[1]["seed"], d[0])):
        for entry in doc["programs"]:
            log = os.path.join(sdir, entry["log"])
            try:
                program = read(os.path.join(sdir, entry["file"]))
                with open(log, errors="replace") as f:
                    text = f.read()
            except FileNotFoundError:
                counts["not_run"] += 1
                continue
            except ProgramError as e:
                raise SetupError(f"fuzz merge: {e}") from None
            prep = prepared(entry["name"], program, os.path.join(sdir, entry["file"]))
            o, console = outcome(prep, text)
            found_s += job_seconds(text)        # campaign time: the jobs' time, one after another
            if o is None:
                counts["not_run"] += 1
                continue
            counts["programs"] += 1
            counts["passed"] += o.verdict == "pass"
            counts["crashes"] += o.verdict == "crash"
            counts["refused"] += o.verdict == "refused"
            origin = f"lava shard {doc['index']} (seed {doc['seed']}): {entry['origin']}"
            if o.verdict == "pass":
                added += bool(corpus.consider(program, signal.features(o, prep.rules), origin,
                                              found_s))
                continue
            sig = signature(o, console, prep.name)
            if sig is None:
                continue
            counts["failed"] += 1
            if book.claim(sig, found_s):
                new_failures += 1
                summary = write_failure(os.path.join(book.dir, slug(sig)), sig, doc, sdir,
                                        prep, o, console, found_s)
                book.done(sig, {"class": summary["class"], "replay": summary["replay"]})
    feats = corpus.features()
    st["sessions"].append({"jobs": len(docs), "budget_s": round(found_s - started_s, 1),
                           "started_s": round(started_s, 1),
                           "plant": first["identity"].get("plant"),
                           "lava_shards": [[d["seed"], d.get("session"), d.get("from")]
                                           for _, d in docs]})
    snap = {"t": round(found_s, 1), **{k: counts[k] for k in ("programs", "passed", "failed",
                                                               "crashes", "refused")},
            "corpus": len(corpus), "features": len(feats), "edges": signal.edges(feats),
            "failures": len(book.known)}
    st["stats"].append(snap)
    st["elapsed_s"] = snap["t"]
    st["failures"] = book.summaries()
    os.makedirs(out, exist_ok=True)
    state.save(out, st)
    return {**snap, "added": added, "new_failures": new_failures, "not_run": counts["not_run"],
            "shards": len(docs)}
