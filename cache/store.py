"""Answers by state key: the completion cache (an LRU bounded both in entries and in bytes) and the runs in flight
for keys not cached yet (in-flight reuse: one computation per key, however many requests wait for it)."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

from cachetools import LRUCache

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
