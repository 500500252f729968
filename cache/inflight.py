"""In-flight reuse: one computation per key, however many requests wait for it."""
from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


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
