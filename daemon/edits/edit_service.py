"""The next-edit service: the edit to show at a cursor, from memory when it was speculated, and what the user did.

  suggest   the edit at (text, cursor): memory first (keyed by document state), else propagation (propagation.py),
            scored by the model when a gate is set, else, once the user pauses, the edits the model writes
            (model_source.py); then the state after accepting it is computed ahead, so the Tab after this one is
            answered from memory (the chain of a rename across call sites, or the model's other edits)
  edited    each didChange edit: the history (history.py), the accept it may be, an implicit reject when the user
            edits elsewhere while an edit is shown
  accept / reject / shown   the client's reports (tabd.acceptInlineEdit, tabd.rejectInlineEdit, didShowInlineEdit)

Plain strings and offsets in, EditSuggestion out: the LSP layer converts positions.
"""
from __future__ import annotations

import hashlib
import itertools
import time
from dataclasses import dataclass, replace
from typing import Awaitable, Callable, Iterable

from cachetools import LRUCache

from tabd.daemon.edits import model_source
from tabd.daemon.edits.history import DocHistory, Group
from tabd.daemon.edits.model_source import Writer
from tabd.daemon.edits.propagation import Proposal, next_site, propose, still_typing

# (doc, prefix, suffix, new) -> the model's probability of writing `new` there (0..1)
Scorer = Callable[[str, str, str, str, bool], Awaitable[float]]
CACHED = 512  # speculated and answered states kept
SHOWN_KEPT = 256  # ids the client may still accept or reject
MEASURED = 4  # edits shown before their acceptance decides how far ahead to compute


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

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def state_key(doc: str, text: str, cursor: int) -> tuple[str, bytes, int]:
    return doc, hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest(), cursor


class EditService:
    def __init__(self, scorer: Scorer | None = None, min_confidence: float = 0.0,
                 clock: Callable[[], float] = time.monotonic, writer: Writer | None = None,
                 model_min_confidence: float = 0.5, propagate: bool = True) -> None:
        self.scorer = scorer
        self.min_confidence = min_confidence
        self.writer = writer  # the model edit source; None: propagation alone
        self.model_min_confidence = model_min_confidence
        self.propagate = propagate  # False: the model alone proposes (a baseline `tabd bench edits` measures)
        self.clock = clock
        self.histories: dict[str, DocHistory] = {}
        # state -> what to show there (None: nothing), with the substitution that made it
        self.memory: LRUCache[tuple[str, bytes, int], tuple[Proposal, float | None] | None] = LRUCache(CACHED)
        self.issued: LRUCache[str, EditSuggestion] = LRUCache(SHOWN_KEPT)
        self.made: LRUCache[str, Proposal] = LRUCache(SHOWN_KEPT)  # id -> the proposal (its substitution) behind it
        self.showing: dict[str, EditSuggestion] = {}  # doc -> the edit last answered there
        self.stats = EditStats()
        self.last: dict[str, str] = {}  # for tabd/stats: the last answer's origin
        self.names: dict[str, str] = {}  # doc -> its file's name (the edit prompt's header)
        self._ids = itertools.count(1)

    # -- what the user did -------------------------------------------------------------

    def edited(self, doc: str, start: int, removed: str, inserted: str) -> None:
        """One didChange edit, in the text before it."""
        history = self.histories.setdefault(doc, DocHistory())
        history.edited(start, removed, inserted, self.clock())
        shown = self.showing.get(doc)
        if shown is None:
            return
        if start == shown.start and start + len(removed) == shown.end and inserted == shown.text:
            history.mark_done()  # the edit shown, applied by the client: a done rename, whatever the clock says
            return
        self.showing.pop(doc, None)
        if start + len(removed) <= shown.start or start >= shown.end:
            self.stats.implicit_rejects += 1  # the user edits elsewhere while the edit is shown

    def closed(self, doc: str) -> None:
        self.histories.pop(doc, None)
        self.showing.pop(doc, None)
        self.names.pop(doc, None)
        for key in [k for k in self.memory if k[0] == doc]:
            del self.memory[key]

    def accept(self, edit_id: str) -> bool:
        edit = self.issued.pop(edit_id, None)
        if edit is None:
            return False
        self.stats.accepted += 1
        return True

    def reject(self, edit_id: str) -> bool:
        edit = self.issued.pop(edit_id, None)
        if edit is None:
            return False
        self.stats.rejected += 1
        if self.showing.get(edit.doc) is edit:
            self.showing.pop(edit.doc, None)
        return True

    def shown(self, edit_id: str) -> bool:
        if edit_id not in self.issued:
            return False
        self.stats.shown += 1
        return True

    # -- what to show ------------------------------------------------------------------

    def stale(self) -> None:
        self.stats.stale += 1

    def recall(self, doc: str, version: int, text: str, cursor: int) -> tuple[EditSuggestion | None] | None:
        """(the edit, or None for "no edit") when memory holds the answer at this state; None when it must be
        computed (suggest)."""
        key = state_key(doc, text, cursor)
        if key not in self.memory:
            return None
        self.stats.requests += 1
        self.stats.from_memory += 1
        return (self._issue(doc, version, self.memory[key], "cache"),)

    def as_ghost_text(self, doc: str, version: int, text: str, cursor: int) -> EditSuggestion | None:
        """The edit remembered at this state, as an inline completion can show it: when it lies on the cursor's line
        from the cursor on and the text after the cursor survives, in order, in the line it leaves (VS Code draws
        that as ghost text), the same edit as the range cursor..end of line and the line's new rest; else None."""
        found = self.memory.get(state_key(doc, text, cursor))
        if not found:
            return None
        p = found[0]
        eol = text.find("\n", cursor)
        eol = len(text) if eol < 0 else eol
        if p.start < cursor or p.end > eol:
            return None
        rest, new_rest = text[cursor:eol], text[cursor:p.start] + p.text + text[p.end:eol]
        if "\n" in new_rest or new_rest == rest or not _subsequence(rest, new_rest):
            return None
        self.stats.requests += 1
        self.stats.from_memory += 1
        return self._issue(doc, version, (replace(p, start=cursor, end=eol, text=new_rest), found[1]), "cache")

    async def suggest(self, doc: str, version: int, text: str, cursor: int, name: str = "") -> EditSuggestion | None:
        """The edit to show at `cursor` in `text` (the document at `version`), or None; `name`: the file's name, which
        the model's edit prompt shows."""
        if name:
            self.names[doc] = name
        recalled = self.recall(doc, version, text, cursor)
        if recalled is not None:
            return recalled[0]
        self.stats.requests += 1
        found = await self._compute(doc, text, cursor, background=False)
        if found is not None or not self._typing(doc, text, cursor):
            # "nothing while you type" is not kept: after a pause the same state has an edit
            self.memory[state_key(doc, text, cursor)] = found
        return self._issue(doc, version, found, "computed")

    def _issue(self, doc: str, version: int, found: tuple[Proposal, float | None] | None,
               origin: str) -> EditSuggestion | None:
        sub = found[0].substitution if found else None
        self.last = {"origin": origin, "source": found[0].source if found else "none", "kind": sub.kind if sub else ""}
        if found is None:
            self.showing.pop(doc, None)
            return None
        proposal, confidence = found
        edit = EditSuggestion(str(next(self._ids)), doc, version, proposal.start, proposal.end, proposal.text,
                              proposal.source, origin, confidence)
        self.issued[edit.id] = edit
        self.made[edit.id] = proposal
        self.showing[doc] = edit
        self.stats.suggested += 1
        return edit

    @staticmethod
    def applied(edit: EditSuggestion, text: str) -> tuple[str, int]:
        """The text once the edit is applied, and where the cursor lands: after its new text."""
        return text[:edit.start] + edit.text + text[edit.end:], edit.start + len(edit.text)

    def depth(self) -> int:
        """How many edits ahead to compute: one, and more as the user takes what is shown (as completions do)."""
        shown = self.stats.shown or self.stats.suggested
        if shown < MEASURED:
            return 1
        rate = self.stats.accepted / shown
        return 1 + int(rate >= 0.5) + int(rate >= 0.8)

    async def speculate(self, edit: EditSuggestion, text: str) -> None:
        """Compute the edits after this one, each in the text as accepting the one before leaves it (the next Tabs'
        answers), as deep as depth() says."""
        made = self.made.get(edit.id)
        if made is None:
            return
        start, end, new, sub, rest = edit.start, edit.end, edit.text, made.substitution, made.rest
        history = self.histories.get(edit.doc)
        for _ in range(self.depth()):
            removed = text[start:end]
            text, cursor = text[:start] + new + text[end:], start + len(new)
            key = state_key(edit.doc, text, cursor)
            found = self.memory.get(key) if key in self.memory else None
            if key not in self.memory:
                if sub is not None:
                    found = await self._gate(edit.doc, text, next_site(text, replace(sub, at=start), cursor),
                                             background=True)
                elif rest:
                    found = (Proposal(*rest[0][:3], None, "model", rest[1:]), rest[0][3])
                else:  # the model's answer is used up: ask it again there, the accepted edit its newest
                    history = _after(history, start, removed, new, self.clock())
                    found = await self._model(edit.doc, text, cursor, history.groups, background=True)
                self.memory[key] = found
                self.stats.speculated += 1
            if found is None:
                return
            start, end, new, sub, rest = found[0].start, found[0].end, found[0].text, found[0].substitution, found[0].rest

    def _typing(self, doc: str, text: str, cursor: int) -> bool:
        history = self.histories.get(doc)
        group = history.last if history is not None else None
        return group is not None and group.end <= len(text) and still_typing(text, group, cursor, self.clock())

    async def _compute(self, doc: str, text: str, cursor: int, background: bool) -> tuple[Proposal, float | None] | None:
        history = self.histories.get(doc)
        group: Group | None = history.last if history is not None else None
        found = await self._gate(doc, text, propose(text, group, cursor, self.clock()), background) if self.propagate else None
        if found is not None or self.writer is None or history is None or self._typing(doc, text, cursor):
            return found
        return await self._model(doc, text, cursor, history.groups, background)

    async def _model(self, doc: str, text: str, cursor: int, groups: Iterable[Group], background: bool) -> tuple[Proposal, float | None] | None:
        """The nearest edit the model writes at this state, with its others queued behind it; None for no edit."""
        if self.writer is None:
            return None
        self.stats.model_runs += 1
        edits = await model_source.propose(self.writer, doc, self.names.get(doc, "file"), text, cursor, list(groups),
                                           self.model_min_confidence, background)
        if not edits:
            return None
        self.stats.model_found += 1
        first, others = edits[0], tuple((e.start, e.end, e.text, e.confidence) for e in edits[1:])
        return Proposal(first.start, first.end, first.text, None, "model", others), first.confidence

    async def _gate(self, doc: str, text: str, proposal: Proposal | None,
                    background: bool) -> tuple[Proposal, float | None] | None:
        if proposal is None:
            return None
        if self.scorer is None or self.min_confidence <= 0:
            return proposal, None
        score = await self.scorer(doc, text[:proposal.start], text[proposal.end:], proposal.text, background)
        if score < self.min_confidence:
            self.stats.gated += 1
            return None
        return proposal, score


def _after(history: DocHistory | None, start: int, removed: str, inserted: str, now: float) -> DocHistory:
    """A copy of the history with one more edit made (an accepted suggestion's), done."""
    copy = DocHistory()
    if history is not None:
        copy.groups.extend(history.groups)
    copy.edited(start, removed, inserted, now)
    copy.mark_done()
    return copy


def _subsequence(short: str, long: str) -> bool:
    """Whether `short`'s characters all appear in `long`, in order."""
    it = iter(long)
    return all(ch in it for ch in short)
