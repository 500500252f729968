"""Type-through: the user typed the start of a suggestion; serve the rest without the model."""
from __future__ import annotations

import hashlib
from collections import OrderedDict, deque
from dataclasses import dataclass

from tabd.cache.state import Window


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
