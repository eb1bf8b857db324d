"""KTAP parser: result counts, '# key value' diagnostics, per-test results."""


import re

_PLAN = re.compile(r"^1\.\.(\d+)$")


def plan_problems(streams):
    """A KTAP document (one guest test's output; a wrapper such as swapctx
    prints its tool's, then its own) must print one plan, and its top-level
    results must number what it planned: a stream cut short with exit 0
    fails here."""
    problems = []
    for suite, header, plans, results in streams:
        if not header and not plans and not results:
            continue                    # not a KTAP tool (e.g. an echo)
        name = suite or "the guest"
        if len(plans) != 1:
            problems.append(f"{name}: {len(plans)} KTAP plans, expected 1")
        elif plans[0] != results:
            problems.append(f"{name}: planned {plans[0]} results, got {results}")
    return problems


def _add_diag(diag, s):
    parts = s[2:].split()
    if len(parts) < 2:
        return
    try:
        value = int(parts[-1])
    except ValueError:
        return
    key = " ".join(parts[:-1])
    diag[key] = diag.get(key, 0) + value


def parse_ktap(text):
    """Count KTAP results and collect '# key value' diagnostics (summed);
    'plan_errors' lists streams whose plan does not match their results.
    A result's name is its stable id; a '# NAME: detail' line just before
    it holds what it measured: its 'detail' (and in 'failures'), not a
    diagnostic."""
    res = {"ok": 0, "not_ok": 0, "skip": 0, "xfail": 0, "bail": False, "diag": {},
           "failures": [], "results": []}
    suite = ""
    streams = [["", False, [], 0]]      # [suite, KTAP header seen, plans, top-level results]
    pending = None                      # a '# X: Y' line: the next result's detail?
    for line in text.splitlines():
        s = line.strip()
        is_result = s.startswith("ok ") or s.startswith("not ok ")
        name = ""
        if is_result:
            head, _, directive = s.partition(" # ")
            passed = s.startswith("ok ")
            name = head.split(" ", 2 if passed else 3)[-1]
        detail = ""
        if pending is not None:
            if is_result and pending.startswith(f"# {name}: "):
                detail = pending[len(name) + 4:]
            else:
                _add_diag(res["diag"], pending)
            pending = None
        if s.startswith("# test: "):
            suite = s[len("# test: "):]
            streams.append([suite, False, [], 0])
        top = line == s                 # not an indented subtest line
        if top and s.startswith("KTAP version"):
            cur = streams[-1]
            if cur[1] or cur[2] or cur[3]:      # a second document (swapctx runs a tool)
                streams.append([suite, False, [], 0])
            streams[-1][1] = True
        if top and _PLAN.match(s):
            streams[-1][2].append(int(_PLAN.match(s).group(1)))
        if top and is_result:
            streams[-1][3] += 1
        if is_result:
            directive = directive.upper()
            if directive.startswith("SKIP"):
                res["skip"] += 1
                kind = "skip"
            elif directive.startswith("XFAIL"):
                res["xfail"] += 1
                kind = "xfail"
            elif passed:
                res["ok"] += 1
                kind = "ok"
            else:
                res["not_ok"] += 1
                res["failures"].append(f"{s}: {detail}" if detail else s)
                kind = "fail"
            res["results"].append({"suite": suite, "name": name, "kind": kind, "line": s,
                                   "detail": detail})
        elif s.startswith("Bail out!"):
            res["bail"] = True
            res["failures"].append(s)
            res["results"].append({"suite": suite, "name": s, "kind": "fail", "line": s,
                                   "detail": ""})
        elif s.startswith("# ") and ": " in s and not s.startswith("# test: "):
            pending = s
        elif s.startswith("# ") and not s.startswith("# test: "):
            # (a '# test: COMMAND' line names the suite: its last word is an
            # argument, not a measurement)
            _add_diag(res["diag"], s)
    if pending is not None:
        _add_diag(res["diag"], pending)
    res["plan_errors"] = plan_problems(streams)
    return res
