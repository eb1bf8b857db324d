"""A program run's directory (docs/programs.md, "Running programs"):

  RUNDIR/run.json                 builds, options, the programs in the order sent
  RUNDIR/programs/NAME/program.prog   the file as given
  RUNDIR/programs/NAME/report.txt     the guest's lines
  RUNDIR/programs/NAME/result.json    verdict, findings, rule hits, digests

and `faultline prog show RUNDIR`, which reads them back.
"""

import json
import os
import shutil

from faultline.errors import SetupError

VERDICTS = ("pass", "fail", "refused", "crash")


def program_dir(rundir, name):
    return os.path.join(rundir, "programs", name)


def write_program(rundir, name, path, outcome, ops):
    """The program's directory from its Outcome; @ops: its operations."""
    d = program_dir(rundir, name)
    os.makedirs(d, exist_ok=True)
    shutil.copyfile(path, os.path.join(d, "program.prog"))
    with open(os.path.join(d, "report.txt"), "w") as f:
        f.write("".join(line + "\n" for line in outcome.report))
    result = {"name": name, "file": os.path.abspath(path), "verdict": outcome.verdict,
              "reason": outcome.reason, "ops": ops, "ops_run": outcome.ops_run,
              "findings": outcome.findings, "faults": outcome.faults,
              "stats": outcome.stats, "elapsed_s": round(outcome.elapsed_s, 2),
              "edges": len(outcome.cover), "cover": sorted(outcome.cover)}
    with open(os.path.join(d, "result.json"), "w") as f:
        f.write(compact_json(result, "cover"))
    return result


def compact_json(obj, flat_key):
    """@obj indented, its list @flat_key on one line (thousands of edges
    would take a line each)."""
    mark = "\0flat\0"
    text = json.dumps({**obj, flat_key: mark}, indent=1)
    return text.replace(json.dumps(mark), json.dumps(obj[flat_key], separators=(",", ":")), 1)


def write_run_json(rundir, meta):
    tmp = os.path.join(rundir, "run.json.tmp")
    with open(tmp, "w") as f:
        json.dump(meta, f, indent=1)
    os.replace(tmp, os.path.join(rundir, "run.json"))


def load(rundir):
    """(run.json, [result.json in the order sent]); SetupError when
    @rundir is no program run."""
    try:
        with open(os.path.join(rundir, "run.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        raise SetupError(f"{rundir}: not a program run directory ({e})") from None
    if "programs" not in meta:
        raise SetupError(f"{rundir}: not a program run directory (run.json has no programs; "
                         "`faultline show` reads scenario runs)")
    results = []
    for name in meta["programs"]:
        try:
            with open(os.path.join(program_dir(rundir, name), "result.json")) as f:
                results.append(json.load(f))
        except (OSError, ValueError):
            results.append({"name": name, "verdict": "not run", "findings": []})
    return meta, results


def finding_lines(f):
    """The lines `prog show` prints for one finding."""
    where = f"line {f['file_line']}: {f['op']}" if "file_line" in f else \
        f"(guest line {f['line']})" if "line" in f else ""
    head = f"    {f['check']}"
    if where:
        head += f"  {where}"
    out = [head]
    detail = []
    if "obj" in f:
        detail.append(f"obj {f['obj']}" + (f" page {f['page']}" if "page" in f else ""))
    if "expected" in f or "seen" in f:
        detail.append(f"expected {f.get('expected', '?')} seen {f.get('seen', '?')}")
    if "word" in f:
        detail.append(f"word {f['word']}: got {f.get('got', '?')} want {f.get('want', '?')}")
    for key in ("proc", "errno", "why"):
        if key in f:
            detail.append(f"{key} {f[key]}")
    if detail:
        out.append("      " + ", ".join(detail))
    if "text" in f:
        out.append(f"      {f['text']}")
    return out


def show(rundir):
    """Print a program run: a line per program, then its findings."""
    meta, results = load(rundir)
    print(f"kernel {meta.get('kernel_release') or '?'}  "
          f"({len(results)} program{'s' if len(results) != 1 else ''}, "
          f"exit {meta.get('status', '?')})")
    for r in results:
        ops = f"{r.get('ops_run', 0)}/{r.get('ops', '?')} ops"
        print(f"{r['name']:24} {r['verdict']:8} {ops:12} {len(r['findings'])} finding"
              f"{'s' if len(r['findings']) != 1 else ''}"
              + (f", {r['edges']} edges" if r.get("edges") else "")
              + (f"  ({r['reason']})" if r.get("reason") else ""))
        for f in r["findings"]:
            print("\n".join(finding_lines(f)))
    if meta.get("replay"):
        print(f"replay: {meta['replay']}")
    return 0
