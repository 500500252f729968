"""A completion request, built once from what the editor asked: its prompt window, settings, context, key and gating.

The LSP layer decodes a message into an Asked (plain data: the document's state and how it was asked); the service
builds its Request once, and the prompt and key of every state (a request's, and the states prefetched for the
requests after an accept) in one place, RequestBuilder.prompt.
"""
from __future__ import annotations

import dataclasses
import itertools
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from tabd.predictor.prompt import pairs
from tabd.cache.state import DocState, Window, state_key
from tabd.daemon.context.chunk_store import EMPTY, Snapshot
from tabd.daemon.context.languages import COLON
from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime.loaded_model import Model
from tabd.daemon.runtime.memory import Ready
from tabd.daemon.runtime.workspace import Workspace
from tabd.predictor.text.postprocess import gate, wants_multiline
from tabd.predictor.types import GenSettings

# an invoked request (Alt+\\) where a block starts (after a signature's or a brace's line) may write a whole block
BLOCK_LINES = 16
BLOCK_TOKENS = 160

Confidence = Sequence[tuple[int, float]]  # (end of text, probability) per token


class Asked:
    """What the editor asked: a completion at a document's state (at its version), invoked (Alt+\\) or automatic;
    `arrived`: when the message reached the server (monotonic), which the answer's latency counts from.

    The state comes as its parts (`at`: cursor offset, text before, text after, as the LSP layer read them) or as a
    DocState; the DocState is made when something needs it, which an answer memory holds ready does not
    (Memory.ready: looked up by the parts)."""

    __slots__ = ("doc", "version", "offset", "before", "after", "invoked", "arrived", "_state")

    def __init__(self, doc: str, version: int, state: DocState | None = None, invoked: bool = False,
                 arrived: float | None = None, *, at: tuple[int, str, str] | None = None) -> None:
        self.doc, self.version, self.invoked = doc, version, invoked
        self.arrived = time.monotonic() if arrived is None else arrived
        if state is not None:
            self.offset, self.before, self.after = state.offset, state.before, state.after
        elif at is not None:
            self.offset, self.before, self.after = at
        else:
            raise ValueError("Asked needs a state or its parts (at=)")
        self._state = state

    @property
    def state(self) -> DocState:
        if self._state is None:
            self._state = DocState(self.offset, self.before, self.after)
        return self._state


@dataclass(frozen=True)
class Prompt:
    """What the model is asked for a state, and the key its answer is remembered under."""

    window: Window
    settings: GenSettings
    key: str


@dataclass(frozen=True)
class Request:
    """One completion request, carried from its build to its answer."""

    id: str
    doc: str
    version: int
    state: DocState
    window: Window
    settings: GenSettings
    key: str  # "" when no model could be loaded: there is no key to look up
    t0: float  # monotonic start, for the request's latency
    after_accept: bool  # the state is one an accept of a shown suggestion reaches
    invoked: bool = False  # the user asked (Alt+\): gating shows the best guess anyway
    min_confidence: float = 0.0  # gating for this request: 0 for an invoked one (the best guess anyway)
    context: Snapshot = EMPTY  # the workspace context before the prompt
    min_chars: int = 1  # shorter suggestions are not shown: 1 (all) for an invoked request

    def shown(self, text: str, confidence: Confidence) -> str:
        """What this request shows of a full suggestion: gated, and without the closers a following line holds."""
        return pairs.shown(shown_part(text, confidence, self.min_confidence, self.min_chars), self.state.after)


def shown_part(text: str, confidence: Confidence, min_confidence: float, min_chars: int) -> str:
    """The part of a suggestion the model is sure of (confidence gating), if it is long enough to be worth a Tab
    (a one-character suggestion saves no keystroke: Tab is one too)."""
    shown = gate(text, confidence, min_confidence)
    return shown if len(shown) >= min_chars else ""


class RequestBuilder:
    def __init__(self, config: Config, model: Model, workspace: Workspace, after_accept: Callable[[str], bool]) -> None:
        self.config = config
        self.model = model
        self.workspace = workspace
        self.after_accept = after_accept  # whether a key is one an accept reaches (the speculator's)
        self.ids = itertools.count(1)  # request ids (an answer from memory takes its own before its Request is built)
        self._openers: dict[str, tuple[str, ...]] = {}  # doc -> where its blocks open (context/languages.py)
        self._made: dict[tuple[bool, float, bool], tuple[GenSettings, str]] = {}  # (multiline, stop_below, block) ->
        for multiline in (False, True):  # every kind there is, made now: no request's path makes one
            for stop_below in (0.0, config.min_confidence):
                for block in (False, True):
                    self._settings(multiline, stop_below, block)

    def window_of(self, state: DocState) -> Window:
        return state.window(self.config.prefix_chars, self.config.suffix_chars)

    def opened(self, doc: str, openers: tuple[str, ...]) -> None:
        """The line endings after which a block opens in the document's language (a multi-line suggestion may start)."""
        self._openers[doc] = openers

    def closed(self, doc: str) -> None:
        self._openers.pop(doc, None)

    def settings_for(self, state: DocState, doc: str = "", invoked: bool = False) -> GenSettings:
        """The generation settings for a state: the one place they are decided, so a prefetch and the request it stands
        in for ask the same (an invoked request: the whole best guess, a block where one starts)."""
        return self._settings_and_tag(state, doc, invoked)[0]

    def _settings_and_tag(self, state: DocState, doc: str, invoked: bool) -> tuple[GenSettings, str]:
        line_before, line_after = state.current_line()
        lines = state.before.rsplit("\n", 2)
        previous = lines[-2] if len(lines) >= 2 else ""
        multiline = wants_multiline(line_before, line_after, previous, self._openers.get(doc, COLON))
        # what an automatic request shows ends where the model's joint probability falls under --min-confidence: a
        # remote engine decodes no further (an invoked request shows the best guess whole)
        stop_below = self.config.min_confidence if self.cuts_at_gate() and not invoked else 0.0
        return self._settings(multiline, stop_below, invoked and self.block_starts(state, doc))

    def _settings(self, multiline: bool, stop_below: float, block: bool) -> tuple[GenSettings, str]:
        """The settings of each kind of request, and their key tag, made once: a handful of kinds, one per request."""
        made = self._made.get((multiline, stop_below, block))
        if made is None:
            settings = GenSettings(self.config.max_new_tokens, multiline, lookup_min_p=self.config.lookup_min_p,
                                   known_names=self.config.known_names, stop_below=stop_below)
            if block:
                settings = dataclasses.replace(settings, multiline=True, max_lines=BLOCK_LINES,
                                               max_new_tokens=max(settings.max_new_tokens, BLOCK_TOKENS))
            made = self._made[(multiline, stop_below, block)] = (settings, settings.tag())
        return made

    def prompt(self, doc: str, state: DocState, context: Snapshot = EMPTY, invoked: bool = False,
               window: Window | None = None, model_id: str | None = None) -> Prompt:
        """The window, settings and cache key of a state under a context: the one place a key is built, for a request
        and for the prefetches that stand in for one (issue #42: two builders, two keys, a prefetch never served).
        `window`: the state's, and `model_id`: the loaded backend's, where the caller has them already."""
        window = self.window_of(state) if window is None else window
        settings, tag = self._settings_and_tag(state, doc, invoked)
        model_id = self.model.model_id if model_id is None else model_id
        return Prompt(window, settings, state_key(model_id, tag, window, context.digest))

    def cuts_at_gate(self) -> bool:
        """Whether the engine stops an automatic request's decode where the gate stops showing it (a remote one), so
        its answers are not the whole best guess an invoked request shows."""
        backend = self.model.backend
        return backend is not None and backend.stops_below

    def block_starts(self, state: DocState, doc: str = "") -> bool:
        """A block starts at the cursor: at the end of a line that opens one, or on a blank line after it."""
        line_before, line_after = state.current_line()
        if line_after.strip():
            return False
        openers = self._openers.get(doc, COLON)
        if line_before.strip():  # right after the opener (`def f():|`); `x: |` is an annotation being typed
            return line_before.endswith(openers)
        lines = state.before.rsplit("\n", 2)
        return len(lines) >= 2 and lines[-2].rstrip().endswith(openers)

    def shown(self, text: str, confidence: Confidence, after: str = "", invoked: bool = False) -> str:
        """What a request (automatic, or `invoked`) would show of a suggestion with `after` after the cursor
        (speculation plans from it): gated, and without the closers a following line holds."""
        min_confidence, min_chars = (0.0, 1) if invoked else (self.config.min_confidence, self.config.min_chars)
        return pairs.shown(shown_part(text, confidence, min_confidence, min_chars), after)

    def build(self, asked: Asked, ready: bool = True, model_id: str | None = None) -> Request:
        """The request for what the editor asked, built once (`ready`: a model is loaded, so there is a key;
        `model_id`: its backend's, which the service has at hand)."""
        doc, state, invoked = asked.doc, asked.state, asked.invoked
        window = self.window_of(state)
        context = self.workspace.snapshot(doc, state, window)
        prompt = self.prompt(doc, state, context, invoked, window, model_id)
        return self._request(str(next(self.ids)), asked, prompt.window, prompt.settings, prompt.key if ready else "",
                             context)

    def from_ready(self, asked: Asked, ready: Ready, request_id: str) -> Request:
        """The request for what the editor asked, answered from memory's ready index: its window, settings, context
        and key are what the index held for the state (made where this state's build gives that very key, and the
        workspace keeps that snapshot: service.ready_answer), so none is made again."""
        return self._request(request_id, asked, ready.window, ready.settings, ready.key, ready.context)

    def _request(self, request_id: str, asked: Asked, window: Window, settings: GenSettings, key: str,
                 context: Snapshot) -> Request:
        invoked = asked.invoked
        return Request(request_id, asked.doc, asked.version, asked.state, window, settings, key, asked.arrived,
                       self.after_accept(key), invoked, 0.0 if invoked else self.config.min_confidence, context,
                       1 if invoked else self.config.min_chars)

    def requested(self, req: Request) -> None:
        """A request was made at its state (the workspace's idle timer starts again): told once its answer is out,
        since it changes no key."""
        self.workspace.requested(req.doc, req.state)
