"""The next-edit service: the edit to show at a cursor, from memory when it was speculated, and what the user did.

  suggest   the edit at (text, cursor): memory first (keyed by document state), else propagation (propagation.py:
            the user's recent edits as a transformation, synthesis.py), scored by the model when a gate is set, else,
            once the user pauses, the edits the model writes (model_source.py); then the state after accepting it is
            computed ahead, so the Tab after this one is answered from memory (the chain of a change across its
            places, or the model's other edits). A request made while the user may still be typing at the end of the
            change is held until the pause, then answered, or answered empty once the next edit comes.
  edited    each didChange edit: the history (history.py), the accept it may be (the shown edit applied, however the
            client trimmed the change), an implicit reject when the user edits elsewhere while an edit is shown
  accept / reject / shown   the client's reports (tabd.acceptInlineEdit, tabd.rejectInlineEdit, didShowInlineEdit);
            a rejected edit's transformation is not proposed again in that document (the ledger, ledger.py, keeps the
            edits shown and the user's verdicts; the service forgets what they make stale)

After an accept, the next edit is remembered for the whole of the lines the edit touched, not one cursor: clients
leave the cursor at the end of the new text (tabd's), of the old range (copilot-lsp) or of the line (sidekick.nvim).

Plain strings and offsets in, EditSuggestion out: the LSP layer converts positions.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Awaitable, Callable, Iterable

from cachetools import LRUCache

from tabd.daemon.edits import model_source
from tabd.daemon.edits.history import DocHistory, Group
from tabd.daemon.edits.ledger import EditStats, EditSuggestion, Ledger, digest
from tabd.daemon.edits.model_source import Writer
from tabd.daemon.edits.propagation import PAUSE_S, Proposal, propose, still_typing
from tabd.daemon.edits.synthesis import Transformation, next_site

# (doc, prefix, suffix, new) -> the model's probability of writing `new` there (0..1)
Scorer = Callable[[str, str, str, str, bool], Awaitable[float]]
Sleeper = Callable[[float], Awaitable[None]]
CACHED = 512  # speculated and answered states kept
MEASURED = 4  # edits shown before their acceptance decides how far ahead to compute


def state_key(doc: str, text: str, cursor: int) -> tuple[str, bytes, int]:
    return doc, digest(text), cursor


Answered = tuple[Proposal, float | None] | None


class _Memory(LRUCache[tuple[str, bytes, int], Answered]):
    """The answers by state, counted by place (document, cursor) as they come and go, so whether any text's answer
    is held at a place is one lookup (a Tab's read asks it before its write), not a walk over the states."""

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize)
        self.places: dict[tuple[str, int], int] = {}

    def __setitem__(self, key: tuple[str, bytes, int], value: Answered) -> None:
        if key not in self:
            place = (key[0], key[2])
            self.places[place] = self.places.get(place, 0) + 1
        super().__setitem__(key, value)  # may let the oldest go, through __delitem__

    def __delitem__(self, key: tuple[str, bytes, int]) -> None:
        super().__delitem__(key)
        place = (key[0], key[2])
        left = self.places[place] - 1
        if left:
            self.places[place] = left
        else:
            del self.places[place]


class EditService:
    def __init__(self, scorer: Scorer | None = None, min_confidence: float = 0.0,
                 clock: Callable[[], float] = time.monotonic, writer: Writer | None = None,
                 model_min_confidence: float = 0.5, propagate: bool = True, sleep: Sleeper = asyncio.sleep,
                 lag: float = 0.0) -> None:
        self.scorer = scorer
        self.min_confidence = min_confidence
        self.writer = writer  # the model edit source; None: propagation alone
        self.model_min_confidence = model_min_confidence
        self.propagate = propagate  # False: the model alone proposes (a baseline `tabd bench edits` measures)
        self.clock = clock
        self.sleep = sleep
        # how long the client holds a keystroke before its didChange goes out (Neovim batches them for 150 ms): the
        # user's pause is measured from the keystroke, as well as the server can tell it
        self.lag = lag
        self.histories: dict[str, DocHistory] = {}
        # state -> what to show there (None: nothing), with the substitution that made it
        self.memory = _Memory(CACHED)
        # the state an accepted edit leaves -> its next edit, for a cursor anywhere on the lines (first, last) it touched
        self.chain: LRUCache[tuple[str, bytes], tuple[tuple[Proposal, float | None] | None, int, int]] = LRUCache(CACHED)
        self.stats = EditStats()
        self.ledger = Ledger(self.stats)  # the edits shown and what the user made of them
        self.last: dict[str, str] = {}  # for tabd/stats: the last answer's origin
        self.names: dict[str, str] = {}  # doc -> its file's name (the edit prompt's header)

    # -- what the user did -------------------------------------------------------------

    def edited(self, doc: str, start: int, removed: str, inserted: str) -> None:
        """One didChange edit, in the text before it."""
        history = self.histories.setdefault(doc, DocHistory())
        history.edited(start, removed, inserted, self.clock() - self.lag)
        if self.ledger.edited(doc, start, removed, inserted):
            history.mark_done()  # the shown edit, taken: the chain goes on with its transformation

    def closed(self, doc: str) -> None:
        for kept in (self.histories, self.names):
            kept.pop(doc, None)
        self.ledger.closed(doc)
        self._forget(doc)

    def _forget(self, doc: str, signature: tuple[object, ...] | None = None,
                proposal: Proposal | None = None) -> None:
        """Memory of this document (of one transformation's proposals only, or one model answer, when given)."""
        def matches(found: tuple[Proposal, float | None] | None) -> bool:
            if proposal is not None:
                return found is not None and found[0] == proposal
            t = found[0].transformation if found else None
            return signature is None or (t is not None and t.signature == signature)

        for key in [k for k, v in self.memory.items() if k[0] == doc and matches(v)]:
            del self.memory[key]
        for ckey in [k for k, v in self.chain.items() if k[0] == doc and matches(v[0])]:
            del self.chain[ckey]

    def accept(self, edit_id: str) -> bool:
        return self.ledger.accept(edit_id)

    def reject(self, edit_id: str) -> bool:
        """The user turned the edit down: it is forgotten, and its transformation is not proposed in that document
        again."""
        verdict = self.ledger.reject(edit_id)
        if verdict is None:
            return False
        if verdict.signature is not None:
            self._forget(verdict.doc, verdict.signature)
        elif verdict.proposal is not None:  # a model edit: this answer is forgotten
            self._forget(verdict.doc, proposal=verdict.proposal)
        return True

    def shown(self, edit_id: str) -> bool:
        return self.ledger.shown(edit_id)

    # -- what to show ------------------------------------------------------------------

    def stale(self) -> None:
        self.stats.stale += 1

    def recall(self, doc: str, version: int, text: str, cursor: int) -> tuple[EditSuggestion | None] | None:
        """(the edit, or None for "no edit") when memory holds the answer at this state; None when it must be
        computed (suggest)."""
        return self._recall(doc, version, text, cursor, state_key(doc, text, cursor))

    def _recall(self, doc: str, version: int, text: str, cursor: int,
                key: tuple[str, bytes, int]) -> tuple[EditSuggestion | None] | None:
        history = self.histories.get(doc)
        if self.ledger.seen(doc, key[1]) and history is not None:
            history.mark_done()  # the shown edit, taken
        if key in self.memory:
            found = self.memory[key]
        else:
            chained = self.chain.get(key[:2])
            if chained is None or not chained[1] <= text.count("\n", 0, cursor) <= chained[2]:
                return None
            found = chained[0]
        self.stats.requests += 1
        self.stats.from_memory += 1
        return (self._issue(doc, version, text, found, "cache"),)

    def remembers(self, doc: str, cursor: int) -> bool:
        """Whether memory holds an answer at this cursor of the document, in any text: where it holds none,
        as_ghost_text finds nothing, which this tells without the document's text or its digest (a Tab's read asks
        it before its answer's write)."""
        return (doc, cursor) in self.memory.places

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
        return self._issue(doc, version, text, (replace(p, start=cursor, end=eol, text=new_rest), found[1]), "cache")

    async def suggest(self, doc: str, version: int, text: str, cursor: int, name: str = "") -> EditSuggestion | None:
        """The edit to show at `cursor` in `text` (the document at `version`), or None; `name`: the file's name, which
        the model's edit prompt shows."""
        if name:
            self.names[doc] = name
        key = state_key(doc, text, cursor)
        recalled = self._recall(doc, version, text, cursor, key)
        if recalled is not None:
            return recalled[0]
        self.stats.requests += 1
        history = self.histories.get(doc)
        last = history.last if history is not None else None
        now = self.clock()
        wait = _pause_left(history, text, cursor, now)
        found = await self._compute(doc, text, cursor, background=False, at=now + wait, model=wait <= 0)
        if wait > 0:
            # held: the user may still be typing the change. Computed now, shown once they pause (the time the
            # computing took is part of the wait, not added to it), unless they edit on
            self.stats.held += 1
            await self.sleep(max(0.0, now + wait - self.clock()))
            history = self.histories.get(doc)
            if history is None or history.last is not last:
                self.stats.superseded += 1
                return None
            if found is None and self.writer is not None:  # propagation's answer stands: only the model is left
                found = await self._compute(doc, text, cursor, background=False, propagate=False)
        self.memory[key] = found
        return self._issue(doc, version, text, found, "computed")

    def _issue(self, doc: str, version: int, text: str, found: tuple[Proposal, float | None] | None,
               origin: str) -> EditSuggestion | None:
        self.last = {"origin": origin, "source": found[0].source if found else "none",
                     "kind": found[0].kind if found else ""}
        if found is None:
            self.ledger.clear(doc)
            return None
        self.stats.suggested += 1
        return self.ledger.issue(doc, version, text, found[0], found[1], origin)

    async def speculate(self, edit: EditSuggestion, text: str) -> None:
        """Compute the edits after this one, each in the text as accepting the one before leaves it (the next Tabs'
        answers), as deep as depth() says."""
        made = self.ledger.made.get(edit.id)
        if made is None:
            return
        start, end, new, t, rest = edit.start, edit.end, edit.text, made.transformation, made.rest
        history = self.histories.get(edit.doc)
        name = self.names.get(edit.doc, "")
        for _ in range(depth(self.stats)):
            removed = text[start:end]
            text, cursor = text[:start] + new + text[end:], start + len(new)
            key = state_key(edit.doc, text, cursor)
            found = self.memory.get(key) if key in self.memory else None
            if key not in self.memory:
                if t is not None:
                    site = next_site(text, t, cursor, name, (start, start + len(new)))
                    proposal = Proposal(site.start, site.end, site.text, t) if site is not None else None
                    found = await self._gate(edit.doc, text, proposal, background=True)
                elif rest:
                    found = (Proposal(*rest[0][:3], None, "model", rest[1:]), rest[0][3])
                else:  # the model's answer is used up: ask it again there, the accepted edit its newest
                    history = _after(history, start, removed, new, self.clock())
                    found = await self._model(edit.doc, text, cursor, history.groups, background=True)
                self.memory[key] = found
                self.stats.speculated += 1
            first = text.count("\n", 0, start)
            self.chain[key[:2]] = (found, first, first + max(new.count("\n"), removed.count("\n")))
            if found is None:
                return
            start, end, new, t, rest = found[0].start, found[0].end, found[0].text, found[0].transformation, found[0].rest

    async def _compute(self, doc: str, text: str, cursor: int, background: bool, at: float | None = None,
                       model: bool = True, propagate: bool = True) -> tuple[Proposal, float | None] | None:
        """What to show at this state, as it will be at time `at` (a held request: once the pause has come); the
        model is asked only when `model`, propagation only when `propagate`."""
        history = self.histories.get(doc)
        found = None
        if self.propagate and propagate and history is not None:
            proposal = propose(text, list(history.groups), cursor, self.clock() if at is None else at,
                               self.names.get(doc, ""), self.ledger.rejected.get(doc, ()), self.ledger.active.get(doc))
            found = await self._gate(doc, text, proposal, background)
        if (found is not None or not model or self.writer is None or history is None
                or _pause_left(history, text, cursor, self.clock()) > 0):
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


def depth(stats: EditStats) -> int:
    """How many edits ahead to compute: one, and more as the user takes what is shown (as completions do)."""
    shown = stats.shown or stats.suggested
    if shown < MEASURED:
        return 1
    rate = stats.accepted / shown
    return 1 + int(rate >= 0.5) + int(rate >= 0.8)


def _pause_left(history: DocHistory | None, text: str, cursor: int, now: float) -> float:
    """Seconds until the user's pause, while they may still be typing at the end of their change; else 0."""
    group = history.last if history is not None else None
    if group is None or group.end > len(text) or not still_typing(text, group, cursor, now):
        return 0.0
    return max(0.0, group.last_t + PAUSE_S - now)


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
