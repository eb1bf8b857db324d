"""RunOptions round-trips: through the command line it writes (argv ->
the real parser -> from_args) and through run.json (meta -> JSON ->
from_meta), so a repro runs with the options of the original run."""

import json
import os
import sys
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline import runner  # noqa: E402
from faultline.cli import parser  # noqa: E402
from faultline.options import RunOptions  # noqa: E402

CASES = [
    RunOptions(),
    RunOptions(deterministic=True, memory="1G", cpus=1, timeout="300s"),
    RunOptions(mutate="lie", backend="lava", cpus=2),
    RunOptions(backend="libvirt", memory="768M", mutate="corrupt"),
]


class OptionsTest(unittest.TestCase):
    def test_argv_round_trip(self):
        for opts in CASES:
            args = parser().parse_args(["run", "smoke", "--seed", "1"] + opts.argv())
            self.assertEqual(RunOptions.from_args(args), opts, opts.argv())

    def test_run_command_is_argv(self):
        opts = CASES[1]
        self.assertEqual(runner.run_command("/s.toml", 3, opts),
                         f"{runner.FAULTLINE} run /s.toml --seed 3 --deterministic "
                         "--memory 1G --cpus 1 --timeout 300s")

    def test_meta_round_trip(self):
        for opts in CASES + [RunOptions(kernel="/k/bzImage", modules="/k/mod", accel="kvm",
                                        backend_options={"connect": "qemu:///system"})]:
            meta = json.loads(json.dumps(opts.meta(rules_copy="/run/rules-option.rules")))
            back = RunOptions.from_meta(meta, opts.deterministic, opts.quiet)
            self.assertEqual(back, RunOptions(**dict(vars(opts),
                                                     rules="/run/rules-option.rules")))


if __name__ == "__main__":
    unittest.main()
