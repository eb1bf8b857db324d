"""Patch series for kernel builds: mbox or plain diffs split into patches,
applied with git, a rejected hunk reported as one line."""

import re
import subprocess
from dataclasses import dataclass

from faultline.errors import SetupError


# ---------------------------------------------------------------- patches

@dataclass
class Patch:
    path: str           # the file given with --patch
    index: int          # 1-based within that file
    count: int          # patches in that file
    subject: str        # the mail's subject, or "" for a plain diff
    diff: str

    def label(self):
        if self.count == 1 and not self.subject:
            return self.path
        s = f" {self.subject!r}" if self.subject else ""
        return f"{self.path} [{self.index}/{self.count}{s}]"


_SUBJ_RE = re.compile(r"^(?:Subject:\s*)?((?:(?:Re|RE|Fwd):\s*)*)(\[(?:[^\]]*\s)?PATCH[^\]]*\].*)$")
_MBOX_FROM_RE = re.compile(r"^From \S+ .*\d$")


def split_patches(path, text):
    """A --patch file -> [Patch].  A plain diff is one patch; a mailbox or a
    saved list thread gives one patch per message that carries a diff, in
    file order.  A message starts at an mbox "From " line (its Subject:
    header names it) or at a "[PATCH ...] subject" / "Subject: [PATCH" line;
    replies ("Re: [PATCH") are skipped, cover letters carry no diff, and a
    diff ends at the "-- " signature."""
    msgs = [{"subject": "", "reply": False, "lines": [], "headers": False}]
    for ln in text.splitlines(keepends=True):
        s = ln.rstrip("\n")
        cur = msgs[-1]
        if _MBOX_FROM_RE.match(s):
            msgs.append({"subject": "", "reply": False, "lines": [], "headers": True})
            continue
        if cur["headers"]:
            if not s.strip():
                cur["headers"] = False
            elif s.startswith("Subject:"):
                m = _SUBJ_RE.match(s)
                cur["subject"] = (m.group(2) if m else s[8:]).strip()
                cur["reply"] = bool(m and m.group(1)) or s[8:].strip().startswith("Re:")
            continue
        m = _SUBJ_RE.match(s)
        if m:
            msgs.append({"subject": m.group(2).strip(), "reply": bool(m.group(1)),
                         "lines": [], "headers": False})
            continue
        cur["lines"].append(ln)
    patches = []
    for msg in msgs:
        if msg["reply"]:
            continue
        diff = _extract_diff(msg["lines"])
        if diff:
            patches.append((_clean_subject(msg["subject"]), diff))
    return [Patch(path, i + 1, len(patches), subj, d) for i, (subj, d) in enumerate(patches)]


def _clean_subject(s):
    return re.sub(r"^\[[^\]]*PATCH[^\]]*\]\s*", "", s).strip()


def _extract_diff(lines):
    """The diff in a message: from its first diff header to the signature
    ("-- ") or the end; "---" file headers need a "+++" line after them."""
    start = None
    for i, ln in enumerate(lines):
        if ln.startswith("diff --git ") or ln.startswith("Index: "):
            start = i
            break
        if ln.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            start = i
            break
    if start is None:
        return ""
    out = []
    for ln in lines[start:]:
        if ln.rstrip("\n") == "-- ":
            break
        out.append(ln)
    d = "".join(out)
    return d if ("\n@@ " in d or d.startswith("@@ ") or "GIT binary patch" in d) else ""


def read_patches(paths):
    """--patch FILE... -> [Patch] in order; a file with no diff is one line."""
    out = []
    for p in paths:
        try:
            with open(p, errors="replace") as f:
                text = f.read()
        except OSError as e:
            raise SetupError(f"--patch {p}: {e.strerror}") from None
        got = split_patches(p, text)
        if not got:
            raise SetupError(f"--patch {p}: not a patch (no diff in it: a plain diff, "
                             "or a mailbox of patches as saved from the list)")
        out.extend(got)
    return out


def apply_patches(tree, patches, log=None):
    """Apply @patches in order to the git work tree @tree (git apply).  The
    first that does not apply is one line: the patch, its first failing
    file and hunk."""
    for p in patches:
        res = subprocess.run(["git", "-C", tree, "apply", "--whitespace=nowarn", "-"],
                             input=p.diff, capture_output=True, text=True)
        if log:
            log.write(f"git apply {p.label()}: exit {res.returncode}\n{res.stderr}")
        if res.returncode != 0:
            raise SetupError(f"--patch {p.label()} does not apply: " + _apply_failure(p, res.stderr))


def _apply_failure(p, stderr):
    m = re.search(r"patch failed: (.+):(\d+)", stderr)
    if m:
        fname, line = m.group(1), int(m.group(2))
        hunk = _hunk_at(p.diff, fname, line)
        return f"{fname}, hunk {hunk}" if hunk else f"{fname}:{line}"
    m = re.search(r"error: (.+?): (No such file or directory|does not exist in index|"
                  r"already exists in working directory)", stderr)
    if m:
        return f"{m.group(1)}: {m.group(2)}"
    first = next((ln for ln in stderr.splitlines() if ln.startswith("error:")),
                 stderr.strip().splitlines()[0] if stderr.strip() else "git apply failed")
    return first.replace("error: ", "", 1)


def _hunk_at(diff, fname, line):
    """'#N (@@ -a,b +c,d @@)' for the hunk of @fname starting at old line @line."""
    cur, n = None, 0
    for ln in diff.splitlines():
        if ln.startswith("+++ "):
            cur = ln[4:].split("\t")[0]
            cur = cur[2:] if cur.startswith(("a/", "b/")) else cur
            n = 0
        elif ln.startswith("@@ ") and cur == fname:
            n += 1
            m = re.match(r"@@ -(\d+)", ln)
            if m and int(m.group(1)) == line:
                hdr = ln.split("@@")[1].strip()
                return f"#{n} (@@ {hdr} @@)"
    return None
