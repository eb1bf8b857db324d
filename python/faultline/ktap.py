"""KTAP parser: result counts, '# key value' diagnostics, per-test results."""


def parse_ktap(text):
    """Count KTAP results and collect '# key value' diagnostics (summed)."""
    res = {"ok": 0, "not_ok": 0, "skip": 0, "xfail": 0, "bail": False, "diag": {},
           "failures": [], "results": []}
    suite = ""
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("# test: "):
            suite = s[len("# test: "):]
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
    return res
