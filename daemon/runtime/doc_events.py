"""What the editor does to documents and to the suggestions shown, told to the completion service's collaborators.

An open gives the workspace its text; an edit may be an accept (speculator) and moves what memory keeps; a new state
cancels what can no longer be used; a close is a Signal each collaborator that keeps something per document hears
(compose subscribes them); a new workspace context prefills or prefetches again.
"""
from __future__ import annotations

import time

from tabd.cache.state import DocState, Window
from tabd.daemon.context.chunk_store import Snapshot, TextSource
from tabd.daemon.context.languages import block_openers, comment_of
from tabd.daemon.runtime.activity import Listeners
from tabd.daemon.runtime.computations import Computations
from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime.debounce import Debounce, Waits
from tabd.daemon.runtime.events import Signal
from tabd.daemon.runtime.loaded_model import Model
from tabd.daemon.runtime.memory import Memory
from tabd.daemon.runtime.request import RequestBuilder
from tabd.daemon.runtime.speculator import Speculator
from tabd.daemon.runtime.warmer import Warmer
from tabd.daemon.runtime.workspace import Workspace


class DocumentEvents:
    def __init__(self, config: Config, model: Model, requests: RequestBuilder, memory: Memory,
                 computations: Computations, speculator: Speculator, warmer: Warmer, debounce: Debounce, waits: Waits,
                 workspace: Workspace, activity: Listeners, closed: Signal[[str]],
                 context_changed: Signal[[str, DocState, Window, Snapshot]]) -> None:
        self.config = config
        self.model = model
        self.requests = requests
        self.memory = memory
        self.computations = computations
        self.speculator = speculator
        self.warmer = warmer
        self.debounce = debounce
        self.waits = waits
        self.workspace = workspace
        self.activity = activity
        self.closed = closed  # a document is gone: every collaborator that keeps something of it hears it
        context_changed.subscribe(self._context_changed)

    def opened(self, doc: str, path: str, text: str, language: str = "") -> None:
        """A document the service may read (`language`: the editor's languageId; "" or unknown: by the path)."""
        self.requests.opened(doc, block_openers(language, path))
        self.memory.forget(doc)  # what was ready for it was keyed under its old language's settings
        self.workspace.opened(doc, path, text, comment_of(language, path), language)

    def edited(self, doc: str, offset: int, removed: int, inserted: str) -> None:
        """One didChange edit (offset in the text before it, `removed` characters replaced by `inserted`): an accept
        when it inserts the suggestion shown there; the suggestion shown stays across an edit elsewhere."""
        self.speculator.edited(doc, offset, removed, inserted)
        self.memory.rebase.edited(doc, offset, removed, inserted)

    def changed(self, doc: str, state: DocState | None, text: TextSource | None = None,
                offset: int | None = None) -> None:
        """The document's new state (None: unknown, nothing of it is of use): cancel what it can no longer use;
        `text` (or how to read it) and the cursor `offset` update its workspace context."""
        now = self.requests.window_of(state) if state is not None else None
        if now is not None:
            self.debounce.edited(doc, time.monotonic())
        self.waits.end(doc, "closed" if now is None else "stale", unless_window=now)  # a newer keystroke: no wait goes on
        self.computations.cancel_unreachable(doc, now)
        if text is not None:
            self.workspace.changed(doc, text, offset, state)

    def focus(self, doc: str, state: DocState) -> Snapshot:
        """The user moved here (tabd/focus): pick the context now and warm the prompt up; the requests of other
        documents that a newer request pre-empted stop instead of resuming."""
        self.computations.elsewhere(doc)
        return self.workspace.focus(doc, state)

    def context_of(self, doc: str) -> Snapshot:
        """The workspace context a document's prompts start with now (tabd/context)."""
        return self.workspace.current(doc)

    def accept(self, answer_id: str, chars: int | None = None, partial: bool = False,
               alternative: str | None = None) -> bool:
        """`tabd.accept`: whether the suggestion was one shown (counted once, with its edit if that came first);
        `alternative`: the text of another of its items, taken instead."""
        return self.speculator.accept(answer_id, chars, partial, alternative)

    def known(self, answer_id: str) -> bool:
        """Whether the answer id is one shown: what accept() says of it, without taking it."""
        return answer_id in self.speculator.accepts.by_id

    def dismiss(self, answer_id: str) -> bool:
        self.activity.shown(False)
        return self.speculator.dismiss(answer_id)

    def prefetch_at(self, doc: str, state: DocState, now: DocState) -> None:
        """The completion at `state`, which an accept elsewhere than at the cursor reaches (a next edit applied),
        computed in the background; `now`: the user's state."""
        if self.model.loaded and self.model.backend is not None and self.memory.enabled:
            self.speculator.prefetch_state(doc, state, self.requests.window_of(now))

    def _context_changed(self, doc: str, state: DocState, window: Window, context: Snapshot) -> None:
        """A new context for `doc`, or a move there: prefill its prompt in the background (foreground pre-empts it),
        or, with its suggestion on screen, prefetch the suggestion's after-accept states under the new context."""
        if self.model.backend is None:
            return
        self.computations.cancel_prefetches(doc, unless_digest=context.digest)
        if not self.speculator.context_changed(doc, window, state, context) and self.config.warmup:
            self.warmer.submit(doc, window, self.requests.settings_for(state, doc), context)
