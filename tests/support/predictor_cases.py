"""An editing session over a small module, and the check that two backends decode the same tokens through it."""
from __future__ import annotations

from tabd.predictor.types import GenSettings, Query

CODE = '''import json
import os


class Store:
    """A tiny JSON-backed key-value store."""

    def __init__(self, path):
        self.path = path
        self.data = {}
        if os.path.exists(path):
            with open(path) as handle:
                self.data = json.load(handle)

    def get(self, key, default=None):
        return self.data.get(key, default)

    def set(self, key, value):
        self.data[key] = value
        self.save()

    def save(self):
        with open(self.path, "w") as handle:
            json.dump(self.data, handle, indent=2)
'''


def edits():
    """(prefix, suffix) states of an editing session: appends, middle replacements, deletions, accepts."""
    cut = CODE.index("    def set")
    prefix, suffix = CODE[:cut] + "    def ", CODE[cut:]
    yield prefix, suffix
    for ch in "pop(self, ke":  # appends
        prefix += ch
        yield prefix, suffix
    yield prefix.replace("self.data = {}", "self.data = dict()"), suffix  # a replacement in the middle
    yield prefix.replace("import os\n", ""), suffix  # a deletion near the top
    prefix = prefix[:-3]  # backspaces
    yield prefix, suffix
    yield prefix, suffix.replace("indent=2", "indent=4")  # an edit after the cursor


def same_tokens_over_edits(a, b, settings: GenSettings, count: int | None = None, slot_id: str = "d") -> list[tuple]:
    """Backends a and b through the edit session (its first `count` states, one slot each), asserting at each
    state that they decode the same tokens; the (a's, b's) predictions, for what a test checks beyond that."""
    pairs = []
    for i, (prefix, suffix) in enumerate(list(edits())[:count]):
        pairs.append((a.predict(Query(prefix, suffix, settings, slot_id=slot_id)),
                      b.predict(Query(prefix, suffix, settings, slot_id=slot_id))))
        assert a.last_tokens == b.last_tokens, f"state {i}: the two engines decoded different tokens"
    return pairs

