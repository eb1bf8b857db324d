"""The launcher's import graph, read with ast from the sources: a machine
backend (and everything it imports) never reaches runner or the cli
package, and no module loads another through importlib, so the graph
shows every edge (runner -> backends -> qemu, libvirt, lava)."""

import ast
import os
import sys
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline import backends  # noqa: E402

PKG = os.path.join(TOP, "python", "faultline")


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
    """The package modules @name imports, at any depth of its code
    (function-level imports included); @known: the package's modules."""
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            found.add(base)
            # `from . import x`: x is a module when the package has one.
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if m in known}


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
    # A package is a module with modules under it (its __init__.py).
    packages = {m.rpartition(".")[0] for m in srcs}
    return {name: imports(name, text, set(srcs), name in packages)
            for name, text in srcs.items()}


def reach(g, start):
    seen, todo = set(), list(start)
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(g.get(m, ()))
    return seen


def forbidden(g, roots):
    """{backend module: the runner/cli modules it reaches}."""
    bad = {}
    for root in roots:
        hit = {m for m in reach(g, [root]) if m == "faultline.runner" or
               m == "faultline.cli" or m.startswith("faultline.cli.")}
        if hit:
            bad[root] = sorted(hit)
    return bad


# The backend modules: the base class, the registry and each backend's module.
BACKEND_MODULES = sorted({"faultline.machine", "faultline.backends"} |
                         {cls.__module__ for cls in backends.BACKENDS.values()})


class ImportGraphTest(unittest.TestCase):
    def setUp(self):
        self.srcs = sources()
        self.g = graph(self.srcs)

    def test_backends_never_reach_runner_or_the_cli(self):
        self.assertEqual(BACKEND_MODULES, ["faultline.backends", "faultline.lava",
                                           "faultline.libvirt", "faultline.machine",
                                           "faultline.qemu"])
        self.assertEqual(forbidden(self.g, BACKEND_MODULES), {})

    def test_runner_and_the_cli_import_the_backends_plainly(self):
        self.assertIn("faultline.backends", self.g["faultline.runner"])
        self.assertIn("faultline.backends", self.g["faultline.cli.parser"])
        for name in BACKEND_MODULES[1:]:
            if name != "faultline.machine":
                self.assertIn(name, self.g["faultline.backends"])

    def test_no_module_is_loaded_by_a_computed_name(self):
        found = {n: dynamic_imports(t) for n, t in self.srcs.items()}
        self.assertEqual({n: ls for n, ls in found.items() if ls}, {})

    def test_the_checks_catch_what_they_look_for(self):
        """The readers on planted sources: a function-level import of
        runner two hops away, a relative import of the cli, importlib."""
        srcs = dict(self.srcs)
        srcs["faultline.libvirt"] += "\n\ndef f():\n    from . import kcidb_x\n"
        srcs["faultline.kcidb_x"] = "from .runner import one_run\n"
        srcs["faultline.qemu"] += "\nfrom .cli.commands import cmd_run\n"
        bad = forbidden(graph(srcs), BACKEND_MODULES)
        self.assertIn("faultline.runner", bad["faultline.libvirt"])
        self.assertIn("faultline.cli.commands", bad["faultline.qemu"])
        self.assertEqual(dynamic_imports("import importlib\n"
                                         "m = importlib.import_module('.lava', 'faultline')\n"
                                         "from importlib import import_module\n"
                                         "n = __import__('faultline.lava')\n"), [2, 3, 4])


if __name__ == "__main__":
    unittest.main()
