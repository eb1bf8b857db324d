"""`faultline prog c FILE`: a standalone C reproducer of one program
(docs/programs.md, "A C reproducer").

DIR/repro.c is the executor itself, amalgamated (progexec's sources but
serve.c and main.c, and the guest library files progexec links, each
local header inlined once), the program's canonical text as a string,
its device binds, and a main() that runs it once like `progexec run`:
exit 0 pass, 1 a finding, 2 refused.  It builds with `gcc -static -O2
-pthread repro.c -o repro` and needs nothing of faultline in the guest.

DIR/qemu.sh boots the VM `prog run` boots (the same disks and injectors,
the same kernel command line) with the program's rules loaded at start
from DIR/rules-DISK.txt (DIR/rules.txt lists them all).  `prog run` adds
the rules once the guest's swap areas are on and deletes them before the
teardown; the reproducer cannot reach QMP, so its rules are gated on the
engine state instead: each program rule matches only in state 1, which a
one-sector read of sector 1 sets (the reproducer's main, once every swap
area is on) and a one-sector read of sector 2 ends (state 2, after the
last operation).  Both sectors lie in the swap header's page, which the
kernel never reads through the block layer in one-sector pieces.
"""

import dataclasses
import os
import re
import shlex
import subprocess
import tempfile

from faultline import TOP
from faultline.execute import devices
from faultline.execute.devices import GATE_OFF_SECTOR, GATE_ON_SECTOR, GATE_RULES  # noqa: F401
from faultline.execute.boot import program_name, vm_scenario, ProgOptions
from faultline.execute.vm import program_run_sh
from faultline.errors import SetupError
from faultline.host import procs
from faultline.prog.check import check
from faultline.prog.lang import read
from faultline.run.spec_builder import make_spec

TOOLS = os.path.join(TOP, "guest", "tools")
PROGEXEC = os.path.join(TOOLS, "progexec")
# progexec's files a reproducer leaves out: the channel loop and the
# command line (the reproducer has its own main).
LEFT_OUT = ("serve.c", "main.c")
GUEST_BINARY = "repro"

LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
GNU_SOURCE = re.compile(r"^\s*#\s*define\s+_GNU_SOURCE\b")
STATIC_NAME = re.compile(r"^static\b[^(=;]*?\b([A-Za-z_]\w*)\s*(?:\(|=|\[|;)")
MACRO_NAME = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)")


def library_files():
    """The guest library files progexec links: the Makefile's LIB."""
    with open(os.path.join(TOOLS, "Makefile")) as f:
        for line in f:
            m = re.match(r"^LIB\s*:=\s*(.*)$", line)
            if m:
                return [os.path.join(TOOLS, p) for p in m.group(1).split()]
    raise SetupError(f"{TOOLS}/Makefile: no LIB line (the guest library progexec links)")


def executor_files():
    """progexec's .c files a reproducer holds, then the library's."""
    own = sorted(os.path.join(PROGEXEC, f) for f in os.listdir(PROGEXEC)
                 if f.endswith(".c") and f not in LEFT_OUT)
    return own + library_files()


def _read(path):
    with open(path) as f:
        return f.read().splitlines()


def static_names(path):
    """The file-scope static functions and variables a .c file defines."""
    return {m.group(1) for line in _read(path) for m in [STATIC_NAME.match(line)] if m}


def amalgamate(files):
    """One C text of @files: local headers inlined at their first
    #include, _GNU_SOURCE once at the top; a static name two files define
    is renamed per file, and each file's own macros end with it."""
    names = {f: static_names(f) for f in files}
    seen = {}
    for f in files:
        for n in names[f]:
            seen[n] = seen.get(n, 0) + 1
    out = ["#define _GNU_SOURCE"]
    inlined = set()

    def inline(path, into):
        for line in _read(path):
            m = LOCAL_INCLUDE.match(line)
            if m:
                header = os.path.realpath(os.path.join(os.path.dirname(path), m.group(1)))
                if not os.path.isfile(header):
                    raise SetupError(f"{path}: #include \"{m.group(1)}\": no such file")
                if header not in inlined:
                    inlined.add(header)
                    into.append(f"/* ---- {os.path.relpath(header, TOOLS)} ---- */")
                    inline(header, into)
                continue
            if not GNU_SOURCE.match(line):
                into.append(line)

    for f in files:
        stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(f))[0])
        clash = sorted(n for n in names[f] if seen[n] > 1)
        body = []
        inline(f, body)
        macros = sorted({m.group(1) for line in _read(f) for m in [MACRO_NAME.match(line)]
                         if m} - {"_GNU_SOURCE"})
        out.append(f"/* ---- {os.path.relpath(f, TOOLS)} ---- */")
        out += [f"#define {n} {n}__{stem}" for n in clash]
        out += body
        out += [f"#undef {n}" for n in clash + macros]
    return "\n".join(out) + "\n"


def c_string(text):
    """@text as C string literals, one a line."""
    lines = text.splitlines(keepends=True)
    return "\n".join('\t"' + ln.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
                     + '"' for ln in lines) or '\t""'


MAIN = r"""
/* ---- the reproducer's main (faultline prog c) ---- */

static const char repro_name[] = "@NAME@";
static const char repro_text[] =
@TEXT@;
/* program device -> the VM's device (docs/programs.md, `bind`) */
static const char *const repro_binds[][2] = {
@BINDS@
	{ NULL, NULL } };
/* devices whose rules may fail reads: the failed-read relaxation */
static const char *const repro_failed_read[] = { @FAILED_READ@ NULL };
static const int repro_gated = @GATED@;

/* The rules' gate (rules.txt, gate.c): a failed read is said, not fatal. */
static void repro_gate(struct pe_program *p, long sector)
{
	char why[512];

	if (pe_gate_read(p, sector, why, sizeof(why)))
		fprintf(stderr, "repro: %s (its rules may not apply)\n", why);
}

static int repro_ready(void *arg)
{
	if (repro_gated)
		repro_gate(arg, @GATE_ON@);
	return 0;
}

static int repro_ops_done(void *arg)
{
	if (repro_gated)
		repro_gate(arg, @GATE_OFF@);
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const plants[] = { "", "drop-write", "stale-page", "leak-slot" };
	struct pe_report report = { stdout, 0 };
	struct pe_hooks hooks = { repro_ready, repro_ops_done, NULL };
	enum pe_plant plant = PE_PLANT_NONE;
	struct pe_program *p;
	char why[512];
	int rc;

	/* --plant KIND: the executor wrong on purpose, as `progexec run --plant`. */
	if (argc == 3 && !strcmp(argv[1], "--plant")) {
		for (plant = PE_PLANT_DROP_WRITE; plant <= PE_PLANT_LEAK_SLOT; plant++)
			if (!strcmp(argv[2], plants[plant]))
				break;
	}
	if (argc != 1 && (argc != 3 || plant > PE_PLANT_LEAK_SLOT || plant == PE_PLANT_NONE)) {
		fprintf(stderr, "usage: %s [--plant drop-write|stale-page|leak-slot]\n", argv[0]);
		return 2;
	}
	p = pe_program_parse(repro_name, repro_text, why, sizeof(why));
	if (!p) {
		printf("refused %s %s\n", repro_name, why);
		return 2;
	}
	p->plant = plant;
	for (int i = 0; repro_binds[i][0]; i++) {
		if (pe_program_bind(p, repro_binds[i][0], repro_binds[i][1], why, sizeof(why))) {
			fprintf(stderr, "repro: %s\n", why);
			return 2;
		}
	}
	for (int i = 0; repro_failed_read[i]; i++) {
		if (pe_program_allow_failed_read(p, repro_failed_read[i], why, sizeof(why))) {
			fprintf(stderr, "repro: %s\n", why);
			return 2;
		}
	}
	hooks.arg = p;
	rc = pe_program_run(p, &hooks, &report);
	pe_program_free(p);
	return rc == PE_PASS ? 0 : rc == PE_FAIL ? 1 : 2;
}
"""


def c_source(name, program, bound, rules):
    """repro.c's text."""
    binds = "\n".join(f'\t{{ "{dev}", "{disk.target}" }},' for dev, disk in bound.items())
    failed = " ".join(f'"{dev}",' for dev, r in rules.items()
                      if any(devices.fails_reads(text) for _, text in r))
    header = ("/* SPDX-License-Identifier: GPL-2.0-or-later */\n"
              f"/*\n * A reproducer of the swap program {name} (faultline prog c).\n"
              " * Build: gcc -static -O2 -pthread repro.c -o repro\n"
              " * Run as root in the VM qemu.sh boots: exit 0 pass, 1 a finding (the\n"
              " * `finding` lines on stdout), 2 the program was refused.\n"
              " * The program's text:\n *\n"
              + "".join(f" *   {ln}\n" for ln in program.text().splitlines())
              + " */\n")
    main = MAIN
    for key, value in (("@NAME@", name), ("@TEXT@", c_string(program.text())),
                       ("@BINDS@", binds), ("@FAILED_READ@", failed),
                       ("@GATED@", "1" if any(rules.values()) else "0"),
                       ("@GATE_ON@", str(GATE_ON_SECTOR)), ("@GATE_OFF@", str(GATE_OFF_SECTOR))):
        main = main.replace(key, value)
    return header + amalgamate(executor_files()) + main


def guest_run_sh():
    """The guest's /run.sh for faultline's own guest image: the drivers,
    then the reproducer."""
    sh = program_run_sh().splitlines()
    keep = [ln for ln in sh if "progexec" not in ln]
    return "\n".join(keep + [f"/{GUEST_BINARY}", 'echo "# repro exit $?"', ""])


def qemu_argv(opts, builds, rules_by_disk, kernel, initramfs):
    """The VM's QEMU argv, its paths relative to the reproducer's
    directory (qemu.sh runs there)."""
    with tempfile.TemporaryDirectory() as tmp:
        disks = devices.vm_disks_args(tmp, ".", opts.seed, opts.deterministic)
    disks = [dataclasses.replace(
        d, image=os.path.basename(d.image),
        injector_opts=(f"rules=rules-{k}.txt," if k in rules_by_disk else "") + d.injector_opts)
        for d, k in zip(disks, (v.key for v in devices.VM_DISKS))]
    spec = make_spec(vm_scenario(opts), builds, rundir=".", scratch=".", seed=opts.seed,
                     deterministic=opts.deterministic, kernel=kernel, initrd=initramfs,
                     disks=disks, extra_args=devices.channel_args("prog.sock"))
    return spec.qemu_argv("qmp.sock")


def qemu_script(argv, kernel, initramfs):
    """qemu.sh: make the disks, boot $KERNEL and $INITRAMFS (by default
    the ones named when it was written)."""
    # Without -no-shutdown QEMU exits when the guest powers off.
    argv = [a for a in argv if a != "-no-shutdown"]
    args = [a.replace(kernel, "@KERNEL@").replace(initramfs, "@INITRD@") for a in argv]
    line = shlex.join(args).replace("@KERNEL@", '"$KERNEL"').replace("@INITRD@", '"$INITRAMFS"')
    images = " ".join(f"{d.key}.img" for d in devices.VM_DISKS)
    return "\n".join([
        "#!/bin/sh",
        "# The VM of `faultline prog run` for this reproducer (faultline prog c):",
        "# the same swap disks and fault injectors, the program's rules loaded at",
        "# start.  usage: [KERNEL=BZIMAGE] [INITRAMFS=FILE] qemu.sh; the console goes to",
        "# console.log, the guest's /run.sh output to ktap.log.",
        "set -e",
        'cd "$(dirname "$0")"',
        f"KERNEL=${{KERNEL:-{shlex.quote(kernel)}}}",
        f"INITRAMFS=${{INITRAMFS:-{shlex.quote(initramfs)}}}",
        f"rm -f {images}",
        f"truncate -s {devices.DISK_SIZE} {images}",
        "exec " + line, ""])


def check_runnable(program_path, mutation=None):
    """(program, {dev: VmDisk}, {dev: rules}, {disk key: gated rule lines})
    of a program a reproducer can run; ProgramError for a bad program,
    SetupError (one line) for one the VM or the gate cannot run."""
    program = read(program_path)
    check(program)
    try:
        bound = devices.bind(program)
        rules = devices.rules_of(program, mutation)
        by_disk = devices.gated_rules(bound, rules)
    except devices.Refusal as e:
        raise SetupError(f"{program_path}: {e}") from None
    return program, bound, rules, by_disk


# How the reproducer is built and booted, in its directory: what `prog c`
# prints for a person and what boot_reproducer() runs, one list.
BUILD_AND_BOOT = (
    "gcc -static -O2 -pthread repro.c -o repro",
    "cp {initramfs} initramfs.img && truncate -s %4 initramfs.img",
    "printf 'repro\\nrun.sh\\n' | cpio -o -H newc -R 0:0 >> initramfs.img",
    "INITRAMFS=initramfs.img {timeout}./qemu.sh",
)
# boot_reproducer()'s `timeout` before qemu.sh (which execs QEMU) ends with
# this status when it had to kill QEMU.
KILLED = 128 + 9
# ktap.log's line with the reproducer's exit status.
EXIT_LINE = re.compile(r"^# repro exit (\d+)$", re.M)


def instructions(out_dir, initramfs):
    """What to run, printed by `prog c`: build, put the reproducer into
    faultline's guest image (its init runs /run.sh), boot."""
    q = shlex.quote
    return "\n".join([
        "# build, add repro and run.sh to the guest image, boot (the guest powers off):",
        f"cd {q(out_dir)}",
        *(step.format(initramfs=q(initramfs), timeout="") for step in BUILD_AND_BOOT),
        "cat ktap.log   # the findings; '# repro exit 1': the failure reproduced",
        "# in a guest of your own: copy repro in, load nvme, syncblk and virtio_blk, run",
        "# ./repro as root (exit 0 pass, 1 a finding, 2 refused)"])


def boot_reproducer(out_dir, initramfs, timeout_s):
    """Run the steps `prog c` prints in @out_dir (written by
    write_reproducer with builds): (the reproducer's exit status in the
    guest, or None when the guest never said it; ktap.log's text).
    SetupError (one line) when a step fails or the boot outlives
    @timeout_s."""
    kill = f"timeout -s KILL {int(timeout_s)} "
    script = "set -e\n" + "\n".join(step.format(initramfs=shlex.quote(initramfs), timeout=kill)
                                     for step in BUILD_AND_BOOT)
    res = procs.run_captured(["sh", "-c", script], cwd=out_dir, group=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if res.returncode == KILLED:
        raise SetupError(f"{out_dir}: the reproducer's boot did not end in {timeout_s:.0f}s")
    try:
        with open(os.path.join(out_dir, "ktap.log"), errors="replace") as f:
            ktap = f.read()
    except OSError:
        ktap = ""
    m = EXIT_LINE.search(ktap)
    if res.returncode and not m:
        tail = " ".join(res.stdout.strip().splitlines()[-1:])
        raise SetupError(f"{out_dir}: building or booting the reproducer failed "
                         f"(exit {res.returncode}): {tail}")
    return (int(m.group(1)) if m else None), ktap


def write_reproducer(program_path, out_dir, *, kernel=None, initramfs=None, builds=None,
                     seed=1, deterministic=False, mutation=None, memory=None, cpus=None):
    """Write repro.c, rules.txt (rules-DISK.txt), run.sh and qemu.sh of the
    program at @program_path into @out_dir; returns {what: path}.
    ProgramError for a bad program, SetupError for one the VM cannot run.
    @builds (build.builds.Builds): the QEMU qemu.sh runs and the default
    @kernel and @initramfs; None: no qemu.sh."""
    program, bound, rules, by_disk = check_runnable(program_path, mutation)
    name = program_name(program_path)
    os.makedirs(out_dir, exist_ok=True)
    paths = {"repro.c": os.path.join(out_dir, "repro.c"),
             "rules.txt": os.path.join(out_dir, "rules.txt"),
             "run.sh": os.path.join(out_dir, "run.sh")}
    _write(paths["repro.c"], c_source(name, program, bound, rules))
    listing = [f"# the rules of {name}, per device, as qemu.sh loads them (rules-DISK.txt)"]
    for dev, disk in bound.items():
        listing.append(f"# {dev}: {disk.target}, injector {disk.injector}, "
                       f"rules-{disk.key}.txt")
        listing += by_disk.get(disk.key, ["#   (no rules)"])
    _write(paths["rules.txt"], "\n".join(listing) + "\n")
    for key, lines in by_disk.items():
        _write(os.path.join(out_dir, f"rules-{key}.txt"), "\n".join(lines) + "\n")
    _write(paths["run.sh"], guest_run_sh(), mode=0o755)
    if builds is not None:
        kernel = os.path.abspath(kernel or builds.kernel)
        initramfs = os.path.abspath(initramfs or builds.initramfs)
        opts = ProgOptions(program_path, seed=seed, deterministic=deterministic,
                           memory=memory, cpus=cpus)
        argv = qemu_argv(opts, builds, by_disk, kernel, initramfs)
        paths["qemu.sh"] = os.path.join(out_dir, "qemu.sh")
        _write(paths["qemu.sh"], qemu_script(argv, kernel, initramfs), mode=0o755)
    return paths


def _write(path, text, mode=0o644):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
