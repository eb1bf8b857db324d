"""The fuzzer's corpus: the programs that brought a new feature, each in
OUT/corpus/ID.prog, and OUT/corpus/index.json listing them with the
features each brought first (their union is every feature seen, so a
resumed campaign knows what is new without rerunning anything).

A program is drawn for mutation in proportion to how many features it
brought: a program that opened much new ground is mutated more.
"""

import json
import os
import threading
from dataclasses import dataclass

from faultline.errors import SetupError
from faultline.prog.check import check
from faultline.prog.lang import ProgramError, read

INDEX = "index.json"


@dataclass
class Entry:
    id: str
    program: object             # prog.lang.Program
    new: list                   # the features it brought first
    origin: str = ""            # "gen SEED" or "mutant of ID"
    found_s: float = 0.0        # campaign time it was kept

    def as_json(self):
        return {"id": self.id, "file": f"{self.id}.prog", "new": self.new,
                "origin": self.origin, "found_s": round(self.found_s, 1)}


class Corpus:
    """Thread-safe: the jobs of a campaign share one."""

    def __init__(self, directory):
        self.dir = directory
        self.entries = []
        self.seen = set()
        self.lock = threading.Lock()

    def load(self):
        """Read the index and every program it lists; SetupError (one line)
        for a corpus that is not whole."""
        path = os.path.join(self.dir, INDEX)
        if not os.path.exists(path):
            return self
        try:
            with open(path) as f:
                index = json.load(f)
            items = index["programs"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SetupError(f"{path}: not a corpus index ({e})") from None
        for item in items:
            try:
                program = read(os.path.join(self.dir, item["file"]))
                check(program, engine_rules=False)
                entry = Entry(item["id"], program, list(item["new"]), item.get("origin", ""),
                              float(item.get("found_s", 0)))
            except (KeyError, TypeError, ValueError) as e:
                raise SetupError(f"{path}: a bad entry ({e})") from None
            except ProgramError as e:
                raise SetupError(f"corpus: {e}") from None
            self.entries.append(entry)
            self.seen.update(entry.new)
        return self

    def __len__(self):
        with self.lock:
            return len(self.entries)

    def consider(self, program, feats, origin, found_s):
        """Keep @program if @feats has a feature not seen yet: the new
        features (sorted), or [] when nothing is new."""
        with self.lock:
            new = sorted(set(feats) - self.seen)
            if not new:
                return []
            self.seen.update(new)
            entry = Entry(f"{len(self.entries) + 1:06d}", program, new, origin, found_s)
            self.entries.append(entry)
            os.makedirs(self.dir, exist_ok=True)
            with open(os.path.join(self.dir, f"{entry.id}.prog"), "w") as f:
                f.write(program.text())
            self._write_index()
            return new

    def _write_index(self):
        path = os.path.join(self.dir, INDEX)
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            json.dump({"programs": [e.as_json() for e in self.entries]}, f, indent=1)
        os.replace(tmp, path)

    def choose(self, rng):
        """An entry drawn by @rng in proportion to the features it brought;
        None while the corpus is empty."""
        with self.lock:
            if not self.entries:
                return None
            return rng.choices(self.entries, weights=[len(e.new) for e in self.entries])[0]

    def features(self):
        with self.lock:
            return set(self.seen)
