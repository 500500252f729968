"""The completion cache: an LRU bounded both in entries and in bytes."""
from __future__ import annotations

import sys
from dataclasses import dataclass

from cachetools import LRUCache

ENTRY_OVERHEAD = 160  # key, dataclass and dict slot, measured with sys.getsizeof on CPython 3.11


@dataclass(frozen=True)
class Entry:
    text: str  # the suggestion for the keyed state
    depth: int  # 0 when computed for a request, n for a prefetch n accepts ahead
    # (end of text, probability) per token: lets each request gate the full text by its own threshold
    confidence: tuple[tuple[int, float], ...] = ()


def entry_bytes(entry: Entry) -> int:
    return sys.getsizeof(entry.text) + ENTRY_OVERHEAD + 16 * len(entry.confidence)


class CompletionCache:
    """Key -> Entry. Least recently used entries go first when either bound is hit."""

    def __init__(self, max_entries: int = 2048, max_bytes: int = 8 << 20) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._lru: LRUCache[str, Entry] = LRUCache(maxsize=max_bytes, getsizeof=entry_bytes)

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
        self._lru.clear()
