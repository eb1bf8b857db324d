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


def parse_ktap(text):
    """Count KTAP results and collect '# key value' diagnostics (summed);
    'plan_errors' lists streams whose plan does not match their results."""
    res = {"ok": 0, "not_ok": 0, "skip": 0, "xfail": 0, "bail": False, "diag": {},
           "failures": [], "results": []}
    suite = ""
    streams = [["", False, [], 0]]      # [suite, KTAP header seen, plans, top-level results]
    for line in text.splitlines():
        s = line.strip()
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
        if top and (s.startswith("ok ") or s.startswith("not ok ")):
            streams[-1][3] += 1
        if s.startswith("ok ") or s.startswith("not ok "):
            head, _, directive = s.partition(" # ")
            directive = directive.upper()
            passed = s.startswith("ok ")
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
                res["failures"].append(s)
                kind = "fail"
            name = head.split(" ", 2 if passed else 3)[-1]
            res["results"].append({"suite": suite, "name": name, "kind": kind, "line": s})
        elif s.startswith("Bail out!"):
            res["bail"] = True
            res["failures"].append(s)
            res["results"].append({"suite": suite, "name": s, "kind": "fail", "line": s})
        elif s.startswith("# ") and len(s.split()) >= 3:
            parts = s[2:].split()
            key = " ".join(parts[:-1])
            try:
                res["diag"][key] = res["diag"].get(key, 0) + int(parts[-1])
            except ValueError:
                pass
    res["plan_errors"] = plan_problems(streams)
    return res
