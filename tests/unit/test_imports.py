"""The launcher's import graph, read with ast from the sources.

The package is built in floors (LAYERS): a module imports only modules of
its own package or of a floor below, so no circle of packages can form; no
circle of files either, no import inside a function (the CLI's lazy
dispatch aside), no module loaded by a computed name, and no file over
MAX_LINES.  vm/ (the machine backends) knows no scenario and no run, and
nothing imports cli/."""

import ast
import os
import sys
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(TOP, "python", "faultline")

MAX_LINES = 600
# Bottom first.  A floor of several packages: none of them imports another.
LAYERS = [
    {"faultline", "faultline.errors", "faultline.paths"},
    {"faultline.scenario", "faultline.rules"},
    # faults/: the fault-schedule grammar, drawn by explore/ (search/) and by
    # the program generator (prog/).
    {"faultline.faults"},
    {"faultline.prog", "faultline.host"},
    {"faultline.build", "faultline.kernel", "faultline.judge"},
    # results/ (records of runs, docs tables from them): below bugs/ and
    # whatever else measures, above the judge and the kernel store it reads.
    {"faultline.results"},
    {"faultline.vm"},
    {"faultline.run"},
    {"faultline.search", "faultline.execute"},
    # bench measures what is below it (its programs group: programs run by
    # execute/ against explore's scenario runs); fuzz/ runs programs on
    # execute/'s guests and reads search/'s buckets.
    {"faultline.bench", "faultline.fuzz"},
    # findings/ replays programs with execute/'s `prog run` and names their
    # failures as fuzz/ does; bugs/ measures recall.  Neither imports the other.
    {"faultline.bugs", "faultline.findings"},
    {"faultline.lab"},
    {"faultline.cli"},
    {"faultline.__main__"},
]
# Above the root modules' floors, one module at a time: rules reads the
# scenario's error type, the root package holds TOP only.
ROOT_ORDER = ["faultline", "faultline.errors", "faultline.paths", "faultline.scenario",
              "faultline.rules"]


def module_name(path):
    rel = os.path.relpath(path, os.path.dirname(PKG))[:-3].replace(os.sep, ".")
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def sources():
    """{module name: source text} of every module of the package."""
    out = {}
    for root, _, files in os.walk(PKG):
        for fn in files:
            if fn.endswith(".py"):
                with open(os.path.join(root, fn)) as f:
                    out[module_name(os.path.join(root, fn))] = f.read()
    return out


def imports(name, text, known, is_package=False):
    """{package module @name imports: [line, in a function?]} at any depth
    of its code; @known: the package's modules."""
    package = name if is_package else name.rpartition(".")[0]
    found = {}

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                      ast.Lambda))
            names = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")
                    parts = parts[:len(parts) - child.level + 1]
                    base = ".".join(parts + ([child.module] if child.module else []))
                # `from . import x`: x is a module when the package has one.
                names = [base] + [f"{base}.{a.name}" for a in child.names]
            for m in names:
                if m in known and m != name:
                    found.setdefault(m, (child.lineno, in_function))
            visit(child, inner)
    visit(ast.parse(text), False)
    return found


def dynamic_imports(text):
    """Lines that load a module by a computed name: importlib.import_module,
    `from importlib import import_module`, __import__."""
    lines = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module == "importlib" and \
                any(a.name == "import_module" for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr == "import_module" or \
                    isinstance(f, ast.Name) and f.id == "__import__":
                lines.append(node.lineno)
    return sorted(lines)


def graph(srcs):
    """{module: {imported module: (line, in a function?)}}."""
    packages = {m.rpartition(".")[0] for m in srcs}
    return {name: imports(name, text, set(srcs), name in packages)
            for name, text in srcs.items()}


def unit(module):
    """The package (or root module) @module belongs to, as LAYERS names it."""
    parts = module.split(".")
    return ".".join(parts[:2])


def floor(module):
    u = unit(module)
    for i, layer in enumerate(LAYERS):
        if u in layer:
            return i
    return None


def upward(g):
    """Imports that do not point down: [(importer, imported, line)]."""
    bad = []
    for a, targets in g.items():
        for b, (line, _) in targets.items():
            ua, ub = unit(a), unit(b)
            if ua == ub and ua not in ROOT_ORDER:
                continue
            if ua in ROOT_ORDER and ub in ROOT_ORDER:
                if ROOT_ORDER.index(ub) >= ROOT_ORDER.index(ua) and ub != "faultline":
                    bad.append((a, b, line))
                continue
            fa, fb = floor(a), floor(b)
            if fa is None or fb is None or fb >= fa:
                bad.append((a, b, line))
    return sorted(bad)


def circles(g):
    """Strongly connected sets of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(g):
        if v not in index:
            connect(v)
    return out


def function_imports(g):
    """[(importer, imported, line)] of imports inside functions outside cli/."""
    return sorted((a, b, line) for a, targets in g.items() for b, (line, inner) in targets.items()
                  if inner and unit(a) != "faultline.cli")


class ImportGraphTest(unittest.TestCase):
    def setUp(self):
        self.srcs = sources()
        self.g = graph(self.srcs)

    def test_every_package_has_a_floor(self):
        self.assertEqual(sorted(m for m in self.srcs if floor(m) is None), [])

    def test_imports_point_down(self):
        self.assertEqual(upward(self.g), [])

    def test_no_circle_of_files(self):
        self.assertEqual(circles({a: set(t) for a, t in self.g.items()}), [])

    def test_no_import_inside_a_function(self):
        self.assertEqual(function_imports(self.g), [])

    def test_machines_know_no_scenario_no_run_and_nothing_imports_the_cli(self):
        for a, targets in self.g.items():
            for b in targets:
                if unit(a) == "faultline.vm":
                    self.assertNotIn(unit(b), {"faultline.scenario", "faultline.rules",
                                               "faultline.run"}, f"{a} imports {b}")
                if unit(b) == "faultline.cli":
                    self.assertIn(unit(a), {"faultline.cli", "faultline.__main__"},
                                  f"{a} imports {b}")

    def test_no_module_is_loaded_by_a_computed_name(self):
        found = {n: dynamic_imports(t) for n, t in self.srcs.items()}
        self.assertEqual({n: ls for n, ls in found.items() if ls}, {})

    def test_no_file_is_too_long(self):
        long = {n: t.count("\n") for n, t in self.srcs.items() if t.count("\n") > MAX_LINES}
        self.assertEqual(long, {})

    def test_the_checks_catch_what_they_look_for(self):
        """The readers on planted sources: an upward import, a circle of
        two files, a function-level import two hops away, a relative import
        of the cli, importlib."""
        srcs = dict(self.srcs)
        srcs["faultline.vm.libvirt"] += "\n\ndef f():\n    from ..run import runner\n"
        srcs["faultline.judge.ktap"] += "\nfrom faultline.judge import report\n"
        srcs["faultline.judge.report"] += "\nfrom . import ktap\n"
        srcs["faultline.vm.qemu"] += "\nfrom ..cli.commands import cmd_run\n"
        g = graph(srcs)
        self.assertIn(("faultline.vm.libvirt", "faultline.run.runner"),
                      [(a, b) for a, b, _ in upward(g)])
        self.assertIn(("faultline.vm.qemu", "faultline.cli.commands"),
                      [(a, b) for a, b, _ in upward(g)])
        self.assertIn(["faultline.judge.ktap", "faultline.judge.report"],
                      circles({a: set(t) for a, t in g.items()}))
        self.assertIn("faultline.vm.libvirt", [a for a, _, _ in function_imports(g)])
        self.assertEqual(dynamic_imports("import importlib\n"
                                         "m = importlib.import_module('.lava', 'faultline')\n"
                                         "from importlib import import_module\n"
                                         "n = __import__('faultline.lava')\n"), [2, 3, 4])


if __name__ == "__main__":
    sys.exit(unittest.main())
