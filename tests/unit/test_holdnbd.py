"""holdnbd, the bench's reference device, against a client that speaks
the NBD protocol as QEMU's does: fixed newstyle, an unsupported option
first, NBD_OPT_GO; writes held by offset range, read back."""

import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from faultline.bench import holdnbd

SIZE = 1 << 20
HOLD_NS = 30_000_000


class HoldNbdTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.sock = os.path.join(self.dir, "sock")
        self.server = subprocess.Popen(
            [sys.executable, "-m", "faultline.bench.holdnbd", self.sock, str(SIZE),
             os.path.join(self.dir, "image"), f"65536-131072={HOLD_NS}"],
            cwd=os.path.join(TOP, "python"), stdout=subprocess.PIPE, text=True)
        self.assertEqual(self.server.stdout.readline().strip(), "ready")
        self.c = socket.socket(socket.AF_UNIX)
        self.c.connect(self.sock)

    def tearDown(self):
        self.c.close()
        self.server.kill()
        self.server.wait()
        self.server.stdout.close()

    def recv(self, n):
        return holdnbd.recv_exact(self.c, n)

    def option(self, opt, data=b""):
        self.c.sendall(struct.pack(">QII", holdnbd.IHAVEOPT, opt, len(data)) + data)

    def reply(self):
        magic, opt, kind, length = struct.unpack(">QIII", self.recv(20))
        self.assertEqual(magic, holdnbd.OPT_REPLY_MAGIC)
        return opt, kind, self.recv(length)

    def request(self, cmd, handle, off, length, data=b""):
        self.c.sendall(struct.pack(">IHHQQI", holdnbd.REQUEST_MAGIC, 0, cmd, handle, off,
                                   length) + data)
        magic, err, h = struct.unpack(">IIQ", self.recv(16))
        self.assertEqual((magic, h), (holdnbd.SIMPLE_REPLY_MAGIC, handle))
        return err

    def test_handshake_hold_and_read_back(self):
        self.assertEqual(self.recv(8), b"NBDMAGIC")
        magic, flags = struct.unpack(">QH", self.recv(10))
        self.assertEqual((magic, flags & 1), (holdnbd.IHAVEOPT, 1))
        self.c.sendall(struct.pack(">I", 3))
        self.option(8)                                   # structured replies: refused
        self.assertEqual(self.reply()[1], holdnbd.REP_ERR_UNSUP)
        self.option(holdnbd.OPT_GO, struct.pack(">I", 0) + struct.pack(">H", 0))
        opt, kind, data = self.reply()
        self.assertEqual((opt, kind), (holdnbd.OPT_GO, holdnbd.REP_INFO))
        self.assertEqual(struct.unpack(">HQH", data)[:2], (holdnbd.INFO_EXPORT, SIZE))
        self.assertEqual(self.reply()[1], holdnbd.REP_ACK)

        block = os.urandom(4096)
        t = time.monotonic_ns()
        self.assertEqual(self.request(holdnbd.CMD_WRITE, 1, 0, 4096, block), 0)
        self.assertLess(time.monotonic_ns() - t, HOLD_NS)          # not in a held range
        t = time.monotonic_ns()
        self.assertEqual(self.request(holdnbd.CMD_WRITE, 2, 65536, 4096, block), 0)
        self.assertGreaterEqual(time.monotonic_ns() - t, HOLD_NS)
        self.assertEqual(self.request(holdnbd.CMD_READ, 3, 65536, 4096), 0)
        self.assertEqual(self.recv(4096), block)
        self.assertEqual(self.request(holdnbd.CMD_READ, 4, SIZE - 512, 4096),
                         holdnbd.EINVAL)                          # past the end
        self.assertEqual(self.request(holdnbd.CMD_FLUSH, 5, 0, 0), 0)
        # A request of 1 GiB is not read into memory: the server hangs up.
        self.c.sendall(struct.pack(">IHHQQI", holdnbd.REQUEST_MAGIC, 0, holdnbd.CMD_WRITE, 6,
                                   0, 1 << 30))
        self.assertEqual(self.c.recv(16), b"")


if __name__ == "__main__":
    unittest.main()
