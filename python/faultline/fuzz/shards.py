"""`faultline fuzz --lava N`: a campaign's next programs as N shards of
LAVA jobs (device_type qemu) for a lab to run, without the host round trip
a fuzzing guest needs (docs/fuzz.md, "Beyond one machine: LAVA shards").

Shard K draws its programs from its own seeded stream (search seed S + K,
and the session count of the campaign it starts from): new programs and
mutants of the campaign's corpus (--from), as a fuzzing job would, but with
no feedback inside the shard (nothing comes back until the merge).  Each
program runs in a fresh boot as execute/fresh.py runs it: its own disks, its
rules loaded by the injectors at QEMU start and gated on the engine state,
and `progexec run --gate` in the guest.  Its report goes to ttyS1 with each
line prefixed (REPORT_MARK), which the LAVA job's log keeps: merge.py reads
it back.  A program that cannot run without the host (fresh.refusal: a
virtio-blk disk, rules with their own engine states) is drawn again.

OUT/shard-K/
  shard.json          identity (QEMU build, guest build, kernel, plant), seeds,
                      the programs (file, origin, job, log), what was redrawn
  programs/NAME.prog  each program as drawn
  initramfs.cpio      the guest, every program's text and the /run.sh that
                      runs the one named on the kernel command line
  rules/NAME-KEY.txt  each program's gated rules, per disk
  jobs/NAME.yaml      one LAVA job per program
  logs/NAME.log       each job's LAVA log, put there by whoever ran it (the
                      lab's job log, or `faultline fuzz lava-run` here)
OUT/vmlinuz, OUT/disk.img.gz   what every job deploys
"""

import gzip
import json
import os
import random
import re
import shlex
import shutil
import subprocess

from faultline import TOP
from faultline.errors import SetupError
from faultline.execute import devices, fresh
from faultline.execute.session import Budgets
from faultline.execute.channel import ChannelError
from faultline.execute.vm import ProgramVM
from faultline.fuzz import state
from faultline.fuzz.corpus import Corpus
from faultline.fuzz.triage import prepared
from faultline.host import procs, scratchdirs
from faultline.paths import CACHE
from faultline.prog.gen import generate, load_weights, offered_weights
from faultline.prog.mutate import mutate
from faultline.run import guest
from faultline.run.spec_builder import make_spec
from faultline.vm import lavaqemu
from faultline.vm.lava import dispatcher_config, lava_run_path
from faultline.vm.lava_job import memory_mb, render_device, template_dir, yaml_dump, \
    yaml_load
from faultline.vm.qmp import QmpError

SHARD = "shard.json"
MAX_SHARDS = 256
MAX_PROGRAMS = 10000
DEFAULT_PROGRAMS = 20
# Draws per program before the shard gives up (programs the VM refuses,
# or that cannot run without the host, are drawn again).
MAX_DRAWS = 50
GENERATE_P = 0.2                # as manager.GENERATE_P
REPORT_MARK = "@pe "
CMDLINE_KEY = "faultline.prog"
DISK_GZ = "disk.img.gz"
# The job's test: the program's budgets (session.Budgets) and LAVA's deploy.
TEST_S = int(Budgets().hello + Budgets().ready + Budgets().ops + Budgets().result)
DEPLOY_S = 300
# LAVA's test case per program: the `result NAME pass|fail N` line.
RESULT_PATTERN = (r"@pe (?P<test_case_id>result) \S+ (?P<result>pass|fail) ")
END_PATTERN = r"FAULTLINE-EXIT \d+\r?\n"


def shard_dirs(out):
    return sorted(d for d in (os.path.join(out, n) for n in os.listdir(out))
                  if os.path.isfile(os.path.join(d, SHARD)))


def check(n, programs, out):
    """Bad input, one line, before any build."""
    if not 1 <= n <= MAX_SHARDS:
        raise SetupError(f"--lava {n}: expected 1 to {MAX_SHARDS} shards")
    if not 1 <= programs <= MAX_PROGRAMS:
        raise SetupError(f"--programs {programs}: expected 1 to {MAX_PROGRAMS} per shard")
    if os.path.exists(out) and not os.path.isdir(out):
        raise SetupError(f"--out {out}: not a directory")
    if os.path.isdir(out) and (shard_dirs(out) or os.path.exists(os.path.join(out, state.STATE))):
        raise SetupError(f"--out {out} holds shards or a campaign already: choose a new --out")


def load_from(campaign, ident=None):
    """(the campaign's corpus, its fuzz.json) for --from; one line when it is
    not a campaign (of this build: @ident)."""
    try:
        st = state.load(campaign)
        if ident is not None:
            state.check_same(campaign, st["identity"], ident)
    except SetupError as e:
        raise SetupError(str(e).replace("--resume", "--from", 1)) from None
    return Corpus(os.path.join(campaign, "corpus")).load(), st


# ---------------------------------------------------------------- drawing

def guest_offers(sc, builds):
    """What the guest's kernel offers (Session.offers): one boot of the
    fuzzer's guest, so that no shard program is refused for a knob or
    value this kernel lacks (a lab's boot costs more than this one)."""
    scratch = scratchdirs.new_scratch()
    try:
        rundir = os.path.join(scratch, "offers")
        os.makedirs(rundir)
        with ProgramVM(sc, builds, rundir=rundir, scratch=scratch, seed=1,
                       budgets=Budgets()) as vm:
            try:
                vm.start()
                return vm.facts().get("offers") or {}
            except (ChannelError, QmpError, OSError) as e:
                raise SetupError(f"fuzz --lava: the guest did not come up to say what its "
                                 f"kernel offers: {e}") from None
            finally:
                vm.close()
    finally:
        scratchdirs.remove_scratch(scratch)


def draw(rng, corpus, offers=None):
    """(program, origin): a new one, or a mutant of a corpus program, under
    the guest's @offers (None: the language's every value)."""
    parent = corpus.choose(rng) if corpus is not None and rng.random() >= GENERATE_P else None
    if parent is None:
        seed = rng.getrandbits(32)
        return generate(seed, path=f"<gen {seed}>", offers=offers), f"gen {seed}"
    weights = offered_weights(load_weights(), offers) if offers else None
    return mutate(parent.program, rng, weights), f"mutant of {parent.id}"


def draw_shard(rng, corpus, count, name, offers=None):
    """[(Prepared, origin)] of @count programs that can run without the
    host, and {why: times} of the draws left out.  @name(i) -> a name."""
    got, skipped = [], {}
    for _ in range(count * MAX_DRAWS):
        if len(got) == count:
            break
        program, origin = draw(rng, corpus, offers)
        try:
            prep = prepared(name(len(got) + 1), program, "<lava>")
        except devices.Refusal:
            why = "devices the VM has not"
        else:
            why = fresh.refusal(prep.bound, prep.rules)
            if why is None:
                got.append((prep, origin))
                continue
            why = ("virtio-blk disk (its faults complete on host I/O)" if "virtio-blk" in why
                   else "rules with engine states (the gate takes the state)")
        skipped[why] = skipped.get(why, 0) + 1
    if len(got) < count:
        raise SetupError(f"--lava: {count * MAX_DRAWS} draws gave {len(got)} of {count} "
                         "programs that can run without the host")
    return got, skipped


# ---------------------------------------------------------------- the guest

def run_sh(preps, plant=None):
    """The shard's /run.sh: the drivers, then `progexec run --gate` of the
    program the kernel command line names (faultline.prog=NAME), its report
    lines on ttyS1 each after REPORT_MARK."""
    keep = fresh.drivers_sh()
    cases = []
    for prep in preps:
        argv = fresh.gated_argv(prep)
        if plant:
            argv += ["--plant", plant]
        cases.append(f"{prep.name}) set -- {shlex.join(argv)} ;;")
    return "\n".join(keep + [
        "prog=",
        "for w in $(cat /proc/cmdline); do",
        f'    case "$w" in {CMDLINE_KEY}=*) prog="${{w#{CMDLINE_KEY}=}}" ;; esac',
        "done",
        'case "$prog" in'] + ["    " + c for c in cases] + [
        '    *) echo "Bail out! no program \'$prog\' in this initramfs"; exit 1 ;;',
        "esac",
        # stderr stays on ttyS1 unmarked; the exit status after the report.
        '{ "$@"; echo "# progexec exit $?" >&2; } | '
        f'while IFS= read -r l; do echo "{REPORT_MARK}$l"; done', ""])


def zero_disk_gz(path, size):
    block = bytes(1 << 20)
    with gzip.open(path + ".tmp", "wb", compresslevel=1) as f:
        for _ in range(size // len(block)):
            f.write(block)
    os.replace(path + ".tmp", path)


def _url(base_url, out, path):
    if base_url:
        return base_url.rstrip("/") + "/" + os.path.relpath(path, out).replace(os.sep, "/")
    return "file://" + os.path.abspath(path)


def program_job(prep, spec, files, urls, meta):
    """The LAVA job of one program: @spec (make_spec's, its disks' images
    and rules at host paths @files {path: image label}) with those paths
    replaced by LAVA's {label}s, deployed from @urls {label: URL}."""
    extra = ["-nodefaults -machine q35 -no-reboot",
             "-accel " + spec.accel + " " + shlex.join(spec.extra_args)]
    extra += ["-L " + shlex.quote(d) for d in spec.firmware_dirs]
    extra.append("-chardev stdio,mux=on,id=ser0 -serial chardev:ser0 -serial chardev:ser0")
    image_args = {}
    args = list(spec.device_args)
    for opt, val in zip(args[::2], args[1::2]):
        if opt == "-object":
            val = re.sub(r",log=[^,]*", "", val)    # a host path; a lab has none
        labels = [lab for path, lab in files.items() if path in val]
        for path, lab in files.items():
            val = val.replace(path, "{" + lab + "}")
        if labels:
            image_args[labels[0]] = f"{opt} {shlex.quote(val)}"
        else:
            extra.append(f"{opt} {shlex.quote(val)}")
    append = f"{spec.append} {CMDLINE_KEY}={prep.name}"
    image_args["kernel"] = "-kernel {kernel} -append " + shlex.quote(append)
    image_args["initrd"] = "-initrd {initrd}"
    images = {}
    for label, arg in image_args.items():
        images[label] = {"url": urls[label], "image_arg": arg}
        if urls[label].endswith(".gz"):
            images[label]["compression"] = "gz"
    return {
        "device_type": "qemu",
        "job_name": f"faultline fuzz {prep.name}",
        "timeouts": {"job": {"seconds": TEST_S + 2 * DEPLOY_S},
                     "action": {"seconds": TEST_S}, "connection": {"seconds": TEST_S}},
        "priority": "medium", "visibility": "public", "metadata": meta,
        "context": {"arch": "x86_64", "memory": memory_mb(spec.memory), "netdevice": "none",
                    "no_kvm": 1, "extra_options": extra},
        "actions": [
            {"deploy": {"to": "tmpfs", "timeout": {"seconds": DEPLOY_S}, "images": images}},
            {"boot": {"method": "qemu", "media": "tmpfs", "timeout": {"seconds": TEST_S}}},
            {"test": {"timeout": {"seconds": TEST_S},
                      "monitors": [{"name": "faultline-program", "start": "# kernel ",
                                    "end": END_PATTERN, "pattern": RESULT_PATTERN,
                                    "fixupdict": {"pass": "pass", "fail": "fail"}}]}},
        ],
    }


def write_shard(sdir, k, preps, skipped, ident, seeds, sc, builds, shared, base_url, out,
                plant, origin_of):
    """Shard @k's directory: programs, initramfs, rules, jobs, shard.json."""
    for sub in ("programs", "rules", "jobs", "logs"):
        os.makedirs(os.path.join(sdir, sub), exist_ok=True)
    scratch = scratchdirs.new_scratch()
    try:
        initrd = guest.build_initrd(
            builds.guest_dir, run_sh(preps, plant), scratch,
            files={f"{fresh.GUEST_DIR}/{p.name}": fresh.program_text(p) for p in preps})
        shutil.copyfile(initrd, os.path.join(sdir, "initramfs.cpio"))
        entries = []
        for prep in preps:
            with open(os.path.join(sdir, "programs", prep.name + ".prog"), "w") as f:
                f.write(prep.program.text())
            by_disk = devices.gated_rules(prep.bound, prep.rules)
            keys = {d.key for d in prep.bound.values()}
            disks, files = [], {}
            vm = devices.vm_disks_args(scratch, sdir, seeds["seed"], deterministic=True)
            for i, (vm_disk, disk) in enumerate(zip(devices.VM_DISKS, vm)):
                os.unlink(disk.image)
                if vm_disk.key not in keys:
                    continue
                files[disk.image] = f"disk{i}"
                if vm_disk.key in by_disk:
                    rules = os.path.join(sdir, "rules", f"{prep.name}-{vm_disk.key}.txt")
                    with open(rules, "w") as f:
                        f.write("\n".join(by_disk[vm_disk.key]) + "\n")
                    files[rules] = f"rules{i}"
                    disk = devices.with_rules(disk, rules)
                disks.append(disk)
            spec = make_spec(sc, builds, rundir=sdir, scratch=scratch, seed=seeds["seed"],
                             deterministic=True, initrd=initrd, disks=disks)
            urls = {"kernel": _url(base_url, out, shared["kernel"]),
                    "initrd": _url(base_url, out, os.path.join(sdir, "initramfs.cpio"))}
            for path, label in files.items():
                urls[label] = _url(base_url, out, path if label.startswith("rules")
                                   else shared["disk"])
            meta = {"faultline.command": "fuzz --lava", "faultline.shard": k,
                    "faultline.program": prep.name, "faultline.seed": seeds["seed"]}
            job = program_job(prep, spec, files, urls, meta)
            with open(os.path.join(sdir, "jobs", prep.name + ".yaml"), "w") as f:
                f.write(yaml_dump(job))
            entries.append({"name": prep.name, "file": f"programs/{prep.name}.prog",
                            "origin": origin_of[prep.name], "job": f"jobs/{prep.name}.yaml",
                            "log": f"logs/{prep.name}.log"})
    finally:
        scratchdirs.remove_scratch(scratch)
    doc = {"command": "fuzz --lava", "identity": ident, "index": k, **seeds,
           "plant": plant, "qemu_binary": builds.qemu_binary, "programs": entries,
           "redrawn": skipped}
    with open(os.path.join(sdir, SHARD), "w") as f:
        json.dump(doc, f, indent=1)
    return doc


def write(n, programs, out, ident, sc, builds, seed, plant, campaign=None, base_url=None,
          kernel=None, offers=None, machine=None):
    """Write @n shards of @programs programs each in @out; the shard dirs.
    @campaign: the campaign directory whose corpus they start from;
    @offers: the guest's (guest_offers()), None for every value; @machine:
    {kernel, modules, memory, cpus} as given, for the replay commands."""
    corpus, session = None, 0
    if campaign:
        corpus, st = load_from(campaign, ident)
        session = len(st["sessions"])
        seed = seed if seed is not None else st["seed"]
    seed = 1 if seed is None else seed
    os.makedirs(out, exist_ok=True)
    shared = {"kernel": os.path.join(out, "vmlinuz"), "disk": os.path.join(out, DISK_GZ)}
    shutil.copyfile(builds.kernel, shared["kernel"])
    zero_disk_gz(shared["disk"], devices.DISK_SIZE)
    dirs = []
    for k in range(n):
        rng = random.Random(f"{seed + k}:lava:{session}")
        got, skipped = draw_shard(rng, corpus, programs, lambda i, k=k: f"s{k}p{i:04d}",
                                  offers)
        sdir = os.path.join(out, f"shard-{k}")
        seeds = {"seed": seed + k, "base_seed": seed, "session": session, "shards": n,
                 "from": os.path.abspath(campaign) if campaign else None,
                 "kernel": kernel, **(machine or {}), "offers": offers}
        write_shard(sdir, k, [p for p, _ in got], skipped, ident, seeds, sc, builds, shared,
                    base_url, out, plant, {p.name: o for p, o in got})
        dirs.append(sdir)
    return dirs


# ---------------------------------------------------------------- a local lab

def run_local(sdir, quiet=False):
    """Run every job of shard @sdir with this host's lava-run (a one-machine
    lab), each job's LAVA log into logs/NAME.log; the jobs LAVA failed."""
    lava_run = lava_run_path()
    with open(os.path.join(sdir, SHARD)) as f:
        doc = json.load(f)
    failed = []
    for i, entry in enumerate(doc["programs"], 1):
        scratch = scratchdirs.new_scratch()
        try:
            bindir, tmp = os.path.join(scratch, "bin"), os.path.join(scratch, "tmp")
            for d in (bindir, tmp):
                os.makedirs(d)
            wrapper = os.path.join(bindir, "qemu-system-x86_64")
            with open(wrapper, "w") as f:
                f.write(lavaqemu.program(os.path.join(TOP, "python"), doc["qemu_binary"],
                                         os.path.join(scratch, "qmp.sock"),
                                         os.path.join(scratch, "stats.json"), None,
                                         procs.identity()))
            os.chmod(wrapper, 0o755)
            job_path = os.path.join(sdir, entry["job"])
            with open(job_path) as f:
                job = yaml_load(f.read())
            files = {"device.yaml": render_device(template_dir(CACHE), job["context"]),
                     "dispatcher.yaml": dispatcher_config(os.path.basename(scratch) + "-")}
            for name, text in files.items():
                with open(os.path.join(scratch, name), "w") as f:
                    f.write(text)
            env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""),
                       TMPDIR=tmp)
            cmd = [lava_run, "--job-id", str(i), "--output-dir", os.path.join(scratch, "out"),
                   "--dispatcher", os.path.join(scratch, "dispatcher.yaml"),
                   "--device", os.path.join(scratch, "device.yaml"), job_path]
            with open(os.path.join(sdir, entry["log"]), "w") as log:
                rc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env=env, cwd=scratch,
                                    preexec_fn=procs.die_with_parent()).returncode
            if rc != 0:
                failed.append(entry["name"])
            if not quiet:
                print(f"faultline: fuzz lava-run: {entry['name']}: lava-run status {rc}",
                      flush=True)
        finally:
            procs.kill_mentioning(scratch)
            scratchdirs.remove_scratch(scratch)
    return failed
