#!/usr/bin/python3
"""tests/run-qtest --variant asan: a sanitizer report from any process of a
qtest fails it, the ASAN coroutine warning alone does not.  Real reports
from real clang-instrumented programs (ASAN heap-use-after-free, UBSAN
signed overflow), not canned text."""

import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROGRAMS = {
    "clean": "int main(void) { return 0; }",
    "uaf": "#include <stdlib.h>\n"
           "int main(void) { volatile char *p = malloc(8); free((void *)p);"
           " return p[1]; }",
    "overflow": "#include <limits.h>\n"
                "int main(int argc, char **argv) { int x = INT_MAX;"
                " x += argc; return x == 0; }",
    # A coroutine switch: ASAN prints its makecontext warning only.
    "ucontext": "#include <ucontext.h>\n"
                "static ucontext_t a, b; static char stack[65536];\n"
                "static void f(void) { swapcontext(&b, &a); }\n"
                "int main(void) { getcontext(&b); b.uc_stack.ss_sp = stack;"
                " b.uc_stack.ss_size = sizeof(stack); b.uc_link = &a;"
                " makecontext(&b, f, 0); swapcontext(&a, &b); return 0; }",
}


def load_run_qtest():
    path = os.path.join(TOP, "tests", "run-qtest")
    loader = importlib.machinery.SourceFileLoader("run_qtest", path)
    spec = importlib.util.spec_from_loader("run_qtest", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


@unittest.skipUnless(shutil.which("clang"), "clang not installed")
class SanitizerReports(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rq = load_run_qtest()
        cls.tmp = tempfile.TemporaryDirectory()
        cls.bin = {}
        for name, src in PROGRAMS.items():
            c = os.path.join(cls.tmp.name, name + ".c")
            with open(c, "w") as f:
                f.write(src)
            exe = os.path.join(cls.tmp.name, name)
            subprocess.run(["clang", "-g", "-O0", "-fsanitize=address,undefined",
                            "-o", exe, c], check=True)
            cls.bin[name] = exe

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_one(self, name):
        return self.rq.run_sanitized(name, [self.bin[name]], dict(os.environ),
                                     self.tmp.name)

    def test_clean_passes(self):
        self.assertEqual(self.run_one("clean"), 0)

    def test_coroutine_warning_is_not_a_report(self):
        self.assertEqual(self.run_one("ucontext"), 0)

    def test_asan_report_fails(self):
        self.assertNotEqual(self.run_one("uaf"), 0)

    def test_ubsan_report_fails_even_with_exit_0(self):
        # UBSAN recovers: the program exits 0, the report alone fails it.
        self.assertNotEqual(self.run_one("overflow"), 0)


if __name__ == "__main__":
    sys.exit(unittest.main())
