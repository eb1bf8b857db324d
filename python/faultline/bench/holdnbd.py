"""A minimal NBD server whose writes take a set time: the bench's stock
reference for "a device that takes DUR" (docs/bench.md, idle rows).

QEMU's null-co latency-ns cannot serve: its timer lives in the main
AioContext, whose wake-ups the main loop rounds up to whole milliseconds.
Here the hold is the server's, outside QEMU, and QEMU sees the reply as a
readable socket, which its main loop polls to the nanosecond.

    python3 -m faultline.bench.holdnbd SOCKET SIZE_BYTES IMAGE [START-END=HOLD_NS ...]

A write whose offset lies in [START, END) (bytes) is answered HOLD_NS after
its request arrived: sleep to 200 us before, then spin.  Fixed newstyle
handshake, NBD_OPT_GO or EXPORT_NAME, simple replies; read, write, flush,
disconnect.  One client; a request out of step or over 32 MiB ends it.
"""

import os
import socket
import struct
import sys
import time

NBDMAGIC = b"NBDMAGIC"
IHAVEOPT = 0x49484156454F5054
OPT_REPLY_MAGIC = 0x3E889045565A9
REQUEST_MAGIC = 0x25609513
SIMPLE_REPLY_MAGIC = 0x67446698
OPT_EXPORT_NAME, OPT_ABORT, OPT_GO = 1, 2, 7
REP_ACK, REP_INFO, REP_ERR_UNSUP = 1, 3, (1 << 31) + 1
INFO_EXPORT = 0
FLAG_HAS_FLAGS, FLAG_SEND_FLUSH = 1, 4
CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH = 0, 1, 2, 3
EINVAL = 22
SPIN_NS = 200_000
MAX_REQUEST = 32 << 20          # QEMU's NBD client sends at most 32 MiB


def recv_exact(conn, n):
    buf = bytearray()
    while len(buf) < n:
        part = conn.recv(n - len(buf))
        if not part:
            raise EOFError
        buf += part
    return bytes(buf)


def hold_until(deadline_ns):
    left = deadline_ns - time.monotonic_ns()
    if left > SPIN_NS:
        time.sleep((left - SPIN_NS) / 1e9)
    while time.monotonic_ns() < deadline_ns:
        pass


def opt_reply(conn, opt, kind, data=b""):
    conn.sendall(struct.pack(">QIII", OPT_REPLY_MAGIC, opt, kind, len(data)) + data)


def handshake(conn, size):
    """Fixed newstyle negotiation up to transmission."""
    flags = FLAG_HAS_FLAGS | FLAG_SEND_FLUSH
    conn.sendall(NBDMAGIC + struct.pack(">QH", IHAVEOPT, 1 | 2))   # fixed newstyle, no zeroes
    (client_flags,) = struct.unpack(">I", recv_exact(conn, 4))
    while True:
        magic, opt, length = struct.unpack(">QII", recv_exact(conn, 16))
        recv_exact(conn, length)            # the export name and info requests: any
        if magic != IHAVEOPT:
            raise EOFError
        if opt == OPT_EXPORT_NAME:
            conn.sendall(struct.pack(">QH", size, flags) +
                         (b"" if client_flags & 2 else bytes(124)))
            return
        if opt == OPT_GO:
            opt_reply(conn, opt, REP_INFO, struct.pack(">HQH", INFO_EXPORT, size, flags))
            opt_reply(conn, opt, REP_ACK)
            return
        if opt == OPT_ABORT:
            opt_reply(conn, opt, REP_ACK)
            raise EOFError
        opt_reply(conn, opt, REP_ERR_UNSUP)


def serve(conn, size, fd, holds):
    handshake(conn, size)
    while True:
        head = recv_exact(conn, 28)
        t_ns = time.monotonic_ns()
        magic, _flags, cmd, handle, off, length = struct.unpack(">IHHQQI", head)
        if magic != REQUEST_MAGIC or length > MAX_REQUEST:
            return                              # out of step or absurd: hang up
        err, data = 0, b""
        bad = off + length > size
        if cmd == CMD_WRITE:
            payload = recv_exact(conn, length)
            if bad:
                err = EINVAL
            else:
                os.pwrite(fd, payload, off)
                for start, end, hold in holds:
                    if start <= off < end:
                        hold_until(t_ns + hold)
                        break
        elif cmd == CMD_READ:
            if bad:
                err = EINVAL
            else:
                data = os.pread(fd, length, off).ljust(length, b"\0")
        elif cmd == CMD_FLUSH:
            pass
        elif cmd == CMD_DISC:
            return
        else:
            err = EINVAL
        conn.sendall(struct.pack(">IIQ", SIMPLE_REPLY_MAGIC, err, handle) +
                     (data if not err else b""))


def parse_hold(word):
    span, hold = word.split("=")
    start, end = span.split("-")
    return int(start), int(end), int(hold)


def main(argv):
    path, size, image = argv[0], int(argv[1]), argv[2]
    holds = [parse_hold(w) for w in argv[3:]]
    fd = os.open(image, os.O_RDWR | os.O_CREAT, 0o600)
    os.ftruncate(fd, size)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    print("ready", flush=True)
    conn, _ = srv.accept()
    try:
        serve(conn, size, fd, holds)
    except (EOFError, ConnectionError):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
