"""A campaign's own files and its results record.

OUT/fuzz.json: the campaign's identity (the QEMU build, guest build and
kernel its corpus was measured on, and the plant), its seed, its sessions
(one per start or --resume), the totals and the stats over time.  A
resumed campaign must run on the same identity: a corpus kept by the
features of another QEMU or guest build is another measurement.

The results record (results/fuzz/SET.jsonl, docs/results.md): one per
campaign, the fields every record has plus the campaign's numbers;
`faultline docs` renders a set with render().
"""

import fcntl
import json
import os
from contextlib import contextmanager

from faultline.errors import SetupError
from faultline.results import records, tables

STATE = "fuzz.json"
# Held (flock) by the process that runs or merges into a campaign: what
# reads or writes its failure book from outside waits for it to stop.
LOCK = "fuzz.lock"
# The fields a fuzz record adds to records.REQUIRED.
RECORD_FIELDS = {"programs": (int,), "programs_per_hour": records.NUMBER,
                 "corpus": (int,), "edges": (int,), "features": (int,),
                 "failures": (int,), "signatures": (list,), "jobs": (int,),
                 "budget_s": records.NUMBER, "growth": (list,), "verdicts": (dict,)}
# Where the coverage of a campaign is read off for its growth: the
# campaign's elapsed time in seconds (1 min to 16 h, each about twice the
# one before, so that campaigns of different lengths line up).
GROWTH_MARKS_S = (60, 300, 900, 1800, 3600, 7200, 14400, 28800, 57600)
SPARK = "▁▂▃▄▅▆▇█"


def identity(builds_meta, plant, faults="all"):
    """@builds_meta: {qemu_build, guest_build, kernel_key, kernel_release};
    @faults: what rules the programs may carry (prog/gen.py FAULTS)."""
    return {**builds_meta, "plant": plant, "faults": faults}


def faults_of(ident):
    """The --faults of a campaign identity (campaigns from before the
    option drew every fault)."""
    return ident.get("faults") or "all"


def load(out):
    """The fuzz.json of an earlier campaign in @out; SetupError (one line)
    when @out holds none."""
    path = os.path.join(out, STATE)
    try:
        with open(path) as f:
            state = json.load(f)
        missing = [k for k in ("identity", "seed", "sessions", "stats") if k not in state]
    except FileNotFoundError:
        raise SetupError(f"--resume {out}: no {STATE} (not a fuzz campaign's --out)") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SetupError(f"--resume {out}: {STATE} is not a campaign's ({e})") from None
    if missing:
        raise SetupError(f"--resume {out}: {STATE} has no {missing[0]!r}")
    return state


def differs(old, new):
    """(what, old, new) of the first identity key that differs between
    campaign identities @old and @new (a guest build's scenario tools
    aside), or None."""
    for key, what in (("qemu_build", "QEMU build"), ("guest_build", "guest build"),
                      ("kernel_key", "kernel"), ("plant", "--plant"), ("faults", "--faults")):
        a, b = old.get(key), new.get(key)
        if key == "faults":
            a, b = faults_of(old), faults_of(new)
        if key == "guest_build" and a and b:
            a, b = records.guest_base(a), records.guest_base(b)
        if a != b:
            return what, old.get(key), new.get(key)
    return None


def check_same(out, old, new):
    """SetupError (one line naming both) unless identity @new is @old's."""
    diff = differs(old, new)
    if diff:
        what, a, b = diff
        raise SetupError(f"--resume {out}: its corpus was made with {what} {a}, this run "
                         f"has {b} (a corpus belongs to one build: start a new --out)")


def _holder(fd):
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return os.read(fd, 32).decode(errors="replace").strip() or "?"
    except OSError:
        return "?"


@contextmanager
def running(out, what, create=True):
    """Hold campaign @out's lock for its run; SetupError (one line) when
    another process holds it.  @create: make @out (else a missing @out
    holds no campaign and needs no lock)."""
    if not create and not os.path.isdir(out):
        yield
        return
    os.makedirs(out, exist_ok=True)
    fd = os.open(os.path.join(out, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SetupError(f"{what}: {out}: its campaign is running (pid {_holder(fd)}); "
                             "wait for it or stop it (Ctrl-C) first") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def check_stopped(out, what):
    """SetupError (one line) when a process runs the campaign in @out: its
    book and fuzz.json change under it, and it writes them last."""
    with running(out, what, create=False):
        pass


def save(out, state):
    path = os.path.join(out, STATE)
    with open(path + ".tmp", "w") as f:
        json.dump(state, f, indent=1)
    os.replace(path + ".tmp", path)


def check_results(path, ident):
    """Refuse, before any run, a results set of another build."""
    if path and os.path.exists(path):
        records.check_builds(records.display(path), records.read_set(path, RECORD_FIELDS),
                             ident["qemu_build"], {ident["kernel_key"]: ident["guest_build"]})


def record(state, subject, failures=None):
    """The campaign's results record from its fuzz.json @state and its
    @failures (the failure book's summaries; fuzz.json's by default)."""
    ident, last = state["identity"], (state["stats"] or [{}])[-1]
    failures = state.get("failures", []) if failures is None else failures
    elapsed = float(state.get("elapsed_s", 0.0))
    first = min((f["first_s"] for f in failures), default=None)
    return {"subject": subject, "kernel_key": ident["kernel_key"],
            "qemu_build": ident["qemu_build"], "guest_build": ident["guest_build"],
            "seed": state["seed"], "deterministic": False,
            "verdict": "fail" if failures else "pass", "elapsed_s": round(elapsed, 1),
            "time_to_failure_s": first, "digest": None,
            "signature": failures[0]["signature"] if failures else None,
            "programs": last.get("programs", 0),
            "programs_per_hour": round(3600 * last.get("programs", 0) / max(elapsed, 1), 1),
            "corpus": last.get("corpus", 0), "edges": last.get("edges", 0),
            "features": last.get("features", 0), "failures": len(failures),
            "signatures": [f["signature"] for f in failures],
            "jobs": state["sessions"][-1]["jobs"],
            "budget_s": sum(s["budget_s"] for s in state["sessions"]),
            "growth": growth(state["stats"]),
            # signature: "VERDICT: why", for each failure a person judged
            "verdicts": {f["signature"]: f"{f['verdict']}: {f['why']}" for f in failures
                         if f.get("verdict")},
            "kernel_release": ident.get("kernel_release")}


def growth(stats):
    """[[t_s, programs, edges, features]] at each GROWTH_MARKS_S the
    campaign reached (the last snapshot at or before it), and at its end."""
    out = []
    for mark in GROWTH_MARKS_S:
        before = [s for s in stats if s["t"] <= mark]
        if not stats or stats[-1]["t"] < mark or not before:
            continue
        s = before[-1]
        out.append([mark, s["programs"], s["edges"], s["features"]])
    if stats and (not out or stats[-1]["t"] > out[-1][0]):
        s = stats[-1]
        out.append([s["t"], s["programs"], s["edges"], s["features"]])
    return out


def write_record(path, rec):
    """Add the campaign record @rec (record()) to the set @path."""
    return records.write_set(path, [rec], ("subject", "kernel_key", "seed"), RECORD_FIELDS)


def hours(s):
    return f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.0f} min"


def render(recs, set_path):
    """The docs table of a fuzz set."""
    head = (f"Fuzz campaigns of `{set_path}` (`faultline fuzz --results {set_path}`; "
            "`faultline docs` writes this table).\n\n")
    if not recs:
        return head + ("No campaign recorded yet: run `faultline fuzz --budget 4h --results "
                       f"{set_path}`, then `faultline docs`.\n")
    # The time it ran, not the budgets asked for: a session stopped early
    # (Ctrl-C, then --resume) ran less than its budget.
    rows = []
    for r in recs:
        first = "" if r["time_to_failure_s"] is None else hours(r["time_to_failure_s"])
        sigs = "; ".join(f"`{s}` ({r['verdicts'].get(s, 'not triaged yet')})"
                         for s in r["signatures"]) or "none"
        rows.append([r["subject"], r.get("kernel_release") or r["kernel_key"], str(r["seed"]),
                     str(r["jobs"]), hours(r["elapsed_s"]), str(r["programs"]),
                     f"{r['programs_per_hour']:.0f}", str(r["corpus"]), str(r["edges"]),
                     str(r["features"]), str(r["failures"]), first, sigs])
    table = tables.markdown(("campaign", "kernel", "seed", "jobs", "ran", "programs",
                             "per hour", "corpus", "edges", "features", "failures",
                             "first failure after", "signatures"), rows)
    return head + table + totals_table(recs) + growth_table(recs)


def totals_table(recs):
    """The campaigns of each subject and kernel added up (nothing when no
    two share them)."""
    groups = {}
    for r in recs:
        groups.setdefault((r["subject"], r.get("kernel_release") or r["kernel_key"]),
                          []).append(r)
    if len(groups) == len(recs):
        return ""
    rows = []
    for (subj, kernel), group in groups.items():
        sigs = [(s, r["verdicts"]) for r in group for s in r["signatures"]]
        rows.append([subj, kernel, str(len(group)), hours(sum(r["elapsed_s"] for r in group)),
                     str(sum(r["programs"] for r in group)), str(len(sigs)),
                     str(sum(1 for s, v in sigs if s not in v))])
    return "\nAdded up per campaign kind and kernel:\n\n" + tables.markdown(
        ("campaign", "kernel", "campaigns", "ran", "programs", "failures", "not triaged"), rows)


def growth_table(recs):
    """Coverage over the campaigns' time: kcov edges (features on a kernel
    without kcov, whose edges stay 0) at each mark and at the end, and the
    curve of those values drawn against the campaign's own end."""
    marks = [m for m in GROWTH_MARKS_S if any(p[0] == m for r in recs for p in r["growth"])]
    if not marks:
        return ""
    rows = []
    for r in recs:
        use_edges = bool(r["growth"]) and r["growth"][-1][2] > 0
        col = 2 if use_edges else 3
        unit = "" if use_edges else " f"
        at = {p[0]: p for p in r["growth"]}
        cells = [f"{at[m][col]}{unit}" if m in at else "" for m in marks]
        end = r["growth"][-1] if r["growth"] else None
        endcell = f"{end[col]}{unit} at {hours(end[0])}" if end else ""
        top = max(end[col], 1) if end else 1
        curve = "".join(SPARK[min(7, int(8 * p[col] / (top + 1)))] for p in r["growth"])
        rows.append([r["subject"], r.get("kernel_release") or r["kernel_key"], str(r["seed"])]
                    + cells + [endcell, curve])
    return ("\nCoverage as the campaigns went on (kcov edges; `f`: features, on a kernel "
            "without kcov):\n\n" + tables.markdown(
                ["campaign", "kernel", "seed"] + [hours(m) for m in marks] + ["end", "curve"],
                rows))
