"""Which shown suggestions were taken, and how: from `tabd.accept` and from the edits themselves, each counted once.

Clients that never run an item's command (Neovim 0.12's native inline
completion, Helix, Zed, Emacs) still insert the suggestion with a didChange: an
insertion at the suggestion's position of exactly its text, or of its leading
part, is an accept (whole or partial). A client that runs `tabd.accept` as well
sends both, in either order; the second one to arrive finds the first's mark
and is not counted again. Every suggestion shown ends as one outcome for the
acceptance model: "all", "word", "line" or "none" (dismissed, typed over, or
replaced by another suggestion).
"""
from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Callable

from tabd.daemon.speculation.planner import next_line, next_word
from tabd.cache.state import DocState


@dataclass
class ShownSuggestion:
    answer_id: str
    doc: str
    state: DocState  # where it was shown
    text: str  # all of it, as shown there
    after_accept: bool = False  # shown right after an accept (its outcome feeds the streak rate)
    taken: int = 0  # characters accepted so far (partial accepts move it on)
    outcome: str = ""  # set once it has counted for the acceptance model
    marks: deque[tuple[str, int, int]] = field(default_factory=lambda: deque(maxlen=8))  # (via, offset, chars) counted, for the other path

    @property
    def rest(self) -> str:
        return self.text[self.taken:]

    @property
    def offset(self) -> int:
        return self.state.offset + self.taken


@dataclass(frozen=True)
class Accept:
    """One accept, counted: what it inserted and the state it reached."""

    answer_id: str
    doc: str
    chars: int
    partial: bool
    kind: str  # "all", "word" or "line"
    via: str  # "command" or "edit"
    reached: DocState
    alternative: bool = False  # another of an invoked request's items was taken, not the one the plans followed


def kind_of(part: str, rest: str) -> str:
    if part == rest:
        return "all"
    return "line" if part == next_line(rest) and part != next_word(rest) else "word"


class AcceptTracker:
    def __init__(self, on_outcome: Callable[[str, str, bool], None], max_shown: int = 256) -> None:
        self.on_outcome = on_outcome  # (doc, outcome, after_accept) -> None
        self.by_id: OrderedDict[str, ShownSuggestion] = OrderedDict()
        self.latest: dict[str, ShownSuggestion] = {}  # doc -> the suggestion on screen
        self.since_accept: set[str] = set()  # docs whose last suggestion was accepted: the next one shown continues a streak
        self.max_shown = max_shown

    def shown(self, answer_id: str, doc: str, state: DocState, text: str, continues: bool) -> None:
        """A suggestion shown at a user's request; `continues`: the rest of the one before (typed through)."""
        before = self.latest.get(doc)
        after_accept = doc in self.since_accept  # the first one seen since an accept (typing in between or not)
        self.since_accept.discard(doc)
        if before is not None and not continues:
            self._end(before, "none")
        s = ShownSuggestion(answer_id, doc, state, text, after_accept)
        if continues and before is not None and before.outcome:
            s.outcome = before.outcome  # typing through an accepted suggestion's rest is not a new outcome
        self.latest[doc] = s
        self.by_id[answer_id] = s
        while len(self.by_id) > self.max_shown:
            self.by_id.popitem(last=False)

    def _end(self, s: ShownSuggestion, outcome: str) -> None:
        if not s.outcome:
            s.outcome = outcome
            self.on_outcome(s.doc, outcome, s.after_accept)

    def _take(self, s: ShownSuggestion, chars: int, via: str) -> Accept:
        part = s.rest[:chars]
        kind = kind_of(part, s.rest)
        s.marks.append((via, s.offset, chars))
        s.taken += chars
        self._end(s, kind)  # the first accept of a suggestion is its outcome
        self.since_accept.add(s.doc)
        return Accept(s.answer_id, s.doc, chars, s.taken < len(s.text), kind, via, s.state.insert(s.text[: s.taken]))

    @staticmethod
    def _consume(s: ShownSuggestion, via: str, chars: int | None, offset: int | None = None) -> bool:
        """Whether the other path already counted this accept (its mark is then used up)."""
        for i, (v, o, c) in enumerate(s.marks):
            if v == via and (chars is None or c == chars) and (offset is None or o == offset):
                del s.marks[i]
                return True
        return False

    def command(self, answer_id: str, chars: int | None, partial: bool,
                alternative: str | None = None) -> tuple[ShownSuggestion | None, Accept | None]:
        """`tabd.accept`: (the suggestion, the accept), or (it, None) when its edit was counted already;
        `alternative`: the text of the other item of an invoked request that was taken instead."""
        s = self.by_id.get(answer_id)
        if s is None:
            return None, None
        if alternative is not None and alternative != s.text:
            if s.outcome:
                return s, None  # one accept per suggestion shown, whichever item
            self._end(s, "all")
            self.since_accept.add(s.doc)
            return s, Accept(s.answer_id, s.doc, len(alternative), False, "all", "command", s.state.insert(alternative),
                             alternative=True)
        given = chars if isinstance(chars, int) and chars >= 0 else None
        if self._consume(s, "edit", given):
            return s, None
        return s, self._take(s, min(given, len(s.rest)) if given is not None else len(s.rest), "command")

    def edit(self, doc: str, offset: int, removed: int, inserted: str) -> Accept | None:
        """A didChange insertion: an accept when it is the shown suggestion's text (or its start) at its place."""
        s = self.latest.get(doc)
        if s is None or removed or not inserted:
            return None
        if self._consume(s, "command", len(inserted), offset):
            return None  # the command came first and counted it
        rest = s.rest
        if s.offset != offset or not rest.startswith(inserted) or (len(inserted) < 2 and inserted != rest):
            return None  # elsewhere, other text, or one keystroke typing into the suggestion: not an accept
        return self._take(s, len(inserted), "edit")

    def dismiss(self, answer_id: str) -> ShownSuggestion | None:
        s = self.by_id.get(answer_id)
        if s is not None:
            self._end(s, "none")
        return s

    def closed(self, doc: str) -> None:
        s = self.latest.pop(doc, None)
        if s is not None:
            self._end(s, "none")
