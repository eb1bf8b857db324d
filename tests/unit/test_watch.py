"""The watch loop's readers: LogTail reads only what was appended, never
splits a UTF-8 character or a line, and LAVA's KTAP read line by line from
lava.log is the stream convert() reads from the whole log."""

import json
import os
import sys
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.run import lava_watch, watch
from faultline.vm.logtail import LogTail


class LogTailTest(unittest.TestCase):
    def setUp(self):
        fd, self.path = tempfile.mkstemp()
        os.close(fd)
        self.addCleanup(os.unlink, self.path)

    def append(self, data):
        with open(self.path, "ab") as f:
            f.write(data)

    def test_only_new_whole_lines(self):
        t = LogTail(self.path)
        self.append(b"ok 1 a\nFAULTLINE-EX")
        self.assertEqual(t.poll(), "ok 1 a\n")
        self.assertEqual(t.partial, "FAULTLINE-EX")
        self.assertEqual(t.lines(), ["ok 1 a", "FAULTLINE-EX"])
        self.append("IT 0\n".encode())
        self.assertEqual(t.poll(), "FAULTLINE-EXIT 0\n")
        self.assertEqual((t.text, t.partial), ("ok 1 a\nFAULTLINE-EXIT 0\n", ""))
        self.assertEqual(watch.guest_exit(t.text.splitlines()), 0)
        self.assertEqual(t.poll(), "")

    def test_utf8_split_across_polls(self):
        t = LogTail(self.path)
        data = "# héllo\n".encode()
        self.append(data[:3])
        t.poll()
        self.append(data[3:])
        self.assertEqual(t.poll(), "# héllo\n")

    def test_missing_file_is_empty(self):
        self.assertEqual(LogTail(self.path + ".none").poll(), "")


class LavaKtapTest(unittest.TestCase):
    def test_incremental_is_whole(self):
        fd, path = tempfile.mkstemp()
        os.close(fd)
        self.addCleanup(os.unlink, path)
        msgs = ["boot noise", "# kernel 6.12", "ok 1 a\r", "FAULTLINE-EXIT 0"]
        lines = [json.dumps({"dt": "x", "lvl": "target", "msg": m}) + "\n" for m in msgs]
        reader = lava_watch.LavaKtap(path)
        got = ""
        for ln in lines:
            with open(path, "a") as f:
                f.write(ln[:10])
            got += reader.poll()
            with open(path, "a") as f:
                f.write(ln[10:])
            got += reader.poll()
        whole = lava_watch.ktap_from_target(lava_watch.parse_lava_log("".join(lines))[0])
        self.assertEqual(got, whole)
        self.assertEqual(whole, "# kernel 6.12\nok 1 a\nFAULTLINE-EXIT 0\n")


if __name__ == "__main__":
    unittest.main()
