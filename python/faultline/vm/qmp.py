"""Minimal QMP client over a unix socket."""

import itertools
import json
import socket

from faultline.host import unixsock

# Events kept for wait_event on a long-lived connection: the newest.
MAX_KEPT_EVENTS = 256


class QmpError(Exception):
    """QMP not reachable, the connection broke, or the command failed."""


class Qmp:
    """One command at a time; the events that come meanwhile are kept for
    wait_event.  Each command carries an id, so a reply to a command sent
    without waiting (send) never passes for the reply to the next one."""

    def __init__(self, path, timeout=10.0, alive=None):
        """Connect within @timeout s, or until @alive() (QEMU still
        running) says False."""
        self._ids = itertools.count(1)
        try:
            self.sock = unixsock.connect(path, timeout,
                                         lambda: alive and not alive() and "QEMU exited")
        except unixsock.ConnectFailed as e:
            raise QmpError(f"QMP {path}: {e}") from None
        self.timeout = timeout
        self.events = []        # seen while reading replies, not yet waited for
        self.sock.settimeout(timeout)
        self._buf = b""
        try:
            self._read()
            self.cmd("qmp_capabilities")
        except QmpError:
            self.close()
            raise

    def _line(self):
        """One line from QEMU; socket.timeout when none came in time (our
        own buffer: a timed-out read loses nothing)."""
        while b"\n" not in self._buf:
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                raise
            except OSError as e:
                raise QmpError(f"QMP read: {e}") from None
            if not chunk:
                raise QmpError("QMP connection closed")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _read(self, want=lambda msg: "event" not in msg, timeouts=False):
        while True:
            try:
                line = self._line()
            except socket.timeout:
                if timeouts:
                    raise
                raise QmpError("QMP read: timed out") from None
            try:
                msg = json.loads(line)
            except ValueError:
                raise QmpError(f"QMP sent bad JSON: {line[:80]!r}") from None
            if want(msg):
                return msg
            if "event" in msg:
                self.events.append(msg)
                del self.events[:-MAX_KEPT_EVENTS]

    def send(self, name, /, **args):
        """Send a command without reading its reply; returns its id.  Safe
        from a signal handler while the main thread waits in wait_event."""
        cid = next(self._ids)
        try:
            self.sock.sendall(json.dumps({"execute": name, "arguments": args,
                                          "id": cid}).encode() + b"\n")
        except OSError as e:
            raise QmpError(f"QMP {name}: {e}") from None
        return cid

    def cmd(self, name, /, **args):
        cid = self.send(name, **args)
        reply = self._read(lambda msg: msg.get("id") == cid)
        if "error" in reply:
            raise QmpError(f"QMP {name}: {reply['error'].get('desc')}")
        return reply.get("return")

    def wait_event(self, names, timeout=None):
        """The first of the events @names since the last wait (kept while
        commands ran) or, else, the next one to come; None after @timeout
        seconds (None: wait for ever)."""
        for i, msg in enumerate(self.events):
            if msg.get("event") in names:
                del self.events[:i + 1]
                return msg
        self.events.clear()
        self.sock.settimeout(timeout)
        try:
            return self._read(lambda msg: msg.get("event") in names, timeouts=True)
        except socket.timeout:
            return None
        finally:
            self.sock.settimeout(self.timeout)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
