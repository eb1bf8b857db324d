"""Scratch directories: one per run, in RAM when it can be, each with an
owner.json naming the launcher (pid, start time, boot) and its run
directory, so the next launcher knows whose leftovers it finds."""

import json
import os
import shutil
import tempfile

from faultline.host.procs import identity
from faultline.host.stop import note_scratch

PREFIX = "faultline-"
OWNER = "owner.json"
# Backends record here what outlives the launcher's process (libvirt.py).
LIBVIRT_RECORD = "libvirt-domain.json"
PROCESSES = "processes.json"
# lava-run's download directories: <prefix><job id>, prefix = scratch name + "-".
LAVA_TMP = "/var/lib/lava/dispatcher/tmp"


# ---------------------------------------------------------------- scratch

def scratch_bases():
    # RAM first: unlinking a disk image with gigabytes in writeback stalled
    # runs for minutes (measured), and a short path keeps a socket in it
    # under the 108-byte sun_path limit.
    return ["/dev/shm"] if os.access("/dev/shm", os.W_OK) else [tempfile.gettempdir()]


def new_scratch(rundir=None):
    """A scratch directory for one run, with owner.json: this process and
    the run directory (sweep() writes that run's report if nobody did)."""
    d = tempfile.mkdtemp(prefix=PREFIX, dir=scratch_bases()[0])
    note_scratch(d)
    with open(os.path.join(d, OWNER), "w") as f:
        json.dump(dict(identity(), rundir=os.path.abspath(rundir) if rundir else None), f)
    return d


def claim(d, rundir):
    """Name @rundir (it may not exist yet) in scratch @d's owner.json: the
    run directory it will hold, for sweep()."""
    owner = read_owner(d) or identity()
    owner["rundir"] = os.path.abspath(rundir)
    tmp = os.path.join(d, OWNER + ".tmp")
    with open(tmp, "w") as f:
        json.dump(owner, f)
    os.replace(tmp, os.path.join(d, OWNER))


def empty_scratch(d):
    """Remove what @d holds but its owner.json: the run's disk and sockets
    go, and the directory stays the sign that its run has no report yet
    (sweep() writes one should this launcher die before it does)."""
    for name in os.listdir(d) if os.path.isdir(d) else ():
        if name != OWNER:
            path = os.path.join(d, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    pass


def remove_scratch(d):
    shutil.rmtree(d, ignore_errors=True)
    note_scratch(d, live=False)


def note_process(scratch, pid):
    """Record child @pid of this launcher in @scratch, for a child that does
    not name the scratch on its command line (lava-run sets its own process
    title): sweep() kills it should this launcher die first."""
    path = os.path.join(scratch, PROCESSES)
    procs = read_json(path) or []
    with open(path + ".tmp", "w") as f:
        json.dump(procs + [identity(pid)], f)
    os.replace(path + ".tmp", path)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_owner(d):
    owner = read_json(os.path.join(d, OWNER))
    return owner if isinstance(owner, dict) else None


def unreported_rundir(owner):
    """The run directory @owner (owner.json's content) claimed, when it
    exists without a report.json: the run ended before writing one."""
    rundir = (owner or {}).get("rundir")
    if rundir and os.path.isdir(rundir) and \
            not os.path.exists(os.path.join(rundir, "report.json")):
        return rundir
    return None
