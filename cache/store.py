"""The answers the cache remembers, in its layers, which memory (daemon/runtime/memory.py) looks in for one request:
by state key, the completion cache (an LRU bounded both in entries and in bytes) and the runs in flight for keys not
cached yet (in-flight reuse: one computation per key, however many requests wait for it); by where they were shown,
the suggestions served again without the model once the user moves on: typed into (type-through: the user typed the
start of one, the rest is served) or edited around (rebase: the last one shown in each document survives edits
elsewhere in it, shifted with them).

Rebase: an edit above the cursor's line changes the prompt window (its prefix, or where it starts), so the cache key
misses and the suggestion computed for this very cursor would be computed again. The user's cursor line and the
text after it are what the suggestion answers; when an edit leaves them alone, the suggestion still fits. So the
last one shown in each document is kept with its absolute offset: an edit wholly before the cursor's line shifts it,
one past its suffix window leaves it, one that overlaps drops it. Typing a prefix of it at the cursor consumes that
prefix (type-through across the shift). Plain offsets and strings: no LSP, no model.
"""
from __future__ import annotations

import hashlib
import sys
from collections import OrderedDict, deque
from dataclasses import dataclass, replace
from typing import Callable, Generic, TypeVar

from cachetools import LRUCache

from tabd.cache.state import DocState, Window

# the Entry itself (slots: no per-instance dict), its 32-character key and the LRU's bookkeeping for it, measured with
# tracemalloc on CPython 3.11 (tests/unit/test_store_bytes.py checks the sum against tracemalloc)
ENTRY_OVERHEAD = 320
# one (end of text, probability) pair besides its slot in the outer tuple: the pair tuple, its int (most are past the small-int
# cache) and its float; 16 here undercounted a 48-token suggestion's probabilities about 7x
PAIR_BYTES = sys.getsizeof((1 << 20, 0.5)) + sys.getsizeof(1 << 20) + sys.getsizeof(0.5)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Entry:
    text: str  # the suggestion for the keyed state
    depth: int  # 0 when computed for a request, n for a prefetch n accepts ahead
    # (end of text, probability) per token: lets each request gate the full text by its own threshold
    confidence: tuple[tuple[int, float], ...] = ()
    alternatives: tuple[str, ...] = ()  # other candidates the run had (an invoked request cycles through them)


def entry_bytes(entry: Entry) -> int:
    """What a stored entry holds: its text, its own object and key, its confidence pairs and its alternatives."""
    pairs = sys.getsizeof(entry.confidence) + PAIR_BYTES * len(entry.confidence) if entry.confidence else 0  # () is shared
    others = (sys.getsizeof(entry.alternatives) + sum(sys.getsizeof(a) for a in entry.alternatives)
              if entry.alternatives else 0)
    return sys.getsizeof(entry.text) + ENTRY_OVERHEAD + pairs + others


class _LRU(LRUCache[str, Entry]):
    """cachetools' LRU that says which key it let go (what indexes the key elsewhere must let go of it too)."""

    def __init__(self, maxsize: int, evicted: Callable[[str], None]) -> None:
        super().__init__(maxsize=maxsize, getsizeof=entry_bytes)
        self.evicted = evicted

    def popitem(self) -> tuple[str, Entry]:
        key, entry = super().popitem()
        self.evicted(key)
        return key, entry


class CompletionCache:
    """Key -> Entry. Least recently used entries go first when either bound is hit; `evicted` hears each key that
    goes (a new entry for a key replaces the old one: `put` says so to the caller, who made it)."""

    def __init__(self, max_entries: int = 2048, max_bytes: int = 8 << 20,
                 evicted: Callable[[str], None] = lambda key: None) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._lru = _LRU(max_bytes, evicted)

    def get(self, key: str) -> Entry | None:
        return self._lru.get(key)

    def put(self, key: str, entry: Entry) -> None:
        if entry_bytes(entry) > self.max_bytes:
            return
        self._lru[key] = entry
        while len(self._lru) > self.max_entries:
            self._lru.popitem()

    def __contains__(self, key: str) -> bool:
        return key in self._lru

    def __len__(self) -> int:
        return len(self._lru)

    @property
    def bytes(self) -> int:
        return int(self._lru.currsize)

    def clear(self) -> None:
        for key in list(self._lru):
            self._lru.evicted(key)
        self._lru.clear()


class InflightTable(Generic[T]):
    """Key -> the handle of the computation producing it (a future, a job: the cache doesn't care)."""

    def __init__(self) -> None:
        self._by_key: dict[str, T] = {}

    def get(self, key: str) -> T | None:
        return self._by_key.get(key)

    def add(self, key: str, handle: T) -> None:
        self._by_key[key] = handle

    def discard(self, key: str, handle: T) -> None:
        if self._by_key.get(key) is handle:
            del self._by_key[key]

    def items(self) -> list[tuple[str, T]]:
        return list(self._by_key.items())

    def __len__(self) -> int:
        return len(self._by_key)


@dataclass(frozen=True)
class Shown:
    window: Window  # the state where the suggestion was shown
    text: str  # the suggestion
    key: str  # its cache key
    depth: int


def typed_length(base: Window, text: str, now: Window) -> int | None:
    """k if `now` is `base` with text[:k] typed at the cursor (0 < k < len(text)), else None."""
    if now.suffix != base.suffix:
        return None
    if now.start == base.start:
        k = len(now.prefix) - len(base.prefix)
        if 0 < k < len(text) and now.prefix.startswith(base.prefix) and now.prefix.endswith(text[:k]):
            return k
        return None
    # The window start moved (a grid line was crossed): compare the overlapping text.
    for k in range(1, len(text)):
        if not now.prefix.endswith(text[:k]):
            continue
        rest = now.prefix[: len(now.prefix) - k]
        if base.prefix.endswith(rest) or rest.endswith(base.prefix):
            return k
    return None


class TypeThroughIndex:
    """Recently shown suggestions, grouped by suffix window, bounded in groups and per group."""

    def __init__(self, max_groups: int = 256, per_group: int = 8) -> None:
        self.max_groups = max_groups
        self.per_group = per_group
        self._groups: OrderedDict[bytes, deque[Shown]] = OrderedDict()

    @staticmethod
    def _group(suffix: str) -> bytes:
        return hashlib.blake2b(suffix.encode("utf-8", "surrogatepass"), digest_size=12).digest()

    def add(self, shown: Shown) -> None:
        if len(shown.text) < 2:
            return
        g = self._group(shown.window.suffix)
        group = self._groups.get(g)
        if group is None:
            group = self._groups[g] = deque(maxlen=self.per_group)
            while len(self._groups) > self.max_groups:
                self._groups.popitem(last=False)
        else:
            self._groups.move_to_end(g)
        group.append(shown)

    def lookup(self, now: Window) -> tuple[Shown, str] | None:
        """(what was shown, the remainder still to type) for the newest match."""
        group = self._groups.get(self._group(now.suffix))
        if not group:
            return None
        for shown in reversed(group):
            k = typed_length(shown.window, shown.text, now)
            if k is not None:
                return shown, shown.text[k:]
        return None

    def clear(self) -> None:
        self._groups.clear()


@dataclass(frozen=True)
class Placed:
    offset: int  # the absolute cursor offset it was shown at (shifted by edits above)
    line_before: str  # the cursor line's text before the cursor, then
    suffix: str  # the window's suffix, then
    text: str
    key: str
    depth: int


class RebaseIndex:
    """The last suggestion shown per document, kept across edits that do not touch its place."""

    def __init__(self) -> None:
        self._by_doc: dict[str, Placed] = {}

    def shown(self, doc: str, state: DocState, window: Window, text: str, key: str, depth: int) -> None:
        if len(text) >= 2:
            self._by_doc[doc] = Placed(state.offset, state.current_line()[0], window.suffix, text, key, depth)

    def edited(self, doc: str, offset: int, removed: int, inserted: str) -> None:
        """One edit in the text before it: shift, keep or drop the document's suggestion."""
        placed = self._by_doc.get(doc)
        if placed is None:
            return
        line_start = placed.offset - len(placed.line_before)
        if offset + removed < line_start:  # wholly before the cursor's line (not even at its start)
            self._by_doc[doc] = replace(placed, offset=placed.offset + len(inserted) - removed)
        elif offset > placed.offset + len(placed.suffix):
            return  # past what the suggestion saw after the cursor
        elif removed == 0 and "\n" not in inserted and offset >= placed.offset:
            return  # typing at the cursor: lookup sees whether it follows the suggestion
        else:
            del self._by_doc[doc]  # it touches the cursor's line or what the suggestion saw after it

    def lookup(self, doc: str, state: DocState, window: Window) -> tuple[Placed, str] | None:
        """(the suggestion, what is left of it) when the cursor is where it was shown, or there plus a typed prefix
        of it, with the same line before and text after; None otherwise."""
        placed = self._by_doc.get(doc)
        if placed is None or window.suffix != placed.suffix:
            return None
        k = state.offset - placed.offset
        if not 0 <= k < len(placed.text) or "\n" in placed.text[:k]:
            return None
        if state.current_line()[0] != placed.line_before + placed.text[:k]:
            return None
        return placed, placed.text[k:]

    def closed(self, doc: str) -> None:
        self._by_doc.pop(doc, None)
