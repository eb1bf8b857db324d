"""`faultline findings [NAME...] [--results FILE] [--check]` (docs/findings.md):
every finding checked first (its finding.toml, its program as `prog run`
takes it: one line and exit 2 before any VM starts), then each replayed on
its kernel twice, each in a fresh boot: by `prog run`'s own code
(execute/boot.py), then as the C reproducer `prog c` writes, built and
booted the way `prog c` tells a person to (execute/repro.py); recorded in
a results set once all are done.

Exit status: 0 every finding's replays showed its failure again, 1 a
replay passed (the kernel no longer shows it, or its reproducer does not),
2 a setup error."""

import os
import time

from faultline.build.builds import build_all
from faultline.errors import EXIT_FAIL, EXIT_PASS, SetupError
from faultline.execute import boot
from faultline.execute import repro
from faultline.execute import results as program_results
from faultline.findings import finding
from faultline.fuzz.triage import result_signature
from faultline.host.messages import say
from faultline.host.versions import sha256, versions
from faultline.kernel import store
from faultline.results import records
from faultline.run.runner import DEFAULT_OUT, new_dir

DEFAULT_SET = os.path.join(records.RESULTS_DIR, "findings", "default.jsonl")
IDENTITY = ("subject", "kernel_key", "seed")
SEED = 1        # the injectors' seed of a replay (prog run's default)
# The reproducer's build and boot; its program is the replay's, which took
# at most prog run's budgets.
REPRO_TIMEOUT_S = 900


def check_program(f):
    """@f's program as `prog run FILE` takes it: the checker, then the VM's
    device set; ProgramError (FILE:LINE: reason) or SetupError else."""
    boot.prepare([(f.name, f.program)], None, one_file=True)


def kernel_of(f, name):
    """(bzImage, modules) of @f's kernel @name; (None, None): Debian's default."""
    if finding.kernel_arg(name) is None:
        return None, None
    try:
        return store.resolve(name)
    except SetupError as e:
        raise SetupError(f"{records.display(f.toml)}: {e}") from None


def identity(builds, image):
    """(QEMU build, guest build, kernel key) of a replay on @builds."""
    meta = {"kernel": image, "versions": versions(), "kernel_sha256": sha256(builds.kernel)}
    return (os.path.basename(builds.qemu_dir), os.path.basename(builds.guest_dir),
            records.kernel_key(meta))


def replay_reproducer(f, builds, rundir):
    """Write @f's C reproducer into RUNDIR/repro and boot it on @builds:
    {digest (of repro.c), repro_exit (the reproducer's exit status in the
    guest, None when it never said), repro_finding (its first finding
    line, without `finding `)}."""
    d = os.path.join(rundir, "repro")
    paths = repro.write_reproducer(f.program, d, builds=builds, seed=SEED)
    status, ktap = repro.boot_reproducer(d, builds.initramfs, REPRO_TIMEOUT_S)
    first = next((ln[len("finding "):] for ln in ktap.splitlines()
                  if ln.startswith("finding ")), None)
    return {"digest": finding.digest(paths["repro.c"]), "repro_exit": status,
            "repro_finding": first}


def replay(f, builds, image, modules, out, quiet, kernel_key):
    """Run @f's program in a fresh boot of @image, then its C reproducer;
    the record's fields that the replays measured.  The program's own time
    to its failure is time_to_failure_s, the whole replay's wall time
    (boot included) elapsed_s."""
    opts = boot.ProgOptions(f.program, kernel=image, modules=modules, out=out, seed=SEED,
                            quiet=quiet)
    start = time.monotonic()
    _, rundir = boot.run_programs_in(opts)
    elapsed = time.monotonic() - start
    meta, (res,) = program_results.load(rundir)
    if res["verdict"] not in ("pass", "fail", "crash"):
        raise SetupError(f"{f.name}: the replay measured nothing ({res['verdict']}"
                         f"{': ' + res['reason'] if res.get('reason') else ''}; {rundir})")
    try:
        with open(os.path.join(rundir, "console.log"), errors="replace") as fh:
            console = fh.read()
    except OSError:
        console = ""
    sig = result_signature(res, console)
    verdict = res["verdict"]
    if verdict == "crash" and sig.startswith("hang"):
        verdict = "hang"
    failed_after = min(res.get("elapsed_s") or elapsed, elapsed)
    return {"kernel_key": kernel_key, "qemu_build": meta["qemu_build"],
            "guest_build": meta["guest_build"], "seed": meta["seed"], "deterministic": False,
            "verdict": verdict, "elapsed_s": round(elapsed, 1),
            "time_to_failure_s": None if verdict == "pass" else round(failed_after, 1),
            "signature": sig, "reason": res.get("reason") or None,
            "kernel_release": meta.get("kernel_release"),
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "faultline": meta.get("faultline"), **replay_reproducer(f, builds, rundir)}


def run(names=None, results=None, out=None, check_only=False, quiet=False,
        findings_dir=finding.FINDINGS_DIR):
    """The command; its exit status."""
    chosen = finding.load_all(names, findings_dir)
    for f in chosen:
        check_program(f)
    if check_only:      # what the repository holds; which kernels are built is the machine's
        say(f"{len(chosen)} finding(s): each finding.toml complete, each program valid")
        return EXIT_PASS
    kernels = {}
    for f in chosen:
        kernels[f.name, f.kernels[0]] = kernel_of(f, f.kernels[0])
        for k in f.also_on:
            if store.looks_like_name(k) and k not in store.built_names():
                say(f"{f.name}: kernel {k} of also_on is not built here; not replayed there "
                    "(`faultline kernel list`, `faultline kernel build`)")
                continue
            kernels[f.name, k] = kernel_of(f, k)
    path = results or DEFAULT_SET
    where = records.display(path)
    old = records.read_set(path, finding.RECORD_FIELDS) if os.path.exists(path) else []
    # The records these replays replace do not count against their builds.
    kept = [r for r in old if (r["subject"], r["kernel"]) not in kernels]
    out = out or new_dir(DEFAULT_OUT, "findings")
    status, new = EXIT_PASS, []
    for (name, kernel), (image, modules) in kernels.items():
        f = next(f for f in chosen if f.name == name)
        builds = build_all(image, modules, quiet)
        qemu, guest, key = identity(builds, image)
        records.check_builds(where, kept + new, qemu, {key: guest})
        say(f"{name}: replaying its program on kernel {kernel} (fresh boot)")
        rec = finding.record(f, kernel, replay(f, builds, image, modules, out, quiet, key))
        new.append(rec)
        say(f"{name}: {finding.replay_cell(rec)} (on {rec['kernel_release']})")
        if rec["verdict"] == "pass" or rec["repro_exit"] != 1:
            status = EXIT_FAIL
    # Written once all are in: a set of another build is replaced whole, and
    # an interrupted run leaves it as it was.
    records.write_set(path, new, IDENTITY, finding.RECORD_FIELDS,
                      drop=lambda r: (r["subject"], r["kernel"]) in kernels)
    say(f"findings: {len(new)} replay(s) recorded in {where}")
    return status
