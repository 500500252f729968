"""The workspace context as the service uses it: one snapshot per document, changed only when the user pauses or moves.

The model's kept KV sequence starts with the context, so a context that moved
on every keystroke would make every request a full prefill. Here a document's
snapshot is picked at its first request (or focus), and picked again only on
an idle timer — after `idle_ms` without edits or requests — when other
documents changed or the prompt window moved since. A new snapshot is handed to
`on_change`, which prefills the new prompt in the background (KV warm-up, warmer.py).
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from tabd.cache.state import DocState, Window
from tabd.daemon.context.chunk_store import EMPTY, ContextOptions, ContextStore, Snapshot, TextSource
from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime.jobs import Tally


def context_options(config: Config) -> ContextOptions:
    return ContextOptions(tokens=config.context_tokens, max_chunks=config.context_chunks, max_bytes=config.context_bytes,
                          chunk_lines=config.context_lines, idle_ms=config.context_idle_ms)


@dataclass
class ContextStats:
    changes: int = 0  # snapshots replaced by a different context
    picks: int = 0  # snapshots picked (first request, focus, idle)
    warmups: Tally = field(default_factory=Tally)  # KV warm-ups (warmer.py) for the snapshots picked


class Workspace:
    """Documents, their context snapshots and the idle timer that may change them."""

    def __init__(self, options: ContextOptions, prefix_chars: int, suffix_chars: int,
                 on_change: Callable[[str, DocState, Window, Snapshot], None]) -> None:
        self.options = options
        self.store = ContextStore(options)
        self.prefix_chars, self.suffix_chars = prefix_chars, suffix_chars
        self.on_change = on_change
        self.snapshots: dict[str, Snapshot] = {}
        self.states: dict[str, DocState] = {}  # last known cursor state per document
        self.active: str | None = None  # the document the user last edited, asked in or focused
        self.fresh: str | None = None  # the document opened last: warmed up at the pause if nobody asked in it yet
        self.stats = ContextStats()
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0  # loop time the idle pick is due at

    @property
    def enabled(self) -> bool:
        return self.options.tokens > 0

    # -- what the editor did ------------------------------------------------------

    def opened(self, doc: str, path: str, text: str, comment: str = "#", language: str = "") -> None:
        self.store.open(doc, path, text, comment, language)
        self.states[doc] = DocState.from_text(text, 0, self.prefix_chars * 2, self.suffix_chars * 2)
        self.snapshots.pop(doc, None)
        self.fresh = doc  # an open is not a move: the document being typed in keeps its place (editors open files
        self._arm()       # in the background too), and this one is warmed at the pause unless asked in before

    def changed(self, doc: str, text: TextSource, offset: int | None, state: DocState | None) -> None:
        self.store.update(doc, text, offset)
        if state is not None:
            self.states[doc] = state
        self._touch(doc)

    def closed(self, doc: str) -> None:
        self.store.close(doc)
        self.snapshots.pop(doc, None)
        self.states.pop(doc, None)
        if self.fresh == doc:
            self.fresh = None
        if self.active == doc:
            self.active = None
        elif self.active is not None:
            self._arm()  # the active document's context may hold the closed file's chunks: pick again at the pause

    def requested(self, doc: str, state: DocState) -> None:
        self.states[doc] = state
        self._touch(doc)

    def focus(self, doc: str, state: DocState) -> Snapshot:
        """The user moved here (a new document or a jump): pick now, and warm up even if the context is the same."""
        self.states[doc] = state
        self.active = doc
        return self._refresh(doc, force=True)

    # -- snapshots ----------------------------------------------------------------------

    def snapshot(self, doc: str, state: DocState, window: Window) -> Snapshot:
        """The context a request for `doc` uses: the kept snapshot, or a pick where there is none or the cursor jumped.

        Typing, deleting and accepting at the cursor keep the text after it, so they keep the snapshot
        (and the planned after-accept keys stay valid); a click or a jump elsewhere changes it and the
        window's start, and that request's prompt is new anyway.
        """
        snap = self.snapshots.get(doc)
        # moved: the text after the cursor and the window's start both differ from the pick's (a jump, not typing)
        if snap is None or (window.suffix != snap.suffix and window.start != snap.anchor):
            new = self.snapshots[doc] = self._pick(doc, state, window)
            if snap is not None and new.digest != snap.digest:
                self.stats.changes += 1
            snap = new
        return snap

    def current(self, doc: str) -> Snapshot:
        return self.snapshots.get(doc, EMPTY)

    def _pick(self, doc: str, state: DocState, window: Window) -> Snapshot:
        self.stats.picks += 1
        if not self.enabled:
            return Snapshot(generation=self.store.generation, anchor=window.start, suffix=window.suffix)
        return replace(self.store.select(doc, state.offset, window.prefix, window.suffix, window.start),
                       path=self.store.path_of(doc))

    def _refresh(self, doc: str, force: bool = False) -> Snapshot:
        state = self.states.get(doc)
        if state is None:
            return EMPTY
        window = state.window(self.prefix_chars, self.suffix_chars)
        old = self.snapshots.get(doc)
        if not force and old is not None and old.generation == self.store.generation and old.anchor == window.start:
            return old  # nothing the context depends on moved: keep it, and the KV that starts with it
        new = self.snapshots[doc] = self._pick(doc, state, window)
        if old is not None and new.digest != old.digest:
            self.stats.changes += 1
        if force or old is None or new.digest != old.digest:
            self.on_change(doc, state, window, new)
        return new

    # -- the idle timer -----------------------------------------------------------------

    def _touch(self, doc: str) -> None:
        self.active = doc
        self._arm()

    def _arm(self) -> None:
        """The idle pick is due idle_ms from now: a keystroke moves the due time, and the timer armed for an earlier
        one arms itself again when it fires (one timer per pause, not a cancel and a new one per keystroke)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a plain function test): no timer
        self._due = loop.time() + self.options.idle_ms / 1000
        if self._timer is None:
            self._timer = loop.call_at(self._due, self._idle)

    def _idle(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        if loop.time() < self._due:  # touched since this timer was armed: the pause ends later
            self._timer = loop.call_at(self._due, self._idle)
            return
        if self.active is not None:
            self._refresh(self.active)
        fresh, self.fresh = self.fresh, None
        if fresh is not None and fresh != self.active and fresh not in self.snapshots:
            self._refresh(fresh)  # the open's warm-up

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def stats_dict(self) -> dict[str, Any]:
        held_chunks, held_bytes = self.store.held()
        snap = self.current(self.active) if self.active else EMPTY
        return {
            "enabled": self.enabled,
            "tokens_budget": self.options.tokens,
            "active": {"chunks": len(snap.chunks), "tokens": snap.tokens, "digest": snap.digest,
                       "sources": len(snap.sources), "source_bytes": sum(len(t) for _, t in snap.sources)},
            "documents": len(self.store.docs),
            "skipped": len(self.store.skipped),
            "held": {"chunks": held_chunks, "bytes": held_bytes,
                     "bound_chunks": self.options.max_chunks, "bound_bytes": self.options.max_bytes},
            "picks": self.stats.picks,
            "changes": self.stats.changes,
            "warmups": self.stats.warmups.counts(),
        }

