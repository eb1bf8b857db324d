"""The real-kernel-bug corpus: tests/bugs/NAME/bug.toml and its
re-introduction patch.  Loading checks every field, so `check` (the unit
suite) refuses a corpus entry that `faultline bugs` could not use."""

import os
import re
import tomllib
from dataclasses import dataclass

from faultline import TOP, scenario as flscenario

BUGS_DIR = os.path.join(TOP, "tests", "bugs")
BASES = ("debian:6.1", "debian:6.12")
_COMMIT = re.compile(r"^[0-9a-f]{12,40}$")
# v2.6.x releases had three numbers (v2.6.19, v2.6.12-rc2).
_RELEASE = re.compile(r"^v(\d+\.\d+|2\.6\.\d+)(-rc\d+)?$")

# key: (type, required); free text keys are strings.
_FIELDS = {
    "name": (str, True), "fix": (str, True), "fix_full": (str, False),
    "title": (str, True), "fixed_in": (str, True), "introduced_by": (str, True),
    "introduced_in": (str, True), "stable_6_1": (str, False), "base": (str, True),
    "base_has_fix": (bool, True), "kasan": (bool, True), "scenarios": (list, True),
    "reintroduce": (str, True), "apply": (str, True), "compiles": (str, True),
    "trigger": (str, True), "symptom": (str, True), "device_role": (str, True),
    "reintroduction": (str, True), "recall_expectation": (str, False),
    "nondeterministic": (str, False),
}


class BugError(Exception):
    pass


@dataclass
class Bug:
    name: str
    dir: str
    fix: str
    title: str
    base: str
    kasan: bool
    scenarios: list
    patch: str
    data: dict


def _check_patch(path, where):
    """A plain unified diff for `patch -p1`: a/ and b/ headers, hunks, and
    no file outside the kernel tree."""
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        raise BugError(f"{where}: reintroduce patch {path} is missing") from None
    olds = re.findall(r"^--- (\S+)", text, re.M)
    news = re.findall(r"^\+\+\+ (\S+)", text, re.M)
    if not olds or len(olds) != len(news) or not re.search(r"^@@ -\d+(,\d+)? \+\d+(,\d+)? @@",
                                                           text, re.M):
        raise BugError(f"{where}: {os.path.basename(path)} is not a unified diff")
    for p in olds + news:
        if not p.startswith(("a/", "b/")) or ".." in p.split("/"):
            raise BugError(f"{where}: {os.path.basename(path)}: path {p!r} is not a/... or b/... "
                           "(patch -p1 from the top of the kernel tree)")
    if "faultline bug corpus" not in text:
        raise BugError(f"{where}: {os.path.basename(path)} has no comment naming the fix "
                       "('faultline bug corpus (NAME): ... upstream COMMIT')")
    return text


def load(name):
    """The Bug in tests/bugs/@name (or a directory path), checked."""
    d = name if os.path.isdir(name) else os.path.join(BUGS_DIR, name)
    path = os.path.join(d, "bug.toml")
    where = os.path.relpath(path, TOP) if path.startswith(TOP) else path
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError:
        raise BugError(f"no corpus bug {name!r} ({path} missing)") from None
    except tomllib.TOMLDecodeError as e:
        raise BugError(f"{where}: {e}") from None
    for k, v in data.items():
        if k not in _FIELDS:
            raise BugError(f"{where}: unknown key {k!r}")
        if not isinstance(v, _FIELDS[k][0]):
            raise BugError(f"{where}: {k} must be a {_FIELDS[k][0].__name__}")
    for k, (_, required) in _FIELDS.items():
        if required and k not in data:
            raise BugError(f"{where}: missing key {k!r}")
    if data["name"] != os.path.basename(os.path.normpath(d)):
        raise BugError(f"{where}: name {data['name']!r} is not its directory's")
    for k in ("fix", "fix_full"):
        if k in data and not _COMMIT.match(data[k]):
            raise BugError(f"{where}: {k} {data[k]!r} is not a commit id (12 to 40 hex digits)")
    if "fix_full" in data and not data["fix_full"].startswith(data["fix"]):
        raise BugError(f"{where}: fix_full does not start with fix")
    if data["introduced_by"] != "unverified" and not _COMMIT.match(data["introduced_by"]):
        raise BugError(f"{where}: introduced_by {data['introduced_by']!r} is not a commit id "
                       "(or 'unverified')")
    for k in ("fixed_in", "introduced_in"):
        if not _RELEASE.match(data[k]):
            raise BugError(f"{where}: {k} {data[k]!r} is not a release (e.g. v6.9, v6.12-rc1, v2.6.19)")
    if data["base"] not in BASES:
        raise BugError(f"{where}: base {data['base']!r} is not one of {', '.join(BASES)}")
    if not data["scenarios"] or not all(isinstance(s, str) for s in data["scenarios"]):
        raise BugError(f"{where}: scenarios must be a non-empty list of scenario names")
    for s in data["scenarios"]:
        try:
            flscenario.load(s)
        except flscenario.ScenarioError as e:
            raise BugError(f"{where}: scenario {s!r}: {e}") from None
    patch = os.path.join(d, data["reintroduce"])
    _check_patch(patch, where)
    return Bug(name=data["name"], dir=d, fix=data["fix"], title=data["title"],
               base=data["base"], kasan=data["kasan"], scenarios=data["scenarios"],
               patch=patch, data=data)


def list_all():
    if not os.path.isdir(BUGS_DIR):
        return []
    return sorted(n for n in os.listdir(BUGS_DIR)
                  if os.path.exists(os.path.join(BUGS_DIR, n, "bug.toml")))
