"""The edits shown, and what the user made of them: taken (by the client's command, or seen in the document however
the client trimmed its didChange), rejected, or passed over by an edit elsewhere.

  issue     an answer recorded: its id, the proposal behind it, what the document reads once it is applied
  edited    a didChange edit while an edit is shown: the shown edit applied (taken), or the user's own edit
  seen      the document as a request finds it: the shown edit applied is a take too (clients that run no command)
  accept / reject / shown   the client's reports (tabd.acceptInlineEdit, tabd.rejectInlineEdit, didShowInlineEdit)

What it tells the service: the transformation being walked in a document (the last taken edit's), and those the
user turned down there. The service (edit_service.py) keeps the memory and computes.
"""
from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass

from cachetools import LRUCache

from tabd.daemon.edits.propagation import PAUSE_S, Proposal
from tabd.daemon.edits.synthesis import Transformation

SHOWN_KEPT = 256  # ids the client may still accept or reject


@dataclass(frozen=True)
class EditSuggestion:
    id: str
    doc: str
    version: int
    start: int  # the range replaced, in the text of `version`
    end: int
    text: str
    source: str  # "propagation" or "model"
    origin: str  # "cache" when answered from memory, else "computed"
    confidence: float | None = None  # the model's score, None where no gate ran
    old: str = ""  # the text the range holds (to know the edit when a client applies it trimmed)


@dataclass
class EditStats:
    requests: int = 0
    suggested: int = 0
    from_memory: int = 0
    shown: int = 0
    accepted: int = 0
    rejected: int = 0
    implicit_rejects: int = 0
    gated: int = 0  # proposals the model's score held back
    model_runs: int = 0  # edit prompts the model answered (model_source.py)
    model_found: int = 0  # of those, answers with an edit to show
    speculated: int = 0
    stale: int = 0  # requests naming a version the server no longer has
    held: int = 0  # requests held until the user's pause
    superseded: int = 0  # held requests answered empty because the user went on editing
    accepted_unreported: int = 0  # of the accepted, those seen in the document only (clients that run no command)

    def as_dict(self) -> dict[str, int]:
        # pause_ms: how long after the user's last edit a request held for the pause is answered
        return {**self.__dict__, "pause_ms": int(PAUSE_S * 1000)}


def digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def applied(edit: EditSuggestion, text: str) -> tuple[str, int]:
    """The text once the edit is applied, and where the cursor lands: after its new text."""
    return text[:edit.start] + edit.text + text[edit.end:], edit.start + len(edit.text)


@dataclass(frozen=True)
class Verdict:
    """What a reject leaves the service to forget: the document, and the transformation (or the model's answer)."""
    doc: str
    signature: tuple[object, ...] | None  # the rejected transformation's; None for a model edit
    proposal: Proposal | None


class Ledger:
    """The edits shown and the user's verdicts on them, by id and by document. `stats`: the service's counters, of
    which the ledger keeps shown, accepted, rejected and the implicit rejects."""

    def __init__(self, stats: EditStats) -> None:
        self.stats = stats
        self.issued: LRUCache[str, EditSuggestion] = LRUCache(SHOWN_KEPT)
        self.made: LRUCache[str, Proposal] = LRUCache(SHOWN_KEPT)  # id -> the proposal (its transformation) behind it
        self.taken: LRUCache[str, bool] = LRUCache(SHOWN_KEPT)  # ids seen applied before their accept command came
        self.showing: dict[str, EditSuggestion] = {}  # doc -> the edit last answered there
        self.expected: dict[str, tuple[bytes, str]] = {}  # doc -> (the text once the shown edit is applied, its id)
        self.active: dict[str, Transformation] = {}  # doc -> the transformation being walked (its last edit taken)
        self.rejected: dict[str, set[tuple[object, ...]]] = {}  # doc -> transformations the user turned down
        self._ids = itertools.count(1)

    def issue(self, doc: str, version: int, text: str, proposal: Proposal, confidence: float | None,
              origin: str) -> EditSuggestion:
        edit = EditSuggestion(str(next(self._ids)), doc, version, proposal.start, proposal.end, proposal.text,
                              proposal.source, origin, confidence, text[proposal.start:proposal.end])
        self.issued[edit.id] = edit
        self.made[edit.id] = proposal
        self.showing[doc] = edit
        self.expected[doc] = (digest(applied(edit, text)[0]), edit.id)
        return edit

    def clear(self, doc: str) -> None:
        """Nothing is shown in the document now."""
        self.showing.pop(doc, None)
        self.expected.pop(doc, None)

    def edited(self, doc: str, start: int, removed: str, inserted: str) -> bool:
        """A didChange edit (in the text before it): True when it is the shown edit applied (taken)."""
        shown = self.showing.get(doc)
        if shown is None:
            self.active.pop(doc, None)  # the user's own edit: what they do next is learned from it
            return False
        if _same_edit(shown, start, removed, inserted):
            self._take(doc, shown)  # the edit shown, applied by the client (trimmed or not): done, however recent
            return True
        self.clear(doc)
        self.active.pop(doc, None)
        if start + len(removed) <= shown.start or start >= shown.end:
            self.stats.implicit_rejects += 1  # the user edits elsewhere while the edit is shown
        return False

    def seen(self, doc: str, text_digest: bytes) -> bool:
        """The document as a request finds it (its digest): True when it is the shown edit applied, which was then
        taken (a client that applies edits itself, however its didChange cut the change)."""
        expected = self.expected.get(doc)
        shown = self.showing.get(doc)
        if expected is None or expected[0] != text_digest or shown is None or shown.id != expected[1]:
            return False
        self._take(doc, shown)
        return True

    def _take(self, doc: str, edit: EditSuggestion) -> None:
        self.clear(doc)
        if self.issued.pop(edit.id, None) is not None:  # seen before any tabd.acceptInlineEdit (copilot-lsp runs none)
            self.stats.accepted += 1
            self.stats.accepted_unreported += 1
            self.taken[edit.id] = True
        self._walk(doc, edit.id)

    def _walk(self, doc: str, edit_id: str) -> None:
        made = self.made.get(edit_id)
        if made is not None and made.transformation is not None:
            self.active[doc] = made.transformation

    def accept(self, edit_id: str) -> bool:
        if self.taken.pop(edit_id, None):  # the document showed it taken first: counted then
            self.stats.accepted_unreported -= 1
            return True
        edit = self.issued.pop(edit_id, None)
        if edit is None:
            return False
        self.stats.accepted += 1
        self._walk(edit.doc, edit_id)
        return True

    def reject(self, edit_id: str) -> Verdict | None:
        """The user turned the edit down: its transformation is not proposed in that document again. None for an id
        the ledger does not hold."""
        edit = self.issued.pop(edit_id, None)
        if edit is None:
            return None
        self.stats.rejected += 1
        if self.showing.get(edit.doc) is edit:
            self.clear(edit.doc)
        self.active.pop(edit.doc, None)
        made = self.made.get(edit_id)
        signature = made.transformation.signature if made is not None and made.transformation is not None else None
        if signature is not None:
            self.rejected.setdefault(edit.doc, set()).add(signature)
        return Verdict(edit.doc, signature, made)

    def shown(self, edit_id: str) -> bool:
        if edit_id not in self.issued:
            return False
        self.stats.shown += 1
        return True

    def closed(self, doc: str) -> None:
        for kept in (self.showing, self.expected, self.active, self.rejected):
            kept.pop(doc, None)


def _same_edit(shown: EditSuggestion, start: int, removed: str, inserted: str) -> bool:
    """Whether a change (in the text the edit was shown in) leaves the text as the shown edit does: the edit itself,
    or the edit less the ends its old and new text share (Neovim's didChange sends the trimmed change)."""
    end = start + len(removed)
    if start < shown.start or end > shown.end:
        return False
    a, b = start - shown.start, end - shown.start
    return shown.old[a:b] == removed and shown.old[:a] + inserted + shown.old[b:] == shown.text
