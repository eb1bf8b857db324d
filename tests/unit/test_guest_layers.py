"""The guest tools' files call each other in layers, never in a circle
(issue 33, item 9): swaptest's files are compiled one by one and `nm` says
which file defines each symbol another one uses; that graph must have no
cycle, and lib/pagecheck.c (the pattern, verify, SIGBUS and mlock helpers) is
a leaf that uses no other swaptest file.  guest/tools/lib/ is a leaf library
(issue "A house a new maintainer can walk through", item 7): nothing in it
includes a header from outside lib/."""

import collections
import os
import re
import shutil
import subprocess
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(TOP, "guest", "tools")
# The libraries every tool links: their symbols are below swaptest's layers.
# Paths are relative to guest/tools, as the Makefile names them.
LIBS = {"lib/guestlib.c", "lib/guestlib-trace.c", "lib/guestlib-nvme.c", "lib/ktap.c"}


def swaptest_sources():
    """swaptest's sources, as guest/tools/Makefile lists them."""
    make = read("Makefile").replace("\\\n", " ")
    files = []
    for m in re.finditer(r"^SWAPTEST\s*[:+]?=\s*(.*)$", make, re.M):
        files += m.group(1).split()
    return files


def read(f):
    with open(os.path.join(TOOLS, f)) as fh:
        return fh.read()


def sources(under=""):
    """The C sources and headers below guest/tools/@under, relative to guest/tools."""
    found = []
    for d, _, names in os.walk(os.path.join(TOOLS, under)):
        found += [os.path.relpath(os.path.join(d, n), TOOLS) for n in names
                  if n.endswith((".c", ".h"))]
    return sorted(found)


def call_graph(files, workdir):
    """{file: files whose symbols it uses}, from nm of each object, and
    {file: the writable globals it defines} (-fno-pie: const tables are
    read-only data, R, not D)."""
    defined, used = {}, collections.defaultdict(set)
    writable = collections.defaultdict(set)
    for f in files:
        obj = os.path.join(workdir, f.replace("/", "_") + ".o")
        subprocess.run(["gcc", "-std=gnu11", "-fno-pie", "-c", "-w",
                        "-I", os.path.join(TOP, "include"),
                        "-o", obj, os.path.join(TOOLS, f)], check=True)
        nm = subprocess.run(["nm", obj], check=True, capture_output=True, text=True).stdout
        for line in nm.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBRC":
                defined[parts[2]] = f
                if parts[1] in "DBC":
                    writable[f].add(parts[2])
            elif len(parts) == 2 and parts[0] == "U":
                used[f].add(parts[1])
    return ({f: {defined[s] for s in used[f] if s in defined and defined[s] != f}
             for f in files}, writable)


def cycle(graph):
    """One cycle of @graph as a list of files, or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = "open"
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == "open":
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = "done"
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


@unittest.skipUnless(shutil.which("gcc") and shutil.which("nm"), "needs gcc and nm")
class Layers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.files = swaptest_sources()
        with tempfile.TemporaryDirectory() as d:
            cls.graph, cls.writable = call_graph(cls.files + sorted(LIBS), d)

    def test_sources_found(self):
        self.assertIn("swaptest/swaptest.c", self.files)
        self.assertIn("lib/pagecheck.c", self.files)

    def test_no_circle(self):
        self.assertIsNone(cycle(self.graph), "files calling each other in a circle")

    def test_pagecheck_is_a_leaf(self):
        self.assertLessEqual(self.graph["lib/pagecheck.c"], LIBS)

    def test_no_shared_mutable_state(self):
        # A run's state is passed (struct run), never another file's global;
        # lib's KTAP counters are the one stream every tool reports into.
        for f in self.files:
            self.assertEqual(self.writable[f], set(), f)
        self.assertEqual(self.writable["lib/ktap.c"], {"ktap_planned", "ktap_num", "ktap_failed"})

    def test_main_is_called_by_none(self):
        callers = [f for f, deps in self.graph.items() if "swaptest/swaptest.c" in deps]
        self.assertEqual(callers, [])

    def test_no_c_file_included(self):
        for f in sources():
            text = read(f)
            self.assertIsNone(re.search(r'#include\s+"[^"]+\.c"', text), f)

    def test_lib_is_a_leaf(self):
        # No header of guest/tools outside lib/, found beside the file or by
        # the Makefile's -I. (the devices' wire headers are not in guest/tools).
        for f in sources("lib"):
            for inc in re.findall(r'^#include\s+"([^"]+)"', read(f), re.M):
                for base in (os.path.dirname(f), ""):
                    path = os.path.normpath(os.path.join(base, inc))
                    if os.path.isfile(os.path.join(TOOLS, path)):
                        self.assertTrue(path.startswith("lib/"), f"{f} includes {inc}")

    def test_swaptest_sources_in_their_folder(self):
        # swaptest's own files in swaptest/, its only other sources in lib/
        for f in self.files:
            self.assertTrue(f.startswith(("swaptest/", "lib/")), f)
        self.assertEqual(sorted(f for f in sources("swaptest") if f.endswith(".c")),
                         sorted(f for f in self.files if f.startswith("swaptest/")))

    def test_cycle_finder(self):
        # The finder itself: the old shape (main <-> pipeline) is a circle.
        self.assertEqual(cycle({"a": {"b"}, "b": {"a"}}), ["a", "b", "a"])
        self.assertIsNone(cycle({"a": {"b"}, "b": set()}))


if __name__ == "__main__":
    unittest.main()
