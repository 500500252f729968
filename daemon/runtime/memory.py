"""What the daemon remembers of answers: the cache by state key, the suggestions shown (type-through) and the runs
in flight, together, so one switch (--no-cache) turns them all off; and the cached answers ready by the state they
answer, found without building a key.

The ready index is the fast way to the cache, never another answer: an entry is a cached key's answer under the
identity of one state (document, cursor offset, the text around it as the LSP layer reads it, invoked or not), made
only where building that state's request gives exactly that key (service.ready_answer), and kept only while the
key's entry is cached, the document's context snapshot is the one the key was made under, and the engine's model id
is the same. Anything else is a miss here, and the request builds its key as ever.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from tabd.cache.state import DocState, Window, after_identity
from tabd.cache.store import CompletionCache, Entry, InflightTable, RebaseIndex, Shown, TypeThroughIndex
from tabd.daemon.context.chunk_store import Snapshot
from tabd.daemon.runtime.jobs import Computation
from tabd.daemon.runtime.config import Config
from tabd.predictor.types import GenSettings, Prediction


@dataclass(frozen=True)
class Recalled:
    """A suggestion memory holds for a state: the whole of a cached one (gating is each request's), or the rest of
    one shown earlier and typed into."""

    text: str
    source: str  # "cache" or "typed"
    depth: int
    key: str  # the key it was computed for (for a typed answer, the suggestion typed into)
    confidence: tuple[tuple[int, float], ...] = ()
    alternatives: tuple[str, ...] = ()


# a state as the LSP layer reads it: (document, cursor offset, text before, text after, invoked)
StateId = tuple[str, int, str, str, bool]
# its place in the ready index: the same without the text after, which the entry there is checked against, as it is
# or, where it differs, as the key reads it (cache/state.py after_identity: no closers, only the window), so a state
# whose editor's closers after the cursor are all that differs from the state a prefetch was made for finds it too
PlaceId = tuple[str, int, str, bool]


@dataclass(frozen=True, slots=True)
class Ready:
    """A cached answer as the request at one state shows it (gated, its closers counted), with what it is valid under,
    and what that state's Request holds besides (window, settings, context): built from these once the answer is out,
    with no window, snapshot, prompt or key to make again."""

    key: str
    text: str  # what the request shows ("" when gating hides it)
    depth: int
    hidden: bool  # the entry had text, and gating showed none of it
    offered: tuple[str, ...]  # an invoked request's other candidates
    replaces: int  # characters after the cursor the text replaces (the editor's closers)
    alternatives: tuple[tuple[str, int], ...]  # `offered`, each with the characters it replaces
    context: Snapshot  # the context snapshot the key was made under (the very object the workspace holds)
    model_id: str
    window: Window  # the state's prompt window, and its generation settings: the Request's, as its build makes them
    settings: GenSettings
    after: str  # the text after the cursor that text, replaces and alternatives were made for
    prediction: Prediction  # the cached answer whole: what a state with other closers after the cursor shows of it


class Memory:
    def __init__(self, config: Config, contexts: Mapping[str, Snapshot] | None = None) -> None:
        self.enabled = config.cache
        self.cache = CompletionCache(config.cache_entries, config.cache_bytes, self._uncached)
        self.typed = TypeThroughIndex()
        self.rebase = RebaseIndex()  # the last suggestion per document, across edits elsewhere
        self.inflight: InflightTable[Computation] = InflightTable()
        self.contexts: Mapping[str, Snapshot] = {} if contexts is None else contexts  # doc -> its context snapshot now
        self._ready: dict[PlaceId, Ready] = {}  # one answer per place: the one held last
        self._ready_by_key: dict[str, list[PlaceId]] = {}
        self._ready_by_doc: dict[str, set[PlaceId]] = {}
        self._suffix_chars = config.suffix_chars

    def ready(self, doc: str, offset: int, before: str, after: str, invoked: bool, model_id: str) -> Ready | None:
        """The cached answer ready for the state with these parts, if the key its request would build is known to be
        its key (see the module's note); None sends the request the long way. It may have been held for a state that
        differs only where the key does not read (the editor's closers after the cursor, the window's cut): then its
        Ready's `after` is not this state's, and what it shows is made again for this one (service.answer_ready)."""
        got = self._ready.get((doc, offset, before, invoked))
        if got is None or got.context is not self.contexts.get(doc) or got.model_id != model_id:
            return None
        if got.after != after and after_identity(after, self._suffix_chars) != after_identity(got.after,
                                                                                             self._suffix_chars):
            return None  # other text after the cursor: another key
        return got

    def hold_ready(self, state_id: StateId, ready: Ready) -> None:
        """Index a cached key's answer under the identity of a state whose request builds that key."""
        if not self.enabled or ready.key not in self.cache:
            return
        doc, offset, before, _, invoked = state_id  # the text after: the Ready's own
        ready_id = (doc, offset, before, invoked)
        self._forget_ready(ready_id)
        self._ready[ready_id] = ready
        self._ready_by_key.setdefault(ready.key, []).append(ready_id)
        self._ready_by_doc.setdefault(doc, set()).add(ready_id)

    def forget(self, doc: str) -> None:
        """A document opened again (its language may differ) or closed: nothing of it is ready any more."""
        for ready_id in list(self._ready_by_doc.get(doc, ())):
            self._forget_ready(ready_id)
        self._ready_by_doc.pop(doc, None)

    def used(self, key: str) -> None:
        """An answer from the ready index went out: its cache entry is recently used, as a lookup makes it."""
        self.cache.get(key)

    def closed(self, doc: str) -> None:
        self.rebase.closed(doc)
        self.forget(doc)

    def _uncached(self, key: str) -> None:
        """The cache let the key go (or replaces its entry): what was ready under it goes too."""
        for ready_id in self._ready_by_key.pop(key, ()):
            ready = self._ready.get(ready_id)
            if ready is not None and ready.key == key:
                del self._ready[ready_id]
                self._ready_by_doc.get(ready_id[0], set()).discard(ready_id)

    def _forget_ready(self, ready_id: PlaceId) -> None:
        ready = self._ready.pop(ready_id, None)
        if ready is not None:
            ids = self._ready_by_key.get(ready.key)
            if ids is not None and ready_id in ids:
                ids.remove(ready_id)
                if not ids:
                    del self._ready_by_key[ready.key]
            self._ready_by_doc.get(ready_id[0], set()).discard(ready_id)

    def recall(self, key: str, window: Window, doc: str = "", state: DocState | None = None,
               own_key_only: bool = False) -> Recalled | None:
        """The answer memory holds for a request's key and window (or, after an edit elsewhere, for the document's
        cursor: `doc` and `state`); None when it holds none (or is off). `own_key_only`: the cache's entry for the key
        or nothing (not the rest of a suggestion shown under other settings)."""
        if not self.enabled:
            return None
        entry = self.cache.get(key)
        if entry is not None:
            return Recalled(entry.text, "cache", entry.depth, key, entry.confidence, entry.alternatives)
        if own_key_only:
            return None
        hit = self.typed.lookup(window)
        if hit is not None:
            shown, rest = hit
            return Recalled(rest, "typed", shown.depth, shown.key)
        placed = self.rebase.lookup(doc, state, window) if state is not None else None
        if placed is not None:
            where, rest = placed
            return Recalled(rest, "cache" if rest == where.text else "typed", where.depth, where.key)
        return None

    def running(self, key: str) -> Computation | None:
        """The run in flight for this key (off: none is shared)."""
        return self.inflight.get(key) if self.enabled else None

    def has(self, key: str) -> bool:
        """Whether the key's answer is cached or being computed."""
        return key in self.cache or self.inflight.get(key) is not None

    def runs_of(self, doc: str) -> list[Computation]:
        """The runs in flight for a document that have not ended."""
        return [comp for _, comp in self.inflight.items()
                if comp.doc == doc and comp.job is not None and not comp.job.done()]

    def started(self, comp: Computation) -> None:
        if self.enabled:
            self.inflight.add(comp.key, comp)

    def ended(self, comp: Computation, prediction: Prediction | None) -> None:
        self.inflight.discard(comp.key, comp)
        if prediction is not None and self.enabled:
            self._uncached(comp.key)  # a new entry: what was ready from the old one is not its answer
            self.cache.put(comp.key, Entry(prediction.text, comp.depth, prediction.confidence, prediction.alternatives))

    def shown(self, window: Window, text: str, key: str, depth: int, doc: str = "",
              state: DocState | None = None) -> None:
        """A suggestion shown (or ready to show) at a window: typing into it serves the rest; an edit elsewhere in
        its document keeps it (`doc`, `state`: where it is)."""
        if self.enabled:
            self.typed.add(Shown(window, text, key, depth))
            if state is not None:
                self.rebase.shown(doc, state, window, text, key, depth)
