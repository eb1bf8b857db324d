"""What a stopped launcher leaves: report.json with outcome "aborted" for a
run stopped by a signal (tracks_run), main()'s final cleanup (finish()),
and, at the next launcher's start, the cleanup after a launcher that died
without one (sweep()).

A launcher killed outright (SIGKILL) runs none of its own cleanup.  Its
QEMU dies with it (procs.die_with_parent(), the parent-death signal),
libvirt destroys its AUTODESTROY domain when the connection drops, and the
next launcher to start removes the rest (sweep()): every scratch directory
names its owner (pid, start time, boot), and only a directory whose owner
is gone is touched.
"""

import functools
import glob
import json
import os
import shutil
import signal
import tempfile
import time

from faultline import scenario
from faultline.host.messages import say
from faultline.host.procs import alive, kill_mentioning
from faultline.host.scratchdirs import (LAVA_TMP, LIBVIRT_RECORD, PREFIX, PROCESSES, read_json,
                                        read_owner, remove_scratch, scratch_bases,
                                        unreported_rundir)
from faultline.host.stop import Aborted, check, leftovers, note_reported, unregister
from faultline.judge.report import Report
from faultline.vm import libvirt

# Status of a run whose launcher died without a word (SIGKILL or a crash):
# 128 + SIGKILL, the likelier of the two (the signal itself is not known).
KILLED_STATUS = 128 + signal.SIGKILL


def finish(e):
    """main()'s end after Aborted @e: every thread has unwound; clean up
    what an interrupted cleanup left.  Returns the exit status."""
    machines, scratch, _ = leftovers()
    for m in machines:
        try:
            m.cleanup()
        except Exception:  # noqa: BLE001 - the next one must still be cleaned up
            pass
        unregister(m)
    for d in scratch:
        # A run stopped before its own handler could write its report
        # (between claiming its directory and starting it): say so here.
        rundir = unreported_rundir(read_owner(d))
        if rundir:
            write_aborted(rundir, f"aborted by {e.name} during {phase(rundir)}",
                          128 + e.signum, e.name)
        remove_scratch(d)
    reported = leftovers()[2]
    where = "; report.json says so in " + ", ".join(reported) if reported else ""
    say(f"aborted by {e.name}{where}")
    return 128 + e.signum


def sweep():
    """At launcher start: clean up after launchers that died without doing
    it.  For each scratch directory whose owner is gone: kill what still
    runs from it, destroy its libvirt domain, remove lava-run's download
    directory, write its run's report.json if there is none, remove it.
    A directory without owner.json is left alone (its owner is unknown).
    Returns the directories removed."""
    removed = []
    for base in {*scratch_bases(), tempfile.gettempdir()}:
        for d in sorted(glob.glob(os.path.join(base, PREFIX + "*"))):
            if os.path.islink(d) or not os.path.isdir(d):
                continue
            owner = read_owner(d)
            if owner is None or alive(owner):
                continue
            _clean_dead(d, owner)
            removed.append(d)
    return removed


def _clean_dead(d, owner):
    for p in read_json(os.path.join(d, PROCESSES)) or []:
        if isinstance(p, dict) and alive(p):
            try:
                os.kill(p["pid"], signal.SIGKILL)
            except OSError:
                pass
    kill_mentioning(d)
    record = os.path.join(d, LIBVIRT_RECORD)
    if os.path.exists(record):
        try:
            libvirt.destroy_orphans_of(record)
        except Exception:  # noqa: BLE001 - libvirt gone too: nothing to destroy
            pass
    for t in glob.glob(os.path.join(LAVA_TMP, os.path.basename(d) + "-*")):
        shutil.rmtree(t, ignore_errors=True)
    rundir = unreported_rundir(owner)
    if rundir:
        reason = (f"the launcher (pid {owner.get('pid')}) ended without cleaning up "
                  f"(killed by SIGKILL, or crashed) during {phase(rundir)}; "
                  f"cleaned up by the next launcher (pid {os.getpid()})")
        write_aborted(rundir, reason, KILLED_STATUS, None)
    shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------- reports

def phase(rundir):
    """How far a run got, from its run directory: setup (inputs), boot (the
    machine started), test (the guest's KTAP began), judge (the guest
    reported its exit)."""
    if not os.path.exists(os.path.join(rundir, "console.log")):
        return "setup"
    text = ""
    # lava: the KTAP stream is in LAVA's log until the run ends.
    for name in ("ktap.log", "lava.log"):
        try:
            with open(os.path.join(rundir, name), errors="replace") as f:
                text += f.read()
        except OSError:
            pass
    if any(ln.startswith("FAULTLINE-EXIT ") or '"FAULTLINE-EXIT ' in ln
           for ln in text.splitlines()):
        return "judge"
    return "test" if "# kernel " in text else "boot"


def write_aborted(rundir, reason, status, signame, elapsed_s=None, sc=None, seed=None):
    """report.json of a run that did not finish (outcome "aborted").  The
    scenario and seed from @sc and @seed, else from the run directory;
    @elapsed_s None: from run.json's start to the run's last write."""
    try:
        with open(os.path.join(rundir, "run.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        meta = {}
    if sc is None:
        try:
            sc = scenario.load(os.path.join(rundir, "scenario.toml"))
        except Exception:  # noqa: BLE001 - the report is written without it
            pass
    if elapsed_s is None:
        last = max((os.path.getmtime(p) for p in glob.glob(os.path.join(rundir, "*"))),
                   default=0)
        elapsed_s = max(0.0, last - meta.get("start_time", last))
    r = Report(scenario=meta.get("scenario") or (sc.name if sc else "?"),
               seed=seed if seed is not None else meta.get("seed", 0), status=status,
               outcome="aborted", reason=reason, elapsed_s=round(elapsed_s, 1),
               device=sc.device.kind if sc else "",
               completion=sc.device.completion if sc else "",
               deterministic=bool(meta.get("deterministic")), signal=signame)
    tmp = os.path.join(rundir, "report.json.tmp")
    try:
        with open(tmp, "w") as f:
            json.dump(r.to_json(), f, indent=1)
        os.replace(tmp, os.path.join(rundir, "report.json"))
    except OSError:
        return
    note_reported(rundir)


def tracks_run(fn):
    """Decorates runner.one_run(sc, seed, opts, builds, rundir, ...): a run
    stopped by Aborted leaves report.json saying so, with the signal and
    the phase it reached."""
    @functools.wraps(fn)
    def one_run(sc, seed, opts, builds, rundir, *args, **kwargs):
        t0 = time.monotonic()
        try:
            check()
            return fn(sc, seed, opts, builds, rundir, *args, **kwargs)
        except Aborted as e:
            elapsed = time.monotonic() - t0
            reason = f"aborted by {e.name} during {phase(rundir)} ({elapsed:.1f}s into the run)"
            write_aborted(rundir, reason, 128 + e.signum, e.name, elapsed, sc, seed)
            raise
    return one_run
