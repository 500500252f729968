"""Suggestions shown, kept to serve again without the model once the user moves on: typed into (type-through: the
user typed the start of one, the rest is served) or edited around (rebase: the last one shown in each document
survives edits elsewhere in it, shifted with them). Memory looks in both for one request (daemon/runtime/memory.py).

Rebase: an edit above the cursor's line changes the prompt window (its prefix, or where it starts), so the cache key
misses and the suggestion computed for this very cursor would be computed again. The user's cursor line and the
text after it are what the suggestion answers; when an edit leaves them alone, the suggestion still fits. So the
last one shown in each document is kept with its absolute offset: an edit wholly before the cursor's line shifts it,
one past its suffix window leaves it, one that overlaps drops it. Typing a prefix of it at the cursor consumes that
prefix (type-through across the shift). Plain offsets and strings: no LSP, no model.
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict, deque
from dataclasses import dataclass, replace

from tabd.cache.state import DocState, Window


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
