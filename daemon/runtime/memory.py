"""What the daemon remembers of answers: the cache by state key, the suggestions shown (type-through) and the runs
in flight, together, so one switch (--no-cache) turns them all off."""
from __future__ import annotations

from dataclasses import dataclass

from tabd.cache.inflight import InflightTable
from tabd.cache.rebase import RebaseIndex
from tabd.cache.state import DocState, Window
from tabd.cache.store import CompletionCache, Entry
from tabd.cache.typed import Shown, TypeThroughIndex
from tabd.daemon.runtime.computation import Computation
from tabd.daemon.runtime.config import Config
from tabd.predictor.types import Prediction


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


class Memory:
    def __init__(self, config: Config) -> None:
        self.enabled = config.cache
        self.cache = CompletionCache(config.cache_entries, config.cache_bytes)
        self.typed = TypeThroughIndex()
        self.rebase = RebaseIndex()  # the last suggestion per document, across edits elsewhere
        self.inflight: InflightTable[Computation] = InflightTable()

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
            self.cache.put(comp.key, Entry(prediction.text, comp.depth, prediction.confidence, prediction.alternatives))

    def shown(self, window: Window, text: str, key: str, depth: int, doc: str = "",
              state: DocState | None = None) -> None:
        """A suggestion shown (or ready to show) at a window: typing into it serves the rest; an edit elsewhere in
        its document keeps it (`doc`, `state`: where it is)."""
        if self.enabled:
            self.typed.add(Shown(window, text, key, depth))
            if state is not None:
                self.rebase.shown(doc, state, window, text, key, depth)
