"""The host end of the executor's channel (docs/programs.md, "The executor
and its channel"): ASCII lines over QEMU's virtio-serial chardev, a unix
socket the host connects to as a client.

Every wait has a deadline and polls @alive (the machine still runs, the
guest has not panicked or powered off), so a dead or silent guest ends
the wait with GuestGone or GuestSilent, never a hang.
"""

import re
import select
import time

from faultline.host import unixsock

MAX_LINE = 4096
POLL_S = 0.5
# Guest to host: kind -> the fewest words after the kind.
GUEST_KINDS = {"hello": 2, "offers": 1, "ready": 1, "refused": 1, "at": 1, "finding": 1,
               "relaxed": 1, "ops-done": 1, "stat": 0, "cover": 1, "result": 3}


class ChannelError(Exception):
    """The boot cannot go on: the guest is gone, silent or incoherent."""


class GuestGone(ChannelError):
    """The machine stopped, the guest panicked or powered off, or the
    channel closed."""


class GuestSilent(ChannelError):
    """Nothing the host waited for came in time."""


class BadLine(ChannelError):
    """The guest sent a line the protocol does not have."""


def check_line(line):
    """A host line, checked before it is sent: ASCII, one line, not too long."""
    if "\n" in line or len(line) + 1 > MAX_LINE or not line.isascii():
        raise ValueError(f"not a channel line: {line[:80]!r}")
    return line


def parse_message(line):
    """(kind, words after it) of a guest line; BadLine if it is none."""
    words = line.split()
    if not words or words[0] not in GUEST_KINDS:
        raise BadLine(f"the guest sent an unknown message: {line[:200]!r}")
    kind, rest = words[0], words[1:]
    if len(rest) < GUEST_KINDS[kind]:
        raise BadLine(f"the guest sent a short {kind!r} line: {line[:200]!r}")
    if kind == "at" and not rest[0].isdigit() or \
            kind == "cover" and not cover_words(rest) or \
            kind == "result" and (rest[1] not in ("pass", "fail") or not rest[2].isdigit()):
        raise BadLine(f"the guest sent a malformed {kind!r} line: {line[:200]!r}")
    return kind, rest


KEYVAL = re.compile(r'([^\s=]+)=(?:"([^"]*)"|(\S*))')


def cover_words(rest):
    """Whether `cover N HEX...` holds N edge hashes in hex."""
    if not rest[0].isdigit() or int(rest[0]) != len(rest) - 1:
        return False
    try:
        return all(int(h, 16) >= 0 for h in rest[1:])
    except ValueError:
        return False


def keyvals(words):
    """{KEY: VALUE} of KEY=VALUE words (others are skipped); a VALUE in
    double quotes (`detail="24: wait: ..."`) may hold spaces."""
    return {m[1]: m[2] if m[3] is None else m[3] for m in KEYVAL.finditer(" ".join(words))}


def take_line(buf):
    """(the first line of @buf as str, the rest): BadLine for a line over
    MAX_LINE bytes or not ASCII.  @buf holds a newline."""
    raw, _, rest = buf.partition(b"\n")
    if len(raw) + 1 > MAX_LINE:
        raise BadLine(f"the guest sent a line over {MAX_LINE} bytes: {raw[:80]!r}...")
    try:
        return raw.decode("ascii").rstrip("\r"), rest
    except UnicodeDecodeError:
        raise BadLine(f"the guest sent a line that is not ASCII: {raw[:80]!r}") from None


class Channel:
    """One connection to the guest's port; lines in, lines out."""

    def __init__(self, path, alive, connect_timeout=30.0):
        """Connect to QEMU's chardev socket @path within @connect_timeout
        seconds; @alive() -> None while the guest may still speak, else
        the reason it cannot (GuestGone)."""
        self.alive = alive
        self._buf = b""
        try:
            self.sock = unixsock.connect(path, connect_timeout, alive)
        except unixsock.ConnectFailed as e:
            raise GuestGone(str(e) if e.gone else f"channel {path}: {e}") from None
        self.sock.settimeout(10.0)

    def send(self, line):
        try:
            self.sock.sendall(check_line(line).encode() + b"\n")
        except OSError as e:
            raise GuestGone(f"channel write: {e.strerror or e}") from None

    def receive(self, timeout, waiting_for):
        """The next line (str, without its newline) within @timeout s;
        GuestSilent naming @waiting_for, GuestGone, BadLine."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            if len(self._buf) >= MAX_LINE:
                raise BadLine(f"the guest sent a line over {MAX_LINE} bytes: "
                              f"{self._buf[:80]!r}...")
            left = deadline - time.monotonic()
            if left <= 0:
                raise GuestSilent(f"no {waiting_for} from the guest in {timeout:.0f}s")
            ready, _, _ = select.select([self.sock], [], [], min(POLL_S, left))
            if not ready:
                why = self.alive()
                if why:
                    raise GuestGone(why)
                continue
            try:
                chunk = self.sock.recv(65536)
            except OSError as e:
                raise GuestGone(f"channel read: {e.strerror or e}") from None
            if not chunk:
                raise GuestGone(self.alive() or "the channel closed")
            self._buf += chunk
        line, self._buf = take_line(self._buf)
        return line

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
