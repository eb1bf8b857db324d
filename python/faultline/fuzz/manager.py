"""`faultline fuzz`: a campaign of generated and mutated swap programs
(docs/fuzz.md).

Each job (--jobs N, a thread) keeps one guest up and sends it program after
program: a new one (prog/gen.py) or a mutant of a corpus program
(prog/mutate.py: operations, values, knobs and the `rule` lines of its
fault schedule), drawn from the job's own Random, seeded by (--seed,
session, job).  A program that passes and shows a feature no program
showed before (signal.py) joins the corpus; one that fails (a finding of
the oracle, a kernel splat, a dead or silent guest) is a failure: its
first sighting is triaged on the spot (triage.py: replay from a fresh boot,
minimize, a --deterministic rerun, the reproducer) while the other jobs
fuzz on; later sightings count as hits.  A guest that dies is booted
anew.  The campaign stops at --budget (a job finishes the program or the
triage it is in) or on a signal; --resume OUT goes on with its corpus.
"""

import os
import random
import re
import sys
import threading
import time
from collections import deque
from concurrent.futures import FIRST_EXCEPTION, wait
from dataclasses import dataclass

from faultline.errors import EXIT_FAIL, EXIT_PASS, SetupError
from faultline.execute import devices
from faultline.fuzz import signal, state
from faultline.fuzz.corpus import Corpus
from faultline.fuzz.machines import Booter
from faultline.fuzz.triage import BootFailed, FailureBook, Triage, prepared, signature, slug
from faultline.host import stop
from faultline.host.messages import say
from faultline.host.step_progress import Progress
from faultline.prog.gen import FAULTS, fault_weights, generate, load_weights, offered_weights
from faultline.prog.mutate import mutate

PLANTS = ("drop-write", "stale-page", "leak-slot")
MAX_JOBS = 16
# A new program rather than a mutant, once the corpus has programs.
GENERATE_P = 0.2
# The programs a job's guest ran before a failure, replayed when it does
# not fail alone.
REPLAY_LAST = 8
# Boots of a job that fail in a row before the campaign gives up.
MAX_BOOT_FAILURES = 3
SNAPSHOT_S = 30.0
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h)$")


def parse_budget(text, what="--budget"):
    """Seconds of "90s", "30m", "4h"; SetupError (one line) else."""
    m = _DURATION.match(str(text).strip())
    if not m or float(m.group(1)) <= 0:
        raise SetupError(f"{what} {text!r}: expected a duration such as 90s, 30m or 4h")
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]


@dataclass
class FuzzOptions:
    out: str
    budget_s: float
    jobs: int = 1
    seed: int | None = None
    resume: bool = False
    plant: str | None = None
    results: str | None = None
    minimize_budget_s: float = 600.0
    quiet: bool = False
    until_failure: bool = False     # stop once the first new failure is triaged
    faults: str = "all"             # the rules programs may carry (prog/gen.py FAULTS)
    # Signatures of kernel findings already known (findings/): a failure
    # with one is recorded but does not end an --until-failure campaign.
    known: frozenset = frozenset()

    def check(self):
        if not 1 <= self.jobs <= MAX_JOBS:
            raise SetupError(f"--jobs {self.jobs}: expected 1 to {MAX_JOBS}")
        if self.seed is not None and self.seed < 0:
            raise SetupError(f"--seed {self.seed}: expected a number >= 0")
        if self.faults not in FAULTS:
            raise SetupError(f"--faults {self.faults}: expected one of {', '.join(FAULTS)}")
        if self.plant is not None and self.plant not in PLANTS:
            raise SetupError(f"--plant {self.plant}: expected one of {', '.join(PLANTS)}")
        if os.path.exists(self.out) and not os.path.isdir(self.out):
            raise SetupError(f"--out {self.out}: not a directory")
        if not self.resume and os.path.exists(os.path.join(self.out, state.STATE)):
            raise SetupError(f"--out {self.out} holds a campaign already: --resume {self.out} "
                             "continues it")


@dataclass
class Found:
    """A failing program as its job saw it."""
    prep: object                # session.Prepared
    outcome: object             # session.Outcome
    console: str
    history: list               # the Prepared its guest ran before it, oldest first
    job: int
    found_s: float


@dataclass
class Counts:
    programs: int = 0
    passed: int = 0
    failed: int = 0             # programs that failed (every hit)
    crashes: int = 0            # guests that died on a program
    refused: int = 0            # by the VM's devices or the guest's kernel
    boots: int = 0


class Campaign:
    """What the jobs share: the corpus, the failures, the counts and the
    clock.  @booter.boot(label, deterministic) -> a started VM;
    @replay_argv(path, deterministic) -> a replay command."""

    def __init__(self, opts, st, corpus, book, booter, replay_argv, repro_options=None):
        self.opts, self.st = opts, st
        self.repro_options = repro_options
        self.corpus, self.book, self.booter = corpus, book, booter
        self.replay_argv = replay_argv
        self.session = len(st["sessions"]) - 1
        self.seed = st["seed"]
        self.weights = fault_weights(load_weights(), state.faults_of(st["identity"]))
        self.offers = None      # the first guest's (take_offers)
        last = (st["stats"] or [{}])[-1]
        # A resumed campaign counts on from where it stopped.
        self.counts = Counts(**{k: last.get(k, 0) for k in ("programs", "passed", "failed",
                                                            "crashes", "refused")})
        self.prior_s = float(st.get("elapsed_s", 0.0))
        self.t0 = time.monotonic()
        self.deadline = self.t0 + opts.budget_s
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def now_s(self):
        """Campaign time: the earlier sessions' and this one's."""
        return self.prior_s + time.monotonic() - self.t0

    def over(self):
        return self.stopping.is_set() or time.monotonic() >= self.deadline

    def count(self, **kw):
        with self.lock:
            for k, v in kw.items():
                setattr(self.counts, k, getattr(self.counts, k) + v)

    def next_program(self, rng):
        """(program, where it came from)."""
        parent = self.corpus.choose(rng) if rng.random() >= GENERATE_P else None
        if parent is None:
            seed = rng.getrandbits(32)
            return (generate(seed, self.weights, path=f"<gen {seed}>", offers=self.offers),
                    f"gen {seed}")
        return mutate(parent.program, rng, self.weights), f"mutant of {parent.id}"

    def take_offers(self, vm):
        """The first guest's offers narrow what is generated and mutated to
        what its kernel has: a knob value, mTHP size or cgroup file it lacks
        would only be refused (every guest of a campaign boots one kernel)."""
        offers = vm.offers()
        with self.lock:
            if offers and self.offers is None:
                self.offers = offers
                self.weights = offered_weights(self.weights, offers)

    # ------------------------------------------------------------ one job

    def job(self, job):
        """Fuzz until the budget or a stop: job @job's loop."""
        rng = random.Random(f"{self.seed}:{self.session}:{job}")
        vm, history, n, boot_failures = None, deque(maxlen=REPLAY_LAST), 0, 0
        try:
            while not self.over():
                stop.check()
                if vm is None:
                    try:
                        vm = self.booter.boot(f"fuzz{job}")
                    except BootFailed as e:
                        boot_failures += 1
                        say(f"fuzz: job {job}: {e}")
                        if boot_failures >= MAX_BOOT_FAILURES:
                            raise SetupError(f"fuzz: job {job}: {boot_failures} boots failed "
                                             f"in a row (last: {e})") from None
                        continue
                    boot_failures = 0
                    history.clear()
                    self.count(boots=1)
                    self.take_offers(vm)
                    if self.over():
                        break       # the budget ran out while it booted
                program, origin = self.next_program(rng)
                n += 1
                try:
                    prep = prepared(f"j{job}s{self.session}-{n:06d}", program, "<fuzz>")
                except devices.Refusal:
                    self.count(refused=1)
                    continue
                out, console, alive = vm.run(prep)
                if self.stopping.is_set():
                    break           # a stop powered the guest off: no failure of the kernel
                if not alive:
                    vm.close()
                    vm = None
                found = self.judge(job, prep, out, console, list(history), origin)
                history.append(prep)
                if found is not None:
                    if vm is not None:      # one guest per job: the triage boots its own
                        vm.close()
                        vm = None
                    self.triage(found)
        finally:
            if vm is not None:
                vm.close()

    def judge(self, job, prep, out, console, history, origin):
        """Count one program's outcome; keep it in the corpus if it brought
        something new; a Found when it is a failure seen for the first time."""
        self.count(programs=1, crashes=int(out.verdict == "crash"),
                   refused=int(out.verdict == "refused"), passed=int(out.verdict == "pass"))
        if out.verdict == "pass":
            self.corpus.consider(prep.program, signal.features(out, prep.rules), origin,
                                 self.now_s())
            return None
        sig = signature(out, console, prep.name)
        if sig is None:
            return None
        self.count(failed=1)
        if not self.book.claim(sig, self.now_s()):
            return None
        say(f"fuzz: new failure ({prep.name}, {origin}): {sig}")
        return Found(prep, out, console, history, job, self.now_s())

    def triage(self, found):
        sig = signature(found.outcome, found.console, found.prep.name)
        fdir = os.path.join(self.book.dir, slug(sig))
        t = Triage(self.booter.boot, fdir, sig, self.opts.plant, self.replay_argv,
                   self.opts.minimize_budget_s, self.repro_options, known=sig in self.opts.known)
        summary = t.run(found)
        self.book.done(sig, {k: summary[k] for k in ("class", "replay", "deterministic",
                                                     "minimize", "reproducer", "triage_error")
                             if k in summary})
        if sig in self.opts.known:
            say(f"fuzz: {sig}: a known kernel finding's, kept as found: {fdir}"
                + ("; --until-failure goes on" if self.opts.until_failure else ""))
            return
        say(f"fuzz: {sig}: replay {summary.get('replay', '?')}, minimized to "
            f"{summary.get('minimize', {}).get('ops', ['?', '?'])[1]} ops, deterministic "
            f"{summary.get('deterministic', '?')}: {fdir}")
        if self.opts.until_failure:
            say("fuzz: --until-failure: stopping at the first failure")
            self.stopping.set()

    # ------------------------------------------------------------ the whole

    def snapshot(self):
        """One point of the stats over time."""
        feats = self.corpus.features()
        with self.lock:
            c = self.counts
            return {"t": round(self.now_s(), 1), "programs": c.programs, "passed": c.passed,
                    "failed": c.failed, "crashes": c.crashes, "refused": c.refused,
                    "corpus": len(self.corpus), "features": len(feats),
                    "edges": signal.edges(feats), "failures": len(self.book.known)}

    def status(self, snap):
        rate = 3600 * snap["programs"] / max(snap["t"], 1)
        return (f"{snap['programs']} programs ({rate:.0f}/h), corpus {snap['corpus']}, "
                f"edges {snap['edges']}, features {snap['features']}, failures "
                f"{snap['failures']} ({snap['failed']} failing programs), crashes "
                f"{snap['crashes']}")

    def save(self):
        snap = self.snapshot()
        self.st["stats"].append(snap)
        self.st["elapsed_s"] = snap["t"]
        self.st["failures"] = self.book.summaries()
        state.save(self.opts.out, self.st)
        return snap

    def run(self):
        """Every job to the end; the last snapshot."""
        progress = Progress("fuzz", stream=sys.stderr)
        last_save = time.monotonic()
        with stop.Executor(max_workers=self.opts.jobs) as pool:
            futures = [pool.submit(self.job, j) for j in range(self.opts.jobs)]
            try:
                while True:
                    done, pending = wait(futures, timeout=1.0, return_when=FIRST_EXCEPTION)
                    stop.check()
                    if not self.opts.quiet:
                        progress.update(self.status(self.snapshot()))
                    if time.monotonic() - last_save >= SNAPSHOT_S:
                        self.save()
                        last_save = time.monotonic()
                    failed = [f for f in done if f.exception() is not None]
                    if failed or not pending:
                        break
            except BaseException:
                self.stopping.set()
                self.booter.close_all()
                raise
            finally:
                self.stopping.set()
                snap = self.save()
                if not self.opts.quiet:
                    progress.finish(self.status(snap))
            if failed:
                self.booter.close_all()
                failed[0].result()          # raise the job's error here
        return snap


def subject(plant, faults="all"):
    """A campaign's results subject."""
    return ("fuzz" + (f"-plant-{plant}" if plant else "")
            + (f"-faults-{faults}" if faults != "all" else ""))


def campaign_record(out, st, book):
    """The results record of the campaign in @out (its fuzz.json @st, its
    failure @book with the verdicts given), its kernel release from its
    guests' consoles."""
    ident = dict(st["identity"])
    ident["kernel_release"] = ident.get("kernel_release") or release_on_console(out)
    return state.record({**st, "identity": ident},
                        subject(ident.get("plant"), state.faults_of(ident)),
                        book.summaries())


def record_campaign(out, results):
    """`fuzz record DIR --results FILE`: the results record of the campaign
    in @out as it stands, with the verdicts of its failures (`fuzz
    triage`); nothing runs, so the record is of the campaign's own builds."""
    st = state.load(out)
    state.check_stopped(out, "fuzz record")
    try:
        book = FailureBook(os.path.join(out, "failures")).load()
    except ValueError as e:
        raise SetupError(str(e)) from None
    state.check_results(results, st["identity"])
    rec = campaign_record(out, st, book)
    state.write_record(results, rec)
    return rec


def release_on_console(out):
    """The kernel release a guest of the campaign in @out booted, from its
    console's `Linux version` line, or None."""
    vms = os.path.join(out, "vms")
    for name in sorted(os.listdir(vms)) if os.path.isdir(vms) else []:
        try:
            with open(os.path.join(vms, name, "console.log"), errors="replace") as f:
                m = re.search(r"Linux version (\S+)", f.read(65536))
        except OSError:
            continue
        if m:
            return m.group(1)
    return None


def triage_failure(out, which, verdict, why):
    """`fuzz triage DIR FAILURE VERDICT WHY`: a person's verdict on a
    failure of the campaign in @out; its record in the book."""
    state.load(out)
    state.check_stopped(out, "fuzz triage")
    try:
        return FailureBook(os.path.join(out, "failures")).load().judge(which, verdict, why)
    except ValueError as e:
        raise SetupError(f"fuzz triage: {e}") from None


def fuzz(opts, builds_meta, make_vm, replay_argv, repro_options=None):
    """Run a campaign (opts checked, builds done): @builds_meta (its
    identity), @make_vm(rundir, deterministic) -> a VM, @replay_argv(path,
    deterministic) -> argv, @repro_options: execute/repro.py's
    write_reproducer keywords.  Exit status: 0 no failure, 1 a failure found."""
    with state.running(opts.out, "fuzz" + (" --resume" if opts.resume else "")):
        return _fuzz(opts, builds_meta, make_vm, replay_argv, repro_options)


def _fuzz(opts, builds_meta, make_vm, replay_argv, repro_options):
    out = opts.out
    ident = state.identity(builds_meta, opts.plant, opts.faults)
    if opts.resume:
        st = state.load(out)
        state.check_same(out, st["identity"], ident)
        if opts.seed is not None and opts.seed != st["seed"]:
            raise SetupError(f"--resume {out}: the campaign's seed is {st['seed']}, not "
                             f"{opts.seed} (leave --seed out to go on)")
    else:
        st = {"command": "fuzz", "identity": ident, "seed": opts.seed or 1, "sessions": [],
              "stats": [], "elapsed_s": 0.0, "failures": []}
    state.check_results(opts.results, ident)
    corpus = Corpus(os.path.join(out, "corpus")).load()
    try:
        book = FailureBook(os.path.join(out, "failures")).load()
    except ValueError as e:
        raise SetupError(str(e)) from None
    os.makedirs(out, exist_ok=True)
    st["sessions"].append({"jobs": opts.jobs, "budget_s": opts.budget_s,
                           "started_s": round(float(st.get("elapsed_s", 0.0)), 1),
                           "plant": opts.plant, "until_failure": opts.until_failure,
                           "faults": opts.faults})
    state.save(out, st)
    c = Campaign(opts, st, corpus, book, Booter(out, make_vm), replay_argv, repro_options)
    if not opts.quiet:
        say(f"fuzz: {out}: {opts.jobs} job(s) for {state.hours(opts.budget_s)}, seed "
            f"{st['seed']}, corpus {len(corpus)}, {len(book.known)} failure(s) known"
            + (f", planted {opts.plant}" if opts.plant else "")
            + (f", faults: {opts.faults}" if opts.faults != "all" else ""))
    try:
        snap = c.run()
    finally:
        # A campaign stopped by a signal is recorded as far as it went.
        if opts.results:
            state.write_record(opts.results, campaign_record(out, st, book))
    say(f"fuzz: {out}: {c.status(snap)}")
    for f in st["failures"]:
        say(f"  {f['signature']}  ({f['hits']} hit(s)) {os.path.join(out, 'failures', f['dir'])}")
    return EXIT_FAIL if st["failures"] else EXIT_PASS
