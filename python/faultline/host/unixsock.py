"""Connecting to a socket QEMU serves (QMP, a chardev), which exists only
once QEMU has got that far in its start."""

import socket
import time

RETRY_S = 0.05


class ConnectFailed(Exception):
    """No connection: the reason, one line; .gone: the reason is @gone's
    (else it is the last connect error)."""

    def __init__(self, why, gone):
        super().__init__(why)
        self.gone = gone


def connect(path, timeout, gone=lambda: None):
    """An AF_UNIX socket connected to @path, retried every RETRY_S until
    @timeout seconds have passed or @gone() gives a reason (QEMU exited).
    ConnectFailed otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket(socket.AF_UNIX)
        try:
            sock.connect(path)
            return sock
        except OSError as e:
            sock.close()
            why = gone()
            if why:
                raise ConnectFailed(why, True) from None
            if time.monotonic() > deadline:
                raise ConnectFailed(e.strerror or str(e), False) from None
            time.sleep(RETRY_S)
