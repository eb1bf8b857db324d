"""The program generator under a guest's offers (python/faultline/prog/gen.py,
docs/programs.md "The executor and its channel"): without offers, or with
offers of everything the language has, the same seed writes the same
program; with a kernel that lacks things, no program names them, and what
it offers is still drawn."""

import os
import re
import sys
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.prog import lang  # noqa: E402
from faultline.prog.check import check  # noqa: E402
from faultline.prog.gen import generate, load_weights, offered_weights  # noqa: E402

SEEDS = range(1, 121)


def everything():
    """Offers of a kernel with every knob, value, size and file of the language."""
    offers = {"knobs": list(lang.KNOBS) + [f"mthp.{s}.enabled" for s in lang.MTHP_SIZES],
              "mthp.sizes": list(lang.MTHP_SIZES),
              "cgroup.files": list(lang.CGROUP_KEYS), "cpus": 2, "memory": 1 << 30}
    for key, values in lang.KNOBS.items():
        if not isinstance(values[0], int):
            offers[key] = list(values)
    for size in lang.MTHP_SIZES:
        offers[f"mthp.{size}.enabled"] = list(lang.MTHP_ENABLED)
    return offers


# A kernel without zpools, 2M mTHP or zswap cgroup files, with one
# compressor and THP only by madvise.
LACKING = {
    "knobs": [k for k in everything()["knobs"] if k not in ("zswap.zpool",
                                                            "mthp.2048kB.enabled")],
    "mthp.sizes": [s for s in lang.MTHP_SIZES if s != "2048kB"],
    "zswap.compressor": ["lzo"],
    "thp.enabled": ["madvise", "never"],
    "mthp.64kB.enabled": ["inherit", "never"],
    "cgroup.files": ["memory.max", "memory.high", "memory.swap.max"],
}


def knobs_of(text):
    """[(key, value)] of every knob line (header or operation)."""
    return re.findall(r"^(?:@\w+ )?knob ([\w.-]+)=(\S+)", text, re.M)


class OffersTest(unittest.TestCase):
    def test_no_offers_is_the_default(self):
        for seed in SEEDS[:30]:
            self.assertEqual(generate(seed).text(), generate(seed, offers=None).text())
            self.assertEqual(generate(seed).text(), generate(seed, offers={}).text())

    def test_offers_of_everything_change_nothing(self):
        weights = load_weights()
        self.assertEqual(offered_weights(weights, everything()), weights)
        for seed in SEEDS[:30]:
            self.assertEqual(generate(seed).text(), generate(seed, offers=everything()).text(),
                             f"seed {seed}")

    def test_what_the_kernel_lacks_is_never_generated(self):
        seen = {}
        cgroup_keys = set()
        for seed in SEEDS:
            program = generate(seed, offers=LACKING)
            text = program.text()
            check(program)
            for key, value in knobs_of(text):
                seen.setdefault(key, set()).add(value)
            cgroup_keys |= set(re.findall(r"\b(memory\.[\w.]+)=", text))
        self.assertNotIn("zswap.zpool", seen)
        self.assertNotIn("mthp.2048kB.enabled", seen)
        self.assertEqual(seen.get("zswap.compressor"), {"lzo"})
        self.assertLessEqual(seen.get("thp.enabled", set()), {"madvise", "never"})
        self.assertTrue(seen.get("thp.enabled"), "thp.enabled is offered: it is drawn")
        self.assertLessEqual(seen.get("mthp.64kB.enabled", set()), {"inherit", "never"})
        self.assertFalse({"memory.zswap.max", "memory.zswap.writeback"} & cgroup_keys)
        self.assertIn("memory.max", cgroup_keys)

    def test_without_offers_the_lacking_things_do_appear(self):
        """The test above could not fail if the seeds never drew them."""
        seen = set()
        for seed in SEEDS:
            text = generate(seed).text()
            seen |= {k for k, _ in knobs_of(text)} | set(re.findall(r"\b(memory\.zswap\.\w+)=",
                                                                   text))
        self.assertLessEqual({"zswap.zpool", "mthp.2048kB.enabled", "memory.zswap.max",
                              "memory.zswap.writeback"}, seen)


if __name__ == "__main__":
    unittest.main()
