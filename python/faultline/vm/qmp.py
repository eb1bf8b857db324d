"""Minimal QMP client over a unix socket."""

import itertools
import json
import socket
import time


class QmpError(Exception):
    """QMP not reachable, the connection broke, or the command failed."""


class Qmp:
    """One command at a time; events are skipped, or waited for
    (wait_event).  Each command carries an id, so a reply to a command sent
    without waiting (send) never passes for the reply to the next one."""

    def __init__(self, path, timeout=10.0, alive=None):
        """Connect within @timeout s, or until @alive() (QEMU still
        running) says False."""
        deadline = time.monotonic() + timeout
        self._ids = itertools.count(1)
        while True:
            self.sock = socket.socket(socket.AF_UNIX)
            try:
                self.sock.connect(path)
                break
            except OSError as e:
                self.sock.close()
                if time.monotonic() > deadline or (alive and not alive()):
                    raise QmpError(f"QMP {path}: {e.strerror or e}") from None
                time.sleep(0.05)
        self.timeout = timeout
        self.sock.settimeout(timeout)
        self.file = self.sock.makefile("rb")
        try:
            self._read()
            self.cmd("qmp_capabilities")
        except QmpError:
            self.close()
            raise

    def _read(self, want=lambda msg: "event" not in msg):
        while True:
            try:
                line = self.file.readline()
            except OSError as e:
                raise QmpError(f"QMP read: {e}") from None
            if not line:
                raise QmpError("QMP connection closed")
            try:
                msg = json.loads(line)
            except ValueError:
                raise QmpError(f"QMP sent bad JSON: {line[:80]!r}") from None
            if want(msg):
                return msg

    def send(self, name, **args):
        """Send a command without reading its reply; returns its id.  Safe
        from a signal handler while the main thread waits in wait_event."""
        cid = next(self._ids)
        try:
            self.sock.sendall(json.dumps({"execute": name, "arguments": args,
                                          "id": cid}).encode() + b"\n")
        except OSError as e:
            raise QmpError(f"QMP {name}: {e}") from None
        return cid

    def cmd(self, name, **args):
        cid = self.send(name, **args)
        reply = self._read(lambda msg: msg.get("id") == cid)
        if "error" in reply:
            raise QmpError(f"QMP {name}: {reply['error'].get('desc')}")
        return reply.get("return")

    def wait_event(self, names):
        """Block (no timeout) until one of the events @names; returns it."""
        self.sock.settimeout(None)
        try:
            return self._read(lambda msg: msg.get("event") in names)
        finally:
            self.sock.settimeout(self.timeout)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
