"""A document's recent edits, grouped as a person makes them: keystrokes in one place, about a second apart.

Each didChange edit either extends the current group (it touches the group's region and comes within GAP_S of the
last one) or closes it and starts another. A group is what the user changed there: the text the region held
before the group began (`old`) and where that region now lies (`start`..`end` in the current text). Selecting
`count` and typing `total` is one group: old `count`, region holding `total`. Zed groups its edit history the same
way before it reads it as the user's intent. Offsets are str offsets into the document's text.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

GAP_S = 1.0  # a pause longer than this starts a new group
KEPT = 8  # closed groups kept per document (bounded: a long session keeps its last few)


@dataclass(frozen=True)
class Group:
    start: int  # the region in the current text
    end: int
    old: str  # what the region held before the group's first edit
    first_t: float
    last_t: float
    done: bool = False  # an accepted suggestion made it: complete, however recent

    def shifted(self, by: int) -> "Group":
        return replace(self, start=self.start + by, end=self.end + by)


class DocHistory:
    """The groups of one document, newest last."""

    def __init__(self) -> None:
        self.groups: deque[Group] = deque(maxlen=KEPT)

    @property
    def last(self) -> Group | None:
        return self.groups[-1] if self.groups else None

    def mark_done(self) -> None:
        """The last group is a suggestion the user accepted, not a name they are still typing."""
        if self.groups:
            self.groups[-1] = replace(self.groups[-1], done=True)

    def edited(self, start: int, removed: str, inserted: str, now: float) -> None:
        """One edit: `removed` (the text at start..start+len(removed) before it) replaced by `inserted`."""
        end = start + len(removed)
        delta = len(inserted) - len(removed)
        g = self.last
        if g is not None and now - g.last_t <= GAP_S and start <= g.end and end >= g.start:
            old = removed[: max(0, g.start - start)] + g.old + (removed[len(removed) - (end - g.end):] if end > g.end else "")
            self.groups[-1] = Group(min(start, g.start), max(end, g.end) + delta, old, g.first_t, now)
            return
        # earlier groups shift with what was inserted before them; one the edit overlaps is no longer what it was
        kept = [x.shifted(delta) if x.start >= end else x for x in self.groups if x.end <= start or x.start >= end]
        self.groups.clear()
        self.groups.extend(kept)
        self.groups.append(Group(start, start + len(inserted), removed, now, now))
