"""One kernel finding, findings/NAME/ (docs/findings.md):

  finding.toml      what it is, on which kernel, how a search found it (FIELDS;
                    also_on: the other kernels it was shown on)
  program.prog      the swap program that shows it (docs/programs.md)
  README.md         what the toml does not say

Its C reproducer is not kept here: `faultline prog c program.prog` writes
it for this checkout's executor and this machine's guest image, and
`faultline findings` boots it on every replay.

A bad finding is one line naming its file (`findings/NAME/finding.toml:
no field 'symptom'`), before any VM starts.  A finding's results record
(results/findings/SET.jsonl) is the replays' (records.REQUIRED, its digest
the reproducer's) plus the toml's text; render() is its docs table."""

import hashlib
import os
import re
import tomllib
from dataclasses import dataclass, field

from faultline import TOP
from faultline.errors import SetupError
from faultline.results import records

FINDINGS_DIR = os.path.join(TOP, "findings")
TOML = "finding.toml"
PROGRAM = "program.prog"
# finding.toml: every field a non-empty string.
FIELDS = {
    "title": "one line: what the kernel does",
    "kernel": 'what to pass to --kernel (a name of `faultline kernel list`), "default" '
              "for Debian's packaged 6.12",
    "class": "kernel-bug",
    "found_by": "how a search found it: kernel, seed(s), time, the generated program",
    "symptom": "what is seen",
    "faults": 'the fault rules it needs, "none" if none',
    "upstream": "what is known of an upstream fix (with a citation), or how it was searched",
}
# Optional: [kernel names] it was shown on too; each is replayed as well.
ALSO_ON = "also_on"
CLASSES = ("kernel-bug",)
DEFAULT_KERNEL = "default"
# The fields a findings record adds to records.REQUIRED: the toml's text,
# but `kernel` is the one replayed on and `found_on` the toml's kernel.
RECORD_FIELDS = {**{k: (str,) for k in FIELDS}, "found_on": (str,),
                 "kernel_release": (str, records.NULL),
                 # the C reproducer's exit status in the guest (1: a finding;
                 # None: it never said) and its first finding line
                 "repro_exit": (int, records.NULL), "repro_finding": (str, records.NULL)}
NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass
class Finding:
    name: str
    folder: str
    fields: dict
    also_on: list = field(default_factory=list)

    @property
    def kernels(self):
        """Every kernel it is replayed on: where it was found, then also_on."""
        return [self.fields["kernel"]] + self.also_on

    @property
    def toml(self):
        return os.path.join(self.folder, TOML)

    @property
    def program(self):
        return os.path.join(self.folder, PROGRAM)


def kernel_arg(name):
    """A finding's kernel as --kernel takes it: None for Debian's default."""
    return None if name == DEFAULT_KERNEL else name


def names(findings_dir=FINDINGS_DIR):
    """Every folder of @findings_dir, sorted (each must hold a finding)."""
    try:
        return sorted(n for n in os.listdir(findings_dir)
                      if os.path.isdir(os.path.join(findings_dir, n)))
    except FileNotFoundError:
        return []


def load(name, findings_dir=FINDINGS_DIR):
    """The finding @name with its toml checked; SetupError (one line,
    `findings/NAME/finding.toml: ...`) else.  Its program is checked by
    command.check_program, which needs the VM's device set."""
    folder = os.path.join(findings_dir, name)
    where = records.display(os.path.join(folder, TOML))
    if not os.path.isdir(folder):
        known = names(findings_dir)
        raise SetupError(f"no finding {name!r} in {records.display(findings_dir)} "
                         f"(known: {', '.join(known) or 'none'})")
    if not NAME_OK.match(name):
        raise SetupError(f"{where}: the folder's name must be letters, digits, '.', '_', '-'")
    try:
        with open(os.path.join(folder, TOML), "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise SetupError(f"{where}: no such file (a finding's folder holds one)") from None
    except OSError as e:
        raise SetupError(f"{where}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise SetupError(f"{where}: not TOML ({e})") from None
    for key in data:
        if key not in FIELDS and key != ALSO_ON:
            raise SetupError(f"{where}: unknown field {key!r} (fields: {', '.join(FIELDS)}, "
                             f"and optional {ALSO_ON})")
    for key, what in FIELDS.items():
        if key not in data:
            raise SetupError(f"{where}: no field {key!r} ({what})")
        if not isinstance(data[key], str) or not data[key].strip():
            raise SetupError(f"{where}: field {key!r} must be a non-empty string ({what})")
    if data["class"] not in CLASSES:
        raise SetupError(f"{where}: class {data['class']!r} is not one of {', '.join(CLASSES)}")
    also = data.get(ALSO_ON, [])
    if not isinstance(also, list) or not all(isinstance(k, str) and k.strip() for k in also):
        raise SetupError(f"{where}: {ALSO_ON} must be a list of kernel names")
    kernels = [data["kernel"].strip()] + [k.strip() for k in also]
    for k in kernels:
        if "/" in k:
            raise SetupError(f"{where}: kernel {k!r}: a kernel's name (`faultline kernel "
                             f"list`) or {DEFAULT_KERNEL!r}, not a path (a finding is "
                             "replayed on any machine)")
    if len(set(kernels)) != len(kernels):
        raise SetupError(f"{where}: a kernel named twice in kernel and {ALSO_ON}")
    finding = Finding(name, folder, {key: data[key].strip() for key in FIELDS}, kernels[1:])
    if not os.path.isfile(finding.program):
        raise SetupError(f"{records.display(finding.program)}: no such file (the program of "
                         f"{where})")
    return finding


def load_all(wanted=None, findings_dir=FINDINGS_DIR):
    """The findings @wanted (names; every one when empty), each checked."""
    chosen = list(wanted or names(findings_dir))
    if not chosen:
        raise SetupError(f"{records.display(findings_dir)}: no finding")
    return [load(n, findings_dir) for n in chosen]


def digest(path):
    """A reproducer's identity: the sha256 prefix of its repro.c @path."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def record(finding, kernel, replay):
    """The results record of @finding from its @replay on @kernel (one of
    its kernels): the replay's {kernel_key, qemu_build, guest_build, seed,
    deterministic, verdict, elapsed_s, time_to_failure_s, signature, reason,
    kernel_release, date, faultline}, the toml's text, `kernel` the one
    replayed on and `found_on` the toml's."""
    return {"subject": finding.name, **replay, **finding.fields,
            "found_on": finding.fields["kernel"], "kernel": kernel}


# ---------------------------------------------------------------- the docs table

def cell(text):
    """@text in one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def replay_cell(r):
    """The replay's verdict, time and signature."""
    if r["verdict"] == "pass":
        out = f"pass (did not show it) in {r['elapsed_s']:.0f} s"
    else:
        out = (f"{r['verdict']} after {r['time_to_failure_s']:.0f} s "
               f"({r['elapsed_s']:.0f} s with the boot)")
        if r["signature"]:
            out += f": `{r['signature']}`"
    exit_ = r.get("repro_exit")
    out += "; C reproducer " + ("never said its exit status" if exit_ is None else
                                f"exit {exit_}")
    if r.get("repro_finding"):
        out += f" (`finding {r['repro_finding']}`)"
    return out + (f", {r['date']}" if r.get("date") else "")


def by_finding(recs):
    """[[records of one finding, the replay on the kernel it was found on
    first]], findings in name order."""
    groups = {}
    for r in recs:
        groups.setdefault(r["subject"], []).append(r)
    return [sorted(g, key=lambda r: (r["kernel"] != r["found_on"], r["kernel"]))
            for _, g in sorted(groups.items())]


def render(recs, set_path):
    """The docs table of a findings set: a row per finding, its replays on
    each kernel in the kernel and replay cells."""
    head = (f"Kernel findings replayed into `{set_path}` (`faultline findings --results "
            f"{set_path}`; `faultline docs` writes this table).\n\n")
    if not recs:
        return head + ("No finding replayed yet: run `faultline findings --results "
                       f"{set_path}`, then `faultline docs`.\n")
    rows = ["| finding | kernel | symptom | found by | faults | replay | upstream |",
            "|---|---|---|---|---|---|---|"]
    for group in by_finding(recs):
        r = group[0]
        kernels = "; ".join(g["kernel"] + (f" ({g['kernel_release']})" if g.get(
            "kernel_release") else "") + ("" if g["kernel"] == g["found_on"] else ", also")
            for g in group)
        replays = "; ".join(f"{g['kernel']}: {replay_cell(g)}" for g in group)
        rows.append(f"| [{cell(r['title'])}](../findings/{r['subject']}/) "
                    f"(`{r['subject']}`) | {cell(kernels)} | {cell(r['symptom'])} "
                    f"| {cell(r['found_by'])} | {cell(r['faults'])} | {cell(replays)} "
                    f"| {cell(r['upstream'])} |")
    return head + "\n".join(rows) + "\n"
