"""prog/minimize.py: a failing program shrinks to a valid, 1-minimal one
that still fails, over operations and fault rules together."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

from faultline.prog.check import check
from faultline.prog.gen import generate
from faultline.prog.lang import parse
from faultline.prog.minimize import assemble, closure, minimize, statements, valid, Stats


def has(program, verb, pred=lambda st: True):
    return any(st.verb == verb and pred(st) for st in list(program.header) + list(program.ops))


def one_minimal(test, program, fails):
    """No single statement (with what depends on it) can go and still fail."""
    items = statements(program)
    for i in range(len(items)):
        drop = closure(items, [i])
        rest = [it for j, it in enumerate(items) if j not in drop]
        candidate = valid(program, rest, Stats()) if rest else None
        if candidate is not None:
            test.assertFalse(fails(candidate), f"removing line {i + 1} still fails:\n"
                             + program.text())


class Minimize(unittest.TestCase):
    def programs(self, want, count=40):
        found = []
        for seed in range(1, 400):
            p = generate(seed)
            if want(p):
                found.append(p)
            if len(found) == count:
                break
        self.assertGreater(len(found), 3, "the generator never wrote such a program")
        return found

    def test_two_operations_are_all_that_stay(self):
        def fails(p):
            return has(p, "swapoff") and has(p, "pread")
        for p in self.programs(fails):
            small, stats = minimize(p, fails)
            check(small, engine_rules=False)
            self.assertTrue(fails(small))
            ops = [st.verb for st in small.ops]
            # the swapoff, the pread, and what they need: an object, a device
            self.assertLessEqual(len(ops), 4, small.text())
            self.assertLess(len(small.ops), len(p.ops))
            one_minimal(self, small, fails)
            self.assertGreater(stats.runs, 0)

    def test_a_rule_and_an_operation_together(self):
        def fails(p):
            return has(p, "rule") and has(p, "reclaim")
        for p in self.programs(fails, 15):
            small, _ = minimize(p, fails)
            self.assertEqual(len(small.of("rule")), 1, small.text())
            self.assertEqual(sum(st.verb == "reclaim" for st in small.ops), 1)
            one_minimal(self, small, fails)

    def test_a_background_operation_keeps_its_wait_only_if_needed(self):
        text = """program v1
swap s0 nvme size=8M
anon a 1M
fork p
@p write a 0 1M v=1 &
read a 0 64K
wait p
madvise a 0 1M pageout
read a 0 1M
"""
        p = parse(text)

        def fails(c):
            return has(c, "madvise") and has(c, "read", lambda st: st.args[2] >= 512 << 10)
        small, _ = minimize(p, fails)
        verbs = [st.verb for st in small.ops]
        self.assertEqual(verbs, ["anon", "madvise", "read"], small.text())
        self.assertFalse(small.of("swap"))
        # the length of the read was halved as far as the failure allows
        self.assertEqual(small.ops[-1].args[2], 512 << 10)

    def test_a_program_that_passes_when_anything_goes_stays_whole(self):
        p = generate(7)
        small, stats = minimize(p, lambda c: c.text() == assemble(p, statements(p)).text())
        self.assertEqual(small.text(), p.text())
        self.assertGreater(stats.runs, 0)


if __name__ == "__main__":
    unittest.main()
