"""LogTail: a growing text file read from where the last poll stopped (the
watch loop's reader of the guest's serial logs)."""


class LogTail:
    """A growing text file read from where the last poll stopped: .text
    holds its whole lines so far, .partial an unterminated last line."""

    def __init__(self, path):
        self.path = path
        self.pos = 0
        self.text = ""
        self.partial = ""
        self._pending = b""

    def poll(self):
        """Read what was appended; returns the new whole lines."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except OSError:
            return ""
        self.pos += len(data)
        data = self._pending + data
        cut = data.rfind(b"\n") + 1
        # Decoded only once complete: a UTF-8 sequence never splits.
        new = data[:cut].decode(errors="replace")
        self._pending = data[cut:]
        self.partial = self._pending.decode(errors="replace")
        self.text += new
        return new

    def lines(self):
        """Every line so far, the unterminated last one included."""
        return (self.text + self.partial).splitlines()
