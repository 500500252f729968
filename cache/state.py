"""A document state as the cache sees it: text around the cursor, the prompt window, and the key made of it.

The prompt window is what decides the model's output, so it is also what the
cache key is made of (state_key: a digest of exactly what decides the output). Its start is anchored to a coarse grid of absolute
offsets (then snapped to a line start), so that typing at the cursor only
appends to the window: the cache key of "state after Tab" can be computed
ahead of time, and the model's kept KV sequence is extended, not rewritten.
Its suffix leaves out the closers an editor put right after the cursor
(predictor/prompt/pairs.py), so an auto-closed `(` or a stepped-over `)` keeps it too.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from tabd.predictor.prompt import pairs


@dataclass(frozen=True)
class Window:
    """The prompt window: prefix ends at the cursor, suffix starts there."""

    start: int  # absolute offset of prefix[0] in the document
    prefix: str
    suffix: str


@dataclass(frozen=True)
class DocState:
    """Text around the cursor, bounded: `before` ends at the cursor, `after` starts there."""

    offset: int  # absolute cursor offset (in str code points)
    before: str  # document text just before the cursor (a bounded tail)
    after: str  # document text just after the cursor (a bounded head)

    @classmethod
    def from_text(cls, text: str, offset: int, before_chars: int, after_chars: int) -> "DocState":
        offset = max(0, min(offset, len(text)))
        return cls(offset, text[max(0, offset - before_chars) : offset], text[offset : offset + after_chars])

    @property
    def before_start(self) -> int:
        return self.offset - len(self.before)

    def insert(self, text: str) -> "DocState":
        """The state after `text` is accepted at the cursor, as an editor applies it (over the closers after the
        cursor that it writes itself), and the cursor moved past it."""
        before, after = pairs.apply(self.before, self.after, text)
        return DocState(self.offset + len(text), before, after)

    def window(self, prefix_chars: int, suffix_chars: int) -> Window:
        return Window(*prefix_window(self, prefix_chars), suffix_window(pairs.normalised_after(self.after), suffix_chars))

    def current_line(self) -> tuple[str, str]:
        """(text of the cursor's line before the cursor, text of it after the cursor as the window has it)."""
        head = self.before.rsplit("\n", 1)[-1]
        tail = pairs.normalised_after(self.after).split("\n", 1)[0]
        return head, tail.rstrip("\r")


def prefix_window(state: DocState, prefix_chars: int) -> tuple[int, str]:
    """(absolute start, text) of the prefix window: between prefix_chars and 1.25x of it."""
    quantum = max(1, prefix_chars // 4)
    target = max(0, state.offset - prefix_chars)
    start = max((target // quantum) * quantum, state.before_start)
    rel = start - state.before_start
    if start > 0:
        newline = state.before.find("\n", rel)
        if newline != -1:
            rel = newline + 1
    return state.before_start + rel, state.before[rel:]


def suffix_window(after: str, suffix_chars: int) -> str:
    """The first suffix_chars of the text after the cursor, cut back to a line end.

    It depends on the text after the cursor alone, which typing at the cursor
    does not change, so it stays put while the user types.
    """
    if len(after) <= suffix_chars:
        return after
    head = after[:suffix_chars]
    cut = head.rfind("\n")
    return head[: cut + 1] if cut > 0 else head


def after_identity(after: str, suffix_chars: int) -> tuple[str, str]:
    """What of the text after the cursor a state's key is made of: its suffix window and the rest of the cursor's
    line as the window has it (which decides the generation settings), both without the editor's closers. Two texts
    after the cursor with the same identity (one with an auto-closed `]` at the cursor, or cut shorter where an
    accepted suggestion consumed closers) give the same key, as the text before being the same."""
    normal = pairs.normalised_after(after)
    return suffix_window(normal, suffix_chars), normal.split("\n", 1)[0].rstrip("\r")


def state_key(model_id: str, settings: str, window: Window, context: str = "") -> str:
    """Same key, same answer: model id, generation settings, the workspace context's digest and the prompt window."""
    h = hashlib.blake2b(digest_size=16)
    for part in (model_id, settings, context, window.prefix, window.suffix):
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def short_key(key: str) -> str:
    """The key as written to logs: short, and no source text."""
    return key[:12]
