"""Minimal QMP client over a unix socket."""

import json
import socket
import time


class QmpError(Exception):
    """QMP not reachable, the connection broke, or the command failed."""


class Qmp:
    """One command at a time; events are skipped."""

    def __init__(self, path, timeout=10.0):
        deadline = time.monotonic() + timeout
        while True:
            self.sock = socket.socket(socket.AF_UNIX)
            try:
                self.sock.connect(path)
                break
            except OSError as e:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise QmpError(f"QMP {path}: {e.strerror or e}") from None
                time.sleep(0.05)
        self.sock.settimeout(timeout)
        self.file = self.sock.makefile("rwb")
        try:
            self._read()
            self.cmd("qmp_capabilities")
        except QmpError:
            self.close()
            raise

    def _read(self):
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
            if "event" not in msg:
                return msg

    def cmd(self, name, **args):
        try:
            self.file.write(json.dumps({"execute": name, "arguments": args}).encode() + b"\n")
            self.file.flush()
        except OSError as e:
            raise QmpError(f"QMP {name}: {e}") from None
        reply = self._read()
        if "error" in reply:
            raise QmpError(f"QMP {name}: {reply['error'].get('desc')}")
        return reply.get("return")

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
